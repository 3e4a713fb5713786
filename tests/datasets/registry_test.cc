// Every dataset's benchmarks resolve by URI, parse under the server's default caps, fit its loop
// limit, and compile to a kernel that computes what the reference interpreter computes.
#include "datasets/registry.h"

#include <set>

#include "backend/codegen/isa.h"
#include "backend/ir/parser.h"
#include "backend/schedule/loop_tree.h"
#include "backend/ir/limits.h"
#include "datasets/matmul_range.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/codegen/jit_check.h"

namespace looptool::datasets {
namespace {

TEST(Registry, ListsEveryDatasetWithItsSize) {
  std::vector<std::string> names;
  for (const DatasetInfo& d : Datasets()) {
    names.push_back(d.name);
    EXPECT_EQ(d.size, static_cast<int64_t>(BenchmarkNames(d.name).size())) << d.name;
    EXPECT_FALSE(d.description.empty());
  }
  EXPECT_THAT(names, ::testing::ElementsAre("mm64_256_16_range-v0", "matmul_offgrid-v0",
                                            "conv2d-v0", "pool-v0", "reduce-v0", "transpose-v0",
                                            "elementwise-v0", "mm_relu-v0"));
  EXPECT_EQ(BenchmarkNames("mm64_256_16_range-v0").size(), 2197u);
  EXPECT_TRUE(BenchmarkNames("no-such-dataset").empty());
}

// The splits as the server serves them: train and test partition a dataset, in its order; the
// off-grid matmuls are evaluation only.
TEST(Registry, SplitsPartitionEachDataset) {
  for (const DatasetInfo& d : Datasets()) {
    const std::vector<std::string> all = *BenchmarkUris(d.name, Split::kAll);
    const std::vector<std::string> train = *BenchmarkUris(d.name, Split::kTrain);
    const std::vector<std::string> test = *BenchmarkUris(d.name, Split::kTest);
    EXPECT_EQ(static_cast<int64_t>(all.size()), d.size) << d.name;
    EXPECT_EQ(train.size() + test.size(), all.size()) << d.name;
    size_t ti = 0, si = 0;  // both subsequences of `all`, together all of it
    for (const std::string& uri : all) {
      if (ti < train.size() && train[ti] == uri) {
        ++ti;
      } else {
        ASSERT_LT(si, test.size()) << uri;
        EXPECT_EQ(test[si++], uri);
      }
    }
  }
  const std::vector<std::string> offgrid = *BenchmarkUris(kMatmulOffGridDataset, Split::kTest);
  ASSERT_EQ(offgrid.size(), 12u);
  EXPECT_EQ(offgrid.front(), "benchmark://matmul_offgrid-v0/mm37_61_97");
  EXPECT_EQ(*ResolveUri(offgrid.front()), "C[m,n] += A[m,k] * B[k,n]\nm=37 n=61 k=97\n");
  EXPECT_TRUE(BenchmarkUris(kMatmulOffGridDataset, Split::kTrain)->empty());
  EXPECT_FALSE(ResolveUri("benchmark://matmul_offgrid-v0/mm64_64_64").has_value());
  EXPECT_EQ(BenchmarkUris("nope-v0", Split::kAll).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ParseSplit("test").value(), Split::kTest);
  EXPECT_EQ(ParseSplit("dev").status().message(), "unknown split 'dev': use all, train or test");
}

TEST(Registry, ResolvesUris) {
  EXPECT_EQ(*ResolveUri("benchmark://mm64_256_16_range-v0/mm112_208_256"),
            "C[m,n] += A[m,k] * B[k,n]\nm=112 n=208 k=256\n");
  EXPECT_EQ(*ResolveUri("benchmark://mm64_256_16_range-v0/mm8_8_8"),
            "C[m,n] += A[m,k] * B[k,n]\nm=8 n=8 k=8\n");  // any shape of the pattern
  EXPECT_EQ(*ResolveUri("benchmark://reduce-v0/rowsum_1024_1024"), "O[r] += I[r,c]\nr=1024 c=1024\n");
  EXPECT_FALSE(ResolveUri("benchmark://reduce-v0/nope").has_value());
  EXPECT_FALSE(ResolveUri("benchmark://mm64_256_16_range-v0/mm1_2").has_value());
  EXPECT_FALSE(ResolveUri("https://reduce-v0/rowsum_1024_1024").has_value());
  EXPECT_EQ(Uri("pool-v0", "x"), "benchmark://pool-v0/x");
}

TEST(Registry, EveryCatalogBenchmarkParsesFitsAndCompilesCorrectly) {
  const Limits limits;
  std::set<std::string> seen;
  for (const DatasetInfo& d : Datasets()) {
    if (d.name == "mm64_256_16_range-v0") continue;
    for (const std::string& name : BenchmarkNames(d.name)) {
      EXPECT_TRUE(seen.insert(name).second) << "duplicate name " << name;
      const std::optional<std::string> text = ResolveUri(Uri(d.name, name));
      ASSERT_TRUE(text.has_value()) << name;
      absl::StatusOr<Program> program = ParseProgram(*text, limits);
      ASSERT_TRUE(program.ok()) << name << ": " << program.status();
      const LoopTree tree = LoopTree::Initial(std::make_shared<const Program>(*program));
      EXPECT_LE(tree.num_loops(), limits.max_loops) << name;
      EXPECT_EQ(testing::CompareWithInterpreter(tree, DetectIsa()), "") << name;
    }
  }
}

}  // namespace
}  // namespace looptool::datasets
