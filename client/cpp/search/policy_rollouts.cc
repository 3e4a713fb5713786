#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cpp/search/algorithms.h"
#include "client/cpp/search/policy_fit.h"
#include "client/cpp/search/searcher.h"
#include "util/status_macros.h"

namespace looptool::client::internal {
namespace {

// One episode's end: its source (in the final state), its actions from the start, and what
// the server's cost model predicts for its kernel (untimed).
struct Candidate {
  std::unique_ptr<StateSource> source;
  std::vector<int> path;
  double predicted = 0;
};

// Continues `path` greedily on `source` (in the state `path` reached, observed as `r`) until the
// policy stops, a state comes back, or the depth runs out. With `alternatives`, the second-best
// allowed action at each step is kept (-1 where there is none).
absl::Status Continue(StateSource& source, const Policy& policy, int depth, StepResult r,
                      std::vector<int>& path, std::vector<int>* alternatives) {
  const std::string& observation = policy.observation_space();
  const std::vector<std::string> observe = {observation, "action_mask"};
  std::set<std::vector<float>> visited;
  while (static_cast<int>(path.size()) < depth) {
    const Value* features = r.Find(observation);
    if (features == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("the server does not send ", observation, ", which the policy reads"));
    }
    RETURN_IF_ERROR(CheckFeatures(policy, features->floats));
    if (!visited.insert(features->floats).second) break;
    const std::vector<bool>& mask = r.Find("action_mask")->bools;
    const std::vector<int> ranked = RankActions(policy.Scores(features->floats), mask);
    const int action = path.empty() ? policy.BestAllowed(features->floats, mask)
                                    : policy.Act(features->floats, mask);
    if (action < 0) break;
    if (alternatives != nullptr) alternatives->push_back(ranked.size() > 1 ? ranked[1] : -1);
    ASSIGN_OR_RETURN(r, source.Step({action}, observe));
    path.push_back(action);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SearchResult> PolicyRollouts(const StateSource& start, const SearchOptions& options,
                                            const Policy& policy, const Clock& clock) {
  const absl::Time t0 = clock.Now();
  RETURN_IF_ERROR(CheckPolicyFits(policy, start));
  const absl::Time deadline = t0 + absl::Seconds(options.time_limit_seconds);
  const std::vector<std::string> observe = {policy.observation_space(), "action_mask"};
  // 1. The greedy episode, with the runner-up action of each of its steps.
  std::vector<Candidate> candidates;
  std::vector<int> alternatives;
  {
    Candidate greedy;
    ASSIGN_OR_RETURN(greedy.source, start.Fork());
    greedy.source->set_deadline(absl::InfiniteFuture());  // its result is always timed
    ASSIGN_OR_RETURN(StepResult r, greedy.source->Step({}, observe));
    RETURN_IF_ERROR(
        Continue(*greedy.source, policy, options.depth, std::move(r), greedy.path, &alternatives));
    candidates.push_back(std::move(greedy));
  }
  // 2. One episode per step of it that took the runner-up there and went on greedily (untimed).
  std::set<std::vector<int>> seen = {candidates.front().path};
  for (size_t d = 0; d < alternatives.size() && clock.Now() < deadline; ++d) {
    if (alternatives[d] < 0) continue;
    Candidate c;
    c.path.assign(candidates.front().path.begin(), candidates.front().path.begin() + d);
    c.path.push_back(alternatives[d]);
    absl::StatusOr<std::unique_ptr<StateSource>> fork = start.Fork();
    if (!fork.ok()) break;
    c.source = *std::move(fork);
    c.source->set_deadline(deadline);
    absl::StatusOr<StepResult> r = c.source->Step(c.path, observe);
    if (!r.ok() || !Continue(*c.source, policy, options.depth, *std::move(r), c.path, nullptr).ok()) {
      continue;  // out of time, or the server refused: the other episodes stand
    }
    if (!seen.insert(c.path).second) continue;
    absl::StatusOr<Value> predicted = c.source->Observe("predicted_gflops");
    c.predicted = predicted.ok() ? predicted->number : 0;
    candidates.push_back(std::move(c));
  }
  // 3. The greedy episode's state timed first, then the others by predicted GFLOPS while time
  //    is left; the fastest wins.
  std::stable_sort(candidates.begin() + 1, candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.predicted > b.predicted; });
  SearchResult best;
  int timed = 0;
  for (Candidate& c : candidates) {
    if (timed > 0 && clock.Now() >= deadline) break;
    SearchResult out;
    for (int a : c.path) out.actions.push_back(start.action_names()[a]);
    absl::StatusOr<SearchResult> r = TimeFinalState(*c.source, std::move(out), options, clock, t0);
    if (!r.ok()) {
      if (timed == 0) return r.status();
      break;
    }
    ++timed;
    if (r->gflops > best.gflops) best = *std::move(r);
  }
  best.states_evaluated = timed;
  best.search_gflops = best.gflops;
  best.seconds = absl::ToDoubleSeconds(clock.Now() - t0);
  return best;
}

}  // namespace looptool::client::internal
