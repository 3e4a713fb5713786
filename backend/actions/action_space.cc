#include "backend/actions/action_space.h"

#include "absl/strings/str_cat.h"

namespace looptool {
namespace {

ActionSpace MakeSpace(std::string name, const std::vector<int>& split_factors, bool extended) {
  ActionSpace s{std::move(name), {}};
  for (auto kind : {Action::Kind::kUp, Action::Kind::kDown, Action::Kind::kSwapUp,
                    Action::Kind::kSwapDown}) {
    s.actions.push_back({kind, 0});
  }
  for (int f : split_factors) s.actions.push_back({Action::Kind::kSplit, f});
  if (extended) {
    for (auto kind : {Action::Kind::kMerge, Action::Kind::kUnroll, Action::Kind::kVectorize}) {
      s.actions.push_back({kind, 0});
    }
  }
  return s;
}

constexpr int kLevels = 16;  // loop_nest's level pointers (Limits' default max_loops)

ActionSpace MakeLoopNestSpace() {
  ActionSpace s{"loop_nest", {}};
  for (int p = 0; p < kLevels; ++p) {
    for (int n : LoopNestTileSizes()) s.actions.push_back({Action::Kind::kSplit, n, p});
  }
  for (int p = 0; p < kLevels; ++p) {
    for (int q = 0; q < kLevels; ++q) s.actions.push_back({Action::Kind::kInterchange, 0, p, q});
  }
  for (auto kind : {Action::Kind::kUnroll, Action::Kind::kVectorize, Action::Kind::kMerge,
                    Action::Kind::kStream, Action::Kind::kFold}) {
    for (int p = 0; p < kLevels; ++p) s.actions.push_back({kind, 0, p});
  }
  return s;
}

}  // namespace

std::vector<std::string> ActionSpace::Names() const {
  std::vector<std::string> out;
  for (const Action& a : actions) out.push_back(ActionName(a));
  return out;
}

absl::StatusOr<Action> ActionSpace::At(int64_t index) const {
  if (index < 0 || index >= size()) {
    return absl::InvalidArgumentError(absl::StrCat("Action index ", index,
                                                   " is out of range for action space ", name,
                                                   " (0..", size() - 1, ")"));
  }
  return actions[index];
}

int ActionSpace::IndexOf(const Action& action) const {
  for (int i = 0; i < size(); ++i) {
    if (actions[i] == action) return i;
  }
  return -1;
}

const ActionSpace& LoopToolActionSpace() {
  static const ActionSpace* space =
      new ActionSpace(MakeSpace("loop_tool", {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}, true));
  return *space;
}

const ActionSpace& LoopTuneActionSpace() {
  static const ActionSpace* space = new ActionSpace(MakeSpace("loop_tune", {4, 8, 16}, false));
  return *space;
}

const ActionSpace& LoopNestActionSpace() {
  static const ActionSpace* space = new ActionSpace(MakeLoopNestSpace());
  return *space;
}

const std::vector<int>& LoopNestTileSizes() {
  static const std::vector<int>* sizes =
      new std::vector<int>{2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256};
  return *sizes;
}

absl::StatusOr<int64_t> LoopNestIndex(int64_t transformation, int64_t level, int64_t parameter) {
  const auto error = [&](absl::string_view what, int64_t high) {
    return absl::InvalidArgumentError(
        absl::StrCat("loop_nest action (", transformation, ", ", level, ", ", parameter, "): ",
                     what, " is out of range (0..", high, ")"));
  };
  if (transformation < 0 || transformation > 6) return error("the transformation", 6);
  if (level < 0 || level >= kLevels) return error("the level", kLevels - 1);
  if (parameter < 0 || parameter >= kLevels) return error("the parameter", kLevels - 1);
  if (transformation <= 1) return transformation * kLevels * kLevels + level * kLevels + parameter;
  return 2 * kLevels * kLevels + (transformation - 2) * kLevels + level;
}

const std::vector<ActionSpace>& AllActionSpaces() {
  static const std::vector<ActionSpace>* spaces = new std::vector<ActionSpace>{
      LoopToolActionSpace(), LoopTuneActionSpace(), LoopNestActionSpace()};
  return *spaces;
}

absl::StatusOr<ActionSpace> FindActionSpace(absl::string_view name) {
  for (const ActionSpace& s : AllActionSpaces()) {
    if (s.name == name) return s;
  }
  return absl::InvalidArgumentError(absl::StrCat("Unknown action space: ", name));
}

}  // namespace looptool
