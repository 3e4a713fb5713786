// tune_bench: the search algorithms on matmuls, each with a time limit, through the client
// library against a LoopTool server started in this process: the 25 test-split matmuls of
// mm64_256_16_range-v0 and a set of shapes off its grid (odd, prime and rectangular sizes in
// 32..512, added as programs). Per search: final GFLOPS against oneDNN's matmul and OpenBLAS's
// cblas_sgemm (one thread each, on the kernel worker's core, in this run), % of the measured
// peak, states evaluated per second, and the best schedule timed again afterwards (fixed budget,
// on the same core) against what the search reported.
//
//   bazel run //bench:tune_bench -- --time_limit=10 --searches=beam4dfs,random,evolution@loop_nest
// (NAME@SPACE: the search in that action space; by default evolution runs in loop_nest, as
// `looptool tune`, the policy searches in the policy's, the others in loop_tool).
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backend/codegen/isa.h"
#include "backend/schedule/ir_text.h"
#include "backend/timing/local_timer.h"
#include "backend/timing/measure.h"
#include "backend/timing/worker_main.h"
#include "bench/clean_environment.h"
#include "bench/matmul_shapes.h"
#include "bench/references.h"
#include "bench/report_files.h"
#include "client/cpp/env.h"
#include "client/cpp/search/search.h"
#include "datasets/matmul_range.h"
#include "service/server.h"
#include "service/server_flags.h"
#include "util/status_macros.h"

ABSL_FLAG(double, time_limit, 10, "seconds per search");
ABSL_FLAG(bool, policy_seed, true,
          "evolution starts from the built-in policy's episode (SearchOptions::policy_seed)");
ABSL_FLAG(bool, sketches, true,
          "evolution measures the server's LoopNest-style sketches first (SearchOptions::sketches)");
ABSL_FLAG(int, cost_model_candidates, 6,
          "evolution: children ranked by the server's cost model per measured one "
          "(SearchOptions::cost_model_candidates); 0: every child measured");
ABSL_FLAG(double, cost_model_up_to_seconds, 2,
          "evolution uses the cost model only for time limits up to this "
          "(SearchOptions::cost_model_up_to_seconds)");
ABSL_FLAG(int, retime_top, 3,
          "kernels each search re-times at its end (SearchOptions::retime_top); 0: none");
ABSL_FLAG(std::string, searches,
          "greedy1,greedy2,beam2dfs,beam4dfs,beam2bfs,beam4bfs,random,evolution",
          "comma-separated search algorithms");
ABSL_FLAG(int, count, 25, "test-split matmuls (spread evenly over the split); 0: none");
ABSL_FLAG(int, convs, 0, "ResNet-18 3x3 convolution layers of conv2d-v0 (0..4, conv5 first)");
ABSL_FLAG(int, depthwise, 0,
          "MobileNet's stride-1 3x3 depthwise layers of conv2d-v0 (0..4, 512 channels first); "
          "searched with --conv_time_limit");
ABSL_FLAG(double, conv_time_limit, 10,
          "seconds per search on a convolution (their first kernel alone, verified against the "
          "interpreter and timed, takes seconds)");
ABSL_FLAG(int, offgrid, 12, "matmuls off the dataset's grid (the first N of a fixed list); 0: none");
// The servers' flags (--timing, --timing_budget_ms, --isa, --eval_cores, ...) are
// service/server_flags.h's.
ABSL_FLAG(std::string, out, "bench/results", "directory for tune_bench.md and tune_bench.csv");
ABSL_FLAG(bool, fresh_server, true,
          "each search against a server of its own, started for it (as `looptool tune` does): "
          "no search reuses another's measurements; false: one server for the whole run (its "
          "measurement cache and cost model shared by every search and shape)");

namespace looptool::bench {
namespace {

struct Libraries {
  double onednn = 0, openblas = 0;  // GFLOPS, fastest run
  // Convolutions: oneDNN with every tensor in its preferred blocked layout (reorders untimed).
  double onednn_blocked = 0;
  std::string onednn_impl, onednn_blocked_impl;
};

// One benchmark to tune: a test-split matmul, one off the grid (added as a program), or a
// convolution layer of conv2d-v0; its library references are timed by `libraries`.
struct Bench {
  std::string name;
  std::string set;      // "test", "offgrid", "conv" or "depthwise"
  std::string uri;
  std::string program;  // empty: one of the server's own benchmarks
  std::function<Libraries(int core)> libraries;
};

struct Row {
  std::string name, set;
  std::string search;
  double gflops = 0, start = 0, peak = 0, seconds = 0, retimed = 0;
  int64_t states = 0;
  size_t actions = 0;
};

// The kernel worker's core may still be busy with a search's last request (cancelled by the
// client at the time limit, finished by the worker): let it finish before timing on that core.
void LetTheWorkerCoreSettle() { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }

// oneDNN and OpenBLAS on `core` (the kernel worker's, idle between searches), fastest run
// within 50 ms each.
Libraries LibraryGflops(const datasets::MatmulShape& s, int core) {
  LetTheWorkerCoreSettle();
  Libraries g;
  std::thread([&] {
    PinThisThread(core);
    std::vector<float> a(s.m * s.k, 1.0f), b(s.k * s.n, 0.5f), c(s.m * s.n);
    TimingOptions t;
    t.budget_seconds = 0.05;
    t.warmup_seconds = 0.01;
    const double flops = 2.0 * s.m * s.n * s.k;
    g.onednn = flops / MeasureRuns(OneDnnMatmul(s.m, s.n, s.k, a.data(), b.data(), c.data()).run, t)
                           .min_seconds * 1e-9;
    g.openblas = flops / MeasureRuns(OpenBlasSgemm(s.m, s.n, s.k, a.data(), b.data(), c.data()).run,
                                     t).min_seconds * 1e-9;
  }).join();
  return g;
}

// ResNet-18's stride-1 3x3 convolutions (conv2d-v0), O[k,h,w] += I[c,h+r,w+s] * W[k,c,r,s]:
// oneDNN's direct convolution on `core` (no OpenBLAS reference for convolutions).
struct Conv {
  const char* name;
  int c, k, h, w;
};
constexpr Conv kConvs[] = {{"resnet18_conv5_3x3", 512, 512, 7, 7},
                           {"resnet18_conv4_3x3", 256, 256, 14, 14},
                           {"resnet18_conv3_3x3", 128, 128, 28, 28},
                           {"resnet18_conv2_3x3", 64, 64, 56, 56}};

// oneDNN's convolution (groups 1, or one per channel) on `core`: in NCHW and in its blocked
// layouts. O[K,H,W] from I[C,H+2,W+2], 3x3.
Libraries ConvolutionLibraries(int c, int k, int h, int w, bool depthwise, int core) {
  LetTheWorkerCoreSettle();
  Libraries g;
  std::thread([&] {
    PinThisThread(core);
    std::vector<float> in(c * (h + 2) * (w + 2), 1.0f), weights((depthwise ? 1 : k) * c * 9, 0.5f),
        out(k * h * w);
    TimingOptions t;
    t.budget_seconds = 0.1;
    t.warmup_seconds = 0.01;
    const double flops = 2.0 * k * (depthwise ? 1 : c) * h * w * 9;
    const Reference plain =
        depthwise ? OneDnnDepthwise(c, h, w, 3, in.data(), weights.data(), out.data())
                  : OneDnnConv(c, k, h, w, 3, in.data(), weights.data(), out.data());
    const Reference blocked = OneDnnConvBlocked(c, k, h, w, 3, depthwise);
    g.onednn = flops / MeasureRuns(plain.run, t).min_seconds * 1e-9;
    g.onednn_blocked = flops / MeasureRuns(blocked.run, t).min_seconds * 1e-9;
    g.onednn_impl = plain.implementation;
    g.onednn_blocked_impl = blocked.implementation;
  }).join();
  return g;
}

// MobileNet's stride-1 3x3 depthwise layers (conv2d-v0), O[c,h,w] += I[c,h+r,w+s] * W[c,r,s]:
// oneDNN's direct convolution with one group per channel.
struct Depthwise {
  const char* name;
  int c, h, w;
};
constexpr Depthwise kDepthwise[] = {{"mobilenet_depthwise_512_14", 512, 14, 14},
                                    {"mobilenet_depthwise_256_28", 256, 28, 28},
                                    {"mobilenet_depthwise_128_56", 128, 56, 56},
                                    {"mobilenet_depthwise_32_112", 32, 112, 112}};

// The best schedule timed again on `core` with a fixed budget (no cache, a fresh compile and
// verification): what a user who takes the schedule away sees. 0 on failure.
double Retime(const std::string& ir, int core, Isa isa, double budget_seconds) {
  LetTheWorkerCoreSettle();
  double gflops = 0;
  std::thread([&] {
    PinThisThread(core);
    absl::StatusOr<LoopTree> tree = ParseIr(ir, Limits{});
    if (!tree.ok()) return;
    LocalTimer::Options options;
    options.isa = isa;
    options.adaptive = false;
    options.timing.budget_seconds = budget_seconds;
    LocalTimer evaluator(options);
    absl::StatusOr<Measurement> m = evaluator.Measure(*tree);
    if (m.ok()) gflops = m->gflops;
  }).join();
  return gflops;
}

double Geomean(const std::vector<double>& v) {
  double log_sum = 0;
  for (double x : v) log_sum += std::log(x);
  return v.empty() ? 0 : std::exp(log_sum / v.size());
}

double Min(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

// One table: every search over the rows of one shape set.
std::string SummaryTable(const std::vector<std::string>& searches, const std::vector<Row>& rows,
                         const std::string& set, const std::map<std::string, Libraries>& libs,
                         double peak) {
  std::string md =
      "| search | geomean vs oneDNN | min vs oneDNN | geomean vs OpenBLAS | geomean % of peak | "
      "geomean speed-up | mean seconds | mean states | states/s | retimed / reported |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const std::string& search : searches) {
    std::vector<double> pct, speedup, vs_dnn, vs_blas, retime;
    double seconds = 0, states = 0;
    for (const Row& r : rows) {
      if (r.search != search || r.set != set) continue;
      const Libraries& l = libs.at(r.name);
      pct.push_back(100 * r.gflops / r.peak);
      if (r.start > 0) speedup.push_back(r.gflops / r.start);  // policy times no start
      vs_dnn.push_back(r.gflops / l.onednn);
      if (l.openblas > 0) vs_blas.push_back(r.gflops / l.openblas);
      if (r.retimed > 0) retime.push_back(r.retimed / r.gflops);
      seconds += r.seconds;
      states += r.states;
    }
    if (pct.empty()) continue;
    md += absl::StrFormat(
        "| %s | %.2f | %.2f | %s | %.1f | %s | %.2f | %.0f | %.0f | %.3f (min %.3f) |\n", search,
        Geomean(vs_dnn), Min(vs_dnn),
        vs_blas.empty() ? "-" : absl::StrFormat("%.2f", Geomean(vs_blas)), Geomean(pct),
        speedup.empty() ? "-" : absl::StrFormat("%.2f", Geomean(speedup)),
        seconds / pct.size(), states / pct.size(), states / seconds, Geomean(retime), Min(retime));
  }
  std::vector<double> dnn_pct, blas_pct, blas_vs_dnn;
  for (const auto& [name, l] : libs) {
    bool in_set = false;
    for (const Row& r : rows) in_set = in_set || (r.name == name && r.set == set);
    if (!in_set) continue;
    dnn_pct.push_back(100 * l.onednn / peak);
    if (l.openblas > 0) {
      blas_pct.push_back(100 * l.openblas / peak);
      blas_vs_dnn.push_back(l.openblas / l.onednn);
    }
  }
  md += absl::StrFormat("| oneDNN (reference) | 1.00 | 1.00 | %s | %.1f | | | | | |\n",
                        blas_vs_dnn.empty() ? "-" : absl::StrFormat("%.2f", 1 / Geomean(blas_vs_dnn)),
                        Geomean(dnn_pct));
  if (!blas_vs_dnn.empty()) {
    md += absl::StrFormat("| OpenBLAS (reference) | %.2f | %.2f | 1.00 | %.1f | | | | | |\n",
                          Geomean(blas_vs_dnn), Min(blas_vs_dnn), Geomean(blas_pct));
  }
  // Convolutions: oneDNN also in its own blocked layouts, and which implementations ran.
  std::vector<double> blocked_pct, blocked_vs_dnn;
  std::set<std::string> impls, blocked_impls;
  for (const auto& [name, l] : libs) {
    bool in_set = false;
    for (const Row& r : rows) in_set = in_set || (r.name == name && r.set == set);
    if (!in_set || l.onednn_blocked <= 0) continue;
    blocked_pct.push_back(100 * l.onednn_blocked / peak);
    blocked_vs_dnn.push_back(l.onednn_blocked / l.onednn);
    impls.insert(l.onednn_impl);
    blocked_impls.insert(l.onednn_blocked_impl);
  }
  if (blocked_pct.empty()) return md;
  md += absl::StrFormat(
      "| oneDNN, blocked layouts (reference) | %.2f | %.2f | - | %.1f | | | | | |\n",
      Geomean(blocked_vs_dnn), Min(blocked_vs_dnn), Geomean(blocked_pct));
  md += absl::StrFormat(
      "\noneDNN in the program's layout (NCHW, the layout the tuned kernels read and write): %s. "
      "In its own blocked layouts (format `any`, reorders into them not timed): %s.\n\n"
      "| search | geomean vs oneDNN (blocked layouts) | min |\n|---|---:|---:|\n",
      absl::StrJoin(impls, ", "), absl::StrJoin(blocked_impls, ", "));
  for (const std::string& search : searches) {
    std::vector<double> vs;
    for (const Row& r : rows) {
      if (r.search == search && r.set == set) vs.push_back(r.gflops / libs.at(r.name).onednn_blocked);
    }
    if (!vs.empty()) md += absl::StrFormat("| %s | %.2f | %.2f |\n", search, Geomean(vs), Min(vs));
  }
  return md;
}

// The searches to run (--searches: NAME or NAME@SPACE), each with the action space it runs in.
struct SearchRun {
  std::string label;  // as given
  client::SearchSpec spec;
  std::string space;
};

absl::StatusOr<std::vector<SearchRun>> ParseSearchRuns() {
  std::vector<SearchRun> runs;
  for (absl::string_view label : absl::StrSplit(absl::GetFlag(FLAGS_searches), ',',
                                                absl::SkipEmpty())) {
    const std::vector<std::string> parts = absl::StrSplit(label, absl::MaxSplits('@', 1));
    absl::StatusOr<client::SearchSpec> spec = client::ParseSearch(parts[0]);
    if (!spec.ok()) return spec.status();
    // The policy searches act in the built-in policy's action space, evolution in loop_nest.
    const client::SearchSpec::Kind kind = spec->kind;
    const std::string space = parts.size() == 2 ? parts[1]
                              : kind == client::SearchSpec::Kind::kPolicy ||
                                      kind == client::SearchSpec::Kind::kPolicyGuided
                                  ? client::Policy::Default().action_space()
                              : kind == client::SearchSpec::Kind::kEvolution ? "loop_nest"
                                                                             : "loop_tool";
    runs.push_back({std::string(label), *spec, space});
  }
  return runs;
}

// The benchmarks the flags ask for, in order: test-split and off-grid matmuls, ResNet-18's 3x3
// convolutions, MobileNet's depthwise layers.
std::vector<Bench> Benchmarks() {
  std::vector<Bench> benches;
  std::vector<Shape> shapes = TestShapes(absl::GetFlag(FLAGS_count));
  for (const Shape& s : OffGridShapes(absl::GetFlag(FLAGS_offgrid))) shapes.push_back(s);
  for (const Shape& s : shapes) {
    const std::string name = s.name();
    benches.push_back(
        {name, s.offgrid ? "offgrid" : "test",
         (s.offgrid ? "benchmark://matmul_offgrid-v0/" : "benchmark://mm64_256_16_range-v0/") +
             name,
         "", [s](int core) { return LibraryGflops(s.shape, core); }});
  }
  for (int i = 0; i < absl::GetFlag(FLAGS_convs); ++i) {
    const Conv cv = kConvs[i];
    benches.push_back({cv.name, "conv", std::string("benchmark://conv2d-v0/") + cv.name, "",
                       [cv](int core) {
                         return ConvolutionLibraries(cv.c, cv.k, cv.h, cv.w, false, core);
                       }});
  }
  for (int i = 0; i < absl::GetFlag(FLAGS_depthwise); ++i) {
    const Depthwise d = kDepthwise[i];
    benches.push_back({d.name, "depthwise", std::string("benchmark://conv2d-v0/") + d.name, "",
                       [d](int core) {
                         return ConvolutionLibraries(d.c, d.c, d.h, d.w, true, core);
                       }});
  }
  return benches;
}

client::SearchOptions OptionsFor(const SearchRun& run, const Bench& bench) {
  client::SearchOptions options;
  options.search = run.spec;
  options.time_limit_seconds = bench.set == "conv" || bench.set == "depthwise"
                                   ? absl::GetFlag(FLAGS_conv_time_limit)
                                   : absl::GetFlag(FLAGS_time_limit);
  options.retime_top = absl::GetFlag(FLAGS_retime_top);
  options.policy_seed = absl::GetFlag(FLAGS_policy_seed);
  options.sketches = absl::GetFlag(FLAGS_sketches);
  options.cost_model_candidates = absl::GetFlag(FLAGS_cost_model_candidates);
  options.cost_model_up_to_seconds = absl::GetFlag(FLAGS_cost_model_up_to_seconds);
  return options;
}

// What a run shares: the server configuration, the shared server's connection, the kernel
// worker's core, the anytime curves' file.
struct RunContext {
  const service::ServerConfig& config;
  std::shared_ptr<client::Connection> shared;
  int core = -1;
  std::ofstream& curves;
};

// One search on one benchmark (on a server of its own with --fresh_server), its best schedule
// re-timed in this process.
absl::StatusOr<Row> RunSearch(const RunContext& ctx, const Bench& bench, const SearchRun& run) {
  std::unique_ptr<service::LoopToolServer> own_server;  // shut down when the search ends
  std::shared_ptr<client::Connection> connection = ctx.shared;
  if (absl::GetFlag(FLAGS_fresh_server)) {
    ASSIGN_OR_RETURN(own_server, service::LoopToolServer::Start(ctx.config));
    ASSIGN_OR_RETURN(connection, client::Connection::Connect(own_server->address()));
  }
  ASSIGN_OR_RETURN(client::Env env,
                   bench.program.empty()
                       ? client::Env::Start(connection, bench.uri, run.space)
                       : client::Env::StartProgram(connection, bench.uri, bench.program,
                                                   run.space));
  client::SearchOptions options = OptionsFor(run, bench);
  // The anytime curve: the best GFLOPS so far (the search's own measurements) each time it
  // rises, and at the end.
  double last_best = -1;
  options.on_progress = [&](const client::SearchProgress& p) {
    if (p.best_gflops <= last_best) return;
    last_best = p.best_gflops;
    ctx.curves << absl::StrFormat("%s,%s,%s,%.4f,%d,%.3f\n", bench.name, bench.set, run.label,
                                  p.elapsed_seconds, p.states_evaluated, p.best_gflops);
  };
  ASSIGN_OR_RETURN(const client::SearchResult r, client::Search(env, options));
  ctx.curves << absl::StrFormat("%s,%s,%s,%.4f,%d,%.3f\n", bench.name, bench.set, run.label,
                                r.seconds, r.states_evaluated,
                                std::max(last_best, r.search_gflops));
  const double retimed =
      Retime(r.ir, ctx.core, ctx.config.workers.isa, ctx.config.workers.budget_ms / 1000);
  return Row{bench.name, bench.set, run.label, r.gflops, r.start_gflops, r.peak_gflops, r.seconds,
             retimed, r.states_evaluated, r.actions.size()};
}

std::string Csv(const std::vector<Row>& rows, const std::map<std::string, Libraries>& libs) {
  std::string csv =
      "shape,set,search,gflops,percent_of_peak,speedup,seconds,states_evaluated,actions,"
      "start_gflops,peak_gflops,onednn_gflops,openblas_gflops,retimed_gflops\n";
  for (const Row& r : rows) {
    const Libraries& l = libs.at(r.name);
    csv += absl::StrFormat("%s,%s,%s,%.2f,%.1f,%.3f,%.2f,%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f\n",
                           r.name, r.set, r.search, r.gflops, 100 * r.gflops / r.peak,
                           r.gflops / r.start, r.seconds, r.states, r.actions, r.start, r.peak,
                           l.onednn, l.openblas, r.retimed);
  }
  return csv;
}

// The report's opening paragraph: how everything was measured.
std::string Preamble(const service::ServerConfig& config, int core, double peak) {
  const std::string timing = AbslUnparseFlag(absl::GetFlag(FLAGS_timing));
  const double limit = absl::GetFlag(FLAGS_time_limit);
  std::string md = absl::StrFormat(
      "# tune_bench\n\nEach search limited to %g s, through the C++ client against %s in "
      "the same process (kernel worker on cpu %d; %s timing, budget %.0f ms per new schedule%s). "
      "GFLOPS are the server's measurements (fastest run; %s); the measured FMA peak is %.1f "
      "GFLOPS. oneDNN %s (matmul primitive) and OpenBLAS cblas_sgemm (%s): one thread, same core, "
      "this run. Retimed: the best schedule compiled, verified and timed again after the search "
      "in a fresh evaluator in this process (fixed %.0f ms budget, same core), over the GFLOPS "
      "the search reported.%s\n",
      limit,
      absl::GetFlag(FLAGS_fresh_server)
          ? "a server started for it (--fresh_server: no search reuses another's measurements)"
          : "one server shared by every search and shape (--fresh_server=false: later searches "
            "reuse earlier ones' measurements)",
      core, timing, config.workers.budget_ms, timing == "adaptive" ? " at most" : "",
      absl::GetFlag(FLAGS_retime_top) > 0
          ? absl::StrFormat("--retime_top=%d: the start and the %d best kernels timed again by "
                            "the server at the end of each search, the fastest reported",
                            absl::GetFlag(FLAGS_retime_top), absl::GetFlag(FLAGS_retime_top))
          : std::string("--retime_top=0: as each search measured them"),
      peak, OneDnnVersion(), OpenBlasCore(), config.workers.budget_ms,
      absl::GetFlag(FLAGS_policy_seed)
          ? " Evolution runs in loop_nest unless named NAME@SPACE and starts from the built-in "
            "policy's episode (--policy_seed; translated to level pointers in loop_nest)."
          : " Evolution starts from random rollouts only (--policy_seed=false).");
  md += absl::GetFlag(FLAGS_sketches)
            ? " Evolution measures the server's sketches (LoopNest-style register blocks, "
              "`sketches` observation) first."
            : " Evolution without the server's sketches (--sketches=false).";
  const bool model = absl::GetFlag(FLAGS_cost_model_candidates) > 1 &&
                     limit <= absl::GetFlag(FLAGS_cost_model_up_to_seconds);
  md += model ? absl::StrFormat(
                    " Evolution's cost model ranks %d proposed children per measured one "
                    "(--cost_model_candidates).\n",
                    absl::GetFlag(FLAGS_cost_model_candidates))
              : std::string(" Evolution measures every child it proposes (no cost model at "
                            "this limit: --cost_model_candidates, "
                            "--cost_model_up_to_seconds).\n");
  return md;
}

// The report: the preamble and one summary table per set of benchmarks.
std::string Report(const std::string& preamble, const std::vector<std::string>& searches,
                   const std::vector<Row>& rows, const std::map<std::string, Libraries>& libs,
                   double peak) {
  std::string md = preamble;
  if (const int count = absl::GetFlag(FLAGS_count); count > 0) {
    md += absl::StrFormat("\n## %d test-split matmuls of mm64_256_16_range-v0\n\n", count);
    md += SummaryTable(searches, rows, "test", libs, peak);
  }
  if (const int offgrid = absl::GetFlag(FLAGS_offgrid); offgrid > 0) {
    md += absl::StrFormat(
        "\n## %d matmuls off the grid (matmul_offgrid-v0: odd, prime, rectangular)\n\n",
        static_cast<int>(OffGridShapes(offgrid).size()));
    md += SummaryTable(searches, rows, "offgrid", libs, peak);
  }
  if (const int convs = absl::GetFlag(FLAGS_convs); convs > 0) {
    md += absl::StrFormat(
        "\n## %d convolution layers of conv2d-v0 (ResNet-18's 3x3, stride 1; oneDNN's direct "
        "convolution)\n\n", convs);
    md += SummaryTable(searches, rows, "conv", libs, peak);
  }
  if (const int depthwise = absl::GetFlag(FLAGS_depthwise); depthwise > 0) {
    md += absl::StrFormat(
        "\n## %d depthwise layers of conv2d-v0 (MobileNet's 3x3, stride 1; oneDNN's direct "
        "convolution, one group per channel)\n\n", depthwise);
    md += SummaryTable(searches, rows, "depthwise", libs, peak);
  }
  md += "\nPer shape and search: tune_bench.csv; best GFLOPS over time: tune_bench_curves.csv.\n";
  return md;
}

absl::Status CheckFlags() {
  if (absl::GetFlag(FLAGS_time_limit) <= 0 || absl::GetFlag(FLAGS_count) < 0 ||
      absl::GetFlag(FLAGS_offgrid) < 0 || absl::GetFlag(FLAGS_retime_top) < 0 ||
      absl::GetFlag(FLAGS_retime_top) > 16 || absl::GetFlag(FLAGS_convs) < 0 ||
      absl::GetFlag(FLAGS_convs) > 4 || absl::GetFlag(FLAGS_depthwise) < 0 ||
      absl::GetFlag(FLAGS_depthwise) > 4) {
    return absl::InvalidArgumentError(
        "--time_limit must be positive, --count and --offgrid at least 0, --retime_top 0..16, "
        "--convs and --depthwise 0..4");
  }
  return absl::OkStatus();
}

absl::Status Run() {
  RETURN_IF_ERROR(CheckFlags());
  ASSIGN_OR_RETURN(const service::ServerConfig config, service::ServerConfigFromFlags());
  ASSIGN_OR_RETURN(const std::vector<SearchRun> runs, ParseSearchRuns());
  const std::string dir = absl::GetFlag(FLAGS_out);
  RETURN_IF_ERROR(bench::PrepareReportDirectory(dir));
  // Process-wide pinning is main's (LoopToolServer::Start leaves it alone): this process's
  // threads (server, client, search) stay off the kernel worker's core.
  service::PinAwayFrom(config.workers.cores);
  ASSIGN_OR_RETURN(std::unique_ptr<service::LoopToolServer> server,
                   service::LoopToolServer::Start(config));
  ASSIGN_OR_RETURN(std::shared_ptr<client::Connection> connection,
                   client::Connection::Connect(server->address()));
  std::ofstream curves(dir + "/tune_bench_curves.csv");
  if (!curves) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", dir, "/tune_bench_curves.csv for writing"));
  }
  curves << "shape,set,search,seconds,states_evaluated,best_gflops\n";
  const RunContext ctx{config, connection, server->eval_cores()[0], curves};
  std::vector<Row> rows;
  std::map<std::string, Libraries> libs;
  for (const Bench& bench : Benchmarks()) {
    const Libraries& lib = libs[bench.name] = bench.libraries(ctx.core);
    for (const SearchRun& run : runs) {
      absl::StatusOr<Row> row = RunSearch(ctx, bench, run);
      if (!row.ok()) {
        return absl::Status(row.status().code(), absl::StrCat(bench.name, " ", run.label, ": ",
                                                              row.status().message()));
      }
      const Row& r = *row;
      std::printf("%-18s %-9s %7.1f GFLOPS %5.2fx oneDNN %5.2fx OpenBLAS %5.1f%% of peak %5.1f s "
                  "%5lld states, retimed %.3f\n",
                  r.name.c_str(), r.search.c_str(), r.gflops, r.gflops / lib.onednn,
                  lib.openblas > 0 ? r.gflops / lib.openblas : 0, 100 * r.gflops / r.peak,
                  r.seconds, static_cast<long long>(r.states), r.retimed / r.gflops);
      std::fflush(stdout);
      rows.push_back(r);
    }
  }
  RETURN_IF_ERROR(bench::WriteReportFile(dir + "/tune_bench.csv", Csv(rows, libs)));
  std::vector<std::string> labels;
  for (const SearchRun& run : runs) labels.push_back(run.label);
  const double peak = server->peak_gflops();
  const std::string md =
      Report(Preamble(config, ctx.core, peak), labels, rows, libs, peak);
  std::printf("\n%s", md.c_str());
  server->Shutdown();
  curves.close();
  if (!curves) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write ", dir, "/tune_bench_curves.csv"));
  }
  return bench::WriteReportFile(dir + "/tune_bench.md", md);
}

int Main() {
  const absl::Status s = Run();
  if (s.ok()) return 0;
  std::fprintf(stderr, "tune_bench: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace
}  // namespace looptool::bench

int main(int argc, char** argv) {
  if (auto rc = looptool::MaybeRunKernelWorker(argc, argv)) return *rc;
  looptool::bench::ReexecWithCleanEnvironment(argv);
  absl::ParseCommandLine(argc, argv);
  return looptool::bench::Main();
}
