// The local evaluator compiles and verifies a schedule once, caches its measurement by
// (program, schedule) so the cursor never re-times it, and reports sane numbers. No performance
// is asserted here (that is bench/'s job).
#include "backend/timing/local_timer.h"

#include <time.h>

#include <cstdint>

#include "backend/interp/interpreter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/codegen/jit_check.h"

namespace looptool {
namespace {

using testing::InitialTree;
using testing::WithActions;

LocalTimer::Options Fast() {
  LocalTimer::Options o;
  o.isa = DetectIsa();
  o.timing.budget_seconds = 0.001;
  o.timing.warmup_seconds = 0.0001;
  o.peak_budget_seconds = 0.005;
  return o;
}

TEST(LocalTimer, ProgramCacheIsBoundedInBytes) {
  LocalTimer::Options o = Fast();
  o.max_cached_program_bytes = 10 << 20;
  LocalTimer ev(o);
  // Each 512x512 transpose keeps 4 MiB: inputs and reference outputs, and the kernel's buffers.
  for (int n : {512, 520, 528, 536}) {
    const std::string program =
        "B[n,m] = A[m,n]; m=512 n=" + std::to_string(n);
    ASSERT_TRUE(ev.Measure(InitialTree(program)).ok());
    EXPECT_LE(ev.cached_program_bytes(), o.max_cached_program_bytes) << n;
  }
  EXPECT_GE(ev.cached_program_bytes(), 2 * 4 * 512 * 512 * 4);  // the last two stay
}

TEST(LocalTimer, PrepareMakesTheReferenceTheFirstMeasurementWouldHaveMade) {
  LocalTimer ev(Fast());
  const LoopTree t = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=32 n=48 k=16");
  EXPECT_GT(ev.Prepare(t), 0);
  EXPECT_EQ(ev.stats().references, 1);
  EXPECT_EQ(ev.stats().measured, 0);  // nothing compiled or timed
  EXPECT_EQ(ev.Prepare(WithActions(t, "split_4")), 0);  // same program: cached
  ASSERT_TRUE(ev.Measure(WithActions(t, "split_4")).ok());
  EXPECT_EQ(ev.stats().references, 1);  // the measurement used the prepared one
  EXPECT_EQ(ev.stats().measured, 1);
  ASSERT_TRUE(ev.Measure(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=32 n=48 k=8")).ok());
  EXPECT_EQ(ev.stats().references, 2);
}

TEST(LocalTimer, MeasuresOnceAndCachesBySchedule) {
  LocalTimer ev(Fast());
  const LoopTree t = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=32 n=48 k=16");
  auto a = ev.Measure(t);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_GT(a->seconds, 0);
  EXPECT_DOUBLE_EQ(a->gflops, 2.0 * 32 * 48 * 16 / a->seconds * 1e-9);
  // Compiled, verified and timed: the whole of its worker's time, but the program's reference.
  EXPECT_GT(a->work_seconds, 0);
  EXPECT_EQ(ev.stats().references, 1);
  EXPECT_NEAR(a->work_seconds,
              ev.stats().compile_seconds + ev.stats().verify_seconds + ev.stats().timing_seconds,
              1e-9);
  // A cursor move is the same schedule: served from the cache, the very same number.
  auto b = ev.Measure(WithActions(t, "down"));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->seconds, a->seconds);
  EXPECT_EQ(b->work_seconds, a->work_seconds);  // what the measurement took when it was made
  EXPECT_EQ(ev.stats().measured, 1);
  EXPECT_EQ(ev.stats().cache_hits, 1);
  // A new schedule is measured.
  ASSERT_TRUE(ev.Measure(WithActions(t, "split_4")).ok());
  EXPECT_EQ(ev.stats().measured, 2);
  EXPECT_GT(ev.stats().compile_seconds, 0);
}

TEST(LocalTimer, AbandonsAVerificationRunFarSlowerThanTheBestAndRemeasureVerifiesIt) {
  LocalTimer::Options o = Fast();
  // Once a best is known, every verification run is abandoned at once: its limit, 1e-6 times the
  // best's, is a fraction of a microsecond of CPU time, the timer's least wait 1 us (the
  // kernels below run for a millisecond or more).
  o.abandon_factor = 1e-6;
  o.untimed_min_seconds = 0;
  LocalTimer ev(o);
  const LoopTree t = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=256 n=256 k=256");
  // No best yet: verified, timed, cached.
  auto first = ev.Measure(t);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_NE(first->timing, Measurement::Timing::kAbandoned);
  EXPECT_EQ(ev.stats().abandoned, 0);
  // A new schedule: abandoned, its seconds the limit (the best's times abandon_factor) and its
  // GFLOPS the bound that gives, and not cached.
  const LoopTree split = WithActions(t, "split_4");
  for (int i = 1; i <= 2; ++i) {
    auto m = ev.Measure(split);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->timing, Measurement::Timing::kAbandoned);
    EXPECT_EQ(m->timed_runs, 0);
    EXPECT_DOUBLE_EQ(m->seconds, 1e-6 * first->seconds);
    EXPECT_DOUBLE_EQ(m->gflops, 2.0 * 256 * 256 * 256 / m->seconds * 1e-9);
    EXPECT_EQ(ev.stats().abandoned, i);
    EXPECT_EQ(ev.stats().untimed, i);
    EXPECT_EQ(ev.stats().measured, 1 + i);
    EXPECT_EQ(ev.stats().cache_hits, 0);
  }
  // RemeasureFor verifies it (its buffers, garbage after the abandoned runs, made anew) and
  // times it; the verified measurement is cached.
  auto again = ev.RemeasureFor(split, 0);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->timing, Measurement::Timing::kFull);
  EXPECT_GT(again->timed_runs, 0);
  EXPECT_EQ(ev.stats().abandoned, 2);
  EXPECT_EQ(ev.stats().measured, 4);
  auto cached = ev.Measure(split);
  ASSERT_TRUE(cached.ok());
  EXPECT_NE(cached->timing, Measurement::Timing::kAbandoned);
  EXPECT_EQ(ev.stats().cache_hits, 1);
}

TEST(LocalTimer, RemeasureTimesAgainWithoutTouchingTheCache) {
  LocalTimer::Options o = Fast();
  o.timing.min_runs = 7;
  LocalTimer ev(o);
  const LoopTree t = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=32 n=48 k=16");
  // A schedule never measured is measured (compiled, verified, cached) first.
  auto again = ev.RemeasureFor(t, 0);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ev.stats().measured, 1);
  auto cached = ev.Measure(t);
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(ev.stats().cache_hits, 1);
  EXPECT_EQ(ev.stats().remeasured, 1);
  // Re-timing runs the kernel again (timed runs, counted), the cached measurement unchanged.
  // (A tiny kernel's minimum may well repeat to the nanosecond, so the values prove nothing.)
  for (int i = 0; i < 3; ++i) {
    const double timed_before = ev.stats().timing_seconds;
    auto r = ev.RemeasureFor(t, 0);
    ASSERT_TRUE(r.ok());
    EXPECT_GT(r->seconds, 0);
    EXPECT_DOUBLE_EQ(r->gflops, 2.0 * 32 * 48 * 16 / r->seconds * 1e-9);
    // The peak measured beside it, on this core: near the one measured for the timer (within
    // 4x either way: tests share the CI's two cores, and a peak round can lose its core).
    EXPECT_GT(r->peak_gflops, 0.25 * *ev.PeakGflops());
    EXPECT_LT(r->peak_gflops, 4.0 * *ev.PeakGflops());
    EXPECT_GT(ev.stats().timing_seconds, timed_before);
  }
  EXPECT_EQ(ev.stats().remeasured, 4);
  // Re-timings back to back share one peak (one per second of them: a loaded machine may take
  // a second over these four, so not exactly one).
  EXPECT_GE(ev.stats().beside_peaks, 1);
  EXPECT_LT(ev.stats().beside_peaks, 4);
  EXPECT_EQ(ev.stats().measured, 1);
  EXPECT_EQ(ev.Measure(t)->seconds, cached->seconds);
  EXPECT_EQ(ev.Measure(t)->peak_gflops, 0);  // measurements carry no peak
}

TEST(LocalTimer, SameProgramTextDifferentSizesAreDifferentPrograms) {
  LocalTimer ev(Fast());
  ASSERT_TRUE(ev.Measure(InitialTree("s[m] += A[m,n]; m=8 n=8")).ok());
  ASSERT_TRUE(ev.Measure(InitialTree("s[m] += A[m,n]; m=8 n=9")).ok());
  EXPECT_EQ(ev.stats().measured, 2);
}

TEST(LocalTimer, PeakIsMeasuredOnceAndPlausible) {
  LocalTimer ev(Fast());
  const absl::StatusOr<double> peak = ev.PeakGflops();
  ASSERT_TRUE(peak.ok()) << peak.status();
  const double p = *peak;
  // At least one FMA of the ISA's width every 2 ns (16 GFLOPS for AVX-512) and far below 1000
  // GFLOPS on one core.
  EXPECT_GE(p, Traits(Fast().isa).vector_width);
  EXPECT_LT(p, 1000.0);
  EXPECT_EQ(*ev.PeakGflops(), p);
}

TEST(LocalTimer, MemoryIsMeasuredOnce) {
  LocalTimer::Options o = Fast();
  o.bandwidth_budget_seconds = 0.02;
  LocalTimer ev(o);
  const auto memory = ev.Memory();
  ASSERT_TRUE(memory.ok()) << memory.status();
  ASSERT_GE(memory->levels.size(), 2u);
  EXPECT_EQ(memory->levels.front().name, "L1");
  EXPECT_EQ(memory->levels.back().name, "DRAM");
  EXPECT_EQ(memory->levels.back().bytes, 0);
  ASSERT_FALSE(memory->bandwidth.empty());
  for (const BandwidthPoint& p : memory->bandwidth) EXPECT_GT(p.gbytes_per_second, 0) << p.bytes;
  const auto again = ev.Memory();
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < memory->bandwidth.size(); ++i) {
    EXPECT_EQ(again->bandwidth[i].gbytes_per_second, memory->bandwidth[i].gbytes_per_second);
  }
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

TEST(MeasureRuns, AdaptiveStopsLongRunsOnceSettledForTheLongSeconds) {
  TimingOptions o;
  o.budget_seconds = 1.0;  // about 1,000 runs of 1 ms if nothing stopped them earlier
  o.warmup_seconds = 0;
  o.min_runs = 2;
  o.stable_runs = 1000;  // the short-run rule never stops it
  o.stable_seconds = 0;
  o.stable_long_seconds = 3e-3;
  o.stable_fraction = 0.5;  // as in AdaptiveStopsOnceTheMinimumSettles
  const auto sleep_1ms = [] {
    timespec ts{0, 1000000};
    nanosleep(&ts, nullptr);
  };
  const TimingResult r = MeasureRuns(sleep_1ms, o);
  EXPECT_EQ(r.end, TimingResult::End::kStable);
  EXPECT_GE(r.runs, 3);   // the first, then at least 2 without improvement
  EXPECT_LE(r.runs, 12);  // 3 ms of 1 ms runs settled, a few improvements on a slow first
  // Without the long rule the budget ends it.
  o.stable_long_seconds = 0;
  o.budget_seconds = 0.03;
  EXPECT_EQ(MeasureRuns(sleep_1ms, o).end, TimingResult::End::kBudget);
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

TEST(LocalTimer, FarSlowerSchedulesOfAProgramAreTimedOnceOrNotAtAll) {
  // With a tiny factor every schedule after the program's first is "far slower" than the best.
  LocalTimer::Options o = Fast();
  o.give_up_factor = 1e-9;
  o.untimed_min_seconds = 1e30;  // first: never judged by the verification run alone
  o.confirm_margin = -1;  // a run faster than the best is not timed again: the paths stay apart
  o.abandon_factor = 0;   // runs are never abandoned here (AbandonsAVerificationRun... is that)
  LocalTimer ev(o);
  const LoopTree t = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=32 n=48 k=16");
  ASSERT_TRUE(ev.Measure(t).ok());
  EXPECT_EQ(ev.stats().given_up, 0);  // nothing known yet: timed as usual
  const absl::StatusOr<Measurement> once = ev.Measure(WithActions(t, "split_4"));
  ASSERT_TRUE(once.ok());
  EXPECT_EQ(ev.stats().given_up, 1);  // timed once, after warm-up
  EXPECT_EQ(ev.stats().untimed, 0);
  EXPECT_EQ(once->timing, Measurement::Timing::kOnce);
  EXPECT_EQ(once->timed_runs, 1);
  // A cache hit says how the schedule was timed when it was.
  EXPECT_EQ(ev.Measure(WithActions(t, "split_4"))->timing, Measurement::Timing::kOnce);
  // Another program has its own best.
  ASSERT_TRUE(ev.Measure(InitialTree("s[m] += A[m,n]; m=8 n=8")).ok());
  EXPECT_EQ(ev.stats().given_up, 1);

  // A verification run at least untimed_min_seconds long and far slower than the best: that
  // run's time is the measurement.
  o.untimed_min_seconds = 0;
  LocalTimer untimed(o);
  ASSERT_TRUE(untimed.Measure(t).ok());
  const absl::StatusOr<Measurement> slow = untimed.Measure(WithActions(t, "split_4"));
  ASSERT_TRUE(slow.ok());
  EXPECT_EQ(untimed.stats().given_up, 1);
  EXPECT_EQ(untimed.stats().untimed, 1);
  EXPECT_EQ(slow->timing, Measurement::Timing::kUntimed);
  EXPECT_EQ(slow->timed_runs, 0);
  EXPECT_GT(slow->seconds, 0);
  EXPECT_DOUBLE_EQ(slow->gflops, 2.0 * 32 * 48 * 16 / slow->seconds * 1e-9);
  // Shorter than untimed_min_seconds (the default 1 ms; this kernel runs in microseconds): timed
  // once instead, whatever the factor.
  o.untimed_min_seconds = 1e-3;
  LocalTimer floor(o);
  ASSERT_TRUE(floor.Measure(t).ok());
  ASSERT_TRUE(floor.Measure(WithActions(t, "split_4")).ok());
  EXPECT_EQ(floor.stats().given_up, 1);
  EXPECT_EQ(floor.stats().untimed, 0);

  // Factor 0 never gives up.
  o.give_up_factor = 0;
  o.untimed_min_seconds = 0;
  LocalTimer never(o);
  ASSERT_TRUE(never.Measure(t).ok());
  const absl::StatusOr<Measurement> timed = never.Measure(WithActions(t, "split_4"));
  ASSERT_TRUE(timed.ok());
  EXPECT_EQ(never.stats().given_up, 0);
  EXPECT_GE(timed->timed_runs, o.timing.min_runs);
}


void Sleep100us() {
  timespec ts{0, 100000};
  nanosleep(&ts, nullptr);
}

void Sleep4ms() {
  timespec ts{0, 4000000};
  nanosleep(&ts, nullptr);
}

TEST(MeasureRuns, AdaptiveTimesAKernelOfMillisecondsThreeTimes) {
  TimingOptions o = AdaptiveTiming(/*budget_seconds=*/1.0);
  o.warmup_seconds = 0;
  o.stable_fraction = 0.5;  // only a run twice as fast improves: sleeps settle at once
  const TimingResult r = MeasureRuns(Sleep4ms, o);
  EXPECT_EQ(r.end, TimingResult::End::kStable);
  EXPECT_EQ(r.runs, 3);  // the first, then 2 runs (8 ms, past 3 ms) without improvement
}

TEST(MeasureRuns, AdaptiveJudgesLongRunsSlowerSoonerThanShortOnes) {
  TimingOptions o = AdaptiveTiming(/*budget_seconds=*/1.0);
  o.warmup_seconds = 0;
  o.clearly_slower_above_seconds = 1e-5;  // every run is slower
  const TimingResult long_runs = MeasureRuns(Sleep4ms, o);
  EXPECT_EQ(long_runs.end, TimingResult::End::kSlower);
  EXPECT_EQ(long_runs.runs, o.min_runs);  // 2 runs: 8 ms, past stable_long_seconds
  const TimingResult short_runs = MeasureRuns(Sleep100us, o);
  EXPECT_EQ(short_runs.end, TimingResult::End::kSlower);
  EXPECT_EQ(short_runs.runs, o.slower_min_runs);  // 5 runs of ~0.1 ms: under 3 ms
}

TEST(MeasureRuns, WithoutWarmUpKeepsTheRunsAndDropsTheWarmUp) {
  TimingOptions fixed;
  fixed.min_runs = 4;
  fixed.budget_seconds = 0;
  const TimingOptions cold = WithoutWarmUp(fixed);
  EXPECT_EQ(cold.min_runs, 4);
  int calls = 0;
  EXPECT_EQ(MeasureRuns([&] { ++calls; }, cold).runs, 4);
  EXPECT_EQ(calls, 4);  // no warm-up run
  calls = 0;
  MeasureRuns([&] { ++calls; }, fixed);
  EXPECT_GT(calls, 4);  // 1 ms of warm-up runs first
}

TEST(MeasureRuns, AdaptiveStopsOnceTheMinimumSettles) {
  TimingOptions o;
  o.budget_seconds = 1.0;  // about 10,000 runs of 100 us if nothing stopped them earlier
  o.warmup_seconds = 0;
  o.min_runs = 5;
  o.stable_runs = 10;
  o.stable_seconds = 0;
  // Only a run twice as fast as the minimum so far counts as an improvement: a sleep of 100 us
  // improves on its first run at most a few times (a slow first run), then settles.
  o.stable_fraction = 0.5;
  const TimingResult r = MeasureRuns(Sleep100us, o);
  EXPECT_EQ(r.end, TimingResult::End::kStable);
  EXPECT_GE(r.runs, 11);  // the first run, then 10 without improvement
  EXPECT_LT(r.runs, 200);
  EXPECT_GE(r.min_seconds, 100e-6);
}

TEST(MeasureRuns, AdaptiveStopsAfterMinRunsWhenClearlySlower) {
  TimingOptions o;
  o.warmup_seconds = 0;
  o.min_runs = 5;
  o.stable_runs = 1000;
  o.clearly_slower_above_seconds = 1e-5;  // every 100 us run is slower
  const TimingResult r = MeasureRuns(Sleep100us, o);
  EXPECT_EQ(r.end, TimingResult::End::kSlower);
  EXPECT_EQ(r.runs, 5);
  // Fixed timing (stable_runs 0) ignores the bound and spends the budget.
  o.stable_runs = 0;
  const TimingResult fixed = MeasureRuns(Sleep100us, o);
  EXPECT_EQ(fixed.end, TimingResult::End::kBudget);
  EXPECT_GE(fixed.runs, 5);  // min_runs at least; 10 ms of runs of at least 100 us: at most 100
  EXPECT_LE(fixed.runs, 100);
}

TEST(LocalTimer, AdaptiveTimingConfirmsCandidatesAndStopsSlowerSchedulesEarly) {
  LocalTimer::Options o = Fast();
  o.adaptive = true;
  o.give_up_factor = 0;
  o.abandon_factor = 0;  // a descheduled verification run must not read as abandoned either
  o.clearly_slower_factor = 1e-9;  // every schedule after the program's first is "slower"
  LocalTimer ev(o);
  const LoopTree t = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=32 n=48 k=16");
  const absl::StatusOr<Measurement> first = ev.Measure(t);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(ev.stats().slower, 0);     // nothing known yet
  EXPECT_EQ(ev.stats().confirmed, 1);  // the program's first: the best so far, timed again
  EXPECT_EQ(first->timing, Measurement::Timing::kConfirmed);
  EXPECT_GT(first->timed_runs, o.timing.min_runs);  // both timings' runs
  ASSERT_TRUE(ev.Measure(WithActions(t, "split_4")).ok());
  EXPECT_EQ(ev.stats().slower, 1);
  // Never a candidate (margin -1): nothing is timed again.
  o.confirm_margin = -1;
  LocalTimer never(o);
  const absl::StatusOr<Measurement> settled_or_full = never.Measure(t);
  ASSERT_TRUE(settled_or_full.ok());
  EXPECT_EQ(never.stats().confirmed, 0);
  EXPECT_NE(settled_or_full->timing, Measurement::Timing::kConfirmed);
  const absl::StatusOr<Measurement> slower = never.Measure(WithActions(t, "split_4"));
  ASSERT_TRUE(slower.ok());
  EXPECT_EQ(never.stats().slower, 1);
  EXPECT_EQ(slower->timing, Measurement::Timing::kSlower);
  // A kernel of microseconds: judged slower after slower_min_runs runs, not min_runs.
  EXPECT_EQ(slower->timed_runs, AdaptiveTiming(o.timing.budget_seconds).slower_min_runs);
  // Fixed timing: neither settles nor stops early nor confirms.
  o.adaptive = false;
  o.confirm_margin = 0.02;
  LocalTimer fixed(o);
  ASSERT_TRUE(fixed.Measure(t).ok());
  const absl::StatusOr<Measurement> full = fixed.Measure(WithActions(t, "split_4"));
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(fixed.stats().stable + fixed.stats().slower + fixed.stats().confirmed, 0);
  EXPECT_EQ(full->timing, Measurement::Timing::kFull);
  EXPECT_GE(full->timed_runs, o.timing.min_runs);
  // A re-timing spends the fixed budget (Timing::kFull, the default): its runs are counted.
  const absl::StatusOr<Measurement> again = ev.RemeasureFor(WithActions(t, "split_4"), 0);
  ASSERT_TRUE(again.ok());
  EXPECT_GE(again->timed_runs, o.timing.min_runs);
}

TEST(AllocateTensors, EveryTensorSitsAtTheSamePlaceInItsPageInEveryAllocation) {
  // A kernel's speed depends on where its buffers sit within their pages (4 KiB aliasing), so
  // every evaluator, in every process, places tensor t 17 t cache lines past a page boundary.
  const LoopTree t = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=32 n=48 k=16");
  for (int round = 0; round < 3; ++round) {
    const TensorData data = AllocateTensors(t.program());
    const TensorData copy = data;  // an evaluator's scratch buffers are such a copy
    ASSERT_EQ(data.size(), 3u);
    for (size_t i = 0; i < data.size(); ++i) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(data[i].data()) % 4096, (i * 17 * 64) % 4096) << i;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(copy[i].data()) % 4096, (i * 17 * 64) % 4096) << i;
      EXPECT_EQ(data[i].size(), copy[i].size());
    }
  }
}

}  // namespace
}  // namespace looptool
