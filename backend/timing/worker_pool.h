// WorkerPool: the KernelTimer the server uses. Kernels are compiled, verified and timed in
// worker processes (worker_main.h), one pinned to each measurement core, never in the caller's
// process. Requests wait for a free worker in one queue per tenant (the service's session),
// served round-robin, so one session's many or slow kernels cannot starve another's. A kernel
// whose estimated cost (cost_estimate.h) exceeds max_kernel_seconds is refused before it runs
// (RESOURCE_EXHAUSTED). A worker that crashes (INTERNAL) or overruns the deadline
// (DEADLINE_EXCEEDED) is killed and replaced; only that request fails. What the worker answers
// keeps KernelTimer's error contract: RESOURCE_EXHAUSTED for code too large, INTERNAL for a
// kernel that cannot be generated or fails verification (any other code a worker sends is
// INTERNAL too), with the worker's message. Results are cached by (program, schedule), failures included, so a schedule
// that crashed or hung is not run again. A worker that dies while idle is reaped and replaced
// by a monitor thread; the next request never pays for it. Thread-safe.
#ifndef LOOPTOOL_BACKEND_TIMING_WORKER_POOL_H_
#define LOOPTOOL_BACKEND_TIMING_WORKER_POOL_H_

#include <sys/types.h>

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "backend/codegen/isa.h"
#include "backend/env/kernel_timer.h"
#include "backend/timing/measurement_cache.h"
#include "backend/timing/worker_protocol.h"

namespace looptool {

class WorkerPool final : public KernelTimer {
 public:
  struct Options {
    std::vector<int> cores;          // one worker pinned to each; empty: one unpinned worker
    Isa isa = DetectIsa();           // the target kernels are generated for
    int64_t stream_output_min_bytes = 0;  // CodegenOptions::stream_output_min_bytes
    double budget_ms = 10;           // timing budget per new schedule (adaptive: its cap)
    bool adaptive_timing = true;     // see LocalTimer::Options::adaptive
    int max_loops = 16;              // the loop trees callers send may have this many loops
    double deadline_seconds = 30;    // a request still running after this is a hang
    double max_kernel_seconds = 10;  // refuse kernels estimated to cost more (0: no bound);
                                     // never more than deadline_seconds
    size_t max_cached = 1 << 16;     // cached results (MeasurementCache) ...
    int64_t max_cached_bytes = int64_t{64} << 20;  // ... and their bytes
    std::string executable = "/proc/self/exe";  // a binary that calls MaybeRunKernelWorker
    double monitor_period_seconds = 1;  // how often idle workers are checked for life
    int max_pending_prepares = 4;    // PrepareFor hints waiting to be sent; more are dropped
                                     // (0: every hint dropped)
    bool send_prepares = true;       // false: hints wait and are never sent (for tests)
  };

  struct Stats {
    int64_t measured = 0;     // requests a worker answered (PrepareFor's hints not counted)
    int64_t cache_hits = 0;
    int64_t crashes = 0;      // workers that died mid-request
    int64_t timeouts = 0;     // workers killed at the deadline
    int64_t refused = 0;      // kernels refused for their estimated cost
    int64_t idle_deaths = 0;  // workers found dead while idle, and replaced
    int64_t waiting = 0;      // requests waiting for a worker now
    int64_t prepared = 0;     // reference runs workers made for PrepareFor hints
    int64_t prepares_cached = 0;   // hints whose worker had the program's reference already
    int64_t prepares_failed = 0;   // hints whose worker failed, crashed or hung (or the pool
                                   // stopped while they were sent)
    double prepare_seconds = 0;    // the prepared reference runs' time
    int64_t prepares_skipped = 0;  // hints not sent: the program's sent recently, too costly to
                                   // evaluate, one of its tenant's waiting (a hint or a request),
                                   // or max_pending_prepares waiting
  };

  // Starts the workers and measures the FMA peak on the first one. INVALID_ARGUMENT when a core
  // is not a CPU this process may run on; fails when a worker cannot be started or does not
  // answer.
  static absl::StatusOr<std::unique_ptr<WorkerPool>> Start(Options options);
  ~WorkerPool() override;

  absl::StatusOr<Measurement> MeasureFor(const LoopTree& tree, uint64_t tenant) override;
  // A worker times the schedule again (LocalTimer::RemeasureFor); not cached. A schedule
  // whose measurement failed before fails the same way without running.
  absl::StatusOr<Measurement> RemeasureFor(const LoopTree& tree, uint64_t tenant) override;
  // Queues a kPrepare request (LocalTimer::Prepare: the program's reference run) and returns at
  // once; a background thread sends it, waiting in `tenant`'s queue like any request, so the
  // worker runs it between measurements, never during one. Skipped for a program hinted among
  // the last 64, one MeasureFor would refuse as too costly (or, with no max_kernel_seconds, one
  // estimated past the deadline), while a hint or request of the same tenant waits (one client
  // cannot crowd out the others' hints), or when max_pending_prepares wait.
  // With several workers the next measurement may go to another one, which then makes the
  // reference itself, as without the hint.
  void PrepareFor(const LoopTree& tree, uint64_t tenant) override;
  // Blocks until no hint waits or is being sent (or the pool stops; with send_prepares false,
  // only then); for tests.
  void WaitForPrepares();
  // Measured by the first worker when the pool started.
  absl::StatusOr<double> PeakGflops() override { return peak_gflops_; }
  // Measured by a worker at the first call (queued as tenant 0), then kept; a failure is not
  // kept (the next call measures again).
  absl::StatusOr<MemoryProfile> Memory() override;
  Isa isa() const { return options_.isa; }

  // Has a worker run its binary's WorkerExtension on `payload` (queued as `tenant`) and returns
  // the reply's status, or INTERNAL / DEADLINE_EXCEEDED when the worker crashed or hung (it is
  // then replaced). Not cached. UNIMPLEMENTED from workers with no extension.
  absl::Status RunExtension(std::string payload, uint64_t tenant = 0);

  // Ends the workers now; every call after it (and every call still waiting for a worker) fails
  // UNAVAILABLE. A kernel running meanwhile is killed with its worker. Idempotent; the
  // destructor calls it.
  void Stop();

  Stats stats() const;
  // The worker processes' ids (-1 for one not running); for tests.
  std::vector<pid_t> worker_pids() const;

 private:
  struct Worker {
    pid_t pid = -1;
    int fd = -1;
    int core = -1;
    bool busy = false;
  };
  // A request waiting for a worker; `worker` is set when it is its turn.
  struct Waiter {
    Worker* worker = nullptr;
  };

  explicit WorkerPool(Options options);
  absl::Status Spawn(Worker& worker) const;
  static void Kill(Worker& worker);
  // Hands free workers to waiting requests, one tenant after another.
  void Dispatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends `request` to a worker when `tenant`'s turn comes, waits for its reply; replaces the
  // worker on failure.
  absl::StatusOr<WorkerReply> Call(const WorkerRequest& request, uint64_t tenant);
  // MeasureFor and RemeasureFor: `task` is kMeasure or kRemeasure.
  absl::StatusOr<Measurement> Evaluate(WorkerTask task, const LoopTree& tree, uint64_t tenant);
  void MonitorLoop();
  void PrepareLoop();
  // A kernel MeasureFor refuses before it runs: its estimated evaluation time over the budget.
  bool TooCostly(const Program& program) const;
  bool TooCostlyToPrepare(const Program& program) const;

  const Options options_;
  double peak_gflops_ = 0;
  absl::Mutex memory_mu_;  // held while the memory is measured: one measurement at a time
  std::optional<MemoryProfile> memory_ ABSL_GUARDED_BY(memory_mu_);  // once measured
  mutable absl::Mutex mu_;
  std::vector<Worker> workers_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::deque<Waiter*>> queues_ ABSL_GUARDED_BY(mu_);  // tenant -> waiting
  uint64_t last_served_ ABSL_GUARDED_BY(mu_) = 0;  // round-robin position among tenants
  MeasurementCache cache_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // PrepareFor hints: waiting (PrintIr, tenant), being sent, and the programs hinted lately.
  std::deque<std::pair<std::string, uint64_t>> prepares_ ABSL_GUARDED_BY(mu_);
  bool preparing_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::string> hinted_ ABSL_GUARDED_BY(mu_);
  std::thread monitor_;
  std::thread preparer_;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_TIMING_WORKER_POOL_H_
