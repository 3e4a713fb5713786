// RunWithin abandons a call still running at its deadline, lets one that ends return, leaves no
// timer or signal behind, and signals the thread that armed the timer alone.
#include "backend/timing/run_deadline.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace looptool {
namespace {

// Spins until *flag (an std::atomic<bool>) is set.
void SpinUntil(void* flag) {
  while (!static_cast<std::atomic<bool>*>(flag)->load()) {
  }
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
  std::atomic<bool> never{false};
  for (int i = 0; i < 500; ++i) ASSERT_FALSE(RunWithin(1e-4, SpinUntil, &never)) << i;
  // No timer left armed and no signal left pending jumps into the calls that follow.
  int n = 0;
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(RunWithin(60, Count, &n)) << i;
  EXPECT_EQ(n, 500);
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
  other.join();
  EXPECT_FALSE(other_returned);
}

}  // namespace
}  // namespace looptool
