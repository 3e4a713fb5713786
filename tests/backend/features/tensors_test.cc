// Exact loops_tensor, stride_tensor and 5_prev_actions_tensor values, LoopTune's published
// mm112_208_256 rows among them.
#include "backend/features/tensors.h"

#include "backend/actions/apply.h"
#include "backend/features/stride_histogram.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/schedule/initial_tree.h"

namespace looptool {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

using testing::Initial;

std::vector<float> Row(const std::vector<float>& t, int r) {
  return {t.begin() + r * kLoopFeatures, t.begin() + (r + 1) * kLoopFeatures};
}

// [cursor, size, tail, compute] followed by the 16 histogram buckets given as {bucket, value}.
std::vector<float> Expected(float cursor, float size, float tail, float compute,
                            std::initializer_list<std::pair<int, float>> buckets) {
  std::vector<float> r = {cursor, size, tail, compute};
  r.resize(kLoopFeatures, 0.0f);
  for (auto [b, v] : buckets) r[4 + b] = v;
  return r;
}

TEST(LoopsTensor, InitialMm112x208x256MatchesLoopTool) {
  const LoopTree t = Initial("C[m,n] += A[m,k] * B[k,n]; m=112 n=208 k=256");
  const std::vector<float> lt = LoopsTensor(t, 10);
  ASSERT_EQ(lt.size(), 200u);  // LoopTune's [1, 200] with max_loops = 10
  EXPECT_THAT(Row(lt, 0), ElementsAreArray(Expected(1, 112, 0, 1, {{8, 1.0f}})));             // m
  EXPECT_THAT(Row(lt, 1), ElementsAreArray(Expected(0, 256, 0, 1, {{0, 0.5f}, {8, 0.5f}})));  // k
  EXPECT_THAT(Row(lt, 2), ElementsAreArray(Expected(0, 208, 0, 1, {{0, 1.0f}})));             // n
  EXPECT_THAT(Row(lt, 3), ElementsAreArray(Expected(0, 208, 0, 0, {{0, 1.0f}})));  // write n
  for (int r = 4; r < 10; ++r) EXPECT_THAT(Row(lt, r), ElementsAreArray(std::vector<float>(20)));
}

TEST(LoopsTensor, StridePairsOfTheInitialMatmul) {
  const LoopTree t = Initial("C[m,n] += A[m,k] * B[k,n]; m=112 n=208 k=256");
  auto pairs = [&](int ref) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const StrideAccess& a : LoopStrideAccesses(t, ref)) out.emplace_back(a.stride, a.frequency);
    return out;
  };
  using P = std::pair<int64_t, int64_t>;
  EXPECT_THAT(pairs(0), ElementsAre(P{256, 112}));                    // A along m
  EXPECT_THAT(pairs(1), ElementsAre(P{1, 28672}, P{208, 28672}));     // A, B along k
  EXPECT_THAT(pairs(2), ElementsAre(P{1, 5963776}));                  // B along n
  EXPECT_THAT(pairs(5), ElementsAre(P{1, 23296}));                    // accumulator, write nest
}

TEST(LoopsTensor, AfterLoopTunesSequenceTailsAndSplitStridesShow) {
  LoopTree t = Initial("C[m,n] += A[m,k] * B[k,n]; m=112 n=208 k=256");
  for (const char* a : {"split_4", "down", "swap_down", "down", "split_16", "swap_up", "swap_up",
                        "swap_up", "split_8"}) {
    t = Apply(t, *ActionFromName(a), Limits{}).tree;
  }
  const std::vector<float> lt = LoopsTensor(t, 10);
  // n in 1 r 80 over 128 elements: B and C move 128 elements per iteration (bucket 7).
  EXPECT_THAT(Row(lt, 0), ElementsAreArray(Expected(1, 1, 80, 1, {{7, 1.0f}})));
  // n' in 8 over 16 elements: stride 16 (bucket 4).
  EXPECT_THAT(Row(lt, 1), ElementsAreArray(Expected(0, 8, 0, 1, {{4, 1.0f}})));
  // m in 28 over 4 rows: A moves 4 * 256 = 1024 (bucket 10).
  EXPECT_THAT(Row(lt, 2), ElementsAreArray(Expected(0, 28, 0, 1, {{10, 1.0f}})));
  // The write nest's m in 28: the accumulator, 4 rows of 208 = 832 (bucket 10).
  EXPECT_THAT(Row(lt, 6), ElementsAreArray(Expected(0, 28, 0, 0, {{10, 1.0f}})));
}

TEST(StrideTensor, SumsTheUnnormalisedHistograms) {
  const LoopTree t = Initial("C[m,n] += A[m,k] * B[k,n]; m=112 n=208 k=256");
  std::vector<float> expected(16, 0.0f);
  expected[0] = 6015744;  // 28672 + 5963776 + 23296, loop_tool's value
  expected[8] = 28784;    // 112 + 28672
  EXPECT_THAT(StrideTensor(t), ElementsAreArray(expected));
}

TEST(StrideBucket, CeilLog2) {
  EXPECT_EQ(StrideBucket(1), 0);
  EXPECT_EQ(StrideBucket(2), 1);
  EXPECT_EQ(StrideBucket(3), 2);
  EXPECT_EQ(StrideBucket(4), 2);
  EXPECT_EQ(StrideBucket(208), 8);
  EXPECT_EQ(StrideBucket(256), 8);
  EXPECT_EQ(StrideBucket(32768), 15);
  EXPECT_EQ(StrideBucket(32769), -1);
}

TEST(PrevActionsTensor, MostRecentFirstOneHot) {
  const std::vector<float> t = PrevActionsTensor({3, 1, 4, 1, 5, 9}, 10);
  ASSERT_EQ(t.size(), 50u);
  std::vector<float> expected(50, 0.0f);
  expected[0 * 10 + 9] = 1;
  expected[1 * 10 + 5] = 1;
  expected[2 * 10 + 1] = 1;
  expected[3 * 10 + 4] = 1;
  expected[4 * 10 + 1] = 1;
  EXPECT_THAT(t, ElementsAreArray(expected));
  EXPECT_THAT(PrevActionsTensor({2}, 3), ElementsAre(0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
}

}  // namespace
}  // namespace looptool
