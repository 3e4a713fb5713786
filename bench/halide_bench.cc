// halide_bench: Halide's autoschedulers (Debian's Halide 14: Mullapudi2016, Li2018, Adams2019
// with its built-in weights) on the matmuls tune_bench uses, as the stand-in for the LoopTune
// paper's TVM/MetaSchedule baselines. Per shape and autoscheduler: the time to schedule and
// JIT-compile the pipeline, its GFLOPS (one thread, on one pinned core, fastest run of a fixed
// budget, output checked against a naive matmul), and oneDNN's single-thread matmul on the same
// core in the same run.
//
//   bazel run //bench:halide_bench -- --count=25 --offgrid=12 --out=bench/results
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backend/timing/host_cpu.h"
#include "backend/timing/measure.h"
#include "bench/clean_environment.h"
#include "bench/matmul_shapes.h"
#include "bench/references.h"
#include "bench/report_files.h"
#include "halide14/Halide.h"

ABSL_FLAG(int, count, 25, "test-split matmuls (spread evenly over the split); 0: none");
ABSL_FLAG(int, offgrid, 12, "matmuls off the dataset's grid (the first N of a fixed list)");
ABSL_FLAG(int, convs, 0, "ResNet-18 3x3 convolution layers (0..4, conv5 first), as tune_bench's");
ABSL_FLAG(std::string, autoschedulers, "Mullapudi2016,Li2018,Adams2019",
          "comma-separated Halide autoschedulers");
ABSL_FLAG(int, core, -1, "CPU to pin the timing thread to (default: the last one we may use)");
ABSL_FLAG(double, budget_ms, 50, "timing budget per kernel (fastest run counts)");
ABSL_FLAG(std::string, out, "bench/results", "directory for halide_bench.md and .csv");

namespace looptool::bench {
namespace {

constexpr char kPluginDir[] = "/usr/lib/x86_64-linux-gnu/halide14/";

std::string PluginFile(const std::string& autoscheduler) {
  std::string lower = autoscheduler;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  return absl::StrCat(kPluginDir, "libautoschedule_", lower, ".so");
}

// A benchmark: a matmul (set "test" or "offgrid") or a stride-1 3x3 convolution ("conv").
struct Case {
  std::string name, set;
  int m = 0, n = 0, k = 0;       // matmul
  int c = 0, kk = 0, h = 0, w = 0;  // convolution: channels in/out, output height/width
};

struct Result {
  Case bench;
  std::string autoscheduler;
  double schedule_seconds = 0;  // auto_schedule + compile_jit
  double gflops = 0;            // 0: failed
  double onednn = 0;
  std::string error;
};

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Schedules `pipeline` with `autoscheduler` and JIT-compiles it for the host, timing both into
// r.schedule_seconds; false (with r.error) when Halide refuses.
bool ScheduleAndCompile(Halide::Pipeline& pipeline, const std::string& autoscheduler, Result& r) {
  const Halide::Target target = Halide::get_host_target();
  try {
    const auto t0 = std::chrono::steady_clock::now();
    // One core, LoopNest's setting: parallelism 1; last-level cache and balance as Halide's
    // defaults for a CPU.
    pipeline.auto_schedule(autoscheduler, target, Halide::MachineParams(1, 16 << 20, 40));
    pipeline.compile_jit(target);
    r.schedule_seconds = Seconds(t0, std::chrono::steady_clock::now());
    return true;
  } catch (const Halide::Error& e) {
    r.error = e.what();
    return false;
  }
}

// C(n, m) = sum_k A(k, m) * B(n, k): row-major C[M][N] = A[M][K] * B[K][N] in Halide's
// innermost-first dimension order.
Result TuneMatmul(const Case& s, const std::string& autoscheduler, double budget) {
  const int M = s.m, N = s.n, K = s.k;
  Result r{s, autoscheduler};
  Halide::ImageParam A(Halide::Float(32), 2, "A"), B(Halide::Float(32), 2, "B");
  Halide::Var n("n"), m("m");
  Halide::RDom k(0, K);
  Halide::Func C("C");
  C(n, m) = 0.0f;
  C(n, m) += A(k, m) * B(n, k);
  A.dim(0).set_estimate(0, K);
  A.dim(1).set_estimate(0, M);
  B.dim(0).set_estimate(0, N);
  B.dim(1).set_estimate(0, K);
  C.set_estimate(n, 0, N).set_estimate(m, 0, M);
  Halide::Pipeline pipeline(C);
  if (!ScheduleAndCompile(pipeline, autoscheduler, r)) return r;
  Halide::Buffer<float> a(K, M), b(N, K), c(N, M);
  for (int y = 0; y < M; ++y) {
    for (int x = 0; x < K; ++x) a(x, y) = static_cast<float>((x * 7 + y * 3) % 5 - 2);
  }
  for (int y = 0; y < K; ++y) {
    for (int x = 0; x < N; ++x) b(x, y) = static_cast<float>((x + y * 5) % 7 - 3);
  }
  A.set(a);
  B.set(b);
  pipeline.realize(c);
  // Small integers: every product and sum is exact in float.
  for (int y = 0; y < M; ++y) {
    for (int x = 0; x < N; ++x) {
      float expected = 0;
      for (int z = 0; z < K; ++z) expected += a(z, y) * b(x, z);
      if (c(x, y) != expected) {
        r.error = absl::StrFormat("wrong result at (%d, %d): %g, expected %g", y, x, c(x, y),
                                  expected);
        return r;
      }
    }
  }
  TimingOptions t;
  t.budget_seconds = budget;
  t.warmup_seconds = 0.01;
  const double flops = 2.0 * M * N * K;
  r.gflops = flops / MeasureRuns([&] { pipeline.realize(c); }, t).min_seconds * 1e-9;
  std::vector<float> fa(M * K, 1.0f), fb(K * N, 0.5f), fc(M * N);
  r.onednn = flops /
             MeasureRuns(OneDnnMatmul(M, N, K, fa.data(), fb.data(), fc.data()).run, t)
                 .min_seconds * 1e-9;
  return r;
}

// O(x, y, k) = sum_{s, r, c} I(x + s, y + r, c) * W(s, r, c, k): conv2d-v0's
// O[k,h,w] += I[c,h+r,w+s] * W[k,c,r,s] (CHW) in Halide's innermost-first order.
Result TuneConv(const Case& cv, const std::string& autoscheduler, double budget) {
  Result r{cv, autoscheduler};
  const int C = cv.c, K = cv.kk, H = cv.h, W = cv.w;
  Halide::ImageParam I(Halide::Float(32), 3, "I"), Wt(Halide::Float(32), 4, "W");
  Halide::Var x("x"), y("y"), k("k");
  Halide::RDom red(0, 3, 0, 3, 0, C);
  Halide::Func O("O");
  O(x, y, k) = 0.0f;
  O(x, y, k) += I(x + red.x, y + red.y, red.z) * Wt(red.x, red.y, red.z, k);
  I.dim(0).set_estimate(0, W + 2);
  I.dim(1).set_estimate(0, H + 2);
  I.dim(2).set_estimate(0, C);
  Wt.dim(0).set_estimate(0, 3);
  Wt.dim(1).set_estimate(0, 3);
  Wt.dim(2).set_estimate(0, C);
  Wt.dim(3).set_estimate(0, K);
  O.set_estimate(x, 0, W).set_estimate(y, 0, H).set_estimate(k, 0, K);
  Halide::Pipeline pipeline(O);
  if (!ScheduleAndCompile(pipeline, autoscheduler, r)) return r;
  Halide::Buffer<float> in(W + 2, H + 2, C), wt(3, 3, C, K), out(W, H, K);
  in.for_each_element([&](int a, int b, int c) { in(a, b, c) = (a + 2 * b + 3 * c) % 5 - 2; });
  wt.for_each_element([&](int a, int b, int c, int d) { wt(a, b, c, d) = (a + b + c + d) % 3 - 1; });
  I.set(in);
  Wt.set(wt);
  pipeline.realize(out);
  // A sample of outputs against the sum itself (small integers: exact in float).
  for (int kk = 0; kk < K; kk += 7) {
    for (int yy = 0; yy < H; yy += 3) {
      for (int xx = 0; xx < W; xx += 2) {
        float expected = 0;
        for (int c = 0; c < C; ++c) {
          for (int dy = 0; dy < 3; ++dy) {
            for (int dx = 0; dx < 3; ++dx) expected += in(xx + dx, yy + dy, c) * wt(dx, dy, c, kk);
          }
        }
        if (out(xx, yy, kk) != expected) {
          r.error = absl::StrFormat("wrong result at (%d, %d, %d)", kk, yy, xx);
          return r;
        }
      }
    }
  }
  TimingOptions t;
  t.budget_seconds = budget;
  t.warmup_seconds = 0.01;
  const double flops = 2.0 * K * C * H * W * 9;
  r.gflops = flops / MeasureRuns([&] { pipeline.realize(out); }, t).min_seconds * 1e-9;
  std::vector<float> fi(C * (H + 2) * (W + 2), 1.0f), fw(K * C * 9, 0.5f), fo(K * H * W);
  r.onednn = flops / MeasureRuns(OneDnnConv(C, K, H, W, 3, fi.data(), fw.data(), fo.data()).run,
                                 t).min_seconds * 1e-9;
  return r;
}

double Geomean(const std::vector<double>& v) {
  double log_sum = 0;
  for (double x : v) log_sum += std::log(x);
  return v.empty() ? 0 : std::exp(log_sum / v.size());
}

int Main() {
  const int count = absl::GetFlag(FLAGS_count), offgrid = absl::GetFlag(FLAGS_offgrid);
  const int convs = absl::GetFlag(FLAGS_convs);
  const double budget = absl::GetFlag(FLAGS_budget_ms) / 1000;
  if (count < 0 || offgrid < 0 || convs < 0 || convs > 4 || !(budget > 0)) {
    std::fprintf(stderr, "halide_bench: --count and --offgrid at least 0, --convs 0..4, "
                         "--budget_ms positive\n");
    return 1;
  }
  if (absl::Status s = looptool::bench::PrepareReportDirectory(absl::GetFlag(FLAGS_out)); !s.ok()) {
    std::fprintf(stderr, "halide_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  const std::vector<std::string> autoschedulers =
      absl::StrSplit(absl::GetFlag(FLAGS_autoschedulers), ',', absl::SkipEmpty());
  for (const std::string& a : autoschedulers) {
    try {
      Halide::load_plugin(PluginFile(a));
    } catch (const Halide::Error& e) {
      std::fprintf(stderr, "halide_bench: cannot load the %s autoscheduler (%s): %s\n", a.c_str(),
                   PluginFile(a).c_str(), e.what());
      return 1;
    }
  }
  int core = absl::GetFlag(FLAGS_core);
  if (core < 0) {
    cpu_set_t set;
    sched_getaffinity(0, sizeof(set), &set);
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) core = c;
    }
  }
  PinThisThread(core);
  std::vector<Case> cases;
  std::vector<Shape> shapes = TestShapes(count);
  for (const Shape& s : OffGridShapes(offgrid)) shapes.push_back(s);
  for (const Shape& s : shapes) {
    cases.push_back({s.name(), s.offgrid ? "offgrid" : "test", static_cast<int>(s.shape.m),
                     static_cast<int>(s.shape.n), static_cast<int>(s.shape.k)});
  }
  // tune_bench's convolutions, in its order.
  const Case kConvs[] = {{"resnet18_conv5_3x3", "conv", 0, 0, 0, 512, 512, 7, 7},
                         {"resnet18_conv4_3x3", "conv", 0, 0, 0, 256, 256, 14, 14},
                         {"resnet18_conv3_3x3", "conv", 0, 0, 0, 128, 128, 28, 28},
                         {"resnet18_conv2_3x3", "conv", 0, 0, 0, 64, 64, 56, 56}};
  for (int i = 0; i < convs; ++i) cases.push_back(kConvs[i]);
  std::vector<Result> results;
  for (const Case& s : cases) {
    for (const std::string& a : autoschedulers) {
      results.push_back(s.set == "conv" ? TuneConv(s, a, budget) : TuneMatmul(s, a, budget));
      const Result& r = results.back();
      std::fprintf(stderr, "%-18s %-14s %6.2f s to schedule+compile  %7.2f GFLOPS  oneDNN %7.2f%s%s\n",
                   s.name.c_str(), a.c_str(), r.schedule_seconds, r.gflops, r.onednn,
                   r.error.empty() ? "" : "  ", r.error.c_str());
    }
  }
  const std::string dir = absl::GetFlag(FLAGS_out);
  std::string csv = "shape,set,autoscheduler,schedule_seconds,gflops,onednn_gflops,error\n";
  for (const Result& r : results) {
    csv += absl::StrFormat("%s,%s,%s,%.4f,%.3f,%.3f,\"%s\"\n", r.bench.name, r.bench.set,
                           r.autoscheduler,
                           r.schedule_seconds, r.gflops, r.onednn, r.error);
  }
  std::string md = absl::StrFormat(
      "# halide_bench\n\nHalide 14's autoschedulers (Debian's libhalide14, plugins from %s; "
      "MachineParams(parallelism 1, 16 MiB, 40); JIT for the host target %s; one thread), on %s, "
      "pinned to cpu %d. GFLOPS: fastest run of a %.0f ms budget, output checked exactly against "
      "the sums themselves (every matmul element; a sample of each convolution's). oneDNN's "
      "single-thread matmul or convolution timed the same way on the same core, this run. "
      "Schedule seconds: auto_schedule plus compile_jit.\n",
      kPluginDir,
      Halide::get_host_target().to_string(), HostCpuModel(), core, budget * 1000);
  for (const char* set : {"test", "offgrid", "conv"}) {
    const int n = std::string(set) == "test" ? count : std::string(set) == "offgrid" ? offgrid : convs;
    if (n == 0) continue;
    md += std::string(set) == "test"      ? "\n## Test-split matmuls of mm64_256_16_range-v0\n\n"
          : std::string(set) == "offgrid" ? "\n## Matmuls off the grid\n\n"
                                          : "\n## ResNet-18 3x3 convolutions (oneDNN: direct convolution)\n\n";
    md += "| autoscheduler | geomean vs oneDNN | min vs oneDNN | failed | mean schedule seconds |\n"
          "|---|---:|---:|---:|---:|\n";
    for (const std::string& a : autoschedulers) {
      std::vector<double> ratio;
      double seconds = 0;
      int failed = 0, rows = 0;
      for (const Result& r : results) {
        if (r.autoscheduler != a || r.bench.set != set) continue;
        ++rows;
        seconds += r.schedule_seconds;
        if (r.gflops > 0 && r.onednn > 0) {
          ratio.push_back(r.gflops / r.onednn);
        } else {
          ++failed;
        }
      }
      md += absl::StrFormat("| %s | %.2f | %.2f | %d | %.2f |\n", a, Geomean(ratio),
                            ratio.empty() ? 0 : *std::min_element(ratio.begin(), ratio.end()),
                            failed, rows ? seconds / rows : 0);
    }
  }
  md += "\nPer shape: halide_bench.csv.\n";
  std::printf("%s", md.c_str());
  for (const auto& [path, text] : {std::pair<std::string, const std::string*>{
                                       dir + "/halide_bench.csv", &csv},
                                   {dir + "/halide_bench.md", &md}}) {
    if (absl::Status s = WriteReportFile(path, *text); !s.ok()) {
      std::fprintf(stderr, "halide_bench: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace looptool::bench

int main(int argc, char** argv) {
  looptool::bench::ReexecWithCleanEnvironment(argv);
  setenv("HL_NUM_THREADS", "1", 1);  // Halide's thread pool: one thread, like every reference
  absl::ParseCommandLine(argc, argv);
  return looptool::bench::Main();
}
