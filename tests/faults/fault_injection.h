// Fault injection for tests only (no production target links it): a kernel worker extension
// that runs a deliberately crashing or hanging JIT'd kernel, and a server extension that arms
// one through the `test.inject_fault` session parameter ("crash" or "hang") for the session's
// tenant (the client that made it: its connection, or its per-client token) and fires it on
// that tenant's next kernel measurement, in a worker.
// `test.trim_heap` returns the server's free heap pages to the system now (malloc_trim), what
// its reaper does every second, so that memory tests read the server's memory without waiting.
// `test.faults_fired` answers how many armed faults have fired (their kernels were asked of a
// worker, which may still be running or queueing them), so that tests wait for that, not a time.
// `test.prepares` answers the worker pool's reference runs made for hints, hints whose worker
// had the reference already, failed hints, and measurements: "PREPARED CACHED FAILED MEASURED".
#ifndef LOOPTOOL_TESTS_FAULTS_FAULT_INJECTION_H_
#define LOOPTOOL_TESTS_FAULTS_FAULT_INJECTION_H_

#include "service/server_cli.h"
#include "tests/faults/fault_kernels.h"

namespace looptool::testing {

inline constexpr char kInjectFaultParameter[] = "test.inject_fault";
inline constexpr char kTrimHeapParameter[] = "test.trim_heap";
inline constexpr char kFaultsFiredParameter[] = "test.faults_fired";
inline constexpr char kPreparesParameter[] = "test.prepares";

// For RunServerMain / ServerConfig: the evaluator wrapper and the parameter handler.
service::ServerExtensions FaultServerExtensions();

}  // namespace looptool::testing

#endif  // LOOPTOOL_TESTS_FAULTS_FAULT_INJECTION_H_
