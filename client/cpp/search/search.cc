#include "client/cpp/search/search.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/cpp/search/algorithms.h"
#include "client/cpp/search/env_state_source.h"
#include "client/cpp/search/evolution.h"
#include "client/cpp/search/policy_fit.h"
#include "client/cpp/search/policy_seed.h"
#include "client/cpp/search/searcher.h"
#include "client/cpp/search/sketch_paths.h"
#include "client/cpp/search/sketch_ranking.h"
#include "util/status_macros.h"

namespace looptool::client {
namespace {

using internal::EvolutionOptions;
using internal::MappedPolicy;
using internal::Searcher;
using Kind = SearchSpec::Kind;

absl::Status CheckSpec(const SearchSpec& spec) {
  if (spec.kind == Kind::kGreedy && spec.lookahead < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a greedy search needs a lookahead of 1 or more, not ", spec.lookahead));
  }
  if ((spec.kind == Kind::kBeamDfs || spec.kind == Kind::kBeamBfs) && spec.width < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a beam search needs a width of 1 or more, not ", spec.width));
  }
  return absl::OkStatus();
}

// The policy the search uses: the given one, else evolution's seed is LoopTune's policy and the
// policy searches' the default.
const Policy& ChosenPolicy(const SearchOptions& options) {
  if (options.policy != nullptr) return *options.policy;
  return options.search.kind == Kind::kEvolution ? Policy::LoopTuneDqn() : Policy::Default();
}

bool IsSketchValue(const Policy& policy) { return policy.kind() == Policy::Kind::kSketchValue; }

// When ranking sketches (forks and untimed steps) must end: within a quarter of the limit, and
// within the search's own time.
absl::Time RankingDeadline(const Searcher& s, const SearchOptions& options) {
  return std::min(s.deadline(),
                  s.clock().Now() + absl::Seconds(options.time_limit_seconds / 4));
}

// The cost model's share of evolution: for short time limits only.
std::optional<EvolutionOptions::CostModel> CostModelFor(const SearchOptions& options) {
  if (options.time_limit_seconds > options.cost_model_up_to_seconds) return std::nullopt;
  return EvolutionOptions::CostModel{options.cost_model_candidates};
}

// evolution's options: the server's sketches (none in spaces without their names, none from a
// server without them or that does not answer within a quarter of the limit), and the policy's
// seed: its greedy episode mapped into the session's space, or (a policy of another space, or a
// sketch_value policy) a path computed when fewer than two sketches measure.
EvolutionOptions EvolutionFor(const Searcher& s, const SearchOptions& options,
                              const Policy& policy, std::optional<MappedPolicy> seed_policy) {
  EvolutionOptions e;
  e.depth = options.depth;
  e.seed = options.seed;
  if (options.sketches) {
    const absl::Time probe_deadline =
        s.clock().Now() + absl::Seconds(options.time_limit_seconds / 4);
    e.sketches = internal::ObserveSketches(s.start(), probe_deadline)
                     .value_or(std::vector<std::vector<int>>{});
  }
  if (seed_policy.has_value() && !internal::CheckFeatures(policy, s.root().features).ok()) {
    seed_policy.reset();  // another --max_loops: the policy cannot read this server's
  }
  e.policy = std::move(seed_policy);
  if (!e.policy.has_value() && options.policy_seed && options.depth > 0) {
    e.unsketched_seed = [&s, &options, &policy]() -> std::vector<int> {
      if (!IsSketchValue(policy)) {
        return internal::TranslatedPolicySeed(s.start(), options, policy, s.clock());
      }
      absl::StatusOr<std::vector<internal::ValuedSketch>> ranked =
          internal::RankSketches(s.start(), policy, RankingDeadline(s, options));
      if (!ranked.ok() || ranked->empty()) return {};
      return ranked->front().path;
    };
  }
  e.cost_model = CostModelFor(options);
  return e;
}

// policy_guided with a sketch_value policy: evolution from the sketches the policy values in its
// top half (at least two), measured in its order; the rest are never timed. Sketches not ranked
// in time: evolution from the start alone.
absl::StatusOr<std::vector<std::vector<int>>> GuidedSketches(const Searcher& s,
                                                             const SearchOptions& options,
                                                             const Policy& policy) {
  absl::StatusOr<std::vector<internal::ValuedSketch>> ranked =
      internal::RankSketches(s.start(), policy, RankingDeadline(s, options));
  if (absl::IsDeadlineExceeded(ranked.status())) return std::vector<std::vector<int>>{};
  if (!ranked.ok()) return ranked.status();
  const size_t keep = std::min(ranked->size(), std::max<size_t>(2, (ranked->size() + 1) / 2));
  std::vector<std::vector<int>> paths;
  for (size_t i = 0; i < keep; ++i) paths.push_back((*ranked)[i].path);
  return paths;
}

absl::Status RunAlgorithm(Searcher& s, const SearchOptions& options, const Policy& policy,
                          std::optional<MappedPolicy> seed_policy,
                          const std::vector<std::vector<int>>& guided_sketches) {
  const SearchSpec& spec = options.search;
  switch (spec.kind) {
    case Kind::kGreedy:
      return internal::Greedy(s, spec.lookahead, options.depth);
    case Kind::kBeamDfs:
      return internal::BeamDfs(s, spec.width, options.depth);
    case Kind::kBeamBfs:
      return internal::BeamBfs(s, spec.width, options.depth);
    case Kind::kRandom:
      return internal::RandomWalks(s, options.depth, options.seed);
    case Kind::kEvolution:
      return internal::Evolution(s, EvolutionFor(s, options, policy, std::move(seed_policy)));
    case Kind::kPolicyGuided:
      if (IsSketchValue(policy)) {
        EvolutionOptions e;
        e.depth = options.depth;
        e.seed = options.seed;
        e.sketches = guided_sketches;
        e.cost_model = CostModelFor(options);
        return internal::Evolution(s, e);
      }
      return internal::PolicyGuided(s, policy, options.policy_width, options.depth);
    case Kind::kPolicy:
      break;  // an episode, not a search (PolicyEpisode)
  }
  return absl::InternalError("not a search over states");
}

// The search's best state (re-timed with the best few when asked) as a result.
SearchResult Finish(Searcher& s, const SearchOptions& options) {
  SearchResult r;
  internal::Node chosen = s.best();
  r.gflops = chosen.gflops;
  r.search_gflops = chosen.gflops;
  r.start_gflops = s.start_gflops();
  if (options.retime_top > 0) {
    if (std::optional<Searcher::Retimed> retimed = s.RetimeBest(options.retime_top)) {
      chosen = retimed->node;
      r.gflops = retimed->gflops;
      r.search_gflops = chosen.gflops;
      if (retimed->start_gflops > 0) r.start_gflops = retimed->start_gflops;
      r.retimed = true;
      if (retimed->peak_gflops > 0) {
        r.peak_gflops = retimed->peak_gflops;
        r.peak_beside_retimed = true;
      }
    }
  }
  for (int i : chosen.path) r.actions.push_back(s.start().action_names()[i]);
  r.loop_tree = chosen.loop_tree;
  r.ir = chosen.ir;
  r.server_peak_gflops = s.peak();
  if (!r.peak_beside_retimed) r.peak_gflops = s.peak();
  r.states_evaluated = s.evaluated();
  r.seconds = s.Elapsed();
  return r;
}

}  // namespace

absl::StatusOr<SearchResult> Search(const StateSource& start, const SearchOptions& options,
                                    const Clock& clock) {
  const SearchSpec& spec = options.search;
  RETURN_IF_ERROR(CheckSpec(spec));
  const Policy& policy = ChosenPolicy(options);
  if (spec.kind == Kind::kPolicy) return internal::PolicyEpisode(start, options, policy, clock);
  if (spec.kind == Kind::kPolicyGuided && policy.kind() == Policy::Kind::kLoopSet) {
    return internal::PolicyRollouts(start, options, policy, clock);
  }
  // evolution's seed: the policy, its actions mapped by name into the session's space.
  std::optional<MappedPolicy> seed_policy;
  if (spec.kind == Kind::kEvolution && options.policy_seed && options.depth > 0 &&
      !IsSketchValue(policy)) {
    seed_policy = internal::MapPolicy(policy, start);
  }
  // The clock starts here: ranking sketches below counts against the limit.
  const bool with_features =
      (spec.kind == Kind::kPolicyGuided && !IsSketchValue(policy)) || seed_policy.has_value();
  Searcher s(start, options, clock, with_features ? policy.observation_space() : "");
  std::vector<std::vector<int>> guided_sketches;
  if (spec.kind == Kind::kPolicyGuided) {
    RETURN_IF_ERROR(internal::CheckPolicyFits(policy, start));
    if (IsSketchValue(policy)) {
      ASSIGN_OR_RETURN(guided_sketches, GuidedSketches(s, options, policy));
    }
  }
  absl::Status status = s.Init();
  if (absl::IsDeadlineExceeded(status)) {
    // The start's kernel is compiled, verified and timed first; a limit shorter than that
    // leaves no search (the server finishes the measurement and caches it for the next call).
    return absl::DeadlineExceededError(absl::StrCat(
        "the start state's kernel was not timed within the ", options.time_limit_seconds,
        " s time limit (its first measurement takes longer); give a longer time limit"));
  }
  RETURN_IF_ERROR(status);
  status = RunAlgorithm(s, options, policy, std::move(seed_policy), guided_sketches);
  // A call cut off by the time limit ends the search; the best so far stands.
  if (!status.ok() && !s.Expired()) return status;
  return Finish(s, options);
}

absl::StatusOr<SearchResult> Search(const Env& start, const SearchOptions& options) {
  return Search(BorrowedEnvStateSource(start), options, RealClock());
}

}  // namespace looptool::client
