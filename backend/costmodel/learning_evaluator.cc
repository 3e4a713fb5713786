#include "backend/costmodel/learning_evaluator.h"

#include <utility>

#include "backend/costmodel/plan_features.h"

namespace looptool {

LearningEvaluator::LearningEvaluator(std::shared_ptr<KernelEvaluator> inner, Isa isa,
                                     CostModel::Options options)
    : inner_(std::move(inner)),
      isa_(isa),
      model_(static_cast<int>(PlanFeatureNames().size()), options) {}

absl::StatusOr<std::shared_ptr<LearningEvaluator>> LearningEvaluator::Wrap(
    std::shared_ptr<KernelEvaluator> inner, absl::string_view isa) {
  absl::StatusOr<Isa> parsed = ParseIsa(isa);
  if (!parsed.ok()) return parsed.status();
  return std::make_shared<LearningEvaluator>(std::move(inner), *parsed);
}

absl::StatusOr<Measurement> LearningEvaluator::Learn(const LoopTree& tree,
                                                     absl::StatusOr<Measurement> m) {
  if (m.ok()) model_.Add(PlanFeatures(tree, isa_), m->gflops);
  return m;
}

absl::StatusOr<Measurement> LearningEvaluator::Measure(const LoopTree& tree) {
  return Learn(tree, inner_->Measure(tree));
}

absl::StatusOr<Measurement> LearningEvaluator::MeasureFor(const LoopTree& tree, uint64_t tenant) {
  return Learn(tree, inner_->MeasureFor(tree, tenant));
}

absl::StatusOr<Measurement> LearningEvaluator::RemeasureFor(const LoopTree& tree,
                                                            uint64_t tenant) {
  return Learn(tree, inner_->RemeasureFor(tree, tenant));
}

absl::StatusOr<double> LearningEvaluator::PredictGflops(const LoopTree& tree) {
  return model_.Predict(PlanFeatures(tree, isa_));
}

}  // namespace looptool
