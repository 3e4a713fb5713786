#include <optional>
#include <utility>
#include <vector>

#include "client/cpp/search/algorithms.h"
#include "util/status_macros.h"

namespace looptool::client::internal {

absl::Status Greedy(Searcher& s, int lookahead, int depth) {
  Node current = s.root();
  for (int step = 0; step < depth && !s.Expired(); ++step) {
    ASSIGN_OR_RETURN(std::unique_ptr<StateSource> source, s.Materialize(current));
    // All paths of up to `lookahead` actions, level by level; remember each one's first child.
    std::vector<std::pair<Node, Node>> level;  // (node, first-level ancestor)
    // Lookahead revisits states seen from the previous position: include them (cached).
    ASSIGN_OR_RETURN(std::vector<Node> children,
                     s.Expand(*source, current, SeenChildren::kInclude));
    for (Node& c : children) level.emplace_back(c, c);
    std::optional<std::pair<Node, Node>> best;
    for (int d = 1; d <= lookahead; ++d) {
      std::vector<std::pair<Node, Node>> next;
      for (auto& [node, first] : level) {
        if (!best || node.gflops > best->first.gflops) best = std::make_pair(node, first);
        if (d == lookahead || s.Expired()) continue;
        ASSIGN_OR_RETURN(std::unique_ptr<StateSource> at, s.Materialize(node));
        ASSIGN_OR_RETURN(std::vector<Node> grand, s.Expand(*at, node, SeenChildren::kInclude));
        for (Node& g : grand) next.emplace_back(g, first);
      }
      level = std::move(next);
    }
    if (!best || best->first.gflops <= current.gflops) break;  // nothing improves: stop
    current = best->second;
  }
  return absl::OkStatus();
}

}  // namespace looptool::client::internal
