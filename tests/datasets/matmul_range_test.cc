// mm64_256_16_range-v0 names shapes as LoopTune does and splits them deterministically.
#include "datasets/matmul_range.h"

#include <set>

#include "backend/ir/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace looptool::datasets {
namespace {

using ::testing::ElementsAre;

TEST(MatmulRange, NamesAreMNKAsInLoopTune) {
  auto s = ParseMatmulName("mm112_208_256");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->m, 112);
  EXPECT_EQ(s->n, 208);
  EXPECT_EQ(s->k, 256);
  EXPECT_EQ(MatmulName(*s), "mm112_208_256");
  // The program: C is m x n, A is m x k, B is k x n.
  auto p = ParseProgram(MatmulProgram(*s), Limits{});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->tensor(0).shape, ElementsAre(112, 208));
  EXPECT_THAT(p->tensor(1).shape, ElementsAre(112, 256));
  EXPECT_THAT(p->tensor(2).shape, ElementsAre(256, 208));
}

TEST(MatmulRange, BadNames) {
  for (const char* bad : {"mm112_208", "mx1_2_3", "mm1_2_x", "mm0_2_3", "mm1_2_3_4", ""}) {
    EXPECT_EQ(ParseMatmulName(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(MatmulRange, HasLoopTunes2197ShapesAndAnEightyTwentySplit) {
  const auto shapes = MatmulRange();
  ASSERT_EQ(shapes.size(), 2197u);
  EXPECT_EQ(shapes.front(), (MatmulShape{64, 64, 64}));
  EXPECT_EQ(shapes.back(), (MatmulShape{256, 256, 256}));
  std::set<std::string> names;
  int test = 0;
  for (const auto& s : shapes) {
    names.insert(MatmulName(s));
    test += InTestSplit(s);
  }
  EXPECT_EQ(names.size(), 2197u);
  EXPECT_EQ(test, 432);  // 19.7%: fixed by the hash, so this number may never change
  EXPECT_TRUE(InTestSplit({112, 208, 256}));
}

}  // namespace
}  // namespace looptool::datasets
