// Any action sequence on any benchmark keeps the Environment within limits: steps succeed, every
// untimed observation is OK and fits its space, and the `ir` text round-trips.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/actions/action_space.h"
#include "backend/env/environment.h"
#include "backend/env/observation_registry.h"
#include "backend/ir/parser.h"
#include "backend/schedule/ir_text.h"
#include "backend/schedule/loop_tree.h"
#include "backend/ir/limits.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using looptool::LoopTree;
using looptool::Observation;
using looptool::ObservationSpace;

// Small, odd-sized instances of every kind of statement (datasets/catalog.cc, README).
constexpr const char* kPrograms[] = {
    "C[m, n] += A[m, k] * B[k, n]\nm=7 n=13 k=5\n",
    "C[m, n] += A[m, k] * B[k, n]\nm=64 n=48 k=32\n",
    "C[m, n] += A[m, k] * B[k, n]\nm=1 n=31 k=129\n",
    "C[m, n] += A[m, k] * B[k, n] -> relu\nm=17 n=24 k=9\n",
    "y[m] += A[m, k] * x[k]\nm=64 k=80\n",
    "O[r, c] += I[r + kr, c + kc] * W[kr, kc]\nr=30 c=28 kr=3 kc=5\n",
    "O[k, h, w] += I[c, h + r, w + s] * W[k, c, r, s]\nk=8 h=7 w=9 c=3 r=3 s=3\n",
    "O[c, h, w] max= I[c, 2*h + r, 2*w + s]\nc=4 h=5 w=6 r=3 s=3\n",
    "s[m] += A[m, n]\nm=32 n=100\n",
    "t[] += A[m, n]\nm=8 n=9\n",
    "B[n, m] = A[m, n]\nn=24 m=40\n",
    "B[m, n] = a[n]\nm=16 n=33\n",
    "C[m, a] = A[m, a]\nC[m, b + 64] = B[m, b]\nm=8 a=64 b=32\n",
    "C[m, n] = A[m, n] + B[m, n] -> relu\nm=5 n=1024\n",
    "C[m, n] += A[m, k] * B[k, n]\nD[m] += E[m, n]\nm=12 n=10 k=6\n",
};
constexpr int kNumPrograms = sizeof(kPrograms) / sizeof(kPrograms[0]);
constexpr size_t kMaxSteps = 1024;

const std::vector<std::shared_ptr<const looptool::Program>>& Programs() {
  static const auto* programs = [] {
    auto* out = new std::vector<std::shared_ptr<const looptool::Program>>;
    for (const char* text : kPrograms) {
      auto p = looptool::ParseProgram(text, looptool::Limits{});
      FUZZ_CHECK(p.ok(), absl::StrCat("benchmark does not parse: ", text, p.status().ToString()));
      out->push_back(std::make_shared<const looptool::Program>(*std::move(p)));
    }
    return out;
  }();
  return *programs;
}

// flops, runtime, peak_gflops: they time a kernel, and the environment has no evaluator.
bool Timed(const std::string& name) {
  static const looptool::ObservationRegistry registry =
      looptool::LoopToolObservations(looptool::Limits{});
  const auto* entry = registry.Find(name);
  FUZZ_CHECK(entry != nullptr, absl::StrCat("space ", name, " is not in the registry"));
  return entry->timed;
}

void CheckIrRoundTrip(const LoopTree& tree, const looptool::Limits& limits, const std::string& at) {
  const std::string ir = looptool::PrintIr(tree);
  auto back = looptool::ParseIr(ir, limits);
  FUZZ_CHECK(back.ok(), absl::StrCat(at, ": ir does not parse: ", back.status().ToString(),
                                     "\n--- ir:\n", ir));
  FUZZ_CHECK(*back == tree, absl::StrCat(at, ": ParseIr(PrintIr(tree)) != tree\n--- ir:\n", ir));
}

void CheckObservation(const looptool::Environment& env, const ObservationSpace& space,
                      const std::string& at) {
  auto obs = env.Observe(space.name);
  FUZZ_CHECK(obs.ok(), absl::StrCat(at, ": observation ", space.name, ": ",
                                    obs.status().ToString()));
  FUZZ_CHECK(obs->kind == space.kind, absl::StrCat(at, ": observation ", space.name, " kind"));
  if (obs->kind == Observation::Kind::kFloatTensor) {
    FUZZ_CHECK(obs->shape == space.shape, absl::StrCat(at, ": ", space.name, " shape"));
    int64_t n = 1;
    for (int64_t d : space.shape) n *= d;
    FUZZ_CHECK(static_cast<int64_t>(obs->floats.size()) == n,
               absl::StrCat(at, ": ", space.name, " has ", obs->floats.size(), " values"));
    for (size_t i = 0; i < obs->floats.size(); ++i) {
      const float v = obs->floats[i];
      FUZZ_CHECK(v >= space.low && v <= space.high,
                 absl::StrCat(at, ": ", space.name, "[", i, "] = ", v, " outside [", space.low,
                              ", ", space.high, "]"));
    }
  } else if (obs->kind == Observation::Kind::kBoolTensor) {
    const int64_t n = static_cast<int64_t>(obs->bools.size());
    FUZZ_CHECK(n >= space.min_length && n <= space.max_length,
               absl::StrCat(at, ": ", space.name, " has length ", n));
  } else if (obs->kind == Observation::Kind::kInt64) {
    FUZZ_CHECK(obs->integer >= space.low && obs->integer <= space.high,
               absl::StrCat(at, ": ", space.name, " = ", obs->integer));
  }
}

}  // namespace

// Input: byte 0 picks a program, byte 1 an action space, each further byte one action index, at
// most kMaxSteps of them (a step and its observations take about 3 ms under ASan; -timeout=10).
// The loop limit is checked after every step, the ir round trip every 16 steps and at the end.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const looptool::Limits limits;
  static const std::vector<ObservationSpace> spaces = looptool::ObservationSpaces(limits);
  const auto& all_spaces = looptool::AllActionSpaces();
  const int program = data[0] % kNumPrograms;
  const looptool::ActionSpace& space = all_spaces[data[1] % all_spaces.size()];
  looptool::Environment env(LoopTree::Initial(Programs()[program]), space, limits, nullptr);
  FUZZ_CHECK(env.tree().num_loops() <= limits.max_loops, "initial tree over the loop limit");
  CheckIrRoundTrip(env.tree(), limits, "initial state");
  const size_t end = std::min(size, 2 + kMaxSteps);
  for (size_t i = 2; i < end; ++i) {
    const int64_t index = data[i] % space.size();
    const std::string at = absl::StrCat("program ", program, ", space ", space.name, ", step ",
                                        i - 1, " (", index, ")");
    auto step = env.Step(index);
    FUZZ_CHECK(step.ok(), absl::StrCat(at, ": ", step.status().ToString()));
    FUZZ_CHECK(env.tree().num_loops() <= limits.max_loops,
               absl::StrCat(at, ": tree has ", env.tree().num_loops(), " loops"));
    for (const ObservationSpace& s : spaces) {
      if (!Timed(s.name)) CheckObservation(env, s, at);
    }
    if ((i - 1) % 16 == 0) CheckIrRoundTrip(env.tree(), limits, at);
  }
  CheckIrRoundTrip(env.tree(), limits, "final state");
  return 0;
}
