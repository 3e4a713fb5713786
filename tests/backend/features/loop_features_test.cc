// Exact loop_features rows: the initial matmul, a split, a strided pooling window, and padding.
#include "backend/features/loop_features.h"

#include <cmath>

#include "backend/actions/apply.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/schedule/initial_tree.h"

namespace looptool {
namespace {

using ::testing::ElementsAreArray;
using ::testing::FloatNear;
using ::testing::Pointwise;
using testing::Initial;

float L(double x) { return static_cast<float>(std::log2(1.0 + x)); }

std::vector<float> Row(const std::vector<float>& t, int r) {
  return {t.begin() + r * kLoopSetFeatures, t.begin() + (r + 1) * kLoopSetFeatures};
}

// Columns 0..21 as given, then the histogram's buckets as {bucket, value}.
std::vector<float> Expected(std::vector<float> head,
                            std::initializer_list<std::pair<int, float>> buckets) {
  head.resize(kLoopSetFeatures, 0.0f);
  for (auto [b, v] : buckets) head[22 + b] = v;
  return head;
}

TEST(LoopFeatures, InitialMatmulRowsInLevelOrder) {
  const LoopTree t = Initial("C[m,n] += A[m,k] * B[k,n]; m=112 n=208 k=256");
  const std::vector<float> f = LoopFeatures(t, 4);
  ASSERT_EQ(f.size(), 4u * kLoopSetFeatures);
  // m: C and A use it (B does not), smallest stride 208 (C), shared with the write nest.
  EXPECT_THAT(Row(f, 0), Pointwise(FloatNear(1e-6), Expected({1, L(112), 0, L(112), 1, L(112),
                                                              0, 2, 0, 1, 0, 0, 0, 0, 0,
                                                              1.0f / 3, L(208), 1, L(112), 0, 0,
                                                              0},
                                                             {{8, 1.0f}})));
  // k: reduced, A's last index, C does not use it, stride 1 in A.
  EXPECT_THAT(Row(f, 1), Pointwise(FloatNear(1e-6), Expected({1, L(256), 0, L(256), 1, L(256),
                                                              1, 1, 0, 1, 0, 0, 1, 0, 0.5f,
                                                              1.0f / 3, 1, 0, L(112 * 256), 0,
                                                              0, 0},
                                                             {{0, 0.5f}, {8, 0.5f}})));
  // n: the output's last index and B's.
  EXPECT_THAT(Row(f, 2),
              Pointwise(FloatNear(1e-6),
                        Expected({1, L(208), 0, L(208), 1, L(208), 2, 0, 0, 1, 0, 0, 0, 1, 0.5f,
                                  1.0f / 3, 1, 0, L(112.0 * 256 * 208), 0, 0, 0},
                                 {{0, 1.0f}})));
  EXPECT_THAT(Row(f, 3), ElementsAreArray(std::vector<float>(kLoopSetFeatures, 0.0f)));
}

TEST(LoopFeatures, ATileSplitsARowInTwo) {
  LoopTree t = Initial("C[m,n] += A[m,k] * B[k,n]; m=112 n=208 k=256");
  t = Apply(t, *ActionFromName("tile_L2_16"), Limits{}).tree;
  const std::vector<float> f = LoopFeatures(t, 16);
  // n in 13 over 16 elements each, then n' in 16: the inner one is innermost over n.
  const std::vector<float> outer = Row(f, 2), inner = Row(f, 3);
  EXPECT_EQ(outer[1], L(13));
  EXPECT_EQ(outer[3], L(208));
  EXPECT_EQ(outer[4], L(16));
  EXPECT_EQ(outer[7], 1);  // one loop inside it
  EXPECT_EQ(outer[8], 0);
  EXPECT_EQ(outer[9], 0);
  EXPECT_EQ(inner[1], L(16));
  EXPECT_EQ(inner[3], L(16));
  EXPECT_EQ(inner[4], 1);
  EXPECT_EQ(inner[8], 1);  // n' under n
  EXPECT_EQ(inner[9], 1);
  EXPECT_EQ(Row(f, 4)[0], 0);  // padding after the four loops
}

TEST(LoopFeatures, StridedWindowShowsCoefficientAndWindow) {
  const LoopTree t = Initial("O[r] max= I[2*r + kr]; r=3 kr=3");
  const std::vector<float> f = LoopFeatures(t, 2);
  const std::vector<float> r = Row(f, 0), kr = Row(f, 1);
  EXPECT_EQ(r[12], 0);       // not reduced
  EXPECT_EQ(r[13], 1);       // the output's last index
  EXPECT_EQ(r[14], 1);       // and I's
  EXPECT_EQ(r[16], L(1));    // stride 1 in O (2 in I)
  EXPECT_EQ(r[20], 1);       // log2 of the coefficient 2
  EXPECT_EQ(r[21], 0.5f);    // a window in I, not in O
  EXPECT_EQ(kr[12], 1);
  EXPECT_EQ(kr[15], 0.5f);   // O does not use kr
  EXPECT_EQ(kr[20], 0);
  EXPECT_EQ(kr[21], 1);
}

TEST(LoopFeatures, RowsPastTheLimitAreLeftOut) {
  const LoopTree t = Initial("C[m,n] += A[m,k] * B[k,n]; m=112 n=208 k=256");
  const std::vector<float> f = LoopFeatures(t, 2);
  ASSERT_EQ(f.size(), 2u * kLoopSetFeatures);
  EXPECT_EQ(Row(f, 1)[12], 1);  // k, the second level
}

}  // namespace
}  // namespace looptool
