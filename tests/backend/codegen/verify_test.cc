// Verification catches a kernel that computes the wrong thing and names the schedule.
#include "backend/codegen/verify.h"

#include "backend/codegen/compile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/codegen/jit_check.h"

namespace looptool {
namespace {

using ::testing::HasSubstr;
using testing::InitialTree;

TEST(Verify, CorrectKernelPasses) {
  const LoopTree t = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=9 n=20 k=7");
  KernelCompiler compiler(DetectIsa());
  auto kernel = compiler.Compile(t);
  ASSERT_TRUE(kernel.ok());
  const ReferenceRun ref = MakeReference(t.program());
  EXPECT_EQ(ref.tolerance, 0);
  TensorData scratch = ref.expected;
  EXPECT_TRUE(VerifyKernel(*kernel, t, ref, scratch).ok());
}

TEST(Verify, WrongKernelIsAnInternalErrorNamingTheSchedule) {
  // A kernel without relu checked against the relu program's reference.
  const LoopTree plain = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=9 n=20 k=7");
  const LoopTree relu = InitialTree("C[m,n] += A[m,k] * B[k,n] -> relu; m=9 n=20 k=7");
  KernelCompiler compiler(DetectIsa());
  auto kernel = compiler.Compile(plain);
  ASSERT_TRUE(kernel.ok());
  const ReferenceRun ref = MakeReference(relu.program());
  TensorData scratch = ref.expected;
  const absl::Status s = VerifyKernel(*kernel, relu, ref, scratch);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("kernel failed verification: C["));
  EXPECT_THAT(s.message(), HasSubstr("where the reference interpreter computes"));
  EXPECT_THAT(s.message(), HasSubstr("compute 1: m(9) k(7) n(20)"));
}

TEST(Verify, LongReductionsGetTheFloatErrorBound) {
  const ReferenceRun ref = MakeReference(*InitialTree("t[] += A[m,n]; m=4096 n=4096").program_ptr());
  EXPECT_GT(ref.tolerance, 0);
  EXPECT_EQ(MakeReference(*InitialTree("t[] += A[m,n]; m=64 n=64").program_ptr()).tolerance, 0);
}

}  // namespace
}  // namespace looptool
