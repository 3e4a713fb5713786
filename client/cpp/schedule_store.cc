#include "client/cpp/schedule_store.h"

#include <sqlite3.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cpp/sqlite_statement.h"
#include "nlohmann/json.hpp"
#include "util/status_macros.h"

namespace looptool::client {
namespace {

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS schedules (
  benchmark    TEXT NOT NULL,
  host_cpu     TEXT NOT NULL,
  action_space TEXT NOT NULL,
  actions      TEXT NOT NULL,  -- JSON array of action names
  loop_tree    TEXT NOT NULL,
  gflops       REAL NOT NULL,
  peak_gflops  REAL NOT NULL,
  search       TEXT NOT NULL,
  server       TEXT NOT NULL,
  seconds      REAL NOT NULL,
  updated_unix INTEGER NOT NULL,
  PRIMARY KEY (benchmark, host_cpu, action_space)
);
)sql";

constexpr char kColumns[] =
    "benchmark, host_cpu, action_space, actions, loop_tree, gflops, peak_gflops, search, server, "
    "seconds, updated_unix";

using Statement = SqliteStatement;

// The row `stmt` is on (columns in kColumns' order).
absl::StatusOr<StoredSchedule> ReadRow(Statement& stmt) {
  StoredSchedule s;
  s.benchmark = stmt.ColumnText(0);
  s.host_cpu = stmt.ColumnText(1);
  s.action_space = stmt.ColumnText(2);
  const nlohmann::json actions = nlohmann::json::parse(stmt.ColumnText(3), nullptr, false);
  if (!actions.is_array()) {
    return absl::DataLossError(absl::StrCat("the stored actions of ", s.benchmark,
                                            " are not a JSON array"));
  }
  for (const nlohmann::json& a : actions) {
    if (!a.is_string()) {
      return absl::DataLossError(absl::StrCat("a stored action of ", s.benchmark,
                                              " is not a string"));
    }
    s.actions.push_back(a.get<std::string>());
  }
  s.loop_tree = stmt.ColumnText(4);
  s.gflops = sqlite3_column_double(stmt.get(), 5);
  s.peak_gflops = sqlite3_column_double(stmt.get(), 6);
  s.search = stmt.ColumnText(7);
  s.server = stmt.ColumnText(8);
  s.seconds = sqlite3_column_double(stmt.get(), 9);
  s.updated_unix = sqlite3_column_int64(stmt.get(), 10);
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ScheduleStore>> ScheduleStore::Open(const std::string& path) {
  ASSIGN_OR_RETURN(sqlite3* const db, OpenSqliteFile(path, kSchema, "schedule store"));
  std::unique_ptr<ScheduleStore> store(new ScheduleStore(db, path));
  // A table of the same name but another shape (another program's file) is refused here.
  Statement probe(db, absl::StrCat("SELECT ", kColumns, " FROM schedules LIMIT 0"));
  if (!probe.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " has a 'schedules' table that is not LoopTool's: ", sqlite3_errmsg(db)));
  }
  return store;
}

ScheduleStore::~ScheduleStore() { sqlite3_close(db_); }

absl::Status ScheduleStore::Error(const char* what) const {
  return absl::InternalError(
      absl::StrCat("schedule store ", path_, ": cannot ", what, ": ", sqlite3_errmsg(db_)));
}

absl::StatusOr<std::optional<StoredSchedule>> ScheduleStore::Find(
    const std::string& benchmark, const std::string& host_cpu, const std::string& action_space) {
  absl::MutexLock lock(&mu_);
  Statement stmt(db_, absl::StrCat("SELECT ", kColumns, " FROM schedules WHERE benchmark = ?1 "
                                   "AND host_cpu = ?2 AND action_space = ?3"));
  if (!stmt.ok()) return Error("read");
  stmt.Text(1, benchmark);
  stmt.Text(2, host_cpu);
  stmt.Text(3, action_space);
  const int rc = sqlite3_step(stmt.get());
  if (rc == SQLITE_DONE) return std::optional<StoredSchedule>();
  if (rc != SQLITE_ROW) return Error("read");
  ASSIGN_OR_RETURN(StoredSchedule s, ReadRow(stmt));
  return std::optional<StoredSchedule>(std::move(s));
}

absl::StatusOr<bool> ScheduleStore::Offer(
    const StoredSchedule& s, const std::optional<std::vector<std::string>>& measured_stored) {
  if (s.benchmark.empty() || s.host_cpu.empty() || s.action_space.empty()) {
    return absl::InvalidArgumentError("a stored schedule needs a benchmark, a host CPU and an "
                                      "action space");
  }
  if (!(s.gflops > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("refusing to store ", s.benchmark, " at ", s.gflops, " GFLOPS"));
  }
  absl::MutexLock lock(&mu_);
  // One statement: concurrent offers (threads or processes) keep the fastest, or this run's
  // result over the schedule it was compared with in the same run (?12; NULL matches nothing).
  Statement stmt(db_, absl::StrCat(
      "INSERT INTO schedules (", kColumns, ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
      "?11) ON CONFLICT (benchmark, host_cpu, action_space) DO UPDATE SET actions = "
      "excluded.actions, loop_tree = excluded.loop_tree, gflops = excluded.gflops, peak_gflops = "
      "excluded.peak_gflops, search = excluded.search, server = excluded.server, seconds = "
      "excluded.seconds, updated_unix = excluded.updated_unix WHERE excluded.gflops > "
      "schedules.gflops OR schedules.actions = ?12"));
  if (!stmt.ok()) return Error("write");
  stmt.Text(1, s.benchmark);
  stmt.Text(2, s.host_cpu);
  stmt.Text(3, s.action_space);
  stmt.Text(4, nlohmann::json(s.actions).dump());
  stmt.Text(5, s.loop_tree);
  stmt.Real(6, s.gflops);
  stmt.Real(7, s.peak_gflops);
  stmt.Text(8, s.search);
  stmt.Text(9, s.server);
  stmt.Real(10, s.seconds);
  stmt.Int(11, absl::ToUnixSeconds(absl::Now()));
  if (measured_stored.has_value()) stmt.Text(12, nlohmann::json(*measured_stored).dump());
  if (sqlite3_step(stmt.get()) != SQLITE_DONE) return Error("write");
  return sqlite3_changes(db_) > 0;
}

absl::StatusOr<std::vector<StoredSchedule>> ScheduleStore::List(const std::string& host_filter) {
  absl::MutexLock lock(&mu_);
  Statement stmt(db_, absl::StrCat("SELECT ", kColumns, " FROM schedules WHERE instr(host_cpu, "
                                   "?1) > 0 ORDER BY benchmark, host_cpu, action_space"));
  if (!stmt.ok()) return Error("read");
  stmt.Text(1, host_filter);
  std::vector<StoredSchedule> out;
  int rc;
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    ASSIGN_OR_RETURN(StoredSchedule s, ReadRow(stmt));
    out.push_back(std::move(s));
  }
  if (rc != SQLITE_DONE) return Error("read");
  return out;
}

}  // namespace looptool::client
