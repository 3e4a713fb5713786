// The FMA-throughput kernel behind `peak_gflops`: independent vfmadd chains in a loop, generated
// with the same JIT as every schedule, so that rewards are normalised by what this code
// generator can reach on this core. Reads like the assembly it emits:
//
//   loop: vfmadd231ps v0, v14, v15 ... vfmadd231ps v13, v14, v15   (per chain, then repeat)
//         dec rdi; jnz loop
#ifndef LOOPTOOL_BACKEND_CODEGEN_PEAK_KERNEL_H_
#define LOOPTOOL_BACKEND_CODEGEN_PEAK_KERNEL_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "backend/codegen/isa.h"
#include "backend/codegen/kernel.h"

namespace looptool {

struct PeakKernel {
  Kernel kernel;               // void run(int64_t iterations)
  int64_t flops_per_iteration; // 2 * chains * lanes * unroll
};

// `chains` independent accumulators (16 covers the FMA latency on two 512-bit pipes, perf.md),
// unrolled 8 times per loop iteration. REQUIRES: chains <= registers - 2.
absl::StatusOr<PeakKernel> MakePeakKernel(Isa isa, int chains = 16);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_CODEGEN_PEAK_KERNEL_H_
