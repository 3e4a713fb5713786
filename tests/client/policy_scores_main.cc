// policy_scores: prints a policy's scores for observations, for tests/python/rl_test.py to
// compare with PyTorch's. Usage: policy_scores POLICY_FILE|NAME|default OBSERVATIONS_FILE (NAME: a
// built-in policy), where each line of OBSERVATIONS_FILE is one observation (whitespace-separated
// floats); prints one line of scores (%.9g) per observation (a loop_set policy: loop_nest's 560
// actions, then stop). A line that starts with '{' is a plan_features observation: the line
// printed is the policy's cost model's score of it (%.17g).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "client/cpp/policy.h"

int main(int argc, char** argv) {
  using looptool::client::Policy;
  if (argc != 3) {
    std::fprintf(stderr, "usage: policy_scores POLICY_FILE|NAME|default OBSERVATIONS_FILE\n");
    return 2;
  }
  absl::StatusOr<Policy> loaded =
      std::string(argv[1]) == "default" ? Policy::Default() : Policy::Find(argv[1]);
  if (!loaded.ok()) {
    std::fprintf(stderr, "policy_scores: %s\n", loaded.status().ToString().c_str());
    return 1;
  }
  std::ifstream in(argv[2]);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '{') {
      if (loaded->cost_model() == nullptr) {
        std::fprintf(stderr, "policy_scores: the policy has no cost model\n");
        return 1;
      }
      absl::StatusOr<double> score = loaded->cost_model()->ScoreJson(line);
      if (!score.ok()) {
        std::fprintf(stderr, "policy_scores: %s\n", score.status().ToString().c_str());
        return 1;
      }
      std::printf("%.17g\n", *score);
      continue;
    }
    std::istringstream numbers(line);
    std::vector<float> x;
    for (float v; numbers >> v;) x.push_back(v);
    if (!loaded->ObservationFits(x.size())) {
      std::fprintf(stderr, "policy_scores: an observation of %zu numbers, the policy reads %d%s\n",
                   x.size(), loaded->input_size(),
                   loaded->kind() == Policy::Kind::kLoopSet ? " per row" : "");
      return 1;
    }
    const std::vector<float> scores = loaded->Scores(x);
    for (size_t i = 0; i < scores.size(); ++i) {
      std::printf("%s%.9g", i ? " " : "", scores[i]);
    }
    std::printf("\n");
  }
  return 0;
}
