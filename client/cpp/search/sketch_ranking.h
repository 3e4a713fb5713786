// A sketch_value policy's ranking of the server's sketches: each sketch's resulting state, reached
// on a fork with no kernel timed, valued by the policy from its loops_tensor.
#ifndef LOOPTOOL_CLIENT_CPP_SEARCH_SKETCH_RANKING_H_
#define LOOPTOOL_CLIENT_CPP_SEARCH_SKETCH_RANKING_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cpp/policy.h"
#include "client/cpp/search/state_source.h"

namespace looptool::client::internal {

// A sketch (its actions, indices of the session's space) and the policy's value of the state it
// leads to.
struct ValuedSketch {
  std::vector<int> path;
  float value = 0;
};

// The server's sketches of `start`'s state, best value first (ties: the server's order); empty
// when the server has none for the nest. Calls end by `deadline` (DEADLINE_EXCEEDED); the
// sketch parser's and CheckFeatures' errors.
absl::StatusOr<std::vector<ValuedSketch>> RankSketches(const StateSource& start,
                                                       const Policy& policy,
                                                       absl::Time deadline);

}  // namespace looptool::client::internal

#endif  // LOOPTOOL_CLIENT_CPP_SEARCH_SKETCH_RANKING_H_
