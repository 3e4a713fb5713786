#include "backend/costmodel/roofline.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace looptool {

absl::StatusOr<RooflineBound> Roofline(const Program& program, double peak_gflops,
                                       const MemoryProfile& memory) {
  if (!(peak_gflops > 0)) return absl::InvalidArgumentError("the peak must be positive");
  if (memory.levels.empty() || memory.levels.back().bytes != 0) {
    return absl::InvalidArgumentError("memory levels must end with DRAM (bytes 0)");
  }
  if (memory.bandwidth.empty()) return absl::InvalidArgumentError("no bandwidth was measured");
  for (const BandwidthPoint& p : memory.bandwidth) {
    if (!(p.gbytes_per_second > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the bandwidth over ", p.bytes, " bytes must be positive"));
    }
  }
  RooflineBound b;
  b.flops = program.Flops();
  b.peak_gflops = peak_gflops;
  for (int t = 0; t < static_cast<int>(program.tensors().size()); ++t) {
    b.bytes += program.NumElements(t) * static_cast<int64_t>(sizeof(float));
  }
  b.level = memory.LevelOf(b.bytes).name;
  b.gbytes_per_second = memory.BandwidthOf(b.bytes);
  const double compute = static_cast<double>(b.flops) / (peak_gflops * 1e9);
  const double transfer = static_cast<double>(b.bytes) / (b.gbytes_per_second * 1e9);
  b.memory_bound = transfer > compute;
  b.seconds = std::max(compute, transfer);
  return b;
}

std::string RooflineJson(const RooflineBound& bound, const MemoryProfile& memory) {
  nlohmann::json levels = nlohmann::json::array();
  for (const MemoryLevel& level : memory.levels) {
    levels.push_back({{"name", level.name}, {"bytes", level.bytes}});
  }
  nlohmann::json curve = nlohmann::json::array();
  for (const BandwidthPoint& p : memory.bandwidth) {
    curve.push_back({{"bytes", p.bytes}, {"gbytes_per_second", p.gbytes_per_second}});
  }
  const nlohmann::json j = {{"flops", bound.flops},
                            {"bytes", bound.bytes},
                            {"level", bound.level},
                            {"gbytes_per_second", bound.gbytes_per_second},
                            {"peak_gflops", bound.peak_gflops},
                            {"seconds", bound.seconds},
                            {"gflops", bound.gflops()},
                            {"memory_bound", bound.memory_bound},
                            {"levels", levels},
                            {"bandwidth", curve}};
  return j.dump();
}

}  // namespace looptool
