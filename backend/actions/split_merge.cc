// split_N and merge, the inverse pair: both keep each variable's extent and share the tail
// arithmetic extent = size * inner + tail.
#include "backend/actions/primitives.h"

namespace looptool::actions_internal {
namespace {

// Replaces order[d] by an outer loop of extent / (factor * inner) iterations (plus the
// remainder as its tail) and an inner loop of `factor` iterations.
void SplitAt(LoopOrder& order, int d, int factor) {
  const int64_t inner = InnerExtent(order, d);
  const int64_t extent = Extent(order, d);
  const Loop outer{order[d].var, extent / (factor * inner), extent % (factor * inner)};
  const Loop split_inner{order[d].var, factor, 0};
  order[d] = outer;
  order.insert(order.begin() + d + 1, split_inner);
}

// The nearest loop above `d` over the same variable, or -1.
int EnclosingSameVar(const LoopOrder& order, int d) {
  for (int a = d - 1; a >= 0; --a) {
    if (order[a].var == order[d].var) return a;
  }
  return -1;
}

// Fuses order[a] with order[d] (the next loop over its variable) into one loop at `a`.
void MergeAt(LoopOrder& order, int a, int d) {
  const int64_t inner = InnerExtent(order, d);
  const int64_t total = order[a].size * Extent(order, d) + order[a].tail;
  order[a] = Loop{order[a].var, total / inner, total % inner};
  order.erase(order.begin() + d);
}

}  // namespace

NoEffectReason CheckSplitAt(const LoopOrder& order, int depth, int factor) {
  if (int64_t{factor} * InnerExtent(order, depth) >= Extent(order, depth)) {
    return NoEffectReason::kSplitNotSmaller;
  }
  return NoEffectReason::kNone;
}

NoEffectReason CheckSplit(const LoopTree& tree, int factor) {
  const Cursor c = tree.cursor();
  return CheckSplitAt(tree.schedule(c.statement).compute, c.depth, factor);
}

LoopTree DoSplit(const LoopTree& tree, int factor) {
  const Cursor c = tree.cursor();
  std::vector<StatementSchedule> schedules = tree.schedules();
  StatementSchedule& sched = schedules[c.statement];
  SplitAt(sched.compute, c.depth, factor);
  if (tree.SharedDepth(c.statement) > c.depth) SplitAt(sched.write, c.depth, factor);
  return Rebuild(tree, std::move(schedules), c);
}

NoEffectReason CheckMerge(const LoopTree& tree) {
  const Cursor c = tree.cursor();
  return EnclosingSameVar(tree.schedule(c.statement).compute, c.depth) < 0
             ? NoEffectReason::kNoEnclosingSameVariable
             : NoEffectReason::kNone;
}

LoopTree DoMerge(const LoopTree& tree) {
  const Cursor c = tree.cursor();
  std::vector<StatementSchedule> schedules = tree.schedules();
  StatementSchedule& sched = schedules[c.statement];
  const Loop x = sched.compute[c.depth];
  const int a = EnclosingSameVar(sched.compute, c.depth);
  MergeAt(sched.compute, a, c.depth);
  // A write nest that shares P and holds a loop equal to X as its next loop over the variable
  // fuses too (loop_tool's merge touches every node under P holding both loops).
  if (tree.SharedDepth(c.statement) > a) {
    LoopOrder& w = sched.write;
    for (int j = a + 1; j < static_cast<int>(w.size()); ++j) {
      if (w[j].var != x.var) continue;
      if (w[j] == x) MergeAt(w, a, j);
      break;
    }
  }
  return Rebuild(tree, std::move(schedules), {c.statement, a});
}

}  // namespace looptool::actions_internal
