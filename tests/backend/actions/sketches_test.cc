// LoopNestSketches: the exact actions and trees of the first sketches of a matmul and a
// convolution, the register-block bound per vector unit, and the rules that refuse a nest
// (gathers, a tiled nest). Every sketch's kernel is checked against the interpreter in
// tests/backend/codegen/kernel_test.cc.
#include "backend/actions/sketches.h"

#include <algorithm>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "backend/actions/apply.h"
#include "backend/actions/action_space.h"
#include "backend/codegen/isa.h"
#include "backend/codegen/kernel_plan.h"
#include "backend/ir/parser.h"
#include "backend/codegen/register_budget.h"
#include "backend/schedule/loop_tree_text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/schedule/initial_tree.h"

namespace looptool {
namespace {

using testing::Initial;

std::string Names(const Sketch& s) { return SketchesText({s}); }

LoopTree Built(LoopTree t, const Sketch& s) {
  for (const Action& a : s.actions) {
    ActionResult r = Apply(t, a, Limits{});
    EXPECT_TRUE(r.had_effect()) << ActionName(a) << ": " << Describe(r.reason);
    t = r.tree;
  }
  return t;
}

constexpr char kMatmul[] = "C[m,n] += A[m,k] * B[k,n]; m=112 n=208 k=256";
constexpr char kConv[] = "O[k,h,w] += I[c, h+r, w+s] * W[k,c,r,s]; k=64 h=56 w=56 c=64 r=3 s=3";

TEST(Sketches, MatmulFirstIsTheHandScheduleBlock) {
  const LoopTree start = Initial(kMatmul);
  const std::vector<Sketch> sketches = LoopNestSketches(start, Limits{});
  ASSERT_EQ(sketches.size(), 16u);
  EXPECT_EQ(sketches[0].description, "rows m/4, vector n/64, reduction k/64");
  EXPECT_EQ(Names(sketches[0]),
            "tile_L1_64 tile_L0_4 tile_L4_64 interchange_L2_L0 interchange_L4_L2 "
            "interchange_L4_L3\n");
  // bench/hand_schedules.cc's "k/64 m/4 n/64 k m n": 4 rows x 4 vectors in registers.
  EXPECT_EQ(LoopTreeText(Built(start, sketches[0])),
            "for k in 4 : L0\n"
            " for m in 28 : L1\n"
            "  for n in 3 r 16 : L2\n"
            "   for k' in 64 : L3  <<<<<< cursor (line 3 )\n"
            "    for m' in 4 : L4\n"
            "     for n' in 64 : L5\n"
            "      %2[m, k, n] <- multiply(%0, %1)\n"
            "      %3[m, n] <- add(%2)\n"
            "for m in 28 : L8\n"
            " for m' in 4 : L9\n"
            "  for n in 208 : L10\n"
            "   %4[m, n] <- write(%3)\n");
  EXPECT_EQ(sketches[1].description, "rows m/4, vector n/48, reduction k/64");
  EXPECT_EQ(sketches[2].description, "rows m/8, vector n/32, reduction k/64");
}

TEST(Sketches, ConvolutionRowsAreOutputChannels) {
  const LoopTree start = Initial(kConv);
  const std::vector<Sketch> sketches = LoopNestSketches(start, Limits{});
  ASSERT_FALSE(sketches.empty());
  EXPECT_EQ(sketches[0].description, "rows k/4, vector w");
  EXPECT_EQ(Names(sketches[0]),
            "tile_L5_4 interchange_L5_L0 interchange_L2_L1 interchange_L5_L4 "
            "interchange_L6_L5\n");
  // jit_bench's hand convolution "k(16) h(56) c(64) r(3) s(3) k(4) w(56)" (1.50x oneDNN there).
  EXPECT_EQ(LoopTreeText(Built(start, sketches[0])),
            "for k in 16 : L0\n"
            " for h in 56 : L1\n"
            "  for c in 64 : L2\n"
            "   for r in 3 : L3\n"
            "    for s in 3 : L4\n"
            "     for k' in 4 : L5  <<<<<< cursor (line 5 )\n"
            "      for w in 56 : L6\n"
            "       %2[c, h, r, w, s, k] <- multiply(%0, %1)\n"
            "       %3[k, h, w] <- add(%2)\n"
            "for h in 56 : L9\n"
            " for w in 56 : L10\n"
            "  for k in 64 : L11\n"
            "   %4[k, h, w] <- write(%3)\n");
}

TEST(Sketches, AShortOutputRowJoinsTheChannelRowsInTheBlock) {
  // ResNet-18's conv5 (7x7 maps): 3 output channels x all 7 rows x 1 vector of w, 21
  // accumulators, lead (1.07x-1.2x the best one-variable block, 12 x 1, measured here).
  const LoopTree start =
      Initial("O[k,h,w] += I[c, h+r, w+s] * W[k,c,r,s]; k=512 h=7 w=7 c=512 r=3 s=3");
  const std::vector<Sketch> sketches = LoopNestSketches(start, Limits{});
  ASSERT_GE(sketches.size(), 4u);
  EXPECT_EQ(sketches[0].description, "rows k/3 x h, vector w, reduction c/64");
  EXPECT_EQ(sketches[1].description, "rows k/2 x h, vector w, reduction c/64");
  EXPECT_EQ(sketches[2].description, "rows k/3 x h, vector w");
  EXPECT_EQ(sketches[3].description, "rows k/2 x h, vector w");
  // 4 x 7 accumulators would leave no registers for the 7 input vectors each row reuses.
  for (const Sketch& s : sketches) {
    EXPECT_EQ(s.description.find("k/4 x h"), std::string::npos) << s.description;
  }
  EXPECT_EQ(Names(sketches[0]),
            "tile_L0_64 tile_L6_3 interchange_L6_L1 interchange_L4_L3 interchange_L6_L4 "
            "interchange_L7_L5\n");
  EXPECT_EQ(LoopTreeText(Built(start, sketches[0])),
            "for c in 8 : L0\n"
            " for k in 170 r 2 : L1\n"
            "  for c' in 64 : L2\n"
            "   for r in 3 : L3\n"
            "    for s in 3 : L4\n"
            "     for k' in 3 : L5  <<<<<< cursor (line 5 )\n"
            "      for h in 7 : L6\n"
            "       for w in 7 : L7\n"
            "        %2[c, h, r, w, s, k] <- multiply(%0, %1)\n"
            "        %3[k, h, w] <- add(%2)\n"
            "for h in 7 : L10\n"
            " for w in 7 : L11\n"
            "  for k in 512 : L12\n"
            "   %4[k, h, w] <- write(%3)\n");
  // A map too tall for registers (56 rows) gets one-variable blocks only.
  const std::vector<Sketch> tall = LoopNestSketches(Initial(kConv), Limits{});
  ASSERT_FALSE(tall.empty());
  for (const Sketch& s : tall) {
    EXPECT_EQ(s.description.find(" x "), std::string::npos) << s.description;
  }
}

// Weights blocked by output channel (extract(out_block=32)): b picks a 32-channel block of W
// and the input does not read it, so every sketch runs b outermost, around the reduction's
// tile too: one block of W (3x3x64x32 floats) serves all of the 7x7 map's rows.
TEST(Sketches, BlockedWeightsRunTheirBlockOutermost) {
  SketchOptions avx2;
  avx2.target = Isa::kAvx2;
  const LoopTree start = Initial(
      "O[h,w,b,k] += I[h+r, w+s, c] * W[b,r,s,c,k]; b=16 k=32 h=7 w=7 c=512 r=3 s=3");
  const std::vector<Sketch> sketches = LoopNestSketches(start, Limits{}, avx2);
  ASSERT_EQ(sketches.size(), 16u);
  for (const Sketch& s : sketches) {
    if (s.description.rfind("rows b/", 0) == 0) continue;  // b's own rows: b in the block
    EXPECT_EQ(LoopTreeText(Built(start, s)).substr(0, 17), "for b in 16 : L0\n") << s.description;
  }
  const auto it = std::find_if(sketches.begin(), sketches.end(), [](const Sketch& s) {
    return s.description == "rows h/3, vector k, reduction c/64";
  });
  ASSERT_NE(it, sketches.end());
  EXPECT_EQ(LoopTreeText(Built(start, *it)),
            "for b in 16 : L0\n"
            " for c in 8 : L1\n"
            "  for h in 2 r 1 : L2\n"
            "   for w in 7 : L3\n"
            "    for r in 3 : L4\n"
            "     for s in 3 : L5\n"
            "      for c' in 64 : L6  <<<<<< cursor (line 6 )\n"
            "       for h' in 3 : L7\n"
            "        for k in 32 : L8\n"
            "         %2[h, r, w, s, c, b, k] <- multiply(%0, %1)\n"
            "         %3[h, w, b, k] <- add(%2)\n"
            "for h in 2 r 1 : L11\n"
            " for h' in 3 : L12\n"
            "  for w in 7 : L13\n"
            "   for b in 16 : L14\n"
            "    for k in 32 : L15\n"
            "     %4[h, w, b, k] <- write(%3)\n");
  // Without the blocks (W[r,s,c,k]) no variable is such a block: the first sketch's outermost
  // loop is the reduction's tile, as before.
  const LoopTree flat_start =
      Initial("O[h,w,k] += I[h+r, w+s, c] * W[r,s,c,k]; k=512 h=7 w=7 c=512 r=3 s=3");
  const std::vector<Sketch> flat = LoopNestSketches(flat_start, Limits{}, avx2);
  ASSERT_FALSE(flat.empty());
  EXPECT_EQ(LoopTreeText(Built(flat_start, flat[0])).substr(0, 16), "for c in 8 : L0\n");
  // Nor is a batch: n is I's outermost index and W does not read it, but I's block for one n
  // is one image, not one that serves every row (I reads h and w too). No sketch runs n
  // outermost.
  const LoopTree batched =
      Initial("O[n,k,h,w] += I[n,c,h+r,w+s] * W[k,c,r,s]; n=2 k=64 h=56 w=56 c=128 r=3 s=3");
  const std::vector<Sketch> per_image = LoopNestSketches(batched, Limits{});
  ASSERT_FALSE(per_image.empty());
  for (const Sketch& s : per_image) {
    EXPECT_NE(LoopTreeText(Built(batched, s)).substr(0, 6), "for n ") << s.description;
  }
}

TEST(Sketches, Avx2BlocksFitSixteenRegisters) {
  SketchOptions avx2;
  avx2.target = Isa::kAvx2;
  const std::vector<Sketch> sketches = LoopNestSketches(Initial(kMatmul), Limits{}, avx2);
  ASSERT_FALSE(sketches.empty());
  EXPECT_EQ(sketches[0].description, "rows m/4, vector n/24, reduction k/64");
  // A fused relu keeps a zero register: 4 x 3 vectors no longer fit AVX2's 16 (11 are left).
  const std::vector<Sketch> relu = LoopNestSketches(
      Initial("C[m,n] += A[m,k] * B[k,n] -> relu; m=112 n=208 k=256"), Limits{}, avx2);
  ASSERT_FALSE(relu.empty());
  EXPECT_EQ(relu[0].description, "rows m/2, vector n/32, reduction k/64");
  EXPECT_EQ(relu[0].accumulators, 8);
}

// The registers the emitter keeps beside the accumulators: an arithmetic and two operand
// temporaries, a relu's zero, AVX2's lane mask; scalar code stays in xmm0-15.
TEST(RegisterBudget, WhatTheEmitterKeepsBesideTheAccumulators) {
  EXPECT_EQ(BudgetFor(Isa::kAvx512, 16, PostOp::kNone).accumulators, 29);
  EXPECT_EQ(BudgetFor(Isa::kAvx512, 8, PostOp::kRelu).accumulators, 28);
  EXPECT_EQ(BudgetFor(Isa::kAvx2, 8, PostOp::kNone).accumulators, 12);
  EXPECT_EQ(BudgetFor(Isa::kAvx2, 8, PostOp::kRelu).accumulators, 11);
  EXPECT_EQ(BudgetFor(Isa::kAvx2, 1, PostOp::kNone).accumulators, 13);
  EXPECT_EQ(BudgetFor(Isa::kAvx512, 1, PostOp::kRelu).accumulators, 12);
  const RegisterBudget b = BudgetFor(Isa::kAvx2, 8, PostOp::kRelu);
  EXPECT_EQ(b.registers, 16);
  EXPECT_EQ(std::set<int>({b.arithmetic, b.operand0, b.operand1, b.relu_zero, b.lane_mask}),
            std::set<int>({11, 12, 13, 14, 15}));
  EXPECT_EQ(BudgetFor(Isa::kAvx512, 16, PostOp::kNone).lane_mask, -1);
  EXPECT_EQ(BudgetFor(Isa::kAvx512, 16, PostOp::kNone).relu_zero, -1);
}

// One register budget: the block a sketch is sized for is held in registers by the kernel the
// code generator plans for the sketch's tree (at least that block: where an enclosing tile fits
// too, the plan's register scope starts further out), on both vector units, with and without a
// relu's zero register, for one and two row variables. (The AVX2 relu matmul's first sketch,
// sized by a budget that ignored the zero and mask registers, was planned with 3.)
TEST(Sketches, EverySketchBlockIsThePlansRegisterBlock) {
  const char* const kPrograms[] = {
      kMatmul,
      "C[m,n] += A[m,k] * B[k,n] -> relu; m=128 n=768 k=3072",
      "C[m,n] += A[m,k] * B[k,n] -> relu; m=37 n=61 k=97",
      kConv,
      "O[k,h,w] += I[c, h+r, w+s] * W[k,c,r,s]; k=512 h=7 w=7 c=512 r=3 s=3",
      "O[k,h,w] += I[c,h,w] * W[k,c]; k=96 h=14 w=14 c=576",
  };
  int checked = 0, exact = 0;
  for (const char* text : kPrograms) {
    const LoopTree start = Initial(text);
    for (Isa isa : {Isa::kAvx512, Isa::kAvx2}) {
      SketchOptions options;
      options.target = isa;
      const std::vector<Sketch> sketches = LoopNestSketches(start, Limits{}, options);
      EXPECT_FALSE(sketches.empty()) << text;
      for (const Sketch& sketch : sketches) {
        // Every action is one of loop_nest's (the searches read the sketches in its names).
        for (const Action& a : sketch.actions) {
          EXPECT_GE(LoopNestActionSpace().IndexOf(a), 0) << ActionName(a);
        }
        const KernelPlan plan = Lower(Built(start, sketch), isa);
        ASSERT_EQ(plan.statements.size(), 1u);
        // Where the tensors are contiguous across the block's rows, the plan fuses them with
        // the vector loop: the same elements in as many registers or fewer (14 rows of 14 in
        // 13 zmm).
        const std::vector<std::string>& notes = plan.statements[0].notes;
        const bool fused = std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
          return n.find(" fused: ") != std::string::npos;
        });
        if (fused) {
          EXPECT_LE(plan.statements[0].accumulators, sketch.accumulators);
        } else {
          EXPECT_GE(plan.statements[0].accumulators, sketch.accumulators)
              << text << ", " << Traits(isa).name << ": " << sketch.description;
        }
        EXPECT_LE(sketch.accumulators, plan.statements[0].budget.accumulators);
        exact += plan.statements[0].accumulators == sketch.accumulators;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 6 * 2 * 8);
  EXPECT_GT(exact, checked / 2);  // most hold exactly their block
}

// Rule 2'): a CHW 1x1 convolution whose weights are laid out W[c,k] reads its output channels
// contiguously, so they may be the vector (the accumulators stored by a scatter). On a 7x7 map
// they fill every lane where the map's 49 elements fill 49 of 64, so those sketches come first
// at each rank; on a 14x14 map (196 of 208) and a 28x28 one (784 = 49 x 16) after all of the
// map's; with W[k,c] (k a row's stride in W) there are none.
TEST(Sketches, ContiguousWeightsVectorizeTheOutputChannels) {
  const auto along_k = [](const Sketch& s) {
    return s.description.find("vector k") != std::string::npos;
  };
  const LoopTree small = Initial("O[k,h,w] += I[c,h,w] * W[c,k]; k=320 h=7 w=7 c=960");
  const std::vector<Sketch> sketches = LoopNestSketches(small, Limits{});
  ASSERT_EQ(sketches.size(), 16u);
  EXPECT_EQ(sketches[0].description, "rows h/4, vector k/64, reduction c/64");
  EXPECT_EQ(sketches[2].description, "rows h/3 x w, vector k/16, reduction c/64");
  EXPECT_EQ(sketches[3].description, "rows k/3 x h, vector w, reduction c/64");
  for (const Sketch& s : sketches) {
    const StatementPlan plan = Lower(Built(small, s), Isa::kAvx512).statements[0];
    EXPECT_EQ(plan.output.kind == AccessPlan::Kind::kStrided, along_k(s)) << s.description;
    EXPECT_EQ(plan.width, 16) << s.description;
    EXPECT_LE(s.accumulators, plan.budget.accumulators) << s.description;
  }
  EXPECT_EQ(std::count_if(sketches.begin(), sketches.end(), along_k), 13);
  // 28 x 28 and 14 x 14: the map's sketches first, then (room left) the channels'.
  for (const char* text : {"O[k,h,w] += I[c,h,w] * W[c,k]; k=96 h=28 w=28 c=64",
                           "O[k,h,w] += I[c,h,w] * W[c,k]; k=96 h=14 w=14 c=384"}) {
    const std::vector<Sketch> large = LoopNestSketches(Initial(text), Limits{});
    const auto first_k = std::find_if(large.begin(), large.end(), along_k);
    EXPECT_GE(first_k - large.begin(), 12) << text;
    EXPECT_TRUE(std::all_of(first_k, large.end(), along_k)) << text;
  }
  // A strided 1x1 convolution's 28 outputs a row fill 28 of 32 lanes (the rows of I are not
  // contiguous across h): the channels' lead.
  const std::vector<Sketch> strided = LoopNestSketches(
      Initial("O[k,h,w] += I[c, 2*h, 2*w] * W[c,k]; k=128 h=28 w=28 c=64"), Limits{});
  ASSERT_FALSE(strided.empty());
  EXPECT_TRUE(along_k(strided[0])) << strided[0].description;
  // Where rule 2) fails (A reads v with a row's stride), the reduction's folded blocks lead
  // and the channels' follow them.
  const std::vector<Sketch> folded =
      LoopNestSketches(Initial("O[x,v] += A[v,x] * B[v,d]; x=16 v=16 d=64"), Limits{});
  ASSERT_FALSE(folded.empty());
  EXPECT_EQ(folded[0].description.rfind("fold v", 0), 0u) << folded[0].description;
  EXPECT_TRUE(std::any_of(folded.begin(), folded.end(), [](const Sketch& s) {
    return s.description.find("vector x") != std::string::npos;
  }));
  const std::vector<Sketch> rows_of_w =
      LoopNestSketches(Initial("O[k,h,w] += I[c,h,w] * W[k,c]; k=320 h=7 w=7 c=960"), Limits{});
  EXPECT_FALSE(rows_of_w.empty());
  EXPECT_TRUE(std::none_of(rows_of_w.begin(), rows_of_w.end(), along_k));
  // Under limits that allow it, an output strided by more than kMaxVectorStride along k (the
  // code generator's scalar code) gets no channel sketch; at kMaxVectorStride it does.
  Limits large;
  large.max_extent = int64_t{1} << 25;
  large.max_tensor_elements = int64_t{1} << 26;
  large.max_total_elements = int64_t{1} << 27;
  for (const int64_t h : {kMaxVectorStride, kMaxVectorStride + 1}) {
    const auto program = ParseProgram(
        absl::StrCat("O[k,h] += I[c,h] * W[c,k]; k=2 h=", h, " c=2"), large);
    ASSERT_TRUE(program.ok()) << program.status();
    const std::vector<Sketch> far = LoopNestSketches(
        LoopTree::Initial(std::make_shared<const Program>(*program)), large);
    EXPECT_EQ(std::any_of(far.begin(), far.end(), along_k), h == kMaxVectorStride) << h;
  }
}

TEST(Sketches, EachReachesADistinctTree) {
  const LoopTree start = Initial(kConv);
  std::vector<LoopTree> trees;
  for (const Sketch& s : LoopNestSketches(start, Limits{})) {
    LoopTree t = Built(start, s);
    for (const LoopTree& other : trees) EXPECT_NE(t.schedules(), other.schedules()) << s.description;
    trees.push_back(t);
  }
  EXPECT_EQ(trees.size(), 16u);
}

TEST(Sketches, NoneWhereTheVectorWouldGatherAcrossRows) {
  EXPECT_TRUE(LoopNestSketches(Initial("O[c,w] += I[c, 5*w]; c=8 w=64"), Limits{}).empty());
  // A reduction with no variable every input reads with stride 1.
  EXPECT_TRUE(LoopNestSketches(Initial("O[r] += I[r, 2*c]; r=64 c=64"), Limits{}).empty());
  // A copy that is no transpose of a block: the input's contiguous variable is not the output's.
  EXPECT_TRUE(LoopNestSketches(Initial("B[n,m] = A[m, 2*n]; m=64 n=64"), Limits{}).empty());
}

// A reduction read along a row's stride: blocks of consecutive outputs, the reduction vectorized.
TEST(Sketches, AttentionScoresFoldBlocksOfTheOutput) {
  const LoopTree start = Initial("S[h,i,j] += Q[h,i,d] * K[h,j,d]; h=12 i=128 j=128 d=64");
  const std::vector<Sketch> sketches = LoopNestSketches(start, Limits{});
  ASSERT_EQ(sketches.size(), 6u);
  EXPECT_EQ(sketches[0].description, "fold j/16 per vector of d, vector d (reduced)");
  EXPECT_EQ(sketches[1].description, "fold j/16, vector d (reduced)");
  EXPECT_EQ(sketches[2].description, "fold j/8 per vector of d, vector d (reduced)");
  EXPECT_EQ(sketches[3].description, "fold j/8, vector d (reduced)");
  EXPECT_EQ(sketches[4].description, "fold j/24 per vector of d, vector d (reduced)");
  EXPECT_EQ(sketches[5].description, "fold j/24, vector d (reduced)");
  // Per vector of d: the block of 16 j's inside d's 4 vectors, each vector of Q read once for
  // the 16 FMAs of the block (the register scope starts at d's vectors: its accumulators stay
  // in registers across them).
  EXPECT_EQ(LoopTreeText(Built(start, sketches[0])),
            "for h in 12 : L0\n"
            " for i in 128 : L1\n"
            "  for j in 8 : L2\n"
            "   for d in 4 : L3\n"
            "    for j' in 16 : L4  <<<<<< cursor (line 4 )\n"
            "     for d' in 16 : L5\n"
            "      %2[h, i, d, j] <- multiply(%0, %1)\n"
            "      %3[h, i, j] <- add(%2)\n"
            "  for j in 128 : L8\n"
            "   %4[h, i, j] <- write(%3)\n");
  const StatementPlan per_vector = Lower(Built(start, sketches[0]), Isa::kAvx512).statements[0];
  EXPECT_TRUE(per_vector.horizontal);
  EXPECT_EQ(per_vector.accumulators, 16);
  EXPECT_EQ(per_vector.scope, 3);
  EXPECT_EQ(LoopTreeText(Built(start, sketches[1])),
            "for h in 12 : L0\n"
            " for i in 128 : L1\n"
            "  for j in 8 : L2\n"
            "   for j' in 16 : L3  <<<<<< cursor (line 3 )\n"
            "    for d in 64 : L4\n"
            "     %2[h, i, d, j] <- multiply(%0, %1)\n"
            "     %3[h, i, j] <- add(%2)\n"
            "  for j in 128 : L7\n"
            "   %4[h, i, j] <- write(%3)\n");
  const StatementPlan plan = Lower(Built(start, sketches[1]), Isa::kAvx512).statements[0];
  EXPECT_TRUE(plan.horizontal);
  EXPECT_EQ(plan.accumulators, 16);
  // A global pool over CHW: the other reduction (h) inside the block, w vectorized.
  const std::vector<Sketch> pool =
      LoopNestSketches(Initial("O[c] += I[c,h,w]; c=512 h=7 w=7"), Limits{});
  ASSERT_FALSE(pool.empty());
  EXPECT_EQ(pool[0].description, "fold c/16, vector w (reduced)");
  const std::vector<Sketch> rows = LoopNestSketches(Initial("O[r] += I[r,c]; r=64 c=64"), Limits{});
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows[0].description, "fold r/16 per vector of c, vector c (reduced)");
  EXPECT_EQ(rows[1].description, "fold r/16, vector c (reduced)");
}

// A transpose: blocks of the input's contiguous variable x one vector, transposed in registers.
TEST(Sketches, TransposesGetRegisterBlocksOfTheInputsRows) {
  const LoopTree start = Initial("B[n,m] = A[m,n]; m=512 n=1024");
  const std::vector<Sketch> sketches = LoopNestSketches(start, Limits{});
  ASSERT_EQ(sketches.size(), 2u);
  EXPECT_EQ(sketches[0].description, "transpose n/16, vector m/16");
  EXPECT_EQ(sketches[0].accumulators, 16);
  EXPECT_EQ(sketches[1].description, "transpose n/8, vector m/16");
  EXPECT_EQ(LoopTreeText(Built(start, sketches[0])),
            "for n in 64 : L0\n"
            " for m in 32 : L1\n"
            "  for n' in 16 : L2  <<<<<< cursor (line 2 )\n"
            "   for m' in 16 : L3\n"
            "    %1[n, m] <- copy(%0)\n"
            "    %2[n, m] <- write(%1)\n");
  const KernelPlan plan = Lower(Built(start, sketches[0]), Isa::kAvx512);
  EXPECT_EQ(plan.statements[0].accumulators, 16);
  // HWC to CHW: h outside, then c's tiles, w's, the block of c and w's vector.
  const std::vector<Sketch> hwc =
      LoopNestSketches(Initial("B[c,h,w] = A[h,w,c]; h=56 w=56 c=64"), Limits{});
  ASSERT_FALSE(hwc.empty());
  EXPECT_EQ(hwc[0].description, "transpose c/16, vector w/16");
  SketchOptions avx2;
  avx2.target = Isa::kAvx2;
  // At 8 lanes a block is half a line of the input's rows: first n by whole lines (16 floats)
  // outside m's tiles, each line's two blocks inside (AVX-512's blocks are whole lines).
  const std::vector<Sketch> narrow = LoopNestSketches(start, Limits{}, avx2);
  ASSERT_EQ(narrow.size(), 4u);
  EXPECT_EQ(narrow[0].description, "transpose n/16/8, vector m/8");
  EXPECT_EQ(narrow[1].description, "transpose n/8, vector m/8");
  EXPECT_EQ(narrow[2].description, "transpose n/16/4, vector m/8");
  EXPECT_EQ(narrow[3].description, "transpose n/4, vector m/8");
  EXPECT_EQ(narrow[0].accumulators, 8);
  EXPECT_EQ(LoopTreeText(Built(start, narrow[0])),
            "for n in 64 : L0\n"
            " for m in 64 : L1\n"
            "  for n' in 2 : L2\n"
            "   for n'' in 8 : L3  <<<<<< cursor (line 3 )\n"
            "    for m' in 8 : L4\n"
            "     %1[n, m] <- copy(%0)\n"
            "     %2[n, m] <- write(%1)\n");
  const KernelPlan lines = Lower(Built(start, narrow[0]), Isa::kAvx2);
  EXPECT_EQ(lines.statements[0].accumulators, 8);
  // Where the output's rows are the longer, the lines come second.
  const std::vector<Sketch> wide_output =
      LoopNestSketches(Initial("B[n,m] = A[m,n]; m=1024 n=512"), Limits{}, avx2);
  ASSERT_EQ(wide_output.size(), 4u);
  EXPECT_EQ(wide_output[0].description, "transpose n/8, vector m/8");
  EXPECT_EQ(wide_output[1].description, "transpose n/16/8, vector m/8");
  // Rows of less than two lines have no lines to tile by; nor has a v of one vector.
  for (const char* text : {"B[n,m] = A[m,n]; m=16 n=24", "B[n,m] = A[m,n]; m=8 n=64"}) {
    const std::vector<Sketch> plain = LoopNestSketches(Initial(text), Limits{}, avx2);
    ASSERT_EQ(plain.size(), 2u) << text;
    for (const Sketch& s : plain) EXPECT_EQ(s.description.find("/16/"), std::string::npos);
  }
}

// A convolution's or pooling's stride (up to 4) is a strided load along the vector variable.
TEST(Sketches, StridedConvolutionsAndPoolsGetSketches) {
  const std::vector<Sketch> pool =
      LoopNestSketches(Initial("O[c,h,w] max= I[c, 2*h+r, 2*w+s]; c=8 h=8 w=56 r=3 s=3"), Limits{});
  ASSERT_FALSE(pool.empty());
  const std::vector<Sketch> conv = LoopNestSketches(
      Initial("O[k,h,w] += I[c, 2*h+r, 2*w+s] * W[k,c,r,s]; k=64 h=56 w=56 c=64 r=3 s=3"),
      Limits{});
  ASSERT_FALSE(conv.empty());
  EXPECT_EQ(conv[0].description.substr(0, 7), "rows k/");
}

TEST(Sketches, OneDimensionalOutputsGetVectorBlocksOnly) {
  const std::vector<Sketch> sketches =
      LoopNestSketches(Initial("O[c] += I[r,c]; r=256 c=256"), Limits{});
  ASSERT_FALSE(sketches.empty());
  EXPECT_EQ(sketches[0].description, "vector c/64, reduction r/64");
  EXPECT_EQ(sketches[0].accumulators, 4);
}

TEST(Sketches, NoneForATiledNest) {
  const LoopTree start = Initial(kMatmul);
  ActionResult r = Apply(start, *ActionFromName("tile_L0_4"), Limits{});
  ASSERT_TRUE(r.had_effect());
  EXPECT_TRUE(LoopNestSketches(r.tree, Limits{}).empty());
}

TEST(Sketches, ALoopLimitDropsSketchesThatWouldExceedIt) {
  Limits tight;
  tight.max_loops = 7;  // the untiled matmul has 5 (3 compute, 2 write-back)
  for (const Sketch& s : LoopNestSketches(Initial(kMatmul), tight)) {
    LoopTree t = Initial(kMatmul);
    for (const Action& a : s.actions) {
      ActionResult r = Apply(t, a, tight);
      ASSERT_TRUE(r.had_effect()) << s.description;
      t = r.tree;
    }
    EXPECT_LE(t.num_loops(), 7);
  }
}

}  // namespace
}  // namespace looptool
