// BlockEmitter: emits a straight-line block of point operations (one per iteration point of the
// unrolled loops inside the register scope), keeping operands that are read more than once in
// vector registers. When registers run out, the cached operand whose next use is farthest away
// is dropped (Belady); operands read once stay memory operands where the instruction allows.
// An operand that must be in a register but finds no cache register free is loaded into an
// operand temporary, and the next op that reads the same operand there uses it as it is.
#ifndef LOOPTOOL_BACKEND_CODEGEN_BLOCK_EMITTER_H_
#define LOOPTOOL_BACKEND_CODEGEN_BLOCK_EMITTER_H_

#include <cstdint>
#include <vector>

#include <xbyak/xbyak.h>

#include "backend/codegen/kernel_plan.h"
#include "backend/codegen/vector_ops.h"

namespace looptool {

// One input operand of a point operation.
struct OperandRef {
  int input = 0;         // index into StatementPlan::inputs
  int64_t offset = 0;    // bytes from the input's pointer register
  AccessPlan::Kind kind = AccessPlan::Kind::kVector;
  int lanes = 1;         // active lanes (the full width for broadcasts)
  int64_t stride = 1;    // elements between lanes (kStrided)

  bool operator<(const OperandRef& o) const;
  bool operator==(const OperandRef& o) const;
};

// acc = reduce(acc, combine(x, y)) at one iteration point.
struct PointOp {
  int acc = 0;  // accumulator register
  OperandRef x, y;  // y only for binary combiners
  int lanes = 1;
};

// Registers the block may use: `cache` for operands, `load0`/`load1` for operands that must be
// in a register but are not cached, `tmp` for VectorOps::Accumulate and LoadStrided.
struct BlockRegisters {
  std::vector<int> cache;
  int load0 = 0, load1 = 0, tmp = 0;
};

void EmitBlock(const std::vector<PointOp>& block, const StatementPlan& statement,
               const std::vector<Xbyak::Reg64>& input_pointers, const BlockRegisters& regs,
               VectorOps& ops);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_CODEGEN_BLOCK_EMITTER_H_
