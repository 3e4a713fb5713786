#include "backend/timing/cost_estimate.h"

namespace looptool {

double EstimateEvaluationSeconds(const Program& program) {
  double elements = 0;
  for (int t = 0; t < static_cast<int>(program.tensors().size()); ++t) {
    elements += static_cast<double>(program.NumElements(t));
  }
  const double flops = static_cast<double>(program.Flops());
  return flops * (kInterpreterSecondsPerFlop + kKernelSecondsPerFlop) +
         elements * (kSecondsPerElement + kPassesOverEachElement * kMissSecondsPerElementPass);
}

}  // namespace looptool
