// A schedule's neighbors for a local search around it: the paths one tile factor away from its
// path of loop_nest actions (a loop_set policy's episode, or any path from the untiled start).
#ifndef LOOPTOOL_CLIENT_CPP_SEARCH_NEIGHBOR_PATHS_H_
#define LOOPTOOL_CLIENT_CPP_SEARCH_NEIGHBOR_PATHS_H_

#include <string>
#include <vector>

namespace looptool::client::internal {

// Paths one tile factor away from `path` (indices of `names`), the nearest first: each
// tile_L<p>_<n> on it with another factor of the same loop pointer (a tile_L<p>_<m> of `names`),
// by distance from n among that pointer's factors sorted, the nearest on either side first, at
// most two each side (for each distance, the path's tiles in order, the smaller factor first).
// Names that are not tile_L<p>_<n> (n digits alone: no sign), and indices outside `names`, are
// never replaced. (Leaving an action out added nothing in a benchmark: a policy search's first
// wave already holds its greedy episodes' prefixes.) An action another change makes
// inapplicable has no effect (the server skips it), so every path may be stepped.
std::vector<std::vector<int>> NeighborPaths(const std::vector<int>& path,
                                            const std::vector<std::string>& names);

}  // namespace looptool::client::internal

#endif  // LOOPTOOL_CLIENT_CPP_SEARCH_NEIGHBOR_PATHS_H_
