#include "backend/costmodel/learning_timer.h"

#include <utility>

namespace looptool {

LearningTimer::LearningTimer(std::shared_ptr<KernelTimer> inner,
                             std::shared_ptr<LearnedCostModel> model)
    : inner_(std::move(inner)), model_(std::move(model)) {}

absl::StatusOr<Measurement> LearningTimer::Learn(const LoopTree& tree,
                                                 absl::StatusOr<Measurement> m) {
  // An abandoned run's GFLOPS are a bound far above the kernel's speed: not a label.
  if (m.ok() && m->timing != Measurement::Timing::kAbandoned) model_->Learn(tree, m->gflops);
  return m;
}

absl::StatusOr<Measurement> LearningTimer::MeasureFor(const LoopTree& tree, uint64_t tenant) {
  return Learn(tree, inner_->MeasureFor(tree, tenant));
}

absl::StatusOr<Measurement> LearningTimer::RemeasureFor(const LoopTree& tree, uint64_t tenant) {
  return Learn(tree, inner_->RemeasureFor(tree, tenant));
}

}  // namespace looptool
