#include "service/server_cli.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

ABSL_FLAG(int, port, 0, "port to listen on; 0 picks a free one (written to port.txt)");
ABSL_FLAG(std::string, bind, "127.0.0.1",
          "address to listen on; any but loopback needs --auth_token_file");
ABSL_FLAG(std::string, auth_token_file, "",
          "file holding a shared token every client must send (metadata authorization: Bearer)");
ABSL_FLAG(std::string, tls_cert_file, "", "PEM certificate chain: serve TLS (with --tls_key_file)");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file");
ABSL_FLAG(std::string, working_dir, "", "where port.txt, pid.txt and logs/ go (created)");
ABSL_FLAG(int, max_sessions, 1024, "live sessions at most");
ABSL_FLAG(double, session_idle_timeout, 3600, "seconds after which an unused session is ended");
ABSL_FLAG(std::string, eval_cores, "",
          "comma-separated CPUs, one kernel worker pinned to each (default: the last CPU)");
ABSL_FLAG(double, eval_deadline, 30, "seconds a kernel evaluation may take before it is a hang");
ABSL_FLAG(double, max_kernel_seconds, 10,
          "refuse (RESOURCE_EXHAUSTED) kernels whose estimated evaluation cost is larger; 0: none");
ABSL_FLAG(double, timing_budget_ms, 10,
          "timing budget for each new schedule, milliseconds (with --timing=adaptive: its cap)");
ABSL_FLAG(std::string, timing, "adaptive",
          "adaptive: a new schedule's runs stop once their minimum settles or is clearly slower "
          "than the best, and candidates are timed again with the whole budget; fixed: every new "
          "schedule runs for the whole budget");
ABSL_FLAG(std::string, isa, "auto", "code generation target: auto, avx512, avx2 or sse");
ABSL_FLAG(int, max_loops, 16, "loops a loop tree may have (both nests)");
ABSL_FLAG(bool, upstream_spaces_first, false,
          "list CompilerGym loop_tool-v0's action spaces (simple, split) first in GetSpaces, for "
          "CompilerGym clients of loop_tool-v0 that default to the first space");
// CompilerGym passes glog's flags to the services it starts; accepted and ignored.
ABSL_FLAG(bool, alsologtostderr, false, "ignored (glog)");
ABSL_FLAG(bool, logtostderr, false, "ignored (glog)");
ABSL_FLAG(int, v, 0, "ignored (glog)");
ABSL_FLAG(int, logbuflevel, 0, "ignored (glog)");
ABSL_FLAG(int, minloglevel, 0, "ignored (glog)");
ABSL_FLAG(int, stderrthreshold, 2, "ignored (glog)");
ABSL_FLAG(std::string, log_dir, "", "ignored (glog)");

namespace looptool::service {
namespace {

bool WriteAtomically(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out.good()) return false;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  return !ec;
}

}  // namespace

int RunServerMain(int argc, char** argv, const ServerExtensions& extensions) {
  absl::SetProgramUsageMessage("LoopTool's CompilerGym-compatible loop-nest tuning service");
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::cerr << "looptool-server: unexpected argument '" << rest[1] << "'\n";
    return 1;
  }
  ServerConfig config;
  config.bind = absl::GetFlag(FLAGS_bind);
  config.port = absl::GetFlag(FLAGS_port);
  config.service.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  config.service.limits.max_loops = absl::GetFlag(FLAGS_max_loops);
  config.service.upstream_spaces_first = absl::GetFlag(FLAGS_upstream_spaces_first);
  if (absl::GetFlag(FLAGS_session_idle_timeout) <= 0 || absl::GetFlag(FLAGS_max_sessions) <= 0 ||
      absl::GetFlag(FLAGS_eval_deadline) <= 0 || absl::GetFlag(FLAGS_timing_budget_ms) <= 0 ||
      absl::GetFlag(FLAGS_max_loops) <= 0) {
    std::cerr << "looptool-server: --session_idle_timeout, --max_sessions, --eval_deadline, "
                 "--timing_budget_ms and --max_loops must be positive\n";
    return 1;
  }
  config.session_idle_timeout = absl::Seconds(absl::GetFlag(FLAGS_session_idle_timeout));
  config.wrap_evaluator = extensions.wrap_evaluator;
  config.service.parameter_handler = extensions.parameter_handler;
  config.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  config.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  if (const std::string token_file = absl::GetFlag(FLAGS_auth_token_file); !token_file.empty()) {
    std::ifstream in(token_file);
    std::string token;
    std::getline(in, token);
    if (!in || token.empty()) {
      std::cerr << "looptool-server: cannot read a token from the first line of " << token_file
                << "\n";
      return 1;
    }
    config.auth_token = token;
  }
  config.workers.isa = absl::GetFlag(FLAGS_isa);
  config.workers.deadline_seconds = absl::GetFlag(FLAGS_eval_deadline);
  config.workers.max_kernel_seconds = absl::GetFlag(FLAGS_max_kernel_seconds);
  if (config.workers.max_kernel_seconds < 0) {
    std::cerr << "looptool-server: --max_kernel_seconds must be >= 0\n";
    return 1;
  }
  config.workers.budget_ms = absl::GetFlag(FLAGS_timing_budget_ms);
  const std::string timing = absl::GetFlag(FLAGS_timing);
  if (timing != "adaptive" && timing != "fixed") {
    std::cerr << "looptool-server: --timing must be adaptive or fixed, got '" << timing << "'\n";
    return 1;
  }
  config.workers.adaptive_timing = timing == "adaptive";
  for (absl::string_view c : absl::StrSplit(absl::GetFlag(FLAGS_eval_cores), ',', absl::SkipEmpty())) {
    int cpu = 0;
    if (!absl::SimpleAtoi(c, &cpu) || cpu < 0) {
      std::cerr << "looptool-server: --eval_cores takes CPU numbers, got '" << c << "'\n";
      return 1;
    }
    config.workers.cores.push_back(cpu);
  }

  // Signals are taken by sigwait below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // Process-wide settings are main's: the server's threads stay off the kernel workers' cores,
  // and gRPC's health and reflection services are on.
  if (config.workers.cores.empty()) config.workers.cores = DefaultEvalCores();
  PinAwayFrom(config.workers.cores);
  EnableHealthAndReflection();
  absl::StatusOr<std::unique_ptr<LoopToolServer>> server = LoopToolServer::Start(config);
  if (!server.ok()) {
    std::cerr << "looptool-server: " << server.status().message() << "\n";
    return 1;
  }
  std::fprintf(stderr, "looptool-server listening on %s (peak %.1f GFLOPS, kernel workers on",
               (*server)->address().c_str(), (*server)->peak_gflops());
  for (int c : (*server)->eval_cores()) std::fprintf(stderr, " cpu %d", c);
  std::fprintf(stderr, ")\n");

  const std::string working_dir = absl::GetFlag(FLAGS_working_dir);
  const std::filesystem::path port_file = std::filesystem::path(working_dir) / "port.txt";
  const std::filesystem::path pid_file = std::filesystem::path(working_dir) / "pid.txt";
  if (!working_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(working_dir) / "logs", ec);
    if (ec || !WriteAtomically(port_file, std::to_string((*server)->port()) + "\n") ||
        !WriteAtomically(pid_file, std::to_string(getpid()) + "\n")) {
      std::cerr << "looptool-server: cannot write port.txt/pid.txt in " << working_dir << "\n";
      return 1;
    }
  }
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::fprintf(stderr, "looptool-server: signal %d, shutting down\n", signal_number);
  (*server)->Shutdown();
  if (!working_dir.empty()) {
    // A port.txt or pid.txt left behind would point the next client at a dead server.
    std::error_code ec;
    std::filesystem::remove(port_file, ec);
    std::filesystem::remove(pid_file, ec);
  }
  return 0;
}

}  // namespace looptool::service
