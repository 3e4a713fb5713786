// CostModel: a learned cost model that ranks schedules before any is timed. An online ridge
// regression of log GFLOPS on PlanFeatures, fitted (Eigen's LDLT) to every distinct kernel the
// server has measured, in any session; searches time only the candidates it ranks best.
// Thread-safe.
#ifndef LOOPTOOL_BACKEND_COSTMODEL_COST_MODEL_H_
#define LOOPTOOL_BACKEND_COSTMODEL_COST_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "eigen3/Eigen/Dense"

namespace looptool {

class CostModel {
 public:
  struct Options {
    int64_t min_samples = 24;  // Predict returns 0 until this many distinct measurements
    int64_t refit_every = 8;   // new samples between two fits
    double ridge = 1e-2;       // L2 penalty on the weights (not the bias)
  };

  // `num_features` includes the bias (PlanFeatures' first entry).
  CostModel(int num_features, Options options);
  explicit CostModel(int num_features) : CostModel(num_features, Options{}) {}

  // One measurement: `features` (num_features numbers) ran at `gflops`. Ignored when gflops <= 0
  // or when the same (features, gflops) was added before (a cached measurement observed again).
  void Add(const std::vector<double>& features, double gflops);
  // The predicted GFLOPS of a kernel with `features`; 0 while the model has fewer than
  // min_samples measurements.
  double Predict(const std::vector<double>& features) const;
  int64_t samples() const;

 private:
  const int n_;
  const Options options_;
  mutable absl::Mutex mu_;
  Eigen::MatrixXd xtx_ ABSL_GUARDED_BY(mu_);
  Eigen::VectorXd xty_ ABSL_GUARDED_BY(mu_);
  mutable Eigen::VectorXd weights_ ABSL_GUARDED_BY(mu_);
  int64_t samples_ ABSL_GUARDED_BY(mu_) = 0;
  mutable int64_t fitted_at_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<size_t> seen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_COSTMODEL_COST_MODEL_H_
