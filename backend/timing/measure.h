// MeasureRuns: honest timing of a kernel, LoopNest's measure: warm up, then run it repeatedly
// within a time budget, timing every run on its own; report the fastest single run (and the
// median, for users who want to see noise).
#ifndef LOOPTOOL_BACKEND_TIMING_MEASURE_H_
#define LOOPTOOL_BACKEND_TIMING_MEASURE_H_

#include <cstdint>
#include <functional>

namespace looptool {

struct TimingOptions {
  double budget_seconds = 0.010;  // timed runs stop once their sum passes this
  double warmup_seconds = 0.001;  // untimed runs first (caches, TLB, clock)
  int64_t min_runs = 3;
  int64_t max_runs = 1000000;
  // A first timed run slower than this ends the measurement (runs = 1): a kernel far slower
  // than one already known needs no precise number, and a search sees more states.
  double give_up_above_seconds = 1e30;
};

struct TimingResult {
  double min_seconds = 0;
  double median_seconds = 0;
  int64_t runs = 0;
};

TimingResult MeasureRuns(const std::function<void()>& run, const TimingOptions& options = {});

// Seconds on the monotonic clock (std::chrono::steady_clock) since an arbitrary origin: only
// differences mean anything. The clock of every interval the timing code measures.
double MonotonicSeconds();

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_TIMING_MEASURE_H_
