// Engine: one kind of episode a server runs: which benchmarks it serves, its action and
// observation spaces, and how it starts an episode. The service lists every engine's spaces
// and hands each new session to the engine that claims its benchmark; it knows nothing else of
// them. LoopTool's loop trees (loop_tree_engine.h) and CompilerGym's upstream loop_tool-v0
// (backend/compat/loop_tool_v0_engine.h) are the two.
#ifndef LOOPTOOL_BACKEND_ENV_ENGINE_H_
#define LOOPTOOL_BACKEND_ENV_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/env/episode.h"
#include "backend/env/observation.h"
#include "backend/ir/program.h"

namespace looptool {

struct NamedActionSpace {
  std::string name;
  std::vector<std::string> actions;  // in index order
};

struct EngineObservation {
  ObservationSpace space;
  // Computing it compiles (and may time) a kernel: the service runs requests for it where they
  // may wait, never on gRPC's threads.
  bool slow = false;
};

// How strongly an engine claims a benchmark URI. An engine that claims kOwn serves it; where
// none does, the one that claims kFallback (an engine for any program) does.
enum class Claim { kNone, kFallback, kOwn };

struct EpisodeRequest {
  std::string uri;
  int action_space = 0;  // an index into the engine's ActionSpaces()
  // The program of a benchmark URI as the caller resolves it (the service: the datasets and
  // the calling client's added benchmarks). Engines of generated benchmarks need not call it.
  std::function<absl::StatusOr<std::shared_ptr<const Program>>(const std::string& uri)>
      load_program;
  // Whom the episode's kernels are measured for (Environment::set_tenant); the engine may hint
  // its timer on the tenant's behalf (KernelTimer::PrepareFor).
  uint64_t tenant = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;

  // "LoopTool", "CompilerGym loop_tool-v0": for messages.
  virtual const std::string& name() const = 0;
  // How the engine claims `uri`. An error for a URI of the engine's own that it cannot serve (a
  // size out of range, a device it lacks): callers report it as is.
  virtual absl::StatusOr<Claim> Claims(absl::string_view uri) const = 0;
  // Its action spaces; the first is a benchmark's default.
  virtual const std::vector<NamedActionSpace>& ActionSpaces() const = 0;
  // Its observation spaces, in its order.
  virtual const std::vector<EngineObservation>& Observations() const = 0;
  // A new episode on `request.uri`, which the engine claims, in `request.action_space`, which is
  // in range. The engine's errors for a benchmark it cannot start (NOT_FOUND, INVALID_ARGUMENT
  // for one beyond its limits).
  virtual absl::StatusOr<std::unique_ptr<Episode>> NewEpisode(
      const EpisodeRequest& request) const = 0;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_ENV_ENGINE_H_
