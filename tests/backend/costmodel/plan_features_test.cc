// PlanFeatures of a known schedule, by hand: the hand-tiled 128^3 matmul on AVX-512 (a 4 x 64
// block of C in 16 zmm accumulators; tests/backend/codegen/kernel_plan_test.cc has its plan).
#include "backend/costmodel/plan_features.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backend/codegen/kernel_plan.h"
#include "backend/schedule/ir_text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/codegen/jit_check.h"

namespace looptool {
namespace {

using testing::InitialTree;
using testing::WithActions;

constexpr const char* kHand = testing::kHandMatmul;

// The feature `name` of `t` on AVX-512.
double At(const LoopTree& t, const std::string& name) {
  const std::vector<double> f = PlanFeatures(t, Isa::kAvx512);
  const auto it = std::find(PlanFeatureNames().begin(), PlanFeatureNames().end(), name);
  EXPECT_NE(it, PlanFeatureNames().end()) << name;
  return it == PlanFeatureNames().end() ? -1.0 : f[it - PlanFeatureNames().begin()];
}

TEST(PlanFeatures, TheHandScheduleByHand) {
  const LoopTree t = WithActions(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=128 n=128 k=128"), kHand);
  const std::vector<double> f = PlanFeatures(t, Isa::kAvx512);
  ASSERT_EQ(f.size(), PlanFeatureNames().size());
  ASSERT_EQ(f.size(), 49u);
  const auto at = [&](const std::string& name) {
    for (size_t i = 0; i < f.size(); ++i) {
      if (PlanFeatureNames()[i] == name) return f[i];
    }
    ADD_FAILURE() << name;
    return -1.0;
  };
  EXPECT_EQ(at("bias"), 1);
  EXPECT_EQ(at("vectorized"), 1);
  EXPECT_EQ(at("horizontal"), 0);
  EXPECT_EQ(at("log2_width"), 4);   // 16 lanes
  EXPECT_EQ(at("lane_waste"), 0);   // n' covers 64 = 4 x 16
  EXPECT_EQ(at("register_fill"), 16.0 / Lower(t, Isa::kAvx512).statements[0].budget.registers);
  EXPECT_EQ(at("log2_accumulators"), std::log2(17.0));
  EXPECT_EQ(at("loops_in_block"), 3);  // k', m', n'
  EXPECT_EQ(at("unrolled_loops"), 2);  // m', n'
  EXPECT_EQ(at("gathers"), 0);
  EXPECT_EQ(at("stride_two_loads"), 0);
  EXPECT_EQ(at("broadcasts"), 1);      // A[m, k] along n
  EXPECT_EQ(at("reduction_outside_block"), 0);  // n (2 step 64) encloses the block
  // Below n: C 4 x 128, A 4 x 64, B 64 x 128 floats = 35,840 bytes; below m: 131,072; below k:
  // 196,608.
  EXPECT_DOUBLE_EQ(at("log2_bytes_outside_1"), std::log2(35840.0) / 20);
  EXPECT_DOUBLE_EQ(at("log2_bytes_outside_2"), std::log2(131072.0) / 20);
  EXPECT_DOUBLE_EQ(at("log2_bytes_outside_3"), std::log2(196608.0) / 20);
  EXPECT_EQ(at("fits_l1_outside_1"), 0);
  EXPECT_EQ(at("fits_l2_outside_1"), 1);
  EXPECT_EQ(at("fits_l2_outside_3"), 1);
  EXPECT_DOUBLE_EQ(at("log2_flops"), 22.0 / 30);  // 2 x 128^3
  EXPECT_EQ(at("loops_outside_block"), 3);
  // Runs in the block: C and B 64 floats of n', A 64 floats of k': 256 bytes each.
  EXPECT_DOUBLE_EQ(at("log2_min_run_bytes"), 8.0 / 12);
  EXPECT_DOUBLE_EQ(at("log2_mean_run_bytes"), 8.0 / 12);
  // n (step 64) moves C and B on by their runs (256 bytes), A not at all: all in stream.
  EXPECT_DOUBLE_EQ(at("log2_jump_bytes_outside_1"), std::log2(257.0) / 24);
  EXPECT_EQ(at("sequential_outside_1"), 1);
  // m (step 4) moves C and A by 4 rows (2,048 bytes), B not at all.
  EXPECT_DOUBLE_EQ(at("log2_jump_bytes_outside_2"), std::log2(2049.0) / 24);
  EXPECT_DOUBLE_EQ(at("sequential_outside_2"), 1.0 / 3);
  EXPECT_EQ(at("transposed_block"), 0);
  EXPECT_EQ(at("streamed_output"), 0);  // accumulates: never streamed
  // Rows the block walks: C and A 4 (m'), B 64 (k').
  EXPECT_DOUBLE_EQ(at("log2_block_streams"), std::log2(72.0) / 8);
  EXPECT_EQ(at("tail_loops"), 0);
  EXPECT_DOUBLE_EQ(at("log2_trips_outside_1"), 1.0 / 10);  // n: 2 trips of 64
  // The block runs 2 x 32 x 2 = 128 times, 2 x 128^3 / 128 = 2^15 flops each.
  EXPECT_DOUBLE_EQ(at("log2_flops_per_block_run"), 15.0 / 20);
  EXPECT_EQ(at("other_statements"), 0);  // C is its own accumulator: no write pass
  EXPECT_DOUBLE_EQ(at("log2_output_passes"), 1.0 / 10);  // k: 2 trips outside the block
  EXPECT_DOUBLE_EQ(at("log2_kernel_bytes"), std::log2(3 * 128 * 128 * 4.0) / 30);
  // k (step 64) moves B by 64 rows (32,768 bytes) and A along its rows, C not at all.
  EXPECT_DOUBLE_EQ(at("log2_jump_bytes_outside_3"), std::log2(32769.0) / 24);
  EXPECT_DOUBLE_EQ(at("sequential_outside_3"), 2.0 / 3);
  // Streams: C and B 128 floats of n (the block's 64 and n outside it; m leaves B put) before
  // m or k moves them to other rows, A 64 floats of k' before m does.
  EXPECT_DOUBLE_EQ(at("log2_min_stream_bytes"), 8.0 / 20);
  EXPECT_DOUBLE_EQ(at("log2_mean_stream_bytes"), (9.0 + 8.0 + 9.0) / 3 / 20);
  // The block writes 4 rows of C (m'), 64 floats of each; it touches C 4 x 64, A 4 x 64 and B
  // 64 x 64 floats (18,432 bytes) for its 2^15 flops.
  EXPECT_DOUBLE_EQ(at("log2_output_block_rows"), 2.0 / 8);
  EXPECT_DOUBLE_EQ(at("log2_output_run_bytes"), 8.0 / 12);
  EXPECT_DOUBLE_EQ(at("log2_block_bytes"), std::log2(18432.0) / 20);
  EXPECT_DOUBLE_EQ(at("log2_block_flops_per_byte"), std::log2(32768.0 / 18432.0) / 8);
  EXPECT_EQ(at("strided_output"), 0);  // C along n: contiguous
}

TEST(PlanFeatures, StridedOutputs) {
  // Vectorized along a variable the output is strided along (k of O[k,h]: a scatter per vector
  // on AVX-512, lane by lane on AVX2), and not along the output's last variable.
  const LoopTree channels = InitialTree("O[k,h] += I[c,h] * W[c,k]; k=32 h=3 c=5");
  EXPECT_EQ(At(channels, "strided_output"), 1);
  EXPECT_EQ(PlanFeatures(channels, Isa::kAvx2).back(), 1);
  EXPECT_EQ(At(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=8 n=32 k=8"), "strided_output"), 0);
  EXPECT_EQ(At(InitialTree("B[n,m] = A[m,n]; m=8 n=32"), "strided_output"), 1);
  EXPECT_EQ(At(InitialTree("B[n,m] = A[n,m]; m=32 n=8"), "strided_output"), 0);
  // Scalar code stores no vectors.
  EXPECT_EQ(PlanFeatures(channels, Isa::kSse).back(), 0);
}

TEST(PlanFeatures, StreamsOfAnAddAcrossItsRows) {
  // C = A + B over 64 x 100: walked row by row, each tensor is one stream of 6,400 floats (the
  // code generator walks the rows, which follow each other, as one loop); with n split by 16
  // and its outer loop moved outermost ("n(6 r 4) m(64) n(16)"), the kernel walks 16 floats of
  // a row and jumps to the next row.
  const LoopTree plain = InitialTree("C[m,n] = A[m,n] + B[m,n]; m=64 n=100");
  EXPECT_DOUBLE_EQ(At(plain, "log2_kernel_bytes"), std::log2(3 * 6400 * 4.0) / 30);
  EXPECT_DOUBLE_EQ(At(plain, "log2_min_stream_bytes"), std::log2(25600.0) / 20);
  const LoopTree split = WithActions(plain, "down, split_16, up, swap_down");
  ASSERT_EQ(ScheduleKey(split), "compute 1: n(6 r 4) m(64) n(16)\nwrite 1: n(6 r 4) m(64) n(16)\n");
  EXPECT_DOUBLE_EQ(At(split, "log2_kernel_bytes"), std::log2(3 * 6400 * 4.0) / 30);
  EXPECT_DOUBLE_EQ(At(split, "log2_min_stream_bytes"), std::log2(64.0) / 20);
  EXPECT_DOUBLE_EQ(At(split, "log2_mean_stream_bytes"), std::log2(64.0) / 20);
}

TEST(PlanFeatures, TheBlockOfABroadcastAdd) {
  // C = A + b[n] over 64 x 96. Walked row by row, the block is one row of 96 floats: C, A and b
  // 96 each (1,152 bytes) for 96 flops. With n split by 32 and m by 4 ("m(16) n(3) m(4) n(32)"),
  // the block writes 4 rows of C, 96 floats each, and keeps b's row for all four: C and A 4 x 96,
  // b 96 (3,456 bytes) for 384 flops.
  const LoopTree plain = InitialTree("C[m,n] = A[m,n] + b[n]; m=64 n=96");
  EXPECT_EQ(At(plain, "log2_output_block_rows"), 0);
  EXPECT_DOUBLE_EQ(At(plain, "log2_output_run_bytes"), std::log2(384.0) / 12);
  EXPECT_DOUBLE_EQ(At(plain, "log2_block_bytes"), std::log2(1152.0) / 20);
  EXPECT_DOUBLE_EQ(At(plain, "log2_block_flops_per_byte"), std::log2(96.0 / 1152.0) / 8);
  const LoopTree rows = WithActions(plain, "down, split_32, up, split_4, down, swap_down");
  ASSERT_EQ(ScheduleKey(rows),
            "compute 1: m(16) n(3) m(4) n(32)\nwrite 1: m(16) n(3) m(4) n(32)\n");
  ASSERT_EQ(At(rows, "loops_outside_block"), 1);  // m(16)
  EXPECT_DOUBLE_EQ(At(rows, "log2_output_block_rows"), 2.0 / 8);
  EXPECT_DOUBLE_EQ(At(rows, "log2_output_run_bytes"), std::log2(384.0) / 12);
  EXPECT_DOUBLE_EQ(At(rows, "log2_block_bytes"), std::log2(3456.0) / 20);
  EXPECT_DOUBLE_EQ(At(rows, "log2_block_flops_per_byte"), std::log2(384.0 / 3456.0) / 8);
}

TEST(PlanFeatures, TailsAndPassesOfASplitReduction) {
  // The row sums of a 1000 x 50 matrix with their reduction loop n split by 4 (n 12 r 2, then
  // n' 4) and moved outermost: "n(12 r 2) m(1000) n(4)". The tail loop counts, and the output
  // block is loaded and stored again on each of n's 13 trips (12 and the tail).
  const LoopTree plain = InitialTree("s[m] += A[m,n]; m=1000 n=50");
  EXPECT_EQ(At(plain, "tail_loops"), 0);
  EXPECT_EQ(At(plain, "log2_output_passes"), 0);
  const LoopTree split = WithActions(plain, "down, split_4, up, swap_down");
  ASSERT_EQ(ScheduleKey(split), "compute 1: n(12 r 2) m(1000) n(4)\nwrite 1: m(1000)\n");
  EXPECT_EQ(At(split, "loops_outside_block"), 2);  // n and m
  EXPECT_EQ(At(split, "tail_loops"), 1);
  EXPECT_DOUBLE_EQ(At(split, "log2_output_passes"), std::log2(13.0) / 10);
}

TEST(PlanFeatures, LaneWasteOfATail) {
  // n = 50 on AVX2: 7 chunks of 8 lanes hold 50 elements, 6 of 56 lanes idle.
  const LoopTree t = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=8 n=50 k=8");
  const std::vector<double> f = PlanFeatures(t, Isa::kAvx2);
  EXPECT_EQ(f[1], 1);
  EXPECT_DOUBLE_EQ(f[4], 6.0 / 56);
  // A row reduction has a plan, so features, too.
  const std::vector<double> g = PlanFeatures(InitialTree("s[m] += A[m,n]; m=7 n=23"), Isa::kSse);
  EXPECT_EQ(g.size(), PlanFeatureNames().size());
}

TEST(PlanFeatures, ATransposeInRegisters) {
  // B[n,m] = A[m,n], vectorized along m (A strided), with a block of 16 n: the code generator
  // transposes 16 x 16 tiles in registers. Without n in the block it gathers.
  // (kernel_test's TransposesInRegisters block: m 4 outside n, n' 16 and m' 16 in the block.)
  const LoopTree block = WithActions(InitialTree("B[n,m] = A[m,n]; m=64 n=64"),
                                     "split_16, down, swap_down, up, split_16");
  EXPECT_EQ(At(block, "gathers"), 1);
  EXPECT_EQ(At(block, "transposed_block"), 1);
  EXPECT_EQ(At(InitialTree("B[n,m] = A[m,n]; m=64 n=64"), "transposed_block"), 0);
}

// `marked` is `plain` with one schedule mark set: their features differ in `name` alone, 0 then
// 1 (the mark on the tree, whatever the plan makes of it).
void ExpectTheMarkAlone(const LoopTree& plain, const LoopTree& marked, const std::string& name) {
  std::vector<double> f = PlanFeatures(plain, Isa::kAvx512);
  const std::vector<double> g = PlanFeatures(marked, Isa::kAvx512);
  ASSERT_EQ(f.size(), g.size());
  const std::vector<std::string>& names = PlanFeatureNames();
  const size_t at = std::find(names.begin(), names.end(), name) - names.begin();
  ASSERT_LT(at, f.size()) << name;
  EXPECT_EQ(f[at], 0);
  EXPECT_EQ(g[at], 1);
  f[at] = 1;
  EXPECT_EQ(f, g);
}

TEST(PlanFeatures, TheStreamMarkAlone) {
  // The same transpose with its output streamed (stream_L0 marks statement 1).
  const LoopTree plain = WithActions(InitialTree("B[n,m] = A[m,n]; m=64 n=64"),
                                     "split_16, down, swap_down, up, split_16");
  const LoopTree streamed = WithActions(plain, "stream");
  ASSERT_TRUE(streamed.schedule(0).stream);
  ExpectTheMarkAlone(plain, streamed, "streamed_output");
  EXPECT_EQ(PlanFeatureNames()[30], "streamed_output");  // names are only ever appended
}

TEST(PlanFeatures, TheFoldMarkAlone) {
  // A CHW 3x3 stride-2 max pool with and without fold_L0 (its window rows folded).
  const LoopTree plain =
      WithActions(InitialTree("O[r,c] max= I[2*r+kr, 2*c+kc]; r=4 c=32 kr=3 kc=3"),
                  "down, down, swap_down");
  const LoopTree folded = WithActions(plain, "fold_L0");
  ASSERT_TRUE(folded.schedule(0).fold);
  ExpectTheMarkAlone(plain, folded, "folded_rows");
  EXPECT_EQ(PlanFeatureNames()[31], "folded_rows");
}

TEST(PlanFeatures, StrideTwoIsNoGather) {
  // A CHW 3x3 max pool vectorized along its output columns c (the initial tree with c moved
  // innermost): its input advances 2 or 3 elements per lane. Stride 2 loads as two vectors and
  // a permute, stride 3 lane by lane or by a hardware gather.
  const auto features = [](int stride, Isa isa) {
    const std::string s = std::to_string(stride);
    const LoopTree t = WithActions(
        InitialTree("O[r,c] max= I[" + s + "*r+kr, " + s + "*c+kc]; r=4 c=32 kr=3 kc=3"),
        "down, down, swap_down");
    const std::vector<double> f = PlanFeatures(t, isa);
    const auto at = [&](const std::string& name) {
      return f[std::find(PlanFeatureNames().begin(), PlanFeatureNames().end(), name) -
               PlanFeatureNames().begin()];
    };
    return std::make_pair(at("gathers"), at("stride_two_loads"));
  };
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    EXPECT_EQ(features(2, isa), std::make_pair(0.0, 1.0)) << Traits(isa).name;
    EXPECT_EQ(features(3, isa), std::make_pair(1.0, 0.0)) << Traits(isa).name;
  }
  // Scalar code has no vector variable: neither.
  EXPECT_EQ(features(2, Isa::kSse), std::make_pair(0.0, 0.0));
  EXPECT_EQ(PlanFeatureNames()[32], "stride_two_loads");
}

TEST(PlanFeatures, AsJsonByName) {
  // n = 50 on AVX2 again: every entry under its name, in order, with the same numbers.
  const LoopTree t = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=8 n=50 k=8");
  const std::string json = PlanFeaturesJson(t, Isa::kAvx2);
  EXPECT_THAT(json, ::testing::StartsWith(
                        R"({"bias":1.0,"vectorized":1.0,"horizontal":0.0,"log2_width":3.0,)"
                        R"("lane_waste":0.10714285714285714,)"));
  EXPECT_THAT(json, ::testing::HasSubstr(
                        R"("transposed_block":0.0,"streamed_output":0.0,"folded_rows":0.0,)"
                        R"("stride_two_loads":0.0,)"));
  EXPECT_THAT(json, ::testing::HasSubstr(R"("other_statements":0.0,"log2_output_passes":0.0,)"
                                         R"("log2_kernel_bytes":)"));
  EXPECT_THAT(json, ::testing::HasSubstr(R"(,"log2_min_stream_bytes":)"));
  EXPECT_THAT(json, ::testing::HasSubstr(R"(,"log2_mean_stream_bytes":)"));
  EXPECT_THAT(json, ::testing::HasSubstr(R"(,"log2_output_block_rows":)"));
  EXPECT_THAT(json, ::testing::HasSubstr(R"(,"log2_output_run_bytes":)"));
  EXPECT_THAT(json, ::testing::HasSubstr(R"(,"log2_block_bytes":)"));
  EXPECT_THAT(json, ::testing::HasSubstr(R"(,"log2_block_flops_per_byte":)"));
  EXPECT_THAT(json, ::testing::EndsWith(R"(,"strided_output":0.0})"));
  EXPECT_EQ(PlanFeatureNames().back(), "strided_output");
  EXPECT_EQ(std::count(json.begin(), json.end(), ':'), 49);
}

}  // namespace
}  // namespace looptool
