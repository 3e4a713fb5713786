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

// The failing precondition, or kNone with the next state in `next`.
NoEffectReason Try(const LoopTree& tree, const Action& action, const Limits& limits,
                   LoopTree* next) {
  NoEffectReason r = NoEffectReason::kNone;
  switch (action.kind) {
    case Action::Kind::kUp:
      if ((r = CheckUp(tree)) == NoEffectReason::kNone) *next = DoUp(tree);
      return r;
    case Action::Kind::kDown:
      if ((r = CheckDown(tree)) == NoEffectReason::kNone) *next = DoDown(tree);
      return r;
    case Action::Kind::kSwapUp:
      if ((r = CheckSwapUp(tree)) == NoEffectReason::kNone) *next = DoSwapUp(tree);
      return r;
    case Action::Kind::kSwapDown:
      if ((r = CheckSwapDown(tree)) == NoEffectReason::kNone) *next = DoSwapDown(tree);
      return r;
    case Action::Kind::kSplit:
      return TrySplit(tree, action.factor, limits, next);
    case Action::Kind::kMerge:
      if ((r = CheckMerge(tree)) == NoEffectReason::kNone) *next = DoMerge(tree);
      return r;
    case Action::Kind::kUnroll:
      *next = DoUnroll(tree);
      return r;
    case Action::Kind::kVectorize:
      if ((r = CheckVectorize(tree)) == NoEffectReason::kNone) *next = DoVectorize(tree);
      return r;
  }
  LT_CHECK(false);
  return r;
}

}  // namespace

NoEffectReason CheckApplicable(const LoopTree& tree, const Action& action, const Limits& limits) {
  switch (action.kind) {
    case Action::Kind::kUp:
      return CheckUp(tree);
    case Action::Kind::kDown:
      return CheckDown(tree);
    case Action::Kind::kSwapUp:
      return CheckSwapUp(tree);
    case Action::Kind::kSwapDown:
      return CheckSwapDown(tree);
    case Action::Kind::kMerge:
      return CheckMerge(tree);
    case Action::Kind::kUnroll:
      return NoEffectReason::kNone;
    case Action::Kind::kVectorize:
      return CheckVectorize(tree);
    case Action::Kind::kSplit: {
      LoopTree unused = tree;
      return TrySplit(tree, action.factor, limits, &unused);
    }
  }
  return NoEffectReason::kNone;
}

ActionResult Apply(const LoopTree& tree, const Action& action, const Limits& limits) {
  LoopTree next = tree;
  const NoEffectReason reason = Try(tree, action, limits, &next);
  if (reason != NoEffectReason::kNone) return {tree, reason};
  return {std::move(next), reason};
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
