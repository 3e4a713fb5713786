// The roofline bound, by hand: bytes are every tensor once, the level is the smallest that holds
// them, the bound the larger of compute and memory time.
#include "backend/costmodel/roofline.h"

#include "absl/strings/str_cat.h"
#include "backend/ir/parser.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace looptool {
namespace {

// A host with a bandwidth step at each level: 100 GB/s in L1, 50 in L2, 25 in L3, 10 in DRAM.
const MemoryProfile kLevels = {
    {{"L1", 32 << 10}, {"L2", 1 << 20}, {"L3", 32 << 20}, {"DRAM", 0}},
    {{4096, 100.0}, {(32 << 10) + 1, 50.0}, {(1 << 20) + 1, 25.0}, {(32 << 20) + 1, 10.0}}};

Program Parse(const std::string& text) {
  auto p = ParseProgram(text, Limits{});
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

TEST(Roofline, ElementwiseAddInL1IsMemoryBound) {
  // C[i] = A[i] + B[i], 1024 floats each: 12 KiB moved, fits L1 (32 KiB): 12288 B / 100 GB/s =
  // 122.88 ns; 1024 flops at 100 GFLOPS = 10.24 ns.
  auto b = Roofline(Parse("C[i] = A[i] + B[i]; i=1024"), 100.0, kLevels);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->flops, 1024);
  EXPECT_EQ(b->bytes, 12288);
  EXPECT_EQ(b->level, "L1");
  EXPECT_EQ(b->gbytes_per_second, 100.0);
  EXPECT_TRUE(b->memory_bound);
  EXPECT_DOUBLE_EQ(b->seconds, 122.88e-9);
  EXPECT_DOUBLE_EQ(b->gflops(), 1024 / 122.88);  // 8.33 GFLOPS
  EXPECT_DOUBLE_EQ(b->Fraction(245.76e-9), 0.5);
  EXPECT_EQ(b->Fraction(0), 0);
}

TEST(Roofline, TheWorkingSetPicksTheLevel) {
  // 3 x 256 x 256 floats = 768 KiB: L2. 3 x 2048 x 2048 floats = 48 MiB: past L3, DRAM.
  auto l2 = Roofline(Parse("C[i,j] = A[i,j] + B[i,j]; i=256 j=256"), 100.0, kLevels);
  ASSERT_TRUE(l2.ok()) << l2.status();
  EXPECT_EQ(l2->level, "L2");
  EXPECT_DOUBLE_EQ(l2->seconds, 786432 / 50e9);
  auto dram = Roofline(Parse("C[i,j] = A[i,j] + B[i,j]; i=2048 j=2048"), 100.0, kLevels);
  ASSERT_TRUE(dram.ok()) << dram.status();
  EXPECT_EQ(dram->level, "DRAM");
  EXPECT_DOUBLE_EQ(dram->seconds, 50331648 / 10e9);
  // Exactly the capacity still fits: 32 KiB = 8192 floats, two tensors of 4096.
  auto edge = Roofline(Parse("C[i] = A[i]; i=4096"), 100.0, kLevels);
  ASSERT_TRUE(edge.ok());
  EXPECT_EQ(edge->bytes, 32 << 10);
  EXPECT_EQ(edge->level, "L1");
}

TEST(Roofline, MatmulIsComputeBound) {
  // 64^3 matmul: 2 * 64^3 = 524288 flops; 3 * 4096 floats = 48 KiB in L2.
  // Compute 524288 / 100e9 = 5.24 us; memory 49152 / 50e9 = 0.98 us.
  auto b = Roofline(Parse("C[m,n] += A[m,k] * B[k,n]; m=64 n=64 k=64"), 100.0, kLevels);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->level, "L2");
  EXPECT_FALSE(b->memory_bound);
  EXPECT_DOUBLE_EQ(b->seconds, 524288 / 100e9);
  EXPECT_DOUBLE_EQ(b->gflops(), 100.0);
}

TEST(Roofline, TheCurveNotTheLevelGivesTheBandwidth) {
  // A VM's share of L3: 100 GB/s up to 8 MiB, 50 beyond. 6 MiB (three 512 x 1024 tensors) is
  // in L3 and gets 100 GB/s: 62.9 us.
  const MemoryProfile vm = {{{"L1", 32 << 10}, {"L2", 1 << 20}, {"L3", 32 << 20}, {"DRAM", 0}},
                            {{4096, 200.0}, {4 << 20, 100.0}, {16 << 20, 50.0}}};
  auto b = Roofline(Parse("C[m,n] = A[m,n] + B[m,n] -> relu; m=512 n=1024"), 100.0, vm);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->bytes, 6 << 20);
  EXPECT_EQ(b->level, "L3");
  EXPECT_EQ(b->gbytes_per_second, 100.0);
  EXPECT_EQ(b->flops, 2 * 512 * 1024);  // the add and the relu
  EXPECT_DOUBLE_EQ(b->seconds, (6 << 20) / 100e9);
}

// kLevels with a copy curve: 60 GB/s (read and written) in L1, 30 in L2, 20 in L3, 8 in DRAM.
MemoryProfile WithCopies() {
  MemoryProfile m = kLevels;
  m.copy_bandwidth = {{4096, 60.0}, {(32 << 10) + 1, 30.0}, {(1 << 20) + 1, 20.0},
                      {(32 << 20) + 1, 8.0}};
  return m;
}

TEST(Roofline, WritesMoveAtTheCopyBandwidth) {
  // C[i] = A[i] + B[i], 1024 floats each, in L1: 8 KiB read, 4 KiB written. 4 KiB of the reads
  // pair with the writes as a copy: 8192 B / 60 GB/s = 136.53 ns; the other 4 KiB read at
  // 100 GB/s: 40.96 ns. 177.49 ns in all, where reads alone would take 122.88 ns.
  const MemoryProfile m = WithCopies();
  auto b = Roofline(Parse("C[i] = A[i] + B[i]; i=1024"), 100.0, m);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->bytes, 12288);
  EXPECT_EQ(b->read_bytes, 8192);
  EXPECT_EQ(b->written_bytes, 4096);
  EXPECT_EQ(b->gbytes_per_second, 100.0);
  EXPECT_EQ(b->copy_gbytes_per_second, 60.0);
  EXPECT_DOUBLE_EQ(b->memory_seconds, 4096 / 100e9 + 8192 / 60e9);
  EXPECT_DOUBLE_EQ(b->seconds, b->memory_seconds);
  EXPECT_TRUE(b->memory_bound);
  // A broadcast writes more than it reads: B[m,n] = a[n], 256 x 256 (256 KiB written, 1 KiB
  // read; 257 KiB in L2): 1 KiB paired (2 KiB of copy), the other 255 KiB written at the copy
  // bandwidth, there being no fill curve: 257 KiB / 30 GB/s.
  auto broadcast = Roofline(Parse("B[m,n] = a[n]; m=256 n=256"), 100.0, m);
  ASSERT_TRUE(broadcast.ok()) << broadcast.status();
  EXPECT_EQ(broadcast->level, "L2");
  EXPECT_EQ(broadcast->read_bytes, 1024);
  EXPECT_EQ(broadcast->written_bytes, 256 << 10);
  EXPECT_DOUBLE_EQ(broadcast->seconds, static_cast<double>((256 << 10) + 1024) / 30e9);
  // A reduction reads far more than it writes: O[r] += I[r,c], 1024 x 1024 (4 MiB read, 4 KiB
  // written; L3): 4 KiB at the copy bandwidth paired with 4 KiB of reads, the rest read.
  auto rowsum = Roofline(Parse("O[r] += I[r,c]; r=1024 c=1024"), 100.0, m);
  ASSERT_TRUE(rowsum.ok()) << rowsum.status();
  EXPECT_EQ(rowsum->level, "L3");
  EXPECT_DOUBLE_EQ(rowsum->seconds, ((4 << 20) - 4096) / 25e9 + 8192 / 20e9);
  // Past the copy curve's last point, its last point: 48 MiB (three 2048 x 2048 tensors).
  auto dram = Roofline(Parse("C[i,j] = A[i,j] + B[i,j]; i=2048 j=2048"), 100.0, m);
  ASSERT_TRUE(dram.ok());
  EXPECT_EQ(dram->copy_gbytes_per_second, 8.0);
  EXPECT_DOUBLE_EQ(dram->seconds, (16 << 20) / 10e9 + (32 << 20) / 8e9);
}

TEST(Roofline, WritesBeyondTheReadsMoveAtTheFillBandwidth) {
  // WithCopies and a fill curve: 50 GB/s (written) in L1, 24 in L2, 16 in L3, 6 in DRAM.
  MemoryProfile m = WithCopies();
  m.fill_bandwidth = {{4096, 50.0}, {(32 << 10) + 1, 24.0}, {(1 << 20) + 1, 16.0},
                      {(32 << 20) + 1, 6.0}};
  // The broadcast above (257 KiB in L2): 1 KiB read pairs with 1 KiB written (2 KiB of copy at
  // 30 GB/s: 68.27 ns); the other 255 KiB are written at the fill bandwidth, 24 GB/s:
  // 10.88 us. 10.95 us in all, where writing them at the copy bandwidth took 8.77 us.
  auto broadcast = Roofline(Parse("B[m,n] = a[n]; m=256 n=256"), 100.0, m);
  ASSERT_TRUE(broadcast.ok()) << broadcast.status();
  EXPECT_EQ(broadcast->level, "L2");
  EXPECT_EQ(broadcast->copy_gbytes_per_second, 30.0);
  EXPECT_EQ(broadcast->fill_gbytes_per_second, 24.0);
  EXPECT_DOUBLE_EQ(broadcast->seconds, 2048 / 30e9 + static_cast<double>(255 << 10) / 24e9);
  // As many bytes read as written, or more read: the fill curve takes no part.
  auto add = Roofline(Parse("C[i] = A[i] + B[i]; i=1024"), 100.0, m);
  ASSERT_TRUE(add.ok());
  EXPECT_EQ(add->fill_gbytes_per_second, 50.0);
  EXPECT_DOUBLE_EQ(add->seconds, 4096 / 100e9 + 8192 / 60e9);
  auto copy = Roofline(Parse("B[i] = A[i]; i=1024"), 100.0, m);
  ASSERT_TRUE(copy.ok());
  EXPECT_DOUBLE_EQ(copy->seconds, 8192 / 60e9);
  // A non-positive fill point is refused like any other.
  m.fill_bandwidth[2].gbytes_per_second = 0;
  EXPECT_EQ(Roofline(Parse("B[i] = A[i]; i=1024"), 100.0, m).status().message(),
            absl::StrCat("the bandwidth over ", (1 << 20) + 1, " bytes must be positive"));
  const nlohmann::json j = nlohmann::json::parse(RooflineJson(*broadcast, m));
  EXPECT_EQ(j["fill_gbytes_per_second"], 24.0);
  ASSERT_EQ(j["fill_bandwidth"].size(), 4u);
  EXPECT_EQ(j["fill_bandwidth"][3]["bytes"], (32 << 20) + 1);
  EXPECT_EQ(j["fill_bandwidth"][3]["gbytes_per_second"], 6.0);
}

TEST(Roofline, BadHostsAreRefused) {
  const Program p = Parse("C[i] = A[i]; i=16");
  EXPECT_EQ(Roofline(p, 0, kLevels).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Roofline(p, 100, {{{"L1", 1024}}, {{4096, 1}}}).status().message(),
            "memory levels must end with DRAM (bytes 0)");
  EXPECT_EQ(Roofline(p, 100, {{{"L1", 1024}, {"DRAM", 0}}, {}}).status().message(),
            "no bandwidth was measured");
  EXPECT_EQ(Roofline(p, 100, {{{"L1", 1024}, {"DRAM", 0}}, {{4096, 0}}}).status().message(),
            "the bandwidth over 4096 bytes must be positive");
  EXPECT_EQ(Roofline(p, 100, {{{"L1", 1024}, {"DRAM", 0}}, {{4096, 1}}, {{8192, -1}}})
                .status()
                .message(),
            "the bandwidth over 8192 bytes must be positive");
}

TEST(Roofline, JsonCarriesTheBoundAndTheLevels) {
  auto b = Roofline(Parse("C[i] = A[i] + B[i]; i=1024"), 100.0, kLevels);
  ASSERT_TRUE(b.ok());
  const nlohmann::json j = nlohmann::json::parse(RooflineJson(*b, kLevels));
  EXPECT_EQ(j["flops"], 1024);
  EXPECT_EQ(j["bytes"], 12288);
  EXPECT_EQ(j["level"], "L1");
  EXPECT_EQ(j["memory_bound"], true);
  EXPECT_DOUBLE_EQ(j["seconds"].get<double>(), 122.88e-9);
  EXPECT_DOUBLE_EQ(j["gflops"].get<double>(), 1024 / 122.88);
  EXPECT_EQ(j["peak_gflops"], 100.0);
  ASSERT_EQ(j["levels"].size(), 4u);
  EXPECT_EQ(j["levels"][2]["name"], "L3");
  EXPECT_EQ(j["levels"][2]["bytes"], 32 << 20);
  ASSERT_EQ(j["bandwidth"].size(), 4u);
  EXPECT_EQ(j["bandwidth"][3]["bytes"], (32 << 20) + 1);
  EXPECT_EQ(j["bandwidth"][3]["gbytes_per_second"], 10.0);
  // Without a copy curve every byte moves at the read bandwidth.
  EXPECT_EQ(j["read_bytes"], 8192);
  EXPECT_EQ(j["written_bytes"], 4096);
  EXPECT_EQ(j["copy_gbytes_per_second"], 0.0);
  EXPECT_DOUBLE_EQ(j["memory_seconds"].get<double>(), 122.88e-9);
  EXPECT_EQ(j["copy_bandwidth"].size(), 0u);
  EXPECT_EQ(j["fill_gbytes_per_second"], 0.0);
  EXPECT_EQ(j["fill_bandwidth"].size(), 0u);
  const MemoryProfile m = WithCopies();
  auto copies = Roofline(Parse("C[i] = A[i] + B[i]; i=1024"), 100.0, m);
  ASSERT_TRUE(copies.ok());
  const nlohmann::json c = nlohmann::json::parse(RooflineJson(*copies, m));
  EXPECT_EQ(c["copy_gbytes_per_second"], 60.0);
  ASSERT_EQ(c["copy_bandwidth"].size(), 4u);
  EXPECT_EQ(c["copy_bandwidth"][1]["bytes"], (32 << 10) + 1);
  EXPECT_EQ(c["copy_bandwidth"][1]["gbytes_per_second"], 30.0);
}

}  // namespace
}  // namespace looptool
