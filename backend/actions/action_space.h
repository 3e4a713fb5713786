// ActionSpace: a named, ordered list of actions; an agent's action index is a position in it.
//   loop_tool: up, down, swap_up, swap_down, split_2 ... split_1024, merge, unroll, vectorize
//   loop_tune: up, down, swap_up, swap_down, split_4, split_8, split_16 (LoopTune's released set)
#ifndef LOOPTOOL_BACKEND_ACTIONS_ACTION_SPACE_H_
#define LOOPTOOL_BACKEND_ACTIONS_ACTION_SPACE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/actions/action.h"

namespace looptool {

struct ActionSpace {
  std::string name;
  std::vector<Action> actions;

  int size() const { return static_cast<int>(actions.size()); }
  std::vector<std::string> Names() const;
  // INVALID_ARGUMENT "Action index N is out of range for action space <name> (0..size-1)".
  absl::StatusOr<Action> At(int64_t index) const;
  // Position of the action, or -1 when the space does not have it.
  int IndexOf(const Action& action) const;
};

const ActionSpace& LoopToolActionSpace();
const ActionSpace& LoopTuneActionSpace();
// Both spaces, loop_tool first (the order GetSpaces lists them in).
const std::vector<ActionSpace>& AllActionSpaces();
// INVALID_ARGUMENT "Unknown action space: <name>".
absl::StatusOr<ActionSpace> FindActionSpace(absl::string_view name);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ACTIONS_ACTION_SPACE_H_
