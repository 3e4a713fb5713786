// A cursor action sequence (loop_tool's or loop_tune's names, from a state whose cursor is on the
// first loop) as loop_nest's level-pointer actions with the same effect on the schedule: the
// cursor's walk position c is tracked, split_N at c becomes tile_L<c>_N, swap_down
// interchange_L<c>_L<c+1>, swap_up interchange_L<c>_L<c-1>, unroll/vectorize unroll_L<c> /
// vectorize_L<c>; up and down only move c. Stops at the first action it cannot translate (merge,
// whose cursor lands where the names do not tell; a move above the first loop).
#ifndef LOOPTOOL_CLIENT_CPP_SEARCH_CURSOR_TRANSLATION_H_
#define LOOPTOOL_CLIENT_CPP_SEARCH_CURSOR_TRANSLATION_H_

#include <string>
#include <vector>

namespace looptool::client {

std::vector<std::string> CursorToLevelActions(const std::vector<std::string>& cursor_actions);

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_SEARCH_CURSOR_TRANSLATION_H_
