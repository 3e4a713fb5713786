#include "backend/costmodel/cost_model.h"

#include <cmath>
#include <utility>

#include "absl/hash/hash.h"
#include "util/check.h"

namespace looptool {
namespace {

constexpr size_t kMaxSeen = 1 << 20;  // distinct measurements remembered for deduplication

}  // namespace

CostModel::CostModel(int num_features, Options options)
    : n_(num_features),
      options_(options),
      xtx_(Eigen::MatrixXd::Zero(num_features, num_features)),
      xty_(Eigen::VectorXd::Zero(num_features)),
      weights_(Eigen::VectorXd::Zero(num_features)) {}

void CostModel::Add(const std::vector<double>& features, double gflops) {
  LT_CHECK(static_cast<int>(features.size()) == n_);
  if (!(gflops > 0)) return;
  const size_t key = absl::Hash<std::pair<std::vector<double>, double>>()({features, gflops});
  const Eigen::Map<const Eigen::VectorXd> x(features.data(), n_);
  absl::MutexLock lock(&mu_);
  if (seen_.size() >= kMaxSeen) seen_.clear();
  if (!seen_.insert(key).second) return;
  xtx_.noalias() += x * x.transpose();
  xty_.noalias() += x * std::log(gflops);
  ++samples_;
}

double CostModel::Predict(const std::vector<double>& features) const {
  LT_CHECK(static_cast<int>(features.size()) == n_);
  absl::MutexLock lock(&mu_);
  if (samples_ < options_.min_samples) return 0;
  if (fitted_at_ == 0 || samples_ - fitted_at_ >= options_.refit_every) {
    Eigen::MatrixXd a = xtx_;
    for (int i = 1; i < n_; ++i) a(i, i) += options_.ridge * static_cast<double>(samples_);
    weights_ = a.ldlt().solve(xty_);
    fitted_at_ = samples_;
  }
  const Eigen::Map<const Eigen::VectorXd> x(features.data(), n_);
  return std::exp(x.dot(weights_));
}

int64_t CostModel::samples() const {
  absl::MutexLock lock(&mu_);
  return samples_;
}

}  // namespace looptool
