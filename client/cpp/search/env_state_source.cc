#include "client/cpp/search/env_state_source.h"

#include "util/status_macros.h"

namespace looptool::client {

absl::StatusOr<std::unique_ptr<StateSource>> SessionStateSource::Fork() const {
  ASSIGN_OR_RETURN(Env fork, env().Fork());
  return std::make_unique<EnvStateSource>(std::move(fork));
}

absl::StatusOr<std::unique_ptr<StateSource>> SessionStateSource::StartInSpace(
    const std::string& space) const {
  ASSIGN_OR_RETURN(Env started, Env::Start(env().connection(), env().benchmark(), space));
  return std::make_unique<EnvStateSource>(std::move(started));
}

absl::StatusOr<StepResult> BorrowedEnvStateSource::Step(const std::vector<int>&,
                                                        const std::vector<std::string>&) {
  return absl::FailedPreconditionError("a search leaves the session it starts from as it is");
}

absl::StatusOr<Retiming> BorrowedEnvStateSource::Remeasure() {
  return absl::FailedPreconditionError("a search leaves the session it starts from as it is");
}

}  // namespace looptool::client
