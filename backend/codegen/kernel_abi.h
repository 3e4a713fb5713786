// KernelAbi: the calling contract of a compiled kernel, as JSON for whoever links the code
// elsewhere (`looptool export`'s header and manifest, `looptool.kernels`). One place for the
// facts the emitter fixes (backend/codegen/emitter.h):
//   1. The entry point is `void kernel(float* const* tensors)`, System V x86-64: `tensors[i]`
//      is the base of tensor i of the program (by id, the order `tensors` lists them).
//   2. Every tensor is dense row-major float32 of the listed shape; no alignment beyond 4 bytes
//      (unaligned vector loads and stores; code generated with streamed stores, CodegenOptions::
//      stream_output_min_bytes, checks its outputs' bases and streams only into aligned ones).
//   3. Inputs are only read; every element of every output is overwritten (no tensor is both;
//      the language forbids it). Outputs must not overlap inputs or each other.
//   4. The code keeps no state between calls and writes only the outputs and its own stack
//      frame: calls on distinct outputs may run concurrently (reentrant, thread-safe).
//   5. It executes the instructions of `isa`, which need the CPU features `cpu_features`.
#ifndef LOOPTOOL_BACKEND_CODEGEN_KERNEL_ABI_H_
#define LOOPTOOL_BACKEND_CODEGEN_KERNEL_ABI_H_

#include <string>
#include <vector>

#include "backend/codegen/isa.h"
#include "backend/ir/program.h"

namespace looptool {

// {"entry": "void kernel(float* const* tensors)", "isa": "avx512", "cpu_features": [...],
//  "program": "<the program's text>", "flops": N, "alignment_bytes": 4,
//  "tensors": [{"id": 0, "name": "C", "shape": [M, N], "role": "output"}, ...]}
// and, when `streamed` (output tensor ids) is not empty, "streamed_outputs": [ids]: outputs the
// code writes with non-temporal stores, past the caches, when their base is 64-byte aligned.
std::string KernelAbiJson(const Program& program, Isa isa, const std::vector<int>& streamed = {});

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_CODEGEN_KERNEL_ABI_H_
