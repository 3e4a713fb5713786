// The roofline bound of a program on this host: the least time any kernel of it can take, given
// the core's FMA peak and the read bandwidth of the memory level its data fits in.
//
//   bytes        every tensor's storage once (inputs read, outputs and intermediates written):
//                the traffic no schedule avoids;
//   working set  the same bytes (kernels are timed by repeated runs over the same buffers, so the
//                data stays where it fits): its level is the smallest that holds it (DRAM when
//                none does), its bandwidth the host's read bandwidth over a buffer of that
//                size (MemoryProfile::BandwidthOf: the curve's point at or below it, raised
//                to any larger buffer's where the curve dips);
//   seconds      max(flops / peak, bytes / that bandwidth);
//   fraction     bound seconds / measured seconds (1 = at the bound).
//
// Reads set the bandwidth (backend/timing/bandwidth.h), so the bound is not below what a
// schedule can reach; a kernel bound by memory reports its fraction of this, not of the peak.
#ifndef LOOPTOOL_BACKEND_COSTMODEL_ROOFLINE_H_
#define LOOPTOOL_BACKEND_COSTMODEL_ROOFLINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/env/kernel_timer.h"
#include "backend/ir/program.h"

namespace looptool {

struct RooflineBound {
  int64_t flops = 0;
  int64_t bytes = 0;                 // moved at least (= the working set)
  std::string level;                 // where the working set fits: "L1", "L2", "L3", "DRAM"
  double gbytes_per_second = 0;      // the read bandwidth over the working set
  double peak_gflops = 0;
  double seconds = 0;                // the bound
  bool memory_bound = false;         // bytes / bandwidth > flops / peak
  double gflops() const { return seconds > 0 ? static_cast<double>(flops) / seconds * 1e-9 : 0; }
  // The fraction of the bound a run of `measured_seconds` reaches.
  double Fraction(double measured_seconds) const {
    return measured_seconds > 0 ? seconds / measured_seconds : 0;
  }
};

// INVALID_ARGUMENT when the levels do not end with DRAM, the curve is empty, a bandwidth or the
// peak is not positive.
absl::StatusOr<RooflineBound> Roofline(const Program& program, double peak_gflops,
                                       const MemoryProfile& memory);

// The bound as one JSON object (the `roofline` observation), with keys flops, bytes, level,
// gbytes_per_second, peak_gflops, seconds, gflops, memory_bound, levels (each level's name and
// bytes, smallest first) and bandwidth (the curve: bytes and gbytes_per_second).
std::string RooflineJson(const RooflineBound& bound, const MemoryProfile& memory);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_COSTMODEL_ROOFLINE_H_
