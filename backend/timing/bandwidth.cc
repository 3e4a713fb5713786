#include "backend/timing/bandwidth.h"

#include <cpuid.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "backend/codegen/read_kernel.h"
#include "backend/ir/limits.h"
#include "backend/timing/measure.h"
#include "util/aligned_allocator.h"

namespace looptool {
namespace {

// The file's first line, whitespace stripped; "" when it cannot be read.
std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return std::string(absl::StripAsciiWhitespace(line));
}

// sysfs sizes read "48K", "1024K", "32768K" (or plain bytes, or "M").
int64_t ParseSize(const std::string& text) {
  if (text.empty()) return 0;
  int64_t scale = 1;
  std::string digits = text;
  const char unit = absl::ascii_toupper(text.back());
  if (unit == 'K' || unit == 'M' || unit == 'G') {
    scale = unit == 'K' ? 1 << 10 : unit == 'M' ? 1 << 20 : 1 << 30;
    digits.pop_back();
  }
  int64_t n = 0;
  return absl::SimpleAtoi(digits, &n) && n > 0 ? n * scale : 0;
}

constexpr int64_t kMinDramBuffer = int64_t{64} << 20;
// The largest working set a program may have (every tensor at most Limits' total, in floats): no
// bound ever needs a point above it. (A larger buffer only costs: on a VM that reports its
// socket's 480 MiB L3, 1 GiB buffers kept the kernel worker's core busy for seconds.)
constexpr int64_t kMaxDramBuffer = Limits{}.max_total_elements * int64_t{sizeof(float)};

// The curves' buffers, in CacheLineAllocator's blocks (from 4 MiB on in transparent huge pages,
// as the kernels' large tensors are). Each point reads a prefix of the one read buffer, so the
// points below 4 MiB read huge pages too, where a kernel's tensors of those sizes lie in 4 KiB
// ones: if anything, a higher bandwidth than such a kernel gets, so the bound still holds.
using Buffer = std::vector<float, CacheLineAllocator<float>>;

// A buffer of `floats` (their pages present), or none where memory runs out.
std::optional<Buffer> MakeBuffer(int64_t floats, float value) {
  try {
    return Buffer(static_cast<size_t>(floats), value);
  } catch (const std::bad_alloc&) {
    return std::nullopt;
  }
}

}  // namespace

Cpuid HostCpuid() {
  return [](uint32_t leaf, uint32_t subleaf) {
    CpuidRegisters r;
    __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
    return r;
  };
}

std::vector<MemoryLevel> CacheLevels(const std::string& cache_dir, const Cpuid& cpuid) {
  std::map<int, int64_t> by_level;  // level -> bytes (data or unified caches)
  // 1. sysfs.
  for (int index = 0; index < 16; ++index) {
    const std::string dir = absl::StrCat(cache_dir, "/index", index);
    const std::string type = ReadLine(dir + "/type");
    if (type.empty()) continue;
    if (type != "Data" && type != "Unified") continue;
    int level = 0;
    const int64_t bytes = ParseSize(ReadLine(dir + "/size"));
    if (!absl::SimpleAtoi(ReadLine(dir + "/level"), &level) || level < 1 || bytes <= 0) continue;
    by_level[level] = std::max(by_level[level], bytes);
  }
  // 2. CPUID's cache descriptors: EAX type (bits 0-4: 1 data, 2 instruction, 3 unified; 0 ends
  // the list) and level (5-7); EBX ways - 1 (22-31), partitions - 1 (12-21), line - 1 (0-11);
  // ECX sets - 1.
  // CPUID is not asked when sysfs named a cache.
  const uint32_t max_leaf = by_level.empty() ? cpuid(0, 0).eax : 0;
  const uint32_t max_extended = by_level.empty() ? cpuid(0x80000000u, 0).eax : 0;
  for (const uint32_t leaf : {uint32_t{4}, uint32_t{0x8000001Du}}) {
    if (!by_level.empty()) break;
    if (leaf > (leaf >= 0x80000000u ? max_extended : max_leaf)) continue;
    for (uint32_t sub = 0; sub < 16; ++sub) {
      const CpuidRegisters r = cpuid(leaf, sub);
      const uint32_t type = r.eax & 31;
      if (type == 0) break;
      if (type != 1 && type != 3) continue;
      const int level = static_cast<int>((r.eax >> 5) & 7);
      const int64_t bytes = int64_t{(r.ebx >> 22) + 1} * (((r.ebx >> 12) & 1023) + 1) *
                            ((r.ebx & 4095) + 1) * (int64_t{r.ecx} + 1);
      if (level >= 1) by_level[level] = std::max(by_level[level], bytes);
    }
  }
  // 3. AMD's older leaves: L1 data KiB in 0x80000005's ECX bits 24-31, L2 KiB in 0x80000006's
  // ECX bits 16-31.
  if (by_level.empty() && max_extended >= 0x80000006u) {
    const int64_t l1 = int64_t{cpuid(0x80000005u, 0).ecx >> 24} << 10;
    const int64_t l2 = int64_t{cpuid(0x80000006u, 0).ecx >> 16} << 10;
    if (l1 > 0) by_level[1] = l1;
    if (l2 > 0) by_level[2] = l2;
  }
  std::vector<MemoryLevel> levels;
  int64_t largest = 0;
  for (const auto& [level, bytes] : by_level) {
    if (bytes <= largest) continue;  // a level must be larger than the one below it
    levels.push_back({absl::StrCat("L", level), bytes});
    largest = bytes;
  }
  // 4. The smallest x86-64 caches.
  if (levels.empty()) levels = {{"L1", 32 << 10}, {"L2", 256 << 10}};
  levels.push_back({"DRAM", 0});
  return levels;
}

std::string ThisCpuCacheDir() {
  const int cpu = sched_getcpu();
  return absl::StrCat("/sys/devices/system/cpu/cpu", cpu < 0 ? 0 : cpu, "/cache");
}

std::vector<int64_t> CurveSizes(const std::vector<MemoryLevel>& levels) {
  int64_t last_cache = 0;
  for (const MemoryLevel& level : levels) last_cache = std::max(last_cache, level.bytes);
  const int64_t largest = std::clamp(4 * last_cache, kMinDramBuffer, kMaxDramBuffer);
  std::vector<int64_t> sizes;
  for (int64_t bytes = 4 << 10; bytes <= largest; bytes *= 2) {
    sizes.push_back(bytes);
    // A point halfway (x1.5) below 64 MiB, where the caches' cliffs are: a working set takes
    // the point at or below its size, so between doublings its bound could be up to the whole
    // cliff too high (seen: 80 GB/s at 2 MiB, 32 at 4 MiB on an Intel VM with 2 MiB of L2).
    if (bytes < kMinDramBuffer && 2 * bytes <= largest) sizes.push_back(bytes + bytes / 2);
  }
  return sizes;
}

absl::StatusOr<MemoryProfile> MeasureMemory(Isa isa, std::vector<MemoryLevel> levels,
                                            double budget_seconds) {
  absl::StatusOr<Kernel> kernel = MakeReadKernel(isa);
  if (!kernel.ok()) return absl::UnavailableError(kernel.status().message());
  const auto run = kernel->EntryAs<ReadKernelFn>();
  const int64_t step_bytes = int64_t{kReadKernelUnroll} * ReadKernelLanes(isa) * 4;
  const std::vector<int64_t> sizes = CurveSizes(levels);
  MemoryProfile profile;
  profile.levels = std::move(levels);
  // One buffer, filled once, for every size: each measurement reads a prefix of it (page faults
  // and fills of a buffer per size cost more than the measurements' budget).
  const int64_t largest = std::max<int64_t>(1, sizes.back() / step_bytes) * step_bytes;
  std::optional<Buffer> buffer = MakeBuffer(largest / 4, 1.0f);
  if (!buffer) {
    return absl::UnavailableError(
        absl::StrCat("cannot allocate ", largest, " bytes to measure memory bandwidth"));
  }
  // The copy and fill curves' sizes: up to 64 MiB, with regular stores, and from 1 MiB on also
  // with non-temporal ones (the faster counts). Every timing, read, copy or fill, gets an equal
  // share of the budget.
  const int64_t largest_copy = std::min(largest, kMinDramBuffer);
  int timings = static_cast<int>(sizes.size());
  for (const int64_t want : sizes) {
    if (want <= largest_copy) timings += 2 * (want >= (int64_t{1} << 20) ? 2 : 1);
  }
  TimingOptions options;
  options.budget_seconds = budget_seconds / timings;
  options.warmup_seconds = options.budget_seconds / 10;
  for (const int64_t want : sizes) {
    const int64_t steps = std::max<int64_t>(1, want / step_bytes);
    const int64_t bytes = steps * step_bytes;
    // Runs of at least 256 KiB read, so that the call's overhead is noise.
    const int64_t passes = std::max<int64_t>(1, (int64_t{256} << 10) / bytes);
    float out[16];
    const TimingResult t = MeasureRuns([&] { run(buffer->data(), steps, passes, out); }, options);
    profile.bandwidth.push_back(
        {bytes, static_cast<double>(bytes * passes) / t.min_seconds * 1e-9});
  }
  // The copy curve: the first half of each size read (a prefix of the same buffer), the second
  // written to a buffer of its own.
  absl::StatusOr<Kernel> copy = MakeCopyKernel(isa, /*streaming_stores=*/false);
  absl::StatusOr<Kernel> stream = MakeCopyKernel(isa, /*streaming_stores=*/true);
  if (!copy.ok() || !stream.ok()) {
    return absl::UnavailableError(!copy.ok() ? copy.status().message()
                                             : stream.status().message());
  }
  std::optional<Buffer> destination = MakeBuffer(largest_copy / 8, 0.0f);  // pages in once
  if (!destination) {
    return absl::UnavailableError(
        absl::StrCat("cannot allocate ", largest_copy / 2, " bytes to measure copy bandwidth"));
  }
  for (const int64_t want : sizes) {
    if (want > largest_copy) break;
    const int64_t steps = std::max<int64_t>(1, want / 2 / step_bytes);
    const int64_t bytes = 2 * steps * step_bytes;  // read and written
    const int64_t passes = std::max<int64_t>(1, (int64_t{256} << 10) / bytes);
    double best = 0;
    for (const Kernel* kernel : {&*copy, &*stream}) {
      if (kernel == &*stream && want < (int64_t{1} << 20)) continue;
      const auto run_copy = kernel->EntryAs<CopyKernelFn>();
      const TimingResult t = MeasureRuns(
          [&] { run_copy(buffer->data(), destination->data(), steps, passes); }, options);
      best = std::max(best, static_cast<double>(bytes * passes) / t.min_seconds * 1e-9);
    }
    profile.copy_bandwidth.push_back({bytes, best});
  }
  // The fill curve: each size written over a prefix of the read buffer (read no more).
  absl::StatusOr<Kernel> fill = MakeFillKernel(isa, /*streaming_stores=*/false);
  absl::StatusOr<Kernel> stream_fill = MakeFillKernel(isa, /*streaming_stores=*/true);
  if (!fill.ok() || !stream_fill.ok()) {
    return absl::UnavailableError(!fill.ok() ? fill.status().message()
                                             : stream_fill.status().message());
  }
  for (const int64_t want : sizes) {
    if (want > largest_copy) break;
    const int64_t steps = std::max<int64_t>(1, want / step_bytes);
    const int64_t bytes = steps * step_bytes;  // written
    const int64_t passes = std::max<int64_t>(1, (int64_t{256} << 10) / bytes);
    double best = 0;
    for (const Kernel* kernel : {&*fill, &*stream_fill}) {
      if (kernel == &*stream_fill && want < (int64_t{1} << 20)) continue;
      const auto run_fill = kernel->EntryAs<FillKernelFn>();
      const TimingResult t =
          MeasureRuns([&] { run_fill(buffer->data(), steps, passes, 1.0f); }, options);
      best = std::max(best, static_cast<double>(bytes * passes) / t.min_seconds * 1e-9);
    }
    profile.fill_bandwidth.push_back({bytes, best});
  }
  return profile;
}

}  // namespace looptool
