// LearnedCostModel: the server's CostPredictor. A CostModel over the PlanFeatures of kernels
// planned for one target (the first 33, up to `stride_two_loads`), taught by LearningTimer
// (every kernel the server measures, in any session) and asked by the `predicted_gflops`
// observation. Thread-safe.
#ifndef LOOPTOOL_BACKEND_COSTMODEL_LEARNED_COST_MODEL_H_
#define LOOPTOOL_BACKEND_COSTMODEL_LEARNED_COST_MODEL_H_

#include "backend/codegen/isa.h"
#include "backend/costmodel/cost_model.h"
#include "backend/env/cost_predictor.h"
#include "backend/schedule/loop_tree.h"

namespace looptool {

class LearnedCostModel final : public CostPredictor {
 public:
  // `target`: the instruction set the measured kernels were generated for.
  explicit LearnedCostModel(Isa target, CostModel::Options options = {});

  // `tree`'s kernel ran at `gflops` (ignored when not positive, or seen before).
  void Learn(const LoopTree& tree, double gflops);
  // 0 while fewer than the model's min_samples kernels were learned.
  double PredictGflops(const LoopTree& tree) const override;
  int64_t samples() const { return model_.samples(); }

 private:
  const Isa target_;
  CostModel model_;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_COSTMODEL_LEARNED_COST_MODEL_H_
