// ISA detection agrees with the compiler's own CPUID probe (__builtin_cpu_supports) on any x86-64
// host, with or without AVX-512, and ParseIsa accepts exactly the ISAs the host runs.
#include "backend/codegen/isa.h"

#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/codegen/jit_check.h"

namespace looptool {
namespace {

using ::testing::HasSubstr;

bool CpuHasAvx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
}
bool CpuHasAvx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

TEST(Isa, SupportAgreesWithTheCompilersCpuProbe) {
  __builtin_cpu_init();
  EXPECT_EQ(IsaSupported(Isa::kAvx512), CpuHasAvx512());
  EXPECT_EQ(IsaSupported(Isa::kAvx2), CpuHasAvx2());
  EXPECT_TRUE(IsaSupported(Isa::kSse));
  const Isa best = CpuHasAvx512() ? Isa::kAvx512 : CpuHasAvx2() ? Isa::kAvx2 : Isa::kSse;
  EXPECT_EQ(DetectIsa(), best) << Traits(DetectIsa()).name << " detected, "
                               << Traits(best).name << " expected";
}

TEST(Isa, HostIsasAreTheSupportedOnesBestFirst) {
  std::vector<Isa> expected;
  if (CpuHasAvx512()) expected.push_back(Isa::kAvx512);
  if (CpuHasAvx2()) expected.push_back(Isa::kAvx2);
  expected.push_back(Isa::kSse);
  EXPECT_EQ(testing::HostIsas(), expected);
  EXPECT_EQ(testing::HostIsas().front(), DetectIsa());
  if (!CpuHasAvx512()) {
    std::printf("note: this host has no AVX-512; the kernel tests check %s only\n",
                CpuHasAvx2() ? "AVX2 and SSE" : "SSE");
  }
}

TEST(Isa, Traits) {
  EXPECT_EQ(Traits(Isa::kAvx512).vector_width, 16);
  EXPECT_EQ(Traits(Isa::kAvx512).vector_registers, 32);
  EXPECT_STREQ(Traits(Isa::kAvx512).name, "avx512");
  EXPECT_EQ(Traits(Isa::kAvx2).vector_width, 8);
  EXPECT_EQ(Traits(Isa::kAvx2).vector_registers, 16);
  EXPECT_STREQ(Traits(Isa::kAvx2).name, "avx2");
  EXPECT_EQ(Traits(Isa::kSse).vector_width, 1);
  EXPECT_STREQ(Traits(Isa::kSse).name, "sse");
}

TEST(Isa, ParseIsaAcceptsWhatTheHostRuns) {
  EXPECT_EQ(*ParseIsa("auto"), DetectIsa());
  EXPECT_EQ(*ParseIsa("sse"), Isa::kSse);
  for (const auto& [name, isa] : {std::make_pair("avx512", Isa::kAvx512),
                                   std::make_pair("avx2", Isa::kAvx2)}) {
    absl::StatusOr<Isa> parsed = ParseIsa(name);
    if (IsaSupported(isa)) {
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      EXPECT_EQ(*parsed, isa);
    } else {
      EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(parsed.status().message(), std::string("This CPU cannot run ") + name + " code");
    }
  }
  for (const char* name : {"", "AVX2", "avx", "neon", "auto "}) {
    const absl::Status s = ParseIsa(name).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(s.message(),
              std::string("Unknown ISA '") + name + "': use avx512, avx2, sse or auto");
  }
}

}  // namespace
}  // namespace looptool
