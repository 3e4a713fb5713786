#include "backend/actions/apply.h"

#include <algorithm>
#include <cstdlib>

#include "backend/actions/primitives.h"
#include "util/check.h"

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
    case Action::Kind::kStream:
      return CheckStream(tree);
    case Action::Kind::kFold:
      return CheckFold(tree);
    case Action::Kind::kInterchange:
      break;  // level pointers only: ApplyAtLevel
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
    case Action::Kind::kStream:
      return DoStream(tree);
    case Action::Kind::kFold:
      return DoFold(tree);
    case Action::Kind::kInterchange:
      break;  // level pointers only: ApplyAtLevel
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

// A cursor action at the cursor: its precondition, then the limits.
ActionResult ApplyAtCursor(const LoopTree& tree, const Action& action, const Limits& limits) {
  NoEffectReason reason = CheckPrecondition(tree, action);
  if (reason != NoEffectReason::kNone) return {tree, reason};
  LoopTree next = Do(tree, action);
  reason = CheckLimits(next, limits);
  if (reason != NoEffectReason::kNone) return {tree, reason};
  return {std::move(next), NoEffectReason::kNone};
}

// interchange_L<p>_L<q> on `at_p` (the tree with its cursor on loop p): loop p moves to loop q's
// depth by adjacent swaps, each of which must apply (swap_down's or swap_up's reasons).
ActionResult Interchange(const LoopTree& at_p, Cursor q, const Limits& limits) {
  const Cursor p = at_p.cursor();
  if (p.statement != q.statement) return {at_p, NoEffectReason::kDifferentNests};
  if (p.depth == q.depth) return {at_p, NoEffectReason::kSameLoop};
  const Action swap{q.depth > p.depth ? Action::Kind::kSwapDown : Action::Kind::kSwapUp, 0};
  LoopTree t = at_p;
  for (int i = 0; i < std::abs(q.depth - p.depth); ++i) {
    ActionResult r = ApplyAtCursor(t, swap, limits);
    if (!r.had_effect()) return {at_p, r.reason};
    t = std::move(r.tree);
  }
  return {std::move(t), NoEffectReason::kNone};
}

// A level-pointer action: the cursor action on loop `level` (the cursor ends where that action
// leaves it), or interchange.
ActionResult ApplyAtLevel(const LoopTree& tree, const Action& action, const Limits& limits) {
  const std::vector<Cursor> positions = tree.CursorPositions();
  const int n = static_cast<int>(positions.size());
  if (action.level >= n) return {tree, NoEffectReason::kNoSuchLoop};
  const bool interchange = action.kind == Action::Kind::kInterchange;
  if (interchange && (action.target < 0 || action.target >= n)) {
    return {tree, NoEffectReason::kNoSuchLoop};
  }
  const LoopTree at = tree.WithCursor(positions[action.level]);
  Action at_cursor = action;
  at_cursor.level = -1;
  ActionResult r = interchange ? Interchange(at, positions[action.target], limits)
                               : ApplyAtCursor(at, at_cursor, limits);
  if (!r.had_effect()) return {tree, r.reason};
  return r;
}

}  // namespace

NoEffectReason CheckApplicable(const LoopTree& tree, const Action& action, const Limits& limits) {
  return Apply(tree, action, limits).reason;
}

ActionResult Apply(const LoopTree& tree, const Action& action, const Limits& limits) {
  if (action.level >= 0) return ApplyAtLevel(tree, action, limits);
  return ApplyAtCursor(tree, action, limits);
}

std::vector<bool> ActionMask(const LoopTree& tree, const ActionSpace& space,
                             const Limits& limits) {
  const std::vector<Cursor> positions = tree.CursorPositions();
  const int loops = static_cast<int>(positions.size());
  // interchange_L<p>_L<q> for every q at once, per p: loop p's swaps, each depth one more swap
  // from the one before it (the same swaps Interchange makes, made once); reach[p][d]: whether
  // the swaps from p's depth to depth d of its statement's nest all apply.
  std::vector<std::vector<bool>> reach(loops);
  const auto reaches = [&](int p, int q) {
    if (positions[p].statement != positions[q].statement || p == q) return false;
    std::vector<bool>& r = reach[p];
    if (r.empty()) {
      int depths = 0;
      for (const Cursor& c : positions) {
        if (c.statement == positions[p].statement) depths = std::max(depths, c.depth + 1);
      }
      r.assign(depths, false);
      const LoopTree at_p = tree.WithCursor(positions[p]);
      for (const Action::Kind kind : {Action::Kind::kSwapDown, Action::Kind::kSwapUp}) {
        const int step = kind == Action::Kind::kSwapDown ? 1 : -1;
        LoopTree t = at_p;
        for (int d = positions[p].depth + step; d >= 0 && d < depths; d += step) {
          ActionResult next = ApplyAtCursor(t, Action{kind, 0}, limits);
          if (!next.had_effect()) break;
          r[d] = true;
          t = std::move(next.tree);
        }
      }
    }
    return static_cast<bool>(r[positions[q].depth]);
  };
  const bool splits_fit = tree.num_loops() + kMaxLoopsASplitAdds <= limits.max_loops;
  std::vector<bool> mask;
  for (const Action& a : space.actions) {
    if (a.level >= loops || a.target >= loops) {  // kNoSuchLoop, without building a tree
      mask.push_back(false);
    } else if (a.kind == Action::Kind::kInterchange && a.level >= 0 && a.target >= 0) {
      mask.push_back(reaches(a.level, a.target));
    } else if (a.kind == Action::Kind::kSplit && a.level >= 0 && splits_fit) {
      // Its precondition alone: no split can take the tree past the limits.
      const Cursor at = positions[a.level];
      mask.push_back(CheckSplitAt(tree.schedule(at.statement).compute, at.depth, a.factor) ==
                     NoEffectReason::kNone);
    } else if (a.kind == Action::Kind::kStream && a.level >= 0) {
      // Its precondition alone: a mark adds no loop.
      mask.push_back(CheckStreamOf(tree.program(), positions[a.level].statement) ==
                     NoEffectReason::kNone);
    } else if (a.kind == Action::Kind::kFold && a.level >= 0) {
      mask.push_back(CanFoldRows(tree.program(), positions[a.level].statement));
    } else {
      mask.push_back(CheckApplicable(tree, a, limits) == NoEffectReason::kNone);
    }
  }
  return mask;
}

}  // namespace looptool
