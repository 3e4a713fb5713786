// LearningTimer: a KernelTimer that teaches a LearnedCostModel. It forwards every call to the
// timer it wraps (its statuses unchanged, so the KernelTimer error contract holds) and adds each
// kernel measured to the model.
#ifndef LOOPTOOL_BACKEND_COSTMODEL_LEARNING_TIMER_H_
#define LOOPTOOL_BACKEND_COSTMODEL_LEARNING_TIMER_H_

#include <cstdint>
#include <memory>

#include "backend/costmodel/learned_cost_model.h"
#include "backend/env/kernel_timer.h"

namespace looptool {

class LearningTimer final : public KernelTimer {
 public:
  LearningTimer(std::shared_ptr<KernelTimer> inner, std::shared_ptr<LearnedCostModel> model);

  absl::StatusOr<Measurement> MeasureFor(const LoopTree& tree, uint64_t tenant) override;
  absl::StatusOr<Measurement> RemeasureFor(const LoopTree& tree, uint64_t tenant) override;
  absl::StatusOr<double> PeakGflops() override { return inner_->PeakGflops(); }
  absl::StatusOr<MemoryProfile> Memory() override { return inner_->Memory(); }
  void PrepareFor(const LoopTree& tree, uint64_t tenant) override {
    inner_->PrepareFor(tree, tenant);
  }

 private:
  // Teaches the model a successful measurement; returns `m` unchanged.
  absl::StatusOr<Measurement> Learn(const LoopTree& tree, absl::StatusOr<Measurement> m);

  const std::shared_ptr<KernelTimer> inner_;
  const std::shared_ptr<LearnedCostModel> model_;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_COSTMODEL_LEARNING_TIMER_H_
