// CodegenOptions: the knobs of the code generator, with LoopNest's defaults where it has one.
#ifndef LOOPTOOL_BACKEND_CODEGEN_CODEGEN_OPTIONS_H_
#define LOOPTOOL_BACKEND_CODEGEN_CODEGEN_OPTIONS_H_

#include <cstdint>

namespace looptool {

struct CodegenOptions {
  // Inside the register scope, a reduction loop is fully unrolled when its unrolled body has at
  // most this many vector operations (LoopNest's default_max_fmas_unrolled).
  int64_t max_unrolled_ops = 320;
  // An `unroll` mark is honoured while the unrolled loop has at most this many operations;
  // beyond, the loop stays a loop and the plan says so.
  int64_t max_annotated_unroll_ops = 16384;
  // Code of one kernel; a schedule whose tails multiply past it is refused.
  int64_t max_code_bytes = int64_t{8} << 20;
  // A block that reads the even and odd phases of one stride-2 span (column taps 0 and 1 of a
  // stride-2 window) loads them together: two loads instead of four (StatementPlan::
  // pair_phases). Off only to compare.
  bool pair_stride_two_phases = true;
  // A block that reads a full stride-2 chunk at element d + 2 (column tap 2) and the chunks at
  // d and d + 2W (tap 0 of its vector of outputs and of the next) makes it from those two by a
  // lane shift instead of two loads and a permute (AVX-512; StatementPlan::shift_taps). Off
  // only to compare.
  bool shift_stride_two_taps = true;
  // Stride 2's pairs and shifts (the two options above) take a vector loop's masked last chunk
  // too (a 28-wide row's 12 lanes at 16, a 7-wide row's 7): its taps 0 and 1 load together
  // (their span's first vector whole where they fill it, the rest by a masked load), its tap 2
  // is their even phase shifted by a lane (vertical statements), and the full chunk before it
  // shifts its tap 2 in from it (AVX-512; StatementPlan::masked_stride_two). Off only to
  // compare (each masked tap then loads and permutes alone).
  bool masked_stride_two_economies = true;
  // A block that reads a full contiguous chunk at element d + t (0 < t < W: column tap t of a
  // stride-1 window in CHW, a pool's or a depthwise convolution's) and the chunks at d and
  // d + W (tap 0 of its vector of outputs and of the next) makes it from those two by a lane
  // shift instead of a load that, off the vector's alignment, spans two cache lines (AVX-512;
  // StatementPlan::shift_unit_taps). Off only to compare.
  bool shift_unit_stride_taps = true;
  // A vertical statement of 16 lanes (AVX-512) that reads an input with stride 2 emits the ops of
  // a vector loop's last chunk of 8 lanes (a 56-wide row's) at 8 lanes, as a block of its own
  // after the others, where they are full chunks (StatementPlan::half_width_tails). Off only to
  // compare (each such chunk then loads alone at 16 lanes, by VectorOps::LoadStrided's
  // 8-of-16-lanes form: two loads and a permute, as since this option came, not a masked load).
  bool half_width_stride_two_tails = true;
  // A statement that writes each element of its output once (an assignment: a copy, transpose,
  // broadcast or elementwise op) and whose output tensor has at least this many bytes stores
  // its full vectors with non-temporal stores (vmovntps), past the caches, where every such
  // store is aligned to the vector's size relative to the tensor's base (StatementPlan::
  // stream_output); the kernel checks the base and runs a copy with plain stores when it is
  // not aligned. 0: by the schedule's stream marks alone (StatementSchedule::stream, the
  // stream_L<p> action). Off by default: it pays where the output's rows fall into few cache
  // sets (a power-of-two transpose), and sends the output to memory, past a next kernel's
  // cache; a search chooses it per schedule with the action.
  int64_t stream_output_min_bytes = 0;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_CODEGEN_CODEGEN_OPTIONS_H_
