// looptool-test-server: looptool-server with fault injection (tests/faults/fault_injection.h)
// linked in, for the tests and the soak benchmark that crash and hang kernels on purpose.
#include "tests/faults/fault_injection.h"

int main(int argc, char** argv) {
  if (auto rc = looptool::MaybeRunKernelWorker(argc, argv,
                                               looptool::testing::FaultWorkerExtension())) {
    return *rc;
  }
  return looptool::service::RunServerMain(argc, argv,
                                          looptool::testing::FaultServerExtensions());
}
