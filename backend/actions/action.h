// Action: one edit an agent applies to a LoopTree, and NoEffectReason: why an action that cannot
// apply leaves the state as it is. Internal names follow Halide's scheduling vocabulary (split,
// reorder by swapping, unroll, vectorize; `merge` is Halide's `fuse` of a split pair); wire names
// are LoopTune's (`split_16`, `swap_up`). The loop_nest space's actions name their loop by a
// level pointer instead of the cursor (MLIR-RL's style: `tile_L3_6`, `interchange_L0_L2`).
#ifndef LOOPTOOL_BACKEND_ACTIONS_ACTION_H_
#define LOOPTOOL_BACKEND_ACTIONS_ACTION_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace looptool {

struct Action {
  enum class Kind {
    kUp, kDown, kSwapUp, kSwapDown, kSplit, kMerge, kUnroll, kVectorize,
    kInterchange,  // level pointers only: moves loop `level` to loop `target`'s depth
    kStream,       // toggles non-temporal stores of the output of the loop's statement
    kFold,         // toggles folding the rows of the loop's statement's stride-2 window
  };
  Kind kind = Kind::kUp;
  int factor = 0;  // kSplit only: the inner loop's size
  // -1: the cursor's loop. Otherwise a level pointer: the index of the loop in the cursor's walk
  // order (LoopTree::CursorPositions(): compute loops, statement by statement, outer first).
  int level = -1;
  int target = -1;  // kInterchange only: the level pointer of the loop whose depth X moves to

  bool operator==(const Action& o) const {
    return kind == o.kind && factor == o.factor && level == o.level && target == o.target;
  }
};

// "up", "swap_down", "split_16", "merge", ...
std::string ActionName(const Action& action);
// The inverse of ActionName for split factors 2, 4, ..., 1024, every other cursor action, and the
// level-pointer actions `tile_L<p>_<n>` (n in 2..1024), `interchange_L<p>_L<q>`, `unroll_L<p>`,
// `vectorize_L<p>`, `merge_L<p>`, `stream_L<p>`, `fold_L<p>` (p, q < 64) and the cursor's
// `stream` and `fold`;
// INVALID_ARGUMENT "Unknown action: <name>" otherwise.
absl::StatusOr<Action> ActionFromName(absl::string_view name);

// Why an action changed nothing. Each value is one numbered precondition of one action
// (backend/actions/apply.h) and has a test that produces it.
enum class NoEffectReason {
  kNone,                     // the action applied
  kFirstLoop,                // up: the cursor is on the first loop
  kLastLoop,                 // down: the cursor is on the last compute loop
  kOutermostLoop,            // swap_up: no enclosing loop in the same nest
  kInnermostLoop,            // swap_down: no loop nested inside in the same nest
  kSameVariable,             // swap: both loops run over one variable (resplit instead)
  kSplitNotSmaller,          // split_N: N iterations already cover the loop's extent
  kTooManyLoops,             // any action: the result would exceed the loop limit
  kNoEnclosingSameVariable,  // merge: no enclosing loop runs over the same variable
  kNotInnermostOfVariable,   // vectorize: lanes would not be consecutive elements
  kNoSuchLoop,               // a level pointer: the tree has fewer loops
  kSameLoop,                 // interchange: both level pointers name one loop
  kDifferentNests,           // interchange: the loops belong to different statements
  kNotAssignment,            // stream: the statement accumulates into its output
  kNotStrideTwoWindow,       // fold: not a sum or max of one operand read with stride 2
};

// A sentence for logs and replies: "swap_up: both loops run over one variable".
std::string Describe(NoEffectReason reason);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ACTIONS_ACTION_H_
