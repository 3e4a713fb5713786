// The kernel worker: a child process that compiles, verifies and times kernels for the server,
// pinned to one core, so a kernel that crashes or hangs takes down only the worker. It is the
// server's (or the CLI's, or a test's) own executable started again with worker flags.
#ifndef LOOPTOOL_BACKEND_TIMING_WORKER_MAIN_H_
#define LOOPTOOL_BACKEND_TIMING_WORKER_MAIN_H_

#include <optional>
#include <string>
#include <vector>

namespace looptool {

// How a WorkerPool starts a worker: these arguments after argv[0].
struct WorkerArgs {
  int fd = 3;              // the socket to the pool
  int core = -1;           // CPU to pin to; -1 leaves the affinity alone
  std::string isa = "auto";
  double budget_ms = 10;   // timing budget per new schedule
  int max_loops = 16;      // the server's Limits::max_loops (it has checked the rest)
  std::vector<std::string> ToArgv() const;
};

// If argv is a worker invocation (its first argument is --looptool_worker), runs the worker
// until the pool closes the socket and returns the process's exit code; nullopt otherwise.
// Every binary that creates a WorkerPool calls this first thing in main().
std::optional<int> MaybeRunKernelWorker(int argc, char** argv);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_TIMING_WORKER_MAIN_H_
