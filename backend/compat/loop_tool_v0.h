// CompilerGym's own loop_tool-v0 environment (v0.2.5, compiler_gym/envs/loop_tool), served with
// upstream's semantics next to LoopTool's, so that `compiler_gym.make("loop_tool-v0",
// service="host:port")`, its examples and its tests run against LoopTool:
//
//   benchmarks    benchmark://loop_tool-cpu-v0/<N>, N in [1, 8*2^20): C[a] = A[a] + B[a]
//   action spaces simple: toggle_mode, up, down, toggle_thread
//                 split:  the same and split (declared upstream but a no-op there too)
//   observations  flops (GFLOP/s of the kernel), loop_tree (loop_tool's dump), action_state
//                 ([cursor, size, tail] of the cursor loop)
//
// The state is upstream's: one variable in a 3-deep nest of (size, tail) levels, initially
// [(N, 0), (1, 0), (1, 0)], thread flags [1, 0, 0], cursor 0, mode "size". In "select" mode
// up/down move the cursor inward/outward (wrapping); in "size" mode they grow/shrink the cursor
// loop by one and re-derive its parent so that the nest still covers N (never at cursor 0; tails
// only on outer loops). Every action "has an effect" (upstream never reports otherwise).
//
// What differs, exactly: kernels are LoopTool's JIT (the nest lowered to a LoopTree of
// C[a] = A[a] + B[a]) timed honestly in a kernel worker (warm-up, repeated runs, fastest run),
// where upstream times 1000 runs of loop_tool's CPU backend with wall-clock time; and a kernel
// worker is one core, so `toggle_thread` marks loops [thread] (and cpu_parallel, as upstream's
// CPU backend prints them) without running them on several threads. loop_tool-cuda-v0 is refused
// (no CUDA backend), as upstream refuses it where loop_tool has none.
#ifndef LOOPTOOL_BACKEND_COMPAT_LOOP_TOOL_V0_H_
#define LOOPTOOL_BACKEND_COMPAT_LOOP_TOOL_V0_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/env/engine.h"
#include "backend/env/episode.h"
#include "backend/env/kernel_timer.h"
#include "backend/env/observation.h"
#include "backend/env/observation_registry.h"
#include "backend/schedule/loop_tree.h"

namespace looptool::compat {

inline constexpr char kLoopToolV0Dataset[] = "loop_tool-cpu-v0";
inline constexpr int64_t kLoopToolV0MaxSize = 8 * 1024 * 1024 - 1;

// simple, then split (upstream's order).
const std::vector<NamedActionSpace>& LoopToolV0ActionSpaces();

class LoopToolV0Episode;
struct LoopToolV0Inputs {
  const LoopToolV0Episode& episode;
};
// Upstream's observations, in upstream's order: flops (timed), loop_tree, action_state (an
// int64 box of shape [3]: upstream declares [1] and sends [3]; we declare what we send).
const ObservationTable<LoopToolV0Inputs>& LoopToolV0Observations();

// N of a benchmark://loop_tool-cpu-v0/N URI; nullopt for any other URI. INVALID_ARGUMENT for
// an N out of range, UNIMPLEMENTED for loop_tool-cuda-v0.
absl::StatusOr<std::optional<int64_t>> LoopToolV0Size(absl::string_view uri);

class LoopToolV0Episode final : public Episode {
 public:
  // `space` indexes LoopToolV0ActionSpaces(). `timer` may be null (flops then fails).
  LoopToolV0Episode(int64_t size, int space, std::shared_ptr<KernelTimer> timer);

  std::unique_ptr<Episode> Clone() const override;
  const std::string& action_space_name() const override;
  const std::vector<std::string>& action_names() const override;
  absl::StatusOr<bool> Act(int64_t index) override;
  absl::StatusOr<Observation> Observe(absl::string_view name) const override;
  void set_tenant(uint64_t tenant) override { tenant_ = tenant; }
  uint64_t tenant() const override { return tenant_; }

  // loop_tool's LoopTree.dump() of the lowered nest, [thread] on threaded loops.
  std::string LoopTreeText() const;
  // The nest as a LoopTool loop tree of C[a] = A[a] + B[a], for the JIT.
  LoopTree Lower() const;
  // [cursor, size, tail] of the cursor loop.
  std::vector<int64_t> ActionState() const;
  // GFLOP/s of the lowered kernel, measured for this episode's tenant.
  absl::StatusOr<double> Gflops() const;

 private:
  struct Level {
    int64_t size = 1;
    int64_t tail = 0;
  };
  void Resize(int increment);

  int64_t size_;
  int space_;
  std::shared_ptr<const Program> program_;
  std::shared_ptr<KernelTimer> timer_;
  std::array<Level, 3> order_;
  std::array<bool, 3> thread_ = {true, false, false};
  int cursor_ = 0;
  bool select_mode_ = false;  // upstream's mode: "size" (false) or "select"
  uint64_t tenant_ = 0;
};

}  // namespace looptool::compat

#endif  // LOOPTOOL_BACKEND_COMPAT_LOOP_TOOL_V0_H_
