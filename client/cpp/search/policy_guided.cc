#include <algorithm>
#include <vector>

#include "client/cpp/search/algorithms.h"
#include "client/cpp/search/policy_fit.h"
#include "util/status_macros.h"

namespace looptool::client::internal {

absl::Status PolicyGuided(Searcher& s, const Policy& policy, int width, int depth) {
  RETURN_IF_ERROR(CheckFeatures(policy, s.root().features));
  const auto ranked = [&policy](const Node& node) {
    return RankActions(policy.Scores(node.features), node.mask, policy.num_actions());
  };
  std::vector<Node> frontier;  // measured, not yet expanded
  {
    ASSIGN_OR_RETURN(std::unique_ptr<StateSource> source, s.Materialize(s.root()));
    Node node = s.root();
    for (int d = 0; d < depth && !s.Expired(); ++d) {
      const std::vector<int> actions = ranked(node);
      if (actions.empty()) break;
      ASSIGN_OR_RETURN(Reached next, s.Advance(*source, node, actions.front()));
      node = std::move(next.node);
      if (next.is_new) frontier.push_back(node);
    }
  }
  frontier.push_back(s.root());
  const size_t max_path = 2 * static_cast<size_t>(depth);
  while (!frontier.empty() && !s.Expired()) {
    auto best = std::max_element(frontier.begin(), frontier.end(), [](const Node& a, const Node& b) {
      return a.gflops < b.gflops;
    });
    const Node parent = std::move(*best);
    frontier.erase(best);
    if (parent.path.size() >= max_path) continue;
    ASSIGN_OR_RETURN(std::unique_ptr<StateSource> source, s.Materialize(parent));
    const std::vector<int> actions = ranked(parent);
    for (int i = 0; i < std::min<int>(width, actions.size()) && !s.Expired(); ++i) {
      ASSIGN_OR_RETURN(std::unique_ptr<StateSource> child, source->Fork());
      ASSIGN_OR_RETURN(Reached next, s.Advance(*child, parent, actions[i]));
      if (next.is_new) frontier.push_back(std::move(next.node));
    }
  }
  return absl::OkStatus();
}

}  // namespace looptool::client::internal
