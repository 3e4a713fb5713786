#include "client/cpp/search.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace looptool::client {
namespace {

using Clock = std::chrono::steady_clock;

// The time kept at the end of the limit for re-timing the best states (SearchOptions::
// retime_top): 5% of it, at most 0.1 s (four kernels under 1 ms re-time in about 60 ms).
constexpr double kRetimeShare = 0.05;
constexpr double kRetimeSecondsMax = 0.1;

// What a search knows about one state.
struct Node {
  std::vector<int> path;  // action indices from the start
  std::string ir;         // the state's key (program, schedule and cursor)
  std::string loop_tree;
  double gflops = 0;      // 0 when its kernel could not be measured
  std::vector<bool> mask; // actions that would change the state
  std::vector<float> features;  // loops_tensor, for searches guided by a policy
};

const std::vector<std::string> kObservations = {"ir", "loop_tree", "flops", "action_mask"};
const std::vector<std::string> kPolicyObservations = {"ir", "loop_tree", "flops", "action_mask",
                                                      "loops_tensor"};

// A state reached by an action: its node, and whether it was never seen before (a seen one comes
// from the cache, with the new path, and is not counted again).
struct Reached {
  Node node;
  bool is_new = false;
};

// Whether Expand() returns children already visited (from the cache) or only new ones.
enum class SeenChildren { kSkip, kInclude };

// State shared by every algorithm: the clock, the visited states, the best one, the progress.
class Searcher {
 public:
  Searcher(const Env& start, const SearchOptions& options, bool with_features = false)
      : start_(start),
        options_(options),
        observations_(with_features ? kPolicyObservations : kObservations),
        t0_(Clock::now()),
        limit_(options.retime_top > 0
                   ? options.time_limit_seconds -
                         std::min(kRetimeShare * options.time_limit_seconds, kRetimeSecondsMax)
                   : options.time_limit_seconds),
        deadline_(absl::Now() + absl::Seconds(limit_)) {}

  absl::Status Init() {
    absl::StatusOr<Env> env = start_.Fork();
    if (!env.ok()) return env.status();
    env->set_deadline(deadline_);
    std::vector<std::string> observations = observations_;
    observations.push_back("peak_gflops");
    absl::StatusOr<StepResult> r = env->Step({}, observations);
    if (!r.ok()) return r.status();
    progress_.peak_gflops = r->Find("peak_gflops")->number;
    absl::StatusOr<Node> root = ToNode({}, *r);
    if (!root.ok()) return root.status();
    root_ = *std::move(root);
    visited_.emplace(root_.ir, root_);
    best_ = root_;
    Report();
    return absl::OkStatus();
  }

  // Whether the search's own time (the limit less the re-timing share) is up.
  bool Expired() const { return Elapsed() >= limit_; }
  double limit() const { return limit_; }
  // When the search's own time is up (calls made for it end then).
  absl::Time deadline() const { return deadline_; }
  double Elapsed() const {
    return std::chrono::duration<double>(Clock::now() - t0_).count();
  }
  const Node& root() const { return root_; }
  const Node& best() const { return best_; }
  int64_t evaluated() const { return progress_.states_evaluated; }
  double start_gflops() const { return root_.gflops; }
  double peak() const { return progress_.peak_gflops; }

  // A session in `node`'s state: a fork of the start, stepped along the path in one call. Its
  // calls (and its forks') end at the search's deadline.
  absl::StatusOr<Env> Materialize(const Node& node) {
    absl::StatusOr<Env> env = start_.Fork();
    if (!env.ok()) return env;
    env->set_deadline(deadline_);
    if (node.path.empty()) return env;
    absl::StatusOr<StepResult> r = env->Step(node.path);
    if (!r.ok()) return r.status();
    return env;
  }

  // The state `path` reaches from the start, on a fork stepped along it in one call (actions
  // without effect are skipped by the server). New states are measured and counted.
  absl::StatusOr<Reached> EvaluatePath(std::vector<int> path) {
    absl::StatusOr<Env> env = start_.Fork();
    if (!env.ok()) return env.status();
    env->set_deadline(deadline_);
    absl::StatusOr<StepResult> r = env->Step(path, observations_);
    if (!r.ok()) {
      if (Expired()) return r.status();
      r = env->Step({}, Unmeasured());
      if (!r.ok()) return r.status();
    }
    return Record(std::move(path), *r);
  }

  // Applies `action` to `env` (in `parent`'s state) and returns the state it reaches. The
  // kernel of a new state is measured; one that fails to compile, verify or run scores 0.
  absl::StatusOr<Reached> Advance(Env& env, const Node& parent, int action) {
    std::vector<int> path = parent.path;
    path.push_back(action);
    absl::StatusOr<StepResult> r = env.Step({action}, observations_);
    if (!r.ok()) {
      if (Expired()) return r.status();
      // The action was applied; only the measurement failed. Look at the state without it.
      r = env.Step({}, Unmeasured());
      if (!r.ok()) return r.status();
    }
    return Record(std::move(path), *r);
  }

  // The state a step observed, registered as visited (and measured, counted and compared with the
  // best when new).
  absl::StatusOr<Reached> Record(std::vector<int> path, const StepResult& r) {
    absl::StatusOr<Node> node = ToNode(std::move(path), r);
    if (!node.ok()) return node.status();
    auto [it, inserted] = visited_.emplace(node->ir, *node);
    if (!inserted) {
      Node seen = it->second;
      seen.path = std::move(node->path);
      return Reached{std::move(seen), /*is_new=*/false};
    }
    ++progress_.states_evaluated;
    if (node->gflops > best_.gflops) best_ = *node;
    Report();
    return Reached{*std::move(node), /*is_new=*/true};
  }

  // The server's cost model's guess (predicted_gflops) for the state `path` reaches, untimed:
  // `gflops` is 0 while the model has learned too little or the server has none.
  struct Prediction {
    double gflops = 0;
    bool visited = false;  // the state was visited before
  };
  absl::StatusOr<Prediction> Predict(const std::vector<int>& path) {
    absl::StatusOr<Env> env = start_.Fork();
    if (!env.ok()) return env.status();
    env->set_deadline(deadline_);
    absl::StatusOr<StepResult> r = env->Step(path, {"ir", "predicted_gflops"});
    if (!r.ok()) {
      if (r.status().code() == absl::StatusCode::kUnimplemented) return Prediction{};
      return r.status();
    }
    return Prediction{r->Find("predicted_gflops")->number,
                      visited_.count(r->Find("ir")->text) > 0};
  }

  // The fastest of the best `k` distinct kernels visited and the start, each timed again
  // (Env::Remeasure, in that order) while the time limit lasts, with its re-timed GFLOPS;
  // nullopt when none could be re-timed. Also the start's re-timed GFLOPS (0 when it was not).
  struct Retimed {
    Node node;
    double gflops = 0, start_gflops = 0;
  };
  std::optional<Retimed> RetimeBest(int k) {
    std::vector<const Node*> nodes;
    for (const auto& [ir, node] : visited_) {
      if (node.gflops > 0 && node.ir != root_.ir) nodes.push_back(&node);
    }
    std::stable_sort(nodes.begin(), nodes.end(),
                     [](const Node* a, const Node* b) { return a->gflops > b->gflops; });
    // The best first and the start last: a slow start (an untiled convolution re-times for
    // seconds) must not use up the time the winners need.
    std::vector<const Node*> candidates;
    std::set<std::string> kernels = {KernelKey(root_.ir)};
    for (const Node* n : nodes) {
      if (static_cast<int>(candidates.size()) >= k) break;
      if (kernels.insert(KernelKey(n->ir)).second) candidates.push_back(n);
    }
    candidates.push_back(&root_);
    std::optional<Retimed> best;
    double start_gflops = 0;
    for (const Node* n : candidates) {
      if (Elapsed() >= options_.time_limit_seconds) break;
      absl::StatusOr<Env> env = start_.Fork();
      if (!env.ok()) break;
      if (!n->path.empty() && !env->Step(n->path).ok()) continue;
      absl::StatusOr<double> g = env->Remeasure();
      if (!g.ok()) continue;
      if (n == &root_) start_gflops = *g;
      if (!best.has_value() || *g > best->gflops) best = Retimed{*n, *g, 0};
    }
    if (best.has_value()) best->start_gflops = start_gflops;
    return best;
  }

  // The children of `parent` (whose state `env` holds), best first: only states never seen
  // before, or with SeenChildren::kInclude also those (from the cache, not measured again).
  absl::StatusOr<std::vector<Node>> Expand(const Env& env, const Node& parent,
                                           SeenChildren seen = SeenChildren::kSkip) {
    std::vector<Node> children;
    for (int a = 0; a < static_cast<int>(parent.mask.size()) && !Expired(); ++a) {
      if (!parent.mask[a]) continue;
      absl::StatusOr<Env> child = env.Fork();
      if (!child.ok()) return child.status();
      absl::StatusOr<Reached> reached = Advance(*child, parent, a);
      if (!reached.ok()) return reached.status();
      if (reached->is_new || seen == SeenChildren::kInclude) {
        children.push_back(std::move(reached->node));
      }
    }
    std::stable_sort(children.begin(), children.end(),
                     [](const Node& a, const Node& b) { return a.gflops > b.gflops; });
    return children;
  }

 private:
  // A state's kernel: its ir without the cursor (which does not change the kernel).
  static std::string KernelKey(const std::string& ir) {
    std::string out;
    for (absl::string_view line : absl::StrSplit(ir, '\n')) {
      if (!absl::StartsWith(line, "cursor")) absl::StrAppend(&out, line, "\n");
    }
    return out;
  }

  // The observations of a state whose kernel could not be measured: all but flops.
  std::vector<std::string> Unmeasured() const {
    std::vector<std::string> out;
    for (const std::string& o : observations_) {
      if (o != "flops") out.push_back(o);
    }
    return out;
  }

  // The node of a step that observed ir, loop_tree, action_mask and, when the kernel could be
  // measured, flops (and loops_tensor when asked for).
  static absl::StatusOr<Node> ToNode(std::vector<int> path, const StepResult& r) {
    const Value* ir = r.Find("ir");
    const Value* loop_tree = r.Find("loop_tree");
    const Value* mask = r.Find("action_mask");
    if (ir == nullptr || loop_tree == nullptr || mask == nullptr) {
      return absl::InternalError("a search step did not observe ir, loop_tree and action_mask");
    }
    Node n;
    n.path = std::move(path);
    n.ir = ir->text;
    n.loop_tree = loop_tree->text;
    if (const Value* flops = r.Find("flops")) n.gflops = flops->number;
    n.mask = mask->bools;
    if (const Value* features = r.Find("loops_tensor")) n.features = features->floats;
    return n;
  }

  void Report() {
    progress_.best_gflops = best_.gflops;
    progress_.elapsed_seconds = Elapsed();
    if (options_.on_progress) options_.on_progress(progress_);
  }

  const Env& start_;
  const SearchOptions& options_;
  const std::vector<std::string>& observations_;
  const Clock::time_point t0_;
  const double limit_;  // seconds for the algorithm; the rest of the time limit re-times
  const absl::Time deadline_;
  Node root_, best_;
  std::map<std::string, Node> visited_;  // by ir (program, schedule and cursor)
  SearchProgress progress_;
};

// Greedy with lookahead: the best node within `lookahead` actions; move by its first action.
absl::Status Greedy(Searcher& s, int lookahead, int depth) {
  Node current = s.root();
  for (int step = 0; step < depth && !s.Expired(); ++step) {
    absl::StatusOr<Env> env = s.Materialize(current);
    if (!env.ok()) return env.status();
    // All paths of up to `lookahead` actions, level by level; remember each one's first child.
    std::vector<std::pair<Node, Node>> level;  // (node, first-level ancestor)
    // Lookahead revisits states seen from the previous position: include them (cached).
    absl::StatusOr<std::vector<Node>> children = s.Expand(*env, current, SeenChildren::kInclude);
    if (!children.ok()) return children.status();
    for (Node& c : *children) level.emplace_back(c, c);
    std::optional<std::pair<Node, Node>> best;
    for (int d = 1; d <= lookahead; ++d) {
      std::vector<std::pair<Node, Node>> next;
      for (auto& [node, first] : level) {
        if (!best || node.gflops > best->first.gflops) best = std::make_pair(node, first);
        if (d == lookahead || s.Expired()) continue;
        absl::StatusOr<Env> e = s.Materialize(node);
        if (!e.ok()) return e.status();
        absl::StatusOr<std::vector<Node>> grand = s.Expand(*e, node, SeenChildren::kInclude);
        if (!grand.ok()) return grand.status();
        for (Node& g : *grand) next.emplace_back(g, first);
      }
      level = std::move(next);
    }
    if (!best || best->first.gflops <= current.gflops) break;  // nothing improves: stop
    current = best->second;
  }
  return absl::OkStatus();
}

absl::Status BeamDfs(Searcher& s, const Env& env, const Node& node, int width, int depth) {
  if (depth == 0 || s.Expired()) return absl::OkStatus();
  absl::StatusOr<std::vector<Node>> children = s.Expand(env, node);
  if (!children.ok()) return children.status();
  for (int i = 0; i < std::min<int>(width, children->size()) && !s.Expired(); ++i) {
    absl::StatusOr<Env> child = s.Materialize((*children)[i]);
    if (!child.ok()) return child.status();
    absl::Status st = BeamDfs(s, *child, (*children)[i], width, depth - 1);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status BeamBfs(Searcher& s, int width, int depth) {
  std::vector<Node> frontier = {s.root()};
  for (int d = 0; d < depth && !frontier.empty() && !s.Expired(); ++d) {
    std::vector<Node> next;
    for (const Node& node : frontier) {
      if (s.Expired()) break;
      absl::StatusOr<Env> env = s.Materialize(node);
      if (!env.ok()) return env.status();
      absl::StatusOr<std::vector<Node>> children = s.Expand(*env, node);
      if (!children.ok()) return children.status();
      for (int i = 0; i < std::min<int>(width, children->size()); ++i) {
        next.push_back((*children)[i]);
      }
    }
    frontier = std::move(next);
  }
  return absl::OkStatus();
}

absl::Status Random(Searcher& s, int depth, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto legal_actions = [](const Node& node) {
    std::vector<int> legal;
    for (int a = 0; a < static_cast<int>(node.mask.size()); ++a) {
      if (node.mask[a]) legal.push_back(a);
    }
    return legal;
  };
  if (legal_actions(s.root()).empty()) return absl::OkStatus();  // nothing to try
  while (!s.Expired()) {
    absl::StatusOr<Env> env = s.Materialize(s.root());
    if (!env.ok()) return env.status();
    Node node = s.root();
    for (int d = 0; d < depth && !s.Expired(); ++d) {
      const std::vector<int> legal = legal_actions(node);
      if (legal.empty()) break;
      absl::StatusOr<Reached> next = s.Advance(*env, node, legal[rng() % legal.size()]);
      if (!next.ok()) return next.status();
      node = std::move(next->node);  // a state seen before: walk on from it, not measured again
    }
  }
  return absl::OkStatus();
}

// Evolution: a population of the best states found, each known by its path (its genome). Seeded
// by the server's sketches (LoopNest-style register blocks, measured first within half the
// time) or, when fewer than two of those measure, by the policy's episode and random rollouts
// from the start (16, or 4 after a policy seed);
// then, until the time limit, a parent drawn by tournament (best of 3) is varied and the child's
// state measured: extended by 1-3 random legal actions (a rollout continued from a good state),
// cut back by 1-3 actions and extended again, one action of its path replaced by a random one
// legal in its state, or crossed with another member (a prefix of one, the suffix of the
// other). Once the server's cost model predicts, each generation proposes `candidates` such
// children instead (extensions unmeasured), asks the model about each and measures one of the
// better half. Paths longer than twice the episode length are cut. A child enters the
// population when it beats the worst member, which leaves; every state measured on the way
// counts for the best.
// A policy that acts in another space whose action names the session's space has: index i of
// the policy's space is session action map[i].
struct MappedPolicy {
  const Policy* policy = nullptr;
  std::vector<int> map;
};

// The policy's greedy episode from the root, its actions mapped into the session's space:
// returns the best state on the way (the root when none was better).
absl::StatusOr<Node> MappedPolicyEpisode(Searcher& s, const MappedPolicy& p, int depth) {
  absl::StatusOr<Env> env = s.Materialize(s.root());
  if (!env.ok()) return env.status();
  Node node = s.root(), best = s.root();
  for (int d = 0; d < depth && !s.Expired(); ++d) {
    std::vector<bool> mask(p.map.size());
    for (size_t i = 0; i < p.map.size(); ++i) mask[i] = node.mask[p.map[i]];
    const std::vector<int> ranked = RankActions(p.policy->Scores(node.features), mask);
    if (ranked.empty()) break;
    absl::StatusOr<Reached> next = s.Advance(*env, node, p.map[ranked.front()]);
    if (!next.ok()) return next.status();
    node = std::move(next->node);
    if (node.gflops > best.gflops) best = node;
  }
  return best;
}

absl::Status Evolution(Searcher& s, int depth, uint64_t seed, const MappedPolicy* seed_policy,
                       const std::function<std::vector<int>()>& seed_path,
                       const std::vector<std::vector<int>>& sketches, int candidates) {
  constexpr size_t kPopulation = 16;
  constexpr size_t kSeededRollouts = 4;
  std::mt19937_64 rng(seed);
  const auto uniform = [&rng](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  const auto legal_actions = [](const Node& node) {
    std::vector<int> legal;
    for (int a = 0; a < static_cast<int>(node.mask.size()); ++a) {
      if (node.mask[a]) legal.push_back(a);
    }
    return legal;
  };
  if (depth == 0 || legal_actions(s.root()).empty()) return absl::OkStatus();  // nothing to try
  std::vector<Node> population = {s.root()};
  const auto admit = [&population](const Node& node) {
    for (const Node& p : population) {
      if (p.ir == node.ir) return;
    }
    if (population.size() < kPopulation) {
      population.push_back(node);
      return;
    }
    auto worst = std::min_element(population.begin(), population.end(),
                                  [](const Node& a, const Node& b) { return a.gflops < b.gflops; });
    if (node.gflops > worst->gflops) *worst = node;
  };
  // Walks up to `steps` random legal actions from `node`; admits the best state on the way.
  const auto rollout = [&](Node node, int steps) -> absl::Status {
    absl::StatusOr<Env> env = s.Materialize(node);
    if (!env.ok()) return env.status();
    Node best_seen;
    for (int d = 0; d < steps && !s.Expired(); ++d) {
      const std::vector<int> legal = legal_actions(node);
      if (legal.empty()) break;
      absl::StatusOr<Reached> next = s.Advance(*env, node, legal[uniform(legal.size())]);
      if (!next.ok()) return next.status();
      node = std::move(next->node);
      if (node.gflops > best_seen.gflops) best_seen = node;
    }
    if (best_seen.gflops > 0) admit(best_seen);
    return absl::OkStatus();
  };
  const auto tournament = [&]() -> const Node& {
    const Node* best = &population[uniform(population.size())];
    for (int i = 0; i < 2; ++i) {
      const Node& other = population[uniform(population.size())];
      if (other.gflops > best->gflops) best = &other;
    }
    return *best;
  };
  // The server's sketches first (LoopNest-style register blocks; each one measurement), within
  // half the time; when two or more measure, the policy seeds nothing.
  size_t sketched = 0;
  for (const std::vector<int>& path : sketches) {
    if (s.Elapsed() >= s.limit() / 2 || s.Expired()) break;
    absl::StatusOr<Reached> reached = s.EvaluatePath(path);
    if (!reached.ok()) return reached.status();
    if (reached->node.gflops > 0 && reached->node.ir != s.root().ir) {
      admit(reached->node);
      ++sketched;
    }
  }
  if (seed_policy != nullptr && sketched < 2) {
    absl::StatusOr<Node> seeded = MappedPolicyEpisode(s, *seed_policy, depth);
    if (!seeded.ok()) return seeded.status();
    if (seeded->ir != s.root().ir) admit(*seeded);
  }
  if (const std::vector<int> seed = sketched < 2 && seed_path ? seed_path() : std::vector<int>{};
      !seed.empty()) {
    absl::StatusOr<Reached> seeded = s.EvaluatePath(seed);
    if (!seeded.ok()) return seeded.status();
    if (seeded->node.gflops > 0 && seeded->node.ir != s.root().ir) admit(seeded->node);
  }
  // Random rollouts from the start fill the population; after a seed, a few suffice (each
  // measures up to `depth` states, most of them slow: in loop_nest every one is a new kernel),
  // and variations of the seed fill the rest.
  // Sketches make random rollouts from the start (slow, untiled states) unnecessary.
  const size_t rollouts =
      sketched >= 2 ? 0 : population.size() > 1 ? kSeededRollouts : kPopulation;
  for (size_t i = 0; i < rollouts && !s.Expired(); ++i) {
    absl::Status st = rollout(s.root(), depth);
    if (!st.ok()) return st;
  }
  const size_t max_path = 2 * static_cast<size_t>(depth);
  // A child's path by variation `op` (0 extend, 1 cut and extend, 2 replace, 3 cross), with
  // nothing measured on the way: the actions added are legal in the parent's state (later ones
  // may have no effect, and the server skips them).
  const auto vary = [&](const Node& parent, int op) {
    std::vector<int> path = parent.path;
    const std::vector<int> legal = legal_actions(parent);
    const auto some_legal = [&] {
      return legal.empty() ? uniform(parent.mask.size()) : legal[uniform(legal.size())];
    };
    if (path.empty()) op = 0;
    if (op == 0 || op == 1) {
      if (op == 1) path.resize(path.size() - std::min<size_t>(path.size(), 1 + uniform(3)));
      for (int n = 1 + uniform(3); n > 0; --n) path.push_back(some_legal());
    } else if (op == 2) {
      path[uniform(path.size())] = some_legal();
    } else {
      const Node& other = tournament();
      const size_t a = uniform(path.size() + 1), b = uniform(other.path.size() + 1);
      path.resize(a);
      path.insert(path.end(), other.path.begin() + b, other.path.end());
    }
    if (path.size() > max_path) path.resize(max_path);
    return path;
  };
  // Without the model: one child varied and measured, rollouts measuring every state they pass.
  const auto vary_and_measure = [&]() -> absl::Status {
    const Node parent = tournament();
    absl::Status st;
    const int op = uniform(4);
    if (op == 0 || parent.path.empty()) {
      st = rollout(parent, 1 + uniform(3));
    } else if (op == 1) {
      std::vector<int> path = parent.path;
      path.resize(path.size() - std::min<size_t>(path.size(), 1 + uniform(3)));
      absl::StatusOr<Reached> cut = s.EvaluatePath(std::move(path));
      if (!cut.ok()) return cut.status();
      st = rollout(cut->node, 1 + uniform(3));
    } else {
      std::vector<int> path = vary(parent, op);
      absl::StatusOr<Reached> child = s.EvaluatePath(std::move(path));
      if (!child.ok()) return child.status();
      if (child->node.gflops > 0) admit(child->node);
    }
    return st;
  };
  // With the cost model: `candidates` children proposed, one of the half it ranks best measured.
  // Until the model predicts (it learns from the server's first measurements), and on a server
  // without one, children are measured as they come (below).
  int64_t model_checked_at = -8;
  bool model_ready = false;
  while (!s.Expired()) {
    if (candidates > 1 && !model_ready && s.evaluated() - model_checked_at >= 8) {
      model_checked_at = s.evaluated();
      absl::StatusOr<Searcher::Prediction> p = s.Predict({});
      if (!p.ok()) return s.Expired() ? absl::OkStatus() : p.status();
      model_ready = p->gflops > 0;
    }
    if (!model_ready) {
      absl::Status st = vary_and_measure();
      if (!st.ok()) return st;
      continue;
    }
    std::vector<std::pair<double, std::vector<int>>> ranked;
    for (int c = 0; c < candidates && !s.Expired(); ++c) {
      std::vector<int> path = vary(tournament(), uniform(4));
      absl::StatusOr<Searcher::Prediction> p = s.Predict(path);
      if (!p.ok()) return s.Expired() ? absl::OkStatus() : p.status();
      if (!p->visited && p->gflops > 0) ranked.emplace_back(p->gflops, std::move(path));
    }
    if (ranked.empty()) continue;  // every candidate was a state seen before
    // One of the better half, at random: the model weeds out the slow, but its argmax alone
    // would narrow the search to what it already believes.
    std::sort(ranked.begin(), ranked.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    const int top = static_cast<int>((ranked.size() + 1) / 2);
    absl::StatusOr<Reached> child = s.EvaluatePath(std::move(ranked[uniform(top)].second));
    if (!child.ok()) return child.status();
    if (child->node.gflops > 0) admit(child->node);
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT unless `policy` acts in `start`'s action space (a sketch_value policy: the
// session runs in the space of its sketches' names).
absl::Status CheckPolicyFits(const Policy& policy, const Env& start) {
  if (policy.kind() == Policy::Kind::kSketchValue) {
    if (start.action_space() == policy.action_space()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "a sketch_value policy chooses among the server's sketches, in ", policy.action_space(),
        "; the session's action space is ", start.action_space()));
  }
  if (policy.num_actions() != static_cast<int>(start.action_names().size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the policy acts in a space of ", policy.num_actions(), " actions (",
        policy.action_space(), "); the session's has ", start.action_names().size()));
  }
  return absl::OkStatus();
}

// `policy` with its actions mapped by name into `start`'s space, or nullopt when the server
// does not list the policy's space or the session's space lacks one of its actions.
std::optional<MappedPolicy> MapPolicy(const Policy& policy, const Env& start) {
  absl::StatusOr<std::vector<std::string>> names =
      start.connection()->ActionNames(policy.action_space());
  if (!names.ok() || static_cast<int>(names->size()) != policy.num_actions()) return std::nullopt;
  MappedPolicy mapped{&policy, {}};
  for (const std::string& name : *names) {
    const int index = start.ActionIndex(name);
    if (index < 0) return std::nullopt;
    mapped.map.push_back(index);
  }
  return mapped;
}

absl::Status CheckFeatures(const Policy& policy, const std::vector<float>& features) {
  if (static_cast<int>(features.size()) != policy.input_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the policy reads ", policy.input_size(), " numbers of ", policy.observation_space(),
        "; the server sends ", features.size(), " (another --max_loops?)"));
  }
  return absl::OkStatus();
}

// A sketch (its actions, indices of the session's space) and the policy's value of the state
// it leads to.
struct ValuedSketch {
  std::vector<int> path;
  float value = 0;
};

// The server's sketches of `start` (its `sketches` observation), best value first (ties: the
// server's order), each scored by a sketch_value `policy` on the `loops_tensor` of the state it
// leads to, reached on a fork with no kernel timed. Empty when the server has none for this nest.
absl::StatusOr<std::vector<ValuedSketch>> RankSketches(const Env& start, const Policy& policy,
                                                       absl::Time deadline) {
  absl::StatusOr<Env> probe = start.Fork();
  if (!probe.ok()) return probe.status();
  probe->set_deadline(deadline);
  absl::StatusOr<Value> text = probe->Observe("sketches");
  if (!text.ok()) return text.status();
  std::vector<ValuedSketch> ranked;
  for (absl::string_view line : absl::StrSplit(text->text, '\n', absl::SkipEmpty())) {
    ValuedSketch sketch;
    for (absl::string_view name : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      const int index = start.ActionIndex(std::string(name));
      if (index < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the server's sketch action '", name, "' is not in the session's space"));
      }
      sketch.path.push_back(index);
    }
    absl::StatusOr<Env> after = probe->Fork();
    if (!after.ok()) return after.status();
    absl::StatusOr<StepResult> r = after->Step(sketch.path, {"loops_tensor"});
    if (!r.ok()) return r.status();
    const std::vector<float>& features = r->Find("loops_tensor")->floats;
    absl::Status ok = CheckFeatures(policy, features);
    if (!ok.ok()) return ok;
    sketch.value = policy.Scores(features).front();
    ranked.push_back(std::move(sketch));
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const ValuedSketch& a, const ValuedSketch& b) {
    return a.value > b.value;
  });
  return ranked;
}

// An episode's result: `env`'s final state, timed (the only kernel the episode times).
absl::StatusOr<SearchResult> FinishEpisode(Env& env, SearchResult out, Clock::time_point t0) {
  absl::StatusOr<StepResult> last = env.Step({}, {"ir", "loop_tree", "flops", "peak_gflops"});
  if (!last.ok()) return last.status();
  out.ir = last->Find("ir")->text;
  out.loop_tree = last->Find("loop_tree")->text;
  out.gflops = last->Find("flops")->number;
  out.search_gflops = out.gflops;
  out.peak_gflops = last->Find("peak_gflops")->number;
  out.states_evaluated = 1;
  out.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

// policy: the policy's greedy episode of `depth` actions on a fork, with no kernel timed but the
// final state's. A sketch_value policy's episode is one choice: the sketch whose state it values
// most (RankSketches); none when the server has no sketch for the nest (the start stands).
absl::StatusOr<SearchResult> PolicyEpisode(const Env& start, const SearchOptions& options,
                                           const Policy& policy) {
  const Clock::time_point t0 = Clock::now();
  absl::Status fits = CheckPolicyFits(policy, start);
  if (!fits.ok()) return fits;
  absl::StatusOr<Env> env = start.Fork();
  if (!env.ok()) return env.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(options.time_limit_seconds);
  env->set_deadline(deadline);
  SearchResult out;
  if (policy.kind() == Policy::Kind::kSketchValue) {
    absl::StatusOr<std::vector<ValuedSketch>> ranked = RankSketches(start, policy, deadline);
    if (!ranked.ok()) return ranked.status();
    if (!ranked->empty()) {
      absl::StatusOr<StepResult> r = env->Step(ranked->front().path);
      if (!r.ok()) return r.status();
      for (int a : ranked->front().path) out.actions.push_back(start.action_names()[a]);
    }
    return FinishEpisode(*env, std::move(out), t0);
  }
  const std::vector<std::string> observe = {"loops_tensor", "action_mask"};
  absl::StatusOr<StepResult> r = env->Step({}, observe);
  if (!r.ok()) return r.status();
  for (int d = 0; d < options.depth; ++d) {
    const std::vector<float>& features = r->Find("loops_tensor")->floats;
    absl::Status ok = CheckFeatures(policy, features);
    if (!ok.ok()) return ok;
    const int action = policy.Act(features, r->Find("action_mask")->bools);
    if (action < 0) break;
    r = env->Step({action}, observe);
    if (!r.ok()) return r.status();
    out.actions.push_back(start.action_names()[action]);
  }
  return FinishEpisode(*env, std::move(out), t0);
}

}  // namespace

std::vector<std::string> CursorToLevelActions(const std::vector<std::string>& cursor_actions) {
  std::vector<std::string> out;
  int c = 0;
  for (const std::string& a : cursor_actions) {
    if (a == "up") {
      --c;
    } else if (a == "down") {
      ++c;
    } else if (a == "swap_down") {
      out.push_back(absl::StrCat("interchange_L", c, "_L", c + 1));
      ++c;
    } else if (a == "swap_up") {
      out.push_back(absl::StrCat("interchange_L", c, "_L", c - 1));
      --c;
    } else if (a == "unroll" || a == "vectorize") {
      out.push_back(absl::StrCat(a, "_L", c));
    } else if (absl::StartsWith(a, "split_")) {
      out.push_back(absl::StrCat("tile_L", c, "_", a.substr(6)));
    } else {
      break;
    }
    if (c < 0) break;
  }
  return out;
}

namespace {

// evolution's seed where the policy cannot act in the session's space (a cursor policy, a
// level-pointer space): the policy's greedy episode on a session of its own space on the same
// benchmark, translated by name into the session's space (CursorToLevelActions), as far as the
// translation goes. Empty when the start is not the benchmark's initial state (a stored schedule
// replayed), the policy does not fit, or the session's space lacks the translated names.
std::vector<int> TranslatedPolicySeed(const Env& start, const SearchOptions& options,
                                      const Policy& policy) {
  absl::StatusOr<Env> own = Env::Start(start.connection(), start.benchmark(),
                                       policy.action_space());
  if (!own.ok()) return {};
  const absl::Time deadline = absl::Now() + absl::Seconds(options.time_limit_seconds / 4);
  own->set_deadline(deadline);
  absl::StatusOr<Value> own_ir = own->Observe("ir");
  absl::StatusOr<Env> probe = start.Fork();
  if (!own_ir.ok() || !probe.ok()) return {};
  probe->set_deadline(deadline);
  absl::StatusOr<Value> start_ir = probe->Observe("ir");
  if (!start_ir.ok() || start_ir->text != own_ir->text) return {};
  SearchOptions within = options;  // the episode's own calls end at the same deadline
  within.time_limit_seconds = options.time_limit_seconds / 4;
  absl::StatusOr<SearchResult> episode = PolicyEpisode(*own, within, policy);
  if (!episode.ok()) return {};
  std::vector<int> path;
  for (const std::string& name : CursorToLevelActions(episode->actions)) {
    const int index = start.ActionIndex(name);
    if (index < 0) break;
    path.push_back(index);
  }
  return path;
}

// evolution's sketches: the server's `sketches` observation of the start state, each line's
// action names as indices of the session's space; lines with a name the space lacks (every
// line, outside loop_nest) are left out, as is everything on a server without the observation
// or one that does not answer within a quarter of the time limit.
std::vector<std::vector<int>> SketchPaths(const Env& start, const SearchOptions& options) {
  absl::StatusOr<Env> probe = start.Fork();
  if (!probe.ok()) return {};
  probe->set_deadline(absl::Now() + absl::Seconds(options.time_limit_seconds / 4));
  absl::StatusOr<Value> text = probe->Observe("sketches");
  if (!text.ok()) return {};
  std::vector<std::vector<int>> paths;
  for (absl::string_view line : absl::StrSplit(text->text, '\n', absl::SkipEmpty())) {
    std::vector<int> path;
    for (absl::string_view name : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      const int index = start.ActionIndex(std::string(name));
      if (index < 0) {
        path.clear();
        break;
      }
      path.push_back(index);
    }
    if (!path.empty()) paths.push_back(std::move(path));
  }
  return paths;
}

// policy_guided: the policy's own episode first (every state on it measured), then best-first
// over the measured states: the best one not yet expanded gets children by the policy's
// `width` top-ranked actions. Paths stay within twice the episode length.
absl::Status PolicyGuided(Searcher& s, const Policy& policy, int width, int depth) {
  absl::Status ok = CheckFeatures(policy, s.root().features);
  if (!ok.ok()) return ok;
  const auto ranked = [&policy](const Node& node) {
    return RankActions(policy.Scores(node.features), node.mask);
  };
  std::vector<Node> frontier;  // measured, not yet expanded
  {
    absl::StatusOr<Env> env = s.Materialize(s.root());
    if (!env.ok()) return env.status();
    Node node = s.root();
    for (int d = 0; d < depth && !s.Expired(); ++d) {
      const std::vector<int> actions = ranked(node);
      if (actions.empty()) break;
      absl::StatusOr<Reached> next = s.Advance(*env, node, actions.front());
      if (!next.ok()) return next.status();
      node = std::move(next->node);
      if (next->is_new) frontier.push_back(node);
    }
  }
  frontier.push_back(s.root());
  const size_t max_path = 2 * static_cast<size_t>(depth);
  while (!frontier.empty() && !s.Expired()) {
    auto best = std::max_element(frontier.begin(), frontier.end(), [](const Node& a, const Node& b) {
      return a.gflops < b.gflops;
    });
    const Node parent = std::move(*best);
    frontier.erase(best);
    if (parent.path.size() >= max_path) continue;
    absl::StatusOr<Env> env = s.Materialize(parent);
    if (!env.ok()) return env.status();
    const std::vector<int> actions = ranked(parent);
    for (int i = 0; i < std::min<int>(width, actions.size()) && !s.Expired(); ++i) {
      absl::StatusOr<Env> child = env->Fork();
      if (!child.ok()) return child.status();
      absl::StatusOr<Reached> next = s.Advance(*child, parent, actions[i]);
      if (!next.ok()) return next.status();
      if (next->is_new) frontier.push_back(std::move(next->node));
    }
  }
  return absl::OkStatus();
}

// The searches by name, in the order of the usage text.
const std::vector<std::pair<std::string, SearchSpec>>& Searches() {
  using Kind = SearchSpec::Kind;
  static const auto* const searches = new std::vector<std::pair<std::string, SearchSpec>>{
      {"greedy1", {Kind::kGreedy, 0, 1}},   {"greedy2", {Kind::kGreedy, 0, 2}},
      {"beam2dfs", {Kind::kBeamDfs, 2, 0}}, {"beam4dfs", {Kind::kBeamDfs, 4, 0}},
      {"beam2bfs", {Kind::kBeamBfs, 2, 0}}, {"beam4bfs", {Kind::kBeamBfs, 4, 0}},
      {"random", {Kind::kRandom, 0, 0}},    {"evolution", {Kind::kEvolution, 0, 0}},
      {"policy", {Kind::kPolicy, 0, 0}},    {"policy_guided", {Kind::kPolicyGuided, 0, 0}}};
  return *searches;
}

}  // namespace

std::string SearchSpec::Name() const {
  switch (kind) {
    case Kind::kGreedy:
      return absl::StrCat("greedy", lookahead);
    case Kind::kBeamDfs:
      return absl::StrCat("beam", width, "dfs");
    case Kind::kBeamBfs:
      return absl::StrCat("beam", width, "bfs");
    case Kind::kRandom:
      return "random";
    case Kind::kEvolution:
      return "evolution";
    case Kind::kPolicy:
      return "policy";
    case Kind::kPolicyGuided:
      return "policy_guided";
  }
  return "unknown";
}

absl::StatusOr<SearchSpec> ParseSearch(absl::string_view name) {
  for (const auto& [n, spec] : Searches()) {
    if (n == name) return spec;
  }
  std::vector<std::string> names = SearchAlgorithms();
  const std::string last = names.back();
  names.pop_back();
  return absl::InvalidArgumentError(absl::StrCat("unknown search '", name, "': use ",
                                                 absl::StrJoin(names, ", "), " or ", last));
}

const std::vector<std::string>& SearchAlgorithms() {
  static const auto* const names = [] {
    auto* names = new std::vector<std::string>;
    for (const auto& [n, spec] : Searches()) names->push_back(n);
    return names;
  }();
  return *names;
}

absl::StatusOr<SearchResult> Search(const Env& start, const SearchOptions& options) {
  const SearchSpec& spec = options.search;
  using Kind = SearchSpec::Kind;
  if (spec.kind == Kind::kGreedy && spec.lookahead < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a greedy search needs a lookahead of 1 or more, not ", spec.lookahead));
  }
  if ((spec.kind == Kind::kBeamDfs || spec.kind == Kind::kBeamBfs) && spec.width < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a beam search needs a width of 1 or more, not ", spec.width));
  }
  // evolution's seed is LoopTune's policy unless one is given; the policy searches' is the default.
  const Policy& policy = options.policy != nullptr ? *options.policy
                         : spec.kind == Kind::kEvolution ? Policy::LoopTuneDqn()
                                                         : Policy::Default();
  const bool sketch_value = policy.kind() == Policy::Kind::kSketchValue;
  if (spec.kind == Kind::kPolicy) return PolicyEpisode(start, options, policy);
  // evolution's seed: the policy, its actions mapped by name into the session's space.
  std::optional<MappedPolicy> seed_policy;
  if (spec.kind == Kind::kEvolution && options.policy_seed && options.depth > 0 &&
      !sketch_value) {
    seed_policy = MapPolicy(policy, start);
  }
  // The clock starts here: ranking sketches below counts against the limit.
  Searcher s(start, options, /*with_features=*/(spec.kind == Kind::kPolicyGuided &&
                                                !sketch_value) ||
                                 seed_policy.has_value());
  // Ranking sketches (forks and untimed steps) may take a quarter of the search's time.
  const auto ranking_deadline = [&] {
    return std::min(s.deadline(), absl::Now() + absl::Seconds(options.time_limit_seconds / 4));
  };
  // policy_guided with a sketch_value policy: evolution from the sketches the policy values in
  // its top half (at least two), measured in its order; the rest are never timed. Sketches not
  // ranked in time: evolution from the start alone.
  std::vector<std::vector<int>> guided_sketches;
  if (spec.kind == Kind::kPolicyGuided) {
    absl::Status fits = CheckPolicyFits(policy, start);
    if (!fits.ok()) return fits;
    if (sketch_value) {
      absl::StatusOr<std::vector<ValuedSketch>> ranked =
          RankSketches(start, policy, ranking_deadline());
      if (!ranked.ok() && !absl::IsDeadlineExceeded(ranked.status())) return ranked.status();
      if (ranked.ok()) {
        const size_t keep =
            std::min(ranked->size(), std::max<size_t>(2, (ranked->size() + 1) / 2));
        for (size_t i = 0; i < keep; ++i) guided_sketches.push_back((*ranked)[i].path);
      }
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
  if (!status.ok()) return status;
  switch (spec.kind) {
    case Kind::kGreedy:
      status = Greedy(s, spec.lookahead, options.depth);
      break;
    case Kind::kBeamDfs: {
      absl::StatusOr<Env> root = s.Materialize(s.root());
      status = root.ok() ? BeamDfs(s, *root, s.root(), spec.width, options.depth)
                         : root.status();
      break;
    }
    case Kind::kBeamBfs:
      status = BeamBfs(s, spec.width, options.depth);
      break;
    case Kind::kRandom:
      status = Random(s, options.depth, options.seed);
      break;
    case Kind::kEvolution:
      if (seed_policy.has_value() && !CheckFeatures(policy, s.root().features).ok()) {
        seed_policy.reset();  // another --max_loops: the policy cannot read this server's
      }
      {
        // Or the policy's episode translated (a cursor policy, loop_nest), within the limit.
        const std::vector<std::vector<int>> sketches =
            options.sketches ? SketchPaths(start, options) : std::vector<std::vector<int>>{};
        std::function<std::vector<int>()> seed_path;
        if (!seed_policy.has_value() && options.policy_seed && options.depth > 0) {
          seed_path = [&]() -> std::vector<int> {
            if (!sketch_value) return TranslatedPolicySeed(start, options, policy);
            // A sketch_value policy's seed: the sketch it values most.
            absl::StatusOr<std::vector<ValuedSketch>> ranked =
                RankSketches(start, policy, ranking_deadline());
            if (!ranked.ok() || ranked->empty()) return {};
            return ranked->front().path;
          };
        }
        status = Evolution(s, options.depth, options.seed,
                           seed_policy.has_value() ? &*seed_policy : nullptr, seed_path,
                           sketches,
                           options.time_limit_seconds <= options.cost_model_up_to_seconds
                               ? options.cost_model_candidates
                               : 0);
      }
      break;
    case Kind::kPolicyGuided:
      if (sketch_value) {
        status = Evolution(s, options.depth, options.seed, nullptr, nullptr, guided_sketches,
                           options.time_limit_seconds <= options.cost_model_up_to_seconds
                               ? options.cost_model_candidates
                               : 0);
      } else {
        status = PolicyGuided(s, policy, options.policy_width, options.depth);
      }
      break;
    case Kind::kPolicy:
      break;  // returned above
  }
  // A call cut off by the time limit ends the search; the best so far stands.
  if (!status.ok() && !s.Expired()) return status;
  SearchResult r;
  Node chosen = s.best();
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
    }
  }
  for (int i : chosen.path) r.actions.push_back(start.action_names()[i]);
  r.loop_tree = chosen.loop_tree;
  r.ir = chosen.ir;
  r.peak_gflops = s.peak();
  r.states_evaluated = s.evaluated();
  r.seconds = s.Elapsed();
  return r;
}

}  // namespace looptool::client
