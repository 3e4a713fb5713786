#include "client/cpp/search/policy_seed.h"

#include <memory>
#include <string>

#include "client/cpp/search/algorithms.h"
#include "client/cpp/search/cursor_translation.h"

namespace looptool::client::internal {

std::vector<int> TranslatedPolicySeed(const StateSource& start, const SearchOptions& options,
                                      const Policy& policy, const Clock& clock) {
  absl::StatusOr<std::unique_ptr<StateSource>> own = start.StartInSpace(policy.action_space());
  if (!own.ok()) return {};
  const absl::Time deadline = clock.Now() + absl::Seconds(options.time_limit_seconds / 4);
  (*own)->set_deadline(deadline);
  absl::StatusOr<Value> own_ir = (*own)->Observe("ir");
  absl::StatusOr<std::unique_ptr<StateSource>> probe = start.Fork();
  if (!own_ir.ok() || !probe.ok()) return {};
  (*probe)->set_deadline(deadline);
  absl::StatusOr<Value> start_ir = (*probe)->Observe("ir");
  if (!start_ir.ok() || start_ir->text != own_ir->text) return {};
  SearchOptions within = options;  // the episode's own calls end at the same deadline
  within.time_limit_seconds = options.time_limit_seconds / 4;
  absl::StatusOr<SearchResult> episode = PolicyEpisode(**own, within, policy, clock);
  if (!episode.ok()) return {};
  std::vector<int> path;
  for (const std::string& name : CursorToLevelActions(episode->actions)) {
    const int index = start.ActionIndex(name);
    if (index < 0) break;
    path.push_back(index);
  }
  return path;
}

}  // namespace looptool::client::internal
