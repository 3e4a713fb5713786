#include "client/cpp/search/policy_fit.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace looptool::client::internal {
namespace {

// Whether `policy` acts in a space named `space` of `size` actions: one of its size, or for a
// loop_set policy loop_nest with more (its layout is loop_nest's first 560 actions,
// client/cpp/policy.cc; stream_L<p> and fold_L<p>, appended since, it never takes).
bool ActsIn(const Policy& policy, const std::string& space, size_t size) {
  const size_t n = static_cast<size_t>(policy.num_actions());
  return n == size || (policy.kind() == Policy::Kind::kLoopSet &&
                       space == policy.action_space() && n < size);
}

}  // namespace

absl::Status CheckPolicyFits(const Policy& policy, const StateSource& session) {
  if (policy.kind() == Policy::Kind::kSketchValue) {
    if (session.action_space() == policy.action_space()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "a sketch_value policy chooses among the server's sketches, in ", policy.action_space(),
        "; the session's action space is ", session.action_space()));
  }
  if (!ActsIn(policy, session.action_space(), session.action_names().size())) {
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
  if (!names.ok() || !ActsIn(policy, policy.action_space(), names->size())) return std::nullopt;
  MappedPolicy mapped{&policy, {}};
  for (int i = 0; i < policy.num_actions(); ++i) {  // the space's first ones (ActsIn)
    const int index = session.ActionIndex((*names)[i]);
    if (index < 0) return std::nullopt;
    mapped.map.push_back(index);
  }
  return mapped;
}

}  // namespace looptool::client::internal
