#include "backend/actions/action.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "util/strict_int.h"

namespace looptool {

namespace {

// The level-pointer form of an action's name ("tile_L3_6"); REQUIRES a.level >= 0.
std::string LevelName(const Action& a) {
  const std::string l = absl::StrCat("_L", a.level);
  switch (a.kind) {
    case Action::Kind::kSplit:
      return absl::StrCat("tile", l, "_", a.factor);
    case Action::Kind::kInterchange:
      return absl::StrCat("interchange", l, "_L", a.target);
    case Action::Kind::kMerge:
      return absl::StrCat("merge", l);
    case Action::Kind::kUnroll:
      return absl::StrCat("unroll", l);
    case Action::Kind::kVectorize:
      return absl::StrCat("vectorize", l);
    case Action::Kind::kStream:
      return absl::StrCat("stream", l);
    case Action::Kind::kFold:
      return absl::StrCat("fold", l);
    default:
      return "?";
  }
}

// "L<p>" with 0 <= p < 64 at the front of `s`: the level, and `s` advanced past it.
bool ConsumeLevel(absl::string_view& s, int* level) {
  if (!absl::ConsumePrefix(&s, "L")) return false;
  size_t digits = 0;
  while (digits < s.size() && digits < 2 && s[digits] >= '0' && s[digits] <= '9') ++digits;
  int64_t v = 0;
  if (digits == 0 || !ParseDecimal(s.substr(0, digits), &v) || v >= 64) return false;
  s.remove_prefix(digits);
  *level = static_cast<int>(v);
  return true;
}

// The inverse of LevelName, or nullopt.
std::optional<Action> LevelActionFromName(absl::string_view name) {
  static const std::pair<const char*, Action::Kind> kKinds[] = {
      {"tile_", Action::Kind::kSplit},     {"interchange_", Action::Kind::kInterchange},
      {"merge_", Action::Kind::kMerge},    {"unroll_", Action::Kind::kUnroll},
      {"vectorize_", Action::Kind::kVectorize}, {"stream_", Action::Kind::kStream},
      {"fold_", Action::Kind::kFold}};
  for (const auto& [prefix, kind] : kKinds) {
    absl::string_view rest = name;
    if (!absl::ConsumePrefix(&rest, prefix)) continue;
    Action a{kind, 0};
    if (!ConsumeLevel(rest, &a.level)) return std::nullopt;
    if (kind == Action::Kind::kSplit) {
      int64_t factor = 0;
      if (!absl::ConsumePrefix(&rest, "_") || !ParseDecimal(rest, &factor) || factor < 2 ||
          factor > 1024) {
        return std::nullopt;
      }
      a.factor = static_cast<int>(factor);
      return a;
    }
    if (kind == Action::Kind::kInterchange) {
      if (!absl::ConsumePrefix(&rest, "_") || !ConsumeLevel(rest, &a.target)) return std::nullopt;
    }
    if (!rest.empty()) return std::nullopt;
    return a;
  }
  return std::nullopt;
}

}  // namespace

std::string ActionName(const Action& a) {
  if (a.level >= 0) return LevelName(a);
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
    case Action::Kind::kStream:
      return "stream";
    case Action::Kind::kFold:
      return "fold";
    case Action::Kind::kInterchange:
      return "?";  // level pointers only
  }
  return "?";
}

absl::StatusOr<Action> ActionFromName(absl::string_view name) {
  static const std::pair<const char*, Action::Kind> kPlain[] = {
      {"up", Action::Kind::kUp},           {"down", Action::Kind::kDown},
      {"swap_up", Action::Kind::kSwapUp},  {"swap_down", Action::Kind::kSwapDown},
      {"merge", Action::Kind::kMerge},     {"unroll", Action::Kind::kUnroll},
      {"vectorize", Action::Kind::kVectorize}, {"stream", Action::Kind::kStream},
      {"fold", Action::Kind::kFold}};
  for (const auto& [n, kind] : kPlain) {
    if (name == n) return Action{kind, 0};
  }
  int64_t factor = 0;
  if (absl::StartsWith(name, "split_") && ParseDecimal(name.substr(6), &factor) &&
      factor >= 2 && factor <= 1024 && (factor & (factor - 1)) == 0) {
    return Action{Action::Kind::kSplit, static_cast<int>(factor)};
  }
  if (std::optional<Action> a = LevelActionFromName(name)) return *a;
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
    case NoEffectReason::kNoSuchLoop:
      return "the level pointer is past the tree's last compute loop";
    case NoEffectReason::kSameLoop:
      return "interchange: both level pointers name the same loop";
    case NoEffectReason::kDifferentNests:
      return "interchange: the two loops belong to different statements' nests";
    case NoEffectReason::kNotAssignment:
      return "stream: the statement accumulates into its output (only outputs assigned once "
             "stream)";
    case NoEffectReason::kNotStrideTwoWindow:
      return "fold: the statement is not a sum or max of one operand read with stride 2 (a "
             "pool's window)";
  }
  return "?";
}

}  // namespace looptool
