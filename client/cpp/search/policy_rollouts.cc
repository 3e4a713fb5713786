#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <queue>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cpp/search/algorithms.h"
#include "client/cpp/search/policy_fit.h"
#include "client/cpp/search/searcher.h"
#include "util/status_macros.h"

namespace looptool::client::internal {
namespace {

constexpr int kStop = -1;
// TimeRankedEpisodes: the share of its time kept from new timings for re-timing the fastest,
// and how many of them it re-times.
constexpr double kRetimeReserve = 0.05;
constexpr int kRetimedFinalists = 2;
// Alternatives kept per step of an episode: the choices after the one taken, most likely first.
constexpr int kAlternativesPerStep = 3;

// Where an episode could have gone another way: after `prefix`, `action` (kStop: stop there)
// instead of the choice taken, `loss` less likely (in nats) than the greedy episode.
struct Branch {
  double loss = 0;
  std::vector<int> prefix;
  int action = kStop;
  bool operator<(const Branch& other) const { return loss > other.loss; }  // a min-heap
};

// The allowed choices at one state (actions the mask allows, and stop unless `must_act`), most
// likely first, with their log-probabilities under the softmax of the policy's scores.
std::vector<std::pair<int, double>> Choices(const Policy& policy, const std::vector<float>& features,
                                            const std::vector<bool>& mask, bool must_act) {
  const std::vector<float> scores = policy.Scores(features);
  std::vector<std::pair<int, double>> out;
  for (int a : RankActions(scores, mask)) out.emplace_back(a, scores[a]);
  const double stop = scores.back();  // a loop_set policy's last score is stop's
  if (!must_act) {
    const auto at = std::find_if(out.begin(), out.end(),
                                 [&](const auto& c) { return c.second < stop; });
    out.insert(at, {kStop, stop});  // ties go to the action, as Policy::Act does
  }
  if (out.empty()) return out;
  const double top = out.front().second;
  double sum = 0;
  for (const auto& c : out) sum += std::exp(c.second - top);
  const double log_z = top + std::log(sum);
  for (auto& c : out) c.second -= log_z;
  return out;
}

// One network's episodes (LikelyEpisodes), none ending in a state of `finals` (the
// loop_features of the states other episodes ended in), which gains theirs.
absl::StatusOr<std::vector<PolicyEpisodeEnd>> NetworkEpisodes(
    const StateSource& start, const Policy& policy, int depth, int max_episodes,
    absl::Time deadline, const Clock& clock, std::set<std::vector<float>>& finals) {
  const std::string& observation = policy.observation_space();
  const std::vector<std::string> observe = {observation, "action_mask"};
  std::vector<PolicyEpisodeEnd> out;
  std::priority_queue<Branch> branches;
  // Goes on greedily from `r` (the state `end.path` reached), keeping the alternatives.
  const auto go_on = [&](PolicyEpisodeEnd& end, StepResult r) -> absl::Status {
    std::set<std::vector<float>> visited;
    while (true) {
      const Value* features = r.Find(observation);
      if (features == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("the server does not send ", observation, ", which the policy reads"));
      }
      RETURN_IF_ERROR(CheckFeatures(policy, features->floats));
      end.features = features->floats;
      // Back in a state it has been in: the greedy episode would go round; it stops.
      if (static_cast<int>(end.path.size()) >= depth || !visited.insert(end.features).second) {
        return absl::OkStatus();
      }
      const std::vector<std::pair<int, double>> choices =
          Choices(policy, end.features, r.Find("action_mask")->bools, end.path.empty());
      if (choices.empty()) return absl::OkStatus();
      for (size_t i = 1; i < choices.size() && i <= kAlternativesPerStep; ++i) {
        branches.push(
            Branch{end.loss + choices[0].second - choices[i].second, end.path, choices[i].first});
      }
      if (choices[0].first == kStop) return absl::OkStatus();
      ASSIGN_OR_RETURN(r, end.source->Step({choices[0].first}, observe));
      end.path.push_back(choices[0].first);
    }
  };
  // The greedy episode: its errors are the search's.
  {
    PolicyEpisodeEnd greedy;
    ASSIGN_OR_RETURN(greedy.source, start.Fork());
    greedy.source->set_deadline(absl::InfiniteFuture());  // it is always finished
    ASSIGN_OR_RETURN(StepResult r, greedy.source->Step({}, observe));
    RETURN_IF_ERROR(go_on(greedy, std::move(r)));
    if (finals.insert(greedy.features).second) out.push_back(std::move(greedy));
  }
  // The others, the most likely first, while there is time: an error (out of time, a step the
  // server refused) ends that one only.
  while (static_cast<int>(out.size()) < max_episodes && !branches.empty() &&
         clock.Now() < deadline) {
    Branch b = branches.top();
    branches.pop();
    PolicyEpisodeEnd end;
    end.loss = b.loss;
    end.path = b.prefix;
    if (b.action != kStop) end.path.push_back(b.action);
    absl::StatusOr<std::unique_ptr<StateSource>> fork = start.Fork();
    if (!fork.ok()) break;
    end.source = *std::move(fork);
    end.source->set_deadline(deadline);
    absl::StatusOr<StepResult> r = end.source->Step(end.path, observe);
    if (!r.ok()) continue;
    if (b.action == kStop) {
      const Value* features = r->Find(observation);
      if (features == nullptr) continue;
      end.features = features->floats;
    } else if (!go_on(end, *std::move(r)).ok()) {
      continue;
    }
    if (!finals.insert(end.features).second) continue;  // a state another episode ended in
    out.push_back(std::move(end));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<PolicyEpisodeEnd>> LikelyEpisodes(const StateSource& start,
                                                             const Policy& policy, int depth,
                                                             int max_episodes,
                                                             absl::Time deadline,
                                                             const Clock& clock) {
  std::vector<const Policy*> networks = {&policy};
  for (const Policy& member : policy.members()) networks.push_back(&member);
  const int n = static_cast<int>(networks.size());
  std::vector<PolicyEpisodeEnd> out;
  std::set<std::vector<float>> finals;
  for (int i = 0; i < n; ++i) {
    // An even share of the episodes (the first networks one more where they do not divide) and
    // of the time left.
    const int share = max_episodes / n + (i < max_episodes % n ? 1 : 0);
    if (share == 0) continue;
    const absl::Time now = clock.Now();
    const absl::Time until = deadline <= now ? deadline : now + (deadline - now) / (n - i);
    absl::StatusOr<std::vector<PolicyEpisodeEnd>> got =
        NetworkEpisodes(start, *networks[i], depth, share, until, clock, finals);
    if (!got.ok()) {
      if (i == 0) return got.status();  // the policy's own greedy episode failed
      continue;
    }
    for (PolicyEpisodeEnd& e : *got) out.push_back(std::move(e));
  }
  return out;
}

absl::Status RankEpisodes(const Policy& policy, std::vector<PolicyEpisodeEnd>& episodes) {
  const PlanCost* cost = policy.cost_model();
  for (PolicyEpisodeEnd& e : episodes) {
    e.score = -e.loss;  // without a cost model's or the server's guess: the most likely first
    if (cost != nullptr) {
      absl::StatusOr<Value> features = e.source->Observe("plan_features");
      if (!features.ok()) {  // not planned (refused): the last to time
        e.score = -std::numeric_limits<double>::infinity();
        continue;
      }
      ASSIGN_OR_RETURN(e.score, cost->ScoreJson(features->text));
      e.score -= cost->loss_weight() * e.loss;
    } else {
      absl::StatusOr<Value> predicted = e.source->Observe("predicted_gflops");
      if (predicted.ok() && predicted->number > 0) e.score = std::log2(predicted->number);
    }
  }
  std::stable_sort(episodes.begin(), episodes.end(),
                   [](const PolicyEpisodeEnd& a, const PolicyEpisodeEnd& b) {
                     return a.score > b.score;
                   });
  return absl::OkStatus();
}

absl::StatusOr<SearchResult> TimeRankedEpisodes(const StateSource& start,
                                                std::vector<PolicyEpisodeEnd>& episodes,
                                                int max_timed, absl::Time deadline,
                                                const SearchOptions& options, const Clock& clock,
                                                absl::Time t0) {
  // New candidates are timed until the reserve; re-timings use it (and any time the timings
  // left), each only where it fits: one takes about as long as the longest timing call so far.
  const absl::Time timing_deadline = deadline - kRetimeReserve * (deadline - t0);
  struct Timed {
    SearchResult result;
    StateSource* source = nullptr;
  };
  std::vector<Timed> timed;
  absl::Status first_error;
  absl::Duration longest_call;
  for (PolicyEpisodeEnd& e : episodes) {
    if (static_cast<int>(timed.size()) >= max_timed ||
        (!timed.empty() && clock.Now() >= timing_deadline)) {
      break;
    }
    e.source->set_deadline(timed.empty() ? absl::InfiniteFuture() : timing_deadline);
    SearchResult out;
    for (int a : e.path) out.actions.push_back(start.action_names()[a]);
    const absl::Time called = clock.Now();
    absl::StatusOr<SearchResult> r = TimeFinalState(*e.source, std::move(out), options, clock, t0);
    longest_call = std::max(longest_call, clock.Now() - called);
    if (!r.ok()) {
      if (first_error.ok()) first_error = r.status();
      continue;
    }
    timed.push_back({*std::move(r), e.source.get()});
  }
  if (timed.empty()) {
    return first_error.ok() ? absl::FailedPreconditionError("no episode to time") : first_error;
  }
  const int count = static_cast<int>(timed.size());
  std::stable_sort(timed.begin(), timed.end(), [](const Timed& a, const Timed& b) {
    return a.result.gflops > b.result.gflops;
  });
  // The fastest few re-timed where they fit (a slow spell of the host during one short timing
  // misreads a small kernel by tens of percent): each kernel's GFLOPS the faster of its timing
  // and its re-timing, the peak measured beside a re-timing reported with it.
  for (int i = 0; i < std::min(count, kRetimedFinalists); ++i) {
    if (clock.Now() + longest_call > deadline) break;
    Timed& t = timed[i];
    if (t.result.gflops <= 0) break;
    const absl::StatusOr<Retiming> again = t.source->Remeasure();
    if (!again.ok()) continue;
    t.result.retimed = true;
    if (again->gflops > t.result.gflops) t.result.gflops = again->gflops;
    if (options.on_retimed) options.on_retimed(KernelKey(t.result.ir), t.result.gflops);
    if (again->peak_gflops > 0) {
      t.result.peak_gflops = again->peak_gflops;
      t.result.peak_beside_retimed = true;
    }
  }
  SearchResult best = std::move(std::max_element(timed.begin(), timed.end(),
                                                 [](const Timed& a, const Timed& b) {
                                                   return a.result.gflops < b.result.gflops;
                                                 })->result);
  best.states_evaluated = count;
  best.seconds = absl::ToDoubleSeconds(clock.Now() - t0);
  return best;
}

absl::StatusOr<SearchResult> PolicyRollouts(const StateSource& start, const SearchOptions& options,
                                            const Policy& policy, const Clock& clock) {
  const absl::Time t0 = clock.Now();
  RETURN_IF_ERROR(CheckPolicyFits(policy, start));
  const absl::Time deadline = t0 + absl::Seconds(options.time_limit_seconds);
  // 1. Episodes, the most likely first, in at most 40% of the time; 2. ranked untimed.
  ASSIGN_OR_RETURN(std::vector<PolicyEpisodeEnd> episodes,
                   LikelyEpisodes(start, policy, options.policy_depth, options.guided_candidates,
                                  t0 + absl::Seconds(0.4 * options.time_limit_seconds), clock));
  RETURN_IF_ERROR(RankEpisodes(policy, episodes));
  // 3. Timed in that order while time is left (the first whatever the time); the fastest wins.
  return TimeRankedEpisodes(start, episodes, static_cast<int>(episodes.size()), deadline, options,
                            clock, t0);
}

}  // namespace looptool::client::internal
