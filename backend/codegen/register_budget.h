// RegisterBudget: how one statement's kernel divides the vector register file, the one place
// that knows it. The emitter keeps a fixed set of registers at the top of the file (an
// arithmetic temporary, two operand temporaries, relu's zero, AVX2's lane mask); the
// accumulators of the register scope take the registers from 0 up, and whatever lies between
// them and the reserved ones caches operands. The planner sizes the register scope by
// `accumulators`, the emitter allocates by the indices, and the sketches size their register
// blocks by the same numbers, so a sketch's block is the plan's.
#ifndef LOOPTOOL_BACKEND_CODEGEN_REGISTER_BUDGET_H_
#define LOOPTOOL_BACKEND_CODEGEN_REGISTER_BUDGET_H_

#include "backend/codegen/isa.h"
#include "backend/ir/program.h"

namespace looptool {

struct RegisterBudget {
  int registers = 16;   // the statement's code uses registers 0 .. registers-1
  int arithmetic = -1;  // the arithmetic temporary
  int operand0 = -1;    // the two operand temporaries (loads, broadcasts)
  int operand1 = -1;
  int relu_zero = -1;   // -1: no relu post-op
  int lane_mask = -1;   // -1: no mask register (AVX-512 masks live in k registers)
  int accumulators = 0;  // registers 0 .. accumulators-1 may hold the output block
};

// The budget of a statement with post-op `post_op` whose code runs `width` lanes wide for `isa`
// (width 1: scalar code, which stays in xmm0-15, VEX-encodable on every AVX machine).
RegisterBudget BudgetFor(Isa isa, int width, PostOp post_op);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_CODEGEN_REGISTER_BUDGET_H_
