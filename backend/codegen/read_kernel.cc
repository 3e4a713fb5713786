#include "backend/codegen/read_kernel.h"

#include <xbyak/xbyak.h>

#include "absl/strings/str_cat.h"

namespace looptool {
namespace {

using namespace Xbyak::util;  // NOLINT: registers read like assembly here

// Vector register i at the ISA's full width (SSE's xmm too: the hardware's bandwidth).
Xbyak::Xmm Register(Isa isa, int i) {
  if (isa == Isa::kAvx512) return Xbyak::Zmm(i);
  if (isa == Isa::kAvx2) return Xbyak::Ymm(i);
  return Xbyak::Xmm(i);
}

class ReadGenerator : public Xbyak::CodeGenerator {
 public:
  explicit ReadGenerator(Isa isa) : Xbyak::CodeGenerator(4096, Xbyak::DontSetProtectRWE) {
    const int bytes = ReadKernelLanes(isa) * 4;
    auto v = [isa](int i) { return Register(isa, i); };
    for (int i = 0; i < kReadKernelUnroll; ++i) {
      if (isa == Isa::kSse) {
        xorps(v(i), v(i));
      } else if (isa == Isa::kAvx512) {
        vpxord(v(i), v(i), v(i));
      } else {
        vxorps(v(i), v(i), v(i));
      }
    }
    // rdi: data, rsi: steps, rdx: passes, rcx: out
    Xbyak::Label pass, loop;
    L(pass);
    mov(rax, rdi);
    mov(r8, rsi);
    L(loop);
    for (int i = 0; i < kReadKernelUnroll; ++i) {
      if (isa == Isa::kSse) {
        addps(v(i), ptr[rax + i * bytes]);
      } else {
        vaddps(v(i), v(i), ptr[rax + i * bytes]);
      }
    }
    add(rax, kReadKernelUnroll * bytes);
    dec(r8);
    jnz(loop, T_NEAR);
    dec(rdx);
    jnz(pass, T_NEAR);
    for (int i = 1; i < kReadKernelUnroll; ++i) {
      if (isa == Isa::kSse) {
        addps(v(0), v(i));
      } else {
        vaddps(v(0), v(0), v(i));
      }
    }
    if (isa == Isa::kSse) {
      movups(ptr[rcx], v(0));
    } else {
      vmovups(ptr[rcx], v(0));
      vzeroupper();
    }
    ret();
  }
};

// What the copy and fill kernels share: their stores and their end.
class StoreGenerator : public Xbyak::CodeGenerator {
 protected:
  StoreGenerator(Isa isa, bool streaming)
      : Xbyak::CodeGenerator(4096, Xbyak::DontSetProtectRWE), isa_(isa), streaming_(streaming) {}

  void Store(const Xbyak::Address& to, const Xbyak::Xmm& v) {
    if (isa_ == Isa::kSse) {
      streaming_ ? movntps(to, v) : movups(to, v);
    } else {
      streaming_ ? vmovntps(to, v) : vmovups(to, v);
    }
  }

  // Non-temporal stores fenced, the upper halves cleared, return.
  void End() {
    if (streaming_) sfence();
    if (isa_ != Isa::kSse) vzeroupper();
    ret();
  }

 private:
  Isa isa_;
  bool streaming_;
};

class CopyGenerator : public StoreGenerator {
 public:
  CopyGenerator(Isa isa, bool streaming) : StoreGenerator(isa, streaming) {
    const int bytes = ReadKernelLanes(isa) * 4;
    // rdi: src, rsi: dst, rdx: steps, rcx: passes
    Xbyak::Label pass, loop;
    L(pass);
    mov(rax, rdi);
    mov(r9, rsi);
    mov(r8, rdx);
    L(loop);
    for (int i = 0; i < kReadKernelUnroll; ++i) {
      if (isa == Isa::kSse) {
        movups(Register(isa, i), ptr[rax + i * bytes]);
      } else {
        vmovups(Register(isa, i), ptr[rax + i * bytes]);
      }
    }
    for (int i = 0; i < kReadKernelUnroll; ++i) Store(ptr[r9 + i * bytes], Register(isa, i));
    add(rax, kReadKernelUnroll * bytes);
    add(r9, kReadKernelUnroll * bytes);
    dec(r8);
    jnz(loop, T_NEAR);
    dec(rcx);
    jnz(pass, T_NEAR);
    End();
  }
};

class FillGenerator : public StoreGenerator {
 public:
  FillGenerator(Isa isa, bool streaming) : StoreGenerator(isa, streaming) {
    const int bytes = ReadKernelLanes(isa) * 4;
    const Xbyak::Xmm value = Register(isa, 0);
    // rdi: dst, rsi: steps, rdx: passes, xmm0: the value
    if (isa == Isa::kSse) {
      shufps(xmm0, xmm0, 0);
    } else {
      vbroadcastss(value, xmm0);
    }
    Xbyak::Label pass, loop;
    L(pass);
    mov(rax, rdi);
    mov(r8, rsi);
    L(loop);
    for (int i = 0; i < kReadKernelUnroll; ++i) Store(ptr[rax + i * bytes], value);
    add(rax, kReadKernelUnroll * bytes);
    dec(r8);
    jnz(loop, T_NEAR);
    dec(rdx);
    jnz(pass, T_NEAR);
    End();
  }
};

}  // namespace

int ReadKernelLanes(Isa isa) {
  return isa == Isa::kAvx512 ? 16 : isa == Isa::kAvx2 ? 8 : 4;
}

absl::StatusOr<Kernel> MakeReadKernel(Isa isa) {
  try {
    ReadGenerator gen(isa);
    return Kernel::FromCode(gen.getCode(), gen.getSize());
  } catch (const Xbyak::Error& e) {
    return absl::InternalError(absl::StrCat("read kernel generation failed: ", e.what()));
  }
}

absl::StatusOr<Kernel> MakeCopyKernel(Isa isa, bool streaming_stores) {
  try {
    CopyGenerator gen(isa, streaming_stores);
    return Kernel::FromCode(gen.getCode(), gen.getSize());
  } catch (const Xbyak::Error& e) {
    return absl::InternalError(absl::StrCat("copy kernel generation failed: ", e.what()));
  }
}

absl::StatusOr<Kernel> MakeFillKernel(Isa isa, bool streaming_stores) {
  try {
    FillGenerator gen(isa, streaming_stores);
    return Kernel::FromCode(gen.getCode(), gen.getSize());
  } catch (const Xbyak::Error& e) {
    return absl::InternalError(absl::StrCat("fill kernel generation failed: ", e.what()));
  }
}

}  // namespace looptool
