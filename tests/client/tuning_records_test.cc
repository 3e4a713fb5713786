// TuningRecords: the splits, each kernel kept once per run with the run's start actions before
// its own, how each was timed (files from before gaining the columns), re-timings, the records
// view's fractions, evaluation programs, what it refuses, and
// that it persists across opens and is shared by threads.
#include "client/cpp/tuning_records.h"

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

constexpr char kProgram[] = "C[m, n] += A[m, k] * B[k, n]\nm=64 n=64 k=64\n";
constexpr char kSchedule[] = "compute 1: m:64 n:64 k:64\nwrite 1: m:64 n:64\n";

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::remove(path.c_str());
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
  return path;
}

RecordedRun ARun(const std::string& program = kProgram) {
  RecordedRun r;
  r.benchmark = "benchmark://mm64_256_16_range-v0/mm64_64_64";
  r.program = program;
  r.flops = 2 * 64 * 64 * 64;
  r.host_cpu = "AMD EPYC 9R14";
  r.isa = "avx512";
  r.server = "127.0.0.1:5000";
  r.action_space = "loop_nest";
  r.search = "evolution";
  r.seed = 7;
  r.time_limit_seconds = 10;
  r.start_actions = {"tile_L0_4"};
  r.peak_gflops = 120;
  r.roofline_gflops = 100;
  r.roofline = R"({"gflops":100})";
  return r;
}

MeasuredKernel Kernel(const std::string& schedule, double gflops,
                      std::vector<std::string> actions = {"tile_L1_16"}) {
  MeasuredKernel k;
  k.actions = std::move(actions);
  k.kernel = std::string(kProgram) + schedule;
  k.loop_tree = "for m in 64 : L0";
  k.plan_features = R"({"bias":1.0})";
  k.gflops = gflops;
  k.seconds = 0.5;
  return k;
}

void ExpectAdded(const absl::StatusOr<bool>& added, bool expected) {
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(*added, expected);
}

TEST(TuningRecords, IrSplitsIntoProgramAndSchedule) {
  const std::string ir = std::string(kProgram) + kSchedule + "cursor 1 2\n";
  EXPECT_EQ(ProgramOfIr(ir), kProgram);
  EXPECT_EQ(ScheduleOfIr(ir), kSchedule);
  // Splits: evaluation when told, else one in ten by hash validation.
  EXPECT_EQ(RecordSplit(kProgram, true), "evaluation");
  EXPECT_EQ(RecordSplit(kProgram, false), "train");
  EXPECT_EQ(RecordSplit("C[m] = A[m]\nm=18\n", false), "validation");
  int validation = 0;
  for (int m = 1; m <= 1000; ++m) {
    validation += RecordSplit("C[m] = A[m]\nm=" + std::to_string(m) + "\n", false) == "validation";
  }
  EXPECT_GT(validation, 60);
  EXPECT_LT(validation, 140);
}

TEST(TuningRecords, KeepsEachKernelOncePerRunAfterTheStartActions) {
  const std::string path = TempPath("records.db");
  auto records = TuningRecords::Open(path);
  ASSERT_TRUE(records.ok()) << records.status();
  auto run = (*records)->BeginRun(ARun());
  ASSERT_TRUE(run.ok()) << run.status();
  ExpectAdded((*records)->AddMeasurement(*run, Kernel(kSchedule, 50)), true);
  // The same kernel again (another path, another cursor): not kept twice.
  MeasuredKernel again = Kernel(kSchedule, 60, {"tile_L2_16"});
  again.kernel += "cursor 1 1\n";
  ExpectAdded((*records)->AddMeasurement(*run, again), false);
  const std::string faster = "compute 1: m:64 k:64 n:64\nwrite 1: m:64 n:64\n";
  ExpectAdded((*records)->AddMeasurement(*run, Kernel(faster, 90, {"interchange_L1_L2"})), true);
  ASSERT_TRUE((*records)->SetRetimed(*run, std::string(kProgram) + faster, 88).ok());
  EXPECT_EQ((*records)->SetRetimed(*run, std::string(kProgram) + "compute 1: x\n", 1).code(),
            absl::StatusCode::kNotFound);
  // Another run of the same program: its own kernels, the program kept once.
  auto second = (*records)->BeginRun(ARun());
  ASSERT_TRUE(second.ok());
  ExpectAdded((*records)->AddMeasurement(*second, Kernel(kSchedule, 55)), true);

  auto m = (*records)->Measurements(*run);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_THAT((*m)[0].actions, ElementsAre("tile_L0_4", "tile_L1_16"));
  EXPECT_EQ((*m)[0].schedule, kSchedule);
  EXPECT_EQ((*m)[0].gflops, 50);
  EXPECT_EQ((*m)[0].retimed_gflops, 0);
  EXPECT_EQ((*m)[0].plan_features, R"({"bias":1.0})");
  EXPECT_THAT((*m)[1].actions, ElementsAre("tile_L0_4", "interchange_L1_L2"));
  EXPECT_EQ((*m)[1].retimed_gflops, 88);
  records->reset();

  // The view, read as others would: fractions of the peak and of the roofline.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "SELECT count(*), count(DISTINCT program_id), max(fraction_of_peak), "
                               "max(fraction_of_roofline), min(split) FROM records",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), 3);
  EXPECT_EQ(sqlite3_column_int(stmt, 1), 1);
  EXPECT_DOUBLE_EQ(sqlite3_column_double(stmt, 2), 90.0 / 120);
  EXPECT_DOUBLE_EQ(sqlite3_column_double(stmt, 3), 0.9);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 4))),
            RecordSplit(kProgram, false));
  sqlite3_finalize(stmt);
  sqlite3_close(db);

  // Reopened: everything is there.
  auto reopened = TuningRecords::Open(path);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->Measurements(*second)->size(), 1u);
}

// The rows of `sql` (one text column each; "NULL" for a null), in order.
std::vector<std::string> Column(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::vector<std::string> out;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) return {"cannot open"};
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    out.push_back(sqlite3_errmsg(db));
  } else {
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      const unsigned char* text = sqlite3_column_text(stmt, 0);
      out.push_back(text != nullptr ? reinterpret_cast<const char*>(text) : "NULL");
    }
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

// Opens `path`, records a run of `kernels` in it, and closes it.
void RecordRun(const std::string& path, const std::vector<MeasuredKernel>& kernels) {
  auto records = TuningRecords::Open(path);
  ASSERT_TRUE(records.ok()) << records.status();
  auto run = (*records)->BeginRun(ARun());
  ASSERT_TRUE(run.ok()) << run.status();
  for (const MeasuredKernel& k : kernels) ExpectAdded((*records)->AddMeasurement(*run, k), true);
}

TEST(TuningRecords, KeepsHowEachKernelWasTimed) {
  const std::string path = TempPath("timing.db");
  MeasuredKernel slower = Kernel(kSchedule, 50);
  slower.timing = R"({"timing":"slower","timed_runs":5})";
  // No timing (a server before it), or a malformed one: NULLs.
  MeasuredKernel untold = Kernel("compute 1: m:64 k:64 n:64\nwrite 1: m:64 n:64\n", 60);
  MeasuredKernel malformed = Kernel("compute 1: k:64 m:64 n:64\nwrite 1: m:64 n:64\n", 70);
  malformed.timing = R"({"timing":"once","timed_runs":"one"})";
  RecordRun(path, {slower, untold, malformed});
  EXPECT_THAT(Column(path, "SELECT coalesce(timing, 'NULL') || ' ' || "
                           "coalesce(timed_runs, 'NULL') FROM records ORDER BY id"),
              ElementsAre("slower 5", "NULL NULL", "NULL NULL"));
}

TEST(TuningRecords, FilesWrittenBeforeTheTimingColumnsGainThem) {
  const std::string path = TempPath("old.db");
  RecordRun(path, {Kernel(kSchedule, 50)});
  // Made as the files of before were: no timing columns, a view without them, and a table
  // `python3 -m looptool.records remeasure` adds.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "DROP VIEW records; ALTER TABLE measurements DROP COLUMN timing; "
                         "ALTER TABLE measurements DROP COLUMN timed_runs; "
                         "CREATE VIEW records AS SELECT m.id AS id FROM measurements m; "
                         "CREATE TABLE remeasurements (measurement_id INTEGER PRIMARY KEY, "
                         "gflops REAL NOT NULL, peak_gflops REAL NOT NULL)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  ASSERT_THAT(Column(path, "SELECT timing FROM measurements"),
              ElementsAre(HasSubstr("no such column")));

  MeasuredKernel settled = Kernel(kSchedule, 55);
  settled.timing = R"({"timing":"settled","timed_runs":12})";
  RecordRun(path, {settled});
  EXPECT_THAT(Column(path, "SELECT coalesce(timing, 'NULL') || ' ' || gflops || ' ' || "
                           "round(fraction_of_peak, 3) FROM records ORDER BY id"),
              ElementsAre("NULL 50.0 0.417", "settled 55.0 0.458"));
  // Opened again: nothing more to add.
  EXPECT_TRUE(TuningRecords::Open(path).ok());
}

TEST(TuningRecords, EvaluationProgramsAreNeverTrainedOn) {
  auto records = TuningRecords::Open(TempPath("evaluation.db"));
  ASSERT_TRUE(records.ok());
  const std::string other = "y[n] += x[k] * W[k, n]\nk=768 n=1000\n";
  ASSERT_TRUE((*records)->BeginRun(ARun()).ok());  // recorded before the set was known
  EXPECT_EQ(*(*records)->CountEvaluationPrograms(), 0);
  ASSERT_TRUE((*records)
                  ->AddEvaluationPrograms({{kProgram, "benchmark://x-v0/a"},
                                           {other, "benchmark://resnet18-v0/fc"}})
                  .ok());
  EXPECT_EQ(*(*records)->CountEvaluationPrograms(), 2);
  EXPECT_EQ(*(*records)->SplitOfProgram(kProgram), "evaluation");  // moved there
  ASSERT_TRUE((*records)->BeginRun(ARun(other)).ok());
  EXPECT_EQ(*(*records)->SplitOfProgram(other), "evaluation");
  const std::string mine = "y[n] += x[k] * W[k, n]\nk=512 n=10\n";
  ASSERT_TRUE((*records)->BeginRun(ARun(mine)).ok());
  EXPECT_EQ(*(*records)->SplitOfProgram(mine), RecordSplit(mine, false));
  EXPECT_EQ((*records)->SplitOfProgram("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(TuningRecords, RefusesBadInputAndOtherFiles) {
  auto records = TuningRecords::Open(TempPath("bad.db"));
  ASSERT_TRUE(records.ok());
  RecordedRun empty = ARun();
  empty.program.clear();
  EXPECT_EQ((*records)->BeginRun(empty).status().code(), absl::StatusCode::kInvalidArgument);
  auto run = (*records)->BeginRun(ARun());
  ASSERT_TRUE(run.ok());
  EXPECT_EQ((*records)->AddMeasurement(*run, Kernel(kSchedule, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status unknown = (*records)->AddMeasurement(*run + 100, Kernel(kSchedule, 5)).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.message(), HasSubstr("no recorded run"));

  const std::string text = TempPath("not_sqlite.db");
  std::ofstream(text) << "this is not a database, but it is long enough to look like a header\n";
  auto not_db = TuningRecords::Open(text);
  EXPECT_EQ(not_db.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_db.status().message(), HasSubstr(text));

  const std::string foreign = TempPath("foreign.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(foreign.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE measurements (x INTEGER)", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto other = TuningRecords::Open(foreign);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other.status().message(), HasSubstr("not LoopTool's records"));

  // Another program's database (a schedule store) is refused and left as it was.
  const std::string store = TempPath("store.db");
  ASSERT_EQ(sqlite3_open(store.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE schedules (x INTEGER)", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto refused = TuningRecords::Open(store);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("('schedules'); not writing to it"));
  ASSERT_EQ(sqlite3_open(store.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* count = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &count, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(count), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(count, 0), 1);  // only its own table
  sqlite3_finalize(count);
  sqlite3_close(db);

  EXPECT_EQ(TuningRecords::Open("/nonexistent/dir/records.db").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TuningRecords, ThreadsShareOneFile) {
  auto records = TuningRecords::Open(TempPath("threads.db"));
  ASSERT_TRUE(records.ok());
  auto run = (*records)->BeginRun(ARun());
  ASSERT_TRUE(run.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const std::string schedule =
            "compute 1: m:" + std::to_string(t * 100 + i) + "\nwrite 1: m:64 n:64\n";
        ASSERT_TRUE((*records)->AddMeasurement(*run, Kernel(schedule, 1 + i)).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ((*records)->Measurements(*run)->size(), 200u);
}

}  // namespace
}  // namespace looptool::client
