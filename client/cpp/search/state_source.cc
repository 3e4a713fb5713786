#include "client/cpp/search/state_source.h"

#include "util/status_macros.h"

namespace looptool::client {

int StateSource::ActionIndex(const std::string& name) const {
  const std::vector<std::string>& names = action_names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<Value> StateSource::Observe(const std::string& observation) {
  ASSIGN_OR_RETURN(StepResult r, Step({}, {observation}));
  return r.Get(observation);
}

void EndSources(std::vector<std::unique_ptr<StateSource>>& sources) {
  std::vector<Env*> sessions;
  for (const std::unique_ptr<StateSource>& source : sources) {
    Env* session = source == nullptr ? nullptr : source->owned_session();
    if (session != nullptr) sessions.push_back(session);
  }
  Env::CloseAll(sessions).IgnoreError();  // as a destructor's Close: nothing is left to do
  sources.clear();
}

}  // namespace looptool::client
