// Plan decisions for known schedules, asserted without running code: where the register scope
// starts, how many accumulators it takes, what is unrolled, when code goes scalar.
#include "backend/codegen/kernel_plan.h"
#include "backend/ir/parser.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/codegen/jit_check.h"

namespace looptool {
namespace {

using testing::InitialTree;
using testing::WithActions;

constexpr const char* kHand = testing::kHandMatmul;

TEST(KernelPlan, HandScheduleKeepsAFourByFourBlockInZmmRegisters) {
  const LoopTree t = WithActions(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=128 n=128 k=128"), kHand);
  const KernelPlan plan = Lower(t, Isa::kAvx512);
  ASSERT_EQ(plan.statements.size(), 1u);
  const StatementPlan& s = plan.statements[0];
  EXPECT_EQ(s.width, 16);
  EXPECT_FALSE(s.horizontal);
  EXPECT_EQ(s.scope, 3);         // k', m', n' inside: m' 4 x n' 64 / 16
  EXPECT_EQ(s.accumulators, 16);
  EXPECT_TRUE(plan.tail_lanes.empty());
  EXPECT_EQ(DescribePlan(plan, t.program()),
            "statement 1: C[m, n] += A[m, k] * B[k, n]\n"
            "  avx512, 16 lanes, 16 accumulators\n"
            "  for k in 2 step 64 (loop)\n"
            "   for m in 32 step 4 (loop)\n"
            "    for n in 2 step 64 (loop)\n"
            "     -- register scope\n"
            "     for k' in 64 (loop)\n"
            "      for m' in 4 (unrolled)\n"
            "       for n' in 64 by 16 lanes (unrolled)\n");
}

TEST(KernelPlan, AvxTwoHalvesTheBlock) {
  const LoopTree t = WithActions(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=128 n=128 k=128"), kHand);
  const StatementPlan s = Lower(t, Isa::kAvx2).statements[0];
  EXPECT_EQ(s.width, 8);
  // 4 x 8 ymm do not fit 16 - 4 registers: the scope moves in to n' alone (8 accumulators).
  EXPECT_EQ(s.scope, 5);
  EXPECT_EQ(s.accumulators, 8);
}

TEST(KernelPlan, LoopTunesStartStateBlocksARowOfC) {
  const StatementPlan s =
      Lower(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=112 n=208 k=256"), Isa::kAvx512).statements[0];
  EXPECT_EQ(s.scope, 1);          // k and n inside
  EXPECT_EQ(s.accumulators, 13);  // 208 / 16
  EXPECT_FALSE(s.loops[1].unrolled);  // 256 * 13 operations > 320
  EXPECT_TRUE(s.loops[2].unrolled);
}

TEST(KernelPlan, MaskedChunksOfTheLoopTuneSequence) {
  const LoopTree t = WithActions(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=112 n=200 k=256"),
                                 "down, down, split_16");  // n in 12 r 8: a half vector last
  EXPECT_THAT(Lower(t, Isa::kAvx512).tail_lanes, ::testing::ElementsAre(8));
  EXPECT_EQ(Lower(t, Isa::kAvx512).statements[0].width, 16);
  EXPECT_TRUE(Lower(t, Isa::kAvx2).tail_lanes.empty());
}

TEST(KernelPlan, Avx512RunsLoopsOfAtMostEightElementsAtEightLanes) {
  const LoopTree t = WithActions(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=112 n=208 k=256"),
                                 "down, down, split_8");  // n' in 8: a ymm, no mask
  EXPECT_EQ(Lower(t, Isa::kAvx512).statements[0].width, 8);
  EXPECT_TRUE(Lower(t, Isa::kAvx512).tail_lanes.empty());
  // n in 7 (as w in ResNet-18's conv5): 7 of 8 lanes, where 16 would idle 9.
  const LoopTree seven = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=7 n=7 k=5");
  EXPECT_EQ(Lower(seven, Isa::kAvx512).statements[0].width, 8);
  EXPECT_THAT(Lower(seven, Isa::kAvx512).tail_lanes, ::testing::ElementsAre(7));
}

TEST(KernelPlan, GemvAccumulatesAcrossLanes) {
  const StatementPlan s = Lower(InitialTree("y[m] += A[m,k] * x[k]; m=64 k=100"), Isa::kAvx512).statements[0];
  EXPECT_TRUE(s.horizontal);
  EXPECT_EQ(s.inputs[0].kind, AccessPlan::Kind::kVector);
  EXPECT_EQ(s.inputs[1].kind, AccessPlan::Kind::kVector);
}

TEST(KernelPlan, BroadcastOperandsStridedStoresAndScalarFallback) {
  const StatementPlan mm =
      Lower(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=8 n=32 k=8"), Isa::kAvx512).statements[0];
  EXPECT_EQ(mm.inputs[0].kind, AccessPlan::Kind::kBroadcast);  // A along n
  EXPECT_EQ(mm.inputs[1].kind, AccessPlan::Kind::kVector);     // B along n
  // A transpose vectorized along the output's first variable: its stores are strided.
  const LoopTree tr_tree = InitialTree("B[n,m] = A[m,n]; m=8 n=32");
  const StatementPlan tr = Lower(tr_tree, Isa::kAvx512).statements[0];
  EXPECT_EQ(tr.width, 16);
  EXPECT_EQ(tr.output.kind, AccessPlan::Kind::kStrided);
  EXPECT_EQ(tr.inputs[0].kind, AccessPlan::Kind::kVector);
  EXPECT_THAT(tr.notes,
              ::testing::ElementsAre("B written with stride 8 along 'n': a scatter per vector"));
  EXPECT_THAT(Lower(tr_tree, Isa::kAvx2).statements[0].notes,
              ::testing::ElementsAre("B written with stride 8 along 'n': lane by lane per vector"));
  // A sum's strided output is loaded back where a block resumes its partial results.
  const StatementPlan sum =
      Lower(InitialTree("O[k,h] += I[c,h] * W[c,k]; k=32 h=3 c=5"), Isa::kAvx512).statements[0];
  EXPECT_EQ(sum.output.kind, AccessPlan::Kind::kStrided);
  EXPECT_THAT(sum.notes, ::testing::ElementsAre(
                             "O written with stride 3 along 'k': a scatter per vector (loaded the "
                             "same way where the block resumes a partial result)"));
  // Past a scatter's 32-bit lane offsets (a server whose limits allow so large a tensor):
  // scalar code.
  Limits large;
  large.max_extent = int64_t{1} << 25;
  large.max_tensor_elements = int64_t{1} << 26;
  large.max_total_elements = int64_t{1} << 27;
  const auto far_program = ParseProgram("B[n,m] = A[m,n]; m=16777217 n=2", large);
  ASSERT_TRUE(far_program.ok()) << far_program.status();
  const StatementPlan far =
      Lower(LoopTree::Initial(std::make_shared<const Program>(*far_program)), Isa::kAvx512)
          .statements[0];
  EXPECT_EQ(far.width, 1);
  EXPECT_THAT(far.notes, ::testing::ElementsAre("scalar code: B has stride 16777217 along 'n'"));
}

TEST(KernelPlan, LoopsTheTensorsAreContiguousAcrossFuse) {
  // A CHW global sum pool: each channel's 7 x 7 elements are one run of 49, read as 4 chunks of
  // 16 lanes (the last masked to 1) instead of 7 chunks of 7.
  const LoopTree pool = InitialTree("O[c] += I[c,h,w]; c=512 h=7 w=7");
  const KernelPlan plan = Lower(pool, Isa::kAvx512);
  EXPECT_EQ(DescribePlan(plan, pool.program()),
            "statement 1: O[c] += I[c, h, w]\n"
            "  avx512, 16 lanes, horizontal, 1 accumulator\n"
            "  note: loops over 'h' (7) and 'w' (7) fused: the tensors are contiguous across them\n"
            "  for c in 512 (loop)\n"
            "   -- register scope\n"
            "   for w in 49 by 16 lanes (unrolled)\n");
  EXPECT_THAT(plan.tail_lanes, ::testing::ElementsAre(1));
  // Elementwise over CHW: all three loops become one of 3 * 5 * 7 = 105 elements.
  const StatementPlan add =
      Lower(InitialTree("C[a,b,c] = A[a,b,c] + B[a,b,c]; a=3 b=5 c=7"), Isa::kAvx2).statements[0];
  ASSERT_EQ(add.loops.size(), 1u);
  EXPECT_EQ(add.loops[0].size, 105);
  EXPECT_EQ(add.notes.size(), 2u);
}

TEST(KernelPlan, TheInnerPartOfASplitLoopFusesWithTheVectorLoop) {
  // h split in 48 x 2: h' (2 rows of 7) and w become runs of 14; the outer h steps 2 rows.
  const LoopTree split = WithActions(InitialTree("C[h,w] = A[h,w]; h=96 w=7"), "split_2");
  const KernelPlan plan = Lower(split, Isa::kAvx512);
  EXPECT_EQ(DescribePlan(plan, split.program()),
            "statement 1: C[h, w] = A[h, w]\n"
            "  avx512, 16 lanes, 1 accumulator\n"
            "  note: loops over 'h' (2) and 'w' (7) fused: the tensors are contiguous across them\n"
            "  for h in 48 step 2 (loop)\n"
            "   -- register scope\n"
            "   for w in 14 by 16 lanes (unrolled)\n");
  EXPECT_THAT(plan.tail_lanes, ::testing::ElementsAre(14));
  // h = 97 = 48 x 2 + 1: the last outer iteration runs one row, so the rows stay apart.
  const LoopTree tail = WithActions(InitialTree("C[h,w] = A[h,w]; h=97 w=7"), "split_2");
  EXPECT_EQ(Lower(tail, Isa::kAvx512).statements[0].loops.size(), 3u);
}

TEST(KernelPlan, LoopsStayApartWhereFusingDoesNotPay) {
  // B moves 0 along h but 1 along w: not contiguous across them.
  EXPECT_EQ(Lower(InitialTree("C[h,w] = A[h,w] + B[w]; h=4 w=7"), Isa::kAvx512)
                .statements[0].loops.size(), 2u);
  // Rows of whole vectors: fusing would not save a chunk.
  EXPECT_EQ(Lower(InitialTree("C[h,w] = A[h,w]; h=4 w=32"), Isa::kAvx512)
                .statements[0].loops.size(), 2u);
  // w is split: its inner loop is not the only one over it.
  const LoopTree split = WithActions(InitialTree("C[h,w] = A[h,w]; h=4 w=7"), "down, split_2");
  EXPECT_EQ(Lower(split, Isa::kAvx512).statements[0].loops.size(), 3u);
  // A padded row (I's rows are 9 long, the map's 7): not contiguous.
  EXPECT_EQ(Lower(InitialTree("O[c,h,w] += I[c,h,w+s]; c=2 h=7 w=7 s=3"), Isa::kAvx512)
                .statements[0].loops.size(), 4u);
}

TEST(KernelPlan, UnrollMarkBeyondTheLimitIsReported) {
  const LoopTree t = WithActions(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=256 n=256 k=256"), "unroll");
  const StatementPlan s = Lower(t, Isa::kAvx512).statements[0];
  EXPECT_FALSE(s.loops[0].unrolled);
  EXPECT_THAT(s.notes, ::testing::ElementsAre(
                           "unroll of loop 1 ignored: 1048576 operations unrolled exceed 16384"));
}

// The fold mark (fold_L<p>) reaches the plan; below AVX-512 the plan says it is not honoured.
TEST(KernelPlan, FoldMarkAndWhereItIsIgnored) {
  const LoopTree plain = WithActions(
      InitialTree("O[r,c] max= I[2*r+kr, 2*c+kc]; r=4 c=32 kr=3 kc=3"), "down, down, swap_down");
  const LoopTree marked = WithActions(plain, "fold_L0");
  EXPECT_FALSE(Lower(plain, Isa::kAvx512).statements[0].fold_rows);
  const StatementPlan wide = Lower(marked, Isa::kAvx512).statements[0];
  EXPECT_TRUE(wide.fold_rows);
  EXPECT_THAT(wide.notes, ::testing::Not(::testing::Contains(::testing::HasSubstr("folded"))));
  EXPECT_THAT(Lower(marked, Isa::kAvx2).statements[0].notes,
              ::testing::Contains("rows not folded: a fold permutes with AVX-512's two-source "
                                  "permutes"));
}

// A vertical statement of 16 lanes that reads stride 2 runs its ops of 8 lanes (a last chunk of a
// row of 16n + 8) at 8 lanes (half_width_tails), with a note where its vector loop has such a
// chunk; not at AVX2 or 8 lanes, nor for a horizontal statement, a stride-1 read, or with the
// option off.
TEST(KernelPlan, HalfWidthTailsOfStrideTwoReads) {
  const auto plan = [](const std::string& program, Isa isa, const CodegenOptions& options = {}) {
    return Lower(WithActions(InitialTree(program), "down, down, swap_down"), isa, options)
        .statements[0];
  };
  const std::string pool40 = "O[r,c] max= I[2*r+kr, 2*c+kc]; r=3 c=40 kr=3 kc=3";
  const StatementPlan pool = plan(pool40, Isa::kAvx512);
  EXPECT_EQ(pool.width, 16);
  EXPECT_FALSE(pool.horizontal);
  EXPECT_TRUE(pool.half_width_tails);
  EXPECT_THAT(pool.notes, ::testing::Contains("the last chunk of 8 lanes along 'c' runs at 8 "
                                              "lanes, after the block's others"));
  const StatementPlan even =
      plan("O[r,c] max= I[2*r+kr, 2*c+kc]; r=3 c=48 kr=3 kc=3", Isa::kAvx512);
  EXPECT_TRUE(even.half_width_tails);  // no chunk of 8: nothing to say
  EXPECT_THAT(even.notes, ::testing::Not(::testing::Contains(::testing::HasSubstr("8 lanes"))));
  EXPECT_FALSE(plan(pool40, Isa::kAvx2).half_width_tails);
  EXPECT_FALSE(plan("O[r,c] max= I[2*r+kr, 2*c+kc]; r=3 c=8 kr=3 kc=3", Isa::kAvx512)
                   .half_width_tails);  // 8 lanes already
  EXPECT_FALSE(plan("O[r,c] max= I[r+kr, c+kc]; r=3 c=40 kr=3 kc=3", Isa::kAvx512)
                   .half_width_tails);  // stride 1
  const StatementPlan horizontal =
      Lower(InitialTree("t[r] += I[r, 2*c]; r=2 c=40"), Isa::kAvx512).statements[0];
  EXPECT_TRUE(horizontal.horizontal);
  EXPECT_FALSE(horizontal.half_width_tails);
  CodegenOptions off;
  off.half_width_stride_two_tails = false;
  EXPECT_FALSE(plan(pool40, Isa::kAvx512, off).half_width_tails);
}

}  // namespace
}  // namespace looptool
