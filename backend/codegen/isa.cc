#include "backend/codegen/isa.h"

#include <xbyak/xbyak_util.h>

#include "absl/strings/str_cat.h"

namespace looptool {

IsaTraits Traits(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return {16, 32, "avx512"};
    case Isa::kAvx2:
      return {8, 16, "avx2"};
    case Isa::kSse:
      return {1, 16, "sse"};
  }
  return {1, 16, "sse"};
}

std::vector<std::string> CpuFeatures(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return {"avx512f", "avx512vl", "fma"};
    case Isa::kAvx2:
      return {"avx", "avx2", "fma"};
    case Isa::kSse:
      return {};
  }
  return {};
}

bool IsaSupported(Isa isa) {
  using Xbyak::util::Cpu;
  const Cpu cpu;
  switch (isa) {
    case Isa::kAvx512:
      // Width-8 statements use ymm registers with k masks (AVX512VL).
      return cpu.has(Cpu::tAVX512F) && cpu.has(Cpu::tAVX512VL) && cpu.has(Cpu::tFMA);
    case Isa::kAvx2:
      return cpu.has(Cpu::tAVX2) && cpu.has(Cpu::tFMA);
    case Isa::kSse:
      return true;
  }
  return false;
}

Isa DetectIsa() {
  if (IsaSupported(Isa::kAvx512)) return Isa::kAvx512;
  if (IsaSupported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kSse;
}

absl::StatusOr<Isa> ParseIsa(absl::string_view name) {
  Isa isa;
  if (name == "auto") return DetectIsa();
  if (name == "avx512") {
    isa = Isa::kAvx512;
  } else if (name == "avx2") {
    isa = Isa::kAvx2;
  } else if (name == "sse") {
    isa = Isa::kSse;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("Unknown ISA '", name, "': use avx512, avx2, sse or auto"));
  }
  if (!IsaSupported(isa)) {
    return absl::InvalidArgumentError(absl::StrCat("This CPU cannot run ", name, " code"));
  }
  return isa;
}

}  // namespace looptool
