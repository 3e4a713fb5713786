#include "backend/compat/loop_tool_v0_engine.h"

#include <optional>

#include "backend/compat/loop_tool_v0.h"
#include "util/status_macros.h"

namespace looptool::compat {

LoopToolV0Engine::LoopToolV0Engine(std::shared_ptr<KernelTimer> timer) : timer_(std::move(timer)) {
  for (const auto& entry : LoopToolV0Observations().entries()) {
    observations_.push_back({entry.space, entry.slow});
  }
}

absl::StatusOr<Claim> LoopToolV0Engine::Claims(absl::string_view uri) const {
  ASSIGN_OR_RETURN(const std::optional<int64_t> size, LoopToolV0Size(uri));
  return size.has_value() ? Claim::kOwn : Claim::kNone;
}

const std::vector<NamedActionSpace>& LoopToolV0Engine::ActionSpaces() const {
  return LoopToolV0ActionSpaces();
}

absl::StatusOr<std::unique_ptr<Episode>> LoopToolV0Engine::NewEpisode(
    const EpisodeRequest& request) const {
  ASSIGN_OR_RETURN(const std::optional<int64_t> size, LoopToolV0Size(request.uri));
  if (!size.has_value()) {
    return absl::InvalidArgumentError("not a benchmark://loop_tool-cpu-v0/N benchmark");
  }
  return std::make_unique<LoopToolV0Episode>(*size, request.action_space, timer_);
}

}  // namespace looptool::compat
