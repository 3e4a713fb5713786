#include "client/cpp/tuning_records.h"

#include <sqlite3.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/cpp/sqlite_statement.h"
#include "datasets/split.h"
#include "nlohmann/json.hpp"
#include "util/status_macros.h"

namespace looptool::client {
namespace {

// The format, for readers (datasets/records/README.md): bump when a column changes meaning.
constexpr char kFormat[] = "looptool-tuning-records 1";

constexpr char kSchema[] = R"sql(
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
PRAGMA foreign_keys = ON;
CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS programs (
  id        INTEGER PRIMARY KEY,
  program   TEXT NOT NULL UNIQUE,  -- as the server prints it
  benchmark TEXT NOT NULL,         -- the URI it was first recorded under
  flops     INTEGER NOT NULL,      -- of one run of its kernel
  split     TEXT NOT NULL          -- train, validation or evaluation
);
CREATE TABLE IF NOT EXISTS evaluation_programs (
  program   TEXT PRIMARY KEY,
  benchmark TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
  id              INTEGER PRIMARY KEY,
  program_id      INTEGER NOT NULL REFERENCES programs(id),
  benchmark       TEXT NOT NULL,
  host_cpu        TEXT NOT NULL,
  isa             TEXT NOT NULL,
  server          TEXT NOT NULL,
  action_space    TEXT NOT NULL,
  search          TEXT NOT NULL,
  seed            INTEGER NOT NULL,
  time_limit      REAL NOT NULL,
  start_actions   TEXT NOT NULL,   -- JSON array of action names
  peak_gflops     REAL NOT NULL,
  roofline_gflops REAL NOT NULL,   -- 0: no bound
  roofline        TEXT NOT NULL,   -- the roofline observation (JSON), '' without one
  started_unix    REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS measurements (
  id             INTEGER PRIMARY KEY,
  run_id         INTEGER NOT NULL REFERENCES runs(id),
  actions        TEXT NOT NULL,    -- JSON array, from the benchmark's start state
  schedule       TEXT NOT NULL,    -- the ir's compute/write lines
  loop_tree      TEXT NOT NULL,
  plan_features  TEXT NOT NULL,    -- JSON object by feature name
  gflops         REAL NOT NULL,
  retimed_gflops REAL,             -- NULL unless re-timed at the end of the search
  seconds        REAL NOT NULL,    -- into the search
  timing         TEXT,             -- how gflops was timed (the `timing` observation's); NULL
  timed_runs     INTEGER,          -- in files written before 2026-12-06
  UNIQUE (run_id, schedule)
);
CREATE INDEX IF NOT EXISTS runs_by_program ON runs (program_id);
)sql";

constexpr char kRecordsView[] = R"sql(
CREATE VIEW IF NOT EXISTS records AS
  SELECT m.id AS id, p.id AS program_id, p.program AS program, p.split AS split,
         p.flops AS flops, r.id AS run_id, r.benchmark AS benchmark, r.host_cpu AS host_cpu,
         r.isa AS isa, r.action_space AS action_space, r.search AS search,
         m.actions AS actions, m.schedule AS schedule, m.loop_tree AS loop_tree,
         m.plan_features AS plan_features, m.gflops AS gflops,
         m.retimed_gflops AS retimed_gflops, r.peak_gflops AS peak_gflops,
         r.roofline_gflops AS roofline_gflops,
         m.gflops / r.peak_gflops AS fraction_of_peak,
         CASE WHEN r.roofline_gflops > 0 THEN m.gflops / r.roofline_gflops END
           AS fraction_of_roofline,
         m.seconds AS seconds, m.timing AS timing, m.timed_runs AS timed_runs
  FROM measurements m JOIN runs r ON m.run_id = r.id JOIN programs p ON r.program_id = p.id;
)sql";

// A file written before measurements had `timing` and `timed_runs` gains them (NULL in its
// rows), and its `records` view is made again with them; all or nothing.
constexpr char kAddTiming[] = R"sql(
ALTER TABLE measurements ADD COLUMN timing TEXT;
ALTER TABLE measurements ADD COLUMN timed_runs INTEGER;
DROP VIEW IF EXISTS records;
)sql";

bool HasTimingColumns(sqlite3* db) {
  return SqliteStatement(db, "SELECT timing, timed_runs FROM measurements LIMIT 0").ok();
}

// Runs `sql`; its error message, or "" when it succeeded.
std::string Exec(sqlite3* db, const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &error) == SQLITE_OK) return "";
  std::string message = error != nullptr ? error : "unknown error";
  sqlite3_free(error);
  return message;
}

bool IsScheduleLine(absl::string_view line) { return absl::StartsWith(line, "compute 1:"); }

}  // namespace

std::string ProgramOfIr(const std::string& ir) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(ir, '\n', absl::SkipEmpty())) {
    if (IsScheduleLine(line)) break;
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string ScheduleOfIr(const std::string& ir) {
  std::string out;
  bool schedule = false;
  for (absl::string_view line : absl::StrSplit(ir, '\n', absl::SkipEmpty())) {
    schedule = schedule || IsScheduleLine(line);
    if (schedule && !absl::StartsWith(line, "cursor")) absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string RecordSplit(const std::string& program, bool evaluation) {
  if (evaluation) return "evaluation";
  // FNV-1a's low bits follow a text's last characters (programs differing in one size fell 16%
  // to one residue), so mixed by MurmurHash3's finalizer first.
  uint64_t h = datasets::Fnv1a64(program);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h % 10 == 0 ? "validation" : "train";
}

absl::StatusOr<std::unique_ptr<TuningRecords>> TuningRecords::Open(const std::string& path) {
  // Opened without a schema first: a database holding tables of another program is refused
  // before anything is written to it.
  ASSIGN_OR_RETURN(sqlite3* const db, OpenSqliteFile(path, "", "tuning records file"));
  std::unique_ptr<TuningRecords> records(new TuningRecords(db, path));
  {
    SqliteStatement foreign(
        db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN ('meta', "
            "'programs', 'evaluation_programs', 'runs', 'measurements', 'remeasurements') "
            "LIMIT 1");
    if (!foreign.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, " is not a LoopTool tuning records file: ", sqlite3_errmsg(db)));
    }
    if (sqlite3_step(foreign.get()) == SQLITE_ROW) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " has tables that are not LoopTool's records ('",
                       foreign.ColumnText(0), "'); not writing to it"));
    }
  }
  char* error = nullptr;
  if (sqlite3_exec(db, kSchema, nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string message = error != nullptr ? error : "unknown error";
    sqlite3_free(error);
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a LoopTool tuning records file: ", message));
  }
  if (!HasTimingColumns(db)) {
    // Another writer may add them first: then this one's transaction is rolled back, and the
    // columns are there.
    std::string message = Exec(db, "BEGIN IMMEDIATE");
    if (message.empty()) message = Exec(db, kAddTiming);
    if (message.empty()) message = Exec(db, kRecordsView);
    if (message.empty()) message = Exec(db, "COMMIT");
    if (!message.empty()) {
      Exec(db, "ROLLBACK");
      if (!HasTimingColumns(db)) {
        return absl::InternalError(absl::StrCat(
            "tuning records ", path, ": cannot add the timing columns: ", message));
      }
    }
  }
  if (const std::string message = Exec(db, kRecordsView); !message.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a LoopTool tuning records file: ", message));
  }
  {
    SqliteStatement put(db, "INSERT OR IGNORE INTO meta (key, value) VALUES ('format', ?1)");
    if (!put.ok()) return records->Error("write its format");
    put.Text(1, kFormat);
    if (sqlite3_step(put.get()) != SQLITE_DONE) return records->Error("write its format");
  }
  SqliteStatement format(db, "SELECT value FROM meta WHERE key = 'format'");
  if (!format.ok() || sqlite3_step(format.get()) != SQLITE_ROW) {
    return records->Error("read its format");
  }
  if (const std::string f = format.ColumnText(0); f != kFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds records of format '", f, "'; this looptool writes '",
                     kFormat, "'"));
  }
  // Tables of the same names but other shapes (another program's file) are refused here.
  SqliteStatement probe(
      db, "SELECT id, program_id, actions, schedule, plan_features, gflops, retimed_gflops, "
          "fraction_of_peak, fraction_of_roofline, timing, timed_runs FROM records LIMIT 0");
  if (!probe.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " has tables that are not LoopTool's records: ", sqlite3_errmsg(db)));
  }
  return records;
}

TuningRecords::~TuningRecords() { sqlite3_close(db_); }

absl::Status TuningRecords::Error(const char* what) const {
  return absl::InternalError(
      absl::StrCat("tuning records ", path_, ": cannot ", what, ": ", sqlite3_errmsg(db_)));
}

absl::Status TuningRecords::AddEvaluationPrograms(
    const std::vector<std::pair<std::string, std::string>>& programs) {
  absl::MutexLock lock(&mu_);
  if (sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Error("begin a transaction");
  }
  absl::Status status = [&]() -> absl::Status {
    for (const auto& [program, benchmark] : programs) {
      SqliteStatement put(db_, "INSERT OR IGNORE INTO evaluation_programs (program, benchmark) "
                               "VALUES (?1, ?2)");
      if (!put.ok()) return Error("write");
      put.Text(1, program);
      put.Text(2, benchmark);
      if (sqlite3_step(put.get()) != SQLITE_DONE) return Error("write");
    }
    SqliteStatement move(db_, "UPDATE programs SET split = 'evaluation' WHERE program IN "
                              "(SELECT program FROM evaluation_programs)");
    if (!move.ok() || sqlite3_step(move.get()) != SQLITE_DONE) return Error("write");
    return absl::OkStatus();
  }();
  const char* end = status.ok() ? "COMMIT" : "ROLLBACK";
  if (sqlite3_exec(db_, end, nullptr, nullptr, nullptr) != SQLITE_OK && status.ok()) {
    return Error("commit");
  }
  return status;
}

absl::StatusOr<int64_t> TuningRecords::CountEvaluationPrograms() {
  absl::MutexLock lock(&mu_);
  SqliteStatement count(db_, "SELECT count(*) FROM evaluation_programs");
  if (!count.ok() || sqlite3_step(count.get()) != SQLITE_ROW) return Error("read");
  return count.ColumnInt(0);
}

absl::StatusOr<int64_t> TuningRecords::BeginRun(const RecordedRun& run) {
  if (run.program.empty() || run.benchmark.empty()) {
    return absl::InvalidArgumentError("a recorded run needs a program and a benchmark");
  }
  absl::MutexLock lock(&mu_);
  SqliteStatement program(
      db_,
      "INSERT INTO programs (program, benchmark, flops, split) VALUES (?1, ?2, ?3, CASE WHEN "
      "EXISTS (SELECT 1 FROM evaluation_programs WHERE program = ?1) THEN 'evaluation' ELSE ?4 "
      "END) ON CONFLICT (program) DO NOTHING");
  if (!program.ok()) return Error("write");
  program.Text(1, run.program);
  program.Text(2, run.benchmark);
  program.Int(3, run.flops);
  program.Text(4, RecordSplit(run.program, /*evaluation=*/false));
  if (sqlite3_step(program.get()) != SQLITE_DONE) return Error("write");
  SqliteStatement insert(
      db_,
      "INSERT INTO runs (program_id, benchmark, host_cpu, isa, server, action_space, search, "
      "seed, time_limit, start_actions, peak_gflops, roofline_gflops, roofline, started_unix) "
      "SELECT id, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14 FROM programs WHERE "
      "program = ?1");
  if (!insert.ok()) return Error("write");
  insert.Text(1, run.program);
  insert.Text(2, run.benchmark);
  insert.Text(3, run.host_cpu);
  insert.Text(4, run.isa);
  insert.Text(5, run.server);
  insert.Text(6, run.action_space);
  insert.Text(7, run.search);
  insert.Int(8, static_cast<int64_t>(run.seed));
  insert.Real(9, run.time_limit_seconds);
  insert.Text(10, nlohmann::json(run.start_actions).dump());
  insert.Real(11, run.peak_gflops);
  insert.Real(12, run.roofline_gflops);
  insert.Text(13, run.roofline);
  insert.Real(14, absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  if (sqlite3_step(insert.get()) != SQLITE_DONE || sqlite3_changes(db_) != 1) {
    return Error("write");
  }
  return sqlite3_last_insert_rowid(db_);
}

absl::StatusOr<bool> TuningRecords::AddMeasurement(int64_t run, const MeasuredKernel& kernel) {
  if (!(kernel.gflops > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("refusing to record a kernel at ", kernel.gflops, " GFLOPS"));
  }
  absl::MutexLock lock(&mu_);
  SqliteStatement start(db_, "SELECT start_actions FROM runs WHERE id = ?1");
  if (!start.ok()) return Error("read");
  start.Int(1, run);
  const int rc = sqlite3_step(start.get());
  if (rc == SQLITE_DONE) {
    return absl::InvalidArgumentError(absl::StrCat("no recorded run ", run, " in ", path_));
  }
  if (rc != SQLITE_ROW) return Error("read");
  nlohmann::json actions = nlohmann::json::parse(start.ColumnText(0), nullptr, false);
  if (!actions.is_array()) {
    return absl::DataLossError(
        absl::StrCat("run ", run, " of ", path_, ": its start actions are not a JSON array"));
  }
  for (const std::string& a : kernel.actions) actions.push_back(a);
  SqliteStatement insert(
      db_,
      "INSERT INTO measurements (run_id, actions, schedule, loop_tree, plan_features, gflops, "
      "seconds, timing, timed_runs) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
      "ON CONFLICT (run_id, schedule) DO NOTHING");
  if (!insert.ok()) return Error("write");
  insert.Int(1, run);
  insert.Text(2, actions.dump());
  insert.Text(3, ScheduleOfIr(kernel.kernel));
  insert.Text(4, kernel.loop_tree);
  insert.Text(5, kernel.plan_features);
  insert.Real(6, kernel.gflops);
  insert.Real(7, kernel.seconds);
  // The `timing` observation's JSON; a kernel without one (a server before it) gets NULLs.
  const nlohmann::json timing = nlohmann::json::parse(kernel.timing, nullptr, false);
  if (timing.is_object() && timing.value("timing", nlohmann::json()).is_string() &&
      timing.value("timed_runs", nlohmann::json()).is_number_integer()) {
    insert.Text(8, timing["timing"].get<std::string>());
    insert.Int(9, timing["timed_runs"].get<int64_t>());
  }
  if (sqlite3_step(insert.get()) != SQLITE_DONE) return Error("write");
  return sqlite3_changes(db_) > 0;
}

absl::Status TuningRecords::SetRetimed(int64_t run, const std::string& kernel, double gflops) {
  absl::MutexLock lock(&mu_);
  SqliteStatement update(
      db_, "UPDATE measurements SET retimed_gflops = ?3 WHERE run_id = ?1 AND schedule = ?2");
  if (!update.ok()) return Error("write");
  update.Int(1, run);
  update.Text(2, ScheduleOfIr(kernel));
  update.Real(3, gflops);
  if (sqlite3_step(update.get()) != SQLITE_DONE) return Error("write");
  if (sqlite3_changes(db_) == 0) {
    return absl::NotFoundError(absl::StrCat("run ", run, " of ", path_, " has no such kernel"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RecordedMeasurement>> TuningRecords::Measurements(int64_t run) {
  absl::MutexLock lock(&mu_);
  SqliteStatement read(db_,
                       "SELECT actions, schedule, loop_tree, plan_features, gflops, "
                       "coalesce(retimed_gflops, 0), seconds FROM measurements WHERE run_id = ?1 "
                       "ORDER BY id");
  if (!read.ok()) return Error("read");
  read.Int(1, run);
  std::vector<RecordedMeasurement> out;
  int rc;
  while ((rc = sqlite3_step(read.get())) == SQLITE_ROW) {
    RecordedMeasurement m;
    m.run = run;
    const nlohmann::json actions = nlohmann::json::parse(read.ColumnText(0), nullptr, false);
    if (!actions.is_array()) {
      return absl::DataLossError(absl::StrCat("a measurement of run ", run, " of ", path_,
                                              ": its actions are not a JSON array"));
    }
    for (const nlohmann::json& a : actions) {
      if (a.is_string()) m.actions.push_back(a.get<std::string>());
    }
    m.schedule = read.ColumnText(1);
    m.loop_tree = read.ColumnText(2);
    m.plan_features = read.ColumnText(3);
    m.gflops = read.ColumnReal(4);
    m.retimed_gflops = read.ColumnReal(5);
    m.seconds = read.ColumnReal(6);
    out.push_back(std::move(m));
  }
  if (rc != SQLITE_DONE) return Error("read");
  return out;
}

absl::StatusOr<std::string> TuningRecords::SplitOfProgram(const std::string& program) {
  absl::MutexLock lock(&mu_);
  SqliteStatement read(db_, "SELECT split FROM programs WHERE program = ?1");
  if (!read.ok()) return Error("read");
  read.Text(1, program);
  const int rc = sqlite3_step(read.get());
  if (rc == SQLITE_DONE) return absl::NotFoundError("no such program in the records");
  if (rc != SQLITE_ROW) return Error("read");
  return read.ColumnText(0);
}

}  // namespace looptool::client
