// StateSource: what a search explores, one state at a time: a session (or anything that behaves
// like one) that forks, steps by action index and observes by name. The searches know nothing
// else of where states come from: EnvStateSource (env_state_source.h) is a server session, and
// unit tests use a deterministic fake. Not thread-safe; one source per thread.
#ifndef LOOPTOOL_CLIENT_CPP_SEARCH_STATE_SOURCE_H_
#define LOOPTOOL_CLIENT_CPP_SEARCH_STATE_SOURCE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cpp/env.h"

namespace looptool::client {

class StateSource {
 public:
  virtual ~StateSource() = default;

  // An independent source in this one's state, with its deadline.
  virtual absl::StatusOr<std::unique_ptr<StateSource>> Fork() const = 0;
  // Applies `actions` (indices of action_names()) in order, then returns `observations` (names:
  // ir, loop_tree, flops, action_mask, loops_tensor, peak_gflops, predicted_gflops, sketches).
  // A step is all or nothing: when an observation cannot be computed (a kernel that cannot be
  // measured), the step fails and the state is as it was.
  virtual absl::StatusOr<StepResult> Step(const std::vector<int>& actions,
                                          const std::vector<std::string>& observations) = 0;
  // The current state's kernel timed again with the full budget, and the peak measured beside
  // it (0 when not measured).
  virtual absl::StatusOr<Retiming> Remeasure() = 0;
  // Calls (but Remeasure) end by `deadline` (DEADLINE_EXCEEDED); forks inherit it.
  virtual void set_deadline(absl::Time deadline) = 0;

  // The action space's name and its actions' names, in index order.
  virtual const std::string& action_space() const = 0;
  virtual const std::vector<std::string>& action_names() const = 0;
  // The names of another action space the server has; NOT_FOUND when it has none such.
  virtual absl::StatusOr<std::vector<std::string>> ActionNamesOf(
      const std::string& space) const = 0;
  // A new source on the same benchmark's initial state in action space `space`.
  virtual absl::StatusOr<std::unique_ptr<StateSource>> StartInSpace(
      const std::string& space) const = 0;
  // Whether Step can return observation `name` (a server of before it may lack a newer one).
  virtual bool HasObservation(const std::string& name) const = 0;

  // The server session this source owns, which EndSources ends with others; null where it owns
  // none (a caller's session it borrows, a test's fake).
  virtual Env* owned_session() { return nullptr; }
  // Index of an action name, or -1.
  int ActionIndex(const std::string& name) const;
  // One observation of the current state.
  absl::StatusOr<Value> Observe(const std::string& observation);
};

// Destroys `sources` (null ones aside), the sessions they own ended together (Env::CloseAll: one
// call's wait for all rather than one each); `sources` is left empty.
void EndSources(std::vector<std::unique_ptr<StateSource>>& sources);

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_SEARCH_STATE_SOURCE_H_
