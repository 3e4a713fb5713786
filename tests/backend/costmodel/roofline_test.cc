// The roofline bound, by hand: bytes are every tensor once, the level is the smallest that holds
// them, the bound the larger of compute and memory time.
#include "backend/costmodel/roofline.h"

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

TEST(Roofline, BadHostsAreRefused) {
  const Program p = Parse("C[i] = A[i]; i=16");
  EXPECT_EQ(Roofline(p, 0, kLevels).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Roofline(p, 100, {{{"L1", 1024}}, {{4096, 1}}}).status().message(),
            "memory levels must end with DRAM (bytes 0)");
  EXPECT_EQ(Roofline(p, 100, {{{"L1", 1024}, {"DRAM", 0}}, {}}).status().message(),
            "no bandwidth was measured");
  EXPECT_EQ(Roofline(p, 100, {{{"L1", 1024}, {"DRAM", 0}}, {{4096, 0}}}).status().message(),
            "the bandwidth over 4096 bytes must be positive");
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
}

}  // namespace
}  // namespace looptool
