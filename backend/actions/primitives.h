// The schedule primitives behind Apply (internal to backend/actions). Each Check* returns the
// failing precondition of backend/actions/apply.h or kNone; each Do* assumes its Check* passed.
#ifndef LOOPTOOL_BACKEND_ACTIONS_PRIMITIVES_H_
#define LOOPTOOL_BACKEND_ACTIONS_PRIMITIVES_H_

#include "backend/actions/action.h"
#include "backend/schedule/loop_tree.h"
#include "backend/util/limits.h"

namespace looptool::actions_internal {

NoEffectReason CheckUp(const LoopTree& tree);
NoEffectReason CheckDown(const LoopTree& tree);
LoopTree DoUp(const LoopTree& tree);
LoopTree DoDown(const LoopTree& tree);

NoEffectReason CheckSwapUp(const LoopTree& tree);
NoEffectReason CheckSwapDown(const LoopTree& tree);
LoopTree DoSwapUp(const LoopTree& tree);
LoopTree DoSwapDown(const LoopTree& tree);

// Split needs the result to check the loop limit, so it returns the reason and the new tree.
NoEffectReason TrySplit(const LoopTree& tree, int factor, const Limits& limits, LoopTree* out);
NoEffectReason CheckMerge(const LoopTree& tree);
LoopTree DoMerge(const LoopTree& tree);

NoEffectReason CheckVectorize(const LoopTree& tree);
LoopTree DoUnroll(const LoopTree& tree);
LoopTree DoVectorize(const LoopTree& tree);

// Builds a tree the primitives have kept valid; a failure is our bug (LT_CHECK).
LoopTree Rebuild(const LoopTree& tree, std::vector<StatementSchedule> schedules, Cursor cursor);

}  // namespace looptool::actions_internal

#endif  // LOOPTOOL_BACKEND_ACTIONS_PRIMITIVES_H_
