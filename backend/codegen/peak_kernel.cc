#include "backend/codegen/peak_kernel.h"

#include <xbyak/xbyak.h>

#include "absl/strings/str_cat.h"

namespace looptool {
namespace {

using namespace Xbyak::util;  // NOLINT: registers read like assembly here

constexpr int kUnroll = 8;

class PeakGenerator : public Xbyak::CodeGenerator {
 public:
  PeakGenerator(Isa isa, int chains) : Xbyak::CodeGenerator(4096, Xbyak::DontSetProtectRWE) {
    const int regs = Traits(isa).vector_registers;
    auto v = [&](int i) -> Xbyak::Xmm {
      if (isa == Isa::kAvx512) return Xbyak::Zmm(i);
      if (isa == Isa::kAvx2) return Xbyak::Ymm(i);
      return Xbyak::Xmm(i);
    };
    auto zero = [&](const Xbyak::Xmm& r) {
      if (isa == Isa::kSse) {
        xorps(r, r);
      } else if (isa == Isa::kAvx512) {
        vpxord(r, r, r);
      } else {
        vxorps(r, r, r);
      }
    };
    const Xbyak::Xmm a = v(regs - 1), b = v(regs - 2);
    for (int i = 0; i < chains; ++i) zero(v(i));
    zero(a);
    zero(b);
    // rdi: iterations
    Xbyak::Label loop;
    L(loop);
    for (int u = 0; u < kUnroll; ++u) {
      for (int i = 0; i < chains; ++i) {
        if (isa == Isa::kSse) {
          mulss(v(i), a);  // no FMA: a multiply and an add per chain step
          addss(v(i), b);
        } else {
          vfmadd231ps(v(i), a, b);
        }
      }
    }
    dec(rdi);
    jnz(loop, T_NEAR);
    if (isa != Isa::kSse) vzeroupper();
    ret();
  }
};

}  // namespace

absl::StatusOr<PeakKernel> MakePeakKernel(Isa isa, int chains) {
  if (chains < 1 || chains > Traits(isa).vector_registers - 2) {
    return absl::InvalidArgumentError(absl::StrCat("chains must be in 1..",
                                                   Traits(isa).vector_registers - 2));
  }
  try {
    PeakGenerator gen(isa, chains);
    auto kernel = Kernel::FromCode(gen.getCode(), gen.getSize());
    if (!kernel.ok()) return kernel.status();
    const int64_t lanes = Traits(isa).vector_width;
    return PeakKernel{*std::move(kernel), int64_t{2} * chains * lanes * kUnroll};
  } catch (const Xbyak::Error& e) {
    return absl::InternalError(absl::StrCat("peak kernel generation failed: ", e.what()));
  }
}

}  // namespace looptool
