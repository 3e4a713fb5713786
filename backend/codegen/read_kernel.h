// The memory kernels behind the host's bandwidth per cache level (backend/timing/bandwidth.h),
// generated with the same JIT as every schedule, so that a memory-bound kernel's roofline is what
// this code generator's loads and stores can reach.
//
// The read kernel: vector loads over a buffer, added into independent accumulators so that
// loads, not adds, limit it. Reads like the assembly it emits:
//
//   pass: loop: vaddps v0, v0, [rsi] ... vaddps v7, v7, [rsi + 7 * width]   (8 vectors a step)
//               add rsi, 8 * width; dec rcx; jnz loop
//         dec rdx; jnz pass
//   v0 + ... + v7 stored to out (one vector)
#ifndef LOOPTOOL_BACKEND_CODEGEN_READ_KERNEL_H_
#define LOOPTOOL_BACKEND_CODEGEN_READ_KERNEL_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "backend/codegen/isa.h"
#include "backend/codegen/kernel.h"

namespace looptool {

// Loads per step of the read kernel's inner loop; the buffer is read in whole steps.
inline constexpr int kReadKernelUnroll = 8;

// Floats per load: the ISA's full register, also for SSE (whose schedules the code generator
// emits as scalar code), so that each level's bandwidth is the hardware's.
int ReadKernelLanes(Isa isa);

// void run(const float* data, int64_t steps, int64_t passes, float* out):
// reads `steps` * kReadKernelUnroll vectors of ReadKernelLanes floats from `data` (aligned to
// 64 bytes), `passes` times over, and stores the lane-wise sum of everything read into
// out[0..ReadKernelLanes).
// REQUIRES: steps >= 1, passes >= 1.
using ReadKernelFn = void (*)(const float*, int64_t, int64_t, float*);
absl::StatusOr<Kernel> MakeReadKernel(Isa isa);

// The copy kernel: the same steps of kReadKernelUnroll vector loads, each step's vectors then
// stored to a second buffer (regular stores, or non-temporal ones that skip the caches, fenced
// at the end), so that a run moves as many bytes out as in:
//
//   pass: loop: vmovups v0, [rsi] ... vmovups v7, [rsi + 7 * width]
//               vmovups [rdi], v0 ... vmovups [rdi + 7 * width], v7   (or vmovntps)
//
// void copy(const float* src, float* dst, int64_t steps, int64_t passes): copies `steps` *
// kReadKernelUnroll vectors of ReadKernelLanes floats from `src` to `dst` (both aligned to 64
// bytes, not overlapping), `passes` times over.
// REQUIRES: steps >= 1, passes >= 1.
using CopyKernelFn = void (*)(const float*, float*, int64_t, int64_t);
absl::StatusOr<Kernel> MakeCopyKernel(Isa isa, bool streaming_stores);

// The fill kernel: the same steps of kReadKernelUnroll vector stores of one value, nothing
// loaded (regular stores, or non-temporal ones, fenced at the end), so that a run moves bytes
// out only, as a broadcast or a memset does:
//
//   vbroadcastss v0, xmm0
//   pass: loop: vmovups [rdi], v0 ... vmovups [rdi + 7 * width], v0   (or vmovntps)
//
// void fill(float* dst, int64_t steps, int64_t passes, float value): writes `value` to `steps`
// * kReadKernelUnroll vectors of ReadKernelLanes floats at `dst` (aligned to 64 bytes),
// `passes` times over.
// REQUIRES: steps >= 1, passes >= 1.
using FillKernelFn = void (*)(float*, int64_t, int64_t, float);
absl::StatusOr<Kernel> MakeFillKernel(Isa isa, bool streaming_stores);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_CODEGEN_READ_KERNEL_H_
