#include <random>
#include <vector>

#include "client/cpp/search/algorithms.h"
#include "util/status_macros.h"

namespace looptool::client::internal {

absl::Status RandomWalks(Searcher& s, int depth, uint64_t seed) {
  std::mt19937_64 rng(seed);
  if (LegalActions(s.root()).empty()) return absl::OkStatus();  // nothing to try
  while (!s.Expired()) {
    ASSIGN_OR_RETURN(std::unique_ptr<StateSource> source, s.Materialize(s.root()));
    Node node = s.root();
    for (int d = 0; d < depth && !s.Expired(); ++d) {
      const std::vector<int> legal = LegalActions(node);
      if (legal.empty()) break;
      ASSIGN_OR_RETURN(Reached next, s.Advance(*source, node, legal[rng() % legal.size()]));
      node = std::move(next.node);  // a state seen before: walk on from it, not measured again
    }
  }
  return absl::OkStatus();
}

}  // namespace looptool::client::internal
