// Each precondition of each action produces its NoEffectReason once, leaves the state as it was,
// and agrees with the action mask; names round-trip; the two action spaces are LoopTune's.
#include "backend/actions/apply.h"

#include "absl/strings/str_split.h"
#include "backend/schedule/ir_text.h"
#include "backend/schedule/loop_tree_text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/schedule/initial_tree.h"

namespace looptool {
namespace {

using ::testing::ElementsAre;

using testing::Initial;

Action A(const std::string& name) { return *ActionFromName(name); }

LoopTree Do(LoopTree t, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    ActionResult r = Apply(t, A(n), Limits{});
    EXPECT_TRUE(r.had_effect()) << n << ": " << Describe(r.reason);
    t = r.tree;
  }
  return t;
}

// `action` on `tree` must fail with `reason`, keep the state, and be masked out.
void ExpectNoEffect(const LoopTree& tree, const std::string& action, NoEffectReason reason,
                    const Limits& limits = Limits{}) {
  const ActionResult r = Apply(tree, A(action), limits);
  EXPECT_EQ(r.reason, reason) << action << ": " << Describe(r.reason);
  EXPECT_EQ(r.tree, tree);
  EXPECT_EQ(CheckApplicable(tree, A(action), limits), reason);
  const ActionSpace& space = A(action).level >= 0 ? LoopNestActionSpace() : LoopToolActionSpace();
  EXPECT_FALSE(ActionMask(tree, space, limits)[space.IndexOf(A(action))]) << action;
}

constexpr char kMatmul[] = "C[m,n] += A[m,k] * B[k,n]; m=64 n=48 k=32";

TEST(Apply, UpOnTheFirstLoop) { ExpectNoEffect(Initial(kMatmul), "up", NoEffectReason::kFirstLoop); }

TEST(Apply, DownOnTheInnermostComputeLoopNeverEntersTheWriteNest) {
  ExpectNoEffect(Do(Initial(kMatmul), {"down", "down"}), "down", NoEffectReason::kLastLoop);
}

TEST(Apply, SwapUpOnAnOutermostLoop) {
  ExpectNoEffect(Initial(kMatmul), "swap_up", NoEffectReason::kOutermostLoop);
}

TEST(Apply, SwapDownOnAnInnermostLoop) {
  ExpectNoEffect(Do(Initial(kMatmul), {"down", "down"}), "swap_down",
                 NoEffectReason::kInnermostLoop);
}

TEST(Apply, SwapOfTwoLoopsOverOneVariable) {
  const LoopTree t = Do(Initial(kMatmul), {"split_4"});
  ExpectNoEffect(t, "swap_down", NoEffectReason::kSameVariable);
  ExpectNoEffect(Do(t, {"down"}), "swap_up", NoEffectReason::kSameVariable);
}

TEST(Apply, SplitNotSmallerThanTheLoop) {
  const LoopTree t = Initial(kMatmul);  // m has 64 iterations
  ExpectNoEffect(t, "split_64", NoEffectReason::kSplitNotSmaller);
  ExpectNoEffect(t, "split_128", NoEffectReason::kSplitNotSmaller);
  EXPECT_TRUE(Apply(t, A("split_32"), Limits{}).had_effect());
  // Over an inner loop of 16: 64 = 4 * 16, so split_4 covers it all, split_2 does not.
  const LoopTree u = Do(t, {"split_16"});
  ExpectNoEffect(u, "split_4", NoEffectReason::kSplitNotSmaller);
  EXPECT_TRUE(Apply(u, A("split_2"), Limits{}).had_effect());
}

TEST(Apply, SplitBeyondTheLoopLimit) {
  Limits limits;
  limits.max_loops = 5;  // the initial matmul tree has 4 loops
  // Splitting shared m adds one loop: the inner m' is shared by both nests too.
  const ActionResult r = Apply(Initial(kMatmul), A("split_2"), limits);
  ASSERT_TRUE(r.had_effect());
  EXPECT_EQ(r.tree.num_loops(), 5);
  ExpectNoEffect(r.tree, "split_2", NoEffectReason::kTooManyLoops, limits);
  ExpectNoEffect(Do(r.tree, {"down", "down"}), "split_2", NoEffectReason::kTooManyLoops, limits);
}

TEST(Apply, SwapThatUnsharesLoopsBeyondTheLoopLimit) {
  Limits limits;
  limits.max_loops = 4;  // the initial matmul tree has 4 loops: m (shared), k, n, n'
  // swap_down on m exchanges m and k: the compute nest becomes k, m, n while the write nest
  // keeps m, n, so nothing is shared any more and the tree would need 5 loops.
  const LoopTree t = Initial(kMatmul);
  ASSERT_EQ(t.num_loops(), 4);
  ExpectNoEffect(t, "swap_down", NoEffectReason::kTooManyLoops, limits);
  const ActionResult r = Apply(t, A("swap_down"), Limits{});
  ASSERT_TRUE(r.had_effect());
  EXPECT_EQ(r.tree.num_loops(), 5);
}

// The sequence of the hardening issue: on mm128_128_256 it reached 17 loops under a limit of
// 16 (swaps unsharing split loops), and the server aborted on the next observation.
TEST(Apply, TheIssueSequenceStaysWithinTheDefaultLoopLimit) {
  LoopTree t = Initial("C[m,n] += A[m,k] * B[k,n]; m=128 n=128 k=256");
  const Limits limits;
  int refused = 0;
  for (absl::string_view name : absl::StrSplit(
           "split_4 split_2 split_4 down down down up down split_2 down swap_down down split_2 "
           "down up split_16 split_2 swap_up swap_up down split_16 down split_2 split_2 up up up "
           "swap_down up swap_up",
           ' ')) {
    ActionResult r = Apply(t, A(std::string(name)), limits);
    refused += r.reason == NoEffectReason::kTooManyLoops;
    t = r.tree;
    ASSERT_LE(t.num_loops(), limits.max_loops) << "after " << name;
  }
  EXPECT_GE(refused, 1);  // without the common check, the tree grew to 17 loops
}

TEST(Apply, MergeWithoutAnEnclosingLoopOverTheVariable) {
  ExpectNoEffect(Do(Initial(kMatmul), {"down"}), "merge", NoEffectReason::kNoEnclosingSameVariable);
}

TEST(Apply, VectorizeOnALoopWithInnerLoopsOverItsVariable) {
  ExpectNoEffect(Do(Initial(kMatmul), {"split_8"}), "vectorize",
                 NoEffectReason::kNotInnermostOfVariable);
}

TEST(Apply, VectorizeMarksOneLoopOnly) {
  const LoopTree t = Do(Initial(kMatmul), {"down", "down", "vectorize", "up", "vectorize"});
  EXPECT_TRUE(t.schedule(0).compute[1].vectorize);
  EXPECT_FALSE(t.schedule(0).compute[2].vectorize);
  EXPECT_FALSE(t.schedule(0).write[1].vectorize);  // write's n lost the mark with compute's n
  const LoopTree u = Do(t, {"vectorize"});  // toggles off
  EXPECT_FALSE(u.schedule(0).compute[1].vectorize);
}

TEST(Apply, UnrollAlwaysToggles) {
  const LoopTree t = Initial(kMatmul);
  const LoopTree u = Do(t, {"unroll"});
  EXPECT_TRUE(u.schedule(0).compute[0].unroll);
  EXPECT_EQ(Do(u, {"unroll"}), t);
}

TEST(Apply, SplitOfASharedLoopSplitsBothNests) {
  const LoopTree t = Do(Initial(kMatmul), {"split_8"});
  EXPECT_EQ(LoopTreeText(t),
            "for m in 8 : L0  <<<<<< cursor (line 0 )\n"
            " for m' in 8 : L1\n"
            "  for k in 32 : L2\n"
            "   for n in 48 : L3\n"
            "    %2[m, k, n] <- multiply(%0, %1)\n"
            "    %3[m, n] <- add(%2)\n"
            "  for n in 48 : L6\n"
            "   %4[m, n] <- write(%3)\n");
}

TEST(Apply, MaskOfTheInitialMatmul) {
  const auto mask = ActionMask(Initial(kMatmul), LoopTuneActionSpace(), Limits{});
  // up, down, swap_up, swap_down, split_4, split_8, split_16
  EXPECT_THAT(mask, ElementsAre(false, true, false, true, true, true, true));
}

TEST(ActionSpace, LoopToolAndLoopTuneSpaces) {
  EXPECT_THAT(LoopToolActionSpace().Names(),
              ElementsAre("up", "down", "swap_up", "swap_down", "split_2", "split_4", "split_8",
                          "split_16", "split_32", "split_64", "split_128", "split_256",
                          "split_512", "split_1024", "merge", "unroll", "vectorize"));
  EXPECT_THAT(LoopTuneActionSpace().Names(),
              ElementsAre("up", "down", "swap_up", "swap_down", "split_4", "split_8", "split_16"));
  EXPECT_EQ(LoopTuneActionSpace().At(7).status().message(),
            "Action index 7 is out of range for action space loop_tune (0..6)");
  EXPECT_EQ(LoopTuneActionSpace().At(-1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ActionFromName("split_3").status().message(), "Unknown action: split_3");
  for (const Action& a : LoopToolActionSpace().actions) {
    EXPECT_EQ(*ActionFromName(ActionName(a)), a);
  }
  EXPECT_EQ(FindActionSpace("nope").status().message(), "Unknown action space: nope");
}

// loop_nest: a 6-row tile is one action, and an interchange moves a loop by level pointers.
TEST(LoopNest, TileAndInterchangeByLevelPointers) {
  const LoopTree t = Do(Initial(kMatmul), {"tile_L0_6"});
  EXPECT_EQ(LoopTreeText(t),
            "for m in 10 r 4 : L0  <<<<<< cursor (line 0 )\n"
            " for m' in 6 : L1\n"
            "  for k in 32 : L2\n"
            "   for n in 48 : L3\n"
            "    %2[m, k, n] <- multiply(%0, %1)\n"
            "    %3[m, n] <- add(%2)\n"
            "  for n in 48 : L6\n"
            "   %4[m, n] <- write(%3)\n");
  EXPECT_EQ(LoopTreeText(Do(t, {"interchange_L2_L1"})),
            "for m in 10 r 4 : L0\n"
            " for k in 32 : L1  <<<<<< cursor (line 1 )\n"
            "  for m' in 6 : L2\n"
            "   for n in 48 : L3\n"
            "    %2[m, k, n] <- multiply(%0, %1)\n"
            "    %3[m, n] <- add(%2)\n"
            " for m' in 6 : L6\n"
            "  for n in 48 : L7\n"
            "   %4[m, n] <- write(%3)\n");
  // Two levels down at once: m goes below k and n, the cursor follows it.
  EXPECT_EQ(LoopTreeText(Do(Initial(kMatmul), {"interchange_L0_L2"})),
            "for k in 32 : L0\n"
            " for n in 48 : L1\n"
            "  for m in 64 : L2  <<<<<< cursor (line 2 )\n"
            "   %2[m, k, n] <- multiply(%0, %1)\n"
            "   %3[m, n] <- add(%2)\n"
            "for m in 64 : L5\n"
            " for n in 48 : L6\n"
            "  %4[m, n] <- write(%3)\n");
}

TEST(LoopNest, LevelActionsAreTheCursorActionsOnTheirLoop) {
  const LoopTree t = Initial(kMatmul);
  EXPECT_EQ(Do(t, {"tile_L1_8"}), Do(t, {"down", "split_8"}));
  EXPECT_EQ(Do(t, {"vectorize_L2"}), Do(t, {"down", "down", "vectorize"}));
  EXPECT_EQ(Do(t, {"unroll_L1"}), Do(t, {"down", "unroll"}));
  EXPECT_EQ(Do(t, {"tile_L0_4", "merge_L1"}), Do(t, {"split_4", "down", "merge"}));
  EXPECT_EQ(Do(t, {"interchange_L1_L0"}), Do(t, {"down", "swap_up"}));
}

TEST(LoopNest, EachLevelPointerPreconditionFailsWithItsReason) {
  const LoopTree t = Initial(kMatmul);  // compute loops m, k, n
  const LoopTree moved = Do(t, {"down"});  // on no effect the cursor stays where it was
  ExpectNoEffect(moved, "tile_L3_4", NoEffectReason::kNoSuchLoop);
  ExpectNoEffect(moved, "vectorize_L15", NoEffectReason::kNoSuchLoop);
  ExpectNoEffect(moved, "interchange_L0_L3", NoEffectReason::kNoSuchLoop);
  ExpectNoEffect(moved, "interchange_L1_L1", NoEffectReason::kSameLoop);
  ExpectNoEffect(moved, "tile_L0_64", NoEffectReason::kSplitNotSmaller);
  ExpectNoEffect(moved, "merge_L2", NoEffectReason::kNoEnclosingSameVariable);
  ExpectNoEffect(Do(t, {"tile_L0_4"}), "interchange_L0_L1", NoEffectReason::kSameVariable);
  ExpectNoEffect(Do(t, {"tile_L0_4"}), "vectorize_L0", NoEffectReason::kNotInnermostOfVariable);
  // m, k, n ... n': moving m' (level 1) to the bottom passes k, then n: fine; m past m': not.
  ExpectNoEffect(Do(t, {"tile_L0_4"}), "interchange_L0_L3", NoEffectReason::kSameVariable);
  Limits limits;
  limits.max_loops = 4;
  ExpectNoEffect(t, "interchange_L0_L1", NoEffectReason::kTooManyLoops, limits);
  ExpectNoEffect(t, "tile_L0_6", NoEffectReason::kTooManyLoops, limits);
  const LoopTree two = Initial("C[m,a] = A[m,a]; C[m,b+12] = B[m,b]; m=5 a=12 b=7");
  ASSERT_EQ(two.CursorPositions().size(), 4u);  // m, a | m, b
  ExpectNoEffect(two, "interchange_L1_L3", NoEffectReason::kDifferentNests);
  EXPECT_TRUE(Apply(two, A("interchange_L3_L2"), Limits{}).had_effect());
}

TEST(LoopNest, SpaceNamesAndMultiDiscreteIndices) {
  const ActionSpace& space = LoopNestActionSpace();
  ASSERT_EQ(space.size(), 592);
  EXPECT_EQ(space.name, "loop_nest");
  const std::vector<std::string> names = space.Names();
  EXPECT_EQ(names[0], "tile_L0_2");
  EXPECT_EQ(names[4], "tile_L0_6");
  EXPECT_EQ(names[255], "tile_L15_256");
  EXPECT_EQ(names[256 + 2], "interchange_L0_L2");
  EXPECT_EQ(names[512 + 3], "unroll_L3");
  EXPECT_EQ(names[528 + 5], "vectorize_L5");
  EXPECT_EQ(names[559], "merge_L15");
  EXPECT_EQ(names[560], "stream_L0");
  EXPECT_EQ(names[575], "stream_L15");
  EXPECT_EQ(names[576], "fold_L0");
  EXPECT_EQ(names[591], "fold_L15");
  for (const Action& a : space.actions) EXPECT_EQ(*ActionFromName(ActionName(a)), a);
  EXPECT_EQ(names[*LoopNestIndex(0, 3, 4)], "tile_L3_6");
  EXPECT_EQ(names[*LoopNestIndex(1, 7, 0)], "interchange_L7_L0");
  EXPECT_EQ(names[*LoopNestIndex(2, 9, 0)], "unroll_L9");
  EXPECT_EQ(names[*LoopNestIndex(3, 5, 11)], "vectorize_L5");  // the parameter is ignored
  EXPECT_EQ(names[*LoopNestIndex(4, 15, 0)], "merge_L15");
  EXPECT_EQ(names[*LoopNestIndex(5, 2, 7)], "stream_L2");
  EXPECT_EQ(names[*LoopNestIndex(6, 4, 0)], "fold_L4");
  EXPECT_EQ(LoopNestIndex(7, 0, 0).status().message(),
            "loop_nest action (7, 0, 0): the transformation is out of range (0..6)");
  EXPECT_EQ(LoopNestIndex(0, 16, 0).status().message(),
            "loop_nest action (0, 16, 0): the level is out of range (0..15)");
  EXPECT_EQ(LoopNestIndex(1, 0, -1).status().code(), absl::StatusCode::kInvalidArgument);
  for (const char* bad : {"tile_L3_1", "tile_L64_4", "tile_L3", "interchange_L1", "unroll_L",
                          "merge_L1_2", "tile_L3_6x", "stream_L", "stream_L1_2",
                          "fold_L", "fold_L1_2"}) {
    EXPECT_EQ(ActionFromName(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(AllActionSpaces().size(), 3u);
  EXPECT_EQ(FindActionSpace("loop_nest")->size(), 592);
}

TEST(LoopNest, MaskOfTheInitialMatmul) {
  const auto mask = ActionMask(Initial(kMatmul), LoopNestActionSpace(), Limits{});
  std::vector<std::string> legal;
  for (size_t i = 0; i < mask.size(); ++i) {
    if (mask[i]) legal.push_back(LoopNestActionSpace().Names()[i]);
  }
  // m=64: tiles 2..48; k=32: 2..24; n=48: 2..32; the six interchanges; unroll everywhere;
  // vectorize everywhere (each loop is the innermost over its variable); no merge; no stream
  // (the matmul accumulates into C); no fold (it multiplies).
  EXPECT_EQ(legal.size(), 12u + 10u + 11u + 6u + 3u + 3u);
  EXPECT_THAT(legal, ::testing::Contains("tile_L0_48"));
  EXPECT_THAT(legal, ::testing::Not(::testing::Contains("tile_L0_64")));
  EXPECT_THAT(legal, ::testing::Contains("interchange_L2_L0"));
  EXPECT_THAT(legal, ::testing::Not(::testing::Contains("merge_L1")));
}

// stream_L<p> toggles the stream mark of loop p's statement; an accumulating statement refuses it.
TEST(LoopNest, StreamMarksTheStatementOfItsLoop) {
  ExpectNoEffect(Initial(kMatmul), "stream_L1", NoEffectReason::kNotAssignment);
  EXPECT_EQ(Describe(NoEffectReason::kNotAssignment),
            "stream: the statement accumulates into its output (only outputs assigned once "
            "stream)");
  const LoopTree two = Initial("C[m,a] = A[m,a]; D[m,b] += B[m,b]; m=5 a=16 b=7");
  ASSERT_EQ(two.CursorPositions().size(), 4u);  // m, a | m, b
  const LoopTree marked = Do(two, {"stream_L1"});
  EXPECT_TRUE(marked.schedule(0).stream);
  EXPECT_FALSE(marked.schedule(1).stream);
  EXPECT_EQ(marked.cursor(), (Cursor{0, 1}));  // the cursor ends on the loop, as unroll_L<p>'s
  EXPECT_EQ(marked.schedule(0).compute, two.schedule(0).compute);
  ExpectNoEffect(marked, "stream_L3", NoEffectReason::kNotAssignment);
  EXPECT_EQ(Do(marked, {"stream_L0"}).schedules(), two.schedules());  // a toggle
  EXPECT_EQ(Do(two, {"down", "stream"}), marked);
  // Later actions keep the mark; the loop tree shows it on the write, the ir as a `stream` line
  // that parses back.
  const LoopTree tiled = Do(marked, {"tile_L1_4", "vectorize_L2"});
  EXPECT_TRUE(tiled.schedule(0).stream);
  EXPECT_THAT(LoopTreeText(tiled), ::testing::HasSubstr("<- write(%2) stream\n"));
  EXPECT_THAT(PrintIr(tiled),
              ::testing::HasSubstr("write 1: m(5) a(4) a(4 vectorize)\nstream 1\n"));
  EXPECT_EQ(*ParseIr(PrintIr(tiled), Limits{}), tiled);
  EXPECT_NE(ScheduleKey(tiled), ScheduleKey(Do(tiled, {"stream_L0"})));
  EXPECT_THAT(ParseIr("D[m] += B[m,b]\nm=5 b=7\nstream 1\n", Limits{}).status().message(),
              ::testing::HasSubstr("statement 1 accumulates into its output"));
  const auto mask = ActionMask(two, LoopNestActionSpace(), Limits{});
  std::vector<std::string> streams;
  for (size_t i = 560; i < mask.size(); ++i) {
    if (mask[i]) streams.push_back(LoopNestActionSpace().Names()[i]);
  }
  EXPECT_THAT(streams, ::testing::ElementsAre("stream_L0", "stream_L1"));
}

// fold_L<p> toggles the fold mark of loop p's statement where it sums or maxes one operand read
// with stride 2 (a pool's window); a convolution, a stride-1 pool and an assignment refuse it.
TEST(LoopNest, FoldMarksTheStatementOfItsLoop) {
  ExpectNoEffect(Initial(kMatmul), "fold_L1", NoEffectReason::kNotStrideTwoWindow);
  ExpectNoEffect(Initial("O[k,h,w] += I[c, 2*h+r, 2*w+s] * W[k,c,r,s]; k=2 h=3 w=5 c=2 r=3 s=3"),
                 "fold_L0", NoEffectReason::kNotStrideTwoWindow);
  ExpectNoEffect(Initial("O[r,c] max= I[r+kr, c+kc]; r=4 c=8 kr=3 kc=3"), "fold_L0",
                 NoEffectReason::kNotStrideTwoWindow);
  // Stride 2 but one row: a 1-D window, and a reduction over rows of two elements.
  ExpectNoEffect(Initial("O[r] max= I[2*r+kr]; r=8 kr=3"), "fold_L0",
                 NoEffectReason::kNotStrideTwoWindow);
  ExpectNoEffect(Initial("O[m] += I[m,k]; m=8 k=2"), "fold_L0",
                 NoEffectReason::kNotStrideTwoWindow);
  EXPECT_EQ(Describe(NoEffectReason::kNotStrideTwoWindow),
            "fold: the statement is not a sum or max of one operand read with stride 2 (a "
            "pool's window)");
  // A copy and a 2x2 stride-2 sum pool (statement 2; loops r, c | r, kr, c, kc).
  const LoopTree two =
      Initial("T[r,c] = J[r,c]; O[r,c] += I[2*r+kr, 2*c+kc]; r=4 c=16 kr=2 kc=2");
  ASSERT_EQ(two.CursorPositions().size(), 6u);
  ExpectNoEffect(two, "fold_L1", NoEffectReason::kNotStrideTwoWindow);
  const LoopTree marked = Do(two, {"fold_L4"});
  EXPECT_FALSE(marked.schedule(0).fold);
  EXPECT_TRUE(marked.schedule(1).fold);
  EXPECT_EQ(marked.cursor(), (Cursor{1, 2}));
  EXPECT_EQ(marked.schedule(1).compute, two.schedule(1).compute);
  EXPECT_EQ(Do(marked, {"fold_L2"}).schedules(), two.schedules());  // a toggle
  // Later actions keep the mark; the loop tree shows it on the reduction, the ir as a `fold`
  // line that parses back; the schedule key tells the two apart.
  const LoopTree tiled = Do(marked, {"tile_L4_8", "stream_L0"});
  EXPECT_TRUE(tiled.schedule(1).fold);
  EXPECT_THAT(LoopTreeText(tiled), ::testing::HasSubstr("<- add(%1) fold\n"));
  EXPECT_THAT(PrintIr(tiled), ::testing::HasSubstr("stream 1\n"));
  EXPECT_THAT(PrintIr(tiled), ::testing::HasSubstr("fold 2\n"));
  EXPECT_EQ(*ParseIr(PrintIr(tiled), Limits{}), tiled);
  EXPECT_NE(ScheduleKey(tiled), ScheduleKey(Do(tiled, {"fold_L2"})));
  EXPECT_THAT(ParseIr("T[r,c] = J[r,c]\nr=4 c=16\nfold 1\n", Limits{}).status().message(),
              ::testing::HasSubstr("statement 1 is not a sum or max of one operand read with "
                                   "stride 2"));
  const auto mask = ActionMask(two, LoopNestActionSpace(), Limits{});
  std::vector<std::string> folds;
  for (size_t i = 576; i < mask.size(); ++i) {
    if (mask[i]) folds.push_back(LoopNestActionSpace().Names()[i]);
  }
  EXPECT_THAT(folds, ::testing::ElementsAre("fold_L2", "fold_L3", "fold_L4", "fold_L5"));
}

}  // namespace
}  // namespace looptool
