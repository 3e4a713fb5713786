// OrderHolds, the one-pass check LoopTree::Create runs on every nest, agrees with CheckOrder
// (whose message it falls back to) on random orders, most of them broken in some way.
#include "backend/schedule/order_rules.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/ir/parser.h"
#include "gtest/gtest.h"

namespace looptool::schedule_internal {
namespace {

std::string Text(const LoopOrder& order) {
  std::string out;
  for (const Loop& l : order) {
    absl::StrAppend(&out, "(", l.var, " ", l.size, " r ", l.tail, l.unroll ? " u" : "",
                    l.vectorize ? " v" : "", ") ");
  }
  return out;
}

// A random split of variable `v` of extent `extent` into `pieces` loops, innermost last, each
// covering what the loops inside it cover times its size plus its tail (a valid split), placed
// at random among `order`'s loops.
void AddSplit(std::mt19937& rng, int v, int64_t extent, int pieces, LoopOrder& order) {
  std::vector<Loop> loops;  // innermost first
  int64_t inner = 1;
  for (int p = 0; p < pieces; ++p) {
    Loop l;
    l.var = v;
    if (p == pieces - 1 || inner * 2 > extent) {
      l.size = extent / inner;
      l.tail = extent % inner;
      loops.push_back(l);
      break;
    }
    const int64_t most = extent / inner;
    l.size = 1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(std::min<int64_t>(most, 8)));
    l.tail = 0;
    loops.push_back(l);
    inner *= l.size;
  }
  // Outermost first, each at a random position after the one outside it.
  size_t at = 0;
  for (auto it = loops.rbegin(); it != loops.rend(); ++it) {
    at += rng() % (order.size() - at + 1);
    order.insert(order.begin() + static_cast<long>(at), *it);
    ++at;
  }
}

TEST(OrderRules, OrderHoldsIsCheckOrdersVerdict) {
  auto program = ParseProgram("O[m, n, j] += A[m, k] * B[k, n, j]; m=12 n=7 k=30 j=1",
                              Limits{});
  ASSERT_TRUE(program.ok()) << program.status();
  const int num_vars = static_cast<int>(program->vars().size());
  std::vector<int> all;
  for (int v = 0; v < num_vars; ++v) all.push_back(v);
  std::mt19937 rng(7);
  int valid = 0, broken = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    // The variables the order must cover: all, or all but one.
    std::vector<int> vars = all;
    if (rng() % 4 == 0) vars.erase(vars.begin() + static_cast<long>(rng() % vars.size()));
    LoopOrder order;
    for (int v : vars) {
      AddSplit(rng, v, program->var(v).extent, 1 + static_cast<int>(rng() % 3), order);
    }
    if (!order.empty() && rng() % 3 == 0) {
      // Vectorize marks, on innermost loops or not.
      for (int k = 1 + static_cast<int>(rng() % 2); k > 0; --k) {
        order[rng() % order.size()].vectorize = true;
      }
    }
    if (!order.empty() && rng() % 2 == 0) {
      // One field broken (or not: the new value may be what it was, or still valid).
      Loop& l = order[rng() % order.size()];
      switch (rng() % 6) {
        case 0: l.var = static_cast<int>(rng() % (num_vars + 2)) - 1; break;
        case 1: l.size = static_cast<int64_t>(rng() % 40) - 2; break;
        case 2: l.tail = static_cast<int64_t>(rng() % 12) - 2; break;
        case 3: l.size = int64_t{1} << 62; break;
        case 4: order.erase(order.begin() + static_cast<long>(rng() % order.size())); break;
        case 5: order.push_back(order[rng() % order.size()]); break;
      }
    }
    const bool holds = OrderHolds(*program, order, vars);
    const absl::Status checked = CheckOrder(*program, order, vars, "the nest");
    ASSERT_EQ(holds, checked.ok()) << Text(order) << ": " << checked;
    (holds ? valid : broken) += 1;
  }
  // Both verdicts are common.
  EXPECT_GT(valid, 2000);
  EXPECT_GT(broken, 2000);
}

}  // namespace
}  // namespace looptool::schedule_internal
