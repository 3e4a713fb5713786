// RunServerMain: the looptool-server command line (flags, port.txt/pid.txt, signals) around a
// LoopToolServer, for the production binary and for test binaries that add extensions.
#ifndef LOOPTOOL_SERVICE_SERVER_CLI_H_
#define LOOPTOOL_SERVICE_SERVER_CLI_H_

#include <functional>
#include <memory>
#include <string>

#include "service/server.h"

namespace looptool::service {

// What a binary adds to the server (the production binary: nothing; tests: a fault injector).
struct ServerExtensions {
  std::function<std::shared_ptr<KernelTimer>(std::shared_ptr<WorkerPool>)> wrap_timer;
  std::function<absl::StatusOr<std::string>(const Episode&, const std::string& key,
                                            const std::string& value)>
      parameter_handler;
};

// Parses the flags, starts the server, serves until SIGTERM/SIGINT; returns the exit code.
// REQUIRES: main already called MaybeRunKernelWorker.
int RunServerMain(int argc, char** argv, const ServerExtensions& extensions);

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_SERVER_CLI_H_
