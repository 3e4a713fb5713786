// Evolution: a population of the best states found, each known by its path (its genome).
//
// Seeding, in order: the server's sketches (LoopNest-style register blocks), each measured,
// within half the search's time (two at least, while the time lasts: a start that took half of
// it leaves the sketches the best use of the rest); when fewer than two of them measure, the
// mapped policy's greedy
// episode from the start (every state on it measured; the best joins) and the on-demand seed
// path (measured); then random rollouts from the start fill the population (16, or 4 once any
// state joined it, a single sketch included; none after two or more sketches, whose variations
// fill it instead).
//
// Then, until the time limit, a parent drawn by tournament (best of 3) is varied and the child's
// state measured: extended by 1-3 random legal actions (a rollout continued from a good state),
// cut back by 1-3 actions and extended again, one action of its path replaced by a random one
// legal in its state, or crossed with another member (a prefix of one, the suffix of the other).
// Once the server's cost model predicts, each generation proposes `candidates` such children
// instead (extensions unmeasured), asks the model about each and measures one of the better
// half. Paths longer than twice the episode length are cut. A child enters the population when
// it beats the worst member, which leaves; every state measured on the way counts for the best.
#ifndef LOOPTOOL_CLIENT_CPP_SEARCH_EVOLUTION_H_
#define LOOPTOOL_CLIENT_CPP_SEARCH_EVOLUTION_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "client/cpp/search/policy_fit.h"
#include "client/cpp/search/searcher.h"

namespace looptool::client::internal {

struct EvolutionOptions {
  int depth = 10;     // the episode length; paths stay within twice it
  uint64_t seed = 0;  // of the random choices
  // Measured first (paths of the session's actions).
  std::vector<std::vector<int>> sketches;
  // When fewer than two sketches measure: a policy of the session's space (or mapped into it),
  // whose greedy episode seeds...
  std::optional<MappedPolicy> policy;
  // ...and a path computed only then (a policy's episode translated from another space, a
  // sketch_value policy's top sketch); empty: none.
  std::function<std::vector<int>()> unsketched_seed;
  // The server's cost model ranks `candidates` proposed children per measured one, once it
  // predicts. nullopt: every child measured.
  struct CostModel {
    int candidates = 6;
  };
  std::optional<CostModel> cost_model;
};

absl::Status Evolution(Searcher& s, const EvolutionOptions& options);

}  // namespace looptool::client::internal

#endif  // LOOPTOOL_CLIENT_CPP_SEARCH_EVOLUTION_H_
