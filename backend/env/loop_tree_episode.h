// LoopTreeEpisode: an Environment (LoopTool's loop trees and action spaces) as an Episode.
#ifndef LOOPTOOL_BACKEND_ENV_LOOP_TREE_EPISODE_H_
#define LOOPTOOL_BACKEND_ENV_LOOP_TREE_EPISODE_H_

#include <memory>
#include <string>
#include <vector>

#include "backend/actions/action_space.h"
#include "backend/env/environment.h"
#include "backend/env/episode.h"

namespace looptool {

class LoopTreeEpisode final : public Episode {
 public:
  explicit LoopTreeEpisode(Environment env)
      : env_(std::move(env)), names_(env_.action_space().Names()) {}

  std::unique_ptr<Episode> Clone() const override {
    return std::make_unique<LoopTreeEpisode>(*this);
  }
  const std::string& action_space_name() const override { return env_.action_space().name; }
  const std::vector<std::string>& action_names() const override { return names_; }
  absl::StatusOr<bool> Act(int64_t index) override {
    absl::StatusOr<NoEffectReason> r = env_.Step(index);
    if (!r.ok()) return r.status();
    return *r == NoEffectReason::kNone;
  }
  // loop_nest's (transformation, level, parameter) (LoopNestIndex).
  absl::StatusOr<int64_t> MultiDiscreteIndex(const std::vector<int64_t>& action) const override {
    if (env_.action_space().name != LoopNestActionSpace().name) {
      return Episode::MultiDiscreteIndex(action);
    }
    if (action.size() != 3) {
      return absl::InvalidArgumentError(
          "A multi-discrete action must hold three integers: (transformation, level, parameter)");
    }
    return LoopNestIndex(action[0], action[1], action[2]);
  }
  absl::StatusOr<Observation> Observe(absl::string_view name) const override {
    return env_.Observe(name);
  }
  absl::StatusOr<Measurement> Remeasure() const override { return env_.Remeasure(); }
  void set_tenant(uint64_t tenant) override { env_.set_tenant(tenant); }
  uint64_t tenant() const override { return env_.tenant(); }

  const Environment& environment() const { return env_; }

 private:
  Environment env_;
  std::vector<std::string> names_;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ENV_LOOP_TREE_EPISODE_H_
