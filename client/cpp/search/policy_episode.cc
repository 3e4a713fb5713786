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
#include "client/cpp/search/sketch_ranking.h"
#include "nlohmann/json.hpp"
#include "util/status_macros.h"

namespace looptool::client::internal {

absl::StatusOr<SearchResult> TimeFinalState(StateSource& source, SearchResult out,
                                           const SearchOptions& options, const Clock& clock,
                                           absl::Time t0, double* work_seconds) {
  std::vector<std::string> observe = {"ir", "loop_tree", "flops", "peak_gflops"};
  const bool timing =
      (options.on_measured || work_seconds != nullptr) && source.HasObservation("timing");
  if (options.on_measured) observe.push_back("plan_features");
  if (timing) observe.push_back("timing");
  ASSIGN_OR_RETURN(const StepResult last, source.Step({}, observe));
  out.ir = last.Find("ir")->text;
  out.loop_tree = last.Find("loop_tree")->text;
  out.gflops = last.Find("flops")->number;
  out.search_gflops = out.gflops;
  out.peak_gflops = last.Find("peak_gflops")->number;
  out.server_peak_gflops = out.peak_gflops;
  out.states_evaluated = 1;
  out.seconds = absl::ToDoubleSeconds(clock.Now() - t0);
  if (work_seconds != nullptr) {
    *work_seconds = 0;
    const nlohmann::json j =
        nlohmann::json::parse(timing ? last.Find("timing")->text : "", nullptr, false);
    if (j.is_object() && j.value("work_seconds", nlohmann::json()).is_number()) {
      *work_seconds = std::max(0.0, j["work_seconds"].get<double>());
    }
  }
  if (options.on_measured && out.gflops > 0) {
    options.on_measured(MeasuredKernel{out.actions, KernelKey(out.ir), out.loop_tree,
                                       last.Find("plan_features")->text, out.gflops,
                                       out.seconds, timing ? last.Find("timing")->text : ""});
  }
  return out;
}

absl::StatusOr<SearchResult> PolicyEpisode(const StateSource& start, const SearchOptions& options,
                                           const Policy& policy, const Clock& clock) {
  const absl::Time t0 = clock.Now();
  RETURN_IF_ERROR(CheckPolicyFits(policy, start));
  ASSIGN_OR_RETURN(std::unique_ptr<StateSource> source, start.Fork());
  const absl::Time deadline = t0 + absl::Seconds(options.time_limit_seconds);
  source->set_deadline(deadline);
  SearchResult out;
  if (policy.kind() == Policy::Kind::kSketchValue) {
    ASSIGN_OR_RETURN(const std::vector<ValuedSketch> ranked,
                     RankSketches(start, policy, deadline));
    if (!ranked.empty()) {
      RETURN_IF_ERROR(source->Step(ranked.front().path, {}).status());
      for (int a : ranked.front().path) out.actions.push_back(start.action_names()[a]);
    }
    return TimeFinalState(*source, std::move(out), options, clock, t0);
  }
  if (policy.kind() == Policy::Kind::kLoopSet && policy.cost_model() != nullptr &&
      options.policy_candidates > 1) {
    // The budget: policy_seconds, or the time limit where that is shorter. Waves of the
    // likeliest episodes, policy_candidates each, untimed (the first wave in half of the budget,
    // the greedy one whatever the time); each wave's episodes timed in the order its cost model
    // ranks them, policy_timed at most in all, while the budget lasts (the first whatever the
    // time), and another wave while time is left; the fastest kept.
    if (options.policy_timed < 1 || !(options.policy_seconds > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("a policy search times 1 candidate or more within more than 0 s, not ",
                       options.policy_timed, " within ", options.policy_seconds, " s"));
    }
    const double budget = std::min(options.time_limit_seconds, options.policy_seconds);
    return TimeEpisodeWaves(start, policy, options.policy_depth, options.policy_candidates,
                            options.policy_timed, t0 + absl::Seconds(0.5 * budget),
                            /*keep_retimings=*/false, /*neighbor_share=*/0,
                            t0 + absl::Seconds(budget), options, clock, t0);
  }
  const std::string& observation = policy.observation_space();
  const std::vector<std::string> observe = {observation, "action_mask"};
  ASSIGN_OR_RETURN(StepResult r, source->Step({}, observe));
  // A loop_set policy stops, as if it had chosen to, when it comes back to a state it has been
  // in (a greedy policy would go round the cycle until the depth runs out), and does not stop
  // before its first action.
  std::set<std::vector<float>> visited;
  const bool stop_on_cycle = policy.kind() == Policy::Kind::kLoopSet;
  const int depth = stop_on_cycle ? options.policy_depth : options.depth;
  for (int d = 0; d < depth; ++d) {
    const Value* features = r.Find(observation);
    if (features == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("the server does not send ", observation, ", which the policy reads"));
    }
    RETURN_IF_ERROR(CheckFeatures(policy, features->floats));
    if (stop_on_cycle && !visited.insert(features->floats).second) break;
    const std::vector<bool>& mask = r.Find("action_mask")->bools;
    // A loop_set policy takes one action at least: the untiled nest is never the schedule to
    // keep, and an unseen program must not end the episode before it starts.
    const int action = stop_on_cycle && d == 0 ? policy.BestAllowed(features->floats, mask)
                                               : policy.Act(features->floats, mask);
    if (action < 0) break;
    ASSIGN_OR_RETURN(r, source->Step({action}, observe));
    out.actions.push_back(start.action_names()[action]);
  }
  return TimeFinalState(*source, std::move(out), options, clock, t0);
}

}  // namespace looptool::client::internal
