#include "backend/actions/action.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "backend/util/strict_int.h"

namespace looptool {

std::string ActionName(const Action& a) {
  switch (a.kind) {
    case Action::Kind::kUp:
      return "up";
    case Action::Kind::kDown:
      return "down";
    case Action::Kind::kSwapUp:
      return "swap_up";
    case Action::Kind::kSwapDown:
      return "swap_down";
    case Action::Kind::kSplit:
      return absl::StrCat("split_", a.factor);
    case Action::Kind::kMerge:
      return "merge";
    case Action::Kind::kUnroll:
      return "unroll";
    case Action::Kind::kVectorize:
      return "vectorize";
  }
  return "?";
}

absl::StatusOr<Action> ActionFromName(absl::string_view name) {
  static const std::pair<const char*, Action::Kind> kPlain[] = {
      {"up", Action::Kind::kUp},           {"down", Action::Kind::kDown},
      {"swap_up", Action::Kind::kSwapUp},  {"swap_down", Action::Kind::kSwapDown},
      {"merge", Action::Kind::kMerge},     {"unroll", Action::Kind::kUnroll},
      {"vectorize", Action::Kind::kVectorize}};
  for (const auto& [n, kind] : kPlain) {
    if (name == n) return Action{kind, 0};
  }
  int64_t factor = 0;
  if (absl::StartsWith(name, "split_") && ParseDecimal(name.substr(6), &factor) &&
      factor >= 2 && factor <= 1024 && (factor & (factor - 1)) == 0) {
    return Action{Action::Kind::kSplit, static_cast<int>(factor)};
  }
  return absl::InvalidArgumentError(absl::StrCat("Unknown action: ", name));
}

std::string Describe(NoEffectReason r) {
  switch (r) {
    case NoEffectReason::kNone:
      return "applied";
    case NoEffectReason::kFirstLoop:
      return "up: the cursor is on the first loop";
    case NoEffectReason::kLastLoop:
      return "down: the cursor is on the last compute loop";
    case NoEffectReason::kOutermostLoop:
      return "swap_up: the cursor loop has no enclosing loop in its nest";
    case NoEffectReason::kInnermostLoop:
      return "swap_down: the cursor loop has no loop nested inside it";
    case NoEffectReason::kSameVariable:
      return "swap: both loops run over the same variable (resplit instead)";
    case NoEffectReason::kSplitNotSmaller:
      return "split: the split factor does not divide the loop into more than one iteration";
    case NoEffectReason::kTooManyLoops:
      return "the loop tree would exceed its loop limit";
    case NoEffectReason::kNoEnclosingSameVariable:
      return "merge: no enclosing loop runs over the same variable";
    case NoEffectReason::kNotInnermostOfVariable:
      return "vectorize: the loop is not the innermost loop over its variable";
  }
  return "?";
}

}  // namespace looptool
