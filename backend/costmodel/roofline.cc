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
  for (const auto* curve : {&memory.bandwidth, &memory.copy_bandwidth, &memory.fill_bandwidth}) {
    for (const BandwidthPoint& p : *curve) {
      if (!(p.gbytes_per_second > 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat("the bandwidth over ", p.bytes, " bytes must be positive"));
      }
    }
  }
  RooflineBound b;
  b.flops = program.Flops();
  b.peak_gflops = peak_gflops;
  for (int t = 0; t < static_cast<int>(program.tensors().size()); ++t) {
    const int64_t bytes = program.NumElements(t) * static_cast<int64_t>(sizeof(float));
    (program.tensor(t).is_output ? b.written_bytes : b.read_bytes) += bytes;
  }
  b.bytes = b.read_bytes + b.written_bytes;
  b.level = memory.LevelOf(b.bytes).name;
  b.gbytes_per_second = memory.BandwidthOf(b.bytes);
  b.copy_gbytes_per_second = memory.CopyBandwidthOf(b.bytes);
  b.fill_gbytes_per_second = memory.FillBandwidthOf(b.bytes);
  if (b.copy_gbytes_per_second > 0) {
    const int64_t paired = std::min(b.read_bytes, b.written_bytes);
    // Writes beyond the paired ones at the fill bandwidth, or as a copy's without a fill curve.
    const double unpaired_writes =
        b.fill_gbytes_per_second > 0
            ? static_cast<double>(b.written_bytes - paired) / (b.fill_gbytes_per_second * 1e9)
            : static_cast<double>(b.written_bytes - paired) / (b.copy_gbytes_per_second * 1e9);
    b.memory_seconds =
        static_cast<double>(b.read_bytes - paired) / (b.gbytes_per_second * 1e9) +
        static_cast<double>(2 * paired) / (b.copy_gbytes_per_second * 1e9) + unpaired_writes;
  } else {
    b.memory_seconds = static_cast<double>(b.bytes) / (b.gbytes_per_second * 1e9);
  }
  const double compute = static_cast<double>(b.flops) / (peak_gflops * 1e9);
  b.memory_bound = b.memory_seconds > compute;
  b.seconds = std::max(compute, b.memory_seconds);
  return b;
}

std::string RooflineJson(const RooflineBound& bound, const MemoryProfile& memory) {
  nlohmann::json levels = nlohmann::json::array();
  for (const MemoryLevel& level : memory.levels) {
    levels.push_back({{"name", level.name}, {"bytes", level.bytes}});
  }
  const auto curve = [](const std::vector<BandwidthPoint>& points) {
    nlohmann::json out = nlohmann::json::array();
    for (const BandwidthPoint& p : points) {
      out.push_back({{"bytes", p.bytes}, {"gbytes_per_second", p.gbytes_per_second}});
    }
    return out;
  };
  const nlohmann::json j = {{"flops", bound.flops},
                            {"bytes", bound.bytes},
                            {"read_bytes", bound.read_bytes},
                            {"written_bytes", bound.written_bytes},
                            {"level", bound.level},
                            {"gbytes_per_second", bound.gbytes_per_second},
                            {"copy_gbytes_per_second", bound.copy_gbytes_per_second},
                            {"fill_gbytes_per_second", bound.fill_gbytes_per_second},
                            {"memory_seconds", bound.memory_seconds},
                            {"peak_gflops", bound.peak_gflops},
                            {"seconds", bound.seconds},
                            {"gflops", bound.gflops()},
                            {"memory_bound", bound.memory_bound},
                            {"levels", levels},
                            {"bandwidth", curve(memory.bandwidth)},
                            {"copy_bandwidth", curve(memory.copy_bandwidth)},
                            {"fill_bandwidth", curve(memory.fill_bandwidth)}};
  return j.dump();
}

}  // namespace looptool
