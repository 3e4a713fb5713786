#include "client/cpp/search.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace looptool::client {
namespace {

using Clock = std::chrono::steady_clock;

// What a search knows about one state.
struct Node {
  std::vector<int> path;  // action indices from the start
  std::string ir;         // the state's key (program, schedule and cursor)
  std::string loop_tree;
  double gflops = 0;      // 0 when its kernel could not be measured
  std::vector<bool> mask; // actions that would change the state
};

const std::vector<std::string> kObservations = {"ir", "loop_tree", "flops", "action_mask"};

// State shared by every algorithm: the clock, the visited states, the best one, the progress.
class Searcher {
 public:
  Searcher(const Env& start, const SearchOptions& options)
      : start_(start),
        options_(options),
        t0_(Clock::now()),
        deadline_(absl::Now() + absl::Seconds(options.time_limit_seconds)) {}

  absl::Status Init() {
    absl::StatusOr<Env> env = start_.Fork();
    if (!env.ok()) return env.status();
    env->set_deadline(deadline_);
    std::vector<std::string> observations = kObservations;
    observations.push_back("peak_gflops");
    absl::StatusOr<StepResult> r = env->Step({}, observations);
    if (!r.ok()) return r.status();
    progress_.peak_gflops = r->observations.back().number;
    root_ = ToNode({}, *r);
    visited_.emplace(root_.ir, root_);
    best_ = root_;
    Report();
    return absl::OkStatus();
  }

  bool Expired() const { return Elapsed() >= options_.time_limit_seconds; }
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

  // Applies `action` to `env` (in `parent`'s state) and returns the node it reaches; `is_new`
  // says whether the state was never seen before (a seen one comes from the cache, with this
  // path, and is not counted again). The kernel of a new state is measured; one that fails to
  // compile, verify or run scores 0.
  absl::StatusOr<Node> Advance(Env& env, const Node& parent, int action, bool& is_new) {
    std::vector<int> path = parent.path;
    path.push_back(action);
    absl::StatusOr<StepResult> r = env.Step({action}, kObservations);
    if (!r.ok()) {
      if (Expired()) return r.status();
      // The action was applied; only the measurement failed. Look at the state without it.
      absl::StatusOr<StepResult> plain = env.Step({}, {"ir", "loop_tree", "action_mask"});
      if (!plain.ok()) return plain.status();
      plain->observations.insert(plain->observations.begin() + 2, Value{Value::Kind::kDouble});
      r = std::move(plain);
    }
    Node node = ToNode(std::move(path), *r);
    auto [it, inserted] = visited_.emplace(node.ir, node);
    is_new = inserted;
    if (!inserted) {
      Node seen = it->second;
      seen.path = std::move(node.path);
      return seen;
    }
    ++progress_.states_evaluated;
    if (node.gflops > best_.gflops) best_ = node;
    Report();
    return node;
  }

  // The children of `parent` (whose state `env` holds), best first: only states never seen
  // before, or with `include_seen` also those (from the cache, not measured again).
  absl::StatusOr<std::vector<Node>> Expand(const Env& env, const Node& parent,
                                           bool include_seen = false) {
    std::vector<Node> children;
    for (int a = 0; a < static_cast<int>(parent.mask.size()) && !Expired(); ++a) {
      if (!parent.mask[a]) continue;
      absl::StatusOr<Env> child = env.Fork();
      if (!child.ok()) return child.status();
      bool is_new = false;
      absl::StatusOr<Node> node = Advance(*child, parent, a, is_new);
      if (!node.ok()) return node.status();
      if (is_new || include_seen) children.push_back(*std::move(node));
    }
    std::stable_sort(children.begin(), children.end(),
                     [](const Node& a, const Node& b) { return a.gflops > b.gflops; });
    return children;
  }

 private:
  static Node ToNode(std::vector<int> path, const StepResult& r) {
    Node n;
    n.path = std::move(path);
    n.ir = r.observations[0].text;
    n.loop_tree = r.observations[1].text;
    n.gflops = r.observations[2].number;
    n.mask = r.observations[3].bools;
    return n;
  }

  void Report() {
    progress_.best_gflops = best_.gflops;
    progress_.elapsed_seconds = Elapsed();
    if (options_.on_progress) options_.on_progress(progress_);
  }

  const Env& start_;
  const SearchOptions& options_;
  const Clock::time_point t0_;
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
    absl::StatusOr<std::vector<Node>> children = s.Expand(*env, current, /*include_seen=*/true);
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
        absl::StatusOr<std::vector<Node>> grand = s.Expand(*e, node, /*include_seen=*/true);
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
      bool is_new = false;
      absl::StatusOr<Node> next = s.Advance(*env, node, legal[rng() % legal.size()], is_new);
      if (!next.ok()) return next.status();
      node = *std::move(next);  // a state seen before: walk on from it, not measured again
    }
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& SearchAlgorithms() {
  static const auto* const names = new std::vector<std::string>{
      "greedy1", "greedy2", "beam2dfs", "beam4dfs", "beam2bfs", "beam4bfs", "random"};
  return *names;
}

absl::StatusOr<SearchResult> Search(const Env& start, const SearchOptions& options) {
  const std::string& a = options.algorithm;
  if (std::find(SearchAlgorithms().begin(), SearchAlgorithms().end(), a) ==
      SearchAlgorithms().end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown search '", a, "': use greedy1, greedy2, beam2dfs, beam4dfs, beam2bfs, beam4bfs "
        "or random"));
  }
  Searcher s(start, options);
  absl::Status status = s.Init();
  if (!status.ok()) return status;
  if (a == "greedy1" || a == "greedy2") {
    status = Greedy(s, a == "greedy1" ? 1 : 2, options.depth);
  } else if (a == "beam2dfs" || a == "beam4dfs") {
    absl::StatusOr<Env> root = s.Materialize(s.root());
    status = root.ok() ? BeamDfs(s, *root, s.root(), a == "beam2dfs" ? 2 : 4, options.depth)
                       : root.status();
  } else if (a == "beam2bfs" || a == "beam4bfs") {
    status = BeamBfs(s, a == "beam2bfs" ? 2 : 4, options.depth);
  } else {
    status = Random(s, options.depth, options.seed);
  }
  // A call cut off by the time limit ends the search; the best so far stands.
  if (!status.ok() && !s.Expired()) return status;
  SearchResult r;
  for (int i : s.best().path) r.actions.push_back(start.action_names()[i]);
  r.loop_tree = s.best().loop_tree;
  r.ir = s.best().ir;
  r.gflops = s.best().gflops;
  r.start_gflops = s.start_gflops();
  r.peak_gflops = s.peak();
  r.states_evaluated = s.evaluated();
  r.seconds = s.Elapsed();
  return r;
}

}  // namespace looptool::client
