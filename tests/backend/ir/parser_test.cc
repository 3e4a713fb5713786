// Every primitive of the LoopTune paper parses to the expected Program, and prints back the same.
#include "backend/ir/parser.h"

#include "backend/ir/printer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace looptool {
namespace {

using ::testing::ElementsAre;

Program MustParse(const std::string& text) {
  auto p = ParseProgram(text, Limits{});
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

TEST(Parser, MatmulHasLoopTuneShapesAndLoopOrder) {
  Program p = MustParse("C[m,n] += A[m,k] * B[k,n]\nm=112 n=208 k=256");
  ASSERT_EQ(p.vars().size(), 3u);
  EXPECT_EQ(p.var(0).name, "m");
  EXPECT_EQ(p.var(1).name, "n");
  EXPECT_EQ(p.var(2).name, "k");
  EXPECT_THAT(p.tensor(0).shape, ElementsAre(112, 208));
  EXPECT_THAT(p.tensor(1).shape, ElementsAre(112, 256));
  EXPECT_THAT(p.tensor(2).shape, ElementsAre(256, 208));
  EXPECT_TRUE(p.tensor(0).is_output);
  EXPECT_FALSE(p.tensor(1).is_output);
  EXPECT_THAT(p.LoopVars(0), ElementsAre(0, 2, 1));  // m, k, n
  EXPECT_THAT(p.OutputVars(0), ElementsAre(0, 1));
  EXPECT_TRUE(p.IsReductionVar(0, 2));
  EXPECT_FALSE(p.IsReductionVar(0, 0));
  EXPECT_EQ(p.Flops(), 2 * 112 * 208 * 256);
  EXPECT_EQ(p.ElementStride(p.statement(0).inputs[0], 0), 256);  // A along m
  EXPECT_EQ(p.ElementStride(p.statement(0).inputs[1], 2), 208);  // B along k
  EXPECT_EQ(p.ElementStride(p.statement(0).inputs[1], 0), 0);    // B along m
  EXPECT_THAT(p.InputTensors(), ElementsAre(1, 2));
}

TEST(Parser, EveryPrimitiveRoundTrips) {
  const char* programs[] = {
      "C[m, n] += A[m, k] * B[k, n]\nm=64 n=48 k=32\n",             // matmul
      "y[m] += A[m, k] * x[k]\nm=64 k=80\n",                        // GEMV
      "y[n] += x[k] * A[k, n]\nn=64 k=80\n",                        // GEVM
      "O[r, c] += I[r + kr, c + kc] * W[kr, kc]\nr=30 c=30 kr=3 kc=3\n",  // convolution
      "O[r, c] max= I[2*r + kr, 2*c + kc]\nr=16 c=16 kr=3 kc=3\n",  // strided max pooling
      "s[m] += A[m, n]\nm=32 n=100\n",                              // row reduction
      "t[] += A[m, n]\nm=8 n=9\n",                                  // full reduction
      "B[n, m] = A[m, n]\nn=24 m=40\n",                             // transpose
      "B[m, n] = a[n]\nm=16 n=33\n",                                // broadcast
      "C[m, a] = A[m, a]\nC[m, b + 64] = B[m, b]\nm=8 a=64 b=32\n",  // concatenation
      "C[m, n] += A[m, k] * B[k, n] -> relu\nm=16 n=16 k=16\n",     // matmul + relu
      "C[m, n] = A[m, n] + B[m, n]\nm=4 n=1024\n",                  // elementwise add
  };
  for (const char* text : programs) {
    Program p = MustParse(text);
    EXPECT_EQ(PrintProgram(p), text);
    EXPECT_EQ(MustParse(PrintProgram(p)), p) << text;
  }
}

TEST(Parser, ConvolutionShapesComeFromTheLargestIndex) {
  Program p = MustParse("O[r,c] += I[r+kr, c+kc] * W[kr,kc]; r=30 c=28 kr=3 kc=5");
  EXPECT_THAT(p.tensor(0).shape, ElementsAre(30, 28));
  EXPECT_THAT(p.tensor(1).shape, ElementsAre(32, 32));
  EXPECT_THAT(p.tensor(2).shape, ElementsAre(3, 5));
  EXPECT_EQ(p.Flops(), 2 * 30 * 28 * 3 * 5);
  EXPECT_THAT(p.LoopVars(0), ElementsAre(0, 2, 1, 3));  // r, kr, c, kc
}

TEST(Parser, StridedPoolingStridesAndFlops) {
  Program p = MustParse("O[r,c] max= I[2*r+kr, 2*c+kc]; r=16 c=16 kr=2 kc=2");
  EXPECT_THAT(p.tensor(1).shape, ElementsAre(32, 32));
  EXPECT_EQ(p.ElementStride(p.statement(0).inputs[0], 0), 64);  // r: two rows of 32
  EXPECT_EQ(p.ElementStride(p.statement(0).inputs[0], 1), 2);   // c
  EXPECT_EQ(p.statement(0).reduction, Reduction::kMax);
  EXPECT_EQ(p.Flops(), 16 * 16 * 4);
}

TEST(Parser, BroadcastDimensionsLoopOutermost) {
  Program p = MustParse("B[m, n] = a[n]; m=16 n=33");
  EXPECT_THAT(p.LoopVars(0), ElementsAre(0, 1));
  EXPECT_EQ(p.Flops(), 16 * 33);  // a copy counts one per element
}

TEST(Parser, ConcatenationTilesTheOutput) {
  Program p = MustParse("C[m, a] = A[m, a]; C[m, b + 64] = B[m, b]; m=8 a=64 b=32");
  EXPECT_THAT(p.tensor(0).shape, ElementsAre(8, 96));
  EXPECT_THAT(p.OutputTensors(), ElementsAre(0));
  EXPECT_EQ(p.num_statements(), 2);
}

TEST(Parser, ReluAddsOneOperationPerOutput) {
  Program p = MustParse("C[m,n] += A[m,k] * B[k,n] -> relu; m=4 n=5 k=6");
  EXPECT_EQ(p.statement(0).post_op, PostOp::kRelu);
  EXPECT_EQ(p.Flops(), 2 * 4 * 5 * 6 + 4 * 5);
}

TEST(Parser, CommentsBlankLinesAndSizesFirst) {
  Program p = MustParse("# a matmul\n\nm=2, n=3, k=4\n  C[m,n] += A[m,k] * B[k,n]  # C = AB\n");
  EXPECT_EQ(PrintProgram(p), "C[m, n] += A[m, k] * B[k, n]\nm=2 n=3 k=4\n");
}

}  // namespace
}  // namespace looptool
