// The search algorithms over a Searcher, one file each (search.h says what each does). Each
// returns when its time is up or it has nothing left to try; the best state is the Searcher's.
// An error is a call that failed before the time limit (after it, the best so far stands).
#ifndef LOOPTOOL_CLIENT_CPP_SEARCH_ALGORITHMS_H_
#define LOOPTOOL_CLIENT_CPP_SEARCH_ALGORITHMS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cpp/policy.h"
#include "client/cpp/search/clock.h"
#include "client/cpp/search/search.h"
#include "client/cpp/search/searcher.h"
#include "client/cpp/search/state_source.h"

namespace looptool::client::internal {

// greedy.cc: the best node within `lookahead` actions; move by its first action; stop when no
// node beats the current one or after `depth` moves.
absl::Status Greedy(Searcher& s, int lookahead, int depth);

// beam.cc: depth-first (Dfs) or level by level (Bfs) to `depth`, the `width` best new children
// of each node.
absl::Status BeamDfs(Searcher& s, int width, int depth);
absl::Status BeamBfs(Searcher& s, int width, int depth);

// random_walks.cc: random rollouts of `depth` legal actions from the start, until the time is up.
absl::Status RandomWalks(Searcher& s, int depth, uint64_t seed);

// policy_guided.cc: the policy's own episode first (every state on it measured), then
// best-first over the measured states: the best one not yet expanded gets children by the
// policy's `width` top-ranked actions. Paths stay within twice the episode length.
absl::Status PolicyGuided(Searcher& s, const Policy& policy, int width, int depth);

// policy_episode.cc: the policy's greedy episode of options.depth actions on a fork of `start`,
// with no kernel timed but the final state's. A sketch_value policy's episode is one choice: the
// sketch whose state it values most (RankSketches); none when the server has no sketch for the
// nest (the start stands).
absl::StatusOr<SearchResult> PolicyEpisode(const StateSource& start, const SearchOptions& options,
                                           const Policy& policy, const Clock& clock);

// policy_episode.cc: an episode's result: `source`'s current state timed (ir, loop tree, GFLOPS,
// peak), with `out`'s actions; reported to SearchOptions::on_measured like a search's states.
// `work_seconds`, where given, receives what measuring the kernel took the server's worker (the
// `timing` observation's work_seconds: without the program's reference run or any wait for a
// worker), or 0 where the server does not say.
absl::StatusOr<SearchResult> TimeFinalState(StateSource& source, SearchResult out,
                                            const SearchOptions& options, const Clock& clock,
                                            absl::Time t0, double* work_seconds = nullptr);

// policy_rollouts.cc: where one of a loop_set policy's episodes ended.
struct PolicyEpisodeEnd {
  std::unique_ptr<StateSource> source;  // in the final state
  std::vector<int> path;                // from the start
  std::vector<float> features;          // the final state's loop_features
  double loss = 0;   // log-probability below the greedy episode's (nats; 0: the greedy one)
  double score = 0;  // RankEpisodes' (higher: predicted faster)
  bool start = false;  // the start, or the start with its marks (a first wave's ShortCandidates)
  bool shorter = false;  // one of a first wave's ShortCandidates (the start, prefixes, ...)
};

// The greedy episode, then (while `deadline` on `clock` and `max_episodes` allow) the episodes
// that leave it, or each other, for one of the next three choices at a step and go
// on greedily, the most likely first, each ending in a state no other ended in; none timed.
// Like PolicyEpisode's: one action at least, at most `depth`, stopping where a state comes back.
// The greedy episode's errors are returned; another's (out of time, refused) drop it. A policy
// with members (Policy::members) plays each network's so, in turn, each with an even share of
// `max_episodes` (the first ones one more where they do not divide) and of the time left, the
// members' greedy episodes also whatever the time; an episode ending where an earlier one
// (another network's included) ended is left out, and so are a member's when its greedy episode
// fails. Each episode's loss is against its own network's greedy episode.
absl::StatusOr<std::vector<PolicyEpisodeEnd>> LikelyEpisodes(const StateSource& start,
                                                             const Policy& policy, int depth,
                                                             int max_episodes,
                                                             absl::Time deadline,
                                                             const Clock& clock);

// Sorts `episodes` by their score, best first: the policy's cost model on their plan_features
// less its loss_weight() times their loss where it has one, else the server's predicted_gflops
// where it predicts, else likelihood.
absl::Status RankEpisodes(const Policy& policy, std::vector<PolicyEpisodeEnd>& episodes);

// `episodes` (ranked: RankEpisodes) timed in order, `max_timed` at most: the first whatever the
// time, each other while `deadline` less a reserve (5% of the time from `t0`) lasts. Then the
// two fastest are re-timed (StateSource::Remeasure), the faster first, each while the time to
// `deadline` holds its re-timing: a call as long as its own timing call, or as the median timing
// call, or 15 ms (the server's fixed budget and overhead), where longer (the first also 40 ms
// for the FMA peak a server measures beside it): a kernel's GFLOPS is the faster of its timing
// and its re-timing (retimed, with the peak measured beside it; on_retimed hears it). The
// fastest is the result (states_evaluated: how many were timed; seconds since `t0`). A kernel
// the server cannot measure (over its limits) is passed over; when none is measured, the first
// one's error (FAILED_PRECONDITION when `episodes` is empty or `max_timed` below 1). Every
// session of `episodes` but the two fastest's ends here, together (EndSources).
absl::StatusOr<SearchResult> TimeRankedEpisodes(const StateSource& start,
                                                std::vector<PolicyEpisodeEnd>& episodes,
                                                int max_timed, absl::Time deadline,
                                                const SearchOptions& options, const Clock& clock,
                                                absl::Time t0);

// Waves of a loop_set policy's episodes, timed as TimeRankedEpisodes times them: the first wave
// LikelyEpisodes' (at most `wave_size`, by `first_wave_until`) and shorter candidates beside them
// (the start, the start with every stream and fold mark its statements take, and, while
// `first_wave_until` has not come, the other states its greedy episodes, the policy's and each
// member's, passed through, the shorter first; as unlikely as the wave's
// options.policy_candidates-th likeliest episode, none ending where another candidate ends), ranked
// by RankEpisodes and timed in order (the first whatever the time: with a cost model, the
// best-ranked episode where a shorter candidate ranks above every episode; then, with a cost model,
// the start and its marked form; with a cost model, Policy::cost_model, every wave's candidates
// scored 2 below the score of the fastest kernel timed so far, predicted 4x slower than it, are
// passed over untimed, their time left to later waves); then, while fewer than `max_timed` are
// timed in all, episodes are left, and the time to where a later wave's timings stop holds two
// median timing calls, the next wave: the next likeliest episodes (none ending where an earlier one
// ended) in half of that time, ranked and timed likewise. A later wave's timings stop at the
// reserve, or earlier where the time left would not hold the re-timings of the two fastest so far
// (as above) and the 40 ms peak; with `keep_retimings`, every wave's timings (the first wave's too,
// but its first timing) stop so, the two fastest as they stand before each timing (a short budget's
// large kernels want their candidates timed rather than their re-timings: without it, the first
// wave's timings stop at the reserve, or where the time left would not hold a timing and the
// fastest's marked one where it may take a mark). With a `neighbor_share` above 0, the first wave's
// timings stop that share of the time from `t0` to `deadline` early at the latest, and after each
// wave the fastest's neighbors (NeighborPaths: each tile_L<p>_<n> on its path with the two nearest
// other factors of that loop pointer on each side, and two tiles trading a factor, their product
// kept; stepped in a third of the time to where their timings stop, their calls ending there, none
// ending where a candidate ended) are ranked and timed like a later wave, and so are a new
// fastest's, each path's once; a wave's untimed episodes end their sessions before (they are not
// timed later). Only the fastest two keep their sessions from one wave to the next. Then the two
// fastest of all are re-timed where they fit beside the fastest's marked timing, that one
// (EpisodeTimer::TryMarked) where it still fits, and the fastest is the result (states_evaluated:
// how many were timed in all waves).
absl::StatusOr<SearchResult> TimeEpisodeWaves(const StateSource& start, const Policy& policy,
                                              int depth, int wave_size, int max_timed,
                                              absl::Time first_wave_until, bool keep_retimings,
                                              double neighbor_share, absl::Time deadline,
                                              const SearchOptions& options, const Clock& clock,
                                              absl::Time t0);

// policy_guided for a loop_set policy: TimeEpisodeWaves of options.guided_candidates episodes each
// (the first wave with its shorter candidates), the first wave in 40% of the time limit,
// options.guided_timed timed at most, the re-timings kept whole, options.guided_neighbor_share
// of the time for the fastest's neighbors (INVALID_ARGUMENT outside 0..0.5).
absl::StatusOr<SearchResult> PolicyRollouts(const StateSource& start, const SearchOptions& options,
                                            const Policy& policy, const Clock& clock);

}  // namespace looptool::client::internal

#endif  // LOOPTOOL_CLIENT_CPP_SEARCH_ALGORITHMS_H_
