// KernelCompiler: LoopTree schedule -> Kernel, through Lower (the plan) and EmitKernel (the
// code). Where the Xbyak errors of schedule kernels become statuses (the peak kernel's own
// generator, MakePeakKernel, converts its errors itself). Keeps one scratch code buffer, so an
// instance is not thread-safe: use one per thread.
#ifndef LOOPTOOL_BACKEND_CODEGEN_COMPILE_H_
#define LOOPTOOL_BACKEND_CODEGEN_COMPILE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/codegen/codegen_options.h"
#include "backend/codegen/isa.h"
#include "backend/codegen/kernel.h"
#include "backend/codegen/kernel_plan.h"
#include "backend/schedule/loop_tree.h"

namespace Xbyak {
class CodeGenerator;
}

namespace looptool {

class KernelCompiler {
 public:
  explicit KernelCompiler(Isa isa, CodegenOptions options = {});
  ~KernelCompiler();

  Isa isa() const { return isa_; }

  // RESOURCE_EXHAUSTED when the kernel's code exceeds options.max_code_bytes; INTERNAL when the
  // assembler rejects what the emitter produced (our bug).
  absl::StatusOr<Kernel> Compile(const LoopTree& tree);
  absl::StatusOr<Kernel> Compile(const KernelPlan& plan);
  // The same code as bytes: position-independent (rip-relative constants only, no relocations),
  // entry at offset 0, the same for the same plan on every run.
  absl::StatusOr<std::vector<uint8_t>> CompileCode(const LoopTree& tree);
  absl::StatusOr<std::vector<uint8_t>> CompileCode(const KernelPlan& plan);

 private:
  Isa isa_;
  CodegenOptions options_;
  // Emits `plan` into scratch_; on success the code is scratch_'s.
  absl::Status Emit(const KernelPlan& plan);

  std::unique_ptr<Xbyak::CodeGenerator> scratch_;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_CODEGEN_COMPILE_H_
