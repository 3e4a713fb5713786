// JIT kernels against the reference interpreter, on every ISA this host runs (AVX-512, AVX2 and
// scalar SSE on the development machines; isa_test checks which ones the host has): named tail
// cases in the XNNPACK style, then random schedules of every primitive of the language.
#include <algorithm>
#include <optional>
#include <random>

#include "absl/strings/str_split.h"

#include "backend/actions/apply.h"
#include "backend/actions/sketches.h"
#include "backend/schedule/loop_tree_text.h"
#include "backend/codegen/compile.h"
#include "backend/codegen/isa.h"
#include "backend/codegen/kernel_plan.h"
#include "gtest/gtest.h"
#include "tests/backend/codegen/jit_check.h"

namespace looptool {
namespace {

using testing::CompareWithInterpreter;
using testing::HostIsas;
using testing::InitialTree;
using testing::RandomLoopNestSchedule;
using testing::WithActions;

void ExpectExact(const LoopTree& tree) {
  for (Isa isa : HostIsas()) EXPECT_EQ(CompareWithInterpreter(tree, isa, true), "");
}

void ExpectExact(const std::string& program, const std::string& actions = "") {
  ExpectExact(WithActions(InitialTree(program), actions));
}

// `tree`, and its rows folded where a pool's rows fold (fold_L0), match the interpreter at every
// host ISA (negative inputs, guard pages); at each host ISA `changes` takes, the tree's code
// differs from its code compiled with `off` (a code generator option off), or what the option
// does went untested (`what` names it).
void ExpectExactAndChangedBy(const LoopTree& tree, const CodegenOptions& off, bool (*changes)(Isa),
                             const std::string& what) {
  const LoopTree folded = CanFoldRows(tree.program(), 0) ? WithActions(tree, "fold_L0") : tree;
  for (Isa isa : HostIsas()) {
    EXPECT_EQ(CompareWithInterpreter(tree, isa, true, true), "") << LoopTreeText(tree);
    EXPECT_EQ(CompareWithInterpreter(folded, isa, true, true), "") << LoopTreeText(folded);
    if (!changes(isa)) continue;
    const auto with = KernelCompiler(isa).CompileCode(tree);
    const auto without = KernelCompiler(isa, off).CompileCode(tree);
    ASSERT_TRUE(with.ok() && without.ok());
    EXPECT_NE(*with, *without) << Traits(isa).name << ": " << what << "\n" << LoopTreeText(tree);
  }
}

bool Avx512(Isa isa) { return isa == Isa::kAvx512; }

// ---- vector extents against the vector width ----
TEST(Kernel, ExtentEqualsVector) {
  ExpectExact("C[m,n] += A[m,k] * B[k,n]; m=3 n=16 k=4");
  ExpectExact("C[m,n] += A[m,k] * B[k,n]; m=3 n=8 k=4");
}
TEST(Kernel, ExtentBelowVector) { ExpectExact("C[m,n] += A[m,k] * B[k,n]; m=3 n=5 k=7"); }
TEST(Kernel, ExtentAboveVector) {
  ExpectExact("C[m,n] += A[m,k] * B[k,n]; m=3 n=19 k=2");
  ExpectExact("C[m,n] += A[m,k] * B[k,n]; m=2 n=33 k=3");
}
TEST(Kernel, ExtentMultipleOfVector) { ExpectExact("C[m,n] += A[m,k] * B[k,n]; m=4 n=64 k=9"); }

// ---- splits and tails ----
TEST(Kernel, SplitFactorDoesNotDivide) {
  ExpectExact("C[m,n] += A[m,k] * B[k,n]; m=13 n=20 k=11",
              "split_4, down, down, split_4, down, down, split_8");
}
TEST(Kernel, TailOfTheOuterLoopOverTheVectorVariable) {
  // LoopTune's sequence: n in 1 r 80 over n' 8 over n'' 16.
  ExpectExact("C[m,n] += A[m,k] * B[k,n]; m=24 n=208 k=10",
              "split_4, down, swap_down, down, split_16, swap_up, swap_up, swap_up, split_8");
}
TEST(Kernel, RegisterBlockPartialInTheTail) {
  // m' 4 inside the scope, m in 3 r 2: the last block has two rows.
  ExpectExact("C[m,n] += A[m,k] * B[k,n]; m=14 n=24 k=6", "split_4, down, swap_down");
}
TEST(Kernel, LargeRowsFallOutOfTheRegisterScope) {
  // 400 columns are 25 zmm (50 ymm): the scope moves inside the row loop.
  ExpectExact("C[m,n] += A[m,k] * B[k,n]; m=3 n=400 k=5");
}

// ---- reductions outside the register scope: first and last visits ----
TEST(Kernel, ReductionLoopOutsideTheScope) {
  // k in 4 r 1 (step 16) outermost, then m, n, k': the block is loaded after the first k.
  ExpectExact("C[m,n] += A[m,k] * B[k,n]; m=6 n=40 k=65", "down, split_16, swap_up");
}
TEST(Kernel, ReluOnlyAfterTheLastReduction) {
  ExpectExact("C[m,n] += A[m,k] * B[k,n] -> relu; m=5 n=24 k=33", "down, split_8, swap_up");
  ExpectExact("C[m,n] += A[m,k] * B[k,n] -> relu; m=5 n=24 k=32", "down, split_8, swap_up");
}
TEST(Kernel, MaxReductionOutsideTheScope) {
  ExpectExact("O[r,c] max= I[r+kr, c+kc]; r=5 c=21 kr=3 kc=2", "down, swap_up");
}
TEST(Kernel, HandScheduleOfTheBenchmarks) {
  // k/64, m/4, n/64, k, m, n at a size with every tail.
  ExpectExact("C[m,n] += A[m,k] * B[k,n]; m=30 n=150 k=70",
              "split_4, down, down, split_64, swap_up, swap_up, down, down, swap_down, down, "
              "split_64, swap_up, swap_up");
}

// A tail of every lane count below two vectors of 16: the counts 1, 2, 4 and 8 move with the plain
// narrower move (vmovss, vmovsd, xmm, ymm), the others with a mask; loads (A, B, the output's
// partial results) and stores alike.
TEST(Kernel, TailsOfEveryLaneCount) {
  for (int n = 1; n < 32; ++n) {
    const std::string ns = std::to_string(n);
    for (const std::string& program :
         {"C[m,n] = A[m,n] + B[m,n] -> relu; m=2 n=" + ns,
          "C[m,n] += A[m,k] * B[k,n]; m=3 n=" + ns + " k=5"}) {
      SCOPED_TRACE(program);
      ExpectExact(program);
    }
  }
}

// ---- horizontal accumulators ----
TEST(Kernel, GemvReducesAcrossLanes) { ExpectExact("y[m] += A[m,k] * x[k]; m=7 k=45"); }
TEST(Kernel, RowReductionWithTail) { ExpectExact("s[m] += A[m,n]; m=5 n=23"); }
// Masked horizontal sums add every lane of the zeroed partial vector (no blend on AVX2): rows of
// 7 of 8 lanes (a global sum pool), strided rows with a masked tail, and negative inputs (a lane
// that held anything but 0 would show in the sum).
TEST(Kernel, MaskedHorizontalSumsAddTheirZeroedLanes) {
  for (const char* program : {"O[c] += I[c,h,w]; c=9 h=3 w=7", "s[m] += A[m, 2*n]; m=3 n=13",
                              "t[] += A[m,n]; m=6 n=19"}) {
    const LoopTree tree = InitialTree(program);
    for (Isa isa : HostIsas()) {
      EXPECT_EQ(CompareWithInterpreter(tree, isa, true, true), "") << program;
    }
  }
}
TEST(Kernel, FullReduction) { ExpectExact("t[] += A[m,n]; m=6 n=19"); }
TEST(Kernel, MaxReductionAcrossLanesWithTail) {
  ExpectExact("s[m] max= A[m,n] -> relu; m=6 n=13");
  ExpectExact("s[m] max= A[m,n] * B[m,n]; m=6 n=21");
}
TEST(Kernel, MaxReductionsOfNegativeValuesNeverSeeUnloadedLanes) {
  for (const char* program : {"s[m] max= A[m,n]; m=6 n=13", "t[] max= A[m,n]; m=3 n=21",
                              "O[r,c] max= I[r+kr, c+kc]; r=5 c=21 kr=3 kc=2"}) {
    for (Isa isa : HostIsas()) {
      EXPECT_EQ(CompareWithInterpreter(InitialTree(program), isa, true, true), "") << program;
    }
  }
}
TEST(Kernel, HorizontalWithOuterReductionLoop) {
  ExpectExact("y[m] += A[m,k] * x[k]; m=4 k=70", "down, split_16, swap_up");
}
// Consecutive output elements fold together (up to a vector of them at a time, lane o holding
// element o of the run): runs of every length up to two vectors and past them, runs broken by
// an output stride, max of negative values, relu, and partial results of an outer reduction
// loop combined as a vector.
TEST(Kernel, HorizontalAccumulatorsFoldIntoOneVector) {
  for (int m : {2, 3, 5, 7, 8, 9, 12, 15, 16, 17, 23, 24, 31, 32, 33}) {
    const std::string ms = std::to_string(m);
    for (const std::string& program :
         {"y[m] += A[m,k] * x[k]; m=" + ms + " k=37", "s[m] max= A[m,n]; m=" + ms + " n=21",
          "s[m] += A[m,n] -> relu; m=" + ms + " n=9"}) {
      SCOPED_TRACE(program);
      ExpectExact(program);
      for (Isa isa : HostIsas()) {
        EXPECT_EQ(CompareWithInterpreter(InitialTree(program), isa, true, true), "");
      }
    }
  }
}
TEST(Kernel, HorizontalFoldsWithTheOuterReductionsPartialResults) {
  ExpectExact("y[m] += A[m,k] * x[k]; m=13 k=70", "down, split_16, swap_up");
  ExpectExact("y[m] += A[m,k] * x[k] -> relu; m=16 k=70", "down, split_16, swap_up");
  ExpectExact("y[m] max= A[m,k] * x[k]; m=21 k=70", "down, split_32, swap_up");
}
TEST(Kernel, HorizontalRunsBrokenByTheOutputStride) {
  // j 2 r 2 outside i: the scope holds i x j', runs of 4 (the tail's of 2) elements 10 apart.
  ExpectExact("S[i,j] += Q[i,d] * K[j,d]; i=4 j=10 d=40", "down, split_4, swap_up");
  // Attention scores as BERT's heads have them, tiled as the tuner tiles them: h, i, j 2 r 8,
  // j' 8, j'' 2, d 4, d' 16 (runs of 16, then of 8 in j's tail).
  ExpectExact("S[h,i,j] += Q[h,i,d] * K[h,j,d]; h=2 i=5 j=40 d=64",
              "down, down, split_16, down, split_2, down, down, split_16");
}

// ---- the other primitives ----
TEST(Kernel, Convolution) { ExpectExact("O[r,c] += I[r+kr, c+kc] * W[kr,kc]; r=6 c=20 kr=3 kc=3"); }
TEST(Kernel, ConvolutionVectorizedAlongTheOutput) {
  ExpectExact("O[r,c] += I[r+kr, c+kc] * W[kr,kc]; r=6 c=20 kr=3 kc=3", "down, swap_down, swap_down");
}
TEST(Kernel, StridedPooling) { ExpectExact("O[r,c] max= I[2*r+kr, 2*c+kc]; r=5 c=9 kr=3 kc=3"); }

// Strided loads (stride 2: two loads and a permute, masked chunks by masked loads and a permute;
// other strides: a gather on AVX-512, lane by lane on AVX2) for every stride up to 5, vector
// lengths with and without tails (every tail of AVX2's 8 lanes), below one vector and across
// several, as sums, maxima (negative inputs: a lane never loaded would win) and products.
TEST(Kernel, StridedLoadsOfEveryStrideAndTail) {
  for (int stride : {2, 3, 5}) {
    for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 16, 17, 31, 40}) {
      const std::string s = std::to_string(stride), ns = std::to_string(n);
      for (const std::string& program :
           {"O[r,c] max= I[" + s + "*r+kr, " + s + "*c+kc]; r=3 c=" + ns + " kr=2 kc=3",
            "O[c] += I[" + s + "*c] * W[c]; c=" + ns,
            "O[r,c] += I[r, " + s + "*c+1]; r=2 c=" + ns,
            "t[r] += I[r, " + s + "*c]; r=2 c=" + ns,            // horizontal: c reduced
            "t[r] max= I[r, " + s + "*c] * W[c]; r=2 c=" + ns}) {
        SCOPED_TRACE(program);
        ExpectExact(program);
        for (Isa isa : HostIsas()) {
          EXPECT_EQ(CompareWithInterpreter(InitialTree(program), isa, true, true), "");
        }
      }
    }
  }
}

// Column taps 0 and 1 of a stride-2 window in one block read the even and odd phases of one
// span: the block loads them together (two loads, not four; BlockEmitter's PlanPairs). Pools
// and a convolution (a binary combiner) with the vector loop innermost and the taps unrolled
// around it, at widths with a masked last chunk (paired too: MaskedStrideTwoChunkPairedAndShifted)
// and without, negative inputs,
// under the guard pages (the pair's second load reads the odd chunk's last element, no
// further), and the pools with their rows folded too (fold_L0). The code must differ from the
// code with pairing off, or the pairs went untested (both without the folds: they take the
// pools' chunks before pairs do).
TEST(Kernel, StrideTwoPhasesLoadedTogether) {
  const struct {
    std::string program, actions;
  } kCases[] = {
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=4 c=32 kr=3 kc=3", "down, down, swap_down"},
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=3 c=37 kr=3 kc=3", "down, down, swap_down"},
      {"O[r,c] += I[2*r+kr, 2*c+kc]; r=2 c=64 kr=2 kc=2", "down, down, swap_down"},
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=4 c=8 kr=3 kc=3", "down, down, swap_down"},  // 8 lanes
      {"O[k,h,w] += I[c, 2*h+r, 2*w+s] * W[k,c,r,s]; k=2 h=3 w=35 c=2 r=3 s=3",
       "down, down, down, swap_down, swap_down"},
  };
  CodegenOptions unpaired;
  unpaired.pair_stride_two_phases = false;
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.program);
    ExpectExactAndChangedBy(WithActions(InitialTree(c.program), c.actions), unpaired,
                            [](Isa isa) { return isa != Isa::kSse; }, "no pair loaded");
  }
}

// Column tap 2 of a stride-2 window (the chunk at element d + 2) in a block that also reads tap 0
// of its vector (d) and of the next (d + 2W): made from those two by a lane shift (AVX-512;
// BlockEmitter's PlanShifts). Pools with several vectors of a row in one block, the taps
// unrolled outside them and inside them (the next vector's chunk loaded first and not), rows
// with a masked last chunk, a sum pool, a 5-wide window (taps 2, 3 and 4: two shifted, one of
// them paired), an 8-lane block and a convolution; negative inputs under the guard pages; the
// pools with their rows folded too (fold_L0). The code must differ from the code with shifts
// off at AVX-512, or the shifts went untested (both without the folds: they take the pools'
// chunks before shifts do).
TEST(Kernel, StrideTwoTapShiftedFromNextVector) {
  const struct {
    std::string program, actions;
  } kCases[] = {
      // c = 64: 4 vectors, taps outside them (kr, kc, c' unrolled, c'' the vector)
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=3 c=64 kr=3 kc=3",
       "tile_L2_16, interchange_L4_L2, unroll_L1, unroll_L2, unroll_L3"},
      // the taps inside the vectors: tap 2 of a vector comes before tap 0 of the next
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=3 c=64 kr=3 kc=3",
       "tile_L2_16, interchange_L1_L2, interchange_L4_L3, unroll_L1, unroll_L2, unroll_L3"},
      // 37 columns: two full vectors and a masked one (never a source)
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=2 c=37 kr=3 kc=3", "down, down, swap_down"},
      {"O[r,c] += I[2*r+kr, 2*c+kc]; r=2 c=48 kr=3 kc=3", "down, down, swap_down"},
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=2 c=40 kr=2 kc=5", "down, down, swap_down"},
      // vectors of 8 lanes (the vector loop a tile of 8)
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=3 c=24 kr=3 kc=3",
       "tile_L2_8, interchange_L4_L2, unroll_L1, unroll_L2, unroll_L3"},
      {"O[k,h,w] += I[c, 2*h+r, 2*w+s] * W[k,c,r,s]; k=2 h=3 w=35 c=2 r=3 s=3",
       "down, down, down, swap_down, swap_down"},
  };
  CodegenOptions unshifted;
  unshifted.shift_stride_two_taps = false;
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.program);
    ExpectExactAndChangedBy(WithActions(InitialTree(c.program), c.actions), unshifted, Avx512,
                            "no tap shifted");
  }
}

// The last chunk of 8 lanes at 16 (a row of 16n + 8 outputs) of a statement that reads stride 2
// runs at 8 lanes, in a block of its own after the full vectors (AVX-512; half_width_tails):
// pools and strided convolutions (several input channels, and depthwise) with the taps around
// the vector loop, one row of the tail in a block and two (their taps paired), the vector loop
// split so that the tail is a block alone, a sum, a 2x2 window; negative inputs under the guard
// pages; the pools with their rows folded too. The code must differ from the code with the
// option off at AVX-512, or the tails went untested.
TEST(Kernel, HalfWidthTailOfStrideTwoReads) {
  const struct {
    std::string program, actions;
  } kCases[] = {
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=3 c=40 kr=3 kc=3", "down, down, swap_down"},
      {"O[r,c] += I[2*r+kr, 2*c+kc]; r=2 c=24 kr=2 kc=2", "down, down, swap_down"},
      // c h h' r s w: two rows of the tail in a block
      {"O[c,h,w] max= I[c, 2*h+r, 2*w+s]; c=2 h=4 w=56 r=3 s=3",
       "down, down, down, swap_down, up, up, up, split_2"},
      {"O[c,h,w] max= I[c, 2*h+r, 2*w+s]; c=2 h=3 w=24 r=3 s=3",
       "down, down, down, swap_down"},
      // the vector loop split 3 r 8 by 16: the tail a block alone
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=2 c=56 kr=3 kc=3", "down, down, swap_down, split_16"},
      {"O[c,h,w] += I[c, 2*h+r, 2*w+s] * W[c,r,s]; c=3 h=3 w=24 r=3 s=3",
       "down, down, down, swap_down"},
      {"O[k,h,w] += I[c, 2*h+r, 2*w+s] * W[k,c,r,s]; k=2 h=3 w=40 c=2 r=3 s=3",
       "down, down, down, swap_down, swap_down"},
  };
  // Off alone: the chunk of 8 masked at 16 lanes, its taps paired (masked_stride_two_economies);
  // off with that too: each tap loaded alone.
  CodegenOptions paired, masked;
  paired.half_width_stride_two_tails = false;
  masked = paired;
  masked.masked_stride_two_economies = false;
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.program);
    const LoopTree tree = WithActions(InitialTree(c.program), c.actions);
    const StatementPlan plan = Lower(tree, Isa::kAvx512).statements[0];
    ASSERT_TRUE(plan.half_width_tails) << LoopTreeText(tree);
    ExpectExactAndChangedBy(tree, paired, Avx512, "no chunk of 8 lanes at 8");
    for (Isa isa : HostIsas()) {
      if (!Avx512(isa)) continue;
      // Both off: each tap of the chunk of 8 masked at 16 lanes loaded alone (the two-load form
      // of LoadStrideTwoMasked), longer code than the chunk at 8 lanes, whose taps share loads
      // (not merely reordered); and both off and the option alone against the interpreter.
      EXPECT_EQ(CompareWithInterpreter(tree, isa, true, true, masked), "") << LoopTreeText(tree);
      EXPECT_EQ(CompareWithInterpreter(tree, isa, true, true, paired), "") << LoopTreeText(tree);
      const auto half = KernelCompiler(isa).CompileCode(tree);
      const auto full = KernelCompiler(isa, masked).CompileCode(tree);
      ASSERT_TRUE(half.ok() && full.ok());
      EXPECT_LT(half->size(), full->size()) << LoopTreeText(tree);
    }
  }
}

// A vector loop's masked last chunk of stride 2 (a 28-wide row's 12 lanes at 16) pairs its taps
// 0 and 1 (their span's first vector whole where they fill it, the rest masked), makes its tap 2
// from the pair's even phase by a lane shift (vertical statements), and gives the full chunk
// before it lane 0 of its tap 0 for that one's tap 2 (AVX-512; BlockEmitter's PlanPairs and
// PlanShifts, masked_stride_two). Pools and convolutions (depthwise and of several channels)
// with tails of 9, 12 and 15 lanes at 16 (one span over two vectors), 4 and 7 at 16 and 4 at 8
// (one vector: the span through tap 2's element fits it or not), one and two rows a block, a
// 2x2 sum (no tap 2), a 5-wide window (taps 2 and 3 paired too), a horizontal sum (pairs, no
// shift); negative inputs under the guard pages, so that a load past the last element read
// faults; the pools folded too. The code must differ from the code with the option off at
// AVX-512, or the masked chunks went untested.
TEST(Kernel, MaskedStrideTwoChunkPairedAndShifted) {
  const struct {
    std::string program, actions;
  } kCases[] = {
      {"O[c,h,w] += I[c, 2*h+r, 2*w+s] * W[c,r,s]; c=1 h=2 w=28 r=3 s=3",
       "down, down, down, swap_down"},
      {"O[c,h,w] += I[c, 2*h+r, 2*w+s] * W[c,r,s]; c=2 h=3 w=25 r=3 s=3",
       "down, down, down, swap_down"},
      {"O[k,h,w] += I[c, 2*h+r, 2*w+s] * W[k,c,r,s]; k=2 h=2 w=31 c=2 r=3 s=3",
       "down, down, down, swap_down, swap_down"},
      {"O[c,h,w] max= I[c, 2*h+r, 2*w+s]; c=2 h=3 w=28 r=3 s=3", "down, down, down, swap_down"},
      {"O[c,h,w] max= I[c, 2*h+r, 2*w+s]; c=1 h=4 w=28 r=3 s=3",
       "down, down, down, swap_down, up, up, up, split_2"},
      {"O[r,c] += I[2*r+kr, 2*c+kc]; r=3 c=12 kr=2 kc=2", "down, down, swap_down"},
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=2 c=26 kr=3 kc=5", "down, down, swap_down"},
      {"O[r] += I[r, 2*c+k]; r=3 c=14 k=2", "down, swap_down"},
      {"O[c,h,w] += I[c, 2*h+r, 2*w+s] * W[c,r,s]; c=2 h=2 w=7 r=3 s=3",
       "down, down, down, swap_down"},
      {"O[c,h,w] max= I[c, 2*h+r, 2*w+s]; c=2 h=2 w=20 r=3 s=3", "down, down, down, swap_down"},
      {"O[c,h,w] += I[c, 2*h+r, 2*w+s] * W[c,r,s]; c=1 h=2 w=28 r=3 s=3",
       "down, down, down, split_8, down, swap_down"},
      {"O[r] += I[r, 2*c+k]; r=3 c=5 k=2", "down, swap_down"},
  };
  CodegenOptions alone;
  alone.masked_stride_two_economies = false;
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.program + " | " + c.actions);
    ExpectExactAndChangedBy(WithActions(InitialTree(c.program), c.actions), alone, Avx512,
                            "no masked chunk paired or shifted");
  }
}

// Kernels with no masked stride-2 chunk are byte for byte those with masked_stride_two_economies
// off (which emits the code from before it): matmuls, a channels-last strided convolution (its
// vector variable contiguous), pools whose rows are whole vectors (their taps paired: 32 and 64
// wide at 16 lanes, 8 wide at 8) and a depthwise convolution's, a stride-1 window with a masked
// contiguous tail.
TEST(Kernel, MaskedStrideTwoEconomiesLeaveOtherKernelsAlone) {
  const struct {
    std::string program, actions;
  } kCases[] = {
      {"C[m,n] += A[m,k] * B[k,n]; m=37 n=61 k=97", "split_4, down, swap_down"},
      {"O[h,w,k] += I[2*h+r, 2*w+s, c] * W[r,s,c,k]; k=32 h=4 w=7 c=8 r=3 s=3",
       "down, down, down, down, down, swap_up"},
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=4 c=32 kr=3 kc=3", "down, down, swap_down"},
      {"O[r,c] += I[2*r+kr, 2*c+kc]; r=2 c=64 kr=2 kc=2", "down, down, swap_down"},
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=4 c=8 kr=3 kc=3", "down, down, swap_down"},
      {"O[c,h,w] += I[c, 2*h+r, 2*w+s] * W[c,r,s]; c=2 h=2 w=64 r=3 s=3",
       "down, down, down, split_8, down, swap_down"},
      {"O[r,c] max= I[r+kr, c+kc]; r=2 c=37 kr=3 kc=3", "down, down, swap_down"},
  };
  CodegenOptions off;
  off.masked_stride_two_economies = false;
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.program + " | " + c.actions);
    const LoopTree tree = WithActions(InitialTree(c.program), c.actions);
    for (Isa isa : HostIsas()) {
      const auto on_code = KernelCompiler(isa).CompileCode(tree);
      const auto off_code = KernelCompiler(isa, off).CompileCode(tree);
      ASSERT_TRUE(on_code.ok() && off_code.ok());
      EXPECT_EQ(*on_code, *off_code) << Traits(isa).name << "\n" << LoopTreeText(tree);
    }
  }
}

// Column tap t of a stride-1 window (the contiguous chunk at element d + t, 0 < t < W) in a block
// that also reads tap 0 of its vector (d) and of the next (d + W): made from those two by a
// shift of t lanes instead of a load across two cache lines (AVX-512; BlockEmitter's
// PlanShifts, shift_unit_taps). CHW pools and a depthwise convolution (a binary combiner) with
// several vectors of a row in one block, the taps outside the vectors and inside them, a masked
// last vector (never a source), a sum, a 5-wide window, a 17-wide one (taps 1..15 shifted, tap
// 16 the next vector's tap 0), an 8-lane block and two output rows in one block; negative
// inputs under the guard pages. The code must differ from the code with the shifts off at
// AVX-512, or the shifts went untested.
TEST(Kernel, UnitStrideTapShiftedFromNextVector) {
  const struct {
    std::string program, actions;
  } kCases[] = {
      {"O[r,c] max= I[r+kr, c+kc]; r=3 c=64 kr=3 kc=3",
       "tile_L2_16, interchange_L4_L2, unroll_L1, unroll_L2, unroll_L3"},
      {"O[r,c] max= I[r+kr, c+kc]; r=3 c=64 kr=3 kc=3",
       "tile_L2_16, interchange_L1_L2, interchange_L4_L3, unroll_L1, unroll_L2, unroll_L3"},
      {"O[r,c] max= I[r+kr, c+kc]; r=2 c=37 kr=3 kc=3", "down, down, swap_down"},
      {"O[r,c] += I[r+kr, c+kc]; r=2 c=48 kr=3 kc=3", "down, down, swap_down"},
      {"O[r,c] max= I[r+kr, c+kc]; r=2 c=40 kr=2 kc=5", "down, down, swap_down"},
      {"O[r,c] += I[r, c+kc]; r=2 c=48 kc=17", "down, swap_down"},
      {"O[r,c] max= I[r+kr, c+kc]; r=3 c=24 kr=3 kc=3",
       "tile_L2_8, interchange_L4_L2, unroll_L1, unroll_L2, unroll_L3"},
      {"O[r,c] max= I[r+kr, c+kc]; r=4 c=64 kr=3 kc=3",
       "tile_L0_2, tile_L3_32, interchange_L3_L1, interchange_L4_L5"},
      {"O[k,h,w] += I[k, h+r, w+s] * W[k,r,s]; k=2 h=3 w=35 r=3 s=3",
       "tile_L3_16, interchange_L5_L3, unroll_L2, unroll_L3, unroll_L4"},
  };
  CodegenOptions unshifted;
  unshifted.shift_unit_stride_taps = false;
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.program + " | " + c.actions);
    const LoopTree tree = WithActions(InitialTree(c.program), c.actions);
    for (Isa isa : HostIsas()) {
      EXPECT_EQ(CompareWithInterpreter(tree, isa, true, true), "") << LoopTreeText(tree);
      if (isa != Isa::kAvx512) continue;
      const auto shifted = KernelCompiler(isa).CompileCode(tree);
      const auto loaded = KernelCompiler(isa, unshifted).CompileCode(tree);
      ASSERT_TRUE(shifted.ok() && loaded.ok());
      EXPECT_NE(*shifted, *loaded) << "no tap shifted\n" << LoopTreeText(tree);
    }
  }
}

// A pool's window rows folded before the permutes (BlockEmitter's PlanRowFolds): every row's
// span at tap 0 (and at tap 2 where no next vector gives it) summed or maxed in memory's order,
// then permuted once. Pools with several vectors of a row in one block (tap 2 shifted in from
// the next vector's fold, and the last vector's from its own), the taps outside the vectors and
// inside them, two output rows in one block, a masked last vector (never folded), a 2x2 sum
// pool (no tap 2), an 8-lane block, a 5-wide window (taps 3 and 4: no fold) and outputs the
// input does not depend on (two accumulators reading one window); negative inputs under the
// guard pages (a fold reads no element its chunks do not). The folds are the schedule's choice
// (fold_L0 marks the statement; StatementSchedule::fold). At AVX-512 the marked tree's code
// must differ from the unmarked one's, or the folds went untested, except where nothing folds:
// the 5-wide window and a convolution (a multiplied operand, which takes no mark).
TEST(Kernel, StrideTwoWindowRowsFoldedBeforeThePermutes) {
  const struct {
    std::string program, actions;
    int folds;  // 1: the code differs from the unfolded code; 0: it does not; -1: either
  } kCases[] = {
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=3 c=64 kr=3 kc=3",
       "tile_L2_16, interchange_L4_L2, unroll_L1, unroll_L2, unroll_L3", 1},
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=3 c=64 kr=3 kc=3",
       "tile_L2_16, interchange_L1_L2, interchange_L4_L3, unroll_L1, unroll_L2, unroll_L3", 1},
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=4 c=128 kr=3 kc=3",
       "tile_L0_2, tile_L3_64, interchange_L3_L1, interchange_L4_L5", 1},
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=2 c=37 kr=3 kc=3", "down, down, swap_down", 1},
      {"O[r,c] += I[2*r+kr, 2*c+kc]; r=3 c=48 kr=3 kc=3", "down, down, swap_down", 1},
      {"O[r,c] += I[2*r+kr, 2*c+kc]; r=2 c=64 kr=2 kc=2", "down, down, swap_down", 1},
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=3 c=24 kr=3 kc=3",
       "tile_L2_8, interchange_L4_L2, unroll_L1, unroll_L2, unroll_L3", 1},
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=2 c=40 kr=2 kc=5", "down, down, swap_down", 0},
      {"O[k,r,c] max= I[2*r+kr, 2*c+kc]; k=2 r=2 c=32 kr=3 kc=3",
       "tile_L3_16, interchange_L5_L3, interchange_L1_L0, unroll_L2, unroll_L3, unroll_L4", 1},
      // a 4-wide window: taps 0..3 are no rows x {0, 1, 2} grid
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=2 c=32 kr=3 kc=4", "down, down, swap_down", 0},
      // 7 rows blocked by 3 (a tail block of one row, its steps spread over accumulator sets)
      {"O[r,c] max= I[2*r+kr, 2*c+kc]; r=7 c=64 kr=3 kc=3",
       "tile_L0_3, tile_L3_32, interchange_L3_L1, interchange_L4_L5, unroll_L1", -1},
      {"O[r,c] += I[2*r+kr, 2*c+kc]; r=7 c=96 kr=3 kc=3",
       "tile_L0_3, tile_L3_48, interchange_L3_L1, interchange_L4_L5, unroll_L1", -1},
      {"O[k,h,w] += I[c, 2*h+r, 2*w+s] * W[k,c,r,s]; k=2 h=3 w=35 c=2 r=3 s=3",
       "down, down, down, swap_down, swap_down", 0},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.program);
    const LoopTree tree = WithActions(InitialTree(c.program), c.actions);
    // The mark where the statement takes it (not the convolution: it multiplies).
    const bool marks = CanFoldRows(tree.program(), 0);
    EXPECT_EQ(marks, c.program.find("] * ") == std::string::npos);
    const LoopTree marked = marks ? WithActions(tree, "fold_L0") : tree;
    for (Isa isa : HostIsas()) {
      EXPECT_EQ(CompareWithInterpreter(marked, isa, true, true), "") << LoopTreeText(marked);
      EXPECT_EQ(CompareWithInterpreter(marked, isa, true, false), "") << LoopTreeText(marked);
      if (isa != Isa::kAvx512) continue;
      const auto folded = KernelCompiler(isa).CompileCode(marked);
      const auto chunks = KernelCompiler(isa).CompileCode(tree);
      ASSERT_TRUE(folded.ok() && chunks.ok());
      if (c.folds >= 0) {
        EXPECT_EQ(*folded != *chunks, c.folds == 1) << LoopTreeText(marked);
      }
    }
  }
}

// A stride-2 convolution as ResNet's downsampling layers have it, and a split of w that leaves
// a tail (its sketches are in EverySketchMatchesTheInterpreter).
TEST(Kernel, StridedConvolution) {
  const std::string conv = "O[k,h,w] += I[c, 2*h+r, 2*w+s] * W[k,c,r,s]; k=5 h=3 w=19 c=3 r=3 s=3";
  ExpectExact(conv);
  ExpectExact(conv, "down, down, down, split_8");
}
// Vectorized along a variable the output is strided along (a CHW 1x1 convolution's output
// channels, read contiguously from W[c,k]): the accumulators stored by a scatter (AVX-512) or
// lane by lane (AVX2), and loaded back the same way where a reduction loop outside the register
// scope resumes them (strides 2 and more; every tail; sums, maxes and relu after the last visit).
TEST(Kernel, StridedStoresOfEveryStrideAndTail) {
  std::vector<LoopTree> trees;
  for (int k : {5, 7, 8, 16, 23, 37}) {
    const std::string ks = " k=" + std::to_string(k);
    for (int h : {2, 3, 13}) {
      const std::string hs = " h=" + std::to_string(h);
      // c outermost: with 13 rows of h the output passes the register budget, so the scope
      // starts below c and its block is re-entered for every c (the reload path).
      trees.push_back(InitialTree("O[k,h] += I[c,h] * W[c,k]; c=3" + hs + ks));
      // c inside the block: one entry, one store.
      trees.push_back(WithActions(InitialTree("O[k,h] += I[c,h] * W[c,k]; c=3" + hs + ks),
                                  "swap_down"));
      trees.push_back(InitialTree("O[k,h] max= I[c,h,k]; c=4" + hs + ks));
      trees.push_back(InitialTree("O[k,h] += I[c,h] * W[c,k] -> relu; c=3" + hs + ks));
    }
    trees.push_back(WithActions(InitialTree("O[k,h,w] += I[c,h,w] * W[c,k]; c=5 h=2 w=3" + ks),
                                "swap_down, swap_down"));
    trees.push_back(InitialTree("B[n,m] = A[m,n]; m=3 n=" + std::to_string(k)));
  }
  // Reloads of stride 2 (two rows of h: the blocks of k pass the budget at 16 vectors on
  // AVX-512, 7 on AVX2, tails of 5 lanes: the permute, masked and AVX2 mask-register paths),
  // 8-lane gathers (31 rows of 7), and a stride-2 input whose 8-lane tail is a block of its own
  // (half_width_tails) beside a strided output.
  for (const char* text : {"O[k,h] += I[c,h] * W[c,k]; c=3 h=2 k=245",
                           "O[k,h] += I[c,h] * W[c,k]; c=3 h=2 k=53",
                           "O[k,h] max= I[c,h,k]; c=2 h=2 k=256",
                           "O[k,h] += I[c,h] * W[c,k]; c=3 h=31 k=7",
                           "O[k,h] += I[c,h,2*k]; c=3 h=3 k=24",
                           "O[k,h] += I[c,h,2*k]; c=3 h=31 k=24"}) {
    trees.push_back(InitialTree(text));
  }
  int reloads = 0, stride_two_reloads = 0, narrow_reloads = 0, half_tails = 0;
  for (const LoopTree& t : trees) {
    SCOPED_TRACE(LoopTreeText(t));
    for (Isa isa : HostIsas()) {
      if (isa == Isa::kSse) continue;
      const StatementPlan s = Lower(t, isa).statements[0];
      EXPECT_EQ(s.output.kind, AccessPlan::Kind::kStrided) << Traits(isa).name;
      const bool reload = s.reduction != Reduction::kAssign && s.scope > 0 && s.loops[0].reduction;
      reloads += reload;
      stride_two_reloads += reload && s.output.stride[s.loops[s.vector_loop].var] == 2;
      narrow_reloads += reload && isa == Isa::kAvx512 && s.width == 8;
      half_tails += s.half_width_tails;
    }
    ExpectExact(t);
  }
  EXPECT_GE(reloads, 18);  // 6 k x 3 statements with 13 rows, at least at one ISA
  // One vector: find over begin() and end() of two different HostIsas() temporaries was
  // undefined, and on an AVX2-only host it asserted the AVX-512 counts (and failed).
  const std::vector<Isa> isas = HostIsas();
  if (std::find(isas.begin(), isas.end(), Isa::kAvx512) != isas.end()) {
    EXPECT_GE(stride_two_reloads, 3);
    EXPECT_GE(narrow_reloads, 1);
    EXPECT_GE(half_tails, 2);
  }
}
TEST(Kernel, Transpose) { ExpectExact("B[n,m] = A[m,n]; m=11 n=21"); }
// Transposes whose register block holds consecutive elements of the input's rows: the rows are
// loaded as vectors and transposed in registers (groups of half a vector to a vector of them;
// fewer stay gathers): every row count (the vector's lanes, tails included) against every group
// size, in 16 lanes and 8, with relu, a 3-D layout change and a block split into groups.
TEST(Kernel, TransposesInRegisters) {
  // m 3 outside n, n' 16 (8) and m' 16 lanes in the register block (rows m', elements n').
  const std::string block = "split_16, down, swap_down, up, split_16";
  const std::string block8 = "split_16, down, swap_down, up, split_8";
  for (int m : {1, 3, 8, 9, 16, 17, 40}) {
    for (int n : {4, 7, 8, 12, 15, 16, 20, 24, 33}) {
      const std::string sizes = "; m=" + std::to_string(m) + " n=" + std::to_string(n);
      const std::string p = "B[n,m] = A[m,n]" + sizes;
      SCOPED_TRACE(p);
      for (const std::string& actions : {std::string("swap_down"), block, block8}) {
        // A split that does not apply to so small a loop leaves the test's tree as it is.
        LoopTree t = InitialTree(p);
        for (absl::string_view a : absl::StrSplit(actions, ", ")) {
          ActionResult r = Apply(t, *ActionFromName(a), Limits{});
          if (r.had_effect()) t = r.tree;
        }
        ExpectExact(t);
        for (Isa isa : HostIsas()) EXPECT_EQ(CompareWithInterpreter(t, isa, true, true), "");
      }
      ExpectExact(WithActions(InitialTree("B[n,m] = A[m,n] -> relu" + sizes), "swap_down"));
    }
  }
  ExpectExact("O[c,h,w] = I[h,w,c]; c=24 h=3 w=21", "down, swap_down, split_16, swap_up");
}

TEST(Kernel, Broadcast) { ExpectExact("B[m,n] = a[n]; m=3 n=35"); }

// VEX-encoded 256-bit vbroadcastss ymm, m32 and vfmadd231ps ymm in `code` (C4 escape, map 0F38,
// the L and pp bits of each; the registers vary), and of the FMAs those with a memory operand
// (ModRM's mod below 3).
struct Avx2Counts {
  int broadcasts = 0, fmas = 0, fmas_from_memory = 0;
  int adds = 0;  // vaddps ymm (two- or three-byte VEX, map 0F)
  std::vector<int> fma_targets;  // each FMA's destination register, in code order
};
Avx2Counts CountAvx2(const std::vector<uint8_t>& code) {
  Avx2Counts n;
  for (size_t i = 0; i + 4 < code.size(); ++i) {
    if (code[i] == 0xC5 && (code[i + 1] & 0x07) == 0x04 && code[i + 2] == 0x58) ++n.adds;
    if (code[i] == 0xC4 && (code[i + 1] & 0x1F) == 0x01 && (code[i + 2] & 0x07) == 0x04 &&
        code[i + 3] == 0x58) {
      ++n.adds;
    }
    if (code[i] != 0xC4 || (code[i + 1] & 0x1F) != 0x02) continue;
    if (code[i + 2] == 0x7D && code[i + 3] == 0x18) ++n.broadcasts;
    if ((code[i + 2] & 0x87) == 0x05 && code[i + 3] == 0xB8) {
      ++n.fmas;
      if ((code[i + 4] >> 6) != 3) ++n.fmas_from_memory;
      // ModRM.reg, extended by VEX's inverted R bit.
      n.fma_targets.push_back(((code[i + 4] >> 3) & 7) | ((code[i + 1] & 0x80) ? 0 : 8));
    }
  }
  return n;
}

bool HostHasAvx2() {
  for (Isa isa : HostIsas()) {
    if (isa == Isa::kAvx2) return true;
  }
  return false;
}

// A channels-last 3x3 convolution, O[h,w,k] += I[h+r, w+s, c] * W[r,s,c,k], with a register
// block of `rows` of w (w' innermost but one) x `lanes` of k (k', innermost), the reductions
// r, s, c around it: loop_nest actions from its start order h r w s c k.
LoopTree ConvBlock(int k, int w, int rows, int lanes) {
  const std::string program = "O[h,w,k] += I[h+r, w+s, c] * W[r,s,c,k]; k=" + std::to_string(k) +
                              " h=2 w=" + std::to_string(w) + " c=64 r=3 s=3";
  return WithActions(InitialTree(program),
                     "tile_L5_" + std::to_string(lanes) + ", tile_L2_" + std::to_string(rows) +
                         ", interchange_L1_L2, interchange_L5_L6, interchange_L4_L5, "
                         "interchange_L3_L4, interchange_L2_L3, interchange_L4_L5, "
                         "interchange_L5_L6");
}

// The AVX2 kernel of `tree`, checked against the interpreter, counted; nullopt (and the test
// skipped by the caller) on a host without AVX2.
std::optional<Avx2Counts> CompiledAvx2(const LoopTree& tree) {
  ExpectExact(tree);
  if (!HostHasAvx2()) return std::nullopt;
  KernelCompiler compiler(Isa::kAvx2);
  absl::StatusOr<std::vector<uint8_t>> code = compiler.CompileCode(tree);
  EXPECT_TRUE(code.ok()) << code.status();
  if (!code.ok()) return Avx2Counts{};
  return CountAvx2(*code);
}

// A 12-accumulator block of rows x `vectors`, unrolled a whole number of times (the planner
// may unroll small loops around it): one broadcast per row, read by the row's `vectors` FMAs.
void ExpectBroadcastPerRow(const Avx2Counts& n, int vectors) {
  ASSERT_GT(n.fmas, 0);
  EXPECT_EQ(n.fmas % 12, 0);
  EXPECT_EQ(n.broadcasts * vectors, n.fmas);
}

TEST(Kernel, AnAvx2RowIsBroadcastOncePerReductionStep) {
  // A block of 3 rows (w') x 4 vectors (k' 32) fills AVX2's 12 accumulators, leaving no cache
  // register: each row's input is broadcast into an operand temporary once and read there by
  // the row's 4 FMAs (it was broadcast again before each).
  const std::optional<Avx2Counts> n = CompiledAvx2(ConvBlock(64, 6, 3, 32));
  if (!n.has_value()) GTEST_SKIP() << "no AVX2 on this host";
  ExpectBroadcastPerRow(*n, 4);
}

TEST(Kernel, AnAvx2FmaBlockCachesItsVectorsInTheTemporaryAndTheMaskRegister) {
  // 6 rows (w') x 2 vectors (k' 16): 12 accumulators, so no cache register of the budget's own;
  // an FMA block of whole vectors needs neither the arithmetic temporary nor the lane mask,
  // which then hold the two weight vectors each of the 6 rows reads: every FMA reads registers
  // only (each took a weight vector from memory before).
  const std::optional<Avx2Counts> n = CompiledAvx2(ConvBlock(32, 12, 6, 16));
  if (!n.has_value()) GTEST_SKIP() << "no AVX2 on this host";
  ExpectBroadcastPerRow(*n, 2);
  EXPECT_EQ(n->fmas_from_memory, 0);
  // A tail of 5 lanes (k = 29) needs the mask: its blocks keep the weights in memory, and the
  // kernel stays exact.
  ExpectExact(ConvBlock(29, 12, 6, 16));
}

// A matmul of m rows blocked by 3 rows x 4 vectors (n 32), k's steps unrolled by 4 inside the
// register scope: for m = 7 the last block is 1 row of 4 accumulators, too few to cover the FMA
// latency (kLatencyChains).
LoopTree RowsOfThree(int m) {
  return WithActions(
      InitialTree("C[m,n] += A[m,k] * B[k,n]; m=" + std::to_string(m) + " n=32 k=256"),
      "tile_L0_3, tile_L2_4, interchange_L1_L2, interchange_L2_L3");
}

TEST(Kernel, ATailBlockSpreadsItsReductionStepsOverAccumulatorSets) {
  // The tail row's 4 accumulators alternate with 4 more across k's unrolled steps (2 sets),
  // added into the first set before the store: 4 adds; 6 rows have no tail, no adds.
  for (int m : {7, 6}) {
    const LoopTree tree = RowsOfThree(m);
    EXPECT_TRUE(Lower(tree, Isa::kAvx2).statements[0].spread_small_blocks);
    const std::optional<Avx2Counts> n = CompiledAvx2(tree);
    if (!n.has_value()) GTEST_SKIP() << "no AVX2 on this host";
    EXPECT_EQ(n->adds, m == 7 ? 4 : 0) << m;
    EXPECT_EQ(n->fmas, (m == 7 ? 12 + 4 : 12) * 4) << m;  // each k' step once, per block
    if (m == 7) {
      // The tail's 16 FMAs, emitted last, write registers 0-3 at even k' steps and 4-7 at odd
      // ones: 8 of them the second set.
      const std::vector<int> tail(n->fma_targets.end() - 16, n->fma_targets.end());
      EXPECT_EQ(std::count_if(tail.begin(), tail.end(), [](int r) { return r >= 4 && r < 8; }),
                8);
      EXPECT_EQ(std::count_if(tail.begin(), tail.end(), [](int r) { return r < 4; }), 8);
    }
  }
  // Tails with sets, exact on every ISA: 1 and 2 leftover rows; a max pool's 1-row tail over 3
  // sets (they start at -inf), s's 3 steps one per set; 2 masked accumulators over 3 sets, k's
  // 4 steps in turn; k's remainder step.
  for (int m = 4; m <= 11; ++m) ExpectExact(RowsOfThree(m));
  const LoopTree trees[] = {
      WithActions(InitialTree("O[h,w,c] max= I[h+r, w+s, c]; h=7 w=5 c=19 r=3 s=3"),
                  "tile_L0_3, interchange_L1_L2, interchange_L2_L3, interchange_L3_L4"),
      WithActions(InitialTree("C[m,n] += A[m,k] * B[k,n]; m=7 n=13 k=29"),
                  "tile_L0_3, tile_L2_4, interchange_L1_L2, interchange_L2_L3"),
  };
  for (const LoopTree& tree : trees) {
    for (Isa isa : HostIsas()) {
      if (isa != Isa::kSse) {
        EXPECT_TRUE(Lower(tree, isa).statements[0].spread_small_blocks);
      }
      // Negative inputs too: a max whose sets started at 0 would show.
      EXPECT_EQ(CompareWithInterpreter(tree, isa, true, true), "");
    }
    ExpectExact(tree);
  }
}

// Non-temporal stores (CodegenOptions::stream_output_min_bytes): a transpose (gathers, and
// in registers with 16- and 8-row blocks, tails of rows), a split vector loop whose last part
// is a full vector, a broadcast, an elementwise op with relu, a concatenation and a narrow
// vector loop (AVX-512's 8 lanes), each run with aligned bases (the streamed body) and with
// every tensor one float in (the plain body), on every ISA. At AVX2 and AVX-512 the code must
// differ from the code without streaming, or the streamed body went untested. Outputs whose rows or offset are no multiple
// of the width, vector loops shorter than it, outputs below the threshold and accumulations keep
// plain stores: the same code, and the plan says why where it is the alignment.
TEST(Kernel, StreamedStores) {
  CodegenOptions streamed;
  streamed.stream_output_min_bytes = 1;
  const struct {
    std::string program, actions;
  } kStreamed[] = {
      {"B[n,m] = A[m,n]; m=48 n=21", "swap_down"},
      {"B[n,m] = A[m,n]; m=64 n=35", "split_16, down, swap_down, up, split_16"},
      {"B[n,m] = A[m,n] -> relu; m=32 n=20", "split_16, down, swap_down, up, split_8"},
      {"B[n,m] = A[m,n]; m=80 n=5", "split_32, down, swap_down"},
      {"B[m,n] = a[n]; m=3 n=64", ""},
      {"C[m,n] = A[m,n] + B[m,n] -> relu; m=5 n=48", "split_2"},
      {"C[m,a] = A[m,a]; C[m,b+32] = B[m,b]; m=3 a=32 b=16", ""},
      {"C[m,n] = A[m,n] + B[m,n]; m=6 n=8", ""},
  };
  for (const auto& c : kStreamed) {
    SCOPED_TRACE(c.program + " | " + c.actions);
    const LoopTree tree = WithActions(InitialTree(c.program), c.actions);
    for (Isa isa : HostIsas()) {
      EXPECT_EQ(CompareWithInterpreter(tree, isa, true, false, streamed), "");
      if (isa == Isa::kSse) continue;  // scalar code for some (SSE transposes by lanes none)
      const auto with = KernelCompiler(isa, streamed).CompileCode(tree);
      const auto without = KernelCompiler(isa).CompileCode(tree);
      ASSERT_TRUE(with.ok() && without.ok());
      EXPECT_NE(*with, *without) << Traits(isa).name << ": nothing streamed\n"
                                 << DescribePlan(Lower(tree, isa, streamed), tree.program());
    }
  }
  const struct {
    std::string program, actions, why;  // why: the plan's note where alignment refused it
  } kPlain[] = {
      {"B[n,m] = A[m,n]; m=36 n=5", "swap_down", "the output's step along 'n'"},
      {"C[m,a] = A[m,a]; C[m,b+20] = B[m,b]; m=3 a=20 b=13", "", "the output's step along 'm'"},
      {"C[m,a] = A[m,a]; C[m,b+4] = B[m,b]; m=3 a=4 b=28", "", "the output's offset"},
      {"C[m,n] += A[m,k] * B[k,n]; m=4 n=32 k=8", "", ""},
  };
  for (const auto& c : kPlain) {
    SCOPED_TRACE(c.program);
    const LoopTree tree = WithActions(InitialTree(c.program), c.actions);
    for (Isa isa : HostIsas()) {
      if (isa == Isa::kSse) continue;  // scalar code: no vector stores, another plan note
      EXPECT_EQ(CompareWithInterpreter(tree, isa, true, false, streamed), "");
      const auto with = KernelCompiler(isa, streamed).CompileCode(tree);
      const auto without = KernelCompiler(isa).CompileCode(tree);
      ASSERT_TRUE(with.ok() && without.ok());
      EXPECT_EQ(*with, *without) << Traits(isa).name;
      const std::string plan = DescribePlan(Lower(tree, isa, streamed), tree.program());
      if (!c.why.empty()) {
        EXPECT_NE(plan.find("stores not streamed: " + c.why), std::string::npos) << plan;
      }
    }
  }
  CodegenOptions large = streamed;
  large.stream_output_min_bytes = 4 * 48 * 21 + 1;  // one byte more than the output
  const LoopTree transpose = InitialTree("B[n,m] = A[m,n]; m=48 n=21");
  for (Isa isa : HostIsas()) {
    EXPECT_EQ(*KernelCompiler(isa, large).CompileCode(transpose),
              *KernelCompiler(isa).CompileCode(transpose));
  }
}

// The schedule's stream marks (StatementSchedule::stream, the stream_L<p> action) stream a
// statement's stores whatever its size, without the option: the same code as the option with a
// threshold of one byte, checked against the interpreter; an unmarked statement beside a marked
// one keeps its plain stores, and so does a marked one with no full vector to store.
TEST(Kernel, StreamMarksOfTheSchedule) {
  CodegenOptions by_size;
  by_size.stream_output_min_bytes = 1;
  const auto marked = [](const LoopTree& t, std::vector<bool> which) {
    std::vector<StatementSchedule> schedules = t.schedules();
    for (size_t s = 0; s < schedules.size(); ++s) schedules[s].stream = which[s];
    return *LoopTree::Create(t.program_ptr(), std::move(schedules), t.cursor());
  };
  for (const auto& [program, actions] : std::vector<std::pair<std::string, std::string>>{
           {"B[n,m] = A[m,n]; m=48 n=21", "swap_down"},
           {"B[n,m] = A[m,n]; m=64 n=35", "split_16, down, swap_down, up, split_16"},
           {"C[m,n] = A[m,n] + B[m,n] -> relu; m=5 n=48", "split_2"},
           {"C[m,a] = A[m,a]; C[m,b+32] = B[m,b]; m=3 a=32 b=16", ""}}) {
    SCOPED_TRACE(program + " | " + actions);
    const LoopTree tree = WithActions(InitialTree(program), actions);
    const LoopTree all = marked(tree, std::vector<bool>(tree.schedules().size(), true));
    for (Isa isa : HostIsas()) {
      EXPECT_EQ(CompareWithInterpreter(all, isa, true, false), "");
      EXPECT_EQ(*KernelCompiler(isa).CompileCode(all),
                *KernelCompiler(isa, by_size).CompileCode(tree))
          << Traits(isa).name;
    }
  }
  const LoopTree concat = InitialTree("C[m,a] = A[m,a]; C[m,b+32] = B[m,b]; m=3 a=32 b=16");
  const LoopTree first = marked(concat, {true, false});
  for (Isa isa : HostIsas()) {
    if (isa == Isa::kSse) continue;
    EXPECT_EQ(CompareWithInterpreter(first, isa, true, false), "");
    const KernelPlan plan = Lower(first, isa);
    EXPECT_TRUE(plan.statements[0].stream_output) << Traits(isa).name;
    EXPECT_FALSE(plan.statements[1].stream_output) << Traits(isa).name;
  }
  // Three elements: no full vector to store, plain stores.
  const LoopTree short_row = marked(InitialTree("B[m] = A[m]; m=3"), {true});
  for (Isa isa : HostIsas()) {
    EXPECT_EQ(CompareWithInterpreter(short_row, isa, true, false), "");
    EXPECT_FALSE(Lower(short_row, isa).statements[0].stream_output) << Traits(isa).name;
  }
}

TEST(Kernel, Concatenation) { ExpectExact("C[m,a] = A[m,a]; C[m,b+20] = B[m,b]; m=3 a=20 b=13"); }
TEST(Kernel, ElementwiseAddWithRelu) { ExpectExact("C[m,n] = A[m,n] + B[m,n] -> relu; m=3 n=41"); }
TEST(Kernel, GevmAndMatmulRelu) {
  ExpectExact("y[n] += x[k] * A[k,n]; n=37 k=9");
  ExpectExact("C[m,n] += A[m,k] * B[k,n] -> relu; m=7 n=17 k=9");
}
TEST(Kernel, SumOfSumsAndMaxOfProducts) {
  ExpectExact("s[m] += A[m,n] + B[m,n]; m=3 n=29");
  ExpectExact("C[m,n] max= A[m,k] * B[k,n]; m=4 n=19 k=5");
}

// ---- annotations ----
TEST(Kernel, UnrollMarksAreHonoured) {
  ExpectExact("C[m,n] += A[m,k] * B[k,n]; m=9 n=20 k=6", "unroll, down, unroll");
}
TEST(Kernel, VectorizingAnOuterLoop) {
  // m k n with n marked vectorize and moved outside k: outer-loop vectorization.
  ExpectExact("C[m,n] += A[m,k] * B[k,n]; m=5 n=21 k=7", "down, down, vectorize, swap_up");
  ExpectExact("y[m] += A[m,k] * x[k]; m=21 k=5", "vectorize, swap_down");
}

// ---- many runtime loops: counters beyond the registers live on the stack ----
TEST(Kernel, ThirteenNestedRuntimeLoops) {
  std::string actions;
  for (int i = 0; i < 12; ++i) actions += "split_2, ";
  ExpectExact("B[m] = A[m]; m=8192", actions);
}

// ---- property: random schedules of every primitive ----
constexpr const char* kPrograms[] = {
    "C[m,n] += A[m,k] * B[k,n]; m=13 n=37 k=11",
    "y[m] += A[m,k] * x[k]; m=17 k=35",
    "y[n] += x[k] * A[k,n]; n=41 k=9",
    "O[r,c] += I[r+kr, c+kc] * W[kr,kc]; r=7 c=19 kr=3 kc=2",
    "O[r,c] max= I[2*r+kr, 2*c+kc]; r=5 c=6 kr=3 kc=2",
    "s[m] += A[m,n]; m=7 n=45",
    "t[] += A[m,n]; m=6 n=21",
    "B[n,m] = A[m,n]; m=11 n=13",
    "B[m,n] = a[n]; m=9 n=33",
    "C[m,a] = A[m,a]; C[m,b+18] = B[m,b]; m=5 a=18 b=23",
    "C[m,n] += A[m,k] * B[k,n] -> relu; m=10 n=19 k=7",
    "C[m,n] = A[m,n] + B[m,n]; m=3 n=37",
    "s[m] max= A[m,n] * B[m,n] -> relu; m=6 n=31",
};

TEST(Kernel, RandomSchedulesOfEveryPrimitiveMatchTheInterpreter) {
  std::mt19937 rng(1122);
  const ActionSpace& space = LoopToolActionSpace();
  int checked = 0;
  for (const char* text : kPrograms) {
    const LoopTree initial = InitialTree(text);
    for (int seq = 0; seq < 60; ++seq) {
      LoopTree tree = initial;
      const int length = 1 + static_cast<int>(rng() % 16);
      for (int i = 0; i < length; ++i) {
        tree = Apply(tree, space.actions[rng() % space.size()], Limits{}).tree;
      }
      for (Isa isa : HostIsas()) {
        const std::string diff = CompareWithInterpreter(tree, isa);
        ASSERT_EQ(diff, "") << text;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 13 * 60 * static_cast<int>(HostIsas().size()));
}

// 40 random loop_nest schedules of each program (min_length..min_length+7 actions), each
// compiled for every host ISA and compared with the interpreter (negative inputs: real ones
// with both signs). Counts the kernels checked and the actions that applied.
struct RandomCheck {
  int checked = 0;
  int effective = 0;
  int fused = 0;        // schedules whose plan (best host ISA) fuses loops
  int fused_split = 0;  // ... the inner part of a split loop (a loop over its variable stays)
};
template <size_t N>
RandomCheck CheckRandomLoopNestSchedules(const char* const (&programs)[N], uint32_t seed,
                                         int min_length, bool negative_inputs) {
  std::mt19937 rng(seed);
  RandomCheck c;
  for (const char* text : programs) {
    const LoopTree initial = InitialTree(text);
    for (int seq = 0; seq < 40; ++seq) {
      const LoopTree tree = RandomLoopNestSchedule(
          initial, min_length + static_cast<int>(rng() % 8), rng, &c.effective);
      const StatementPlan plan = Lower(tree, HostIsas()[0]).statements[0];
      bool fused = false, fused_split = false;
      for (const std::string& note : plan.notes) {
        if (note.find(" fused: ") == std::string::npos) continue;
        fused = true;
        // "loops over 'h' (2) and 'w' (7) fused: ...": is a loop over h left in the plan?
        const std::string name = note.substr(12, note.find('\'', 12) - 12);
        for (const LoopPlan& l : plan.loops) {
          fused_split |= tree.program().var(l.var).name == name;
        }
      }
      c.fused += fused;
      c.fused_split += fused_split;
      for (Isa isa : HostIsas()) {
        EXPECT_EQ(CompareWithInterpreter(tree, isa, negative_inputs, negative_inputs), "")
            << text << "\n" << LoopTreeText(tree);
        ++c.checked;
      }
    }
  }
  return c;
}

// loop_nest's tiles (3, 5, 6, 7, 12, 24, ... with tails everywhere) and multi-level
// interchanges, drawn among the legal actions so that most of them apply.
TEST(Kernel, RandomLoopNestSchedulesMatchTheInterpreter) {
  const RandomCheck c = CheckRandomLoopNestSchedules(kPrograms, 1124, 1, false);
  EXPECT_EQ(c.checked, 13 * 40 * static_cast<int>(HostIsas().size()));
  EXPECT_GT(c.effective, 13 * 40 * 3);
}

// Blocks that read several full chunks of stride 2 hold the permute indices in a register
// (AVX-512; BlockEmitter's HoldEvenIndex): CHW pooling and strided convolutions under random
// loop_nest schedules (unrolled taps, several vectors of w in one block, tails), with negative
// inputs (a lane permuted from the wrong place would win a max).
TEST(Kernel, RandomScheduleOfStrideTwoReadsMatchTheInterpreter) {
  constexpr const char* kStrideTwo[] = {
      "O[c,h,w] max= I[c, 2*h+r, 2*w+s]; c=3 h=5 w=37 r=3 s=3",
      "O[c,h,w] max= I[c, 2*h+r, 2*w+s]; c=2 h=4 w=48 r=2 s=2",
      "O[c,h,w] += I[c, 2*h+r, 2*w+s] * W[c,r,s]; c=3 h=4 w=33 r=3 s=3",
      "O[k,h,w] += I[c, 2*h+r, 2*w+s] * W[k,c,r,s]; k=4 h=3 w=35 c=2 r=3 s=3",
  };
  const RandomCheck c = CheckRandomLoopNestSchedules(kStrideTwo, 1126, 2, true);
  EXPECT_EQ(c.checked, 4 * 40 * static_cast<int>(HostIsas().size()));
  EXPECT_GT(c.effective, 4 * 40 * 3);
}

// Nests whose tensors are contiguous across the vector loop and loops outside it (Lower fuses
// them into one vector loop where that saves masked chunks), under random schedules, with
// negative inputs: the fused loop's last chunk must read and write only its tensors' elements.
TEST(Kernel, RandomSchedulesOfContiguousNestsMatchTheInterpreter) {
  constexpr const char* kContiguous[] = {
      "O[c] += I[c,h,w]; c=5 h=7 w=7",
      "O[c] max= I[c,h,w]; c=3 h=5 w=3",
      "C[a,b,c] = A[a,b,c] + B[a,b,c] -> relu; a=3 b=5 c=7",
      "O[k,h,w] += I[c,h,w] * W[k,c]; k=6 h=7 w=7 c=5",
      "C[h,w] = A[h,w]; h=9 w=20",
      "C[h,w] = A[h,w] + B[h,w]; h=24 w=5",  // tiles of 3, 6, 12 split h without a tail
  };
  const RandomCheck c = CheckRandomLoopNestSchedules(kContiguous, 1128, 0, true);
  EXPECT_EQ(c.checked, 6 * 40 * static_cast<int>(HostIsas().size()));
  EXPECT_GT(c.fused, 6 * 40 / 10) << "schedules whose plan fuses loops (of 240)";
  EXPECT_GT(c.fused_split, 2) << "schedules whose plan fuses the inner part of a split loop";
}

// Every sketch (both vector units' blocks) of shapes whose sizes leave tails in every tile: the
// register blocks, reduction tiles and orders the searches start from.
TEST(Kernel, EverySketchMatchesTheInterpreter) {
  constexpr const char* kSketched[] = {
      "C[m,n] += A[m,k] * B[k,n]; m=29 n=75 k=131",
      "C[m,n] += A[m,k] * B[k,n] -> relu; m=7 n=150 k=9",
      "O[k,h,w] += I[c, h+r, w+s] * W[k,c,r,s]; k=13 h=5 w=19 c=3 r=3 s=3",
      "O[c,h,w] += I[c, h+r, w+s] * W[c,r,s]; c=5 h=6 w=37 r=3 s=3",
      "O[k,h,w] += I[c,h,w] * W[k,c]; k=9 h=3 w=70 c=101",
      "O[k,h,w] += I[c,h,w] * W[c,k]; k=37 h=3 w=5 c=101",  // vector k: strided stores
      "y[n] += x[k] * A[k,n]; n=67 k=100",
      "O[c] += I[r,c]; r=5 c=530",
      "O[k,h,w] += I[c, 2*h+r, 2*w+s] * W[k,c,r,s]; k=5 h=3 w=19 c=3 r=3 s=3",
      "O[c,h,w] += I[c, 2*h+r, 2*w+s] * W[c,r,s]; c=5 h=4 w=37 r=3 s=3",
      "B[n,m] = A[m,n]; m=37 n=45",
      "S[h,i,j] += Q[h,i,d] * K[h,j,d]; h=2 i=3 j=37 d=21",
      "O[c] max= I[c,h,w] -> relu; c=29 h=3 w=7",
      "B[c,h,w] = A[h,w,c] -> relu; h=3 w=21 c=19",
      "B[c,h,w] = A[h,w,c]; h=2 w=19 c=37",  // AVX2: c by whole lines, tails of both
  };
  int checked = 0;
  for (const char* text : kSketched) {
    const LoopTree initial = InitialTree(text);
    for (Isa target : {Isa::kAvx2, Isa::kAvx512}) {
      SketchOptions options;
      options.target = target;
      const std::vector<Sketch> sketches = LoopNestSketches(initial, Limits{}, options);
      EXPECT_FALSE(sketches.empty()) << text;
      for (const Sketch& sketch : sketches) {
        LoopTree tree = initial;
        for (const Action& a : sketch.actions) {
          ActionResult r = Apply(tree, a, Limits{});
          ASSERT_TRUE(r.had_effect()) << text << ": " << sketch.description;
          tree = std::move(r.tree);
        }
        for (Isa isa : HostIsas()) {
          ASSERT_EQ(CompareWithInterpreter(tree, isa), "")
              << text << ": " << sketch.description << "\n" << LoopTreeText(tree);
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 9 * 2 * 4 * static_cast<int>(HostIsas().size()));
}

}  // namespace
}  // namespace looptool
