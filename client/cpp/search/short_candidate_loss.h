// How unlikely a policy search counts the shorter candidates of its first wave (the start, the
// start with its marks, the states its greedy episodes passed through): the loss its cost model's
// ranking charges them, in the policy's nats below its greedy episode.
#ifndef LOOPTOOL_CLIENT_CPP_SEARCH_SHORT_CANDIDATE_LOSS_H_
#define LOOPTOOL_CLIENT_CPP_SEARCH_SHORT_CANDIDATE_LOSS_H_

#include <vector>

namespace looptool::client::internal {

// The `rank`-th smallest of `losses` (the first wave's episodes'; rank counted from 1, a rank
// below 1 counting as 1), or the largest where `losses` holds fewer than `rank`; 0 where it is
// empty. A search passes --policy_candidates as `rank`, so the short candidates rank where
// --search=policy (whose wave is that long) would rank them, whatever the wave's size: as the
// least likely of policy_guided's hundreds, the cost model's loss term sank them below where its
// timings stop.
double ShortCandidateLoss(std::vector<double> losses, int rank);

}  // namespace looptool::client::internal

#endif  // LOOPTOOL_CLIENT_CPP_SEARCH_SHORT_CANDIDATE_LOSS_H_
