// The roofline bound of a program on this host: the least time any kernel of it can take, given
// the core's FMA peak and the bandwidth of the memory level its data fits in.
//
//   bytes        every tensor's storage once (inputs read, outputs written): the traffic no
//                schedule avoids; `read_bytes` of it the inputs', `written_bytes` the outputs';
//   working set  the same bytes (kernels are timed by repeated runs over the same buffers, so the
//                data stays where it fits): its level is the smallest that holds it (DRAM when
//                none does), its bandwidths the host's over buffers of that size
//                (MemoryProfile::BandwidthOf, CopyBandwidthOf and FillBandwidthOf: the curve's
//                point at or below it, raised to any larger buffer's where the curve dips);
//   memory time  as many of the bytes written as there are bytes read move at the copy
//                bandwidth, paired with as many of the reads (a copy's bytes, read and written);
//                reads beyond those at the read bandwidth, writes beyond them at the fill
//                bandwidth (bytes written per second by stores alone; without a fill curve at the
//                copy bandwidth). Without a copy curve every byte moves at the read bandwidth;
//   seconds      max(flops / peak, memory time);
//   fraction     bound seconds / measured seconds (1 = at the bound).
//
// Each bandwidth is the fastest this code generator's loads and stores reached over such a
// buffer (backend/timing/bandwidth.h), so the bound is not below what a schedule can reach; a
// kernel bound by memory reports its fraction of this, not of the peak.
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
  int64_t read_bytes = 0;            // of them, the inputs'
  int64_t written_bytes = 0;         // ... and the outputs'
  std::string level;                 // where the working set fits: "L1", "L2", "L3", "DRAM"
  double gbytes_per_second = 0;      // the read bandwidth over the working set
  double copy_gbytes_per_second = 0; // the copy bandwidth over it (0: no copy curve)
  double fill_gbytes_per_second = 0; // the fill bandwidth over it (0: no fill curve)
  double memory_seconds = 0;         // the memory time
  double peak_gflops = 0;
  double seconds = 0;                // the bound
  bool memory_bound = false;         // memory time > flops / peak
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

// The bound as one JSON object (the `roofline` observation), with keys flops, bytes, read_bytes,
// written_bytes, level, gbytes_per_second, copy_gbytes_per_second, fill_gbytes_per_second,
// memory_seconds, peak_gflops, seconds, gflops, memory_bound, levels (each level's name and
// bytes, smallest first), bandwidth, copy_bandwidth and fill_bandwidth (the curves: bytes and
// gbytes_per_second).
std::string RooflineJson(const RooflineBound& bound, const MemoryProfile& memory);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_COSTMODEL_ROOFLINE_H_
