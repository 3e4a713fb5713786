// EnvStateSource: a server session (client/cpp/env.h) as a search's StateSource.
#ifndef LOOPTOOL_CLIENT_CPP_SEARCH_ENV_STATE_SOURCE_H_
#define LOOPTOOL_CLIENT_CPP_SEARCH_ENV_STATE_SOURCE_H_

#include <memory>
#include <string>
#include <vector>

#include "client/cpp/env.h"
#include "client/cpp/search/state_source.h"

namespace looptool::client {

class EnvStateSource final : public StateSource {
 public:
  explicit EnvStateSource(Env env) : env_(std::move(env)) {}
  // A fork of `env` (which is left as it is).
  static absl::StatusOr<std::unique_ptr<StateSource>> ForkOf(const Env& env);

  absl::StatusOr<std::unique_ptr<StateSource>> Fork() const override;
  absl::StatusOr<StepResult> Step(const std::vector<int>& actions,
                                  const std::vector<std::string>& observations) override {
    return env_.Step(actions, observations);
  }
  absl::StatusOr<double> Remeasure() override { return env_.Remeasure(); }
  void set_deadline(absl::Time deadline) override { env_.set_deadline(deadline); }
  const std::string& action_space() const override { return env_.action_space(); }
  const std::vector<std::string>& action_names() const override { return env_.action_names(); }
  absl::StatusOr<std::vector<std::string>> ActionNamesOf(const std::string& space) const override {
    return env_.connection()->ActionNames(space);
  }
  absl::StatusOr<std::unique_ptr<StateSource>> StartInSpace(
      const std::string& space) const override;

 private:
  Env env_;
};

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_SEARCH_ENV_STATE_SOURCE_H_
