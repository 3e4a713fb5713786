// CostModel: the regression recovers a log-linear law exactly, stays silent until it has learned
// enough, learns each distinct measurement once; LearningTimer feeds a LearnedCostModel from
// every kernel measured (but abandoned runs), which serves predicted_gflops through the
// environment.
#include "backend/costmodel/cost_model.h"

#include <cmath>
#include <memory>
#include <random>

#include "backend/actions/apply.h"
#include "backend/costmodel/learned_cost_model.h"
#include "backend/costmodel/learning_timer.h"
#include "backend/costmodel/plan_features.h"
#include "backend/env/environment.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/backend/codegen/jit_check.h"

namespace looptool {
namespace {

double Law(const std::vector<double>& x) { return std::exp(0.5 + 0.3 * x[1] - 0.2 * x[2]); }

TEST(CostModel, RecoversALogLinearLaw) {
  CostModel::Options o;
  o.ridge = 0;
  o.min_samples = 10;
  CostModel model(3, o);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-3, 3);
  std::vector<double> probe = {1, 2.5, -1};
  for (int i = 0; i < 9; ++i) {
    const std::vector<double> x = {1, u(rng), u(rng)};
    model.Add(x, Law(x));
  }
  EXPECT_EQ(model.Predict(probe), 0);  // 9 < min_samples
  for (int i = 0; i < 31; ++i) {
    const std::vector<double> x = {1, u(rng), u(rng)};
    model.Add(x, Law(x));
  }
  EXPECT_EQ(model.samples(), 40);
  EXPECT_NEAR(model.Predict(probe), Law(probe), 1e-9 * Law(probe));
}

TEST(CostModel, LearnsEachMeasurementOnceAndOnlyRealOnes) {
  CostModel model(2);
  model.Add({1, 2}, 10);
  model.Add({1, 2}, 10);  // the same cached measurement, observed again
  model.Add({1, 2}, 0);   // a kernel that could not be measured
  model.Add({1, 3}, -1);
  EXPECT_EQ(model.samples(), 1);
  model.Add({1, 2}, 11);  // timed again: a new measurement
  EXPECT_EQ(model.samples(), 2);
}

// A fake timer: GFLOPS that grow with the register block (accumulators), as real ones do.
class FakeTimer : public KernelTimer {
 public:
  absl::StatusOr<Measurement> MeasureFor(const LoopTree& tree, uint64_t) override {
    ++calls;
    const std::vector<double> f = PlanFeatures(tree, Isa::kAvx2);
    return Measurement{1e-3, 5 * std::exp(0.4 * f[6] + 0.8 * f[1])};
  }
  absl::StatusOr<Measurement> RemeasureFor(const LoopTree& tree, uint64_t tenant) override {
    return MeasureFor(tree, tenant);
  }
  absl::StatusOr<double> PeakGflops() override { return 100; }
  int calls = 0;
};

// Every measurement an abandoned verification run's (a bound, not the kernel's speed).
class AbandoningTimer : public FakeTimer {
 public:
  absl::StatusOr<Measurement> MeasureFor(const LoopTree& tree, uint64_t tenant) override {
    absl::StatusOr<Measurement> m = FakeTimer::MeasureFor(tree, tenant);
    m->timing = Measurement::Timing::kAbandoned;
    return m;
  }
};

TEST(LearningTimer, DoesNotLearnFromAbandonedRuns) {
  auto model = std::make_shared<LearnedCostModel>(Isa::kAvx2);
  LearningTimer timer(std::make_shared<AbandoningTimer>(), model);
  const LoopTree initial = testing::InitialTree("C[m,n] += A[m,k] * B[k,n]; m=64 n=48 k=32");
  const absl::StatusOr<Measurement> m = timer.MeasureFor(initial, 0);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->timing, Measurement::Timing::kAbandoned);  // passed on as it came
  EXPECT_EQ(model->samples(), 0);
  ASSERT_TRUE(LearningTimer(std::make_shared<FakeTimer>(), model).MeasureFor(initial, 0).ok());
  EXPECT_EQ(model->samples(), 1);  // a timed one is learned
}

TEST(LearningTimer, TeachesTheModelWhatItMeasuredAndItPredictsIt) {
  auto fake = std::make_shared<FakeTimer>();
  CostModel::Options o;
  o.min_samples = 16;
  auto model = std::make_shared<LearnedCostModel>(Isa::kAvx2, o);
  KernelBackend kernels{Isa::kAvx2, std::make_shared<LearningTimer>(fake, model), model};
  const LoopTree initial = testing::InitialTree("C[m,n] += A[m,k] * B[k,n]; m=64 n=48 k=32");
  Environment env(initial, LoopNestActionSpace(), Limits(), kernels);
  EXPECT_EQ(env.Observe("predicted_gflops")->number, 0);  // nothing learned yet
  std::mt19937 rng(3);
  int measured = 0;
  for (int walk = 0; walk < 12; ++walk) {
    Environment w(initial, LoopNestActionSpace(), Limits(), kernels);
    for (int step = 0; step < 4; ++step) {
      const std::vector<bool> mask = ActionMask(w.tree(), LoopNestActionSpace(), Limits());
      std::vector<int> legal;
      for (int a = 0; a < static_cast<int>(mask.size()); ++a) {
        if (mask[a]) legal.push_back(a);
      }
      ASSERT_TRUE(w.Step(legal[rng() % legal.size()]).ok());
      ASSERT_TRUE(w.Observe("flops").ok());
      ++measured;
    }
  }
  EXPECT_EQ(fake->calls, measured);
  EXPECT_GE(model->samples(), 16);
  // The fake's law is log-linear in two of the features: the model has it (up to its ridge).
  const double predicted = env.Observe("predicted_gflops")->number;
  const double actual = env.Observe("flops")->number;
  EXPECT_NEAR(predicted, actual, 0.05 * actual);
  EXPECT_EQ(*kernels.timer->PeakGflops(), 100);
  // Without a cost model the observation says so.
  Environment unmodelled(initial, LoopNestActionSpace(), Limits(), {Isa::kAvx2, fake, nullptr});
  EXPECT_EQ(unmodelled.Observe("predicted_gflops").status().code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace looptool
