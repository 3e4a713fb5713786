// EstimateEvaluationSeconds, checked by hand: flops at the interpreter's and a slow kernel's
// rate, and every element of every tensor filled and charged a miss in each pass, so that
// memory-bound programs (transposes: as many flops as elements) are not under-rated.
#include "backend/timing/cost_estimate.h"

#include <string>

#include "backend/ir/parser.h"
#include "gtest/gtest.h"

namespace looptool {
namespace {

double Estimate(const std::string& text) {
  auto p = ParseProgram(text, Limits{});
  EXPECT_TRUE(p.ok()) << p.status();
  return EstimateEvaluationSeconds(*p);
}

constexpr double kPerFlop = 1.5e-9 + 6 * 0.5e-9;
constexpr double kPerElement = 15e-9 + 7 * 20e-9;

TEST(CostEstimate, MatmulsAreChargedByTheirFlops) {
  // 512^3: 2 * 512^3 flops, 3 * 512^2 elements.
  const double flops = 2.0 * 512 * 512 * 512, elements = 3.0 * 512 * 512;
  EXPECT_DOUBLE_EQ(Estimate("C[m,n] += A[m,k] * B[k,n]; m=512 n=512 k=512"),
                   flops * kPerFlop + elements * kPerElement);
  EXPECT_LT(Estimate("C[m,n] += A[m,k] * B[k,n]; m=512 n=512 k=512"), 1.5);
  EXPECT_GT(Estimate("C[m,n] += A[m,k] * B[k,n]; m=2048 n=2048 k=2048"), 10);  // refused
}

// The case: a rank-6 transpose of 16^6 elements took 4.3 s to evaluate on the 2-vCPU
// EPYC (0.28 s per untiled kernel run); by flops and fills alone it was estimated at 0.58 s.
TEST(CostEstimate, TransposesAreChargedByTheirElements) {
  const double n = 16.0 * 16 * 16 * 16 * 16 * 16;
  const double rank6 = Estimate("B[a,b,c,d,e,f] = A[f,e,d,c,b,a]; a=16 b=16 c=16 d=16 e=16 f=16");
  EXPECT_DOUBLE_EQ(rank6, n * kPerFlop + 2 * n * kPerElement);
  EXPECT_GT(rank6, 4.3);
  // The same elements in two dimensions cost the same (the estimate does not see the order in
  // which a kernel visits them); half the elements, half the cost.
  EXPECT_DOUBLE_EQ(Estimate("B[n,m] = A[m,n]; m=4096 n=4096"), rank6);
  EXPECT_DOUBLE_EQ(Estimate("B[n,m] = A[m,n]; m=2048 n=4096"), rank6 / 2);
}

}  // namespace
}  // namespace looptool
