#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "client/cpp/search/algorithms.h"
#include "client/cpp/search/neighbor_paths.h"
#include "client/cpp/search/policy_fit.h"
#include "client/cpp/search/searcher.h"
#include "client/cpp/search/short_candidate_loss.h"
#include "util/status_macros.h"

namespace looptool::client::internal {
namespace {

constexpr int kStop = -1;
// TimeRankedEpisodes: the share of its time kept from new timings for re-timing the fastest,
// and how many of them it re-times.
constexpr double kRetimeReserve = 0.05;
constexpr int kRetimedFinalists = 2;
// What a re-timing may take beyond a timing call: the FMA peak a server measures beside it
// (LocalTimer: three 10 ms rounds, once a second; the first re-timing pays it). Seen on a Zen 5
// host: first re-timings of 46 ms after timing calls of 13-14 ms at most.
constexpr absl::Duration kBesidePeak = absl::Milliseconds(40);
// What a re-timing takes at least (the peak aside): the server's fixed budget of runs (10 ms by
// default) and its overhead; seen on a Zen 5 host: 12.5-13.7 ms where the kernel's own timing
// call, adaptive (it stops once the fastest run settles), took 10-14 ms, or less.
constexpr absl::Duration kLeastRetiming = absl::Milliseconds(15);
// What a timing call takes beyond what the server says measuring its kernel took its worker
// (work_seconds) at least: the step's round trip, its observations (seen on a Zen 5 host: 2-7
// ms, the worker idle otherwise); EpisodeTimer::Overhead reads more where later calls show it.
constexpr absl::Duration kStepOverhead = absl::Milliseconds(5);
// What TryMarked takes beyond its timing call: the marking actions' steps and forks (the
// sessions that end before it are counted apart: kEndSession).
constexpr absl::Duration kMarkSteps = absl::Milliseconds(10);
// What ending one more session takes where many end together (EndSources: their calls sent at
// once). Seen on a Zen 5 host: 14-24 in 1.4-10.3 ms (one at a time, 0.5-1.5 ms each).
constexpr absl::Duration kEndSession = absl::Microseconds(400);
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
  for (int a : RankActions(scores, mask, policy.num_actions())) out.emplace_back(a, scores[a]);
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

// One network's episodes (LikelyEpisodes), played on: the greedy one on the first call, then
// those its untried branches lead to, the most likely first.
class NetworkEpisodes {
 public:
  NetworkEpisodes(const StateSource& start, const Policy& policy, int depth)
      : start_(start), policy_(policy), depth_(depth) {}

  // Up to `max_episodes` more, none ending in a state of `finals` (the loop_features of the
  // states other episodes ended in), which gains theirs. The greedy episode is played whatever
  // the time, and its errors are returned; another's (out of time, a step the server refused)
  // end that one only.
  absl::StatusOr<std::vector<PolicyEpisodeEnd>> Next(int max_episodes, absl::Time deadline,
                                                     const Clock& clock,
                                                     std::set<std::vector<float>>& finals);

  // No episode is left to play (after the first call).
  bool exhausted() const { return greedy_played_ && branches_.empty(); }

 private:
  // Goes on greedily from `r` (the state `end.path` reached), keeping the alternatives.
  absl::Status GoOn(PolicyEpisodeEnd& end, StepResult r);

  const StateSource& start_;
  const Policy& policy_;
  const int depth_;
  bool greedy_played_ = false;
  std::priority_queue<Branch> branches_;
};

absl::Status NetworkEpisodes::GoOn(PolicyEpisodeEnd& end, StepResult r) {
  const std::string& observation = policy_.observation_space();
  const std::vector<std::string> observe = {observation, "action_mask"};
  std::set<std::vector<float>> visited;
  while (true) {
    const Value* features = r.Find(observation);
    if (features == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("the server does not send ", observation, ", which the policy reads"));
    }
    RETURN_IF_ERROR(CheckFeatures(policy_, features->floats));
    end.features = features->floats;
    // Back in a state it has been in: the greedy episode would go round; it stops.
    if (static_cast<int>(end.path.size()) >= depth_ || !visited.insert(end.features).second) {
      return absl::OkStatus();
    }
    const std::vector<std::pair<int, double>> choices =
        Choices(policy_, end.features, r.Find("action_mask")->bools, end.path.empty());
    if (choices.empty()) return absl::OkStatus();
    for (size_t i = 1; i < choices.size() && i <= kAlternativesPerStep; ++i) {
      branches_.push(
          Branch{end.loss + choices[0].second - choices[i].second, end.path, choices[i].first});
    }
    if (choices[0].first == kStop) return absl::OkStatus();
    ASSIGN_OR_RETURN(r, end.source->Step({choices[0].first}, observe));
    end.path.push_back(choices[0].first);
  }
}

absl::StatusOr<std::vector<PolicyEpisodeEnd>> NetworkEpisodes::Next(
    int max_episodes, absl::Time deadline, const Clock& clock,
    std::set<std::vector<float>>& finals) {
  const std::string& observation = policy_.observation_space();
  const std::vector<std::string> observe = {observation, "action_mask"};
  std::vector<PolicyEpisodeEnd> out;
  if (!greedy_played_) {
    greedy_played_ = true;
    PolicyEpisodeEnd greedy;
    ASSIGN_OR_RETURN(greedy.source, start_.Fork());
    greedy.source->set_deadline(absl::InfiniteFuture());  // it is always finished
    ASSIGN_OR_RETURN(StepResult r, greedy.source->Step({}, observe));
    RETURN_IF_ERROR(GoOn(greedy, std::move(r)));
    if (finals.insert(greedy.features).second) out.push_back(std::move(greedy));
  }
  while (static_cast<int>(out.size()) < max_episodes && !branches_.empty() &&
         clock.Now() < deadline) {
    Branch b = branches_.top();
    branches_.pop();
    PolicyEpisodeEnd end;
    end.loss = b.loss;
    end.path = b.prefix;
    if (b.action != kStop) end.path.push_back(b.action);
    absl::StatusOr<std::unique_ptr<StateSource>> fork = start_.Fork();
    if (!fork.ok()) break;
    end.source = *std::move(fork);
    end.source->set_deadline(deadline);
    absl::StatusOr<StepResult> r = end.source->Step(end.path, observe);
    if (!r.ok()) continue;
    if (b.action == kStop) {
      const Value* features = r->Find(observation);
      if (features == nullptr) continue;
      end.features = features->floats;
    } else if (!GoOn(end, *std::move(r)).ok()) {
      continue;
    }
    if (!finals.insert(end.features).second) continue;  // a state another episode ended in
    out.push_back(std::move(end));
  }
  return out;
}

// The policy's and its members' episodes (LikelyEpisodes), wave after wave: each call plays on
// where the last left off, no episode ending where an earlier one (of any wave) ended.
class LikelyEpisodeStream {
 public:
  LikelyEpisodeStream(const StateSource& start, const Policy& policy, int depth) {
    networks_.emplace_back(start, policy, depth);
    for (const Policy& member : policy.members()) networks_.emplace_back(start, member, depth);
    failed_.assign(networks_.size(), false);
  }

  // Up to `max_episodes` more by `deadline`, each network's greedy one whatever the time; the
  // policy's own greedy episode's errors are returned, a member's drop that member.
  absl::StatusOr<std::vector<PolicyEpisodeEnd>> Next(int max_episodes, absl::Time deadline,
                                                     const Clock& clock) {
    const int n = static_cast<int>(networks_.size());
    std::vector<PolicyEpisodeEnd> out;
    for (int i = 0; i < n; ++i) {
      // An even share of the episodes (the first networks one more where they do not divide)
      // and of the time left.
      const int share = max_episodes / n + (i < max_episodes % n ? 1 : 0);
      if (share == 0 || failed_[i] || networks_[i].exhausted()) continue;
      const absl::Time now = clock.Now();
      const absl::Time until = deadline <= now ? deadline : now + (deadline - now) / (n - i);
      absl::StatusOr<std::vector<PolicyEpisodeEnd>> got =
          networks_[i].Next(share, until, clock, finals_);
      if (!got.ok()) {
        if (i == 0) return got.status();  // the policy's own greedy episode failed
        failed_[i] = true;
        continue;
      }
      for (PolicyEpisodeEnd& e : *got) out.push_back(std::move(e));
    }
    return out;
  }

  // The states the episodes of every wave ended in (ShortCandidates adds its own).
  std::set<std::vector<float>>& finals() { return finals_; }

  // Every network has played all its episodes or failed.
  bool exhausted() const {
    for (size_t i = 0; i < networks_.size(); ++i) {
      if (!failed_[i] && !networks_[i].exhausted()) return false;
    }
    return true;
  }

 private:
  std::vector<NetworkEpisodes> networks_;
  std::vector<bool> failed_;
  std::set<std::vector<float>> finals_;
};

// The lines of `ir` that start with `keyword` (`stream ` or `fold `: the statements marked).
int MarkLines(absl::string_view ir, absl::string_view keyword) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(ir, '\n')) n += absl::StartsWith(line, keyword);
  return n;
}

// The statements of `ir` that assign (` = `).
int AssigningStatements(absl::string_view ir) {
  int n = 0;
  for (size_t at = ir.find("] = "); at != absl::string_view::npos; at = ir.find("] = ", at + 1)) {
    ++n;
  }
  return n;
}

// Whether a statement of `ir` may fold: a sum or max of one operand (`max= ` or `+= ` and
// neither `] * ` nor `] + `) whose last index steps by 2 (`2*` there, not `12*`: a CHW pool, not
// a channels-last one; the server decides, CanFoldRows, and a stride of 2 that only the
// tensor's extents make is missed).
bool MayFold(absl::string_view ir) {
  for (absl::string_view line : absl::StrSplit(ir, '\n')) {
    for (absl::string_view op : {"max= ", "+= "}) {
      const size_t at = line.find(op);
      if (at == absl::string_view::npos) continue;
      const absl::string_view rhs = line.substr(at + op.size());
      const size_t open = rhs.find('['), close = rhs.find(']');
      if (absl::StrContains(rhs, "] * ") || absl::StrContains(rhs, "] + ") ||
          open == absl::string_view::npos || close == absl::string_view::npos || close < open) {
        continue;
      }
      const absl::string_view index = rhs.substr(open + 1, close - open - 1);
      const size_t comma = index.rfind(',');
      const absl::string_view last =
          comma == absl::string_view::npos ? index : index.substr(comma + 1);
      for (size_t k = last.find("2*"); k != absl::string_view::npos; k = last.find("2*", k + 1)) {
        if (k == 0 || !absl::ascii_isdigit(last[k - 1])) return true;
      }
    }
  }
  return false;
}

// Whether `ir` shows a statement that may take a mark: one that assigns (streamed) or folds.
bool MayMark(absl::string_view ir) { return AssigningStatements(ir) > 0 || MayFold(ir); }

// A state with the statement marks a loop_set policy never takes (stream_L<p> and fold_L<p>,
// appended to loop_nest after it was trained) set wherever its statements allow them.
struct Marked {
  std::unique_ptr<StateSource> source;
  std::vector<int> actions;  // the marking actions, after those that reached `from`
};

// `from` (whose ir is `ir`) with every output it assigns streamed (stored non-temporally) and
// every stride-2 window's rows folded: the marking actions its state allows, in order, each
// kept where it marks one more statement (a second loop of a marked statement would toggle the
// mark off), until every statement that assigns is streamed (a concatenation has two) and no
// fold_L<p> is left. nullopt where none marks anything (or MayMark(ir) is false); an error where
// the server refuses a fork or step.
absl::StatusOr<std::optional<Marked>> MarkAll(StateSource& from, absl::string_view ir,
                                              const std::vector<std::string>& names) {
  if (!MayMark(ir)) return std::nullopt;
  ASSIGN_OR_RETURN(const StepResult now, from.Step({}, {"action_mask"}));
  const std::vector<bool>& mask = now.Find("action_mask")->bools;
  const int assigning = AssigningStatements(ir);
  int streamed = MarkLines(ir, "stream ");
  int folded = MarkLines(ir, "fold ");
  std::optional<Marked> marked;  // the state with the marks kept so far
  for (size_t a = 0; a < std::min(mask.size(), names.size()); ++a) {
    const bool stream = absl::StartsWith(names[a], "stream_L");
    if (!mask[a] || !(stream ? streamed < assigning : absl::StartsWith(names[a], "fold_L"))) {
      continue;
    }
    ASSIGN_OR_RETURN(std::unique_ptr<StateSource> fork,
                     (marked.has_value() ? *marked->source : from).Fork());
    ASSIGN_OR_RETURN(const StepResult step, fork->Step({static_cast<int>(a)}, {"ir"}));
    int& count = stream ? streamed : folded;
    const int after = MarkLines(step.Find("ir")->text, stream ? "stream " : "fold ");
    if (after <= count) continue;  // toggled a marked statement's mark off
    count = after;
    std::vector<int> actions = marked.has_value() ? std::move(marked->actions) : std::vector<int>{};
    actions.push_back(static_cast<int>(a));
    marked = Marked{std::move(fork), std::move(actions)};
  }
  return marked;
}

// A candidate in the state `path` reaches from `start`: a fork with `deadline`, stepped along
// `path` in one call, its `observation` (the policy's) read as its features, and its ir.
struct SteppedCandidate {
  PolicyEpisodeEnd end;  // loss 0, score unset
  std::string ir;
};
// The fork's error where the server gave none (its bound on a client's sessions: no later fork
// will fare better); nullopt where it refused the step (nothing changed).
absl::StatusOr<std::optional<SteppedCandidate>> StepCandidate(const StateSource& start,
                                                              std::vector<int> path,
                                                              const std::string& observation,
                                                              absl::Time deadline) {
  ASSIGN_OR_RETURN(std::unique_ptr<StateSource> fork, start.Fork());
  fork->set_deadline(deadline);
  const absl::StatusOr<StepResult> now = fork->Step(path, {observation, "ir"});
  if (!now.ok() || now->Find(observation) == nullptr || now->Find("ir") == nullptr) {
    return std::nullopt;
  }
  SteppedCandidate c;
  c.end.source = std::move(fork);
  c.end.path = std::move(path);
  c.end.features = now->Find(observation)->floats;
  c.ir = now->Find("ir")->text;
  return c;
}

// Shorter candidates of a first wave, beside its episodes: the start (no action), the start with
// every mark its statements take (MarkAll) where any does, and, while `until` on `clock` has not
// come, the other states the greedy episodes (of the policy and its members: loss 0) passed
// through, the shorter first. A loop_set policy takes one action at least and stops only where
// it chooses to, yet for an elementwise kernel doing nothing, or streaming its output alone, may
// be the fastest, and a pool's first interchange may beat the tiling after it. Each as unlikely
// as ShortCandidateLoss says (ranked by the cost model alone among them), none ending in a state
// of `finals` (where the episodes of every wave end; it gains theirs), each forked from `start`
// with `deadline`. The marked start is never in `finals` (loop_features do not show marks; no
// episode takes one). A state the server refuses is left out.
std::vector<PolicyEpisodeEnd> ShortCandidates(const StateSource& start, const Policy& policy,
                                              const std::vector<PolicyEpisodeEnd>& episodes,
                                              double loss, absl::Time until, absl::Time deadline,
                                              const Clock& clock,
                                              std::set<std::vector<float>>& finals) {
  std::set<std::vector<int>> greedy_prefixes;
  for (const PolicyEpisodeEnd& e : episodes) {
    if (e.loss != 0) continue;
    for (size_t n = 0; n < e.path.size(); ++n) {
      greedy_prefixes.emplace(e.path.begin(), e.path.begin() + n);
    }
  }
  std::vector<std::vector<int>> prefixes(greedy_prefixes.begin(), greedy_prefixes.end());
  std::stable_sort(prefixes.begin(), prefixes.end(),
                   [](const std::vector<int>& a, const std::vector<int>& b) {
                     return a.size() < b.size();
                   });
  const std::string& observation = policy.observation_space();
  std::vector<PolicyEpisodeEnd> out;
  for (const std::vector<int>& path : prefixes) {
    if (!path.empty() && clock.Now() >= until) break;
    absl::StatusOr<std::optional<SteppedCandidate>> stepped =
        StepCandidate(start, path, observation, deadline);
    if (!stepped.ok()) return out;
    if (!stepped->has_value()) continue;
    PolicyEpisodeEnd& e = (*stepped)->end;
    e.loss = loss;
    std::optional<PolicyEpisodeEnd> marked;
    if (path.empty()) {
      absl::StatusOr<std::optional<Marked>> m =
          MarkAll(*e.source, (*stepped)->ir, start.action_names());
      if (m.ok() && m->has_value()) {
        marked.emplace();
        marked->source = std::move((*m)->source);
        marked->path = std::move((*m)->actions);
        marked->loss = loss;
        marked->features = e.features;
      }
    }
    e.start = path.empty();
    e.shorter = true;
    if (marked.has_value()) marked->start = marked->shorter = true;
    if (finals.insert(e.features).second) out.push_back(std::move(e));
    if (marked.has_value()) out.push_back(*std::move(marked));
  }
  return out;
}

// Ranked episodes timed, wave after wave, then the fastest re-timed (TimeRankedEpisodes).
class EpisodeTimer {
 public:
  // New candidates are timed until the reserve (kRetimeReserve of the time from `t0` to
  // `deadline`); re-timings use it, and any time the timings left.
  // With `pass_predicted_slow` (the episodes' scores are a cost model's), a candidate scored
  // options.pass_predicted_slower below the fastest timed so far is passed over. Seen on a Zen 5
  // host, --search=policy over 103 programs (2853 timings): no program's fastest kernel scored
  // 2 below the fastest timed before it (nor 1 below); such candidates took 2.1 of the
  // searches' 25 s, up to half of a program's 0.3 s (MobileNetV2's stem: 15 of its 24 timings,
  // at 3-10 GFLOPS).
  EpisodeTimer(const StateSource& start, const SearchOptions& options, const Clock& clock,
               absl::Time t0, absl::Time deadline, bool pass_predicted_slow = false)
      : start_(start),
        options_(options),
        clock_(clock),
        t0_(t0),
        deadline_(deadline),
        timing_deadline_(deadline - kRetimeReserve * (deadline - t0)),
        pass_predicted_slow_(pass_predicted_slow) {}

  // `episodes` timed in order while fewer than `max_timed` are timed in all and `stop` has not
  // come (the very first whatever the time; each call bounded by `stop`); with
  // `keep_retimings`, each (but the very first) only before wave_stop() as it stands then, else
  // before mark_stop(), either less kEndSession for each session that would end after it. Only
  // the fastest kRetimedFinalists keep their sessions; the others' end here, together (the
  // server bounds a client's sessions; the time this takes comes before the re-timings and the
  // marked timing).
  void Time(std::vector<PolicyEpisodeEnd>& episodes, int max_timed, absl::Time stop,
            bool keep_retimings = false);

  // Where the timings of a wave after the first stop: at the reserve, or earlier where the time
  // left would not hold the re-timings of the kRetimedFinalists fastest so far (RetimingTime each,
  // and the peak measured beside the first; and the fastest's marked timing, TryMarked).
  absl::Time wave_stop() const;
  // Where the first wave's timings stop (without keep_retimings) beside the reserve: where the
  // time left would not hold one more timing (as long as the fastest's re-timing: RetimingTime)
  // and the fastest's marked timing (TryMarked: RetimingTime and kMarkSteps), where it may take
  // a mark (a transpose's streamed output may run twice as fast).
  absl::Time mark_stop() const;
  // The time TryMarked keeps for the fastest (timed_ sorted: RetimingTime and kMarkSteps), or
  // none where it takes no mark.
  absl::Duration MarkReserve(absl::Duration typical) const;

  // The fastest re-timed where a timing still fits, then timed with every output it assigns
  // streamed and every pool window's rows folded (TryMarked), and the fastest of all the result.
  absl::StatusOr<SearchResult> Finish();

  int timed() const { return static_cast<int>(timed_.size()); }
  // The fastest's actions as of the last Time (empty before any was timed).
  std::vector<std::string> fastest_actions() const {
    return timed_.empty() ? std::vector<std::string>{} : timed_.front().result.actions;
  }
  absl::Time timing_deadline() const { return timing_deadline_; }
  // The median of the timing calls so far as the estimates read them (KernelCall; zero before
  // any): a candidate's typical timing.
  absl::Duration typical_call() const;

 private:
  // One timing call: how long the client saw it take, and what the server said measuring the
  // kernel took its worker (the `timing` observation's work_seconds; 0 where it did not say).
  struct Call {
    absl::Duration seen;
    double work_seconds = 0;
  };
  struct Timed {
    SearchResult result;
    std::unique_ptr<StateSource> source;  // null once it cannot be a finalist
    Call call;                            // its timing call's
    double score = 0;                     // its episode's (RankEpisodes)
  };
  // Whether `e` is passed over untimed: pass_predicted_slow_, and its score
  // options_.pass_predicted_slower below the fastest timed's.
  bool PredictedSlow(const PolicyEpisodeEnd& e) const;
  // The fastest with the statement marks a loop_set policy never takes (stream_L<p> and
  // fold_L<p>, appended to loop_nest after it was trained) set wherever its statements allow
  // them (MarkAll): every output it assigns streamed (stored non-temporally) and every stride-2
  // window's rows folded; timed once where a timing still fits and no candidate of the same
  // actions was timed (the marked start, where the fastest is the start), kept where it is
  // faster. Only where `ir` shows a statement that may take a mark (MayMark). Whether it timed
  // the variant.
  bool TryMarked(Timed& best);
  // What re-timing `t` may take (the peak beside it aside): a call as long as its own timing's
  // (KernelCall), or as the typical call, or kLeastRetiming, where longer (a kernel whose timing
  // the server had cached came back at once, and an adaptive timing may stop early; a re-timing
  // runs the full budget). Not the longest call: a slow candidate's timing (runs longer than the
  // server's budget, a large kernel's compilation) says nothing of the finalists'.
  // `typical`: typical_call(), computed once by callers that ask about several.
  absl::Duration RetimingTime(const Timed& t, absl::Duration typical) const {
    return std::max({KernelCall(t.call), typical, kLeastRetiming});
  }
  // A timing call's length as the estimates read it: as the client saw it, or, where the server
  // said what measuring the kernel took its worker, no more than that and overhead_. The first
  // timing of a program new to the server waits for its reference run and buffers (0.06-0.15 s
  // past 1 M elements on a Zen 5 host), which no re-timing pays again.
  absl::Duration KernelCall(const Call& call) const;
  // Adds `call` to calls_ and sets overhead_ anew: what a timing call takes beyond what
  // measuring its kernel took the worker, the median of that excess over the timing calls after
  // the first (their steps, observations, waits for a worker where other sessions' kernels
  // queue), kStepOverhead at least, and where no call after the first says. The first is left
  // out: it alone waits for the program's reference run.
  void AddCall(Call call);
  const StateSource& start_;
  const SearchOptions& options_;
  const Clock& clock_;
  const absl::Time t0_;
  const absl::Time deadline_;
  const absl::Time timing_deadline_;
  const bool pass_predicted_slow_;
  std::vector<Timed> timed_;  // the fastest first after each Time
  absl::Status first_error_;
  std::vector<Call> calls_;  // every timing call, in order
  absl::Duration overhead_ = kStepOverhead;  // AddCall's
};

void EpisodeTimer::AddCall(Call call) {
  calls_.push_back(call);
  std::vector<absl::Duration> excess;
  for (size_t i = 1; i < calls_.size(); ++i) {
    if (calls_[i].work_seconds > 0) {
      excess.push_back(calls_[i].seen - absl::Seconds(calls_[i].work_seconds));
    }
  }
  if (excess.empty()) return;
  std::nth_element(excess.begin(), excess.begin() + excess.size() / 2, excess.end());
  overhead_ = std::max(kStepOverhead, excess[excess.size() / 2]);
}

absl::Duration EpisodeTimer::KernelCall(const Call& call) const {
  if (!(call.work_seconds > 0)) return call.seen;
  return std::min(call.seen, absl::Seconds(call.work_seconds) + overhead_);
}

absl::Duration EpisodeTimer::typical_call() const {
  if (calls_.empty()) return absl::ZeroDuration();
  std::vector<absl::Duration> calls;
  for (const Call& c : calls_) calls.push_back(KernelCall(c));
  std::nth_element(calls.begin(), calls.begin() + calls.size() / 2, calls.end());
  return calls[calls.size() / 2];
}

absl::Time EpisodeTimer::wave_stop() const {
  // The fastest kRetimedFinalists (timed_ is sorted only after each Time).
  std::vector<const Timed*> fastest;
  for (const Timed& t : timed_) fastest.push_back(&t);
  const size_t n = std::min<size_t>(fastest.size(), kRetimedFinalists);
  std::partial_sort(fastest.begin(), fastest.begin() + n, fastest.end(),
                    [](const Timed* a, const Timed* b) {
                      return a->result.gflops > b->result.gflops;
                    });
  const absl::Duration typical = typical_call();
  absl::Duration retimings = kBesidePeak;
  for (size_t i = 0; i < n; ++i) retimings += RetimingTime(*fastest[i], typical);
  if (n > 0 && MayMark(fastest[0]->result.ir)) {
    retimings += RetimingTime(*fastest[0], typical) + kMarkSteps;
  }
  return std::min(timing_deadline_, deadline_ - retimings);
}

absl::Duration EpisodeTimer::MarkReserve(absl::Duration typical) const {
  if (timed_.empty() || !MayMark(timed_.front().result.ir)) return absl::ZeroDuration();
  return RetimingTime(timed_.front(), typical) + kMarkSteps;
}

absl::Time EpisodeTimer::mark_stop() const {
  const auto fastest = std::max_element(timed_.begin(), timed_.end(),
                                        [](const Timed& a, const Timed& b) {
                                          return a.result.gflops < b.result.gflops;
                                        });
  if (fastest == timed_.end() || !MayMark(fastest->result.ir)) return absl::InfiniteFuture();
  const absl::Duration typical = typical_call();
  // One more timing, then the marked one (each RetimingTime: a new fastest's timing runs the
  // full budget, longer than the typical call of candidates that stop early).
  return deadline_ - 2 * RetimingTime(*fastest, typical) - kMarkSteps;
}

bool EpisodeTimer::PredictedSlow(const PolicyEpisodeEnd& e) const {
  if (!pass_predicted_slow_ || timed_.empty()) return false;
  const auto fastest = std::max_element(timed_.begin(), timed_.end(),
                                        [](const Timed& a, const Timed& b) {
                                          return a.result.gflops < b.result.gflops;
                                        });
  return e.score < fastest->score - options_.pass_predicted_slower;
}

void EpisodeTimer::Time(std::vector<PolicyEpisodeEnd>& episodes, int max_timed,
                        absl::Time stop, bool keep_retimings) {
  // Episodes whose timing failed or that were passed over (their sessions end with the untimed).
  int failed = 0;
  for (size_t i = 0; i < episodes.size(); ++i) {
    PolicyEpisodeEnd& e = episodes[i];
    // The sessions that end after this timing: the episodes after it, those whose timing failed,
    // and those of the timed with it beyond the finalists.
    int open = 1;
    for (const Timed& t : timed_) open += t.source != nullptr;
    const int ending = static_cast<int>(episodes.size() - i - 1) + failed +
                       std::max(0, open - kRetimedFinalists);
    const absl::Time until =
        std::min(stop, (keep_retimings ? wave_stop() : mark_stop()) - ending * kEndSession);
    if (timed() >= max_timed || (!timed_.empty() && clock_.Now() >= until)) break;
    if (PredictedSlow(e)) {
      ++failed;
      continue;
    }
    e.source->set_deadline(timed_.empty() ? absl::InfiniteFuture() : stop);
    SearchResult out;
    for (int a : e.path) out.actions.push_back(start_.action_names()[a]);
    const absl::Time called = clock_.Now();
    double work = 0;
    absl::StatusOr<SearchResult> r =
        TimeFinalState(*e.source, std::move(out), options_, clock_, t0_, &work);
    const Call call{clock_.Now() - called, work};
    AddCall(call);
    if (!r.ok()) {
      if (first_error_.ok()) first_error_ = r.status();
      ++failed;
      continue;
    }
    timed_.push_back({*std::move(r), std::move(e.source), call, e.score});
  }
  std::stable_sort(timed_.begin(), timed_.end(), [](const Timed& a, const Timed& b) {
    return a.result.gflops > b.result.gflops;
  });
  std::vector<std::unique_ptr<StateSource>> ending;
  for (PolicyEpisodeEnd& e : episodes) {
    if (e.source != nullptr) ending.push_back(std::move(e.source));
  }
  for (size_t i = kRetimedFinalists; i < timed_.size(); ++i) {
    if (timed_[i].source != nullptr) ending.push_back(std::move(timed_[i].source));
  }
  EndSources(ending);
}

absl::StatusOr<SearchResult> EpisodeTimer::Finish() {
  if (timed_.empty()) {
    return first_error_.ok() ? absl::FailedPreconditionError("no episode to time") : first_error_;
  }
  // The fastest few re-timed where they fit (a slow spell of the host during one short timing
  // misreads a small kernel by tens of percent), each where the time left holds its RetimingTime
  // (the first also the peak measured beside it) and the fastest's marked timing after it
  // (MarkReserve): each kernel's GFLOPS the faster of its timing and its re-timing, the peak
  // measured beside a re-timing reported with it.
  const absl::Duration typical = typical_call();
  const absl::Duration mark = MarkReserve(typical);
  for (int i = 0; i < std::min(timed(), kRetimedFinalists); ++i) {
    Timed& t = timed_[i];
    const absl::Duration peak = i == 0 ? kBesidePeak : absl::ZeroDuration();
    if (clock_.Now() + RetimingTime(t, typical) + peak + mark > deadline_) break;
    if (t.result.gflops <= 0) break;
    const absl::StatusOr<Retiming> again = t.source->Remeasure();
    if (!again.ok()) continue;
    t.result.retimed = true;
    if (again->gflops > t.result.gflops) t.result.gflops = again->gflops;
    if (options_.on_retimed) options_.on_retimed(KernelKey(t.result.ir), t.result.gflops);
    if (again->peak_gflops > 0) {
      t.result.peak_gflops = again->peak_gflops;
      t.result.peak_beside_retimed = true;
    }
  }
  Timed& fastest = *std::max_element(timed_.begin(), timed_.end(),
                                     [](const Timed& a, const Timed& b) {
                                       return a.result.gflops < b.result.gflops;
                                     });
  const bool marked = TryMarked(fastest);
  SearchResult best = std::move(fastest.result);
  best.states_evaluated = timed() + (marked ? 1 : 0);
  best.seconds = absl::ToDoubleSeconds(clock_.Now() - t0_);
  return best;
}

bool EpisodeTimer::TryMarked(Timed& best) {
  if (best.source == nullptr || best.result.gflops <= 0 || !MayMark(best.result.ir) ||
      clock_.Now() + RetimingTime(best, typical_call()) + kMarkSteps > deadline_) {
    return false;
  }
  best.source->set_deadline(deadline_);
  absl::StatusOr<std::optional<Marked>> marked =
      MarkAll(*best.source, best.result.ir, start_.action_names());
  if (!marked.ok() || !marked->has_value()) return false;
  SearchResult out;
  out.actions = best.result.actions;
  for (int a : (*marked)->actions) out.actions.push_back(start_.action_names()[a]);
  for (const Timed& t : timed_) {
    if (t.result.actions == out.actions) return false;  // timed already: the marked start
  }
  const absl::Time called = clock_.Now();
  double work = 0;
  absl::StatusOr<SearchResult> r =
      TimeFinalState(*(*marked)->source, std::move(out), options_, clock_, t0_, &work);
  AddCall({clock_.Now() - called, work});
  if (!r.ok()) return false;
  if (r->gflops > best.result.gflops) best.result = *std::move(r);
  return true;
}

// Candidates one tile factor away from `path`, or two traded (NeighborPaths), stepped from
// `start` while `until` on `clock` has not come, each of loss 0 (ranked by the cost model alone
// among them), none ending in a state of `finals` (it gains theirs), each forked with `deadline`.
// A state the server refuses is left out.
std::vector<PolicyEpisodeEnd> Neighbors(const StateSource& start, const Policy& policy,
                                        const std::vector<int>& path, absl::Time until,
                                        absl::Time deadline, const Clock& clock,
                                        std::set<std::vector<float>>& finals) {
  const std::string& observation = policy.observation_space();
  std::vector<PolicyEpisodeEnd> out;
  for (std::vector<int>& near : NeighborPaths(path, start.action_names())) {
    if (clock.Now() >= until) break;
    absl::StatusOr<std::optional<SteppedCandidate>> stepped =
        StepCandidate(start, std::move(near), observation, deadline);
    if (!stepped.ok()) break;
    if (!stepped->has_value()) continue;
    if (finals.insert((*stepped)->end.features).second) out.push_back(std::move((*stepped)->end));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<PolicyEpisodeEnd>> LikelyEpisodes(const StateSource& start,
                                                             const Policy& policy, int depth,
                                                             int max_episodes,
                                                             absl::Time deadline,
                                                             const Clock& clock) {
  return LikelyEpisodeStream(start, policy, depth).Next(max_episodes, deadline, clock);
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
  EpisodeTimer timer(start, options, clock, t0, deadline);
  timer.Time(episodes, max_timed, timer.timing_deadline());
  return timer.Finish();
}

absl::StatusOr<SearchResult> TimeEpisodeWaves(const StateSource& start, const Policy& policy,
                                              int depth, int wave_size, int max_timed,
                                              absl::Time first_wave_until, bool keep_retimings,
                                              double neighbor_share, absl::Time deadline,
                                              const SearchOptions& options, const Clock& clock,
                                              absl::Time t0) {
  if (!(options.pass_predicted_slower >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a policy passes over candidates predicted slower by 0 or more, not pass_predicted_slower=",
        options.pass_predicted_slower));
  }
  LikelyEpisodeStream stream(start, policy, depth);
  EpisodeTimer timer(start, options, clock, t0, deadline,
                     /*pass_predicted_slow=*/policy.cost_model() != nullptr);
  absl::Time until = first_wave_until;
  // The first wave's timings: to the reserve, or where the neighbor share begins.
  absl::Time stop = std::min(timer.timing_deadline(),
                             deadline - neighbor_share * (deadline - t0));
  std::set<std::vector<std::string>> expanded;  // paths whose neighbors were timed
  bool first_wave = true;
  while (true) {
    ASSIGN_OR_RETURN(std::vector<PolicyEpisodeEnd> episodes,
                     stream.Next(wave_size, until, clock));
    if (first_wave) {
      first_wave = false;
      // As the least likely of policy_guided's 256, the short candidates' scores fell by the
      // cost model's loss_weight times the 256th's loss, far below the 16 likeliest's, and
      // neither the start nor its streamed form was timed: on a Zen 5 host ResNet-18's residual
      // add kept a tiled kernel of 16-17 GFLOPS where the streamed start runs at 18-19.
      std::vector<double> losses;
      for (const PolicyEpisodeEnd& e : episodes) losses.push_back(e.loss);
      std::vector<PolicyEpisodeEnd> shorter = ShortCandidates(
          start, policy, episodes, ShortCandidateLoss(std::move(losses), options.policy_candidates),
          until, deadline, clock, stream.finals());
      for (PolicyEpisodeEnd& e : shorter) episodes.push_back(std::move(e));
    }
    if (episodes.empty()) break;
    RETURN_IF_ERROR(RankEpisodes(policy, episodes));
    // The start and its marked form right after the best-ranked candidate, where they are not
    // predicted far slower than it (PredictedSlow): the cost model misjudges them most (seen on
    // a Zen 5 host: ResNet-18's residual add streamed from the start ran at 18-19 GFLOPS, the
    // policy's 16 likeliest at 15-16.5, ranked ~1.9x above it), and memory-bound kernels' starts
    // time fast. Among policy_guided's hundreds they came after where its timings stop. Only
    // with a cost model: without one, nothing passes over an untiled convolution's start.
    // Where the cost model ranks a shorter candidate first (the start, a greedy episode's first
    // steps), the best-ranked episode goes before it: the first timing runs whatever the time,
    // with no fastest known to cut it short (the server's timer gives up on a kernel far slower
    // than the program's best), and a nest barely tiled may be slow (seen on a Zen 5 host: a
    // fresh server's first policy search of a 2048 x 256 transpose timed its start, 4.5 ms a
    // run, and its streamed form, and nothing else in 0.3 s: 0.11 GFLOPS; its episodes reach 10).
    if (policy.cost_model() != nullptr && episodes.size() > 1) {
      const auto first = std::find_if(episodes.begin(), episodes.end(),
                                      [](const PolicyEpisodeEnd& e) { return !e.shorter; });
      if (first != episodes.end()) std::rotate(episodes.begin(), first, first + 1);
      std::stable_partition(episodes.begin() + 1, episodes.end(),
                            [](const PolicyEpisodeEnd& e) { return e.start; });
    }
    timer.Time(episodes, max_timed, stop, keep_retimings);
    // Time ended the wave's untimed episodes' sessions (the server bounds a client's sessions,
    // and a first wave may hold hundreds): the neighbors below need forks of their own.
    episodes.clear();
    // Then, in the time the neighbor share kept (and any the wave left), the fastest's
    // neighbors, and theirs while a new one is the fastest (their calls end where their timings
    // stop, leaving the re-timings their time).
    while (neighbor_share > 0 && timer.timed() < max_timed) {
      const std::vector<std::string> fastest = timer.fastest_actions();
      if (!expanded.insert(fastest).second) break;
      const absl::Time now = clock.Now(), neighbors_stop = timer.wave_stop();
      if (neighbors_stop - now < 2 * timer.typical_call()) break;
      std::vector<int> path;
      for (const std::string& name : fastest) path.push_back(start.ActionIndex(name));
      if (std::find(path.begin(), path.end(), -1) != path.end()) break;
      std::vector<PolicyEpisodeEnd> near =
          Neighbors(start, policy, path, now + (neighbors_stop - now) / 3, neighbors_stop,
                    clock, stream.finals());
      if (near.empty()) break;
      RETURN_IF_ERROR(RankEpisodes(policy, near));
      timer.Time(near, max_timed, neighbors_stop, keep_retimings);
    }
    // Another wave where more may be timed, episodes are left, and the time to where its
    // timings stop (wave_stop: the re-timings kept whole) holds its episodes (half of it) and
    // two typical timings at least.
    const absl::Time now = clock.Now();
    stop = timer.wave_stop();
    if (timer.timed() >= max_timed || stream.exhausted() || stop - now < 2 * timer.typical_call()) {
      break;
    }
    until = now + (stop - now) / 2;
  }
  return timer.Finish();
}

absl::StatusOr<SearchResult> PolicyRollouts(const StateSource& start, const SearchOptions& options,
                                            const Policy& policy, const Clock& clock) {
  const absl::Time t0 = clock.Now();
  RETURN_IF_ERROR(CheckPolicyFits(policy, start));
  if (!(options.guided_neighbor_share >= 0 && options.guided_neighbor_share <= 0.5)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "policy_guided leaves 0..0.5 of its time to neighbors, not guided_neighbor_share=",
        options.guided_neighbor_share));
  }
  const absl::Time deadline = t0 + absl::Seconds(options.time_limit_seconds);
  // Waves: episodes, the most likely first (the first wave in at most 40% of the time), ranked
  // untimed, then timed in that order while time is left and the re-timings still fit after
  // them (the first whatever the time; the first wave's not into the neighbor share, which the
  // fastest's neighbors take); the fastest wins.
  return TimeEpisodeWaves(start, policy, options.policy_depth, options.guided_candidates,
                          options.guided_timed,
                          t0 + absl::Seconds(0.4 * options.time_limit_seconds),
                          /*keep_retimings=*/true, options.guided_neighbor_share, deadline,
                          options, clock, t0);
}

}  // namespace looptool::client::internal
