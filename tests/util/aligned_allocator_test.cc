// CacheLineAllocator: blocks start at their offset past a page, small or populated (1 MiB and
// more), hold what is written to them, and go back whole (a growth from one kind to the other);
// blocks of 4 MiB and more start that offset past a 2 MiB boundary and are advised as huge pages.
#include "util/aligned_allocator.h"

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
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

// The VmFlags of the mapping in /proc/self/smaps that holds `address` ("" where none does).
std::string VmFlagsAt(std::uintptr_t address) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-' &&
        line.find(':') > line.find(' ')) {  // a mapping's first line, not a "Key: value" one
      inside = begin <= address && address < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// Whether `address` lies in a mapping advised as huge pages (its VmFlags' `hg`); nullopt where
// this host cannot say (no transparent huge pages in its kernel, or no VmFlags in its smaps).
std::optional<bool> AdvisedHuge(std::uintptr_t address) {
  if (!std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled")) return std::nullopt;
  const std::string flags = VmFlagsAt(address);
  if (flags.empty()) return std::nullopt;
  return flags.find(" hg") != std::string::npos;
}

TEST(CacheLineAllocator, LargeBlocksStartPastAHugePageAndAreAdvisedHuge) {
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  constexpr std::size_t kFourMiB = std::size_t{4} << 20;
  // With the offset of 1088 bytes: whole pages just below 4 MiB (4 KiB pages), and 4 bytes more
  // (whole pages of 4 MiB: huge, though the floats and the offset come to less); 4 MiB; 6 MiB
  // and a bit (the last 2 MiB page partly used); 24 MiB.
  for (const std::size_t floats :
       {(kFourMiB - 4096 - 1088) / 4, (kFourMiB - 4096 - 1088) / 4 + 1, std::size_t{1} << 20,
        (std::size_t{6} << 18) + 5, std::size_t{6} << 20}) {
    for (const std::size_t offset : {std::size_t{0}, std::size_t{17 * 64}}) {
      std::vector<float, CacheLineAllocator<float>> v(floats, 0.5f,
                                                      CacheLineAllocator<float>(offset));
      const auto address = reinterpret_cast<std::uintptr_t>(v.data());
      EXPECT_EQ(address % 4096, offset) << floats << " " << offset;
      const std::size_t pages = (floats * sizeof(float) + offset + 4095) / 4096 * 4096;
      const bool huge = pages >= kFourMiB;
      // What a block takes: whole pages, 2 MiB ones from 4 MiB on.
      const std::size_t bytes = v.get_allocator().BlockBytes(floats);
      EXPECT_EQ(bytes, huge ? (pages + kHuge - 1) / kHuge * kHuge : pages)
          << floats << " " << offset;
      if (floats == (std::size_t{6} << 18) + 5) {
        EXPECT_EQ(bytes, std::size_t{8} << 20);
      }
      if (!huge) continue;
      EXPECT_EQ(address % kHuge, offset) << floats << " " << offset;
      EXPECT_EQ(v.back(), 0.5f);
      // The advice covers the block from its first byte to its last.
      for (const std::uintptr_t at : {address, address + floats * sizeof(float) - 1}) {
        const std::optional<bool> advised = AdvisedHuge(at);
        if (advised.has_value()) {
          EXPECT_TRUE(*advised) << floats << " " << offset;
        }
      }
    }
  }
}

TEST(CacheLineAllocator, GrowsIntoAHugeBlockAndShrinksBack) {
  // 1 MiB (malloc's), grown to 8 MiB (a mapping of its own), shrunk back to 1 MiB: each block
  // goes back the way it came, and the contents move along.
  std::vector<float, CacheLineAllocator<float>> v(std::size_t{1} << 18, 2.0f,
                                                  CacheLineAllocator<float>(64));
  v.back() = 3;
  v.resize(std::size_t{2} << 20, 4.0f);
  const auto grown = reinterpret_cast<std::uintptr_t>(v.data());
  EXPECT_EQ(grown % (std::size_t{2} << 20), 64u);
  EXPECT_EQ(v[(std::size_t{1} << 18) - 1], 3.0f);
  EXPECT_EQ(v.back(), 4.0f);
  if (const std::optional<bool> advised = AdvisedHuge(grown); advised.has_value()) {
    EXPECT_TRUE(*advised);
  }
  v.resize(std::size_t{1} << 18);
  v.shrink_to_fit();
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v.data()) % 4096, 64u);
  EXPECT_EQ(v.front(), 2.0f);
  EXPECT_EQ(v.back(), 3.0f);
}

}  // namespace
}  // namespace looptool
