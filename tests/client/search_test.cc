// The search names: ParseSearch() reads each of the ten into its kind, beam width and greedy
// lookahead, SearchSpec::Name() gives the name back, and any other name is INVALID_ARGUMENT with
// the valid ones listed. (Running the searches is env_test's, against a real server.)
#include "client/cpp/search/search.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace looptool::client {
namespace {

using Kind = SearchSpec::Kind;

TEST(ParseSearch, ReadsKindWidthAndLookahead) {
  struct Case {
    std::string name;
    Kind kind;
    int width, lookahead;
  };
  const std::vector<Case> cases = {
      {"greedy1", Kind::kGreedy, 0, 1},   {"greedy2", Kind::kGreedy, 0, 2},
      {"beam2dfs", Kind::kBeamDfs, 2, 0}, {"beam4dfs", Kind::kBeamDfs, 4, 0},
      {"beam2bfs", Kind::kBeamBfs, 2, 0}, {"beam4bfs", Kind::kBeamBfs, 4, 0},
      {"random", Kind::kRandom, 0, 0},    {"evolution", Kind::kEvolution, 0, 0},
      {"policy", Kind::kPolicy, 0, 0},    {"policy_guided", Kind::kPolicyGuided, 0, 0}};
  std::vector<std::string> names;
  for (const Case& c : cases) {
    absl::StatusOr<SearchSpec> spec = ParseSearch(c.name);
    ASSERT_TRUE(spec.ok()) << c.name << ": " << spec.status();
    EXPECT_EQ(spec->kind, c.kind) << c.name;
    EXPECT_EQ(spec->width, c.width) << c.name;
    EXPECT_EQ(spec->lookahead, c.lookahead) << c.name;
    EXPECT_EQ(spec->Name(), c.name);
    names.push_back(c.name);
  }
  EXPECT_EQ(SearchAlgorithms(), names);
  EXPECT_EQ(SearchOptions().search.Name(), "evolution");  // the default
}

TEST(ParseSearch, UnknownNamesListTheValidOnes) {
  for (const char* name : {"beam3", "", "Greedy1", "beam4dfs ", "beam8dfs"}) {
    absl::StatusOr<SearchSpec> spec = ParseSearch(name);
    ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(spec.status().message(),
              absl::StrCat("unknown search '", name,
                           "': use greedy1, greedy2, beam2dfs, beam4dfs, beam2bfs, beam4bfs, random, "
                           "evolution, policy or policy_guided"));
  }
}

}  // namespace
}  // namespace looptool::client
