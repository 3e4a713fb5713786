// Episode: what a session runs. A state, the named action space an agent indexes into, and the
// observations of the state, whatever the engine behind them: LoopTool's loop trees
// (LoopTreeEpisode) or CompilerGym's upstream loop_tool-v0 nest (backend/compat).
#ifndef LOOPTOOL_BACKEND_ENV_EPISODE_H_
#define LOOPTOOL_BACKEND_ENV_EPISODE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/env/kernel_timer.h"
#include "backend/env/observation.h"

namespace looptool {

class Episode {
 public:
  virtual ~Episode() = default;

  // An independent copy (ForkSession).
  virtual std::unique_ptr<Episode> Clone() const = 0;
  virtual const std::string& action_space_name() const = 0;
  // The action space's names, in index order.
  virtual const std::vector<std::string>& action_names() const = 0;
  // Applies the action at `index`; returns whether it changed the state. INVALID_ARGUMENT when
  // `index` is out of range (nothing changes).
  virtual absl::StatusOr<bool> Act(int64_t index) = 0;
  // The index of an action given in the space's multi-discrete form (loop_nest's
  // (transformation, level, parameter)). INVALID_ARGUMENT for a malformed one, and by default:
  // spaces without such a form.
  virtual absl::StatusOr<int64_t> MultiDiscreteIndex(const std::vector<int64_t>& action) const {
    return absl::InvalidArgumentError(
        "A multi-discrete action (transformation, level, parameter) is for action space "
        "loop_nest, not " + action_space_name());
  }
  // The named observation of the current state. INVALID_ARGUMENT for an observation this
  // episode does not serve; the kernel timer's status for a timed one that cannot be measured.
  virtual absl::StatusOr<Observation> Observe(absl::string_view name) const = 0;

  // The current kernel timed again (KernelTimer::RemeasureFor), with the peak measured beside
  // it where the timer measures one. UNIMPLEMENTED for episodes that cannot.
  virtual absl::StatusOr<Measurement> Remeasure() const {
    return absl::UnimplementedError("this action space's sessions cannot re-time their kernel");
  }

  // Whom kernels are measured for (KernelTimer::MeasureFor).
  virtual void set_tenant(uint64_t tenant) = 0;
  virtual uint64_t tenant() const = 0;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ENV_EPISODE_H_
