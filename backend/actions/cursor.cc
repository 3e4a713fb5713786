// up and down: the cursor walks the compute loops, statement by statement, outermost first.
#include <algorithm>

#include "backend/actions/primitives.h"

namespace looptool::actions_internal {
namespace {

int Position(const LoopTree& tree, const std::vector<Cursor>& positions) {
  return static_cast<int>(std::find(positions.begin(), positions.end(), tree.cursor()) -
                          positions.begin());
}

}  // namespace

NoEffectReason CheckUp(const LoopTree& tree) {
  const Cursor c = tree.cursor();
  return c.statement == 0 && c.depth == 0 ? NoEffectReason::kFirstLoop : NoEffectReason::kNone;
}

NoEffectReason CheckDown(const LoopTree& tree) {
  const auto positions = tree.CursorPositions();
  return Position(tree, positions) + 1 == static_cast<int>(positions.size())
             ? NoEffectReason::kLastLoop
             : NoEffectReason::kNone;
}

LoopTree DoUp(const LoopTree& tree) {
  const auto positions = tree.CursorPositions();
  return tree.WithCursor(positions[Position(tree, positions) - 1]);
}

LoopTree DoDown(const LoopTree& tree) {
  const auto positions = tree.CursorPositions();
  return tree.WithCursor(positions[Position(tree, positions) + 1]);
}

}  // namespace looptool::actions_internal
