// LearningEvaluator: a KernelEvaluator that teaches a CostModel. It forwards every call to the
// evaluator it wraps, adds each kernel measured to the model (PlanFeatures -> GFLOPS), and
// answers PredictGflops from it: the `predicted_gflops` observation.
#ifndef LOOPTOOL_BACKEND_COSTMODEL_LEARNING_EVALUATOR_H_
#define LOOPTOOL_BACKEND_COSTMODEL_LEARNING_EVALUATOR_H_

#include <cstdint>
#include <memory>

#include "absl/strings/string_view.h"

#include "backend/codegen/isa.h"
#include "backend/costmodel/cost_model.h"
#include "backend/env/evaluator.h"

namespace looptool {

class LearningEvaluator : public KernelEvaluator {
 public:
  // `isa`: the one the wrapped evaluator's kernels are generated for.
  LearningEvaluator(std::shared_ptr<KernelEvaluator> inner, Isa isa,
                    CostModel::Options options = {});
  // The same with the ISA by name ("auto", "avx2", ...: ParseIsa's errors).
  static absl::StatusOr<std::shared_ptr<LearningEvaluator>> Wrap(
      std::shared_ptr<KernelEvaluator> inner, absl::string_view isa);

  absl::StatusOr<Measurement> Measure(const LoopTree& tree) override;
  absl::StatusOr<Measurement> MeasureFor(const LoopTree& tree, uint64_t tenant) override;
  absl::StatusOr<Measurement> RemeasureFor(const LoopTree& tree, uint64_t tenant) override;
  double PeakGflops() override { return inner_->PeakGflops(); }
  absl::StatusOr<double> PredictGflops(const LoopTree& tree) override;
  VectorUnit Vector() override {
    const IsaTraits t = Traits(isa_);
    return {t.vector_width, t.vector_registers};
  }

  const CostModel& model() const { return model_; }

 private:
  // Adds a successful measurement to the model; returns `m` unchanged.
  absl::StatusOr<Measurement> Learn(const LoopTree& tree, absl::StatusOr<Measurement> m);

  const std::shared_ptr<KernelEvaluator> inner_;
  const Isa isa_;
  CostModel model_;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_COSTMODEL_LEARNING_EVALUATOR_H_
