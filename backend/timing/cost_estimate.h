// EstimateEvaluationSeconds: what evaluating one new schedule of a program may cost a kernel
// worker before it runs anything: the reference interpreter (once per program), one verification
// run and the timing runs of a slow kernel. Pessimistic on purpose: the pool refuses a kernel
// whose estimate exceeds its per-kernel budget, so one client's legal but enormous kernel
// (a 2048^3 matmul: ~17 GFLOP, ~30 s in the interpreter alone) cannot hold a shared core.
#ifndef LOOPTOOL_BACKEND_TIMING_COST_ESTIMATE_H_
#define LOOPTOOL_BACKEND_TIMING_COST_ESTIMATE_H_

#include "backend/ir/program.h"

namespace looptool {

// Coefficients measured on an Intel Xeon (AVX-512) host: the interpreter runs matmuls at
// ~0.65 GFLOP/s (1.5 ns per flop) and fills its tensors at ~15 ns per element; an untiled or
// badly tiled kernel is charged 0.5 ns per flop for each of its ~6 runs (warm-up, verification,
// timing). A 512^3 matmul: ~1.2 s estimated (0.43 s measured).
inline constexpr double kInterpreterSecondsPerFlop = 1.5e-9;
inline constexpr double kKernelSecondsPerFlop = 6 * 0.5e-9;
inline constexpr double kSecondsPerElement = 15e-9;

double EstimateEvaluationSeconds(const Program& program);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_TIMING_COST_ESTIMATE_H_
