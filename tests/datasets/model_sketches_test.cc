// Every layer of the model datasets gets starting schedules, and they are right: for
// each program, the sketches for both vector units compile at the layer's full size (the code
// generator takes every access the models have: strided, 1x1, depthwise, GEMV, batched
// matmuls), and the same program with its sizes cut to at most 10 (window sizes kept) has
// sketches whose kernels compute exactly what the interpreter computes on each ISA the host runs.
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backend/actions/apply.h"
#include "backend/actions/sketches.h"
#include "backend/codegen/compile.h"
#include "backend/ir/parser.h"
#include "datasets/catalog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/codegen/jit_check.h"

namespace looptool::datasets {
namespace {

LoopTree Applied(const LoopTree& initial, const Sketch& sketch) {
  LoopTree tree = initial;
  for (const Action& a : sketch.actions) {
    ActionResult r = Apply(tree, a, Limits{});
    EXPECT_TRUE(r.had_effect()) << sketch.description;
    tree = std::move(r.tree);
  }
  return tree;
}

// The program with every size above 10 cut to 10 (r and s, the windows, kept).
std::string Small(const std::string& program) {
  std::vector<std::string> lines = absl::StrSplit(program, '\n', absl::SkipEmpty());
  std::vector<std::string> sizes;
  for (absl::string_view kv : absl::StrSplit(lines.back(), ' ', absl::SkipEmpty())) {
    std::vector<std::string> p = absl::StrSplit(kv, '=');
    int64_t v = 0;
    EXPECT_TRUE(p.size() == 2 && absl::SimpleAtoi(p[1], &v)) << kv;
    if (p[0] != "r" && p[0] != "s") v = std::min<int64_t>(v, 10);
    sizes.push_back(absl::StrCat(p[0], "=", v));
  }
  lines.back() = absl::StrJoin(sizes, " ");
  return absl::StrJoin(lines, "\n");
}

TEST(ModelSketches, EveryLayerHasSketchesThatCompileAndVerify) {
  int layers = 0, compiled = 0, verified = 0;
  std::vector<std::string> without;  // layers with no sketch for some target
  for (const CatalogDataset& d : Catalog()) {
    if (!d.evaluation_only) continue;
    for (const CatalogBenchmark& b : d.benchmarks) {
      SCOPED_TRACE(absl::StrCat(d.name, "/", b.name));
      ++layers;
      auto full = ParseProgram(b.program, Limits{});
      ASSERT_TRUE(full.ok()) << full.status();
      auto small = ParseProgram(Small(b.program), Limits{});
      ASSERT_TRUE(small.ok()) << small.status();
      const LoopTree full_tree = LoopTree::Initial(std::make_shared<const Program>(*full));
      const LoopTree small_tree = LoopTree::Initial(std::make_shared<const Program>(*small));
      for (Isa target : {Isa::kAvx512, Isa::kAvx2}) {
        SketchOptions options;
        options.target = target;
        const std::vector<Sketch> sketches = LoopNestSketches(full_tree, Limits{}, options);
        if (sketches.empty()) without.push_back(absl::StrCat(b.name, " ", Traits(target).name));
        KernelCompiler compiler(target);
        for (const Sketch& sketch : sketches) {
          EXPECT_TRUE(compiler.CompileCode(Applied(full_tree, sketch)).ok()) << sketch.description;
          ++compiled;
        }
        for (const Sketch& sketch : LoopNestSketches(small_tree, Limits{}, options)) {
          const LoopTree tree = Applied(small_tree, sketch);
          for (Isa isa : testing::HostIsas()) {
            ASSERT_EQ(testing::CompareWithInterpreter(tree, isa), "") << sketch.description;
            ++verified;
          }
        }
      }
    }
  }
  EXPECT_EQ(layers, 18 + 37 + 5);
  // No gaps: attention scores (K[h,j,d] read along j) and the global pools (I[c,h,w] along c)
  // get fold blocks with the reduction vectorized.
  EXPECT_THAT(without, ::testing::IsEmpty());
  EXPECT_GT(compiled, layers * 2 * 4);
  EXPECT_GT(verified, layers * 2);
}

// Every program of the hand-written catalog (convolutions, depthwise, pools, reductions, GEMV,
// transposes and layout changes, broadcasts, concatenations, elementwise sums, matmuls with a
// relu) has starting schedules for both vector units.
TEST(ModelSketches, EveryCatalogProgramHasSketches) {
  int programs = 0;
  std::vector<std::string> without;
  for (const CatalogDataset& d : Catalog()) {
    if (d.evaluation_only) continue;
    for (const CatalogBenchmark& b : d.benchmarks) {
      auto p = ParseProgram(b.program, Limits{});
      ASSERT_TRUE(p.ok()) << p.status();
      const LoopTree tree = LoopTree::Initial(std::make_shared<const Program>(*p));
      ++programs;
      for (Isa target : {Isa::kAvx512, Isa::kAvx2}) {
        SketchOptions options;
        options.target = target;
        if (LoopNestSketches(tree, Limits{}, options).empty()) {
          without.push_back(absl::StrCat(d.name, "/", b.name, " ", Traits(target).name));
        }
      }
    }
  }
  EXPECT_GE(programs, 40);
  EXPECT_THAT(without, ::testing::IsEmpty());
}

}  // namespace
}  // namespace looptool::datasets
