// ObservationRegistry: every observation an episode serves, in one table. An entry is a name's
// declared space, whether computing it is slow (compiles, and may time, a kernel: the service
// runs such requests where they may wait, and injects test faults only there), and how to compute it from the episode's
// state. GetSpaces, Observe and the service's timing decisions all read the same table, so a new
// observation is one entry.
#ifndef LOOPTOOL_BACKEND_ENV_OBSERVATION_REGISTRY_H_
#define LOOPTOOL_BACKEND_ENV_OBSERVATION_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/actions/action_space.h"
#include "backend/env/kernel_backend.h"
#include "backend/env/observation.h"
#include "backend/schedule/loop_tree.h"
#include "backend/ir/limits.h"

namespace looptool {

// What LoopTool's observations are computed from: an Environment's state.
struct ObservationInputs {
  const LoopTree& tree;
  const std::vector<int>& history;  // last actions, loop_tool indices, oldest first
  const ActionSpace& action_space;
  const Limits& limits;
  const KernelBackend& kernels;
  uint64_t tenant;
};

template <typename Inputs>
struct ObservationEntry {
  ObservationSpace space;
  bool slow = false;  // computing it compiles (and may time) a kernel
  std::function<absl::StatusOr<Observation>(const Inputs&)> compute;
};

// An ordered table of entries (the order clients index them in).
template <typename Inputs>
class ObservationTable {
 public:
  explicit ObservationTable(std::vector<ObservationEntry<Inputs>> entries)
      : entries_(std::move(entries)) {}

  const std::vector<ObservationEntry<Inputs>>& entries() const { return entries_; }
  // The entry named `name`, or null.
  const ObservationEntry<Inputs>* Find(absl::string_view name) const {
    for (const auto& e : entries_) {
      if (e.space.name == name) return &e;
    }
    return nullptr;
  }
  std::vector<ObservationSpace> Spaces() const {
    std::vector<ObservationSpace> out;
    for (const auto& e : entries_) out.push_back(e.space);
    return out;
  }

 private:
  std::vector<ObservationEntry<Inputs>> entries_;
};

using ObservationRegistry = ObservationTable<ObservationInputs>;

// LoopTool's observations, shaped by `limits`: ir, loop_tree, loops_tensor, stride_tensor,
// 5_prev_actions_tensor, ir_graph_networkx, ir_tree_networkx, action_mask, flop_count (untimed),
// then flops, runtime, timing (how those two were timed, JSON), peak_gflops (timed),
// predicted_gflops, sketches, kernel_plan,
// kernel_abi (untimed), machine_code (untimed but slow: the kernel is compiled), roofline (the
// program's bound on this host, JSON; slow the first time), roofline_fraction (timed).
ObservationRegistry LoopToolObservations(const Limits& limits);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ENV_OBSERVATION_REGISTRY_H_
