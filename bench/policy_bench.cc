// policy_bench: the cost of the C++ forward pass of the built-in policies (client/cpp/policy.h)
// on a loops_tensor observation: per sketch scored by the default sketch_value policy, per step
// of the LoopTune DQN's episode; the loop_set policy's per step of its episodes (a loop_features
// observation of 10 loops), and its cost model's score per candidate (its plan_features).
//
//   bazel run -c opt //bench:policy_bench
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "client/cpp/policy.h"

namespace {

void PolicyScores(benchmark::State& state, const looptool::client::Policy& policy) {
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> size(0, 256);
  std::vector<float> obs(policy.input_size());
  for (float& v : obs) v = size(rng);
  std::vector<bool> mask(policy.num_actions(), true);
  for (auto _ : state) {
    benchmark::DoNotOptimize(policy.Act(obs, mask));
  }
}
void BM_DefaultPolicyScores(benchmark::State& state) {
  PolicyScores(state, looptool::client::Policy::Default());
}
BENCHMARK(BM_DefaultPolicyScores);

void BM_LoopTuneDqnScores(benchmark::State& state) {
  PolicyScores(state, looptool::client::Policy::LoopTuneDqn());
}
BENCHMARK(BM_LoopTuneDqnScores);

void BM_LoopSetStep(benchmark::State& state) {
  const looptool::client::Policy& policy = looptool::client::Policy::LoopSet();
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> value(0, 4);
  std::vector<float> obs(10 * policy.input_size());
  for (float& v : obs) v = value(rng);
  for (size_t r = 0; r < 10; ++r) obs[r * policy.input_size()] = 1;  // a real loop's row
  for (auto _ : state) {
    benchmark::DoNotOptimize(policy.Scores(obs));
  }
}
BENCHMARK(BM_LoopSetStep);

void BM_LoopSetCostScore(benchmark::State& state) {
  const looptool::client::PlanCost& cost = *looptool::client::Policy::LoopSet().cost_model();
  std::mt19937 rng(0);
  std::uniform_real_distribution<double> value(0, 4);
  std::vector<double> features(cost.names().size());
  for (double& v : features) v = value(rng);
  for (auto _ : state) {
    benchmark::DoNotOptimize(cost.Score(features));
  }
}
BENCHMARK(BM_LoopSetCostScore);

}  // namespace

BENCHMARK_MAIN();
