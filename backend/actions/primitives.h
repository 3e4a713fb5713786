// The schedule primitives behind Apply (internal to backend/actions). Each Check* returns the
// failing precondition of backend/actions/apply.h or kNone; each Do* assumes its Check* passed.
// No primitive checks Limits: Apply checks every result against them, in one place.
#ifndef LOOPTOOL_BACKEND_ACTIONS_PRIMITIVES_H_
#define LOOPTOOL_BACKEND_ACTIONS_PRIMITIVES_H_

#include "backend/actions/action.h"
#include "backend/schedule/loop_tree.h"

namespace looptool::actions_internal {

NoEffectReason CheckUp(const LoopTree& tree);
NoEffectReason CheckDown(const LoopTree& tree);
LoopTree DoUp(const LoopTree& tree);
LoopTree DoDown(const LoopTree& tree);

NoEffectReason CheckSwapUp(const LoopTree& tree);
NoEffectReason CheckSwapDown(const LoopTree& tree);
LoopTree DoSwapUp(const LoopTree& tree);
LoopTree DoSwapDown(const LoopTree& tree);

NoEffectReason CheckSplit(const LoopTree& tree, int factor);
// CheckSplit for a cursor on `order[depth]`, without a tree.
NoEffectReason CheckSplitAt(const LoopOrder& order, int depth, int factor);
// A bound on the loops a split adds to LoopTree::num_loops(): a compute loop, and a write-back
// loop where the write nest shares the loop split (a shared loop is one node, so one in fact; the
// bound does not rely on that).
inline constexpr int kMaxLoopsASplitAdds = 2;
LoopTree DoSplit(const LoopTree& tree, int factor);
NoEffectReason CheckMerge(const LoopTree& tree);
LoopTree DoMerge(const LoopTree& tree);

NoEffectReason CheckVectorize(const LoopTree& tree);
LoopTree DoUnroll(const LoopTree& tree);
LoopTree DoVectorize(const LoopTree& tree);
NoEffectReason CheckStream(const LoopTree& tree);
// CheckStream for a cursor in `statement`, without a tree.
NoEffectReason CheckStreamOf(const Program& program, int statement);
LoopTree DoStream(const LoopTree& tree);
NoEffectReason CheckFold(const LoopTree& tree);
LoopTree DoFold(const LoopTree& tree);

// Builds a tree the primitives have kept valid; a failure is our bug (LT_CHECK).
LoopTree Rebuild(const LoopTree& tree, std::vector<StatementSchedule> schedules, Cursor cursor);

}  // namespace looptool::actions_internal

#endif  // LOOPTOOL_BACKEND_ACTIONS_PRIMITIVES_H_
