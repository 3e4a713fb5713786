// CostPredictor: a guess at a schedule's speed without compiling or running its kernel (the
// `predicted_gflops` observation). backend/costmodel/learned_cost_model.h has one, taught by the
// kernels a server measures. Implementations must be thread-safe.
#ifndef LOOPTOOL_BACKEND_ENV_COST_PREDICTOR_H_
#define LOOPTOOL_BACKEND_ENV_COST_PREDICTOR_H_

#include "backend/schedule/loop_tree.h"

namespace looptool {

class CostPredictor {
 public:
  virtual ~CostPredictor() = default;
  // The predicted GFLOPS of `tree`'s kernel; 0 while the predictor knows too little to guess.
  virtual double PredictGflops(const LoopTree& tree) const = 0;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ENV_COST_PREDICTOR_H_
