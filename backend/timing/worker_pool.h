// WorkerPool: the KernelEvaluator the server uses. Kernels are compiled, verified and timed in
// worker processes (worker_main.h), one pinned to each measurement core, never in the caller's
// process. A request waits for a free worker, so concurrent sessions queue for a core instead of
// sharing one. A worker that crashes (INTERNAL) or overruns the deadline (DEADLINE_EXCEEDED) is
// killed and replaced; only that request fails. Every other failure (the code generator refusing a
// schedule, a kernel failing verification) is INTERNAL too, with the worker's message.
// Measurements are cached by (program, schedule).
// Thread-safe.
#ifndef LOOPTOOL_BACKEND_TIMING_WORKER_POOL_H_
#define LOOPTOOL_BACKEND_TIMING_WORKER_POOL_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "backend/env/evaluator.h"
#include "backend/timing/worker_protocol.h"

namespace looptool {

class WorkerPool : public KernelEvaluator {
 public:
  struct Options {
    std::vector<int> cores;          // one worker pinned to each; empty: one unpinned worker
    std::string isa = "auto";        // see ParseIsa
    double budget_ms = 10;           // timing budget per new schedule
    int max_loops = 16;              // the loop trees callers send may have this many loops
    double deadline_seconds = 30;    // a request still running after this is a hang
    size_t max_cached = 1 << 16;     // cached measurements (cleared when full)
    std::string executable = "/proc/self/exe";  // a binary that calls MaybeRunKernelWorker
  };

  struct Stats {
    int64_t measured = 0;    // requests a worker answered
    int64_t cache_hits = 0;
    int64_t crashes = 0;     // workers that died mid-request
    int64_t timeouts = 0;    // workers killed at the deadline
  };

  // Starts the workers and measures the FMA peak on the first one. Fails when a worker cannot
  // be started or does not answer.
  static absl::StatusOr<std::unique_ptr<WorkerPool>> Start(Options options);
  ~WorkerPool() override;

  absl::StatusOr<Measurement> Measure(const LoopTree& tree) override;
  double PeakGflops() override { return peak_gflops_; }

  // Test hook: has a worker run a faulty kernel (WorkerTask::kCrash or kHang) and returns the
  // status that request got (INTERNAL or DEADLINE_EXCEEDED), the worker then being replaced.
  absl::Status RunFault(WorkerTask fault);

  Stats stats() const;
  int num_workers() const { return static_cast<int>(workers_.size()); }

 private:
  struct Worker {
    pid_t pid = -1;
    int fd = -1;
    int core = -1;
    bool busy = false;
  };

  explicit WorkerPool(Options options);
  absl::Status Spawn(Worker& worker) const;
  static void Kill(Worker& worker);
  // Sends `request` to a free worker and waits for its reply; replaces the worker on failure.
  absl::StatusOr<WorkerReply> Call(const WorkerRequest& request);

  const Options options_;
  double peak_gflops_ = 0;
  mutable absl::Mutex mu_;
  std::vector<Worker> workers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::StatusOr<Measurement>> cache_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_TIMING_WORKER_POOL_H_
