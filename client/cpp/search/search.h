// Search: the LoopTune paper's search baselines and LoopTool's own searches over a StateSource
// (a server session: env_state_source.h), as a performance engineer uses them:
//   greedy1, greedy2      lookahead 1 or 2; move by the first action of the best path; stop when
//                         nothing improves (greedy.cc)
//   beam2dfs, beam4dfs    depth-first to the episode length, the `width` best children of each
//                         node (beam.cc)
//   beam2bfs, beam4bfs    level by level, the `width` best children of each frontier node
//                         (beam.cc)
//   random                random rollouts of the episode length (random_walks.cc)
//   evolution             a population of the best states, varied by continued rollouts, cuts,
//                         replaced actions and crossover (evolution.h)
//   policy                a trained policy's greedy episode, only its final state timed; a
//                         sketch_value policy's episode is one choice, the server's sketch whose
//                         resulting state it values most; a loop_set policy with a cost model
//                         ends its likeliest episodes (policy_candidates) untimed, with the
//                         states its greedy episodes passed through while its first wave's
//                         time lasts (the start, also with its outputs streamed and its pool
//                         windows folded, whatever the time), and
//                         times the ones its cost model ranks first (the start and its marked
//                         form right after the first, unless predicted far slower) while its
//                         budget lasts
//                         (policy_timed, policy_seconds), wave after wave of the next
//                         likeliest while time is left, keeping the fastest, the two
//                         fastest re-timed where the budget still holds a timing
//                         (policy_episode.cc, policy_rollouts.cc)
//   policy_guided         best-first over measured states, expanding each by the policy's
//                         top-ranked actions, the policy's own episode first; with a
//                         sketch_value policy, evolution from the sketches it values in its top
//                         half, in its order (policy_guided.cc); with a loop_set policy, its
//                         likeliest episodes (guided_candidates) untimed, with the first
//                         wave's shorter candidates as policy's (ranked as there), then timed
//                         in the order its cost model ranks them (the start and its marked form
//                         as policy's), in waves, while the time left
//                         holds the re-timings of the two fastest, then those; the fastest's
//                         neighbors (one tile factor changed, or two traded) in
//                         guided_neighbor_share of the time (policy_rollouts.cc,
//                         neighbor_paths.h)
// Children are evaluated on forks of the session, ranked by measured GFLOPS (the published code
// ranks beams by action name, a bug not copied here), and states already visited are never
// measured again (searcher.h). Every algorithm stops at a hard time limit.
#ifndef LOOPTOOL_CLIENT_CPP_SEARCH_SEARCH_H_
#define LOOPTOOL_CLIENT_CPP_SEARCH_SEARCH_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/cpp/env.h"
#include "client/cpp/policy.h"
#include "client/cpp/search/clock.h"
#include "client/cpp/search/state_source.h"

namespace looptool::client {

struct SearchProgress {
  double best_gflops = 0;
  double peak_gflops = 0;
  int64_t states_evaluated = 0;
  double elapsed_seconds = 0;
};

// A kernel a search measured (SearchOptions::on_measured): what tuning records keep of it.
struct MeasuredKernel {
  std::vector<std::string> actions;  // names, from the search's start state to the state
  std::string kernel;                // the state's ir without its cursor: the kernel's key
  std::string loop_tree;
  std::string plan_features;         // the plan_features observation (JSON by feature name)
  double gflops = 0;                 // as the search measured it
  double seconds = 0;                // into the search
  std::string timing;                // the timing observation (JSON): how gflops was timed
};

// Which search, and its parameters; ParseSearch() reads one from its name.
struct SearchSpec {
  enum class Kind { kGreedy, kBeamDfs, kBeamBfs, kRandom, kEvolution, kPolicy, kPolicyGuided };
  Kind kind = Kind::kEvolution;  // the default (bench/results/tune_bench.md compares them)
  int width = 0;      // beams: the children kept per node (0 for the others)
  int lookahead = 0;  // greedy: the depth of the paths compared at each move (0 for the others)

  // The name ParseSearch() reads this from ("beam4dfs").
  std::string Name() const;
};

// "greedy1", "greedy2", "beam2dfs", "beam4dfs", "beam2bfs", "beam4bfs", "random", "evolution",
// "policy" or "policy_guided"; INVALID_ARGUMENT, listing these, for any other name.
absl::StatusOr<SearchSpec> ParseSearch(absl::string_view name);

// The names ParseSearch() accepts, in the order above.
const std::vector<std::string>& SearchAlgorithms();

struct SearchOptions {
  SearchSpec search;                    // evolution
  double time_limit_seconds = 10;
  int depth = 10;                       // LoopTune's episode length
  int policy_depth = 16;                // a loop_set policy's episodes: actions at most
  uint64_t seed = 0;                    // random's and evolution's
  // policy and policy_guided: the policy (nullptr: Policy::Default(), the sketch_value one);
  // evolution: its seed (nullptr: Policy::LoopTuneDqn()). It must act in the session's action
  // space (a sketch_value policy: loop_nest) and read its loops_tensor (INVALID_ARGUMENT
  // otherwise).
  const Policy* policy = nullptr;
  // policy_guided: the policy's top actions expanded at each state.
  int policy_width = 3;
  // policy, with a loop_set policy that has a cost model: waves of its likeliest episodes, up
  // to this many each, untimed (the first wave in half its budget, policy_seconds), each
  // wave's timed in the order the cost model ranks them, and another wave while time is left
  // (1: the greedy episode only, timed). policy_guided's first wave ranks its shorter
  // candidates (the start, ...) as unlikely as its policy_candidates-th likeliest episode.
  int policy_candidates = 16;
  // policy, as above: the candidates timed in all waves, this many at most (the first whatever
  // the time, the others while policy_seconds lasts, less 5% kept for re-timing the two fastest
  // where a timing still fits, and less the fastest's marked timing where the program may take
  // a stream or fold mark); the fastest is the result.
  int policy_timed = 64;
  // policy, as above: its budget, from the start (the time limit where that is shorter): half
  // of it for the first wave's episodes, the rest for timing them and the next waves. Below 1
  // timed or 0 s: INVALID_ARGUMENT.
  double policy_seconds = 0.3;
  // policy_guided, with a loop_set policy: its likeliest episodes per wave, up to this many,
  // timed in the order its cost model (or the server's) ranks them while the time lasts, and
  // another wave while time is left.
  int guided_candidates = 256;
  // policy_guided, as above: the candidates timed in all waves, this many at most.
  int guided_timed = 1024;
  // policy_guided, as above: the share of the time limit its first wave's timings leave for
  // the fastest's neighbors (each tile_L<p>_<n> on its path with the nearest other factors of
  // that loop, and two of its tiles trading a factor: NeighborPaths), ranked by the cost model
  // and timed, and theirs while a new one is the fastest; then more waves where time is left.
  // 0: none. Outside 0..0.5 (the first wave's episodes are played in the first 40% of the
  // time): INVALID_ARGUMENT.
  double guided_neighbor_share = 0.15;
  // policy and policy_guided, with a loop_set policy that has a cost model: a wave's candidate
  // scored this much below the fastest kernel timed so far (its score: the cost model's log2
  // GFLOPS less its loss term; 2: predicted 4x slower) is passed over untimed, its time left
  // to later waves. Infinity: every candidate is timed while the time lasts.
  double pass_predicted_slower = 2.0;
  // evolution: the policy's greedy episode seeds the population before the random rollouts,
  // so that the search starts from a good schedule (evolution.h says how a policy of another
  // space or a sketch_value policy seeds). Skipped when nothing fits, and when two or more of
  // the server's sketches (below) were measured.
  bool policy_seed = true;
  // evolution: the server's sketches of the start state (the `sketches` observation:
  // backend/actions/sketches.h) are measured first, within half the time limit (two at least
  // while the time lasts), and join the
  // population; in spaces without their action names (loop_tool, loop_tune) there are none.
  bool sketches = true;
  // evolution: once the server's cost model predicts (predicted_gflops), each generation
  // proposes this many children, asks the model about each (untimed) and measures one of the
  // half it ranks best (at random); fewer than 2: every child measured. Only for time limits up
  // to `cost_model_up_to_seconds`, where it pays (bench/results/tune_bench_1s_cost_model.md
  // and tune_bench_10s_cost_model.md).
  int cost_model_candidates = 6;
  double cost_model_up_to_seconds = 2;
  // The best `retime_top` distinct kernels (and the start) are timed again at the end with the
  // server's full fixed budget (StateSource::Remeasure), in the last 5% of the time limit (at
  // most 0.5 s; a kernel in progress may run past it, the first re-timing happens even past the
  // limit, and so does the second round of the winners: up to `retime_top` re-timings more),
  // in turn, in rounds while that time lasts (at most 16); the fastest re-timed
  // one is the result and its fastest re-timed GFLOPS what is reported, so that the number is
  // not the luckiest of thousands of measurements, nor one budget's runs that the host's other
  // load slowed. 0: report the search's own measurements. Not for policy, which measures one
  // state only.
  int retime_top = 3;
  // Called after every evaluated state (from the calling thread).
  std::function<void(const SearchProgress&)> on_progress;
  // Tuning records (from the calling thread). When set, every state is also observed with
  // plan_features, and this is called once for each distinct kernel the search measures, the
  // start's included, as it is measured (states that differ only in their cursor are one kernel,
  // and so are states reached again by another path). Kernels that could not be measured
  // (failed to compile, verify or run; cut off by the time limit) are not reported.
  std::function<void(const MeasuredKernel&)> on_measured;
  // For each re-timing at the end (retime_top), with the kernel's MeasuredKernel::kernel key
  // and its fastest re-timed GFLOPS so far.
  std::function<void(const std::string& kernel, double gflops)> on_retimed;
};

struct SearchResult {
  std::vector<std::string> actions;  // from the start state to the best state
  std::string loop_tree;             // of the best state
  std::string ir;                    // of the best state (program and schedule)
  double gflops = 0;                 // re-timed when retimed
  // The FMA peak to divide `gflops` by: measured on the same core right after the chosen
  // kernel's re-timing when the server measured one there (peak_beside_retimed), else the
  // server's peak from its start (server_peak_gflops).
  double peak_gflops = 0;
  double server_peak_gflops = 0;
  bool peak_beside_retimed = false;
  double start_gflops = 0;           // 0 for policy, which times only the final state
  double search_gflops = 0;          // the best state's GFLOPS as the search measured it
  bool retimed = false;              // gflops and start_gflops come from re-timing
  int64_t states_evaluated = 0;      // distinct states whose kernel was measured
  double seconds = 0;
};

// Searches from `start`'s current state (left unchanged), reading the time from `clock`.
// INVALID_ARGUMENT for a beam width or greedy lookahead below 1, or a policy that does not fit
// the session; DEADLINE_EXCEEDED, saying so, when the start state's kernel is not measured
// within the time limit; the source's status when the start state cannot be measured.
absl::StatusOr<SearchResult> Search(const StateSource& start, const SearchOptions& options,
                                    const Clock& clock = RealClock());
// The same from a server session.
absl::StatusOr<SearchResult> Search(const Env& start, const SearchOptions& options);

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_SEARCH_SEARCH_H_
