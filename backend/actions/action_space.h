// ActionSpace: a named, ordered list of actions; an agent's action index is a position in it.
//   loop_tool: up, down, swap_up, swap_down, split_2 ... split_1024, merge, unroll, vectorize
//   loop_tune: up, down, swap_up, swap_down, split_4, split_8, split_16 (LoopTune's released set)
//   loop_nest: no cursor; every action names its loop by a level pointer (after MLIR-RL's
//     multi-discrete space: transformation x level x parameter), so a register tile of 6 rows is
//     one action and a tiling a handful: tile_L<p>_<n> for n in LoopNestTileSizes(),
//     interchange_L<p>_L<q>, unroll_L<p>, vectorize_L<p>, merge_L<p>, p and q < 16, then
//     stream_L<p> and fold_L<p> (appended in that order, so the 560 before them keep their
//     indices).
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
const ActionSpace& LoopNestActionSpace();
// loop_nest's tile sizes, in its parameter order: 2 3 4 5 6 7 8 12 16 24 32 48 64 96 128 256.
const std::vector<int>& LoopNestTileSizes();

// loop_nest's multi-discrete form: the flat index of (transformation, level, parameter), each in
// 0..15 with transformation 0 tile (parameter: the index into LoopNestTileSizes()),
// 1 interchange (parameter: the target level), 2 unroll, 3 vectorize, 4 merge, 5 stream, 6 fold
// (parameter ignored). Flat order: tile 16*level+parameter, interchange 256+16*level+parameter,
// unroll 512+level, vectorize 528+level, merge 544+level, stream 560+level, fold 576+level.
// INVALID_ARGUMENT
// "loop_nest action (t, l, p): <which> is out of range ..." otherwise.
absl::StatusOr<int64_t> LoopNestIndex(int64_t transformation, int64_t level, int64_t parameter);

// The three spaces, loop_tool first (the order GetSpaces lists them in).
const std::vector<ActionSpace>& AllActionSpaces();
// INVALID_ARGUMENT "Unknown action space: <name>".
absl::StatusOr<ActionSpace> FindActionSpace(absl::string_view name);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ACTIONS_ACTION_SPACE_H_
