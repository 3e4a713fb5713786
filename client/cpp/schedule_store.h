// ScheduleStore: the best schedule found for each (benchmark, host CPU, action space), kept in an
// SQLite file, so that a network's layers are tuned once: later runs start from what is stored,
// and `looptool schedules` lists and exports it. Safe to share between threads and processes
// (SQLite's locking; writers wait up to 10 s for each other).
#ifndef LOOPTOOL_CLIENT_CPP_SCHEDULE_STORE_H_
#define LOOPTOOL_CLIENT_CPP_SCHEDULE_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

struct sqlite3;

namespace looptool::client {

// One tuned schedule: the actions that reach it from the benchmark's start state, and what it
// measured.
struct StoredSchedule {
  // The key.
  std::string benchmark;     // URI
  std::string host_cpu;      // the CPU it was timed on (Connection::host_cpu())
  std::string action_space;  // the space `actions` are named in
  // The schedule.
  std::vector<std::string> actions;
  std::string loop_tree;
  double gflops = 0;
  double peak_gflops = 0;    // the measured FMA peak of the server that timed it
  // Where it came from.
  std::string search;        // "evolution"
  std::string server;        // HOST:PORT
  double seconds = 0;        // the search's time, this run
  int64_t updated_unix = 0;  // set by Offer()
};

class ScheduleStore {
 public:
  // Opens (creating when missing) the store at `path`. INVALID_ARGUMENT when the file is not an
  // SQLite database or holds a table of another shape; the error says which file.
  static absl::StatusOr<std::unique_ptr<ScheduleStore>> Open(const std::string& path);
  ~ScheduleStore();
  ScheduleStore(const ScheduleStore&) = delete;
  ScheduleStore& operator=(const ScheduleStore&) = delete;

  // The stored schedule of this key, or nullopt.
  absl::StatusOr<std::optional<StoredSchedule>> Find(const std::string& benchmark,
                                                     const std::string& host_cpu,
                                                     const std::string& action_space);
  // Stores `s` when its key has no schedule yet or `s` is faster than the stored one; returns
  // whether it was stored. INVALID_ARGUMENT for an empty key or a non-positive gflops.
  // `measured_stored`: the actions of the stored schedule, which the caller timed in the same run
  // as `s` and found no faster than `s` (a search that started from it), or found unusable (they
  // no longer replay in the action space). Then `s` is stored also
  // where the stored schedule still has those actions, whatever its number: a number measured by
  // another code generator, at another clock or on another day gives way to this run's
  // comparison. A faster schedule another process stored meanwhile (other actions) is kept.
  absl::StatusOr<bool> Offer(
      const StoredSchedule& s,
      const std::optional<std::vector<std::string>>& measured_stored = std::nullopt);
  // Every stored schedule, by benchmark then host; only those whose host CPU contains
  // `host_filter` when it is not empty.
  absl::StatusOr<std::vector<StoredSchedule>> List(const std::string& host_filter = "");

  const std::string& path() const { return path_; }

 private:
  ScheduleStore(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  absl::Status Error(const char* what) const;  // the last SQLite error, with the file named

  absl::Mutex mu_;
  sqlite3* const db_;
  const std::string path_;
};

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_SCHEDULE_STORE_H_
