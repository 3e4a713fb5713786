// PlanCost: a loop_set policy's cost model (the file's optional "cost" entry, written by
// client/python/looptool/rl/plan_cost.py): the `plan_features` of a state, by name, through an
// MLP to one score whose order among one program's states predicts the order of their kernels'
// GFLOPS (log2 GFLOPS up to a constant per program), optionally blended with regression trees
// (XGBoost's, over the raw features: mlp_weight times the MLP's score plus the trees' leaves).
// Searches rank the states a policy's episodes end in by it less loss_weight() times how much
// less likely than the policy's greedy episode each is (nats), untimed. The same numbers as the
// numpy forward pass within 1e-9.
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

// Regression trees, all nodes in one set of arrays: at inner node i (feature[i] >= 0) a state
// goes to left[i] when float(its feature) < threshold[i], else to right[i]; a leaf (feature -1)
// adds value[i]. The score adds one leaf per root.
struct PlanTrees {
  static constexpr int kMaxNodes = 1 << 22;
  std::vector<int> roots;
  std::vector<int> feature, left, right;
  std::vector<float> threshold, value;
};

class PlanCost {
 public:
  // INVALID_ARGUMENT, saying what is wrong, unless:
  //   1) `names` is not empty and `mean` and `scale` have one number per name, every scale > 0;
  //   2) the layers chain from names.size() inputs to one output, weights and biases sized so;
  //   3) loss_weight and mlp_weight are finite and >= 0;
  //   4) `trees`, when it has nodes: 1..kMaxNodes nodes, each field one entry per node, 1..nodes
  //      roots within them; an inner node's feature indexes names, its children come after it
  //      (so every walk ends) and within the nodes; a leaf's children are -1; numbers finite.
  static absl::StatusOr<PlanCost> Create(std::vector<std::string> names, std::vector<double> mean,
                                         std::vector<double> scale,
                                         std::vector<DenseLayer> layers,
                                         double loss_weight = 0, PlanTrees trees = {},
                                         double mlp_weight = 1);

  // The score of features given in names() order: mlp_weight times the MLP's output (x = (f -
  // mean) / scale, ReLU between layers) plus the leaves the trees reach.
  // REQUIRES: features.size() == names().size().
  double Score(const std::vector<double>& features) const;
  // The score of a `plan_features` observation (a JSON object of numbers by name; a name it lacks
  // counts 0). INVALID_ARGUMENT when the text is not such an object.
  absl::StatusOr<double> ScoreJson(absl::string_view plan_features_json) const;

  const std::vector<std::string>& names() const { return names_; }
  double loss_weight() const { return loss_weight_; }

 private:
  PlanCost() = default;
  // A layer as Score reads it: each output's weights from its first nonzero column to its last
  // (a block-diagonal layer of n members, plan_cost.ensemble's, is (n - 1) / n zeros in its
  // dense form), in double, one output's after another. The zero terms left out change no
  // finite sum; where an input is infinite, the dense pass's 0 x inf would be NaN.
  struct Span {
    int begin = 0, end = 0;  // the columns [begin, end)
    size_t offset = 0;       // where their weights start in `weight`
  };
  struct PackedLayer {
    std::vector<Span> spans;  // one per output
    std::vector<double> weight, bias;
  };
  static PackedLayer Pack(const DenseLayer& l);

  std::vector<std::string> names_;
  std::vector<double> mean_, scale_;
  std::vector<PackedLayer> layers_;
  double loss_weight_ = 0;
  PlanTrees trees_;
  double mlp_weight_ = 1;
};

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_PLAN_COST_H_
