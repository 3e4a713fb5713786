#include "backend/env/environment.h"

#include "absl/strings/str_cat.h"
#include "backend/actions/apply.h"
#include "util/check.h"
#include "util/status_macros.h"

namespace looptool {
namespace {

// The history's vocabulary is loop_tool's: a level-pointer action counts as the cursor action
// it performs (interchange as a swap in its direction); a tile size loop_tool lacks, as none.
int LoopToolIndex(const Action& a) {
  Action cursor = a;
  if (a.kind == Action::Kind::kInterchange) {
    cursor.kind = a.target > a.level ? Action::Kind::kSwapDown : Action::Kind::kSwapUp;
  }
  cursor.level = cursor.target = -1;
  return LoopToolActionSpace().IndexOf(cursor);
}

}  // namespace

std::vector<ObservationSpace> ObservationSpaces(const Limits& limits) {
  return LoopToolObservations(limits).Spaces();
}

Environment::Environment(LoopTree initial, ActionSpace space, Limits limits,
                         KernelBackend kernels,
                         std::shared_ptr<const ObservationRegistry> observations)
    : tree_(std::move(initial)),
      space_(std::move(space)),
      limits_(limits),
      kernels_(std::move(kernels)),
      observations_(observations ? std::move(observations)
                                 : std::make_shared<const ObservationRegistry>(
                                       LoopToolObservations(limits))) {
  LT_CHECK(tree_.num_loops() <= limits_.max_loops);
}

absl::StatusOr<NoEffectReason> Environment::Step(int64_t index) {
  ASSIGN_OR_RETURN(const Action action, space_.At(index));
  ActionResult r = Apply(tree_, action, limits_);
  if (history_.size() == kHistory) history_.erase(history_.begin());
  history_.push_back(LoopToolIndex(action));
  tree_ = std::move(r.tree);
  return r.reason;
}

absl::StatusOr<Observation> Environment::Observe(absl::string_view name) const {
  const ObservationEntry<ObservationInputs>* entry = observations_->Find(name);
  if (entry == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("Unknown observation space: ", name));
  }
  return entry->compute(
      ObservationInputs{tree_, history_, space_, limits_, kernels_, tenant_});
}

absl::StatusOr<Measurement> Environment::Remeasure() const {
  if (kernels_.timer == nullptr) {
    return absl::FailedPreconditionError("this environment has no kernel timer");
  }
  return kernels_.timer->RemeasureFor(tree_, tenant_);
}

}  // namespace looptool
