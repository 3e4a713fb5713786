// Every dataset's benchmarks resolve by URI, parse under the server's default caps, fit its loop
// limit, and compile to a kernel that computes what the reference interpreter computes.
#include "datasets/registry.h"

#include <set>

#include "backend/codegen/isa.h"
#include "backend/ir/parser.h"
#include "backend/schedule/loop_tree.h"
#include "backend/ir/limits.h"
#include "datasets/catalog.h"
#include "datasets/matmul_range.h"
#include "datasets/model_datasets.h"
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
                                            "elementwise-v0", "mm_relu-v0", "bert_base-v0",
                                            "mobilenet_v2-v0", "resnet18-v0"));
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
  // The model datasets are for evaluation only.
  for (const char* model : {"resnet18-v0", "mobilenet_v2-v0", "bert_base-v0"}) {
    EXPECT_TRUE(BenchmarkUris(model, Split::kTrain)->empty()) << model;
    EXPECT_EQ(BenchmarkUris(model, Split::kTest)->size(), BenchmarkNames(model).size()) << model;
  }
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

// The model datasets as compiled in: ResNet-18's 18 programs stand for its 31 layers (21
// convolutions and linear layers, 8 residual adds, the max pool and the global pool), the stem
// strided as the model states it.
TEST(Registry, ModelDatasetsCarryWeightsAndReferences) {
  const CatalogDataset* resnet = nullptr;
  for (const CatalogDataset& d : Catalog()) {
    if (d.name == "resnet18-v0") resnet = &d;
  }
  ASSERT_NE(resnet, nullptr);
  EXPECT_TRUE(resnet->evaluation_only);
  ASSERT_EQ(resnet->benchmarks.size(), 18u);
  int layers = 0;
  for (const CatalogBenchmark& b : resnet->benchmarks) layers += b.weight;
  EXPECT_EQ(layers, 31);
  const CatalogBenchmark& stem = resnet->benchmarks.front();
  EXPECT_EQ(stem.name, "conv_c3_k64_112x112_7x7_s2");
  EXPECT_EQ(stem.weight, 1);
  EXPECT_EQ(stem.program,
            "O[k,h,w] += I[c, 2*h+r, 2*w+s] * W[k,c,r,s]\nk=64 h=112 w=112 c=3 r=7 s=7\n");
  EXPECT_EQ(stem.reference,
            "conv2d input=1x3x229x229 weight=64x3x7x7 stride=2 dilation=1 groups=1");
  EXPECT_EQ(resnet->benchmarks[2].name, "conv_c64_k64_56x56_3x3_s1");
  EXPECT_EQ(resnet->benchmarks[2].weight, 4);
}

TEST(ModelDatasets, BadFilesAreRefusedWithTheLine) {
  EXPECT_EQ(ParseModelDataset("x-v0", "# x-v0: a model\nO[i] = I[i]\n").status().message(),
            "model dataset x-v0 line 2: a program line before the first '@' header");
  EXPECT_EQ(ParseModelDataset("x-v0", "@ a 0 add\nO[i] = I[i]\ni=4\n").status().message(),
            "model dataset x-v0 line 1: expected '@ <name> <weight> <reference>'");
  EXPECT_EQ(ParseModelDataset("x-v0", "@ a 1\n@ b 1\nO[i] = I[i]\ni=4\n").status().message(),
            "model dataset x-v0 line 2: the benchmark before has no program");
  EXPECT_EQ(ParseModelDataset("x-v0", "@ a 2 add\n").status().message(),
            "model dataset x-v0: the last benchmark has no program");
  EXPECT_EQ(ParseModelDataset("x-v0", "# only\n").status().message(),
            "model dataset x-v0 has no benchmark");
  auto ok = ParseModelDataset("x-v0", "# x-v0: a model\n@ a 2 add input=4\nO[i] = I[i]\ni=4\n");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->description,
            "Every distinct layer of a model; weights = layers per program; for evaluation only");
  EXPECT_EQ(ok->benchmarks[0].program, "O[i] = I[i]\ni=4\n");
  EXPECT_EQ(ok->benchmarks[0].reference, "add input=4");
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
