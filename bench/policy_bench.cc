// policy_bench: the cost of the C++ forward pass of the built-in policy (client/cpp/policy.h)
// on a loops_tensor observation, the per-step inference cost of `looptool tune --search=policy`.
//
//   bazel run -c opt //bench:policy_bench
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "client/cpp/policy.h"

namespace {

void BM_DefaultPolicyScores(benchmark::State& state) {
  const looptool::client::Policy& policy = looptool::client::Policy::Default();
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> size(0, 256);
  std::vector<float> obs(policy.input_size());
  for (float& v : obs) v = size(rng);
  std::vector<bool> mask(policy.num_actions(), true);
  for (auto _ : state) {
    benchmark::DoNotOptimize(policy.Act(obs, mask));
  }
}
BENCHMARK(BM_DefaultPolicyScores);

}  // namespace

BENCHMARK_MAIN();
