// Action: one edit an agent applies to a LoopTree, and NoEffectReason: why an action that cannot
// apply leaves the state as it is. Internal names follow Halide's scheduling vocabulary (split,
// reorder by swapping, unroll, vectorize; `merge` is Halide's `fuse` of a split pair); wire names
// are LoopTune's (`split_16`, `swap_up`).
#ifndef LOOPTOOL_BACKEND_ACTIONS_ACTION_H_
#define LOOPTOOL_BACKEND_ACTIONS_ACTION_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace looptool {

struct Action {
  enum class Kind { kUp, kDown, kSwapUp, kSwapDown, kSplit, kMerge, kUnroll, kVectorize };
  Kind kind = Kind::kUp;
  int factor = 0;  // kSplit only: the inner loop's size

  bool operator==(const Action& o) const { return kind == o.kind && factor == o.factor; }
};

// "up", "swap_down", "split_16", "merge", ...
std::string ActionName(const Action& action);
// The inverse of ActionName for split factors 2, 4, ..., 1024 and every other kind; INVALID_ARGUMENT
// "Unknown action: <name>" otherwise.
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
};

// A sentence for logs and replies: "swap_up: both loops run over one variable".
std::string Describe(NoEffectReason reason);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ACTIONS_ACTION_H_
