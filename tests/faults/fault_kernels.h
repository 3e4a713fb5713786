// Deliberately faulty JIT'd kernels for tests: a kernel worker extension (MaybeRunKernelWorker)
// whose payload "crash" stores to address 0 (SIGSEGV) and "hang" spins forever; anything else
// is INVALID_ARGUMENT.
#ifndef LOOPTOOL_TESTS_FAULTS_FAULT_KERNELS_H_
#define LOOPTOOL_TESTS_FAULTS_FAULT_KERNELS_H_

#include "backend/timing/worker_main.h"

namespace looptool::testing {

WorkerExtension FaultWorkerExtension();

}  // namespace looptool::testing

#endif  // LOOPTOOL_TESTS_FAULTS_FAULT_KERNELS_H_
