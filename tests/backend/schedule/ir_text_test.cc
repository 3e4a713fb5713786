// The `ir` observation: parse(print(x)) == x, and the schedule syntax's errors.
#include "backend/schedule/ir_text.h"

#include "absl/strings/str_split.h"
#include "backend/actions/apply.h"
#include "backend/schedule/loop_tree_text.h"
#include "gtest/gtest.h"

namespace looptool {
namespace {

TEST(IrText, PrintsProgramScheduleAndCursor) {
  auto t = ParseIr("C[m,n] += A[m,k] * B[k,n]; m=112 n=208 k=256", Limits{});
  ASSERT_TRUE(t.ok()) << t.status();
  LoopTree tree = *t;
  for (absl::string_view a : absl::StrSplit(
           "split_4,down,swap_down,down,split_16,swap_up,swap_up,swap_up,split_8,down,down,unroll",
           ',')) {
    tree = Apply(tree, *ActionFromName(a), Limits{}).tree;
  }
  const std::string ir = PrintIr(tree);
  EXPECT_EQ(ir,
            "C[m, n] += A[m, k] * B[k, n]\n"
            "m=112 n=208 k=256\n"
            "compute 1: n(1 r 80) n(8) m(28 unroll) k(256) m(4) n(16)\n"
            "write 1: m(28) m(4) n(208)\n"
            "cursor 1 3\n");
  auto back = ParseIr(ir, Limits{});
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, tree);
  EXPECT_EQ(PrintIr(*back), ir);
}

TEST(IrText, ScheduleErrorsNameTheirPlace) {
  const std::string prog = "C[m] = A[m]; m=100\n";
  auto err = [&](const std::string& sched) {
    auto r = ParseIr(prog + sched, Limits{});
    EXPECT_FALSE(r.ok()) << sched;
    return std::string(r.status().message());
  };
  EXPECT_EQ(err("compute 1: m(12 r 4) q(8)"), "line 2, column 22: 'q' is not an index variable");
  EXPECT_EQ(err("compute 1: m(12 r 4) m(8"), "line 2, column 25: expected ')', found end of line");
  EXPECT_EQ(err("compute 2: m(100)"), "line 2, column 9: there is no statement 2");
  EXPECT_EQ(err("compute 1: m(12) m(8)"),
            "the compute nest of statement 1: the loops over 'm' cover 96 elements, not its "
            "extent 100");
  EXPECT_EQ(err("cursor 1 2"), "the cursor (statement 1, loop 2) is not on a compute loop");
  EXPECT_EQ(err("cursor 1 4294967297"), "line 2, column 10: there is no loop 4294967297");
  // Found by tools/fuzz.sh (ir_parser): huge sizes overflowed the extent arithmetic.
  EXPECT_EQ(err("compute 1: m(6) m(2555555555555555555)"),
            "the compute nest of statement 1: loop 2 over 'm' covers more than the variable's "
            "extent 100");
  EXPECT_EQ(err("compute 1: m(9) m(9) m(9)"),
            "the compute nest of statement 1: loop 1 over 'm' covers more than the variable's "
            "extent 100");
  auto ok = ParseIr(prog + "compute 1: m(100 vectorize unroll)\ncursor 1 1", Limits{});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(ok->schedule(0).compute[0].unroll);
  EXPECT_TRUE(ok->schedule(0).compute[0].vectorize);
}

TEST(IrText, LoopLimitIsEnforced) {
  Limits limits;
  limits.max_loops = 3;
  auto r = ParseIr("C[m,n] += A[m,k] * B[k,n]; m=4 n=4 k=4", limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "the loop tree has 4 loops; the limit is 3");
}

}  // namespace
}  // namespace looptool
