// The host's memory levels and its bandwidth curves, for the roofline bound of memory-bound
// kernels (backend/costmodel/roofline.h). Caches come from sysfs or CPUID; the read curve is the
// fastest run of the read kernel (backend/codegen/read_kernel.h) over buffers of 4 KiB, 8 KiB,
// ... doubling up to four times the last cache (at least 64 MiB, at most 256 MiB: the largest
// working set Limits allows), with a point at 1.5 times each size below 64 MiB (6 KiB, 12 KiB,
// ..., 48 MiB), in bytes read per second; every size a prefix of one buffer filled once. The
// copy curve is the copy kernel's over the same sizes up to 64 MiB (half of each read, half
// written; regular or non-temporal stores, the faster), in bytes read and written per second:
// a store to a line the core does not hold first reads it, then evicts it dirty, so inside a
// cache a copy moves its bytes more slowly than a read does (seen: 0.6 of the read bandwidth
// in a 2 MiB L2). The fill curve is the fill kernel's over the same sizes as the copy's (stores
// only; regular or non-temporal, the faster), in bytes written per second: what a kernel that
// writes more than it reads (a broadcast) can reach with its writes beyond a copy's.
#ifndef LOOPTOOL_BACKEND_TIMING_BANDWIDTH_H_
#define LOOPTOOL_BACKEND_TIMING_BANDWIDTH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/codegen/isa.h"
#include "backend/env/kernel_timer.h"

namespace looptool {

// One CPUID query's registers.
struct CpuidRegisters {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};
// CPUID as a function of (leaf, subleaf): the host's (HostCpuid), or a recorded one in tests.
using Cpuid = std::function<CpuidRegisters(uint32_t leaf, uint32_t subleaf)>;
Cpuid HostCpuid();

// The data and unified caches of this core, one per level, smallest first, with DRAM (bytes 0)
// last, from the first of these that names any:
//   1. sysfs under `cache_dir` (cpuN/cache: index*/level, type, size);
//   2. CPUID's cache descriptors (leaf 4, Intel; leaf 0x8000001D, AMD): ways x partitions x
//      line x sets per data or unified cache;
//   3. AMD's older CPUID leaves 0x80000005 and 0x80000006: the L1 data cache and L2 only (VMs
//      report the whole socket's L3 there: 508 MiB seen on a Zen 5 VM whose cores share 32);
//   4. the smallest caches of any x86-64 core this server runs on: L1 32 KiB, L2 256 KiB.
// (Virtual machines may list no caches in sysfs and zero the descriptors.) A level no larger
// than the one below it is skipped.
std::vector<MemoryLevel> CacheLevels(const std::string& cache_dir, const Cpuid& cpuid);

// The cache directory of the CPU this thread runs on now (sched_getcpu).
std::string ThisCpuCacheDir();

// The buffer sizes of the curve for these levels.
std::vector<int64_t> CurveSizes(const std::vector<MemoryLevel>& levels);

// `levels` with their bandwidth curves measured on this thread's core within `budget_seconds`
// in all (each timing at least one run: the largest buffers may take longer).
// UNAVAILABLE when a buffer cannot be allocated or a kernel not generated.
absl::StatusOr<MemoryProfile> MeasureMemory(Isa isa, std::vector<MemoryLevel> levels,
                                            double budget_seconds = 0.5);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_TIMING_BANDWIDTH_H_
