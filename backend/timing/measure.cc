#include "backend/timing/measure.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace looptool {

double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TimingResult MeasureRuns(const std::function<void()>& run, const TimingOptions& options) {
  const double warm_end = MonotonicSeconds() + options.warmup_seconds;
  do {
    run();
  } while (MonotonicSeconds() < warm_end);

  std::vector<double> times;
  double total = 0;
  while ((total < options.budget_seconds || static_cast<int64_t>(times.size()) < options.min_runs) &&
         static_cast<int64_t>(times.size()) < options.max_runs) {
    const double start = MonotonicSeconds();
    run();
    const double t = MonotonicSeconds() - start;
    times.push_back(t);
    total += t;
    if (times.size() == 1 && t > options.give_up_above_seconds) break;
  }
  TimingResult r;
  r.runs = static_cast<int64_t>(times.size());
  r.min_seconds = *std::min_element(times.begin(), times.end());
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  r.median_seconds = times[times.size() / 2];
  return r;
}

}  // namespace looptool
