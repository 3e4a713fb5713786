// looptool-server: the LoopTool CompilerGym service.
//
//   bazel run //service:looptool-server -- --port=50051 --working_dir=/tmp/looptool
//
// Writes <working_dir>/pid.txt, then port.txt (atomically, once listening; port.txt is the sign
// of readiness), so CompilerGym can also start and manage it; removes them on exit. SIGTERM or
// SIGINT drains running calls and exits 0. The flags are in service/server_cli.cc (`--help`).
#include "backend/timing/worker_main.h"
#include "service/server_cli.h"

int main(int argc, char** argv) {
  if (auto rc = looptool::MaybeRunKernelWorker(argc, argv)) return *rc;
  return looptool::service::RunServerMain(argc, argv, {});
}
