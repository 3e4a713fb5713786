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
#include "service/server_flags.h"

// The server's own flags are service/server_flags.h's; these are the binary's.
ABSL_FLAG(std::string, working_dir, "", "where port.txt, pid.txt and logs/ go (created)");
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
  absl::StatusOr<ServerConfig> config = ServerConfigFromFlags();
  if (!config.ok()) {
    std::cerr << "looptool-server: " << config.status().message() << "\n";
    return 1;
  }
  const absl::Duration drain = config->drain;
  config->wrap_timer = extensions.wrap_timer;
  config->service.parameter_handler = extensions.parameter_handler;

  // Signals are taken by sigwait below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // Process-wide settings are main's: the server's threads stay off the kernel workers' cores,
  // gRPC's health and reflection services are on, and descriptors are limited by the hard
  // limit only.
  PinAwayFrom(config->workers.cores);
  EnableHealthAndReflection();
  RaiseDescriptorLimit();
  absl::StatusOr<std::unique_ptr<LoopToolServer>> server =
      LoopToolServer::Start(*std::move(config));
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
    // pid.txt first: clients take port.txt as the sign the server is ready, so both are there
    // once it appears.
    if (ec || !WriteAtomically(pid_file, std::to_string(getpid()) + "\n") ||
        !WriteAtomically(port_file, std::to_string((*server)->port()) + "\n")) {
      std::cerr << "looptool-server: cannot write port.txt/pid.txt in " << working_dir << "\n";
      return 1;
    }
  }
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::fprintf(stderr, "looptool-server: signal %d, shutting down\n", signal_number);
  (*server)->Shutdown(drain);
  if (!working_dir.empty()) {
    // A port.txt or pid.txt left behind would point the next client at a dead server.
    std::error_code ec;
    std::filesystem::remove(port_file, ec);
    std::filesystem::remove(pid_file, ec);
  }
  return 0;
}

}  // namespace looptool::service
