// LoopTreeEngine: LoopTool's own engine. Episodes are Environments over the loop tree of a
// program (the datasets' or a client's added ones), in the loop_tool, loop_tune or loop_nest
// action space, serving the ObservationRegistry's observations. It serves any benchmark URI no
// other engine owns (Claim::kFallback). Thread-safe (immutable after construction).
#ifndef LOOPTOOL_BACKEND_ENV_LOOP_TREE_ENGINE_H_
#define LOOPTOOL_BACKEND_ENV_LOOP_TREE_ENGINE_H_

#include <memory>
#include <string>
#include <vector>

#include "backend/env/engine.h"
#include "backend/env/kernel_backend.h"
#include "backend/env/observation_registry.h"
#include "backend/ir/limits.h"

namespace looptool {

class LoopTreeEngine final : public Engine {
 public:
  LoopTreeEngine(Limits limits, KernelBackend kernels);

  const std::string& name() const override { return name_; }
  absl::StatusOr<Claim> Claims(absl::string_view uri) const override { return Claim::kFallback; }
  const std::vector<NamedActionSpace>& ActionSpaces() const override { return spaces_; }
  const std::vector<EngineObservation>& Observations() const override { return observations_; }
  // The program from request.load_program. INVALID_ARGUMENT when its loop tree has more loops
  // than limits.max_loops.
  absl::StatusOr<std::unique_ptr<Episode>> NewEpisode(
      const EpisodeRequest& request) const override;

 private:
  const std::string name_ = "LoopTool";
  const Limits limits_;
  const KernelBackend kernels_;
  const std::shared_ptr<const ObservationRegistry> registry_;  // shared by every episode
  std::vector<NamedActionSpace> spaces_;
  std::vector<EngineObservation> observations_;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ENV_LOOP_TREE_ENGINE_H_
