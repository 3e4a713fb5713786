#include "backend/env/loop_tree_engine.h"

#include "absl/strings/str_cat.h"
#include "backend/actions/action_space.h"
#include "backend/env/environment.h"
#include "backend/env/loop_tree_episode.h"
#include "util/status_macros.h"

namespace looptool {

LoopTreeEngine::LoopTreeEngine(Limits limits, KernelBackend kernels)
    : limits_(limits),
      kernels_(std::move(kernels)),
      registry_(std::make_shared<const ObservationRegistry>(LoopToolObservations(limits_))) {
  for (const ActionSpace& space : AllActionSpaces()) spaces_.push_back({space.name, space.Names()});
  for (const auto& entry : registry_->entries()) observations_.push_back({entry.space, entry.slow});
}

absl::StatusOr<std::unique_ptr<Episode>> LoopTreeEngine::NewEpisode(
    const EpisodeRequest& request) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const Program> program, request.load_program(request.uri));
  LoopTree initial = LoopTree::Initial(std::move(program));
  if (initial.num_loops() > limits_.max_loops) {
    return absl::InvalidArgumentError(
        absl::StrCat("Loop nest too large: benchmark ", request.uri, " has ", initial.num_loops(),
                     " loops, this server allows at most ", limits_.max_loops));
  }
  // Its first measurement needs the program's reference run: the timer may start it now,
  // while the client still reads observations and plans (a policy plays its episodes first).
  if (kernels_.timer != nullptr) kernels_.timer->PrepareFor(initial, request.tenant);
  return std::make_unique<LoopTreeEpisode>(Environment(std::move(initial),
                                                       AllActionSpaces()[request.action_space],
                                                       limits_, kernels_, registry_));
}

}  // namespace looptool
