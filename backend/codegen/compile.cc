#include "backend/codegen/compile.h"

#include <xbyak/xbyak.h>

#include "absl/strings/str_cat.h"
#include "backend/codegen/emitter.h"

namespace looptool {

KernelCompiler::KernelCompiler(Isa isa, CodegenOptions options)
    : isa_(isa),
      options_(options),
      scratch_(std::make_unique<Xbyak::CodeGenerator>(static_cast<size_t>(options.max_code_bytes),
                                                      Xbyak::DontSetProtectRWE)) {}

KernelCompiler::~KernelCompiler() = default;

absl::StatusOr<Kernel> KernelCompiler::Compile(const LoopTree& tree) {
  return Compile(Lower(tree, isa_, options_));
}

absl::StatusOr<Kernel> KernelCompiler::Compile(const KernelPlan& plan) {
  if (absl::Status s = Emit(plan); !s.ok()) return s;
  return Kernel::FromCode(scratch_->getCode(), scratch_->getSize());
}

absl::StatusOr<std::vector<uint8_t>> KernelCompiler::CompileCode(const LoopTree& tree) {
  return CompileCode(Lower(tree, isa_, options_));
}

absl::StatusOr<std::vector<uint8_t>> KernelCompiler::CompileCode(const KernelPlan& plan) {
  if (absl::Status s = Emit(plan); !s.ok()) return s;
  return std::vector<uint8_t>(scratch_->getCode(), scratch_->getCode() + scratch_->getSize());
}

absl::Status KernelCompiler::Emit(const KernelPlan& plan) {
  scratch_->reset();
  try {
    EmitKernel(plan, *scratch_);
  } catch (const Xbyak::Error& e) {
    scratch_->reset();
    if (static_cast<int>(e) == Xbyak::ERR_CODE_IS_TOO_BIG) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the kernel's code exceeds ", options_.max_code_bytes, " bytes; simplify the tails"));
    }
    return absl::InternalError(absl::StrCat("code generation failed: ", e.what()));
  }
  if (scratch_->hasUndefinedLabel()) return absl::InternalError("code generation left a label undefined");
  return absl::OkStatus();
}

}  // namespace looptool
