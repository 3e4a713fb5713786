// tune_bench: the search algorithms on 25 test-split matmuls of mm64_256_16_range-v0, each with a
// time limit, through the client library against a LoopTool server started in this process;
// final GFLOPS, % of the measured peak, speed-up over the start state and wall time per search,
// next to OpenBLAS cblas_sgemm (one thread, on the kernel worker's core) on the same shapes.
//
//   bazel run //bench:tune_bench -- --time_limit=10 --searches=beam4dfs,random
#include <sched.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backend/timing/measure.h"
#include "backend/timing/worker_main.h"
#include "bench/clean_environment.h"
#include "bench/references.h"
#include "client/cpp/env.h"
#include "client/cpp/search.h"
#include "datasets/matmul_range.h"
#include "service/server.h"

ABSL_FLAG(double, time_limit, 10, "seconds per search");
ABSL_FLAG(std::string, searches, "greedy1,greedy2,beam2dfs,beam4dfs,beam2bfs,beam4bfs,random",
          "comma-separated search algorithms");
ABSL_FLAG(int, count, 25, "test-split matmuls (spread evenly over the split)");
ABSL_FLAG(double, timing_budget_ms, 3, "server's timing budget per new schedule");
ABSL_FLAG(std::string, out, "bench/results", "directory for tune_bench.md and tune_bench.csv");

namespace looptool::bench {
namespace {

struct Row {
  std::string shape, search;
  double gflops = 0, start = 0, peak = 0, seconds = 0;
  int64_t states = 0;
  size_t actions = 0;
};

std::vector<datasets::MatmulShape> TestShapes(int count) {
  std::vector<datasets::MatmulShape> test;
  for (const auto& s : datasets::MatmulRange()) {
    if (datasets::InTestSplit(s)) test.push_back(s);
  }
  std::vector<datasets::MatmulShape> out;
  for (int i = 0; i < count && i < static_cast<int>(test.size()); ++i) {
    out.push_back(test[i * test.size() / count]);
  }
  return out;
}

// OpenBLAS on `core` (the kernel worker's, idle between searches), fastest run within 50 ms.
double OpenBlasGflops(const datasets::MatmulShape& s, int core) {
  double gflops = 0;
  std::thread([&] {
    if (core >= 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(core, &set);
      sched_setaffinity(0, sizeof(set), &set);
    }
    std::vector<float> a(s.m * s.k, 1.0f), b(s.k * s.n, 0.5f), c(s.m * s.n);
    Reference r = OpenBlasSgemm(s.m, s.n, s.k, a.data(), b.data(), c.data());
    TimingOptions t;
    t.budget_seconds = 0.05;
    t.warmup_seconds = 0.01;
    gflops = 2.0 * s.m * s.n * s.k / MeasureRuns(r.run, t).min_seconds * 1e-9;
  }).join();
  return gflops;
}

double Geomean(const std::vector<double>& v) {
  double log_sum = 0;
  for (double x : v) log_sum += std::log(x);
  return v.empty() ? 0 : std::exp(log_sum / v.size());
}

int Main() {
  service::ServerConfig config;
  config.workers.budget_ms = absl::GetFlag(FLAGS_timing_budget_ms);
  // Process-wide pinning is main's (LoopToolServer::Start leaves it alone): this process's
  // threads (server, client, search) stay off the kernel worker's core.
  config.workers.cores = service::DefaultEvalCores();
  service::PinAwayFrom(config.workers.cores);
  auto server = service::LoopToolServer::Start(config);
  if (!server.ok()) {
    std::fprintf(stderr, "cannot start server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  const int core = (*server)->eval_cores()[0];
  auto connection = client::Connection::Connect((*server)->address());
  if (!connection.ok()) return 1;
  const std::vector<std::string> searches =
      absl::StrSplit(absl::GetFlag(FLAGS_searches), ',', absl::SkipEmpty());
  std::map<std::string, client::SearchSpec> specs;
  for (const std::string& search : searches) {
    absl::StatusOr<client::SearchSpec> spec = client::ParseSearch(search);
    if (!spec.ok()) {
      std::fprintf(stderr, "--searches: %s\n", spec.status().ToString().c_str());
      return 1;
    }
    specs[search] = *spec;
  }
  const double limit = absl::GetFlag(FLAGS_time_limit);

  std::vector<Row> rows;
  std::map<std::string, double> openblas;
  for (const datasets::MatmulShape& shape : TestShapes(absl::GetFlag(FLAGS_count))) {
    const std::string name = datasets::MatmulName(shape);
    openblas[name] = OpenBlasGflops(shape, core);
    for (const std::string& search : searches) {
      auto env = client::Env::Start(*connection, "benchmark://mm64_256_16_range-v0/" + name);
      if (!env.ok()) return 1;
      client::SearchOptions options;
      options.search = specs[search];
      options.time_limit_seconds = limit;
      auto r = client::Search(*env, options);
      if (!r.ok()) {
        std::fprintf(stderr, "%s %s: %s\n", name.c_str(), search.c_str(),
                     r.status().ToString().c_str());
        return 1;
      }
      rows.push_back({name, search, r->gflops, r->start_gflops, r->peak_gflops, r->seconds,
                      r->states_evaluated, r->actions.size()});
      std::printf("%-14s %-9s %7.1f GFLOPS %5.1f%% of peak %5.2fx start %5.1f s %5lld states | "
                  "OpenBLAS %5.1f%%\n",
                  name.c_str(), search.c_str(), r->gflops, 100 * r->gflops / r->peak_gflops,
                  r->gflops / r->start_gflops, r->seconds,
                  static_cast<long long>(r->states_evaluated),
                  100 * openblas[name] / r->peak_gflops);
      std::fflush(stdout);
    }
  }

  const std::string dir = absl::GetFlag(FLAGS_out);
  std::ofstream csv(dir + "/tune_bench.csv");
  csv << "shape,search,gflops,percent_of_peak,speedup,seconds,states_evaluated,actions,"
         "start_gflops,peak_gflops,openblas_gflops\n";
  for (const Row& r : rows) {
    csv << absl::StrFormat("%s,%s,%.2f,%.1f,%.3f,%.2f,%d,%d,%.2f,%.2f,%.2f\n", r.shape, r.search,
                           r.gflops, 100 * r.gflops / r.peak, r.gflops / r.start, r.seconds,
                           r.states, r.actions, r.start, r.peak, openblas[r.shape]);
  }
  std::string md = absl::StrFormat(
      "# tune_bench\n\n%d test-split matmuls of mm64_256_16_range-v0, each search limited to "
      "%.0f s, through the C++ client against a server in the same process (kernel worker on "
      "cpu %d, timing budget %.0f ms per new schedule). GFLOPS are the server's measurements "
      "(fastest run), %% of the measured FMA peak (%.1f GFLOPS). OpenBLAS: cblas_sgemm, one "
      "thread, same core (%s).\n\n"
      "| search | geomean %% of peak | min %% | geomean speed-up | mean seconds | mean states | "
      "geomean vs OpenBLAS |\n|---|---:|---:|---:|---:|---:|---:|\n",
      absl::GetFlag(FLAGS_count), limit, core, absl::GetFlag(FLAGS_timing_budget_ms),
      (*server)->peak_gflops(), OpenBlasCore());
  for (const std::string& search : searches) {
    std::vector<double> pct, speedup, vs_blas;
    double seconds = 0, states = 0, min_pct = 1e9;
    for (const Row& r : rows) {
      if (r.search != search) continue;
      pct.push_back(100 * r.gflops / r.peak);
      min_pct = std::min(min_pct, pct.back());
      speedup.push_back(r.gflops / r.start);
      vs_blas.push_back(r.gflops / openblas[r.shape]);
      seconds += r.seconds;
      states += r.states;
    }
    md += absl::StrFormat("| %s | %.1f | %.1f | %.2f | %.1f | %.0f | %.2f |\n", search,
                          Geomean(pct), min_pct, Geomean(speedup), seconds / pct.size(),
                          states / pct.size(), Geomean(vs_blas));
  }
  std::vector<double> blas_pct;
  for (const auto& [name, g] : openblas) blas_pct.push_back(100 * g / (*server)->peak_gflops());
  md += absl::StrFormat("| OpenBLAS (reference) | %.1f | | | | | 1.00 |\n", Geomean(blas_pct));
  md += "\nPer shape and search: tune_bench.csv.\n";
  std::ofstream(dir + "/tune_bench.md") << md;
  std::printf("\n%s", md.c_str());
  (*server)->Shutdown();
  return 0;
}

}  // namespace
}  // namespace looptool::bench

int main(int argc, char** argv) {
  if (auto rc = looptool::MaybeRunKernelWorker(argc, argv)) return *rc;
  looptool::bench::ReexecWithCleanEnvironment(argv);
  absl::ParseCommandLine(argc, argv);
  return looptool::bench::Main();
}
