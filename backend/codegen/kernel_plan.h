// KernelPlan: every decision the code generator makes about a schedule, as plain data, before a
// single instruction is emitted (LoopNest's design, planned in data). Per statement: which loop
// is vectorized and how each tensor is accessed along it, where the register scope starts (the
// outermost loop below which a block of the output fits in vector registers: loaded or zeroed
// on entry, stored on exit, never spilled), and which loops are unrolled. The schedule decides
// loop order and split sizes; Lower decides the rest, including fusing the vector loop with
// the loop outside it where every tensor is contiguous across both (fewer masked chunks).
#ifndef LOOPTOOL_BACKEND_CODEGEN_KERNEL_PLAN_H_
#define LOOPTOOL_BACKEND_CODEGEN_KERNEL_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "backend/codegen/codegen_options.h"
#include "backend/codegen/isa.h"
#include "backend/codegen/register_budget.h"
#include "backend/schedule/loop_tree.h"

namespace looptool {

struct AccessPlan {
  // How the access moves along the vector variable: kVector reads consecutive elements into
  // lanes (stride 1), kBroadcast one element into every lane (stride 0), kStrided every
  // stride-th element (inputs: stride 2 by two loads and a lane permute, masked chunks by
  // masked loads and a permute; larger strides by a gather on AVX-512, lane by lane on AVX2;
  // VectorOps::LoadStrided. The output (a vertical statement's): its accumulators stored by a
  // scatter on AVX-512, lane by lane on AVX2, VectorOps::StoreStrided, and loaded back as an
  // input would be where a block resumes its partial results). Scalar statements (width 1) use
  // kVector; a horizontal statement's output is kVector (stride 0).
  enum class Kind { kVector, kBroadcast, kStrided };
  int tensor = 0;
  int64_t offset = 0;           // elements: the constant part of the index
  std::vector<int64_t> stride;  // elements per unit of each program variable
  Kind kind = Kind::kVector;
};

struct LoopPlan {
  int var = 0;
  int64_t size = 1, tail = 0;
  int64_t inner = 1;       // elements of `var` one iteration covers
  bool vector = false;     // runs over its elements `width` at a time (masked last chunk)
  bool reduction = false;  // `var` is reduced over (not an index of the output)
  bool unrolled = false;   // emitted once per iteration instead of as a runtime loop
  bool unroll_marked = false;  // the schedule marked it `unroll`
  bool in_scope = false;   // inside the register scope
};

struct StatementPlan {
  int statement = 0;
  Reduction reduction = Reduction::kAssign;
  Combiner combiner = Combiner::kIdentity;
  PostOp post_op = PostOp::kNone;
  int width = 1;            // lanes per operation: the ISA's vector width (AVX-512: 8 for a
                            // vector loop of at most 8 elements), or 1 (scalar code)
  bool horizontal = false;  // the vector variable is a reduction variable: each accumulator
                            // holds per-lane partial results, reduced across lanes on exit
  int vector_loop = 0;      // index in `loops` of the vectorized loop
  int scope = 0;            // loops[scope..] are inside the register scope
  int accumulators = 0;     // vector registers the output block takes (at full extents)
  RegisterBudget budget;    // how the statement's code divides the registers
  bool pair_phases = true;  // blocks load stride-2 chunks at elements d and d + 1 together
  bool shift_taps = true;   // ... and make the chunk at d + 2 from those at d and d + 2W
  bool shift_unit_taps = true;  // blocks make contiguous chunk d + t from those at d and d + W
  // Pairs and shifts take a masked stride-2 chunk too (AVX-512;
  // CodegenOptions::masked_stride_two_economies).
  bool masked_stride_two = true;
  // The schedule's fold mark (StatementSchedule::fold, the fold_L<p> action): a block of a sum
  // or max whose accumulator reads the same column taps of a stride-2 window on two or more
  // rows (a pool's 3x3 or 2x2 window) sums or maxes the rows' spans first, as they lie in
  // memory, and permutes the result once per tap, instead of permuting every row's chunks
  // (AVX-512). A choice of the schedule: it pays on some hosts and blocks, not on all.
  bool fold_rows = false;
  // A block's ops of 8 lanes at a width of 16 (the last chunk of a vector loop of 16n + 8
  // elements) are emitted after its other ops as a block of their own at 8 lanes, where they are
  // full chunks: a stride-2 read's pairs, shifts and folds apply and nothing is masked, where
  // at 16 lanes each tap's chunk is loaded and permuted alone. AVX-512, a vertical statement
  // with an input read with stride 2 (CodegenOptions::half_width_stride_two_tails); elsewhere
  // masked chunks cost little, and a block's accumulators interleaved count for more.
  bool half_width_tails = false;
  // A register block of fewer than kLatencyChains accumulators (a tail's: the last row of a
  // 7-row map blocked by 3) spreads the unrolled reduction steps inside the scope over several
  // sets of accumulators, as many as bring it to kLatencyChains and the full block's registers
  // hold, combined on exit: a vertical sum or max with an unrolled reduction loop in the scope.
  bool spread_small_blocks = false;
  // Full-vector stores of the output are non-temporal (the schedule's StatementSchedule::stream,
  // or CodegenOptions::stream_output_min_bytes): every one is aligned to the vector's bytes
  // relative to the output tensor's base.
  bool stream_output = false;
  std::vector<LoopPlan> loops;  // the compute nest, outermost first
  AccessPlan output;
  std::vector<AccessPlan> inputs;
  std::vector<std::string> notes;  // decisions worth telling a user (scalar fallback, ...)
};

// Independent accumulators that keep the FMA pipes busy: latency 4 cycles x 2 pipes on the
// cores we target (AMD Zen 3-5, Intel since Skylake).
inline constexpr int kLatencyChains = 8;

struct KernelPlan {
  Isa isa = Isa::kSse;
  std::vector<StatementPlan> statements;
  std::vector<int> tail_lanes;  // distinct lane counts of masked chunks, ascending
};

// Plans the kernel of `tree`'s schedule for `isa`. Total: every valid LoopTree has a plan.
KernelPlan Lower(const LoopTree& tree, Isa isa, const CodegenOptions& options = {});

// The plan as indented pseudo-code, one line per loop, the register scope marked:
//   for k' in 64 (loop)            for n' in 64 by 16 lanes (unrolled)
std::string DescribePlan(const KernelPlan& plan, const Program& program);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_CODEGEN_KERNEL_PLAN_H_
