// Exact loop_tree text of initial states and after action sequences, LoopTune's published
// sequence on mm112_208_256 among them.
#include "backend/schedule/loop_tree.h"

#include "absl/strings/str_split.h"
#include "backend/actions/apply.h"
#include "backend/schedule/loop_tree_text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/schedule/initial_tree.h"

namespace looptool {
namespace {

using testing::Initial;

LoopTree ApplyAll(LoopTree tree, const std::string& actions) {
  for (absl::string_view name : absl::StrSplit(actions, ", ", absl::SkipEmpty())) {
    auto action = ActionFromName(name);
    EXPECT_TRUE(action.ok()) << name;
    ActionResult r = Apply(tree, *action, Limits{});
    EXPECT_TRUE(r.had_effect()) << name << ": " << Describe(r.reason);
    tree = std::move(r.tree);
  }
  return tree;
}

constexpr char kMm112x208x256[] = "C[m,n] += A[m,k] * B[k,n]; m=112 n=208 k=256";

TEST(LoopTree, MatmulStartsAsLoopTuneDoes) {
  EXPECT_EQ(LoopTreeText(Initial(kMm112x208x256)),
            "for m in 112 : L0  <<<<<< cursor (line 0 )\n"
            " for k in 256 : L1\n"
            "  for n in 208 : L2\n"
            "   %2[m, k, n] <- multiply(%0, %1)\n"
            "   %3[m, n] <- add(%2)\n"
            " for n in 208 : L5\n"
            "  %4[m, n] <- write(%3)\n");
}

TEST(LoopTree, LoopTunePublishedSequenceReproducesItsTree) {
  const LoopTree t = ApplyAll(Initial(kMm112x208x256),
                         "split_4, down, swap_down, down, split_16, swap_up, swap_up, swap_up, "
                         "split_8");
  EXPECT_EQ(LoopTreeText(t),
            "for n in 1 r 80 : L0  <<<<<< cursor (line 0 )\n"
            " for n' in 8 : L1\n"
            "  for m in 28 : L2\n"
            "   for k in 256 : L3\n"
            "    for m' in 4 : L4\n"
            "     for n'' in 16 : L5\n"
            "      %2[m, k, n] <- multiply(%0, %1)\n"
            "      %3[m, n] <- add(%2)\n"
            "for m in 28 : L8\n"
            " for m' in 4 : L9\n"
            "  for n in 208 : L10\n"
            "   %4[m, n] <- write(%3)\n");
  // The tail: one full iteration of 8 * 16 = 128 elements, then 80 more.
  const LoopOrder& c = t.schedule(0).compute;
  EXPECT_EQ(c[0].size, 1);
  EXPECT_EQ(c[0].tail, 80);
  EXPECT_EQ(InnerExtent(c, 0), 128);
  EXPECT_EQ(Extent(c, 0), 208);
  EXPECT_EQ(t.num_loops(), 9);
}

TEST(LoopTree, IntermediateStatesOfTheSequence) {
  LoopTree t = ApplyAll(Initial(kMm112x208x256), "split_4");
  EXPECT_EQ(LoopTreeText(t),
            "for m in 28 : L0  <<<<<< cursor (line 0 )\n"
            " for m' in 4 : L1\n"
            "  for k in 256 : L2\n"
            "   for n in 208 : L3\n"
            "    %2[m, k, n] <- multiply(%0, %1)\n"
            "    %3[m, n] <- add(%2)\n"
            "  for n in 208 : L6\n"
            "   %4[m, n] <- write(%3)\n");
  t = ApplyAll(t, "down, swap_down");  // m' leaves the write nest behind
  EXPECT_EQ(LoopTreeText(t),
            "for m in 28 : L0\n"
            " for k in 256 : L1\n"
            "  for m' in 4 : L2  <<<<<< cursor (line 2 )\n"
            "   for n in 208 : L3\n"
            "    %2[m, k, n] <- multiply(%0, %1)\n"
            "    %3[m, n] <- add(%2)\n"
            " for m' in 4 : L6\n"
            "  for n in 208 : L7\n"
            "   %4[m, n] <- write(%3)\n");
}

TEST(LoopTree, SplitThatDoesNotDivideLeavesATail) {
  LoopTree t = ApplyAll(Initial("C[m] = A[m]; m=100"), "split_8");
  EXPECT_EQ(LoopTreeText(t),
            "for m in 12 r 4 : L0  <<<<<< cursor (line 0 )\n"
            " for m' in 8 : L1\n"
            "  %1[m] <- copy(%0)\n"
            "  %2[m] <- write(%1)\n");
  t = ApplyAll(t, "split_4");  // the outer loop over inner extent 8: 100 = 3 * 32 + 4
  EXPECT_EQ(LoopTreeText(t),
            "for m in 3 r 4 : L0  <<<<<< cursor (line 0 )\n"
            " for m' in 4 : L1\n"
            "  for m'' in 8 : L2\n"
            "   %1[m] <- copy(%0)\n"
            "   %2[m] <- write(%1)\n");
}

TEST(LoopTree, MergeIsTheInverseOfSplitAndDown) {
  const LoopTree start = Initial(kMm112x208x256);
  const LoopTree t = ApplyAll(ApplyAll(start, "split_16, down"), "merge");
  EXPECT_EQ(t, start);
  // Also when the split loop's nests have split apart.
  const LoopTree u = ApplyAll(start, "split_4, down, swap_down, merge");
  EXPECT_EQ(LoopTreeText(u),
            "for m in 112 : L0  <<<<<< cursor (line 0 )\n"
            " for k in 256 : L1\n"
            "  for n in 208 : L2\n"
            "   %2[m, k, n] <- multiply(%0, %1)\n"
            "   %3[m, n] <- add(%2)\n"
            " for n in 208 : L5\n"
            "  %4[m, n] <- write(%3)\n");
}

TEST(LoopTree, AnnotationsPrintAndFollowSharedLoops) {
  const LoopTree t = ApplyAll(Initial(kMm112x208x256), "unroll, down, down, vectorize");
  EXPECT_EQ(LoopTreeText(t),
            "for m in 112 : L0 unroll\n"
            " for k in 256 : L1\n"
            "  for n in 208 : L2 vectorize  <<<<<< cursor (line 2 )\n"
            "   %2[m, k, n] <- multiply(%0, %1)\n"
            "   %3[m, n] <- add(%2)\n"
            " for n in 208 : L5\n"
            "  %4[m, n] <- write(%3)\n");
  EXPECT_TRUE(t.schedule(0).write[0].unroll);  // the write nest shares m
}

TEST(LoopTree, EveryPrimitiveHasTwoNests) {
  EXPECT_EQ(LoopTreeText(Initial("O[r,c] += I[r+kr, c+kc] * W[kr,kc]; r=6 c=6 kr=3 kc=3")),
            "for r in 6 : L0  <<<<<< cursor (line 0 )\n"
            " for kr in 3 : L1\n"
            "  for c in 6 : L2\n"
            "   for kc in 3 : L3\n"
            "    %2[r, kr, c, kc] <- multiply(%0, %1)\n"
            "    %3[r, c] <- add(%2)\n"
            " for c in 6 : L6\n"
            "  %4[r, c] <- write(%3)\n");
  EXPECT_EQ(LoopTreeText(Initial("O[r,c] max= I[2*r+kr, 2*c+kc] -> relu; r=4 c=4 kr=2 kc=2")),
            "for r in 4 : L0  <<<<<< cursor (line 0 )\n"
            " for kr in 2 : L1\n"
            "  for c in 4 : L2\n"
            "   for kc in 2 : L3\n"
            "    %1[r, c] <- max(%0)\n"
            " for c in 4 : L5\n"
            "  %2[r, c] <- write(relu(%1))\n");
  EXPECT_EQ(LoopTreeText(Initial("t[] += A[m, n]; m=8 n=9")),
            "for m in 8 : L0  <<<<<< cursor (line 0 )\n"
            " for n in 9 : L1\n"
            "  %1[] <- add(%0)\n"
            "%2[] <- write(%1)\n");
  EXPECT_EQ(LoopTreeText(Initial("C[m, a] = A[m, a]; C[m, b + 64] = B[m, b]; m=8 a=64 b=32")),
            "for m in 8 : L0  <<<<<< cursor (line 0 )\n"
            " for a in 64 : L1\n"
            "  %2[m, a] <- copy(%0)\n"
            "  %3[m, a] <- write(%2)\n"
            "for m in 8 : L4\n"
            " for b in 32 : L5\n"
            "  %4[m, b] <- copy(%1)\n"
            "  %5[m, b] <- write(%4)\n");
}

TEST(LoopTree, CursorWalksEveryStatementsComputeLoops) {
  LoopTree t = Initial("C[m, a] = A[m, a]; C[m, b + 64] = B[m, b]; m=8 a=64 b=32");
  t = ApplyAll(t, "down, down");
  EXPECT_EQ(t.cursor(), (Cursor{1, 0}));
  EXPECT_EQ(t.cursor_ref(), 4);
  EXPECT_EQ(Apply(t, {Action::Kind::kSwapUp, 0}, Limits{}).reason,
            NoEffectReason::kOutermostLoop);
}

TEST(LoopTree, CreateRejectsInvalidSchedules) {
  const LoopTree t = Initial(kMm112x208x256);
  auto bad = [&](std::vector<StatementSchedule> s, Cursor c = {}) {
    auto r = LoopTree::Create(t.program_ptr(), std::move(s), c);
    EXPECT_FALSE(r.ok());
    return std::string(r.status().message());
  };
  auto s = t.schedules();
  s[0].compute[0].size = 111;
  EXPECT_EQ(bad(s), "the compute nest of statement 1: the loops over 'm' cover 111 elements, not "
                    "its extent 112");
  s = t.schedules();
  s[0].compute.pop_back();
  EXPECT_EQ(bad(s), "the compute nest of statement 1 has no loop over 'n'");
  s = t.schedules();
  s[0].write.push_back({2, 256, 0});
  EXPECT_EQ(bad(s), "the write nest of statement 1 loops over a variable its statement does not "
                    "have");
  s = t.schedules();
  s[0].compute = {{0, 112, 0}, {2, 256, 0}, {1, 13, 0}, {1, 16, 3}};
  EXPECT_EQ(bad(s), "the compute nest of statement 1: loop 4 over 'n' has tail 3, which must be "
                    "below its inner extent 1");
  EXPECT_EQ(bad(t.schedules(), {0, 3}), "the cursor (statement 1, loop 4) is not on a compute loop");
}

}  // namespace
}  // namespace looptool
