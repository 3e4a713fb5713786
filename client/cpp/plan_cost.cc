#include "client/cpp/plan_cost.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "eigen3/Eigen/Core"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace looptool::client {

absl::StatusOr<PlanCost> PlanCost::Create(std::vector<std::string> names,
                                          std::vector<double> mean, std::vector<double> scale,
                                          std::vector<DenseLayer> layers,
                                          double loss_weight, PlanTrees trees,
                                          double mlp_weight) {
  const auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("cost model: ", what));
  };
  if (names.empty() || mean.size() != names.size() || scale.size() != names.size()) {
    return bad("names, mean and scale must be non-empty and of one length");
  }
  if (std::any_of(scale.begin(), scale.end(), [](double s) { return !(s > 0); })) {
    return bad("every scale must be positive");
  }
  int width = static_cast<int>(names.size());
  for (const DenseLayer& l : layers) {
    if (l.in != width || l.out < 1 || l.weight.size() != size_t(l.in) * l.out ||
        l.bias.size() != size_t(l.out)) {
      return bad("layer sizes do not chain");
    }
    width = l.out;
  }
  if (layers.empty() || width != 1) return bad("the last layer must give one number");
  if (!(loss_weight >= 0) || !std::isfinite(loss_weight)) {
    return bad("loss_weight must be a number >= 0");
  }
  if (!(mlp_weight >= 0) || !std::isfinite(mlp_weight)) {
    return bad("mlp_weight must be a number >= 0");
  }
  const size_t n = trees.feature.size();
  if (n > 0 || !trees.roots.empty()) {
    if (n > size_t{PlanTrees::kMaxNodes} || trees.roots.empty() || trees.roots.size() > n ||
        trees.left.size() != n || trees.right.size() != n || trees.threshold.size() != n ||
        trees.value.size() != n) {
      return bad(absl::StrCat("trees: 1..", PlanTrees::kMaxNodes,
                              " nodes, one entry of each field per node, 1..nodes roots"));
    }
    for (int r : trees.roots) {
      if (r < 0 || size_t(r) >= n) return bad("trees: a root is not a node");
    }
    const int features = static_cast<int>(names.size());
    for (size_t i = 0; i < n; ++i) {
      const int f = trees.feature[i], l = trees.left[i], r = trees.right[i];
      const bool inner_ok = f >= 0 && f < features && l > int(i) && size_t(l) < n &&
                            r > int(i) && size_t(r) < n;
      const bool leaf_ok = f == -1 && l == -1 && r == -1;
      if (!(inner_ok || leaf_ok) || !std::isfinite(trees.threshold[i]) ||
          !std::isfinite(trees.value[i])) {
        return bad(absl::StrCat("trees: node ", i, "'s feature, children or numbers are out of "
                                "range (children come after their parent)"));
      }
    }
  }
  PlanCost c;
  c.names_ = std::move(names);
  c.mean_ = std::move(mean);
  c.scale_ = std::move(scale);
  for (const DenseLayer& l : layers) c.layers_.push_back(Pack(l));
  c.loss_weight_ = loss_weight;
  c.trees_ = std::move(trees);
  c.mlp_weight_ = mlp_weight;
  return c;
}

PlanCost::PackedLayer PlanCost::Pack(const DenseLayer& l) {
  PackedLayer p;
  p.bias.assign(l.bias.begin(), l.bias.end());
  for (int o = 0; o < l.out; ++o) {
    const float* w = &l.weight[size_t(o) * l.in];
    int begin = 0, end = l.in;
    while (begin < end && w[begin] == 0) ++begin;
    while (end > begin && w[end - 1] == 0) --end;
    p.spans.push_back({begin, end, p.weight.size()});
    p.weight.insert(p.weight.end(), w + begin, w + end);
  }
  return p;
}

double PlanCost::Score(const std::vector<double>& features) const {
  Eigen::VectorXd h(features.size());
  for (size_t i = 0; i < features.size(); ++i) h[i] = (features[i] - mean_[i]) / scale_[i];
  for (size_t k = 0; k < layers_.size(); ++k) {
    const PackedLayer& l = layers_[k];
    Eigen::VectorXd y(l.spans.size());
    for (size_t o = 0; o < l.spans.size(); ++o) {
      const Span& s = l.spans[o];
      const Eigen::Map<const Eigen::VectorXd> w(l.weight.data() + s.offset, s.end - s.begin);
      const double sum = l.bias[o] + w.dot(h.segment(s.begin, s.end - s.begin));
      y[o] = k + 1 < layers_.size() ? std::max(sum, 0.0) : sum;
    }
    h.swap(y);
  }
  double score = mlp_weight_ * h[0];
  const PlanTrees& t = trees_;
  for (int node : t.roots) {
    while (t.feature[node] >= 0) {
      node = static_cast<float>(features[t.feature[node]]) < t.threshold[node] ? t.left[node]
                                                                               : t.right[node];
    }
    score += t.value[node];
  }
  return score;
}

absl::StatusOr<double> PlanCost::ScoreJson(absl::string_view plan_features_json) const {
  const nlohmann::json j = nlohmann::json::parse(plan_features_json.begin(),
                                                 plan_features_json.end(), nullptr,
                                                 /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("plan_features is not a JSON object");
  }
  std::vector<double> features(names_.size(), 0.0);
  for (size_t i = 0; i < names_.size(); ++i) {
    const auto it = j.find(names_[i]);
    if (it == j.end()) continue;
    if (!it->is_number()) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan_features: ", names_[i], " is not a number"));
    }
    features[i] = it->get<double>();
  }
  return Score(features);
}

}  // namespace looptool::client
