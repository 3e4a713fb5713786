// jit_bench: what the JIT's kernels reach, as ratios to the measured FMA peak, next to the
// libraries a user would pick instead, all in this process on one pinned core.
//
//   bazel run -c opt //bench:jit_bench -- [--sweep=grid|range] [--budget_ms=10]
//
// Matmuls (LoopTune's shapes and a mixed set): the untiled start schedule, the best of a few
// hand schedules, JIT compile time, oneDNN's matmul and OpenBLAS cblas_sgemm (single thread,
// OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed: the process re-executes itself without them).
// Then a convolution, a max pooling and a row reduction against oneDNN and -O3 loops, and the
// cost of a new state's full evaluation (compile, verify, time). Tables go to stdout and
// bench/results/ (markdown and CSV).
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backend/actions/apply.h"
#include "backend/codegen/compile.h"
#include "backend/ir/parser.h"
#include "backend/timing/local_timer.h"
#include "backend/timing/peak.h"
#include "bench/clean_environment.h"
#include "bench/hand_schedules.h"
#include "bench/references.h"
#include "bench/report_files.h"
#include "datasets/matmul_range.h"

ABSL_FLAG(std::string, sweep, "", "also sweep matmul shapes: 'grid' (64..256 step 64) or 'range' "
                                  "(all 2197 of mm64_256_16_range-v0)");
ABSL_FLAG(double, budget_ms, 10, "timing budget per kernel (fastest single run within it)");
ABSL_FLAG(int, core, -1, "core to pin to (default: the last one)");
ABSL_FLAG(std::string, out, "bench/results", "directory for the result files");

namespace looptool::bench {
namespace {

void PinToCore(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) std::perror("sched_setaffinity");
}

TimingOptions Budget() {
  TimingOptions t;
  t.budget_seconds = absl::GetFlag(FLAGS_budget_ms) / 1000;
  return t;
}

double Seconds(const std::function<void()>& run) { return MeasureRuns(run, Budget()).min_seconds; }

// Median compile time of a schedule over many compiles.
double CompileSeconds(KernelCompiler& compiler, const LoopTree& tree, int repeats = 101) {
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    (void)compiler.Compile(tree);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

// Largest relative difference between a library's output and the reference interpreter's.
double MaxRelativeError(const TensorBuffer& want, const float* got) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(want[i] - got[i]) / (1.0 + std::fabs(want[i])));
  }
  return worst;
}

struct Row {
  std::string name;
  std::vector<std::pair<std::string, std::string>> cells;
};

class Report {
 public:
  void Add(Row row) { rows_.push_back(std::move(row)); }
  std::string Markdown() const {
    if (rows_.empty()) return "";
    std::string out = "| case |";
    std::string rule = "|---|";
    for (const auto& [h, v] : rows_[0].cells) {
      absl::StrAppend(&out, " ", h, " |");
      rule += "---:|";
    }
    out += "\n" + rule + "\n";
    for (const Row& r : rows_) {
      absl::StrAppend(&out, "| ", r.name, " |");
      for (const auto& [h, v] : r.cells) absl::StrAppend(&out, " ", v, " |");
      out += "\n";
    }
    return out;
  }
  std::string Csv() const {
    if (rows_.empty()) return "";
    std::string out = "case";
    for (const auto& [h, v] : rows_[0].cells) absl::StrAppend(&out, ",", h);
    out += "\n";
    for (const Row& r : rows_) {
      out += r.name;
      for (const auto& [h, v] : r.cells) absl::StrAppend(&out, ",", v);
      out += "\n";
    }
    return out;
  }

 private:
  std::vector<Row> rows_;
};

std::string Pct(double gflops, double peak) { return absl::StrFormat("%.0f%%", 100 * gflops / peak); }
std::string Gf(double gflops) { return absl::StrFormat("%.1f", gflops); }

class Bench {
 public:
  Bench(Isa isa, double peak) : isa_(isa), peak_(peak), compiler_(isa) {
    LocalTimer::Options o;
    o.isa = isa;
    o.timing = Budget();
    evaluator_ = std::make_unique<LocalTimer>(o);
  }

  // GFLOPS of a schedule (compiled, verified, timed), or 0 when it failed.
  double Gflops(const LoopTree& tree) {
    auto m = evaluator_->Measure(tree);
    if (!m.ok()) {
      std::printf("  error: %s\n", std::string(m.status().message()).c_str());
      return 0;
    }
    return m->gflops;
  }

  Row Matmul(int64_t M, int64_t N, int64_t K, bool with_libraries) {
    const datasets::MatmulShape shape{M, N, K};
    auto program = std::make_shared<const Program>(
        *ParseProgram(datasets::MatmulProgram(shape), Limits{}));
    const LoopTree untiled = LoopTree::Initial(program);
    const double untiled_gf = Gflops(untiled);
    double best = 0;
    MatmulTile best_tile{};
    for (const MatmulTile& tile : MatmulTiles()) {
      const double gf = Gflops(TiledMatmul(program, tile));
      if (gf > best) {
        best = gf;
        best_tile = tile;
      }
    }
    const LoopTree best_tree = TiledMatmul(program, best_tile);
    Row row{absl::StrCat(M, "x", N, "x", K), {}};
    row.cells = {{"untiled GFLOPS", Gf(untiled_gf)},
                 {"untiled % peak", Pct(untiled_gf, peak_)},
                 {"best hand GFLOPS", Gf(best)},
                 {"best hand % peak", Pct(best, peak_)},
                 {"best hand tile", best_tile.Name()},
                 {"compile us (median)",
                  absl::StrFormat("%.0f", 1e6 * CompileSeconds(compiler_, best_tree, with_libraries ? 101 : 11))}};
    if (with_libraries) {
      const ReferenceRun ref = MakeReference(*program);
      TensorData data = ref.expected;
      const float *A = data[1].data(), *B = data[2].data();
      float* C = data[0].data();
      const double flops = static_cast<double>(program->Flops());
      for (auto [name, lib] : {std::make_pair("oneDNN", OneDnnMatmul(M, N, K, A, B, C)),
                               std::make_pair("OpenBLAS", OpenBlasSgemm(M, N, K, A, B, C))}) {
        lib.run();
        const double err = MaxRelativeError(ref.expected[0], C);
        const double gf = flops / Seconds(lib.run) * 1e-9;
        row.cells.push_back({absl::StrCat(name, " % peak"), Pct(gf, peak_)});
        row.cells.push_back({absl::StrCat(name, " kernel"), lib.implementation});
        if (err > 1e-5) row.cells.back().second += absl::StrFormat(" (max error %.1e!)", err);
        if (std::string(name) == "OpenBLAS") {
          row.cells.push_back({"hand / OpenBLAS", absl::StrFormat("%.2f", best / gf)});
        }
      }
    }
    return row;
  }

  // A program with hand schedules (loop orders) against a library and a -O3 loop.
  Row Other(const std::string& name, const std::string& program_text,
            const std::vector<std::string>& orders,
            const std::function<std::pair<Reference, Reference>(TensorData&)>& refs) {
    auto program = std::make_shared<const Program>(*ParseProgram(program_text, Limits{}));
    const double untiled = Gflops(LoopTree::Initial(program));
    double best = 0;
    std::string best_order;
    for (const std::string& order : orders) {
      auto tree = ScheduleFromOrder(program_text, order);
      if (!tree.ok()) {
        std::printf("  bad hand schedule %s: %s\n", order.c_str(), std::string(tree.status().message()).c_str());
        continue;
      }
      const double gf = Gflops(*tree);
      if (gf > best) {
        best = gf;
        best_order = order;
      }
    }
    const ReferenceRun ref = MakeReference(*program);
    TensorData data = ref.expected;
    auto [lib, loop] = refs(data);
    const int out = program->OutputTensors()[0];
    const double flops = static_cast<double>(program->Flops());
    Row row{name, {}};
    row.cells = {{"untiled % peak", Pct(untiled, peak_)},
                 {"best hand GFLOPS", Gf(best)},
                 {"best hand % peak", Pct(best, peak_)},
                 {"best hand order", best_order}};
    for (auto [label, r] : {std::make_pair("oneDNN", lib), std::make_pair("-O3 loop", loop)}) {
      r.run();
      const double err = MaxRelativeError(ref.expected[out], data[out].data());
      const double gf = flops / Seconds(r.run) * 1e-9;
      row.cells.push_back({absl::StrCat(label, " GFLOPS"), Gf(gf)});
      row.cells.push_back({absl::StrCat(label, " impl"),
                           r.implementation + (err > 1e-4 ? absl::StrFormat(" (max error %.1e!)", err) : "")});
      row.cells.push_back({absl::StrCat("hand / ", label), absl::StrFormat("%.2f", best / gf)});
    }
    return row;
  }

  // Wall time of a new state's full evaluation (compile, verify on first sight, time) with the
  // default 10 ms budget, over random schedules of mm128_128_128.
  std::vector<double> NewStateSeconds(int states) {
    LocalTimer::Options o;
    o.isa = isa_;
    LocalTimer fresh(o);
    auto program = std::make_shared<const Program>(
        *ParseProgram(datasets::MatmulProgram({128, 128, 128}), Limits{}));
    (void)fresh.Measure(LoopTree::Initial(program));  // the program's reference, once
    std::mt19937 rng(7);
    std::vector<double> out;
    while (static_cast<int>(out.size()) < states) {
      LoopTree t = LoopTree::Initial(program);
      for (int i = 0; i < 8; ++i) {
        t = Apply(t, LoopTuneActionSpace().actions[rng() % 7], Limits{}).tree;
      }
      const int64_t before = fresh.stats().measured;
      const auto start = std::chrono::steady_clock::now();
      (void)fresh.Measure(t);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (fresh.stats().measured > before) out.push_back(s);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  Isa isa_;
  double peak_;
  KernelCompiler compiler_;
  std::unique_ptr<LocalTimer> evaluator_;
};

// Writes a report file; false (and a line on stderr) when it cannot.
bool Write(const std::string& path, const std::string& text) {
  const absl::Status s = WriteReportFile(path, text);
  if (!s.ok()) std::fprintf(stderr, "jit_bench: %s\n", s.ToString().c_str());
  return s.ok();
}

int Main() {
  const int core = absl::GetFlag(FLAGS_core) >= 0 ? absl::GetFlag(FLAGS_core)
                                                  : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) - 1;
  if (absl::Status s = looptool::bench::PrepareReportDirectory(absl::GetFlag(FLAGS_out)); !s.ok()) {
    std::fprintf(stderr, "jit_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  PinToCore(core);
  const Isa isa = DetectIsa();
  const double peak = *MeasurePeakGflops(isa, 1.0);
  std::string header = absl::StrFormat(
      "# jit_bench\n\nisa %s, core %d, measured FMA peak %.1f GFLOPS (the 100%% below); timing: "
      "fastest single run within %.0f ms after warm-up. OpenBLAS core: %s. oneDNN %s.\n\n",
      Traits(isa).name, core, peak, absl::GetFlag(FLAGS_budget_ms), OpenBlasCore(), OneDnnVersion());
  std::printf("%s", header.c_str());
  Bench bench(isa, peak);

  Report matmuls;
  const std::vector<std::array<int64_t, 3>> shapes = {
      {64, 64, 64},    {128, 128, 128}, {256, 256, 256}, {112, 208, 256}, {80, 224, 240},
      {64, 192, 128},  {160, 96, 240},  {208, 144, 176}, {240, 256, 80},  {96, 112, 144},
      {176, 64, 224},  {256, 80, 160}};
  for (const auto& s : shapes) {
    matmuls.Add(bench.Matmul(s[0], s[1], s[2], true));
    std::printf(".");
    std::fflush(stdout);
  }
  std::printf("\n\n## Matmul C[m,n] += A[m,k] * B[k,n]\n\n%s\n", matmuls.Markdown().c_str());

  Report others;
  others.Add(bench.Other(
      "conv 64->64 ch, 56x56, 3x3 (NCHW)", "O[k,h,w] += I[c, h+r, w+s] * W[k,c,r,s]; k=64 h=56 w=56 c=64 r=3 s=3",
      {"k(16) h(56) c(64) r(3) s(3) k(4) w(56)", "k(32) h(56) c(64) r(3) s(3) k(2) w(56)",
       "k(16) h(28) c(64) r(3) s(3) k(4) h(2) w(56)"},
      [](TensorData& d) {
        return std::make_pair(OneDnnConv(64, 64, 56, 56, 3, d[1].data(), d[2].data(), d[0].data()),
                              LoopConv(64, 64, 56, 56, 3, d[1].data(), d[2].data(), d[0].data()));
      }));
  others.Add(bench.Other(
      "max pool 3x3 stride 2, 64 ch, 28x28 out (NHWC)", "O[h,w,c] max= I[2*h+r, 2*w+s, c]; h=28 w=28 c=64 r=3 s=3",
      {"h(28) w(28) r(3) s(3) c(64)", "h(28) w(7) r(3) s(3) w(4) c(64)"},
      [](TensorData& d) {
        return std::make_pair(OneDnnMaxPool(64, 28, 28, 3, d[1].data(), d[0].data()),
                              LoopMaxPool(64, 28, 28, 3, d[1].data(), d[0].data()));
      }));
  others.Add(bench.Other(
      "row sums 256x1024", "s[m] += A[m,n]; m=256 n=1024",
      {"m(16) n(64) m(16) n(16)", "m(32) n(128) m(8) n(8)"},
      [](TensorData& d) {
        return std::make_pair(OneDnnRowSum(256, 1024, d[1].data(), d[0].data()),
                              LoopRowSum(256, 1024, d[1].data(), d[0].data()));
      }));
  std::printf("## Other primitives\n\n%s\n", others.Markdown().c_str());

  const std::vector<double> eval = bench.NewStateSeconds(60);
  const std::string eval_line = absl::StrFormat(
      "## New state evaluation (compile + verify + time, 10 ms budget), mm128_128_128\n\n"
      "%d new states: median %.1f ms, p90 %.1f ms, max %.1f ms\n",
      static_cast<int>(eval.size()), 1e3 * eval[eval.size() / 2], 1e3 * eval[eval.size() * 9 / 10],
      1e3 * eval.back());
  std::printf("%s\n", eval_line.c_str());

  const std::string dir = absl::GetFlag(FLAGS_out);
  bool written = Write(dir + "/jit_bench.md", header + "## Matmul\n\n" + matmuls.Markdown() +
                                                  "\n## Other primitives\n\n" +
                                                  others.Markdown() + "\n" + eval_line);
  written = Write(dir + "/jit_bench_matmul.csv", matmuls.Csv()) && written;
  written = Write(dir + "/jit_bench_other.csv", others.Csv()) && written;

  const std::string sweep = absl::GetFlag(FLAGS_sweep);
  if (!sweep.empty()) {
    Report rows;
    const int64_t step = sweep == "range" ? 16 : 64;
    int below = 0, total = 0;
    for (int64_t m = 64; m <= 256; m += step) {
      for (int64_t n = 64; n <= 256; n += step) {
        for (int64_t k = 64; k <= 256; k += step) {
          Row r = bench.Matmul(m, n, k, true);
          ++total;
          for (const auto& [h, v] : r.cells) {
            if (h == "hand / OpenBLAS" && std::stod(v) < 1.0) ++below;
          }
          rows.Add(std::move(r));
        }
      }
      std::printf(".");
      std::fflush(stdout);
    }
    std::printf("\nsweep %s: %d shapes, best hand schedule below OpenBLAS on %d\n", sweep.c_str(),
                total, below);
    written = Write(dir + "/jit_bench_sweep_" + sweep + ".csv", rows.Csv()) && written;
  }
  return written ? 0 : 1;
}

}  // namespace
}  // namespace looptool::bench

int main(int argc, char** argv) {
  looptool::bench::ReexecWithCleanEnvironment(argv);
  absl::ParseCommandLine(argc, argv);
  return looptool::bench::Main();
}
