#include "backend/timing/peak.h"

#include "backend/codegen/peak_kernel.h"

namespace looptool {

absl::StatusOr<double> MeasurePeakGflops(Isa isa, double budget_seconds) {
  auto peak = MakePeakKernel(isa, std::min(16, Traits(isa).vector_registers - 2));
  if (!peak.ok()) return peak.status();
  constexpr int64_t kIterations = 2000;  // about 30 microseconds per run at AVX-512 peak
  auto run = peak->kernel.EntryAs<void (*)(int64_t)>();
  TimingOptions options;
  options.budget_seconds = budget_seconds;
  options.warmup_seconds = budget_seconds / 10;
  const TimingResult t = MeasureRuns([&] { run(kIterations); }, options);
  return static_cast<double>(peak->flops_per_iteration * kIterations) / t.min_seconds * 1e-9;
}

}  // namespace looptool
