// Search: the LoopTune paper's search baselines over a server session, as a performance engineer
// uses them: greedy1/greedy2 (lookahead 1 or 2, move by the first action of the best path, stop
// when nothing improves), beam2dfs/beam4dfs (depth-first to depth 10, the `width` best children
// of each node), beam2bfs/beam4bfs (level by level, the `width` best children of each frontier
// node), random (random rollouts of depth 10), and evolution (a population of the best states,
// varied by continued rollouts, cuts, replaced actions and crossover; see search.cc), policy (a
// trained policy's greedy episode, timing only its final state; a sketch_value policy's episode
// is one choice, the server's sketch whose resulting state it values most) and policy_guided
// (best-first over measured states, expanding each by the policy's top-ranked actions, the
// policy's own episode first; with a sketch_value policy, evolution from the sketches it values
// in its top half, in its order). Children are evaluated on forks of the
// session (ForkSession), ranked by measured GFLOPS (the published code ranks beams by action
// name, a bug not copied here), and states already visited are never expanded again. Every
// algorithm stops at a hard time limit.
#ifndef LOOPTOOL_CLIENT_CPP_SEARCH_H_
#define LOOPTOOL_CLIENT_CPP_SEARCH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/cpp/env.h"
#include "client/cpp/policy.h"

namespace looptool::client {

struct SearchProgress {
  double best_gflops = 0;
  double peak_gflops = 0;
  int64_t states_evaluated = 0;
  double elapsed_seconds = 0;
};

// Which search, and its parameters; ParseSearch() reads one from its name.
struct SearchSpec {
  enum class Kind { kGreedy, kBeamDfs, kBeamBfs, kRandom, kEvolution, kPolicy, kPolicyGuided };
  Kind kind = Kind::kEvolution;  // the best we have (bench/results/tune_bench.md)
  int width = 0;      // beams: the children kept per node (0 for the others)
  int lookahead = 0;  // greedy: the depth of the paths compared at each move (0 for the others)

  // The name ParseSearch() reads this from ("beam4dfs").
  std::string Name() const;
};

// "greedy1", "greedy2", "beam2dfs", "beam4dfs", "beam2bfs", "beam4bfs", "random", "evolution",
// "policy" or "policy_guided";
// INVALID_ARGUMENT, listing these, for any other name.
absl::StatusOr<SearchSpec> ParseSearch(absl::string_view name);

// The names ParseSearch() accepts, in the order above.
const std::vector<std::string>& SearchAlgorithms();

struct SearchOptions {
  SearchSpec search;                    // evolution
  double time_limit_seconds = 10;
  int depth = 10;                       // LoopTune's episode length
  uint64_t seed = 0;                    // random's rollouts
  // policy and policy_guided: the policy (nullptr: Policy::Default(), the sketch_value one);
  // evolution: its seed (nullptr: Policy::LoopTuneDqn()). It must act in the session's action
  // space (a sketch_value policy: loop_nest) and read its loops_tensor (INVALID_ARGUMENT
  // otherwise).
  const Policy* policy = nullptr;
  // policy_guided: the policy's top actions expanded at each state.
  int policy_width = 3;
  // evolution: the policy's greedy episode (its actions mapped by name into the session's
  // space) seeds the population before the random rollouts, so that the search starts from a
  // good schedule. In loop_nest, whose names a cursor policy lacks, the episode runs on a
  // session of the policy's own space and is translated to level pointers (within the time
  // limit; only from the benchmark's initial state); a sketch_value policy's seed is the sketch
  // it values most. Skipped when nothing fits, and when two or more of the server's sketches
  // (below) were measured.
  bool policy_seed = true;
  // evolution: the server's sketches of the start state (LoopNest-style register blocks and
  // loop orders, the `sketches` observation: backend/actions/sketches.h) are measured first,
  // within a third of the time limit, and join the population; in spaces without their action
  // names (loop_tool, loop_tune) there are none.
  bool sketches = true;
  // evolution: once the server's cost model predicts (predicted_gflops), each generation
  // proposes this many children, asks the model about each (untimed) and measures one of the
  // half it ranks best (at random). 0 or 1: every child measured. Only for time limits up to
  // `cost_model_up_to_seconds`: measured on this 2-vCPU EPYC (bench/results), the model gains
  // at 1 s (0.89x/0.71x oneDNN test/off-grid against 0.85x/0.71x) and loses at 10 s
  // (1.00x/0.97x against 0.99x/1.05x), where measuring more states pays better.
  int cost_model_candidates = 6;
  double cost_model_up_to_seconds = 2;
  // The best `retime_top` distinct kernels (and the start) are timed again at the end with the
  // server's full fixed budget (Env::Remeasure), in the last 5% of the time limit (at most
  // 0.1 s; a kernel in progress may run past it); the fastest
  // re-timed one is the result and its re-timed GFLOPS what is reported, so that the number is
  // not the luckiest of thousands of measurements. 0: report the search's own measurements.
  // Not for policy, which measures one state only.
  int retime_top = 3;
  // Called after every evaluated state (from the calling thread).
  std::function<void(const SearchProgress&)> on_progress;
};

struct SearchResult {
  std::vector<std::string> actions;  // from the start state to the best state
  std::string loop_tree;             // of the best state
  std::string ir;                    // of the best state (program and schedule)
  double gflops = 0, peak_gflops = 0;  // gflops: re-timed when retimed
  double start_gflops = 0;           // 0 for policy, which times only the final state
  double search_gflops = 0;          // the best state's GFLOPS as the search measured it
  bool retimed = false;              // gflops and start_gflops come from re-timing
  int64_t states_evaluated = 0;      // distinct states whose kernel was measured
  double seconds = 0;
};

// A cursor action sequence (loop_tool's or loop_tune's names, from a state whose cursor is on the
// first loop) as loop_nest's level-pointer actions with the same effect on the schedule: the
// cursor's walk position c is tracked, split_N at c becomes tile_L<c>_N, swap_down
// interchange_L<c>_L<c+1>, swap_up interchange_L<c>_L<c-1>, unroll/vectorize unroll_L<c> /
// vectorize_L<c>; up and down only move c. Stops at the first action it cannot translate (merge,
// whose cursor lands where the names do not tell; a move above the first loop).
std::vector<std::string> CursorToLevelActions(const std::vector<std::string>& cursor_actions);

// Searches from `start`'s current state (left unchanged). INVALID_ARGUMENT for a beam width or
// greedy lookahead below 1; the server's status when the start state itself cannot be measured.
absl::StatusOr<SearchResult> Search(const Env& start, const SearchOptions& options);

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_SEARCH_H_
