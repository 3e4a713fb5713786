#include "backend/costmodel/learned_cost_model.h"

#include <vector>

#include "backend/costmodel/plan_features.h"

namespace looptool {
namespace {

// The ridge regression reads PlanFeatureNames() up to `stride_two_loads`: the features its
// ranking of evolution's children was measured with. The ones appended since (what the loops
// outside the block cost, the kernel's bytes, its streams) are for the policies' trained cost
// models, which have the records to weigh them; 24 online measurements do not.
constexpr int kOnlineFeatures = 33;

std::vector<double> OnlineFeatures(const LoopTree& tree, Isa target) {
  std::vector<double> f = PlanFeatures(tree, target);
  f.resize(kOnlineFeatures);
  return f;
}

}  // namespace

LearnedCostModel::LearnedCostModel(Isa target, CostModel::Options options)
    : target_(target), model_(kOnlineFeatures, options) {}

void LearnedCostModel::Learn(const LoopTree& tree, double gflops) {
  model_.Add(OnlineFeatures(tree, target_), gflops);
}

double LearnedCostModel::PredictGflops(const LoopTree& tree) const {
  return model_.Predict(OnlineFeatures(tree, target_));
}

}  // namespace looptool
