#include "client/cpp/search/policy_fit.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace looptool::client::internal {

absl::Status CheckPolicyFits(const Policy& policy, const StateSource& session) {
  if (policy.kind() == Policy::Kind::kSketchValue) {
    if (session.action_space() == policy.action_space()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "a sketch_value policy chooses among the server's sketches, in ", policy.action_space(),
        "; the session's action space is ", session.action_space()));
  }
  if (policy.num_actions() != static_cast<int>(session.action_names().size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the policy acts in a space of ", policy.num_actions(), " actions (",
        policy.action_space(), "); the session's has ", session.action_names().size()));
  }
  return absl::OkStatus();
}

absl::Status CheckFeatures(const Policy& policy, const std::vector<float>& features) {
  if (!policy.ObservationFits(features.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the policy reads ", policy.input_size(), " numbers of ", policy.observation_space(),
        policy.kind() == Policy::Kind::kLoopSet ? " per row" : "", "; the server sends ",
        features.size(), " (another --max_loops, or an older server?)"));
  }
  return absl::OkStatus();
}

std::optional<MappedPolicy> MapPolicy(const Policy& policy, const StateSource& session) {
  absl::StatusOr<std::vector<std::string>> names = session.ActionNamesOf(policy.action_space());
  if (!names.ok() || static_cast<int>(names->size()) != policy.num_actions()) return std::nullopt;
  MappedPolicy mapped{&policy, {}};
  for (const std::string& name : *names) {
    const int index = session.ActionIndex(name);
    if (index < 0) return std::nullopt;
    mapped.map.push_back(index);
  }
  return mapped;
}

}  // namespace looptool::client::internal
