// MeasureRuns: honest timing of a kernel, LoopNest's measure: warm up, then run it repeatedly,
// timing every run on its own; report the fastest single run (and the median, for users who want
// to see noise). Fixed: runs until the budget is spent. Adaptive (stable_runs > 0): stops earlier
// once the minimum has settled, or once it is clearly slower than a given time; the budget stays
// the cap.
#ifndef LOOPTOOL_BACKEND_TIMING_MEASURE_H_
#define LOOPTOOL_BACKEND_TIMING_MEASURE_H_

#include <cstdint>
#include <functional>

namespace looptool {

struct TimingOptions {
  double budget_seconds = 0.010;  // timed runs stop once their sum passes this
  double warmup_seconds = 0.001;  // untimed runs first (caches, TLB, clock)...
  int64_t min_warmup_runs = 1;    // ... this many at least
  int64_t min_runs = 3;
  int64_t max_runs = 1000000;
  // A first timed run slower than this ends the measurement (runs = 1): a kernel far slower
  // than one already known needs no precise number, and a search sees more states.
  double give_up_above_seconds = 1e30;

  // Adaptive: stop once at least `stable_runs` runs and `stable_seconds` of runs have passed
  // without the minimum improving by more than `stable_fraction`, or (long runs) once at least
  // 2 runs and `stable_long_seconds` of runs have (0: only the first rule). 0 runs: fixed timing.
  int64_t stable_runs = 0;
  double stable_seconds = 0;
  double stable_long_seconds = 0;
  double stable_fraction = 0.005;
  // Adaptive: once min_runs runs are done, and `slower_min_runs` runs or `stable_long_seconds`
  // of runs, stop when their minimum is above this: a kernel clearly slower than one already
  // known. The minimum of few runs is never below the true one, so its speed is reported low,
  // never high.
  double clearly_slower_above_seconds = 1e30;
  int64_t slower_min_runs = 0;
};

// The adaptive policy a kernel worker uses for new schedules, capped by `budget_seconds`:
// 0.2 ms of warm-up, at least 2 runs, stop once the minimum has not improved by 0.5% for 10
// runs and 0.3 ms of runs, or for 2 runs and 3 ms of runs (a kernel of milliseconds: 3 or 4
// runs where 10 ms of them were spent before), or once clearly slower after 5 runs or 3 ms.
TimingOptions AdaptiveTiming(double budget_seconds);

// `fixed` (a fixed timing) for a kernel that has just run: the same runs, no warm-up.
TimingOptions WithoutWarmUp(TimingOptions fixed);

struct TimingResult {
  double min_seconds = 0;
  double median_seconds = 0;
  int64_t runs = 0;
  // How the runs ended: the budget (or max_runs) spent, the minimum settled (adaptive), or the
  // kernel found slower than the given bound (give_up_above / clearly_slower_above).
  enum class End { kBudget, kStable, kSlower };
  End end = End::kBudget;
};

TimingResult MeasureRuns(const std::function<void()>& run, const TimingOptions& options = {});

// Seconds on the monotonic clock (std::chrono::steady_clock) since an arbitrary origin: only
// differences mean anything. The clock of every interval the timing code measures.
double MonotonicSeconds();

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_TIMING_MEASURE_H_
