// LoopToolV0Engine: CompilerGym's upstream loop_tool-v0 (loop_tool_v0.h) as an Engine. It owns
// benchmark://loop_tool-cpu-v0/N (and refuses loop_tool-cuda-v0: UNIMPLEMENTED, N out of range:
// NOT_FOUND); its spaces are upstream's simple and split, its observations flops, loop_tree and
// action_state. Thread-safe (immutable after construction).
#ifndef LOOPTOOL_BACKEND_COMPAT_LOOP_TOOL_V0_ENGINE_H_
#define LOOPTOOL_BACKEND_COMPAT_LOOP_TOOL_V0_ENGINE_H_

#include <memory>
#include <string>
#include <vector>

#include "backend/env/engine.h"
#include "backend/env/kernel_timer.h"

namespace looptool::compat {

class LoopToolV0Engine final : public Engine {
 public:
  // `timer` may be null: the flops observation then fails.
  explicit LoopToolV0Engine(std::shared_ptr<KernelTimer> timer);

  const std::string& name() const override { return name_; }
  absl::StatusOr<Claim> Claims(absl::string_view uri) const override;
  const std::vector<NamedActionSpace>& ActionSpaces() const override;
  const std::vector<EngineObservation>& Observations() const override { return observations_; }
  absl::StatusOr<std::unique_ptr<Episode>> NewEpisode(
      const EpisodeRequest& request) const override;

 private:
  const std::string name_ = "CompilerGym loop_tool-v0";
  const std::shared_ptr<KernelTimer> timer_;
  std::vector<EngineObservation> observations_;
};

}  // namespace looptool::compat

#endif  // LOOPTOOL_BACKEND_COMPAT_LOOP_TOOL_V0_ENGINE_H_
