// A looptool server process for the benchmarks that drive one over the network: found in the
// runfiles or bazel-bin, started with --port=0 in a temporary working directory (its stderr in
// <dir>/server.log), sampled for memory through /proc, stopped with SIGTERM. POSIX only.
#ifndef LOOPTOOL_BENCH_SERVER_PROCESS_H_
#define LOOPTOOL_BENCH_SERVER_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace looptool::bench {

// `workspace_path` (e.g. "service/looptool-server") as the benchmark's runfiles hold it, else
// as `bazel run`'s working directory or bazel-bin does; "" when none is an executable file.
std::string FindBinary(const char* argv0, const std::string& workspace_path);

struct ServerProcess {
  pid_t pid = -1;
  int port = 0;
  std::string dir;     // the working directory (port.txt, pid.txt, server.log)
  std::string binary;
  std::string args;    // as started, space-separated (for reports)
};

// "--a=1  --b" -> {"--a=1", "--b"}: a flag's space-separated server arguments.
std::vector<std::string> SplitArgs(const std::string& spaced);

// Starts `binary` with --port=0 --working_dir=<a new /tmp/looptool-<tag>-XXXXXX> and `args`;
// waits (up to 120 s) for port.txt. False with `*error` set when it cannot start or exits.
bool StartServer(const std::string& binary, const std::vector<std::string>& args,
                 const std::string& tag, ServerProcess* s, std::string* error);

// SIGTERM, then waits up to 60 s (then SIGKILL). Returns what happened ("exited 0", ...);
// `*exit_ok` is true only for exit status 0.
std::string StopServer(pid_t pid, bool* exit_ok);

// The resident memory of a process and of its descendants (the kernel workers).
struct ProcessMemory {
  bool ok = false;          // the process was there to read
  double server_mb = 0;     // VmRSS
  int threads = 0;
  int workers = 0;          // descendant processes
  double workers_mb = 0;    // their VmRSS, summed
};
ProcessMemory SampleProcessMemory(pid_t pid);

}  // namespace looptool::bench

#endif  // LOOPTOOL_BENCH_SERVER_PROCESS_H_
