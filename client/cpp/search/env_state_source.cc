#include "client/cpp/search/env_state_source.h"

#include "util/status_macros.h"

namespace looptool::client {

absl::StatusOr<std::unique_ptr<StateSource>> EnvStateSource::ForkOf(const Env& env) {
  ASSIGN_OR_RETURN(Env fork, env.Fork());
  return std::make_unique<EnvStateSource>(std::move(fork));
}

absl::StatusOr<std::unique_ptr<StateSource>> EnvStateSource::Fork() const {
  return ForkOf(env_);
}

absl::StatusOr<std::unique_ptr<StateSource>> EnvStateSource::StartInSpace(
    const std::string& space) const {
  ASSIGN_OR_RETURN(Env env, Env::Start(env_.connection(), env_.benchmark(), space));
  return std::make_unique<EnvStateSource>(std::move(env));
}

}  // namespace looptool::client
