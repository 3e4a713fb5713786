// TuningRecords: every kernel the searches measure, kept in an SQLite file as they run, so that
// cost models and policies can be trained on search results (datasets/records/README.md
// documents the file for those who read it; client/python/looptool/records loads it).
//
// A *program* is kept once, as the server prints it (its `ir` up to the schedule), with its FLOPs
// and its split. A *run* is one search of one program on one server: host CPU, ISA, search,
// seed, the FMA peak and the program's roofline bound there. A *measurement* is one kernel a run
// measured: the actions that reach it from the benchmark's start state, its schedule, loop tree,
// plan features (the server cost model's view) and GFLOPS, and its re-timed GFLOPS when the
// search re-timed it. A run keeps each kernel once (SearchOptions::on_measured's contract).
//
// Splits are by program: "evaluation" for every program of the servers' test splits (the test
// matmuls, the model datasets: never trained on; AddEvaluationPrograms), else "validation" for
// one in ten by the hash of the program text (RecordSplit), else "train".
//
// Safe to share between threads (a mutex) and processes (SQLite's locking, write-ahead log;
// writers wait up to 10 s for each other). The file must be on a local filesystem.
#ifndef LOOPTOOL_CLIENT_CPP_TUNING_RECORDS_H_
#define LOOPTOOL_CLIENT_CPP_TUNING_RECORDS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/cpp/search/search.h"

struct sqlite3;

namespace looptool::client {

// One search of one program, as the records keep it.
struct RecordedRun {
  std::string benchmark;     // the URI it was tuned under
  std::string program;       // as the server prints it (ProgramOfIr)
  int64_t flops = 0;         // of one run of the kernel (flop_count)
  std::string host_cpu;
  std::string isa;           // the code generator's target ("avx512")
  std::string server;        // HOST:PORT
  std::string action_space;
  std::string search;        // "evolution"
  uint64_t seed = 0;
  double time_limit_seconds = 0;
  std::vector<std::string> start_actions;  // a stored schedule the search started from
  double peak_gflops = 0;
  double roofline_gflops = 0;  // 0: the server gave no bound
  std::string roofline;        // the roofline observation (JSON), "" without one
};

// A stored measurement, as read back.
struct RecordedMeasurement {
  int64_t run = 0;
  std::vector<std::string> actions;  // from the benchmark's start state
  std::string schedule;              // the kernel's schedule lines (ScheduleOfIr)
  std::string loop_tree;
  std::string plan_features;
  double gflops = 0;
  double retimed_gflops = 0;         // 0: not re-timed
  double seconds = 0;
};

// The program part of an `ir` observation (the lines before the first "compute"), and the
// schedule part without the cursor.
std::string ProgramOfIr(const std::string& ir);
std::string ScheduleOfIr(const std::string& ir);

// "evaluation", "validation" or "train" (above), given whether the program is an evaluation one.
std::string RecordSplit(const std::string& program, bool evaluation);

class TuningRecords {
 public:
  // Opens (creating when missing) the records at `path`. INVALID_ARGUMENT when the file is not
  // an SQLite database or holds tables of another shape; the error names the file. A file
  // written before measurements kept their timing gains the `timing` and `timed_runs` columns
  // (NULL in its rows) and its view them, all or nothing (INTERNAL when that fails).
  static absl::StatusOr<std::unique_ptr<TuningRecords>> Open(const std::string& path);
  ~TuningRecords();
  TuningRecords(const TuningRecords&) = delete;
  TuningRecords& operator=(const TuningRecords&) = delete;

  // The evaluation programs (program text, benchmark URI): kept, and programs recorded from now
  // on that equal one are in the "evaluation" split; programs recorded before are moved there.
  absl::Status AddEvaluationPrograms(
      const std::vector<std::pair<std::string, std::string>>& programs);
  absl::StatusOr<int64_t> CountEvaluationPrograms();

  // Starts a run (adding its program when new); returns the run's id. INVALID_ARGUMENT for an
  // empty program or benchmark.
  absl::StatusOr<int64_t> BeginRun(const RecordedRun& run);
  // One measured kernel of `run`: `kernel.actions` are from the search's start, and the run's
  // start_actions are put before them. Returns false (and keeps nothing) when the run has the
  // kernel already. INVALID_ARGUMENT for a non-positive gflops or an unknown run.
  absl::StatusOr<bool> AddMeasurement(int64_t run, const MeasuredKernel& kernel);
  // The re-timed GFLOPS of a kernel of `run` (MeasuredKernel::kernel); NOT_FOUND when the run
  // has no such kernel.
  absl::Status SetRetimed(int64_t run, const std::string& kernel, double gflops);

  // Reading back, for tests and summaries: the measurements of `run` in the order kept; the
  // split of a program.
  absl::StatusOr<std::vector<RecordedMeasurement>> Measurements(int64_t run);
  absl::StatusOr<std::string> SplitOfProgram(const std::string& program);

  const std::string& path() const { return path_; }

 private:
  TuningRecords(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  absl::Status Error(const char* what) const;  // the last SQLite error, with the file named

  absl::Mutex mu_;
  sqlite3* const db_;
  const std::string path_;
};

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_TUNING_RECORDS_H_
