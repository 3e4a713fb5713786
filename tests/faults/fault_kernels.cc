#include "tests/faults/fault_kernels.h"

#include "absl/strings/str_cat.h"
#include "xbyak/xbyak.h"

namespace looptool::testing {
namespace {

// The faulty kernels, JIT-compiled like every other kernel.
struct CrashKernel : Xbyak::CodeGenerator {
  CrashKernel() {
    xor_(eax, eax);
    mov(dword[rax], 1);  // store to address 0: SIGSEGV
    ret();
  }
};
struct HangKernel : Xbyak::CodeGenerator {
  HangKernel() {
    L("spin");
    jmp("spin");  // never returns
  }
};

}  // namespace

WorkerExtension FaultWorkerExtension() {
  return [](absl::string_view payload) {
    WorkerReply reply;
    if (payload == "crash") {
      CrashKernel k;
      k.getCode<void (*)()>()();
    } else if (payload == "hang") {
      HangKernel k;
      k.getCode<void (*)()>()();
    } else {
      reply.status = absl::InvalidArgumentError(absl::StrCat("unknown fault '", payload, "'"));
    }
    return reply;
  };
}

}  // namespace looptool::testing
