#include "backend/env/environment.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "backend/actions/apply.h"
#include "backend/features/stride_histogram.h"
#include "backend/features/tensors.h"
#include "backend/graph/node_link_json.h"
#include "backend/graph/program_graph.h"
#include "backend/schedule/ir_text.h"
#include "backend/schedule/loop_tree_text.h"
#include "backend/util/check.h"
#include "backend/util/status_macros.h"

namespace looptool {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr char kEmptyGraph[] =
    R"({"directed":true,"multigraph":true,"graph":{},"nodes":[],"links":[]})";

ObservationSpace Text(std::string name) {
  ObservationSpace s{std::move(name), Observation::Kind::kString};
  s.default_value = Observation::String("");
  return s;
}

ObservationSpace Graph(std::string name) {
  ObservationSpace s{std::move(name), Observation::Kind::kGraphJson};
  s.default_value = Observation::Graph(kEmptyGraph);
  return s;
}

ObservationSpace FloatBox(std::string name, int64_t width, double high) {
  ObservationSpace s{std::move(name), Observation::Kind::kFloatTensor, {1, width}, 0, high};
  s.default_value = Observation::Floats(std::vector<float>(width, 0.0f), {1, width});
  return s;
}

ObservationSpace Number(std::string name, Observation::Kind kind, double high, bool timed) {
  ObservationSpace s{std::move(name), kind, {}, 0, high};
  s.deterministic = !timed;
  s.platform_dependent = timed;
  s.default_value = kind == Observation::Kind::kInt64 ? Observation::Int64(0)
                                                      : Observation::Double(0);
  return s;
}

int LoopToolIndex(const Action& a) { return LoopToolActionSpace().IndexOf(a); }

}  // namespace

std::vector<ObservationSpace> ObservationSpaces(const Limits& limits) {
  const int num_actions = LoopToolActionSpace().size();
  ObservationSpace mask{"action_mask", Observation::Kind::kBoolTensor};
  mask.min_length = 0;
  mask.max_length = num_actions;
  mask.high = 1;
  mask.default_value = Observation::Bools({});
  return {
      Text("ir"),
      Text("loop_tree"),
      FloatBox("loops_tensor", int64_t{limits.max_loops} * kLoopFeatures,
               static_cast<double>(limits.max_extent)),
      FloatBox("stride_tensor", kStrideBuckets, std::numeric_limits<float>::max()),
      FloatBox("5_prev_actions_tensor", int64_t{kPrevActions} * num_actions, 1),
      Graph("ir_graph_networkx"),
      Graph("ir_tree_networkx"),
      mask,
      Number("flop_count", Observation::Kind::kInt64, static_cast<double>(limits.max_flops), false),
      Number("flops", Observation::Kind::kDouble, kInf, true),
      Number("runtime", Observation::Kind::kDouble, kInf, true),
      Number("peak_gflops", Observation::Kind::kDouble, kInf, true),
  };
}

Environment::Environment(LoopTree initial, ActionSpace space, Limits limits,
                         std::shared_ptr<KernelEvaluator> evaluator)
    : tree_(std::move(initial)),
      space_(std::move(space)),
      limits_(limits),
      evaluator_(std::move(evaluator)) {
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
  if (name == "ir") return Observation::String(PrintIr(tree_));
  if (name == "loop_tree") return Observation::String(LoopTreeText(tree_));
  if (name == "loops_tensor") {
    return Observation::Floats(LoopsTensor(tree_, limits_.max_loops),
                               {1, int64_t{limits_.max_loops} * kLoopFeatures});
  }
  if (name == "stride_tensor") return Observation::Floats(StrideTensor(tree_), {1, kStrideBuckets});
  if (name == "5_prev_actions_tensor") {
    const int n = LoopToolActionSpace().size();
    return Observation::Floats(PrevActionsTensor(history_, n), {1, int64_t{kPrevActions} * n});
  }
  if (name == "ir_graph_networkx") return Observation::Graph(NodeLinkJson(BuildProgramGraph(tree_)));
  if (name == "ir_tree_networkx") return Observation::Graph(NodeLinkJson(BuildTreeGraph(tree_)));
  if (name == "action_mask") return Observation::Bools(ActionMask(tree_, space_, limits_));
  if (name == "flop_count") return Observation::Int64(tree_.program().Flops());
  if (name == "flops" || name == "runtime" || name == "peak_gflops") {
    if (!evaluator_) {
      return absl::FailedPreconditionError(
          absl::StrCat("observation ", name, " needs a kernel evaluator, and none is attached"));
    }
    if (name == "peak_gflops") return Observation::Double(evaluator_->PeakGflops());
    ASSIGN_OR_RETURN(const Measurement m, evaluator_->MeasureFor(tree_, tenant_));
    return Observation::Double(name == "flops" ? m.gflops : m.seconds);
  }
  return absl::InvalidArgumentError(absl::StrCat("Unknown observation space: ", name));
}

}  // namespace looptool
