// KernelTimer: compiles, verifies and times the kernel of a schedule. The environment asks it for
// the `flops`, `runtime` and `peak_gflops` observations; the server supplies one that runs
// kernels in isolated worker processes (backend/timing/worker_pool.h), benchmarks and tests one
// in their own process (backend/timing/local_timer.h) or a fake.
//
// Every implementation keeps one error contract, whatever runs the kernel:
//   RESOURCE_EXHAUSTED  the kernel is too large to generate, or too costly to run at all;
//   INTERNAL            the kernel could not be generated, failed verification against the
//                       interpreter, or crashed (schedules reach it through legal actions only,
//                       so each of these is a fault of ours, never the caller's);
//   DEADLINE_EXCEEDED   the kernel hung (ran past the timer's deadline);
//   UNAVAILABLE         nothing can run kernels now (no worker could be started, or the timer
//                       has stopped); not a verdict on the kernel.
// Implementations must be thread-safe.
#ifndef LOOPTOOL_BACKEND_ENV_KERNEL_TIMER_H_
#define LOOPTOOL_BACKEND_ENV_KERNEL_TIMER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "backend/schedule/loop_tree.h"

namespace looptool {

struct Measurement {
  double seconds = 0;  // fastest single run of the kernel
  double gflops = 0;   // Program::Flops() / seconds / 1e9
};

class KernelTimer {
 public:
  virtual ~KernelTimer() = default;
  // The kernel of `tree`'s schedule, measured on behalf of `tenant` (whom the caller serves:
  // timers that queue requests serve tenants in turn). Implementations may cache by (program,
  // schedule).
  virtual absl::StatusOr<Measurement> MeasureFor(const LoopTree& tree, uint64_t tenant) = 0;
  // The kernel timed again, now, with the full fixed budget and no cut-offs or cache (after a
  // first MeasureFor when there is none): a search's winners are re-timed so that the speed it
  // reports is not the luckiest of many measurements.
  virtual absl::StatusOr<Measurement> RemeasureFor(const LoopTree& tree, uint64_t tenant) = 0;
  // The single-core FMA peak (GFLOPS) rewards are normalised by, measured on the core kernels
  // are timed on. UNAVAILABLE when it could not be measured.
  virtual absl::StatusOr<double> PeakGflops() = 0;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ENV_KERNEL_TIMER_H_
