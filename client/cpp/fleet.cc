#include "client/cpp/fleet.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/cpp/policy.h"
#include "nlohmann/json.hpp"
#include "util/status_macros.h"

namespace looptool::client {

bool Storable(const SearchOptions& options, const SearchResult& result) {
  return options.retime_top == 0 || result.retimed || result.states_evaluated <= 1;
}

Roofline ObserveRoofline(Env& env) {
  Roofline out;
  absl::StatusOr<Value> roofline = env.Observe("roofline");
  if (!roofline.ok()) return out;
  const nlohmann::json j = nlohmann::json::parse(roofline->text, nullptr, false);
  if (!j.is_object() || !j.contains("gflops") || !j["gflops"].is_number()) return out;
  out.gflops = j["gflops"].get<double>();
  out.json = roofline->text;
  if (j.contains("level") && j["level"].is_string()) out.level = j["level"].get<std::string>();
  if (j.contains("memory_bound") && j["memory_bound"].is_boolean()) {
    out.memory_bound = j["memory_bound"].get<bool>();
  }
  return out;
}

absl::Status RecordEvaluationPrograms(TuningRecords& records,
                                      std::shared_ptr<Connection> connection) {
  ASSIGN_OR_RETURN(const int64_t known, records.CountEvaluationPrograms());
  if (known > 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::vector<DatasetInfo> datasets, connection->Datasets());
  std::vector<std::pair<std::string, std::string>> programs;
  for (const DatasetInfo& d : datasets) {
    if (d.test_size == 0) continue;
    ASSIGN_OR_RETURN(const std::vector<std::string> uris,
                     connection->DatasetBenchmarks(d.name, "test"));
    for (const std::string& uri : uris) {
      ASSIGN_OR_RETURN(Env env, Env::Start(connection, uri, "loop_tool"));
      absl::StatusOr<Value> ir = env.Observe("ir");
      // The program is what is recorded; a session that fails to end expires on the server.
      env.Close().IgnoreError();
      if (!ir.ok()) return ir.status();
      programs.emplace_back(ProgramOfIr(ir->text), uri);
    }
  }
  return records.AddEvaluationPrograms(programs);
}

namespace {

// The code generator's target in `env`'s session (kernel_abi's "isa"), "" where it says none.
absl::StatusOr<std::string> SessionIsa(Env& env) {
  ASSIGN_OR_RETURN(const Value abi, env.Observe("kernel_abi"));
  const nlohmann::json j = nlohmann::json::parse(abi.text, nullptr, false);
  if (j.is_object() && j.contains("isa") && j["isa"].is_string()) {
    return j["isa"].get<std::string>();
  }
  return std::string();
}

// Starts the records' run of `env`'s benchmark (in the state the search starts from, reached by
// `prefix`), with the program's bound `bound`.
absl::StatusOr<int64_t> BeginRecordedRun(Env& env, const Connection& connection,
                                         const TuneOptions& options,
                                         const std::vector<std::string>& prefix,
                                         const Roofline& bound) {
  RecordedRun run;
  run.benchmark = env.benchmark();
  ASSIGN_OR_RETURN(const Value ir, env.Observe("ir"));
  run.program = ProgramOfIr(ir.text);
  ASSIGN_OR_RETURN(const Value flops, env.Observe("flop_count"));
  run.flops = flops.integer;
  ASSIGN_OR_RETURN(run.isa, SessionIsa(env));
  ASSIGN_OR_RETURN(const Value peak, env.Observe("peak_gflops"));
  run.peak_gflops = peak.number;
  run.host_cpu = connection.host_cpu();
  run.server = connection.address();
  run.action_space = options.action_space;
  run.search = options.search.search.Name();
  run.seed = options.search.seed;
  run.time_limit_seconds = options.search.time_limit_seconds;
  run.start_actions = prefix;
  run.roofline_gflops = bound.gflops;
  run.roofline = bound.json;
  return options.records->BeginRun(run);
}

}  // namespace

absl::StatusOr<TuneResult> TuneOne(Env& env, const Connection& connection,
                                   const TuneOptions& options) {
  TuneResult out;
  out.benchmark = env.benchmark();
  out.server = connection.address();
  out.host_cpu = connection.host_cpu();
  const std::string key = options.store_key.empty() ? env.benchmark() : options.store_key;
  std::vector<std::string> prefix;
  // The stored schedule's actions, where the search starts from it (`prefix`, empty when it is
  // the start state), and where they no longer replay (the space changed since: any result of
  // this run supersedes them, whatever number they were stored at).
  std::optional<std::vector<std::string>> started_from_stored, unusable_stored;
  if (options.store != nullptr) {
    ASSIGN_OR_RETURN(const std::optional<StoredSchedule> found,
                     options.store->Find(key, out.host_cpu, options.action_space));
    if (found.has_value() && found->actions.empty()) started_from_stored = found->actions;
    if (found.has_value() && !found->actions.empty()) {
      absl::StatusOr<StepResult> replayed = env.StepNamed(found->actions);
      if (replayed.ok()) {
        prefix = found->actions;
        started_from_stored = found->actions;
      } else if (replayed.status().code() == absl::StatusCode::kInvalidArgument) {
        // The stored actions do not apply (a space that changed since): start fresh.
        unusable_stored = found->actions;
        RETURN_IF_ERROR(env.Reset());
      } else {
        return replayed.status();
      }
    }
  }
  SearchOptions search = options.search;
  if (options.loop_set_by_isa) {  // a server that does not say: the AVX-512 policy
    const absl::StatusOr<std::string> isa = SessionIsa(env);
    search.policy = &Policy::LoopSetFor(isa.ok() ? *isa : "");
  }
  absl::Status recording;  // the records' first error
  if (options.records != nullptr) {
    out.roofline = ObserveRoofline(env);  // the program's, not the schedule's: asked once
    ASSIGN_OR_RETURN(const int64_t run,
                     BeginRecordedRun(env, connection, options, prefix, out.roofline));
    out.records_run = run;
    TuningRecords* records = options.records;
    search.on_measured = [records, run, &recording, &out](const MeasuredKernel& k) {
      if (!recording.ok()) return;
      absl::StatusOr<bool> added = records->AddMeasurement(run, k);
      if (!added.ok()) recording = added.status();
      if (added.ok() && *added) ++out.recorded;
    };
    search.on_retimed = [records, run, &recording](const std::string& kernel, double gflops) {
      const absl::Status s = records->SetRetimed(run, kernel, gflops);
      if (recording.ok() && !s.ok() && !absl::IsNotFound(s)) recording = s;
    };
  }
  ASSIGN_OR_RETURN(out.search, Search(env, search));
  RETURN_IF_ERROR(recording);
  if (options.records == nullptr) out.roofline = ObserveRoofline(env);
  // A compute bound is the peak: the one measured beside the re-timed kernel, when there is one.
  if (out.search.peak_beside_retimed && !out.roofline.memory_bound && out.roofline.gflops > 0) {
    out.roofline.gflops = out.search.peak_gflops;
  }
  out.stored_prefix = static_cast<int>(prefix.size());
  out.search.actions.insert(out.search.actions.begin(), prefix.begin(), prefix.end());
  if (options.store != nullptr && Storable(options.search, out.search)) {
    StoredSchedule s;
    s.benchmark = key;
    s.host_cpu = out.host_cpu;
    s.action_space = options.action_space;
    s.actions = out.search.actions;
    s.loop_tree = out.search.loop_tree;
    s.gflops = out.search.gflops;
    s.peak_gflops = out.search.peak_gflops;
    s.search = options.search.search.Name();
    s.server = out.server;
    s.seconds = out.search.seconds;
    // A search from the stored schedule timed it in this run (its start) beside its result: that
    // comparison decides, not the number stored by another run (an older code generator's); a
    // stored schedule that no longer replays gives way to any result.
    std::optional<std::vector<std::string>> measured_stored = unusable_stored;
    if (started_from_stored.has_value() && out.search.start_gflops > 0 &&
        out.search.gflops >= out.search.start_gflops) {
      measured_stored = started_from_stored;
    }
    ASSIGN_OR_RETURN(out.stored, options.store->Offer(s, measured_stored));
  }
  return out;
}

ConnectionOptions FleetConnectionOptions() {
  ConnectionOptions options;
  options.connect_timeout = absl::Seconds(5);
  options.call_timeout = absl::Seconds(15);
  return options;
}

namespace {

// Failures that say nothing about the benchmark: tried again on another server.
bool Transient(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
      return true;
    default:
      return false;
  }
}

// Whether the server still answers (within 2 s, without waiting for a broken connection).
bool Answers(Connection& c) {
  compiler_gym::GetVersionReply reply;
  return c.Invoke([&](grpc::ClientContext* ctx) { return c.stub().GetVersion(ctx, {}, &reply); },
                  absl::Seconds(2), /*wait_for_ready=*/false)
      .ok();
}

// The queue of benchmarks and the results, shared by the servers' threads.
class Fleet {
 public:
  Fleet(const std::vector<FleetBenchmark>& benchmarks, const FleetOptions& options)
      : options_(options),
        benchmarks_(benchmarks),
        results_(benchmarks.size()),
        last_answer_(absl::Now()) {
    for (size_t i = 0; i < benchmarks.size(); ++i) {
      results_[i].benchmark = benchmarks[i].uri;
      queue_.push_back(i);
    }
  }

  // One server's thread: connects (again, after failures), takes benchmarks and tunes them.
  void Serve(const std::string& address) {
    std::shared_ptr<Connection> connection;
    auto drop = [&] {
      connection.reset();
      Connected(-1);
    };
    while (!Done()) {
      if (connection != nullptr && !Answers(*connection)) drop();
      if (connection == nullptr) {
        absl::StatusOr<std::shared_ptr<Connection>> c =
            Connection::Connect(address, options_.connection);
        if (!c.ok()) {
          NoAnswer(c.status());
          absl::SleepFor(options_.retry_interval);
          continue;
        }
        connection = *std::move(c);
        Connected(+1);
      }
      std::optional<size_t> job = Take();
      if (!job.has_value()) continue;
      absl::StatusOr<TuneResult> r = Attempt(connection, *job);
      const bool answers = Answers(*connection);
      if (r.ok() && answers) {
        Finish(*job, *std::move(r));
      } else if (!answers) {
        // Its search was cut short or lost with the server: another server does it again.
        Retry(*job, r.ok() ? absl::UnavailableError(absl::StrCat(
                                 "server ", address, " stopped answering during the search"))
                           : r.status());
        drop();
      } else if (Transient(r.status())) {
        Retry(*job, r.status());
      } else {
        Fail(*job, r.status());
      }
    }
    if (connection != nullptr) Connected(-1);
  }

  std::vector<TuneResult> results() && {
    absl::MutexLock lock(&mu_);
    return std::move(results_);
  }

 private:
  absl::StatusOr<TuneResult> Attempt(const std::shared_ptr<Connection>& connection, size_t job) {
    {
      absl::MutexLock lock(&mu_);
      ++results_[job].attempts;
    }
    const FleetBenchmark& b = benchmarks_[job];
    const std::string& space = options_.tune.action_space;
    ASSIGN_OR_RETURN(Env env, b.program.empty()
                                  ? Env::Start(connection, b.uri, space)
                                  : Env::StartProgram(connection, b.uri, b.program, space));
    TuneOptions tune = options_.tune;
    tune.store_key = b.store_key;
    return TuneOne(env, *connection, tune);
  }

  bool Done() {
    absl::MutexLock lock(&mu_);
    return queue_.empty() && in_flight_ == 0;
  }

  // The next benchmark, or nullopt after a short wait (the caller checks Done()).
  std::optional<size_t> Take() {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(this, &Fleet::Ready), options_.retry_interval);
    if (queue_.empty()) return std::nullopt;
    const size_t job = queue_.front();
    queue_.pop_front();
    ++in_flight_;
    return job;
  }

  void Finish(size_t job, TuneResult r) {
    absl::MutexLock lock(&mu_);
    r.attempts = results_[job].attempts;
    results_[job] = std::move(r);
    Report(job);
  }

  void Fail(size_t job, absl::Status status) {
    absl::MutexLock lock(&mu_);
    results_[job].status = std::move(status);
    Report(job);
  }

  void Retry(size_t job, absl::Status status) {
    absl::MutexLock lock(&mu_);
    if (results_[job].attempts >= options_.max_attempts) {
      results_[job].status = absl::Status(
          status.code(), absl::StrCat("given up after ", results_[job].attempts,
                                      " attempts; the last: ", status.message()));
      Report(job);
      return;
    }
    --in_flight_;
    queue_.push_front(job);  // next, on whichever server asks first
  }

  // Whether a benchmark waits, or none is in flight (so that waiting is over).
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || in_flight_ == 0;
  }

  // Reports `job` (done, with or without a result). Requires mu_.
  void Report(size_t job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    --in_flight_;
    if (options_.on_result) options_.on_result(results_[job]);
  }

  // A server's connection came (+1) or went (-1).
  void Connected(int change) {
    absl::MutexLock lock(&mu_);
    connected_ += change;
    ever_connected_ = true;
    last_answer_ = absl::Now();
  }

  // A server did not answer: when none is connected and none has been for give_up_after, the
  // queued benchmarks fail.
  void NoAnswer(const absl::Status& why) {
    absl::MutexLock lock(&mu_);
    const absl::Duration limit = ever_connected_ ? options_.give_up_after
                                                 : std::min(options_.give_up_after,
                                                            options_.give_up_unreached);
    if (connected_ > 0 || absl::Now() - last_answer_ < limit) return;
    while (!queue_.empty()) {
      const size_t job = queue_.front();
      queue_.pop_front();
      ++in_flight_;
      results_[job].status = absl::UnavailableError(
          absl::StrCat("no server answered for ", absl::FormatDuration(absl::Trunc(absl::Now() - last_answer_, absl::Seconds(1))),
                       "; the last error: ", why.message()));
      Report(job);
    }
  }

  const FleetOptions& options_;
  const std::vector<FleetBenchmark>& benchmarks_;
  absl::Mutex mu_;
  std::vector<TuneResult> results_ ABSL_GUARDED_BY(mu_);
  std::deque<size_t> queue_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int connected_ ABSL_GUARDED_BY(mu_) = 0;  // servers with a live connection
  bool ever_connected_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_answer_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::vector<TuneResult> TuneAcross(const std::vector<std::string>& servers,
                                   const std::vector<std::string>& benchmarks,
                                   const FleetOptions& options) {
  std::vector<FleetBenchmark> named;
  for (const std::string& uri : benchmarks) named.push_back({uri, "", ""});
  return TuneAcross(servers, named, options);
}

std::vector<TuneResult> TuneAcross(const std::vector<std::string>& servers,
                                   const std::vector<FleetBenchmark>& benchmarks,
                                   const FleetOptions& options) {
  Fleet fleet(benchmarks, options);
  std::vector<std::thread> threads;
  for (const std::string& address : servers) {
    threads.emplace_back([&fleet, address] { fleet.Serve(address); });
  }
  for (std::thread& t : threads) t.join();
  return std::move(fleet).results();
}

}  // namespace looptool::client
