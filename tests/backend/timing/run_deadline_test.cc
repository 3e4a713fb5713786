// RunWithin abandons a call still running at its deadline, lets one that ends return (and one
// that spends its time descheduled), leaves no timer or signal behind, signals the thread that
// armed the timer alone, and works whatever the caller's signal mask.
#include "backend/timing/run_deadline.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace looptool {
namespace {

// Spins until *flag (an std::atomic<bool>) is set, or for 30 s at most: a RunWithin that does
// not abandon it fails the test instead of hanging it.
void SpinUntil(void* flag) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!static_cast<std::atomic<bool>*>(flag)->load() &&
         std::chrono::steady_clock::now() < give_up) {
  }
}

// The POSIX timers this process holds (/proc/self/timers lists one "ID:" line each).
int Timers() {
  std::ifstream in("/proc/self/timers");
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.rfind("ID:", 0) == 0;
  return n;
}

void Count(void* n) { ++*static_cast<int*>(n); }

TEST(RunWithin, AbandonsACallStillRunningAtItsDeadline) {
  std::atomic<bool> never{false};
  EXPECT_FALSE(RunWithin(0.01, SpinUntil, &never));
}

TEST(RunWithin, ACallThatEndsReturns) {
  int n = 0;
  EXPECT_TRUE(RunWithin(60, Count, &n));
  EXPECT_EQ(n, 1);
}

TEST(RunWithin, ManyAbandonedCallsLeaveNothingBehind) {
  const int timers = Timers();
  std::atomic<bool> never{false};
  for (int i = 0; i < 500; ++i) ASSERT_FALSE(RunWithin(1e-4, SpinUntil, &never)) << i;
  EXPECT_EQ(Timers(), timers);
  // No timer left armed and no signal left pending jumps into the calls that follow.
  int n = 0;
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(RunWithin(60, Count, &n)) << i;
  EXPECT_EQ(n, 500);
  EXPECT_EQ(Timers(), timers);
}

TEST(RunWithin, SignalsOnlyTheThreadWhoseCallRanTooLong) {
  std::atomic<bool> never{false}, other_done{false};
  bool other_returned = true;
  std::thread other([&] {
    other_returned = RunWithin(0.02, SpinUntil, &never);
    other_done = true;
  });
  // This thread's call spins until the other's was abandoned: its own deadline is far off.
  EXPECT_TRUE(RunWithin(60, SpinUntil, &other_done));
  never = true;  // where the other's was not abandoned, it ends now
  other.join();
  EXPECT_FALSE(other_returned);
}

TEST(RunWithin, TimeTheThreadSpendsDescheduledDoesNotCount) {
  // A call that sleeps (using no CPU) past its deadline of wall-clock time returns.
  const auto nap = [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(30)); };
  EXPECT_TRUE(RunWithin(0.005, nap, nullptr));
}

TEST(RunWithin, ABlockedSignalIsUnblockedWhileTheCallRunsAndBlockedAgainAfter) {
  sigset_t deadline, before, after;
  sigemptyset(&deadline);
  sigaddset(&deadline, SIGRTMIN + 3);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &deadline, &before), 0);
  std::atomic<bool> never{false};
  EXPECT_FALSE(RunWithin(0.01, SpinUntil, &never));
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &before, &after), 0);
  EXPECT_EQ(sigismember(&after, SIGRTMIN + 3), 1);
}

}  // namespace
}  // namespace looptool
