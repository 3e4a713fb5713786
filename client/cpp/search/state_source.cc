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

}  // namespace looptool::client
