#include "backend/timing/measure.h"

#include <time.h>

#include <algorithm>
#include <vector>

namespace looptool {
namespace {

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

TimingResult MeasureRuns(const std::function<void()>& run, const TimingOptions& options) {
  const double warm_end = Now() + options.warmup_seconds;
  do {
    run();
  } while (Now() < warm_end);

  std::vector<double> times;
  double total = 0;
  while ((total < options.budget_seconds || static_cast<int64_t>(times.size()) < options.min_runs) &&
         static_cast<int64_t>(times.size()) < options.max_runs) {
    const double start = Now();
    run();
    const double t = Now() - start;
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
