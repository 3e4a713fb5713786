// The host's memory levels: caches read from a sysfs tree, the read kernel's sums (it must read
// every byte it is timed on), and bandwidths measured for every level.
#include "backend/timing/bandwidth.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <vector>

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

TEST(CacheLevels, DataAndUnifiedCachesThenDram) {
  const std::string dir = FakeCacheDir(
      "zen4", {{1, "Data", "32K"}, {1, "Instruction", "32K"}, {2, "Unified", "1024K"},
               {3, "Unified", "32768K"}});
  EXPECT_THAT(Names(CacheLevels(dir)),
              ::testing::ElementsAre(P{"L1", 32 << 10}, P{"L2", 1 << 20}, P{"L3", 32 << 20},
                                     P{"DRAM", 0}));
}

TEST(CacheLevels, NoneListedGivesTheSmallestX86Caches) {
  EXPECT_THAT(Names(CacheLevels("/nonexistent/cache")),
              ::testing::ElementsAre(P{"L1", 32 << 10}, P{"L2", 256 << 10}, P{"DRAM", 0}));
  // Unreadable sizes and a level no larger than the one below are skipped.
  const std::string dir = FakeCacheDir(
      "odd", {{1, "Data", "48K"}, {2, "Unified", "garbage"}, {3, "Unified", "16K"},
              {4, "Unified", "2M"}});
  EXPECT_THAT(Names(CacheLevels(dir)),
              ::testing::ElementsAre(P{"L1", 48 << 10}, P{"L4", 2 << 20}, P{"DRAM", 0}));
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
  // Four times 256 KiB is below the 64 MiB floor: 4 KiB .. 64 MiB, 15 sizes.
  const std::vector<int64_t> sizes = CurveSizes(levels);
  ASSERT_EQ(sizes.size(), 15u);
  EXPECT_EQ(sizes.front(), 4096);
  EXPECT_EQ(sizes.back(), int64_t{64} << 20);
  EXPECT_EQ(CurveSizes({{"L3", int64_t{32} << 20}, {"DRAM", 0}}).back(), int64_t{128} << 20);
  EXPECT_EQ(CurveSizes({{"L3", int64_t{1} << 30}, {"DRAM", 0}}).back(), int64_t{1} << 30);

  auto measured = MeasureMemory(DetectIsa(), levels, 0.05);
  ASSERT_TRUE(measured.ok()) << measured.status();
  EXPECT_THAT(Names(measured->levels),
              ::testing::ElementsAre(P{"L1", 32 << 10}, P{"L2", 256 << 10}, P{"DRAM", 0}));
  ASSERT_EQ(measured->bandwidth.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(measured->bandwidth[i].bytes, sizes[i]);
    EXPECT_GT(measured->bandwidth[i].gbytes_per_second, 0) << sizes[i];
  }
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
}

}  // namespace
}  // namespace looptool
