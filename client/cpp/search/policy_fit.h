// How a policy meets a session: whether it acts in the session's space and reads what the server
// sends, and a policy of another space with its actions mapped by name into the session's.
#ifndef LOOPTOOL_CLIENT_CPP_SEARCH_POLICY_FIT_H_
#define LOOPTOOL_CLIENT_CPP_SEARCH_POLICY_FIT_H_

#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "client/cpp/policy.h"
#include "client/cpp/search/state_source.h"

namespace looptool::client::internal {

// INVALID_ARGUMENT unless `policy` acts in `session`'s action space (a sketch_value policy: the
// session runs in the space of its sketches' names): a space of as many actions, or for a
// loop_set policy loop_nest with more (stream_L<p> and fold_L<p>, appended after its 560;
// never taken).
absl::Status CheckPolicyFits(const Policy& policy, const StateSource& session);

// INVALID_ARGUMENT unless `features` (the policy's observation_space(): loops_tensor or
// loop_features) are what `policy` reads (another --max_loops on the server gives another size).
absl::Status CheckFeatures(const Policy& policy, const std::vector<float>& features);

// A policy that acts in another space whose action names the session's space has: index i of
// the policy's space is session action map[i].
struct MappedPolicy {
  const Policy* policy = nullptr;
  std::vector<int> map;
};
// `policy` mapped into `session`'s space (its actions: the first num_actions() of its space's
// names), or nullopt when the server does not list the policy's space or the session's space
// lacks one of its actions.
std::optional<MappedPolicy> MapPolicy(const Policy& policy, const StateSource& session);

}  // namespace looptool::client::internal

#endif  // LOOPTOOL_CLIENT_CPP_SEARCH_POLICY_FIT_H_
