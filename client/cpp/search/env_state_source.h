// A server session (client/cpp/env.h) as a search's StateSource: EnvStateSource owns one;
// BorrowedEnvStateSource is a caller's session a search starts from (forks and names only: a
// search never steps its start).
#ifndef LOOPTOOL_CLIENT_CPP_SEARCH_ENV_STATE_SOURCE_H_
#define LOOPTOOL_CLIENT_CPP_SEARCH_ENV_STATE_SOURCE_H_

#include <memory>
#include <string>
#include <vector>

#include "client/cpp/env.h"
#include "client/cpp/search/state_source.h"

namespace looptool::client {

// What every session source answers from its session: forks, names, other spaces.
class SessionStateSource : public StateSource {
 public:
  absl::StatusOr<std::unique_ptr<StateSource>> Fork() const override;
  const std::string& action_space() const override { return env().action_space(); }
  const std::vector<std::string>& action_names() const override { return env().action_names(); }
  absl::StatusOr<std::vector<std::string>> ActionNamesOf(const std::string& space) const override {
    return env().connection()->ActionNames(space);
  }
  absl::StatusOr<std::unique_ptr<StateSource>> StartInSpace(
      const std::string& space) const override;
  bool HasObservation(const std::string& name) const override {
    return env().connection()->ObservationIndex(name).ok();
  }

 protected:
  virtual const Env& env() const = 0;
};

class EnvStateSource final : public SessionStateSource {
 public:
  explicit EnvStateSource(Env env) : env_(std::move(env)) {}

  absl::StatusOr<StepResult> Step(const std::vector<int>& actions,
                                  const std::vector<std::string>& observations) override {
    return env_.Step(actions, observations);
  }
  absl::StatusOr<Retiming> Remeasure() override { return env_.Remeasure(); }
  void set_deadline(absl::Time deadline) override { env_.set_deadline(deadline); }
  Env* owned_session() override { return &env_; }

 private:
  const Env& env() const override { return env_; }
  Env env_;
};

class BorrowedEnvStateSource final : public SessionStateSource {
 public:
  // `env` must outlive this.
  explicit BorrowedEnvStateSource(const Env& env) : env_(env) {}

  // FAILED_PRECONDITION: the borrowed session is left as it is.
  absl::StatusOr<StepResult> Step(const std::vector<int>& actions,
                                  const std::vector<std::string>& observations) override;
  absl::StatusOr<Retiming> Remeasure() override;
  void set_deadline(absl::Time deadline) override {}  // forks take the search's own

 private:
  const Env& env() const override { return env_; }
  const Env& env_;
};

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_SEARCH_ENV_STATE_SOURCE_H_
