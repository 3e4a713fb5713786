#include <algorithm>
#include <vector>

#include "client/cpp/search/algorithms.h"
#include "util/status_macros.h"

namespace looptool::client::internal {
namespace {

absl::Status Dfs(Searcher& s, const StateSource& source, const Node& node, int width, int depth) {
  if (depth == 0 || s.Expired()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::vector<Node> children, s.Expand(source, node));
  for (int i = 0; i < std::min<int>(width, children.size()) && !s.Expired(); ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<StateSource> child, s.Materialize(children[i]));
    RETURN_IF_ERROR(Dfs(s, *child, children[i], width, depth - 1));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status BeamDfs(Searcher& s, int width, int depth) {
  ASSIGN_OR_RETURN(std::unique_ptr<StateSource> root, s.Materialize(s.root()));
  return Dfs(s, *root, s.root(), width, depth);
}

absl::Status BeamBfs(Searcher& s, int width, int depth) {
  std::vector<Node> frontier = {s.root()};
  for (int d = 0; d < depth && !frontier.empty() && !s.Expired(); ++d) {
    std::vector<Node> next;
    for (const Node& node : frontier) {
      if (s.Expired()) break;
      ASSIGN_OR_RETURN(std::unique_ptr<StateSource> source, s.Materialize(node));
      ASSIGN_OR_RETURN(const std::vector<Node> children, s.Expand(*source, node));
      for (int i = 0; i < std::min<int>(width, children.size()); ++i) {
        next.push_back(children[i]);
      }
    }
    frontier = std::move(next);
  }
  return absl::OkStatus();
}

}  // namespace looptool::client::internal
