// EmitKernel: writes the machine code of a KernelPlan, `void kernel(float* const* tensors)`
// (one base pointer per tensor of the program, by tensor id), into a code generator. A plan
// that streams stores (StatementPlan::stream_output) gets the body twice: with non-temporal
// stores and an sfence, entered when every streamed tensor's base is aligned to the widest
// vector's bytes, and with plain stores otherwise.
//
// Register use (System V x86-64):
//   rdi        the tensors array              rax        scratch (mask and constant setup,
//                                                        the streamed bases' alignment)
//   rsi, rdx, rcx, r8 ...   one pointer per access of the statement (output, inputs), then
//                           loop counters; Xbyak::util::StackFrame pushes the callee-saved
//                           rbx, rbp, r12-r15 and reserves the stack slots of the counters
//                           beyond the registers
//   vector     accumulators from 0, then cached operands; at the top the arithmetic
//              temporary, two load temporaries, relu's zero, AVX2's lane mask
//   k1-k6      AVX-512 masks of the plan's tail lane counts; k7 for any other
#ifndef LOOPTOOL_BACKEND_CODEGEN_EMITTER_H_
#define LOOPTOOL_BACKEND_CODEGEN_EMITTER_H_

#include <xbyak/xbyak.h>

#include "backend/codegen/kernel_plan.h"

namespace looptool {

// Emits the kernel. Throws Xbyak::Error when the code does not fit the generator's buffer (the
// caller, Compile, turns that into a status).
void EmitKernel(const KernelPlan& plan, Xbyak::CodeGenerator& g);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_CODEGEN_EMITTER_H_
