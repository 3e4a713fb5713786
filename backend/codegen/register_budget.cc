#include "backend/codegen/register_budget.h"

namespace looptool {

RegisterBudget BudgetFor(Isa isa, int width, PostOp post_op) {
  RegisterBudget b;
  b.registers = width == 1 ? 16 : Traits(isa).vector_registers;
  int top = b.registers;
  b.arithmetic = --top;
  b.operand0 = --top;
  b.operand1 = --top;
  if (post_op == PostOp::kRelu) b.relu_zero = --top;
  // AVX2 has no mask registers: its masked tails (vmaskmovps) take a vector register.
  if (isa == Isa::kAvx2 && width > 1) b.lane_mask = --top;
  b.accumulators = top;
  return b;
}

}  // namespace looptool
