// A schedule's neighbors for a local search around it: the paths one tile factor away from its
// path of loop_nest actions (a loop_set policy's episode, or any path from the untiled start),
// or with a factor traded between two of its tiles.
#ifndef LOOPTOOL_CLIENT_CPP_SEARCH_NEIGHBOR_PATHS_H_
#define LOOPTOOL_CLIENT_CPP_SEARCH_NEIGHBOR_PATHS_H_

#include <string>
#include <vector>

namespace looptool::client::internal {

// Paths one tile factor away from `path` (indices of `names`), and paths that trade a factor
// between two of its tiles, the nearest first. For d = 1, then d = 2:
//   1. each tile_L<p>_<n> on it with another factor of the same loop pointer (a tile_L<p>_<m> of
//      `names`) d places from n among that pointer's factors sorted, the smaller first (for each
//      d, the path's tiles in order);
//   2. for each two tiles on it, tile_L<p>_<n> before tile_L<q>_<m> (in path order), the d-th
//      nearest factor a of p below n and the d-th above it for which tile_L<q>_<n*m/a> is in
//      `names`, in that order: both changed at once, their product kept (a register block
//      reshaped, k 16 x w 16 into k 8 x w 32, which one factor changed at a time passes only
//      through blocks of half or twice the accumulators).
// Names that are not tile_L<p>_<n> (n digits alone: no sign), and indices outside `names`, are
// never replaced. (Leaving an action out added nothing in a benchmark: a policy search's first
// wave already holds its greedy episodes' prefixes.) An action another change makes
// inapplicable has no effect (the server skips it), so every path may be stepped.
std::vector<std::vector<int>> NeighborPaths(const std::vector<int>& path,
                                            const std::vector<std::string>& names);

}  // namespace looptool::client::internal

#endif  // LOOPTOOL_CLIENT_CPP_SEARCH_NEIGHBOR_PATHS_H_
