// policy_bench: the cost of the C++ forward pass of the built-in policies (client/cpp/policy.h)
// on a loops_tensor observation: per sketch scored by the default sketch_value policy, per step
// of the LoopTune DQN's episode.
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

}  // namespace

BENCHMARK_MAIN();
