// The kernel worker: a child process that compiles, verifies and times kernels for the server,
// pinned to one core, so a kernel that crashes or hangs takes down only the worker. It is the
// server's (or the CLI's, or a test's) own executable started again with worker flags.
#ifndef LOOPTOOL_BACKEND_TIMING_WORKER_MAIN_H_
#define LOOPTOOL_BACKEND_TIMING_WORKER_MAIN_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "backend/timing/worker_protocol.h"

namespace looptool {

// How a WorkerPool starts a worker: these arguments after argv[0].
struct WorkerArgs {
  int fd = 3;              // the socket to the pool
  int core = -1;           // CPU to pin to; -1 leaves the affinity alone
  std::string isa = "auto";
  double budget_ms = 10;   // timing budget per new schedule (adaptive: its cap)
  bool adaptive = true;    // LocalTimer::Options::adaptive
  int max_loops = 16;      // the server's Limits::max_loops (it has checked the rest)
  int64_t stream_output_min_bytes = 0;  // CodegenOptions::stream_output_min_bytes
  std::vector<std::string> ToArgv() const;
};

// Work a binary's kernel workers do for WorkerTask::kExtension requests, given the payload (a
// test binary's fault injector runs crashing and hanging kernels so).
using WorkerExtension = std::function<WorkerReply(absl::string_view payload)>;

// If argv is a worker invocation (its first argument is --looptool_worker), runs the worker
// until the pool closes the socket and returns the process's exit code; nullopt otherwise.
// Every binary that creates a WorkerPool calls this first thing in main().
std::optional<int> MaybeRunKernelWorker(int argc, char** argv,
                                        const WorkerExtension& extension = nullptr);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_TIMING_WORKER_MAIN_H_
