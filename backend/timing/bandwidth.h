// The host's memory levels and its read bandwidth curve, for the roofline bound of memory-bound
// kernels (backend/costmodel/roofline.h). Caches come from the kernel's sysfs; the curve is the
// fastest run of the read kernel (backend/codegen/read_kernel.h) over buffers of 4 KiB, 8 KiB,
// ... doubling up to four times the last cache (at least 64 MiB, at most 1 GiB), in bytes read
// per second. Reads only: a kernel's writes cost at least as much, so the bound this gives is
// an upper bound.
#ifndef LOOPTOOL_BACKEND_TIMING_BANDWIDTH_H_
#define LOOPTOOL_BACKEND_TIMING_BANDWIDTH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/codegen/isa.h"
#include "backend/env/kernel_timer.h"

namespace looptool {

// The data and unified caches listed under `cache_dir` (sysfs's cpuN/cache: index*/level, type,
// size), one per level, smallest first, with DRAM (bytes 0) last. When the
// directory lists none, the smallest caches of any x86-64 core this server runs on: L1 32 KiB,
// L2 256 KiB.
std::vector<MemoryLevel> CacheLevels(const std::string& cache_dir);

// The cache directory of the CPU this thread runs on now (sched_getcpu).
std::string ThisCpuCacheDir();

// The buffer sizes of the curve for these levels.
std::vector<int64_t> CurveSizes(const std::vector<MemoryLevel>& levels);

// `levels` with their bandwidth curve measured on this thread's core within `budget_seconds`
// in all. UNAVAILABLE when a buffer cannot be allocated or the read kernel not generated.
absl::StatusOr<MemoryProfile> MeasureMemory(Isa isa, std::vector<MemoryLevel> levels,
                                            double budget_seconds = 0.5);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_TIMING_BANDWIDTH_H_
