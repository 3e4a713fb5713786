// Evolution's seed from a policy of another action space than the session's (a cursor policy,
// a level-pointer session): the policy's greedy episode on a session of its own space on the same
// benchmark, translated into the session's space (CursorToLevelActions) as far as the
// translation goes.
#ifndef LOOPTOOL_CLIENT_CPP_SEARCH_POLICY_SEED_H_
#define LOOPTOOL_CLIENT_CPP_SEARCH_POLICY_SEED_H_

#include <vector>

#include "client/cpp/policy.h"
#include "client/cpp/search/clock.h"
#include "client/cpp/search/search.h"
#include "client/cpp/search/state_source.h"

namespace looptool::client::internal {

// The translated path (indices of `start`'s space), within a quarter of the time limit. Empty
// when `start` is not the benchmark's initial state (a stored schedule replayed), the policy
// does not fit, or the session's space lacks the translated names.
std::vector<int> TranslatedPolicySeed(const StateSource& start, const SearchOptions& options,
                                      const Policy& policy, const Clock& clock);

}  // namespace looptool::client::internal

#endif  // LOOPTOOL_CLIENT_CPP_SEARCH_POLICY_SEED_H_
