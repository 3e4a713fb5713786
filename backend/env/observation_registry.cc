#include "backend/env/observation_registry.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "backend/actions/apply.h"
#include "backend/actions/sketches.h"
#include "backend/codegen/compile.h"
#include "backend/codegen/kernel_abi.h"
#include "backend/codegen/kernel_plan.h"
#include "backend/costmodel/plan_features.h"
#include "backend/costmodel/roofline.h"
#include "backend/features/loop_features.h"
#include "backend/features/stride_histogram.h"
#include "backend/features/tensors.h"
#include "backend/graph/node_link_json.h"
#include "backend/graph/program_graph.h"
#include "backend/schedule/ir_text.h"
#include "backend/schedule/loop_tree_text.h"
#include "nlohmann/json.hpp"
#include "util/status_macros.h"

namespace looptool {
namespace {

using Entry = ObservationEntry<ObservationInputs>;
using Fn = std::function<absl::StatusOr<Observation>(const ObservationInputs&)>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr char kEmptyGraph[] =
    R"({"directed":true,"multigraph":true,"graph":{},"nodes":[],"links":[]})";

Entry Text(std::string name, Fn fn) {
  ObservationSpace s{std::move(name), Observation::Kind::kString};
  s.default_value = Observation::String("");
  return {std::move(s), false, std::move(fn)};
}

// A text that needs the kernel timed: not deterministic, and the host's own.
Entry TimedText(std::string name, Fn fn) {
  ObservationSpace s{std::move(name), Observation::Kind::kString};
  s.default_value = Observation::String("");
  s.deterministic = false;
  s.platform_dependent = true;
  return {std::move(s), true, std::move(fn)};
}

Entry Graph(std::string name, Fn fn) {
  ObservationSpace s{std::move(name), Observation::Kind::kGraphJson};
  s.default_value = Observation::Graph(kEmptyGraph);
  return {std::move(s), false, std::move(fn)};
}

Entry FloatBox(std::string name, int64_t width, double high, Fn fn) {
  ObservationSpace s{std::move(name), Observation::Kind::kFloatTensor, {1, width}, 0, high};
  s.default_value = Observation::Floats(std::vector<float>(width, 0.0f), {1, width});
  return {std::move(s), false, std::move(fn)};
}

Entry Number(std::string name, Observation::Kind kind, double high, bool timed, Fn fn) {
  ObservationSpace s{std::move(name), kind, {}, 0, high};
  s.deterministic = !timed;
  s.platform_dependent = timed;
  s.default_value = kind == Observation::Kind::kInt64 ? Observation::Int64(0)
                                                      : Observation::Double(0);
  return {std::move(s), timed, std::move(fn)};
}

// The timer of a timed observation `name`; FAILED_PRECONDITION when there is none.
absl::StatusOr<KernelTimer*> Timer(const ObservationInputs& in, absl::string_view name) {
  if (in.kernels.timer == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("observation ", name, " needs a kernel timer, and none is attached"));
  }
  return in.kernels.timer.get();
}

absl::StatusOr<Measurement> Measure(const ObservationInputs& in, absl::string_view name) {
  ASSIGN_OR_RETURN(KernelTimer* const timer, Timer(in, name));
  return timer->MeasureFor(in.tree, in.tenant);
}

// The program's roofline bound on the timer's host, with the memory it was computed from.
absl::StatusOr<std::pair<RooflineBound, MemoryProfile>> Bound(const ObservationInputs& in,
                                                             absl::string_view name) {
  ASSIGN_OR_RETURN(KernelTimer* const timer, Timer(in, name));
  ASSIGN_OR_RETURN(const double peak, timer->PeakGflops());
  ASSIGN_OR_RETURN(MemoryProfile memory, timer->Memory());
  ASSIGN_OR_RETURN(const RooflineBound bound, Roofline(in.tree.program(), peak, memory));
  return std::make_pair(bound, std::move(memory));
}

}  // namespace

ObservationRegistry LoopToolObservations(const Limits& limits) {
  const int num_actions = LoopToolActionSpace().size();  // the history's vocabulary
  const int64_t loops_width = int64_t{limits.max_loops} * kLoopFeatures;
  const int64_t prev_width = int64_t{kPrevActions} * num_actions;
  int largest_space = 0;
  for (const ActionSpace& s : AllActionSpaces()) largest_space = std::max(largest_space, s.size());

  ObservationSpace mask{"action_mask", Observation::Kind::kBoolTensor};
  mask.min_length = 0;
  mask.max_length = largest_space;
  mask.high = 1;
  mask.default_value = Observation::Bools({});

  std::vector<Entry> entries = {
      Text("ir", [](const ObservationInputs& in) { return Observation::String(PrintIr(in.tree)); }),
      Text("loop_tree",
           [](const ObservationInputs& in) { return Observation::String(LoopTreeText(in.tree)); }),
      FloatBox("loops_tensor", loops_width, static_cast<double>(limits.max_extent),
               [loops_width](const ObservationInputs& in) {
                 return Observation::Floats(LoopsTensor(in.tree, in.limits.max_loops),
                                            {1, loops_width});
               }),
      FloatBox("stride_tensor", kStrideBuckets, std::numeric_limits<float>::max(),
               [](const ObservationInputs& in) {
                 return Observation::Floats(StrideTensor(in.tree), {1, kStrideBuckets});
               }),
      FloatBox("5_prev_actions_tensor", prev_width, 1,
               [num_actions, prev_width](const ObservationInputs& in) {
                 return Observation::Floats(PrevActionsTensor(in.history, num_actions),
                                            {1, prev_width});
               }),
      Graph("ir_graph_networkx",
            [](const ObservationInputs& in) {
              return Observation::Graph(NodeLinkJson(BuildProgramGraph(in.tree)));
            }),
      Graph("ir_tree_networkx",
            [](const ObservationInputs& in) {
              return Observation::Graph(NodeLinkJson(BuildTreeGraph(in.tree)));
            }),
      {mask, false,
       [](const ObservationInputs& in) {
         return Observation::Bools(ActionMask(in.tree, in.action_space, in.limits));
       }},
      Number("flop_count", Observation::Kind::kInt64, static_cast<double>(limits.max_flops),
             false,
             [](const ObservationInputs& in) {
               return Observation::Int64(in.tree.program().Flops());
             }),
      Number("flops", Observation::Kind::kDouble, kInf, true,
             [](const ObservationInputs& in) -> absl::StatusOr<Observation> {
               ASSIGN_OR_RETURN(const Measurement m, Measure(in, "flops"));
               return Observation::Double(m.gflops);
             }),
      Number("runtime", Observation::Kind::kDouble, kInf, true,
             [](const ObservationInputs& in) -> absl::StatusOr<Observation> {
               ASSIGN_OR_RETURN(const Measurement m, Measure(in, "runtime"));
               return Observation::Double(m.seconds);
             }),
      // How the kernel's `flops` and `runtime` were timed (Measurement::Timing), and what
      // measuring it took its worker (Measurement::work_seconds), as JSON with its keys sorted:
      // {"timed_runs":12,"timing":"settled","work_seconds":0.0121}.
      TimedText("timing",
                [](const ObservationInputs& in) -> absl::StatusOr<Observation> {
                  ASSIGN_OR_RETURN(const Measurement m, Measure(in, "timing"));
                  const nlohmann::json j = {{"timing", TimingName(m.timing)},
                                            {"timed_runs", m.timed_runs},
                                            {"work_seconds", m.work_seconds}};
                  return Observation::String(j.dump());
                }),
      Number("peak_gflops", Observation::Kind::kDouble, kInf, true,
             [](const ObservationInputs& in) -> absl::StatusOr<Observation> {
               ASSIGN_OR_RETURN(KernelTimer* const timer, Timer(in, "peak_gflops"));
               ASSIGN_OR_RETURN(const double peak, timer->PeakGflops());
               return Observation::Double(peak);
             }),
  };
  // The server's cost model's guess, untimed; it changes as the model learns.
  Entry predicted = Number(
      "predicted_gflops", Observation::Kind::kDouble, kInf, false,
      [](const ObservationInputs& in) -> absl::StatusOr<Observation> {
        if (in.kernels.cost_model == nullptr) {
          return absl::UnimplementedError("this server has no cost model");
        }
        return Observation::Double(in.kernels.cost_model->PredictGflops(in.tree));
      });
  predicted.space.deterministic = false;
  predicted.space.platform_dependent = true;
  entries.push_back(std::move(predicted));
  // LoopNest-style starting schedules as loop_nest actions (backend/actions/sketches.h), sized
  // for the target's vector unit.
  Entry sketches = Text("sketches", [](const ObservationInputs& in) {
    SketchOptions options;
    options.target = in.kernels.target;
    return Observation::String(SketchesText(LoopNestSketches(in.tree, in.limits, options)));
  });
  sketches.space.platform_dependent = true;
  entries.push_back(std::move(sketches));
  // What the code generator makes of the schedule for the target, untimed: per statement the
  // vector width, the register block, the decisions worth telling (scalar fallbacks, ignored
  // unroll marks) and the loops as emitted (backend/codegen/kernel_plan.h's DescribePlan).
  Entry plan = Text("kernel_plan", [](const ObservationInputs& in) {
    return Observation::String(
        DescribePlan(Lower(in.tree, in.kernels.target, in.kernels.codegen), in.tree.program()));
  });
  plan.space.platform_dependent = true;
  entries.push_back(std::move(plan));
  // How to call the kernel once taken away (backend/codegen/kernel_abi.h), as JSON.
  Entry abi = Text("kernel_abi", [](const ObservationInputs& in) {
    std::vector<int> streamed;  // outputs of statements whose stores are streamed
    const std::vector<StatementSchedule>& schedules = in.tree.schedules();
    if (in.kernels.codegen.stream_output_min_bytes > 0 ||
        std::any_of(schedules.begin(), schedules.end(),
                    [](const StatementSchedule& s) { return s.stream; })) {
      const KernelPlan plan = Lower(in.tree, in.kernels.target, in.kernels.codegen);
      for (const StatementPlan& s : plan.statements) {
        if (s.stream_output &&
            std::find(streamed.begin(), streamed.end(), s.output.tensor) == streamed.end()) {
          streamed.push_back(s.output.tensor);
        }
      }
    }
    return Observation::String(KernelAbiJson(in.tree.program(), in.kernels.target, streamed));
  });
  abi.space.platform_dependent = true;
  entries.push_back(std::move(abi));
  // The kernel's machine code for the target: the bytes the timer runs (the compiler is
  // deterministic), position-independent, entry at offset 0. Not verified here: the timed
  // observations verify a kernel against the interpreter, in the kernel worker, before timing it
  // (`looptool export` asks for `flops` in the same step). Slow: up to max_code_bytes of code
  // are emitted, so it runs where calls may wait.
  ObservationSpace code{"machine_code", Observation::Kind::kBytes};
  code.min_length = 0;
  code.max_length = CodegenOptions().max_code_bytes;
  code.platform_dependent = true;
  code.default_value = Observation::Bytes("");
  entries.push_back({std::move(code), /*slow=*/true,
                     [](const ObservationInputs& in) -> absl::StatusOr<Observation> {
                       KernelCompiler compiler(in.kernels.target, in.kernels.codegen);
                       ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes,
                                        compiler.CompileCode(in.tree));
                       return Observation::Bytes(std::string(bytes.begin(), bytes.end()));
                     }});
  // The program's roofline bound on this host (backend/costmodel/roofline.h) as JSON: the same
  // for every schedule of a program; slow only the first time (the levels' bandwidth is measured
  // once, about half a second).
  Entry roofline = Text("roofline", [](const ObservationInputs& in) -> absl::StatusOr<Observation> {
    ASSIGN_OR_RETURN(const auto bound, Bound(in, "roofline"));
    return Observation::String(RooflineJson(bound.first, bound.second));
  });
  roofline.slow = true;
  roofline.space.deterministic = false;
  roofline.space.platform_dependent = true;
  entries.push_back(std::move(roofline));
  // The fraction of that bound the schedule's kernel reaches: bound seconds / measured seconds.
  entries.push_back(Number("roofline_fraction", Observation::Kind::kDouble, kInf, true,
                           [](const ObservationInputs& in) -> absl::StatusOr<Observation> {
                             ASSIGN_OR_RETURN(const auto bound, Bound(in, "roofline_fraction"));
                             ASSIGN_OR_RETURN(const Measurement m,
                                              Measure(in, "roofline_fraction"));
                             return Observation::Double(bound.first.Fraction(m.seconds));
                           }));
  // What the server's cost model sees of the schedule (backend/costmodel/plan_features.h), as a
  // JSON object by feature name, untimed: what tuning records keep beside each measurement.
  Entry features = Text("plan_features", [](const ObservationInputs& in) {
    return Observation::String(PlanFeaturesJson(in.tree, in.kernels.target));
  });
  features.space.platform_dependent = true;
  entries.push_back(std::move(features));
  // What a policy over the set of loops reads (backend/features/loop_features.h): a row per
  // compute loop in level-pointer order, up to the server's --max_loops rows.
  const int64_t set_width = int64_t{limits.max_loops} * kLoopSetFeatures;
  entries.push_back(FloatBox("loop_features", set_width, 64,
                             [set_width](const ObservationInputs& in) {
                               return Observation::Floats(
                                   LoopFeatures(in.tree, in.limits.max_loops), {1, set_width});
                             }));
  return ObservationRegistry(std::move(entries));
}

}  // namespace looptool
