#include "client/cpp/search/sketch_ranking.h"

#include <algorithm>
#include <memory>

#include "client/cpp/search/policy_fit.h"
#include "client/cpp/search/sketch_paths.h"
#include "util/status_macros.h"

namespace looptool::client::internal {

absl::StatusOr<std::vector<ValuedSketch>> RankSketches(const StateSource& start,
                                                       const Policy& policy,
                                                       absl::Time deadline) {
  ASSIGN_OR_RETURN(std::unique_ptr<StateSource> probe, start.Fork());
  probe->set_deadline(deadline);
  ASSIGN_OR_RETURN(const Value text, probe->Observe("sketches"));
  ASSIGN_OR_RETURN(const std::vector<std::vector<int>> paths, ParseSketches(text.text, start));
  std::vector<ValuedSketch> ranked;
  for (const std::vector<int>& path : paths) {
    ASSIGN_OR_RETURN(std::unique_ptr<StateSource> after, probe->Fork());
    ASSIGN_OR_RETURN(const StepResult r, after->Step(path, {"loops_tensor"}));
    const std::vector<float>& features = r.Find("loops_tensor")->floats;
    RETURN_IF_ERROR(CheckFeatures(policy, features));
    ranked.push_back({path, policy.Scores(features).front()});
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const ValuedSketch& a, const ValuedSketch& b) {
    return a.value > b.value;
  });
  return ranked;
}

}  // namespace looptool::client::internal
