// Isa: the instruction sets the code generator targets, chosen at run time from CPUID.
//   kAvx512: 16 float lanes, 32 zmm registers, k-mask tails.
//   kAvx2:   8 float lanes (with FMA3), 16 ymm registers, vmaskmovps tails.
//   kSse:    scalar code on xmm registers (movss/mulss/addss); runs on every x86-64.
#ifndef LOOPTOOL_BACKEND_CODEGEN_ISA_H_
#define LOOPTOOL_BACKEND_CODEGEN_ISA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace looptool {

enum class Isa { kSse, kAvx2, kAvx512 };

struct IsaTraits {
  int vector_width;    // float lanes of one vector register
  int vector_registers;
  const char* name;    // "avx512", "avx2", "sse"
};

IsaTraits Traits(Isa isa);
// The largest stride, in elements, that vector code reads or writes a tensor with along the
// vector variable: gathers' and scatters' lane offsets are 32-bit (15 lanes x 2^24 x 4 bytes
// fits). The code generator makes scalar code of a statement with a larger one.
inline constexpr int64_t kMaxVectorStride = int64_t{1} << 24;
// The CPU features code for `isa` executes, as GCC's __builtin_cpu_supports spells them
// (avx512: avx512f, avx512vl, fma; avx2: avx, avx2, fma; sse: none beyond x86-64).
std::vector<std::string> CpuFeatures(Isa isa);
// The best instruction set this CPU runs.
Isa DetectIsa();
bool IsaSupported(Isa isa);
// "avx512" | "avx2" | "sse" | "auto" (DetectIsa); INVALID_ARGUMENT otherwise, or when the
// host cannot run it.
absl::StatusOr<Isa> ParseIsa(absl::string_view name);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_CODEGEN_ISA_H_
