// PlanCost: a loop_set policy's cost model (the file's optional "cost" entry, written by
// client/python/looptool/rl/plan_cost.py): the `plan_features` of a state, by name, through an
// MLP to one score whose order among one program's states predicts the order of their kernels'
// GFLOPS (log2 GFLOPS up to a constant per program). Searches rank the states a policy's
// episodes end in by it less loss_weight() times how much less likely than the policy's greedy
// episode each is (nats), untimed. The same numbers as the numpy forward pass within 1e-9.
#ifndef LOOPTOOL_CLIENT_CPP_PLAN_COST_H_
#define LOOPTOOL_CLIENT_CPP_PLAN_COST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace looptool::client {

// y = W x + b; W is out x in, row major.
struct DenseLayer {
  int in = 0, out = 0;
  std::vector<float> weight;
  std::vector<float> bias;
};

class PlanCost {
 public:
  // INVALID_ARGUMENT, saying what is wrong, unless:
  //   1) `names` is not empty and `mean` and `scale` have one number per name, every scale > 0;
  //   2) the layers chain from names.size() inputs to one output, weights and biases sized so;
  //   3) loss_weight is finite and >= 0.
  static absl::StatusOr<PlanCost> Create(std::vector<std::string> names, std::vector<double> mean,
                                         std::vector<double> scale,
                                         std::vector<DenseLayer> layers,
                                         double loss_weight = 0);

  // The score of features given in names() order: x = (f - mean) / scale, ReLU between layers.
  // REQUIRES: features.size() == names().size().
  double Score(const std::vector<double>& features) const;
  // The score of a `plan_features` observation (a JSON object of numbers by name; a name it lacks
  // counts 0). INVALID_ARGUMENT when the text is not such an object.
  absl::StatusOr<double> ScoreJson(absl::string_view plan_features_json) const;

  const std::vector<std::string>& names() const { return names_; }
  double loss_weight() const { return loss_weight_; }

 private:
  PlanCost() = default;
  std::vector<std::string> names_;
  std::vector<double> mean_, scale_;
  std::vector<DenseLayer> layers_;
  double loss_weight_ = 0;
};

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_PLAN_COST_H_
