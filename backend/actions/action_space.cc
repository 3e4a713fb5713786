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

const std::vector<ActionSpace>& AllActionSpaces() {
  static const std::vector<ActionSpace>* spaces =
      new std::vector<ActionSpace>{LoopToolActionSpace(), LoopTuneActionSpace()};
  return *spaces;
}

absl::StatusOr<ActionSpace> FindActionSpace(absl::string_view name) {
  for (const ActionSpace& s : AllActionSpaces()) {
    if (s.name == name) return s;
  }
  return absl::InvalidArgumentError(absl::StrCat("Unknown action space: ", name));
}

}  // namespace looptool
