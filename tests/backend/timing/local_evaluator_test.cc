// The local evaluator compiles and verifies a schedule once, caches its measurement by
// (program, schedule) so the cursor never re-times it, and reports sane numbers. No performance
// is asserted here (that is bench/'s job).
#include "backend/timing/local_evaluator.h"

#include <time.h>

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

TEST(LocalEvaluator, ProgramCacheIsBoundedInBytes) {
  LocalEvaluator::Options o = Fast();
  o.max_cached_program_bytes = 10 << 20;
  LocalEvaluator ev(o);
  // Each 512x512 transpose keeps 4 MiB: inputs and reference outputs, and the kernel's buffers.
  for (int n : {512, 520, 528, 536}) {
    const std::string program =
        "B[n,m] = A[m,n]; m=512 n=" + std::to_string(n);
    ASSERT_TRUE(ev.Measure(InitialTree(program)).ok());
    EXPECT_LE(ev.cached_program_bytes(), o.max_cached_program_bytes) << n;
  }
  EXPECT_GE(ev.cached_program_bytes(), 2 * 4 * 512 * 512 * 4);  // the last two stay
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

TEST(LocalEvaluator, PeakIsMeasuredOnceAndPlausible) {
  LocalEvaluator ev(Fast());
  const double p = ev.PeakGflops();
  // A failed measurement reads exactly 1.0 (the stand-in); a real one is at least one FMA of the
  // ISA's width every 2 ns (16 GFLOPS for AVX-512) and far below 1000 GFLOPS on one core.
  EXPECT_GT(p, 1.0);
  EXPECT_GE(p, Traits(Fast().isa).vector_width);
  EXPECT_LT(p, 1000.0);
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

TEST(MeasureRuns, GivesUpAfterOneRunSlowerThanTheBound) {
  int calls = 0;
  TimingOptions o;
  o.warmup_seconds = 0;
  o.give_up_above_seconds = 1e-4;
  const auto sleep_1ms = [&] {
    ++calls;
    timespec ts{0, 1000000};
    nanosleep(&ts, nullptr);
  };
  const TimingResult r = MeasureRuns(sleep_1ms, o);
  EXPECT_EQ(r.runs, 1);
  EXPECT_EQ(calls, 2);  // warm-up and one timed run
  EXPECT_GE(r.min_seconds, 1e-3);
  o.give_up_above_seconds = 1.0;  // not slower than the bound: the usual minimum of runs
  const TimingResult full = MeasureRuns(sleep_1ms, o);
  EXPECT_GE(full.runs, o.min_runs);  // a 10 ms budget of (at least) 1 ms runs
  EXPECT_LE(full.runs, 10);
}

TEST(LocalEvaluator, FarSlowerSchedulesOfAProgramAreTimedOnce) {
  // With a tiny factor every schedule after the program's first is "far slower" than the best.
  LocalEvaluator::Options o = Fast();
  o.give_up_factor = 1e-9;
  LocalEvaluator ev(o);
  const LoopTree t = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=32 n=48 k=16");
  ASSERT_TRUE(ev.Measure(t).ok());
  EXPECT_EQ(ev.stats().given_up, 0);  // nothing known yet: timed as usual
  ASSERT_TRUE(ev.Measure(WithActions(t, "split_4")).ok());
  EXPECT_EQ(ev.stats().given_up, 1);
  // Another program has its own best.
  ASSERT_TRUE(ev.Measure(InitialTree("s[m] += A[m,n]; m=8 n=8")).ok());
  EXPECT_EQ(ev.stats().given_up, 1);
  // Factor 0 never gives up.
  o.give_up_factor = 0;
  LocalEvaluator never(o);
  ASSERT_TRUE(never.Measure(t).ok());
  ASSERT_TRUE(never.Measure(WithActions(t, "split_4")).ok());
  EXPECT_EQ(never.stats().given_up, 0);
}

}  // namespace
}  // namespace looptool
