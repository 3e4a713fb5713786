// The local evaluator compiles and verifies a schedule once, caches its measurement by
// (program, schedule) so the cursor never re-times it, and reports sane numbers. No performance
// is asserted here (that is bench/'s job).
#include "backend/timing/local_evaluator.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/codegen/jit_check.h"

namespace looptool {
namespace {

using testing::InitialTree;
using testing::WithActions;

LocalEvaluator::Options Fast() {
  LocalEvaluator::Options o;
  o.isa = DetectIsa();
  o.timing.budget_seconds = 0.001;
  o.timing.warmup_seconds = 0.0001;
  o.peak_budget_seconds = 0.005;
  return o;
}

TEST(LocalEvaluator, MeasuresOnceAndCachesBySchedule) {
  LocalEvaluator ev(Fast());
  const LoopTree t = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=32 n=48 k=16");
  auto a = ev.Measure(t);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_GT(a->seconds, 0);
  EXPECT_DOUBLE_EQ(a->gflops, 2.0 * 32 * 48 * 16 / a->seconds * 1e-9);
  // A cursor move is the same schedule: served from the cache, the very same number.
  auto b = ev.Measure(WithActions(t, "down"));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->seconds, a->seconds);
  EXPECT_EQ(ev.stats().measured, 1);
  EXPECT_EQ(ev.stats().cache_hits, 1);
  // A new schedule is measured.
  ASSERT_TRUE(ev.Measure(WithActions(t, "split_4")).ok());
  EXPECT_EQ(ev.stats().measured, 2);
  EXPECT_GT(ev.stats().compile_seconds, 0);
}

TEST(LocalEvaluator, SameProgramTextDifferentSizesAreDifferentPrograms) {
  LocalEvaluator ev(Fast());
  ASSERT_TRUE(ev.Measure(InitialTree("s[m] += A[m,n]; m=8 n=8")).ok());
  ASSERT_TRUE(ev.Measure(InitialTree("s[m] += A[m,n]; m=8 n=9")).ok());
  EXPECT_EQ(ev.stats().measured, 2);
}

TEST(LocalEvaluator, PeakIsMeasuredOnceAndPositive) {
  LocalEvaluator ev(Fast());
  const double p = ev.PeakGflops();
  EXPECT_GT(p, 0);
  EXPECT_EQ(ev.PeakGflops(), p);
}

TEST(MeasureRuns, HonoursMinimumRunsAndReportsMinBelowMedian) {
  int calls = 0;
  TimingOptions o;
  o.budget_seconds = 0;
  o.warmup_seconds = 0;
  o.min_runs = 7;
  const TimingResult r = MeasureRuns([&] { ++calls; }, o);
  EXPECT_EQ(r.runs, 7);
  EXPECT_EQ(calls, 8);  // one warm-up run, then seven timed
  EXPECT_LE(r.min_seconds, r.median_seconds);
}

}  // namespace
}  // namespace looptool
