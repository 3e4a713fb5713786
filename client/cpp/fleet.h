// Tuning many benchmarks, on one server or across several (a fleet), with what is found kept in
// a schedule store. Each server tunes one benchmark at a time; a server that stops answering
// costs only its benchmark in flight, which goes back to the queue for the others; every
// benchmark is reported exactly once, with a result or the reason it has none.
#ifndef LOOPTOOL_CLIENT_CPP_FLEET_H_
#define LOOPTOOL_CLIENT_CPP_FLEET_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cpp/connection.h"
#include "client/cpp/env.h"
#include "client/cpp/schedule_store.h"
#include "client/cpp/search/search.h"
#include "client/cpp/tuning_records.h"

namespace looptool::client {

struct TuneOptions {
  SearchOptions search;
  std::string action_space = "loop_tool";
  // Where to start from and record into (not owned; nullptr: neither).
  ScheduleStore* store = nullptr;
  // The key the store files the benchmark under (default: the session's benchmark URI).
  std::string store_key;
  // Where every kernel the search measures is recorded (not owned; nullptr: nowhere). Its
  // evaluation programs should be known first (RecordEvaluationPrograms).
  TuningRecords* records = nullptr;
  // `--policy=loop_set`: the search's policy (the policy searches', or evolution's seed) is the
  // built-in loop_set policy of the session's ISA (Policy::LoopSetFor of kernel_abi's "isa";
  // the AVX-512 one where the server does not say), whatever `search.policy` is.
  bool loop_set_by_isa = false;
};

// Gives `records` the programs of the server's test splits (every dataset's), as the server
// prints them, unless it has them already: those are never trained on. One session per
// benchmark, untimed.
absl::Status RecordEvaluationPrograms(TuningRecords& records,
                                      std::shared_ptr<Connection> connection);

// A program's roofline bound on a server (its `roofline` observation): the most GFLOPS any
// schedule can reach, the memory level its data fits in, and whether memory, not the FMA peak,
// sets the bound.
struct Roofline {
  double gflops = 0;  // 0: the server does not serve the bound (an older one) or failed to
  std::string level;
  bool memory_bound = false;
  std::string json;  // the observation as served (backend/costmodel/roofline.h's keys)
  // The percentage of the bound `gflops_reached` is; 0 without a bound.
  double Percent(double gflops_reached) const {
    return gflops > 0 ? 100 * gflops_reached / gflops : 0;
  }
};

// The bound of `env`'s benchmark. Informational: never fails (a bound of 0 instead).
Roofline ObserveRoofline(Env& env);

struct TuneResult {
  std::string benchmark;  // URI
  std::string server;     // HOST:PORT of the server that tuned it
  std::string host_cpu;   // the CPU that server times on
  absl::Status status;    // why there is no result, when not OK
  // When OK: the actions from the benchmark's start state (the stored prefix included) to the
  // best state, its loop tree and its GFLOPS as measured in this run. start_gflops is the state
  // the search started from: the stored schedule's when there was one.
  SearchResult search;
  int stored_prefix = 0;   // leading actions replayed from the store (0: started fresh)
  bool stored = false;     // whether the store kept this result
  int attempts = 0;        // servers it was started on
  Roofline roofline;       // the program's bound on that server
  int64_t records_run = 0;  // with records: the run's id in them, and the kernels it recorded
  int64_t recorded = 0;
};

// Whether a search's result may be offered to a store: unless re-timing was asked for and did
// not happen (a search cut short by a server that went away), whose GFLOPS are the luckiest of
// many measurements and would stand in the store above honest ones. A result of one measured
// state (policy) has nothing to re-time.
bool Storable(const SearchOptions& options, const SearchResult& result);

// Tunes `env`'s benchmark, which must be in its start state, on the server behind `connection`:
// replays the store's schedule for (benchmark, connection.host_cpu(), action space) when there
// is one, searches from there and offers the best to the store when Storable (where the search
// timed the stored schedule, its start, in this run and found the best no slower, or where the
// stored actions no longer replay, the best replaces it whatever number another run stored:
// ScheduleStore::Offer's measured_stored). With
// records, every kernel the search measures is recorded as it is measured. The store's and the
// records' errors are returned, not ignored.
absl::StatusOr<TuneResult> TuneOne(Env& env, const Connection& connection,
                                   const TuneOptions& options);

// Connection options for fleets: a server that went away holds its benchmark until a call on
// it times out, so calls outside the search's own time limit (starting a session) get 15 s, and
// connecting 5 s.
ConnectionOptions FleetConnectionOptions();

struct FleetOptions {
  TuneOptions tune;
  ConnectionOptions connection = FleetConnectionOptions();
  int max_attempts = 3;  // servers a benchmark is started on before it is given up
  // A server that does not answer is tried again after this.
  absl::Duration retry_interval = absl::Seconds(1);
  // No server answering for this long: the benchmarks still queued fail UNAVAILABLE. Until some
  // server has answered once (a mistyped address, a fleet not up), `give_up_unreached` counts.
  absl::Duration give_up_after = absl::Seconds(60);
  absl::Duration give_up_unreached = absl::Seconds(10);
  // Called once per benchmark as it is done (from the servers' threads, one at a time).
  std::function<void(const TuneResult&)> on_result;
};

// A benchmark to tune: one of the servers' (a URI), or a program of the user's, added to each
// server that tunes it under `uri`.
struct FleetBenchmark {
  std::string uri;
  std::string program;    // loop-nest language; empty for the servers' own benchmarks
  std::string store_key;  // what the store files it under (default: `uri`)
};

// Tunes `benchmarks` across `servers` ("HOST:PORT"), one thread per server. Returns one
// result per benchmark, in the order given. A benchmark whose server stopped answering under it
// (or whose search it cut short) is requeued; one that fails on a server that still answers
// (NOT_FOUND, INVALID_ARGUMENT, ...) is reported with that status and not retried.
std::vector<TuneResult> TuneAcross(const std::vector<std::string>& servers,
                                   const std::vector<FleetBenchmark>& benchmarks,
                                   const FleetOptions& options);
// The same for benchmarks of the servers' datasets, by URI.
std::vector<TuneResult> TuneAcross(const std::vector<std::string>& servers,
                                   const std::vector<std::string>& benchmarks,
                                   const FleetOptions& options);

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_FLEET_H_
