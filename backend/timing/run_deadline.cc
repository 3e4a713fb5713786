#include "backend/timing/run_deadline.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <mutex>

namespace looptool {
namespace {

// A real-time signal of our own (glibc keeps the first few below SIGRTMIN for itself).
int DeadlineSignal() { return SIGRTMIN + 3; }

// The jump target of this thread's RunWithin while its `fn` runs, else null (a signal that
// arrives after `fn` returned, or on a thread not in RunWithin, does nothing).
thread_local sigjmp_buf* volatile t_jump = nullptr;

void OnDeadline(int) {
  sigjmp_buf* jump = t_jump;
  if (jump != nullptr) {
    t_jump = nullptr;
    siglongjmp(*jump, 1);
  }
}

bool InstallHandler() {
  struct sigaction action = {};
  action.sa_handler = OnDeadline;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  return sigaction(DeadlineSignal(), &action, nullptr) == 0;
}

}  // namespace

bool RunWithin(double seconds, void (*fn)(void*), void* arg) {
  static const bool installed = InstallHandler();
  timer_t timer;
  struct sigevent event = {};
  event.sigev_notify = SIGEV_THREAD_ID;
  event.sigev_signo = DeadlineSignal();
  event._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (!installed || !(seconds > 0) || timer_create(CLOCK_MONOTONIC, &event, &timer) != 0) {
    fn(arg);
    return true;
  }
  struct itimerspec expiry = {};
  const double whole = std::floor(seconds);
  expiry.it_value.tv_sec = static_cast<time_t>(whole);
  expiry.it_value.tv_nsec = static_cast<long>((seconds - whole) * 1e9);
  if (expiry.it_value.tv_sec == 0 && expiry.it_value.tv_nsec == 0) expiry.it_value.tv_nsec = 1;
  sigjmp_buf jump;
  volatile bool returned = false;
  if (sigsetjmp(jump, /*savemask=*/1) == 0) {
    t_jump = &jump;
    timer_settime(timer, 0, &expiry, nullptr);
    fn(arg);
    t_jump = nullptr;
    returned = true;
  }
  t_jump = nullptr;
  timer_delete(timer);  // disarms it; a signal already sent finds no jump target
  return returned;
}

}  // namespace looptool
