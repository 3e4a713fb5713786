#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sched.h>
#include "backend/codegen/compile.h"
#include "backend/interp/interpreter.h"
#include "backend/timing/measure.h"
#include "backend/timing/peak.h"
#include "tests/backend/codegen/jit_check.h"
using namespace looptool;
int main(int argc, char** argv) {
  cpu_set_t set; CPU_ZERO(&set); CPU_SET(1, &set); sched_setaffinity(0, sizeof(set), &set);
  const char* prog = argc > 1 ? argv[1] : "C[m,n] += A[m,k] * B[k,n]; m=256 n=256 k=256";
  const char* acts = argc > 2 ? argv[2] : "";
  LoopTree t = testing::WithActions(testing::InitialTree(prog), acts);
  KernelCompiler c(Isa::kAvx512);
  std::printf("%s", DescribePlan(Lower(t, Isa::kAvx512), t.program()).c_str());
  {
    std::vector<double> ts;
    for (int i = 0; i < 200; ++i) { auto r = MeasureRuns([&] { auto kk = c.Compile(t); }, TimingOptions{0, 0, 1, 1}); ts.push_back(r.min_seconds); }
    std::sort(ts.begin(), ts.end());
    std::printf("compile median %.1f us\n", ts[ts.size()/2]*1e6);
  }
  auto k = c.Compile(t);
  if (!k.ok()) { std::printf("%s\n", k.status().ToString().c_str()); return 1; }
  if (getenv("DUMP")) { FILE* f = fopen(getenv("DUMP"), "wb"); fwrite(reinterpret_cast<const void*>(k->entry()), 1, k->code_size(), f); fclose(f); }
  TensorData d = AllocateTensors(t.program());
  FillInputs(t.program(), 1, false, d);
  std::vector<float*> ptrs; for (auto& b : d) ptrs.push_back(b.data());
  auto r = MeasureRuns([&] { k->Run(ptrs.data()); });
  double gf = t.program().Flops() / r.min_seconds * 1e-9;
  std::printf("code %zu bytes, min %.2f us, median %.2f us, %.1f GFLOPS (%.0f%% of %.0f)\n", k->code_size(), r.min_seconds*1e6, r.median_seconds*1e6, gf, 100*gf/238, 238.0);
}
