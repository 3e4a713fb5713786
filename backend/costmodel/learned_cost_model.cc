#include "backend/costmodel/learned_cost_model.h"

#include "backend/costmodel/plan_features.h"

namespace looptool {

LearnedCostModel::LearnedCostModel(Isa target, CostModel::Options options)
    : target_(target), model_(static_cast<int>(PlanFeatureNames().size()), options) {}

void LearnedCostModel::Learn(const LoopTree& tree, double gflops) {
  model_.Add(PlanFeatures(tree, target_), gflops);
}

double LearnedCostModel::PredictGflops(const LoopTree& tree) const {
  return model_.Predict(PlanFeatures(tree, target_));
}

}  // namespace looptool
