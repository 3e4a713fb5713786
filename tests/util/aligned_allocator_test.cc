// CacheLineAllocator: blocks start at their offset past a page, small or populated (1 MiB and
// more), hold what is written to them, and go back whole (a growth from one kind to the other).
#include "util/aligned_allocator.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace looptool {
namespace {

TEST(CacheLineAllocator, SmallAndPopulatedBlocksStartAtTheirOffsetPastAPage) {
  // 1 KiB, 200 KiB (growing to 400 KiB), 512 KiB (growing past 1 MiB: populated), exactly 1 MiB
  // with the offset, 24 MiB.
  for (const std::size_t floats :
       {std::size_t{256}, std::size_t{50} << 10, std::size_t{128} << 10,
        (std::size_t{1} << 18) - 17 * 16, std::size_t{6} << 20}) {
    for (const std::size_t offset : {std::size_t{0}, std::size_t{17 * 64}, std::size_t{4095}}) {
      std::vector<float, CacheLineAllocator<float>> v(floats, 1.5f,
                                                      CacheLineAllocator<float>(offset));
      const auto address = reinterpret_cast<std::uintptr_t>(v.data());
      EXPECT_EQ(address % 4096, offset / 64 * 64) << floats << " " << offset;
      EXPECT_EQ(v.front(), 1.5f);
      EXPECT_EQ(v.back(), 1.5f);
      v.back() = -2;
      std::vector<float, CacheLineAllocator<float>> copy = v;  // same allocator, same offset
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(copy.data()) % 4096, offset / 64 * 64);
      EXPECT_EQ(copy.back(), -2);
      copy.resize(floats * 2, 3);  // a larger block, the old one given back
      EXPECT_EQ(copy[floats - 1], -2);
      EXPECT_EQ(copy.back(), 3);
    }
  }
}

}  // namespace
}  // namespace looptool
