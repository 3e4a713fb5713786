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

TEST(Verify, TheReferenceEqualsTheUntiledNestInProgramOrder) {
  // MakeReference interprets the untiled nest in the order that reads memory best, not in the
  // program's order; on its inputs every order computes the same floats, bit for bit.
  for (const char* program : {
           "C[m,n] += A[m,k] * B[k,n]; m=9 n=20 k=7",
           "Y[m,b,n] += X[m,k] * W[b,k,n]; m=5 b=6 n=8 k=33",
           "O[k,h,w] += I[c, 2*h+r, 2*w+s] * W[k,c,r,s] -> relu; k=5 c=3 h=6 w=7 r=3 s=3",
           "O[c,h,w] max= I[c, 2*h+r, 2*w+s]; c=4 h=5 w=6 r=3 s=3",
           "B[n,m] = A[m,n]; m=13 n=17",
           "C[m] = A[m]; C[n + 4] = B[n]; m=4 n=5",
           "s[m] += A[n,m]; t[n] max= A[n,m]; m=40 n=30",
           "t[] += A[m,n]; m=4096 n=4096",  // thinned inputs
       }) {
    SCOPED_TRACE(program);
    const LoopTree initial = InitialTree(program);
    const Program& p = initial.program();
    const ReferenceRun ref = MakeReference(p);
    ASSERT_EQ(ref.tolerance, 0);
    TensorData in_order = AllocateTensors(p);
    for (int t : p.InputTensors()) in_order[t] = ref.expected[t];
    Interpret(initial, in_order);
    for (int t : p.OutputTensors()) {
      EXPECT_EQ(in_order[t], ref.expected[t]) << p.tensor(t).name;
      bool nonzero = false;
      for (float x : ref.expected[t]) nonzero = nonzero || x != 0;
      EXPECT_TRUE(nonzero) << p.tensor(t).name;
    }
  }
}

TEST(Verify, LongReductionsStayExact) {
  // Reductions whose worst-case partial sum on inputs in [-2, 2] reaches 2^24 get thinned-out
  // inputs, so that every output's sum of |terms| stays below 2^24: every partial sum in any
  // order is then an exact float and verification compares exactly (tolerance 0), instead of a
  // tolerance as large as the results themselves, which would pass a kernel returning 0.
  for (const char* program :
       {"t[] += A[m,n]; m=4096 n=4096", "t[] += A[m,n]; m=4096 n=2048",
        "t[] += A[m,k] * B[m,k]; m=2048 k=2048", "s[m] += A[m,n] * B[m,n]; m=4096 n=4096",
        "t[] max= A[m,n]; m=4096 n=4096", "t[] += A[m,n]; m=64 n=64"}) {
    SCOPED_TRACE(program);
    const LoopTree tree = InitialTree(program);
    const Program& p = tree.program();
    const ReferenceRun ref = MakeReference(p);
    EXPECT_EQ(ref.tolerance, 0);
    // The inputs are not all thinned away: the reduction still has terms to get wrong.
    int64_t nonzero = 0;
    for (int t : p.InputTensors()) {
      for (float x : ref.expected[t]) nonzero += x != 0;
    }
    EXPECT_GT(nonzero, 1000);
  }
}

TEST(Verify, AWrongLongReductionFails) {
  const LoopTree t = InitialTree("t[] += A[m,n]; m=4096 n=4096");
  KernelCompiler compiler(DetectIsa());
  auto kernel = compiler.Compile(t);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  ReferenceRun ref = MakeReference(t.program());
  TensorData scratch = ref.expected;
  EXPECT_TRUE(VerifyKernel(*kernel, t, ref, scratch).ok());
  const int out = t.program().OutputTensors()[0];
  ref.expected[out][0] += 1;  // off by one in 16M terms: caught
  scratch = ref.expected;
  EXPECT_EQ(VerifyKernel(*kernel, t, ref, scratch).code(), absl::StatusCode::kInternal);
}

// The reference of a small matmul whose element C[5] is moved by `delta`, checked with
// `tolerance`: the correct kernel then differs from it by exactly |delta| in one element.
absl::Status VerifyAgainstShifted(float delta, double tolerance) {
  const LoopTree t = InitialTree("C[m,n] += A[m,k] * B[k,n]; m=9 n=20 k=7");
  KernelCompiler compiler(DetectIsa());
  auto kernel = compiler.Compile(t);
  if (!kernel.ok()) return kernel.status();
  ReferenceRun ref = MakeReference(t.program());
  const int c = t.program().OutputTensors()[0];
  ref.expected[c][5] += delta;
  ref.tolerance = tolerance;
  TensorData scratch = ref.expected;
  return VerifyKernel(*kernel, t, ref, scratch);
}

TEST(Verify, ToleranceAcceptsDifferencesUpToTheBoundAndNoMore) {
  EXPECT_TRUE(VerifyAgainstShifted(0, 0).ok());
  // Exact mode: the smallest difference fails.
  EXPECT_EQ(VerifyAgainstShifted(1.0f / 1024, 0).code(), absl::StatusCode::kInternal);
  // With a bound of 0.5: a difference of exactly 0.5 passes (either sign), just above fails.
  EXPECT_TRUE(VerifyAgainstShifted(0.5f, 0.5).ok());
  EXPECT_TRUE(VerifyAgainstShifted(-0.5f, 0.5).ok());
  const absl::Status over = VerifyAgainstShifted(0.5f + 1.0f / 1024, 0.5);
  EXPECT_EQ(over.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(over.message(), HasSubstr("kernel failed verification: C[5] = "));
  EXPECT_EQ(VerifyAgainstShifted(-0.5f - 1.0f / 1024, 0.5).code(), absl::StatusCode::kInternal);
  // A large bound does not hide a larger error.
  EXPECT_EQ(VerifyAgainstShifted(1000.0f, 999.0).code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(VerifyAgainstShifted(1000.0f, 1000.0).ok());
}

}  // namespace
}  // namespace looptool
