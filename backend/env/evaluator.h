// KernelEvaluator: compiles, verifies and times a schedule. The environment asks it for the
// `flops`, `runtime` and `peak_gflops` observations; the service supplies one that runs kernels
// in isolated worker processes, tests may supply a fake.
#ifndef LOOPTOOL_BACKEND_ENV_EVALUATOR_H_
#define LOOPTOOL_BACKEND_ENV_EVALUATOR_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "backend/schedule/loop_tree.h"

namespace looptool {

struct Measurement {
  double seconds = 0;  // fastest single run of the kernel
  double gflops = 0;   // Program::Flops() / seconds / 1e9
};

class KernelEvaluator {
 public:
  virtual ~KernelEvaluator() = default;
  // The kernel of `tree`'s schedule, measured. Errors: INVALID_ARGUMENT (LocalEvaluator) or
  // INTERNAL (WorkerPool, whose callers' schedules were all legal) for a schedule the code
  // generator refuses; INTERNAL for a kernel that fails verification or crashes;
  // DEADLINE_EXCEEDED for one that hangs; RESOURCE_EXHAUSTED for one too costly to run at all.
  // Must be thread-safe.
  virtual absl::StatusOr<Measurement> Measure(const LoopTree& tree) = 0;
  // The same on behalf of `tenant` (the service's session): evaluators that queue requests
  // serve tenants in turn.
  virtual absl::StatusOr<Measurement> MeasureFor(const LoopTree& tree, uint64_t tenant) {
    return Measure(tree);
  }
  // The kernel of `tree`'s schedule timed again, now, with the full fixed budget and no cut-offs
  // or cache (after a first Measure when it has none): a search's winners are re-timed so that
  // the speed it reports is not the luckiest of many measurements. Same errors as Measure.
  virtual absl::StatusOr<Measurement> RemeasureFor(const LoopTree& tree, uint64_t tenant) {
    return MeasureFor(tree, tenant);
  }
  // The measured single-core FMA peak rewards are normalised by.
  virtual double PeakGflops() = 0;
  // The vector unit kernels are generated for: float lanes and vector registers (what the
  // `sketches` observation sizes register blocks by). Default: AVX-512's 16 and 32.
  struct VectorUnit {
    int lanes = 16;
    int registers = 32;
  };
  virtual VectorUnit Vector() { return {}; }
  // What a cost model learned from this evaluator's measurements predicts for `tree`'s kernel,
  // in GFLOPS, without compiling or running it; 0 while it has learned too little.
  // UNIMPLEMENTED for evaluators without one (backend/costmodel/learning_evaluator.h has one).
  virtual absl::StatusOr<double> PredictGflops(const LoopTree& tree) {
    return absl::UnimplementedError("this server has no cost model");
  }
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ENV_EVALUATOR_H_
