// swap_up and swap_down: exchange the cursor loop with its neighbour in the compute nest.
#include <utility>

#include "backend/actions/primitives.h"

namespace looptool::actions_internal {
namespace {

// Exchanges compute[d] and compute[d + 1] of the cursor's statement, and the write nest's pair
// when it shares both loops (the nests under the inner loop); the cursor moves to `new_depth`.
LoopTree SwapPair(const LoopTree& tree, int d, int new_depth) {
  const int s = tree.cursor().statement;
  std::vector<StatementSchedule> schedules = tree.schedules();
  StatementSchedule& sched = schedules[s];
  std::swap(sched.compute[d], sched.compute[d + 1]);
  if (tree.SharedDepth(s) > d + 1) std::swap(sched.write[d], sched.write[d + 1]);
  return Rebuild(tree, std::move(schedules), {s, new_depth});
}

}  // namespace

NoEffectReason CheckSwapUp(const LoopTree& tree) {
  const Cursor c = tree.cursor();
  if (c.depth == 0) return NoEffectReason::kOutermostLoop;
  const LoopOrder& order = tree.schedule(c.statement).compute;
  if (order[c.depth - 1].var == order[c.depth].var) return NoEffectReason::kSameVariable;
  return NoEffectReason::kNone;
}

NoEffectReason CheckSwapDown(const LoopTree& tree) {
  const Cursor c = tree.cursor();
  const LoopOrder& order = tree.schedule(c.statement).compute;
  if (c.depth + 1 >= static_cast<int>(order.size())) return NoEffectReason::kInnermostLoop;
  if (order[c.depth + 1].var == order[c.depth].var) return NoEffectReason::kSameVariable;
  return NoEffectReason::kNone;
}

LoopTree DoSwapUp(const LoopTree& tree) {
  const int d = tree.cursor().depth;
  return SwapPair(tree, d - 1, d - 1);
}

LoopTree DoSwapDown(const LoopTree& tree) {
  const int d = tree.cursor().depth;
  return SwapPair(tree, d, d + 1);
}

}  // namespace looptool::actions_internal
