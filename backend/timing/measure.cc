#include "backend/timing/measure.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace looptool {

double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TimingOptions AdaptiveTiming(double budget_seconds) {
  TimingOptions t;
  t.budget_seconds = budget_seconds;
  t.warmup_seconds = std::min(2e-4, budget_seconds / 10);
  t.min_runs = 2;
  t.stable_runs = 10;
  t.stable_seconds = 3e-4;
  t.stable_long_seconds = 3e-3;
  t.stable_fraction = 0.005;
  t.slower_min_runs = 5;
  return t;
}

TimingOptions WithoutWarmUp(TimingOptions fixed) {
  fixed.warmup_seconds = 0;
  fixed.min_warmup_runs = 0;
  return fixed;
}

TimingResult MeasureRuns(const std::function<void()>& run, const TimingOptions& options) {
  const double warm_end = MonotonicSeconds() + options.warmup_seconds;
  for (int64_t n = 0; n < options.min_warmup_runs || MonotonicSeconds() < warm_end; ++n) run();

  TimingResult r;
  std::vector<double> times;
  double total = 0;
  double best = 1e30;
  // Runs and seconds since the minimum last improved by more than stable_fraction.
  int64_t settled_runs = 0;
  double settled_seconds = 0;
  while ((total < options.budget_seconds || static_cast<int64_t>(times.size()) < options.min_runs) &&
         static_cast<int64_t>(times.size()) < options.max_runs) {
    const double start = MonotonicSeconds();
    run();
    const double t = MonotonicSeconds() - start;
    times.push_back(t);
    total += t;
    if (t < best * (1 - options.stable_fraction)) {
      settled_runs = 0;
      settled_seconds = 0;
    } else {
      ++settled_runs;
      settled_seconds += t;
    }
    best = std::min(best, t);
    const int64_t n = static_cast<int64_t>(times.size());
    if (n == 1 && t > options.give_up_above_seconds) {
      r.end = TimingResult::End::kSlower;
      break;
    }
    if (options.stable_runs <= 0 || n < options.min_runs) continue;
    if (best > options.clearly_slower_above_seconds &&
        (n >= options.slower_min_runs ||
         (options.stable_long_seconds > 0 && total >= options.stable_long_seconds))) {
      r.end = TimingResult::End::kSlower;
      break;
    }
    const bool settled_long = options.stable_long_seconds > 0 && settled_runs >= 2 &&
                              settled_seconds >= options.stable_long_seconds;
    if ((settled_runs >= options.stable_runs && settled_seconds >= options.stable_seconds) ||
        settled_long) {
      r.end = TimingResult::End::kStable;
      break;
    }
  }
  r.runs = static_cast<int64_t>(times.size());
  r.min_seconds = best;
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  r.median_seconds = times[times.size() / 2];
  return r;
}

}  // namespace looptool
