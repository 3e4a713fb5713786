// The host's memory levels: caches read from a sysfs tree, the read kernel's sums (it must read
// every byte it is timed on), and bandwidths measured for every level.
#include "backend/timing/bandwidth.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/codegen/read_kernel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace looptool {
namespace {

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text << "\n";
}

// A sysfs cache directory with the given (level, type, size) entries.
std::string FakeCacheDir(const std::string& name,
                         const std::vector<std::tuple<int, std::string, std::string>>& caches) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  mkdir(dir.c_str(), 0755);
  for (size_t i = 0; i < caches.size(); ++i) {
    const std::string index = dir + "/index" + std::to_string(i);
    mkdir(index.c_str(), 0755);
    WriteFile(index + "/level", std::to_string(std::get<0>(caches[i])));
    WriteFile(index + "/type", std::get<1>(caches[i]));
    WriteFile(index + "/size", std::get<2>(caches[i]));
  }
  return dir;
}

std::vector<std::pair<std::string, int64_t>> Names(const std::vector<MemoryLevel>& levels) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const MemoryLevel& l : levels) out.emplace_back(l.name, l.bytes);
  return out;
}

using P = std::pair<std::string, int64_t>;

// A CPUID that answers only the queries in `answers` (leaf, subleaf), zeros elsewhere, as VMs
// zero what they do not pass through.
Cpuid Recorded(std::map<std::pair<uint32_t, uint32_t>, CpuidRegisters> answers) {
  return [answers = std::move(answers)](uint32_t leaf, uint32_t subleaf) {
    auto it = answers.find({leaf, subleaf});
    return it == answers.end() ? CpuidRegisters{} : it->second;
  };
}

// No caches by CPUID.
const Cpuid kNoCpuid = Recorded({});

// A Zen 4 core's descriptors (leaf 0x8000001D): L1 data 8 ways x 64 sets, L1 instruction,
// L2 8 x 2048, L3 16 x 32768, lines of 64 bytes; its older leaves name a 64 KiB L1 and a
// 512 KiB L2 instead, so that a test sees which were read.
Cpuid Zen4Descriptors() {
  const uint32_t line = 63;
  return Recorded({{{0, 0}, {0x10, 0, 0, 0}},
                   {{0x80000005u, 0}, {0, 0, 64u << 24, 0}},
                   {{0x80000006u, 0}, {0, 0, 512u << 16, 0}},
                   {{0x80000000u, 0}, {0x80000021u, 0, 0, 0}},
                   {{0x8000001Du, 0}, {1 | 1 << 5, 7u << 22 | line, 63, 0}},
                   {{0x8000001Du, 1}, {2 | 1 << 5, 7u << 22 | line, 63, 0}},
                   {{0x8000001Du, 2}, {3 | 2 << 5, 7u << 22 | line, 2047, 0}},
                   {{0x8000001Du, 3}, {3 | 3 << 5, 15u << 22 | line, 32767, 0}}});
}

TEST(CacheLevels, DataAndUnifiedCachesThenDram) {
  const std::string dir = FakeCacheDir(
      "zen4", {{1, "Data", "32K"}, {1, "Instruction", "32K"}, {2, "Unified", "1024K"},
               {3, "Unified", "32768K"}});
  EXPECT_THAT(Names(CacheLevels(dir, kNoCpuid)),
              ::testing::ElementsAre(P{"L1", 32 << 10}, P{"L2", 1 << 20}, P{"L3", 32 << 20},
                                     P{"DRAM", 0}));
  // sysfs first: CPUID is not asked.
  const std::string small = FakeCacheDir("small", {{1, "Data", "48K"}, {2, "Unified", "2M"}});
  int asked = 0;
  const Cpuid counted = [&asked](uint32_t leaf, uint32_t subleaf) {
    ++asked;
    return Zen4Descriptors()(leaf, subleaf);
  };
  EXPECT_THAT(Names(CacheLevels(small, counted)),
              ::testing::ElementsAre(P{"L1", 48 << 10}, P{"L2", 2 << 20}, P{"DRAM", 0}));
  EXPECT_EQ(asked, 0);
}

TEST(CacheLevels, NoSysfsReadsCpuidDescriptors) {
  EXPECT_THAT(Names(CacheLevels("/nonexistent/cache", Zen4Descriptors())),
              ::testing::ElementsAre(P{"L1", 32 << 10}, P{"L2", 1 << 20}, P{"L3", 32 << 20},
                                     P{"DRAM", 0}));
  // Intel's leaf 4, same layout: L1 data 12 ways x 64 sets, L2 16 x 2048 (2 MiB).
  const Cpuid intel = Recorded({{{0, 0}, {0x1b, 0, 0, 0}},
                                {{4, 0}, {1 | 1 << 5, 11u << 22 | 63, 63, 0}},
                                {{4, 1}, {3 | 2 << 5, 15u << 22 | 63, 2047, 0}}});
  EXPECT_THAT(Names(CacheLevels("/nonexistent/cache", intel)),
              ::testing::ElementsAre(P{"L1", 48 << 10}, P{"L2", 2 << 20}, P{"DRAM", 0}));
  // A leaf above the highest the CPU reports is not read.
  const Cpuid beyond = Recorded({{{0, 0}, {0x3, 0, 0, 0}},
                                 {{4, 0}, {1 | 1 << 5, 11u << 22 | 63, 63, 0}}});
  EXPECT_THAT(Names(CacheLevels("/nonexistent/cache", beyond)),
              ::testing::ElementsAre(P{"L1", 32 << 10}, P{"L2", 256 << 10}, P{"DRAM", 0}));
}

TEST(CacheLevels, ZeroedDescriptorsReadAmdsOlderLeavesWithoutL3) {
  // What a 2-vCPU Zen 5 VM answered: descriptors zeroed, 48 KiB L1 data, 1 MiB L2, and the
  // socket's 508 MiB as L3 (not taken).
  const Cpuid zen5_vm = Recorded({{{0, 0}, {0xd, 0, 0, 0}},
                                  {{0x80000000u, 0}, {0x80000021u, 0, 0, 0}},
                                  {{0x80000005u, 0}, {0, 0, 48u << 24 | 0x140, 0}},
                                  {{0x80000006u, 0}, {0, 0, 0x4006140, 0xfe09140}}});
  EXPECT_THAT(Names(CacheLevels("/nonexistent/cache", zen5_vm)),
              ::testing::ElementsAre(P{"L1", 48 << 10}, P{"L2", 1 << 20}, P{"DRAM", 0}));
  // Not read where the highest extended leaf is below 0x80000006.
  const Cpuid old_cpu = Recorded({{{0x80000000u, 0}, {0x80000004u, 0, 0, 0}},
                                  {{0x80000005u, 0}, {0, 0, 48u << 24, 0}},
                                  {{0x80000006u, 0}, {0, 0, 0x4006140, 0}}});
  EXPECT_THAT(Names(CacheLevels("/nonexistent/cache", old_cpu)),
              ::testing::ElementsAre(P{"L1", 32 << 10}, P{"L2", 256 << 10}, P{"DRAM", 0}));
}

TEST(CacheLevels, NoneListedGivesTheSmallestX86Caches) {
  EXPECT_THAT(Names(CacheLevels("/nonexistent/cache", kNoCpuid)),
              ::testing::ElementsAre(P{"L1", 32 << 10}, P{"L2", 256 << 10}, P{"DRAM", 0}));
  // Unreadable sizes and a level no larger than the one below are skipped.
  const std::string dir = FakeCacheDir(
      "odd", {{1, "Data", "48K"}, {2, "Unified", "garbage"}, {3, "Unified", "16K"},
              {4, "Unified", "2M"}});
  EXPECT_THAT(Names(CacheLevels(dir, kNoCpuid)),
              ::testing::ElementsAre(P{"L1", 48 << 10}, P{"L4", 2 << 20}, P{"DRAM", 0}));
}

// The host's own: whatever it names, levels grow and DRAM is last.
TEST(CacheLevels, HostLevelsGrowAndEndWithDram) {
  const std::vector<MemoryLevel> levels = CacheLevels(ThisCpuCacheDir(), HostCpuid());
  ASSERT_GE(levels.size(), 2u);
  EXPECT_EQ(levels.back().name, "DRAM");
  for (size_t i = 1; i + 1 < levels.size(); ++i) EXPECT_GT(levels[i].bytes, levels[i - 1].bytes);
}

TEST(ReadKernel, SumsEveryVectorOfEveryPass) {
  for (Isa isa : {Isa::kSse, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    SCOPED_TRACE(Traits(isa).name);
    auto kernel = MakeReadKernel(isa);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const int lanes = ReadKernelLanes(isa);
    const int64_t steps = 5;
    const int64_t n = steps * kReadKernelUnroll * lanes;
    float* data = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
    std::vector<float> want(lanes, 0);
    for (int64_t i = 0; i < n; ++i) {
      data[i] = static_cast<float>(i % 13);
      want[i % lanes] += 3 * data[i];  // three passes
    }
    float out[16] = {};
    kernel->EntryAs<ReadKernelFn>()(data, steps, 3, out);
    for (int l = 0; l < lanes; ++l) EXPECT_EQ(out[l], want[l]) << "lane " << l;
    std::free(data);
  }
}

TEST(MeasureMemory, TheCurveDoublesFrom4KiBToFourTimesTheLastCache) {
  const std::vector<MemoryLevel> levels = {{"L1", 32 << 10}, {"L2", 256 << 10}, {"DRAM", 0}};
  // Four times 256 KiB is below the 64 MiB floor: 4 KiB .. 64 MiB, 15 doublings and a point
  // at 1.5 times each of the 14 below 64 MiB.
  const std::vector<int64_t> sizes = CurveSizes(levels);
  ASSERT_EQ(sizes.size(), 29u);
  EXPECT_EQ(sizes[0], 4096);
  EXPECT_EQ(sizes[1], 6144);
  EXPECT_EQ(sizes[2], 8192);
  EXPECT_EQ(sizes[27], int64_t{48} << 20);
  EXPECT_EQ(sizes.back(), int64_t{64} << 20);
  EXPECT_TRUE(std::is_sorted(sizes.begin(), sizes.end()));
  // Above 64 MiB the doublings alone: ... 48 MiB, 64 MiB, 128 MiB.
  const std::vector<int64_t> l3 = CurveSizes({{"L3", int64_t{32} << 20}, {"DRAM", 0}});
  ASSERT_EQ(l3.size(), 30u);
  EXPECT_EQ(l3[l3.size() - 2], int64_t{64} << 20);
  EXPECT_EQ(l3.back(), int64_t{128} << 20);
  // A last cache of 1 GiB: at most the largest working set a program may have, 256 MiB.
  EXPECT_EQ(CurveSizes({{"L3", int64_t{1} << 30}, {"DRAM", 0}}).back(), int64_t{256} << 20);
  EXPECT_EQ(CurveSizes({{"L3", int64_t{480} << 20}, {"DRAM", 0}}).back(), int64_t{256} << 20);

  auto measured = MeasureMemory(DetectIsa(), levels, 0.05);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_THAT(Names(measured->levels),
              ::testing::ElementsAre(P{"L1", 32 << 10}, P{"L2", 256 << 10}, P{"DRAM", 0}));
  ASSERT_EQ(measured->bandwidth.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(measured->bandwidth[i].bytes, sizes[i]);
    EXPECT_GT(measured->bandwidth[i].gbytes_per_second, 0) << sizes[i];
  }
  // The copy curve: the same sizes up to 64 MiB (all of them here).
  ASSERT_EQ(measured->copy_bandwidth.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(measured->copy_bandwidth[i].bytes, sizes[i]);
    EXPECT_GT(measured->copy_bandwidth[i].gbytes_per_second, 0) << sizes[i];
  }
  // The fill curve: the same sizes as the copy curve.
  ASSERT_EQ(measured->fill_bandwidth.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(measured->fill_bandwidth[i].bytes, sizes[i]);
    EXPECT_GT(measured->fill_bandwidth[i].gbytes_per_second, 0) << sizes[i];
  }
}

TEST(CopyKernel, CopiesEveryVectorWithEitherStore) {
  for (Isa isa : {Isa::kSse, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    for (bool streaming : {false, true}) {
      SCOPED_TRACE(absl::StrCat(Traits(isa).name, streaming ? " streaming" : ""));
      auto kernel = MakeCopyKernel(isa, streaming);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      const int64_t steps = 5;
      const int64_t n = steps * kReadKernelUnroll * ReadKernelLanes(isa);
      // One vector more on each side of the destination: untouched.
      float* src = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
      float* dst = static_cast<float*>(std::aligned_alloc(64, (n + 32) * sizeof(float)));
      for (int64_t i = 0; i < n; ++i) src[i] = static_cast<float>(i % 29) - 7;
      std::fill(dst, dst + n + 32, -1.0f);
      kernel->EntryAs<CopyKernelFn>()(src, dst + 16, steps, 2);
      for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(dst[i], -1.0f) << i;
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(dst[16 + i], src[i]) << i;
      for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(dst[16 + n + i], -1.0f) << i;
      std::free(src);
      std::free(dst);
    }
  }
}

TEST(FillKernel, WritesTheValueToEveryVectorWithEitherStore) {
  for (Isa isa : {Isa::kSse, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    for (bool streaming : {false, true}) {
      SCOPED_TRACE(absl::StrCat(Traits(isa).name, streaming ? " streaming" : ""));
      auto kernel = MakeFillKernel(isa, streaming);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      const int64_t steps = 3;
      const int64_t n = steps * kReadKernelUnroll * ReadKernelLanes(isa);
      // One vector more on each side of the destination: untouched.
      float* dst = static_cast<float*>(std::aligned_alloc(64, (n + 32) * sizeof(float)));
      std::fill(dst, dst + n + 32, -1.0f);
      kernel->EntryAs<FillKernelFn>()(dst + 16, steps, 2, 2.5f);
      for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(dst[i], -1.0f) << i;
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(dst[16 + i], 2.5f) << i;
      for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(dst[16 + n + i], -1.0f) << i;
      std::free(dst);
    }
  }
}

TEST(MeasureMemory, TheCopyCurveEndsAt64MiB) {
  // A last cache of 32 MiB: the read curve goes on to 128 MiB, the copy curve stops at 64.
  auto measured = MeasureMemory(DetectIsa(), {{"L3", int64_t{32} << 20}, {"DRAM", 0}}, 0.03);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_EQ(measured->bandwidth.back().bytes, int64_t{128} << 20);
  ASSERT_FALSE(measured->copy_bandwidth.empty());
  EXPECT_EQ(measured->copy_bandwidth.back().bytes, int64_t{64} << 20);
  EXPECT_EQ(measured->copy_bandwidth.size() + 1, measured->bandwidth.size());
  ASSERT_EQ(measured->fill_bandwidth.size(), measured->copy_bandwidth.size());
  EXPECT_EQ(measured->fill_bandwidth.back().bytes, int64_t{64} << 20);
}

TEST(MemoryProfile, LevelAndBandwidthOfAWorkingSet) {
  MemoryProfile m;
  m.levels = {{"L1", 32 << 10}, {"L2", 1 << 20}, {"DRAM", 0}};
  m.bandwidth = {{4096, 200}, {8192, 190}, {16384, 180}};
  EXPECT_EQ(m.LevelOf(1).name, "L1");
  EXPECT_EQ(m.LevelOf(32 << 10).name, "L1");
  EXPECT_EQ(m.LevelOf((32 << 10) + 1).name, "L2");
  EXPECT_EQ(m.LevelOf(int64_t{1} << 40).name, "DRAM");
  EXPECT_EQ(m.BandwidthOf(100), 200);     // below every buffer: the first point
  EXPECT_EQ(m.BandwidthOf(8191), 200);    // the largest buffer not larger
  EXPECT_EQ(m.BandwidthOf(8192), 190);
  EXPECT_EQ(m.BandwidthOf(1 << 30), 180);
  // The copy curve is read the same way; none measured reads 0.
  EXPECT_EQ(m.CopyBandwidthOf(8192), 0);
  m.copy_bandwidth = {{4096, 120}, {8192, 100}, {16384, 110}};
  EXPECT_EQ(m.CopyBandwidthOf(100), 120);
  EXPECT_EQ(m.CopyBandwidthOf(8192), 110);  // raised to 16 KiB's point
  EXPECT_EQ(m.CopyBandwidthOf(1 << 30), 110);
  EXPECT_EQ(m.FillBandwidthOf(8192), 0);
  m.fill_bandwidth = {{4096, 90}, {8192, 60}, {16384, 70}};
  EXPECT_EQ(m.FillBandwidthOf(4096), 90);
  EXPECT_EQ(m.FillBandwidthOf(8192), 70);  // raised to 16 KiB's point
}

TEST(MemoryProfile, ADipInTheCurveIsRaisedToTheLargerBuffersPoint) {
  MemoryProfile m;
  m.levels = {{"L1", 32 << 10}, {"L2", 1 << 20}, {"DRAM", 0}};
  // 256 KiB measured slower than 512 KiB (a VM's curve): the true bandwidth at 256 KiB is at
  // least what 512 KiB reached.
  m.bandwidth = {{64 << 10, 504}, {128 << 10, 254}, {256 << 10, 194}, {512 << 10, 259},
                 {1 << 20, 185}, {2 << 20, 129}};
  EXPECT_EQ(m.BandwidthOf(100), 504);         // below every buffer: the first point
  EXPECT_EQ(m.BandwidthOf(100 << 10), 504);   // 64 KiB's point is above every later one
  EXPECT_EQ(m.BandwidthOf(200 << 10), 259);   // 128 KiB's point raised to 512 KiB's
  EXPECT_EQ(m.BandwidthOf(301056), 259);      // 256 KiB's dip raised to 512 KiB's point
  EXPECT_EQ(m.BandwidthOf(512 << 10), 259);
  EXPECT_EQ(m.BandwidthOf(600 << 10), 259);
  EXPECT_EQ(m.BandwidthOf(1 << 20), 185);
  EXPECT_EQ(m.BandwidthOf(int64_t{1} << 40), 129);  // past every buffer: the last point
}

}  // namespace
}  // namespace looptool
