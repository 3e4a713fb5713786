// MeasurementCache keeps results and failures by key, keeps a key's first result, and empties
// itself before an entry would pass its bound in entries or in bytes.
#include "backend/timing/measurement_cache.h"

#include <string>

#include "gtest/gtest.h"

namespace looptool {
namespace {

TEST(MeasurementCache, KeepsResultsAndFailuresByKey) {
  MeasurementCache cache(/*max_entries=*/8, /*max_bytes=*/1 << 20);
  EXPECT_EQ(cache.Find("a"), nullptr);
  cache.Insert("a", Measurement{0.5, 2.0});
  cache.Insert("b", absl::InternalError("crashed"));
  cache.Insert("a", Measurement{0.25, 4.0});  // the first result stays
  ASSERT_NE(cache.Find("a"), nullptr);
  ASSERT_TRUE(cache.Find("a")->ok());
  EXPECT_EQ((*cache.Find("a"))->seconds, 0.5);
  ASSERT_NE(cache.Find("b"), nullptr);
  EXPECT_EQ(cache.Find("b")->status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(MeasurementCache, EmptiesBeforePassingItsEntryBound) {
  MeasurementCache cache(/*max_entries=*/3, /*max_bytes=*/1 << 20);
  for (const char* key : {"a", "b", "c"}) cache.Insert(key, Measurement{1, 1});
  EXPECT_EQ(cache.size(), 3u);
  cache.Insert("d", Measurement{1, 1});
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.Find("a"), nullptr);
  EXPECT_NE(cache.Find("d"), nullptr);
}

TEST(MeasurementCache, EmptiesBeforePassingItsByteBound) {
  const std::string big(10000, 'k');
  MeasurementCache cache(/*max_entries=*/1000, /*max_bytes=*/25000);
  cache.Insert(big + "1", Measurement{1, 1});
  cache.Insert(big + "2", Measurement{1, 1});
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_LE(cache.bytes(), 25000);
  EXPECT_GT(cache.bytes(), 20000);
  cache.Insert(big + "3", Measurement{1, 1});  // would pass 25000 bytes
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_NE(cache.Find(big + "3"), nullptr);
  // A long failure message counts too.
  cache.Insert("x", absl::InternalError(std::string(20000, 'm')));
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_NE(cache.Find("x"), nullptr);
}

}  // namespace
}  // namespace looptool
