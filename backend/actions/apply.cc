#include "backend/actions/apply.h"

#include "backend/actions/primitives.h"
#include "backend/util/check.h"

namespace looptool {

namespace actions_internal {

LoopTree Rebuild(const LoopTree& tree, std::vector<StatementSchedule> schedules, Cursor cursor) {
  auto next = LoopTree::Create(tree.program_ptr(), std::move(schedules), cursor);
  LT_CHECK(next.ok());
  return *std::move(next);
}

}  // namespace actions_internal

namespace {

using namespace actions_internal;  // NOLINT: the primitives are this file's vocabulary

// The action's own precondition (apply.h's numbered rules, limits aside).
NoEffectReason CheckPrecondition(const LoopTree& tree, const Action& action) {
  switch (action.kind) {
    case Action::Kind::kUp:
      return CheckUp(tree);
    case Action::Kind::kDown:
      return CheckDown(tree);
    case Action::Kind::kSwapUp:
      return CheckSwapUp(tree);
    case Action::Kind::kSwapDown:
      return CheckSwapDown(tree);
    case Action::Kind::kSplit:
      return CheckSplit(tree, action.factor);
    case Action::Kind::kMerge:
      return CheckMerge(tree);
    case Action::Kind::kUnroll:
      return NoEffectReason::kNone;
    case Action::Kind::kVectorize:
      return CheckVectorize(tree);
  }
  LT_CHECK(false);
  return NoEffectReason::kNone;
}

// The next state. REQUIRES: CheckPrecondition(tree, action) == kNone.
LoopTree Do(const LoopTree& tree, const Action& action) {
  switch (action.kind) {
    case Action::Kind::kUp:
      return DoUp(tree);
    case Action::Kind::kDown:
      return DoDown(tree);
    case Action::Kind::kSwapUp:
      return DoSwapUp(tree);
    case Action::Kind::kSwapDown:
      return DoSwapDown(tree);
    case Action::Kind::kSplit:
      return DoSplit(tree, action.factor);
    case Action::Kind::kMerge:
      return DoMerge(tree);
    case Action::Kind::kUnroll:
      return DoUnroll(tree);
    case Action::Kind::kVectorize:
      return DoVectorize(tree);
  }
  LT_CHECK(false);
  return tree;
}

// The one place where every action's result meets the limits: an action whose result would
// exceed them has no effect, whatever the action (a split adds loops; so can a swap that
// separates a compute nest from the write-back nest it shared loops with).
NoEffectReason CheckLimits(const LoopTree& next, const Limits& limits) {
  if (next.num_loops() > limits.max_loops) return NoEffectReason::kTooManyLoops;
  return NoEffectReason::kNone;
}

}  // namespace

NoEffectReason CheckApplicable(const LoopTree& tree, const Action& action, const Limits& limits) {
  return Apply(tree, action, limits).reason;
}

ActionResult Apply(const LoopTree& tree, const Action& action, const Limits& limits) {
  NoEffectReason reason = CheckPrecondition(tree, action);
  if (reason != NoEffectReason::kNone) return {tree, reason};
  LoopTree next = Do(tree, action);
  reason = CheckLimits(next, limits);
  if (reason != NoEffectReason::kNone) return {tree, reason};
  return {std::move(next), NoEffectReason::kNone};
}

std::vector<bool> ActionMask(const LoopTree& tree, const ActionSpace& space,
                             const Limits& limits) {
  std::vector<bool> mask;
  for (const Action& a : space.actions) {
    mask.push_back(CheckApplicable(tree, a, limits) == NoEffectReason::kNone);
  }
  return mask;
}

}  // namespace looptool
