#include "backend/timing/run_deadline.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace looptool {
namespace {

// A real-time signal of our own (glibc keeps the first few below SIGRTMIN for itself).
int DeadlineSignal() { return SIGRTMIN + 3; }

// This thread's RunWithin while its `fn` runs: where to jump, its timer, and the thread CPU time
// `fn` may use. `jump` is null otherwise (a signal that arrives then does nothing).
struct Armed {
  sigjmp_buf* volatile jump = nullptr;
  timer_t timer;
  double cpu_until = 0;
};
thread_local Armed t_armed;

double ThreadCpuSeconds() {
  struct timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

struct itimerspec Expiry(double seconds) {
  // At least 1 us, at most a day: what a kernel's run may be given either way.
  seconds = std::clamp(seconds, 1e-6, 86400.0);
  struct itimerspec e = {};
  const double whole = std::floor(seconds);
  e.it_value.tv_sec = static_cast<time_t>(whole);
  e.it_value.tv_nsec = static_cast<long>((seconds - whole) * 1e9);
  return e;
}

// The timer fired (wall clock): jump out of `fn` once the thread has used its CPU time, else
// (it was descheduled: its run is not that slow) wait for the rest. clock_gettime,
// timer_settime and siglongjmp are async-signal-safe.
void OnDeadline(int) {
  sigjmp_buf* jump = t_armed.jump;
  if (jump == nullptr) return;
  const double left = t_armed.cpu_until - ThreadCpuSeconds();
  if (left > 0) {
    const struct itimerspec rest = Expiry(left);
    timer_settime(t_armed.timer, 0, &rest, nullptr);
    return;
  }
  t_armed.jump = nullptr;
  siglongjmp(*jump, 1);
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
  struct sigevent event = {};
  event.sigev_notify = SIGEV_THREAD_ID;
  event.sigev_signo = DeadlineSignal();
  event._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
  timer_t timer;
  if (!installed || !(seconds > 0) || timer_create(CLOCK_MONOTONIC, &event, &timer) != 0) {
    fn(arg);
    return true;
  }
  // The signal unblocked while `fn` runs (a caller that blocks it would never see the jump, and
  // its expiries would queue), the caller's mask back after.
  sigset_t deadline, before;
  sigemptyset(&deadline);
  sigaddset(&deadline, DeadlineSignal());
  pthread_sigmask(SIG_UNBLOCK, &deadline, &before);
  const struct itimerspec expiry = Expiry(seconds);
  sigjmp_buf jump;
  volatile bool returned = false;
  if (sigsetjmp(jump, /*savemask=*/1) == 0) {
    t_armed.timer = timer;
    t_armed.cpu_until = ThreadCpuSeconds() + seconds;
    t_armed.jump = &jump;
    timer_settime(timer, 0, &expiry, nullptr);
    fn(arg);
    t_armed.jump = nullptr;
    returned = true;
  }
  t_armed.jump = nullptr;
  timer_delete(timer);  // disarms it; a signal already sent finds no jump target
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  return returned;
}

}  // namespace looptool
