// Apply: actions as functions from one LoopTree to the next. An action that cannot apply leaves
// the state unchanged and says why; it is never an error. Every action has one more, common
// precondition, checked last and in one place: its result stays within the Limits (today:
// limits.max_loops; kTooManyLoops). Splits add loops, and so can a swap that separates the
// write-back nest from loops it shared with the compute nest. The actions' own preconditions,
// numbered as the NoEffectReason each one produces when it fails (the cursor loop is X, at depth
// d of its statement's compute nest):
//
// up         1) X is not the first compute loop of the tree (kFirstLoop).
//            Moves the cursor to the previous compute loop (statement by statement, outer first).
// down       1) X is not the last compute loop of the tree (kLastLoop). LoopTune's rule: the
//            cursor never enters a write-back nest.
// swap_up    1) X has an enclosing loop P in its compute nest (kOutermostLoop);
//            2) P and X run over different variables (kSameVariable).
//            Exchanges P and X in every nest under X (the write-back nest too when it shares X;
//            a nest sharing P but not X keeps its order, so the two nests split apart, as in
//            loop_tool). The cursor follows X.
// swap_down  1) X has a loop Y nested inside it in its compute nest (kInnermostLoop);
//            2) X and Y run over different variables (kSameVariable). As swap_up on Y.
// split_N    1) N * inner(X) < extent(X): the split leaves more than one outer iteration's worth
//            (kSplitNotSmaller).
//            X becomes an outer loop of extent(X) / (N * inner) iterations with tail
//            extent(X) % (N * inner) and an inner loop of N iterations (loop_tool's split),
//            in every nest sharing X; annotations of X are dropped. The cursor stays outer.
// merge      1) a loop P over X's variable encloses X in its compute nest (kNoEnclosingSameVariable;
//            the nearest such P is used). P and X fuse into one loop at P's position with
//            extent size(P) * extent(X) + tail(P) over X's inner extent (loop_tool's merge), also
//            in a write-back nest that shares P and holds a loop equal to X. The cursor goes to
//            the fused loop (loop_tool leaves it at X's old line; ours makes merge after
//            split, down the exact inverse).
// unroll     no precondition. Toggles X's unroll mark.
// vectorize  1) X is the innermost loop over its variable (kNotInnermostOfVariable). Toggles X's
//            vectorize mark; setting it clears the mark on every other loop of the nest.
// stream     1) X's statement assigns its output, each element once (kNotAssignment). Toggles
//            the statement's stream mark: the code generator stores its output's full vectors
//            non-temporally, past the caches, where it proves them aligned (kernel_plan.h).
// fold       1) X's statement sums or maxes one operand read with stride 2 along some variable
//            and with a stride past 2 along a reduction variable: a pool's window of several
//            rows (CanFoldRows; kNotStrideTwoWindow). Toggles the statement's fold mark: the code
//            generator sums or maxes the window's rows as they lie in memory, then permutes the
//            even and odd phases once per tap, where the block allows it (kernel_plan.h).
//
// Level pointers (the loop_nest space, after MLIR-RL): an action whose Action::level is p >= 0
// acts on loop p of the cursor's walk order instead of the cursor's loop:
// any        1) the tree has more than p compute loops (kNoSuchLoop).
//            Then tile_L<p>_<n>, unroll_L<p>, vectorize_L<p>, merge_L<p>, stream_L<p> and
//            fold_L<p> are split_n, unroll, vectorize, merge, stream and fold with the cursor
//            moved to loop p first (their own preconditions and results; the cursor ends where
//            they leave it; on no effect it stays where it was).
// interchange_L<p>_L<q>  2) the tree has more than q compute loops (kNoSuchLoop);
//            3) p != q (kSameLoop); 4) both loops are in one statement's compute nest
//            (kDifferentNests); 5) every adjacent swap moving loop p to loop q's depth applies
//            (swap's kSameVariable, or kTooManyLoops). Loop p then sits at q's depth, the loops
//            between shifted by one; the cursor follows it.
//
// Where LoopTune's agent also refuses an action (an innermost loop whose size is not a multiple
// of 8, a tree of more than 10 loops) LoopTool does not: its code generator emits masked tails,
// and the loop limit is Limits::max_loops.
#ifndef LOOPTOOL_BACKEND_ACTIONS_APPLY_H_
#define LOOPTOOL_BACKEND_ACTIONS_APPLY_H_

#include <vector>

#include "backend/actions/action.h"
#include "backend/actions/action_space.h"
#include "backend/schedule/loop_tree.h"
#include "backend/ir/limits.h"

namespace looptool {

struct ActionResult {
  LoopTree tree;                                    // the next state (the old one on no effect)
  NoEffectReason reason = NoEffectReason::kNone;    // why nothing changed, or kNone
  bool had_effect() const { return reason == NoEffectReason::kNone; }
};

// The precondition that fails, or kNone when `action` applies to `tree`.
NoEffectReason CheckApplicable(const LoopTree& tree, const Action& action, const Limits& limits);

// The next state. When CheckApplicable fails, returns `tree` unchanged with the reason.
ActionResult Apply(const LoopTree& tree, const Action& action, const Limits& limits);

// One entry per action of `space`: whether it would change the state.
std::vector<bool> ActionMask(const LoopTree& tree, const ActionSpace& space, const Limits& limits);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ACTIONS_APPLY_H_
