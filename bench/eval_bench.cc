// eval_bench: what evaluating a new schedule costs, adaptive timing against fixed, in this
// process on one core (no server, no IPC): random schedules of the 25 test-split matmuls of
// mm64_256_16_range-v0 (random walks of loop_tool actions, 1 to 10 effective actions from the
// initial state), each compiled, verified and timed by a LocalTimer of each policy in the
// same order. Reports the wall time per new schedule (median and p90, for kernels under 100 us
// and for all), and how the adaptive policy's numbers agree with the fixed one's: per schedule,
// and for each shape's best schedule timed again afterwards by a fresh evaluator.
//
//   bazel build -c opt //bench:eval_bench && bazel-bin/bench/eval_bench --schedules=60
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "backend/actions/action_space.h"
#include "backend/actions/apply.h"
#include "backend/codegen/isa.h"
#include "backend/ir/parser.h"
#include "backend/schedule/ir_text.h"
#include "backend/timing/local_timer.h"
#include "backend/timing/measure.h"
#include "bench/clean_environment.h"
#include "bench/report_files.h"
#include "datasets/matmul_range.h"
#include "util/status_macros.h"

ABSL_FLAG(int, schedules, 60, "random schedules per shape");
ABSL_FLAG(int, count, 25, "test-split matmuls (spread evenly over the split)");
ABSL_FLAG(double, budget_ms, 10, "fixed timing's budget, and adaptive timing's cap");
ABSL_FLAG(int, core, -1, "CPU to run on (default: the last allowed one)");
ABSL_FLAG(uint64_t, seed, 1, "random walks' seed");
ABSL_FLAG(std::string, out, "bench/results", "directory for eval_bench.md");

namespace looptool::bench {
namespace {

struct Sample {
  double wall_seconds = 0;    // Measure() of a new schedule: compile, verify, time
  double kernel_seconds = 0;  // its fastest run as that policy reported it
  bool stopped_slower = false;  // adaptive: stopped early as slower than the program's best
};

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

// Distinct random schedules of `initial`: each a walk of 1..10 effective actions.
std::vector<LoopTree> RandomSchedules(const LoopTree& initial, int n, std::mt19937_64& rng) {
  const ActionSpace& space = LoopToolActionSpace();
  const Limits limits;
  std::vector<LoopTree> out;
  std::set<std::string> seen;
  for (int attempt = 0; attempt < 50 * n && static_cast<int>(out.size()) < n; ++attempt) {
    LoopTree tree = initial;
    const int depth = std::uniform_int_distribution<int>(1, 10)(rng);
    for (int d = 0; d < depth; ++d) {
      const std::vector<bool> mask = ActionMask(tree, space, limits);
      std::vector<int> legal;
      for (int a = 0; a < space.size(); ++a) {
        if (mask[a]) legal.push_back(a);
      }
      if (legal.empty()) break;
      const int a = legal[std::uniform_int_distribution<size_t>(0, legal.size() - 1)(rng)];
      tree = Apply(tree, space.actions[a], limits).tree;
    }
    if (seen.insert(ScheduleKey(tree)).second) out.push_back(tree);
  }
  return out;
}

// The CPU to run on (--core, default the last one allowed), pinned; -1 when it cannot be.
int PinToCore() {
  int core = absl::GetFlag(FLAGS_core);
  cpu_set_t set;
  if (core < 0) {
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof(set), &set);
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) core = c;
    }
  }
  CPU_ZERO(&set);
  if (core < 0 || core >= CPU_SETSIZE) return -1;
  CPU_SET(core, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0 ? core : -1;
}

// Everything measured, over all shapes.
struct Tally {
  std::vector<Sample> fixed, adaptive;
  std::vector<double> per_schedule_ratio;  // adaptive kernel time / fixed kernel time
  std::vector<bool> per_schedule_slower;   // adaptive stopped it early as slower
  std::vector<double> best_ratio;          // best schedule: retimed / adaptive's report
  std::vector<double> floor_ratio;         // best schedule: one fresh fixed timing / another
  double fixed_wall = 0, adaptive_wall = 0;
  LocalTimer::Stats adaptive_stats;
};

// One shape: its initial state and --schedules random walks, each evaluated by both policies
// (alternating which goes first per shape, so that neither always runs on a warmer core); then
// its best schedule timed again, and twice more for the noise floor.
absl::Status MeasureShape(const datasets::MatmulShape& shape, int index,
                          const LocalTimer::Options& fixed_options,
                          const LocalTimer::Options& adaptive_options, std::mt19937_64& rng,
                          Tally& t) {
  ASSIGN_OR_RETURN(const Program program, ParseProgram(datasets::MatmulProgram(shape), Limits{}));
  const LoopTree initial = LoopTree::Initial(std::make_shared<const Program>(program));
  std::vector<LoopTree> schedules = RandomSchedules(initial, absl::GetFlag(FLAGS_schedules), rng);
  schedules.insert(schedules.begin(), initial);
  LocalTimer fixed_eval(fixed_options), adaptive_eval(adaptive_options);
  double best_seconds = 1e30;
  const LoopTree* best = nullptr;
  for (const LoopTree& tree : schedules) {
    Sample f, a;
    for (int k = 0; k < 2; ++k) {
      const bool fixed_turn = (k == 0) == (index % 2 == 0);
      LocalTimer& eval = fixed_turn ? fixed_eval : adaptive_eval;
      const LocalTimer::Stats before = eval.stats();
      const double t0 = MonotonicSeconds();
      absl::StatusOr<Measurement> m = eval.Measure(tree);
      const double wall = MonotonicSeconds() - t0;
      const LocalTimer::Stats after = eval.stats();
      const bool slower = after.slower + after.given_up > before.slower + before.given_up;
      if (!m.ok()) {
        return absl::Status(m.status().code(), absl::StrCat(datasets::MatmulName(shape), ": ",
                                                            m.status().message()));
      }
      (fixed_turn ? f : a) = Sample{wall, m->seconds, !fixed_turn && slower};
    }
    t.fixed.push_back(f);
    t.adaptive.push_back(a);
    t.fixed_wall += f.wall_seconds;
    t.adaptive_wall += a.wall_seconds;
    t.per_schedule_ratio.push_back(a.kernel_seconds / f.kernel_seconds);
    t.per_schedule_slower.push_back(a.stopped_slower);
    if (a.kernel_seconds < best_seconds) {
      best_seconds = a.kernel_seconds;
      best = &tree;
    }
  }
  const LocalTimer::Stats s = adaptive_eval.stats();
  t.adaptive_stats.measured += s.measured;
  t.adaptive_stats.stable += s.stable;
  t.adaptive_stats.slower += s.slower;
  t.adaptive_stats.given_up += s.given_up;
  t.adaptive_stats.confirmed += s.confirmed;
  LocalTimer retime(fixed_options);
  ASSIGN_OR_RETURN(const Measurement again, retime.Measure(*best));
  t.best_ratio.push_back(again.seconds / best_seconds);
  // The noise floor: the same kernel in two more fresh evaluators (new buffers, fixed budget).
  LocalTimer first(fixed_options), second(fixed_options);
  ASSIGN_OR_RETURN(const Measurement m1, first.Measure(*best));
  ASSIGN_OR_RETURN(const Measurement m2, second.Measure(*best));
  t.floor_ratio.push_back(m2.seconds / m1.seconds);
  std::printf("%-14s %3zu schedules: fixed %.1f ms, adaptive %.1f ms per schedule; best "
              "retimed/reported %.3f\n",
              datasets::MatmulName(shape).c_str(), schedules.size(),
              1e3 * t.fixed_wall / t.fixed.size(), 1e3 * t.adaptive_wall / t.adaptive.size(),
              t.best_ratio.back());
  std::fflush(stdout);
  return absl::OkStatus();
}

std::string Report(const Tally& t, int core, int count, double budget) {
  auto walls = [](const std::vector<Sample>& v, const std::vector<Sample>& ref, bool small) {
    std::vector<double> w;
    for (size_t i = 0; i < v.size(); ++i) {
      if (!small || ref[i].kernel_seconds < 100e-6) w.push_back(v[i].wall_seconds * 1e3);
    }
    return w;
  };
  size_t small = 0;
  for (const Sample& f : t.fixed) small += f.kernel_seconds < 100e-6;
  // Schedules timed to the end (settled, or the cap) and those stopped early as slower.
  std::vector<double> slow_ratio, kept_ratio;
  for (size_t i = 0; i < t.per_schedule_ratio.size(); ++i) {
    (t.per_schedule_slower[i] ? slow_ratio : kept_ratio).push_back(t.per_schedule_ratio[i]);
  }
  std::string md = absl::StrFormat(
      "# eval_bench\n\nNew-schedule evaluation (compile, verify against the interpreter, time) in "
      "one process on cpu %d, %d test-split matmuls of mm64_256_16_range-v0, %zu schedules (each "
      "shape's initial state and random walks of 1-10 loop_tool actions), every schedule "
      "evaluated by both policies, alternating which goes first. Fixed: warm-up 1 ms, runs until "
      "%.0f ms are spent. Adaptive (the server's default): warm-up 0.2 ms, at least 2 runs, stop "
      "once the minimum has not improved by 0.5%% for 10 runs and 0.3 ms or for 2 runs and 3 ms, "
      "or once, after 5 runs or 3 ms, it is 1.25x the best kernel of its program so far; a "
      "schedule within 2%% of the best or faster is timed again with the fixed budget (no "
      "warm-up). Capped at %.0f ms.\n\n"
      "| policy | median ms, kernels < 100 us (%zu) | p90 ms, < 100 us | median ms, all | p90 ms, "
      "all | schedules/s |\n|---|---:|---:|---:|---:|---:|\n",
      core, count, t.fixed.size(), budget * 1e3, budget * 1e3, small);
  for (const auto& [name, v, total] : {std::tuple{"fixed", &t.fixed, t.fixed_wall},
                                       std::tuple{"adaptive", &t.adaptive, t.adaptive_wall}}) {
    md += absl::StrFormat("| %s | %.2f | %.2f | %.2f | %.2f | %.0f |\n", name,
                          Quantile(walls(*v, t.fixed, true), 0.5),
                          Quantile(walls(*v, t.fixed, true), 0.9),
                          Quantile(walls(*v, t.fixed, false), 0.5),
                          Quantile(walls(*v, t.fixed, false), 0.9), v->size() / total);
  }
  const LocalTimer::Stats& a = t.adaptive_stats;
  md += absl::StrFormat(
      "\nAdaptive runs: %lld schedules, %lld stopped as settled, %lld as clearly slower (%lld "
      "more after one run, 4x slower), %lld timed again as candidates.\n\n"
      "Agreement, adaptive kernel time / fixed kernel time per schedule: %zu timed until settled "
      "(median %.3f, p10 %.3f, p90 %.3f); %zu stopped early as slower than their program's best "
      "(median %.3f, p90 %.3f; such a minimum of few runs is never below the true one, so their "
      "speed is reported low, never high). Each shape's best schedule (by the adaptive report) "
      "timed again afterwards by a fresh evaluator with the fixed budget, retimed / reported: "
      "median %.3f, min %.3f, max %.3f. The noise floor, the same best schedules timed by two "
      "more fresh evaluators with the fixed budget, one / the other: median %.3f, min %.3f, max "
      "%.3f (every evaluator places its tensors at the same offsets within their pages; with "
      "buffers placed wherever malloc put them, this floor was 0.973..1.036 on this host).\n",
      static_cast<long long>(a.measured), static_cast<long long>(a.stable),
      static_cast<long long>(a.slower), static_cast<long long>(a.given_up),
      static_cast<long long>(a.confirmed), kept_ratio.size(), Quantile(kept_ratio, 0.5),
      Quantile(kept_ratio, 0.1), Quantile(kept_ratio, 0.9), slow_ratio.size(),
      Quantile(slow_ratio, 0.5), Quantile(slow_ratio, 0.9), Quantile(t.best_ratio, 0.5),
      Quantile(t.best_ratio, 0), Quantile(t.best_ratio, 1), Quantile(t.floor_ratio, 0.5),
      Quantile(t.floor_ratio, 0), Quantile(t.floor_ratio, 1));
  return md;
}

int Main() {
  if (absl::GetFlag(FLAGS_schedules) < 1 || absl::GetFlag(FLAGS_count) < 1 ||
      absl::GetFlag(FLAGS_budget_ms) <= 0) {
    std::fprintf(stderr, "eval_bench: --schedules and --count must be at least 1 and --budget_ms "
                         "positive\n");
    return 1;
  }
  if (absl::Status s = looptool::bench::PrepareReportDirectory(absl::GetFlag(FLAGS_out)); !s.ok()) {
    std::fprintf(stderr, "eval_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  const int core = PinToCore();
  if (core < 0) {
    std::fprintf(stderr, "eval_bench: cannot run on cpu %d (--core)\n", absl::GetFlag(FLAGS_core));
    return 1;
  }
  const double budget = absl::GetFlag(FLAGS_budget_ms) / 1000;
  LocalTimer::Options fixed_options;
  fixed_options.isa = DetectIsa();
  fixed_options.timing.budget_seconds = budget;
  fixed_options.adaptive = false;
  LocalTimer::Options adaptive_options = fixed_options;
  adaptive_options.adaptive = true;

  std::vector<datasets::MatmulShape> test;
  for (const auto& s : datasets::MatmulRange()) {
    if (datasets::InTestSplit(s)) test.push_back(s);
  }
  const int count = std::min<int>(absl::GetFlag(FLAGS_count), test.size());
  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed));
  Tally tally;
  for (int i = 0; i < count; ++i) {
    absl::Status s = MeasureShape(test[i * test.size() / count], i, fixed_options,
                                  adaptive_options, rng, tally);
    if (!s.ok()) {
      std::fprintf(stderr, "eval_bench: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  const std::string md = Report(tally, core, count, budget);
  std::printf("\n%s", md.c_str());
  if (absl::Status s = WriteReportFile(absl::GetFlag(FLAGS_out) + "/eval_bench.md", md);
      !s.ok()) {
    std::fprintf(stderr, "eval_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace looptool::bench

int main(int argc, char** argv) {
  looptool::bench::ReexecWithCleanEnvironment(argv);
  absl::ParseCommandLine(argc, argv);
  return looptool::bench::Main();
}
