// Verification: every compiled kernel is checked against the reference interpreter on seeded
// random inputs before its timing may become a reward. A mismatch is an error that names the
// schedule, never a number.
#ifndef LOOPTOOL_BACKEND_CODEGEN_VERIFY_H_
#define LOOPTOOL_BACKEND_CODEGEN_VERIFY_H_

#include <functional>

#include "absl/status/status.h"
#include "backend/codegen/kernel.h"
#include "backend/interp/interpreter.h"
#include "backend/schedule/loop_tree.h"

namespace looptool {

// A program's seeded inputs and what the interpreter computes from them (once per program).
struct ReferenceRun {
  TensorData expected;    // inputs, and outputs as the interpreter computes them
  double tolerance = 0;   // 0: outputs must match exactly (every sum is an exact small integer)
};

// Interprets an untiled schedule of the program (its loops ordered to stream through memory;
// every order of an untiled nest computes the same sums) on small-integer inputs. Exact
// comparison needs every partial result to stay below 2^24 in magnitude; for larger reductions
// the tolerance is the float summation error bound for the reduction length.
ReferenceRun MakeReference(const Program& program);

// How VerifyKernel makes its run: runs `kernel` on `tensors` and returns true, or abandons the run
// (whatever it wrote is then garbage) and returns false.
using VerificationRun = std::function<bool(const Kernel& kernel, float* const* tensors)>;

// Runs `kernel` on the reference inputs in `scratch` (tensor buffers of the program's shapes,
// overwritten) and compares every output element. INTERNAL "kernel failed verification: C[3]
// = 5 where the reference interpreter computes 7" followed by the schedule's ir otherwise.
// `run_seconds`, when given, receives how long the kernel's one run took (steady clock; a cold
// run: the kernel just compiled, its inputs just copied). `run`, when given, makes the run; where
// it abandons it, DEADLINE_EXCEEDED "the kernel's verification run was abandoned after 0.015 s"
// (nothing compared; `run_seconds` how long it ran).
absl::Status VerifyKernel(const Kernel& kernel, const LoopTree& tree, const ReferenceRun& reference,
                          TensorData& scratch, double* run_seconds = nullptr,
                          const VerificationRun& run = nullptr);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_CODEGEN_VERIFY_H_
