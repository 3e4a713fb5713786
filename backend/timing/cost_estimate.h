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
// Memory-bound programs are not bounded by their flops: a transpose's untiled kernel and the
// interpreter touch each element of large tensors a cache line (and page) apart. Each element
// of every tensor is charged a miss in each of 7 passes (the interpreter, verification, ~5
// timed and warm-up runs). Measured on the 2-vCPU AMD EPYC host: a rank-6 transpose of 16^6
// elements took 4.3 s to evaluate (0.28 s per untiled run), estimated 5.3 s (0.58 s by flops
// and fills alone); a 4096^2 transpose 1.9 s, estimated 5.3 s.
inline constexpr double kMissSecondsPerElementPass = 20e-9;
inline constexpr int kPassesOverEachElement = 7;

double EstimateEvaluationSeconds(const Program& program);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_TIMING_COST_ESTIMATE_H_
