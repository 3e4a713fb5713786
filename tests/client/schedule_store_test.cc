// ScheduleStore: what it keeps, what it refuses, and that it persists across opens.
#include "client/cpp/schedule_store.h"

#include <sqlite3.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace looptool::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::remove(path.c_str());
  return path;
}

StoredSchedule Schedule(const std::string& benchmark, double gflops,
                        std::vector<std::string> actions = {"split_8", "down"}) {
  StoredSchedule s;
  s.benchmark = benchmark;
  s.host_cpu = "AMD EPYC 9R14";
  s.action_space = "loop_tool";
  s.actions = std::move(actions);
  s.loop_tree = "for m in 8 : L0";
  s.gflops = gflops;
  s.peak_gflops = 118.2;
  s.search = "evolution";
  s.server = "127.0.0.1:5000";
  s.seconds = 2.5;
  return s;
}

TEST(ScheduleStoreTest, KeepsTheFastestPerKeyAndPersists) {
  const std::string path = TempPath("keeps.db");
  {
    auto store = ScheduleStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    auto none = (*store)->Find("benchmark://a", "AMD EPYC 9R14", "loop_tool");
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->has_value());
    EXPECT_TRUE(*(*store)->Offer(Schedule("benchmark://a", 50)));
    EXPECT_FALSE(*(*store)->Offer(Schedule("benchmark://a", 40, {"up"})));   // slower
    EXPECT_FALSE(*(*store)->Offer(Schedule("benchmark://a", 50, {"up"})));   // as fast
    EXPECT_TRUE(*(*store)->Offer(Schedule("benchmark://a", 60, {"unroll"})));
    StoredSchedule other_host = Schedule("benchmark://a", 10, {"swap_down"});
    other_host.host_cpu = "Intel Xeon";
    EXPECT_TRUE(*(*store)->Offer(other_host));  // another key: kept although slower
  }
  auto store = ScheduleStore::Open(path);  // reopened: the same rows
  ASSERT_TRUE(store.ok());
  auto found = (*store)->Find("benchmark://a", "AMD EPYC 9R14", "loop_tool");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_THAT((*found)->actions, ElementsAre("unroll"));
  EXPECT_EQ((*found)->gflops, 60);
  EXPECT_EQ((*found)->peak_gflops, 118.2);
  EXPECT_EQ((*found)->search, "evolution");
  EXPECT_EQ((*found)->server, "127.0.0.1:5000");
  EXPECT_EQ((*found)->loop_tree, "for m in 8 : L0");
  EXPECT_GT((*found)->updated_unix, 1700000000);
  EXPECT_FALSE((*store)->Find("benchmark://a", "AMD EPYC 9R14", "loop_tune")->has_value());
  auto all = (*store)->List();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].host_cpu, "AMD EPYC 9R14");
  EXPECT_EQ((*all)[1].host_cpu, "Intel Xeon");
  auto intel = (*store)->List("Intel");
  ASSERT_TRUE(intel.ok());
  ASSERT_EQ(intel->size(), 1u);
  EXPECT_THAT((*intel)[0].actions, ElementsAre("swap_down"));
}

// A run that timed the stored schedule beside its result (a search from it) replaces it whatever
// number is stored (an older code generator's, another clock's); an offer naming other actions
// than the stored ones (another process stored a faster schedule meanwhile) does not.
TEST(ScheduleStoreTest, ASameRunComparisonReplacesAStaleNumber) {
  auto store = ScheduleStore::Open(TempPath("same_run.db"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE(*(*store)->Offer(Schedule("benchmark://s", 200, {"split_8"})));
  const std::vector<std::string> stored = {"split_8"};
  const std::vector<std::string> other = {"split_4"};
  // Slower than the stored number, compared with other actions: kept out.
  EXPECT_FALSE(*(*store)->Offer(Schedule("benchmark://s", 150, {"split_8", "down"}), other));
  EXPECT_FALSE(*(*store)->Offer(Schedule("benchmark://s", 150, {"split_8", "down"})));
  EXPECT_EQ((*(*store)->Find("benchmark://s", "AMD EPYC 9R14", "loop_tool"))->gflops, 200);
  // Compared in the same run with the stored schedule: replaces it at this run's number.
  EXPECT_TRUE(*(*store)->Offer(Schedule("benchmark://s", 150, {"split_8", "down"}), stored));
  auto found = (*store)->Find("benchmark://s", "AMD EPYC 9R14", "loop_tool");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->gflops, 150);
  EXPECT_THAT((*found)->actions, ElementsAre("split_8", "down"));
  // The stored actions changed: the old comparison no longer applies, the number decides.
  EXPECT_FALSE(*(*store)->Offer(Schedule("benchmark://s", 120, {"split_8", "up"}), stored));
  EXPECT_TRUE(*(*store)->Offer(Schedule("benchmark://s", 160, {"split_8", "up"}), stored));
  // A key with nothing stored takes any offer.
  EXPECT_TRUE(*(*store)->Offer(Schedule("benchmark://t", 1, {"down"}), stored));
}

TEST(ScheduleStoreTest, ConcurrentOffersKeepTheFastest) {
  const std::string path = TempPath("concurrent.db");
  auto a = ScheduleStore::Open(path);
  auto b = ScheduleStore::Open(path);  // a second handle, as a second process would have
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      ScheduleStore& store = t % 2 == 0 ? **a : **b;
      for (int i = 0; i < 50; ++i) {
        ASSERT_TRUE(store.Offer(Schedule("benchmark://c", 1 + (i * 7 + t * 13) % 97)).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  auto found = (*a)->Find("benchmark://c", "AMD EPYC 9R14", "loop_tool");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->gflops, 97);
}

TEST(ScheduleStoreTest, RefusesBadOffers) {
  auto store = ScheduleStore::Open(TempPath("bad.db"));
  ASSERT_TRUE(store.ok());
  StoredSchedule no_host = Schedule("benchmark://a", 5);
  no_host.host_cpu = "";
  EXPECT_EQ((*store)->Offer(no_host).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Offer(Schedule("benchmark://a", 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Offer(Schedule("", 5)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*store)->List()->empty());
}

TEST(ScheduleStoreTest, RefusesFilesThatAreNotStores) {
  const std::string text = TempPath("text.db");
  std::ofstream(text) << "this is not an SQLite database, it is a text file of some length\n";
  auto not_db = ScheduleStore::Open(text);
  EXPECT_EQ(not_db.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(not_db.status().message()), HasSubstr(text));

  const std::string foreign = TempPath("foreign.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(foreign.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE schedules (id INTEGER, cron TEXT)", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto other = ScheduleStore::Open(foreign);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("not LoopTool's"));

  EXPECT_EQ(ScheduleStore::Open("/nonexistent-dir/x.db").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ScheduleStoreTest, ReportsCorruptRowsInsteadOfThrowing) {
  const std::string path = TempPath("corrupt.db");
  ASSERT_TRUE(ScheduleStore::Open(path).ok());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "INSERT INTO schedules VALUES ('benchmark://x', 'cpu', 'loop_tool', "
                         "'not json', '', 1, 1, 's', 'h', 1, 1)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto store = ScheduleStore::Open(path);
  ASSERT_TRUE(store.ok());
  auto found = (*store)->Find("benchmark://x", "cpu", "loop_tool");
  EXPECT_EQ(found.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ((*store)->List().status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace looptool::client
