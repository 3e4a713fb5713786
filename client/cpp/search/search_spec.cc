#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cpp/search/search.h"

namespace looptool::client {
namespace {

// The searches by name, in the order of the usage text.
const std::vector<std::pair<std::string, SearchSpec>>& Searches() {
  using Kind = SearchSpec::Kind;
  static const auto* const searches = new std::vector<std::pair<std::string, SearchSpec>>{
      {"greedy1", {Kind::kGreedy, 0, 1}},   {"greedy2", {Kind::kGreedy, 0, 2}},
      {"beam2dfs", {Kind::kBeamDfs, 2, 0}}, {"beam4dfs", {Kind::kBeamDfs, 4, 0}},
      {"beam2bfs", {Kind::kBeamBfs, 2, 0}}, {"beam4bfs", {Kind::kBeamBfs, 4, 0}},
      {"random", {Kind::kRandom, 0, 0}},    {"evolution", {Kind::kEvolution, 0, 0}},
      {"policy", {Kind::kPolicy, 0, 0}},    {"policy_guided", {Kind::kPolicyGuided, 0, 0}}};
  return *searches;
}

}  // namespace

std::string SearchSpec::Name() const {
  switch (kind) {
    case Kind::kGreedy:
      return absl::StrCat("greedy", lookahead);
    case Kind::kBeamDfs:
      return absl::StrCat("beam", width, "dfs");
    case Kind::kBeamBfs:
      return absl::StrCat("beam", width, "bfs");
    case Kind::kRandom:
      return "random";
    case Kind::kEvolution:
      return "evolution";
    case Kind::kPolicy:
      return "policy";
    case Kind::kPolicyGuided:
      return "policy_guided";
  }
  return "unknown";
}

absl::StatusOr<SearchSpec> ParseSearch(absl::string_view name) {
  for (const auto& [n, spec] : Searches()) {
    if (n == name) return spec;
  }
  std::vector<std::string> names = SearchAlgorithms();
  const std::string last = names.back();
  names.pop_back();
  return absl::InvalidArgumentError(absl::StrCat("unknown search '", name, "': use ",
                                                 absl::StrJoin(names, ", "), " or ", last));
}

const std::vector<std::string>& SearchAlgorithms() {
  static const auto* const names = [] {
    auto* names = new std::vector<std::string>;
    for (const auto& [n, spec] : Searches()) names->push_back(n);
    return names;
  }();
  return *names;
}

}  // namespace looptool::client
