// Environment: one episode. A LoopTree, the action space the agent indexes into, the actions
// taken so far, and the observations of the state. A plain value: Fork is a copy.
#ifndef LOOPTOOL_BACKEND_ENV_ENVIRONMENT_H_
#define LOOPTOOL_BACKEND_ENV_ENVIRONMENT_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/actions/action.h"
#include "backend/actions/action_space.h"
#include "backend/env/kernel_backend.h"
#include "backend/env/observation.h"
#include "backend/env/observation_registry.h"
#include "backend/schedule/loop_tree.h"
#include "backend/ir/limits.h"

namespace looptool {

// The observation spaces every environment serves, in the order clients index them (the
// registry's: LoopToolObservations in observation_registry.h).
std::vector<ObservationSpace> ObservationSpaces(const Limits& limits);

class Environment {
 public:
  // `kernels`: the target, timer and cost model the observations use (a default one has no
  // timer: the timing observations then fail with FAILED_PRECONDITION). `observations`: the
  // registry to serve (null: LoopTool's for `limits`; a server shares one among its sessions).
  // REQUIRES: initial.num_loops() <= limits.max_loops.
  Environment(LoopTree initial, ActionSpace space, Limits limits, KernelBackend kernels = {},
              std::shared_ptr<const ObservationRegistry> observations = nullptr);

  const LoopTree& tree() const { return tree_; }
  // Whom the timer measures this episode's kernels for (KernelTimer::MeasureFor).
  void set_tenant(uint64_t tenant) { tenant_ = tenant; }
  uint64_t tenant() const { return tenant_; }
  const ActionSpace& action_space() const { return space_; }
  // The last actions stepped (at most kHistory), effective or not, as loop_tool action-space
  // indices, oldest first. Bounded so that a long episode costs no memory.
  static constexpr size_t kHistory = 64;
  const std::vector<int>& history() const { return history_; }

  // Applies the action at `index` of the action space and returns why it changed nothing, or
  // kNone. INVALID_ARGUMENT when `index` is out of range (nothing changes).
  absl::StatusOr<NoEffectReason> Step(int64_t index);

  // The named observation of the current state. INVALID_ARGUMENT for an unknown name; the
  // timer's status for a timing observation whose kernel cannot be measured.
  absl::StatusOr<Observation> Observe(absl::string_view name) const;

  // The current schedule's kernel timed again (KernelTimer::RemeasureFor: its GFLOPS and the
  // peak measured beside it). FAILED_PRECONDITION without a timer.
  absl::StatusOr<Measurement> Remeasure() const;

 private:
  LoopTree tree_;
  ActionSpace space_;
  Limits limits_;
  KernelBackend kernels_;
  std::shared_ptr<const ObservationRegistry> observations_;
  std::vector<int> history_;
  uint64_t tenant_ = 0;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ENV_ENVIRONMENT_H_
