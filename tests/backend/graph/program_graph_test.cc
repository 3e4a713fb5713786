// The paper's graph of the initial matmul: exact nodes and edges, and its node-link JSON.
#include "backend/graph/program_graph.h"

#include <nlohmann/json.hpp>

#include "backend/graph/node_link_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/schedule/initial_tree.h"

namespace looptool {
namespace {

using ::testing::UnorderedElementsAre;

using testing::Initial;

// "<source label> -<type>[stride]-> <target label>" for every edge.
std::vector<std::string> Edges(const ProgramGraph& g) {
  std::vector<std::string> out;
  for (auto e : boost::make_iterator_range(boost::edges(g))) {
    const GraphEdge& ed = g[e];
    std::string type = ed.type == GraphEdge::Type::kNest     ? "nest"
                       : ed.type == GraphEdge::Type::kAccess ? "access"
                                                             : "flow";
    if (ed.type == GraphEdge::Type::kAccess) type += std::to_string(ed.stride);
    out.push_back(g[boost::source(e, g)].label + " -" + type + "-> " +
                  g[boost::target(e, g)].label);
  }
  return out;
}

TEST(ProgramGraph, InitialMatmul) {
  const ProgramGraph g = BuildProgramGraph(Initial("C[m,n] += A[m,k] * B[k,n]; m=4 n=6 k=8"));
  EXPECT_EQ(boost::num_vertices(g), 7u + 3u + 1u);  // 4 loops, 3 leaves, C A B, acc1
  EXPECT_THAT(
      Edges(g),
      UnorderedElementsAre(
          "m in 4 -nest-> k in 8", "k in 8 -nest-> n in 6",
          "n in 6 -nest-> %2[m, k, n] <- multiply(%0, %1)", "n in 6 -nest-> %3[m, n] <- add(%2)",
          "m in 4 -nest-> n in 6", "n in 6 -nest-> %4[m, n] <- write(%3)",
          "m in 4 -access8-> A", "k in 8 -access1-> A", "k in 8 -access6-> B",
          "n in 6 -access1-> B", "n in 6 -access1-> acc1",
          "A -flow-> %2[m, k, n] <- multiply(%0, %1)", "B -flow-> %2[m, k, n] <- multiply(%0, %1)",
          "%2[m, k, n] <- multiply(%0, %1) -flow-> acc1", "%3[m, n] <- add(%2) -flow-> acc1",
          "acc1 -flow-> %4[m, n] <- write(%3)", "%4[m, n] <- write(%3) -flow-> C"));
}

TEST(ProgramGraph, TreeGraphHasOnlyLoopsAndLeaves) {
  const ProgramGraph g = BuildTreeGraph(Initial("C[m,n] += A[m,k] * B[k,n]; m=4 n=6 k=8"));
  EXPECT_EQ(boost::num_vertices(g), 7u);
  EXPECT_EQ(boost::num_edges(g), 6u);
}

TEST(NodeLinkJson, IsNetworkxMultiDiGraphNodeLinkData) {
  const auto doc = nlohmann::json::parse(
      NodeLinkJson(BuildProgramGraph(Initial("C[m,n] += A[m,k] * B[k,n]; m=4 n=6 k=8"))));
  EXPECT_EQ(doc["directed"], true);
  EXPECT_EQ(doc["multigraph"], true);
  ASSERT_EQ(doc["nodes"].size(), 11u);
  EXPECT_EQ(doc["nodes"][0]["id"], 0);
  EXPECT_EQ(doc["nodes"][0]["type"], "loop");
  EXPECT_EQ(doc["nodes"][0]["var"], "m");
  EXPECT_EQ(doc["nodes"][0]["cursor"], true);
  EXPECT_EQ(doc["nodes"][0]["features"], nlohmann::json({0, 4, 0, 1, 0, 0, 1}));
  EXPECT_EQ(doc["nodes"][7]["type"], "data");
  EXPECT_EQ(doc["nodes"][7]["shape"], nlohmann::json({4, 6}));
  EXPECT_EQ(doc["links"].size(), 17u);
  for (const auto& l : doc["links"]) {
    EXPECT_TRUE(l.contains("source") && l.contains("target") && l.contains("key"));
  }
}

}  // namespace
}  // namespace looptool
