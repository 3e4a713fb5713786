#include "client/cpp/search/evolution.h"

#include <algorithm>
#include <random>
#include <utility>

#include "util/status_macros.h"

namespace looptool::client::internal {
namespace {

constexpr size_t kPopulation = 16;
constexpr size_t kSeededRollouts = 4;
// Variations of a parent (Vary's `op`).
enum Variation { kExtend = 0, kCutAndExtend = 1, kReplace = 2, kCross = 3, kVariations = 4 };

class Population {
 public:
  Population(Searcher& s, const EvolutionOptions& options)
      : s_(s), options_(options), rng_(options.seed), members_{s.root()} {}

  // Seeds the population (see evolution.h); the number of sketches that measured.
  absl::StatusOr<size_t> Seed();
  // Random rollouts from the start fill the population; after a seed, a few suffice (each
  // measures up to `depth` states, most of them slow: in loop_nest every one is a new kernel),
  // and variations of the seed fill the rest. Sketches make them unnecessary.
  absl::Status FillWithRollouts(size_t sketched);
  // One generation: a child measured (with the cost model, once it predicts: chosen among
  // `candidates`; whether it predicts is asked every 8 measured states until it does).
  absl::Status Generation();

 private:
  int Uniform(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  // Adds `node` unless present; when full, replaces the worst member if `node` is better.
  void Admit(const Node& node);
  const Node& Tournament();
  // Walks up to `steps` random legal actions from `node`; admits the best state on the way.
  absl::Status Rollout(Node node, int steps);
  // A child's path by `op`, with nothing measured on the way: the actions added are legal in the
  // parent's state (later ones may have no effect, and the server skips them).
  std::vector<int> Vary(const Node& parent, int op);
  // Without the model: one child varied and measured, rollouts measuring every state they pass.
  absl::Status VaryAndMeasure();
  // With the model: `candidates` children proposed, one of the half it ranks best measured.
  absl::Status VaryByModel(int candidates);
  // The greedy episode of the mapped policy from the root; the best state on the way.
  absl::StatusOr<Node> MappedPolicyEpisode(const MappedPolicy& p);

  Searcher& s_;
  const EvolutionOptions& options_;
  std::mt19937_64 rng_;
  std::vector<Node> members_;
  int64_t model_checked_at_ = -8;
  bool model_ready_ = false;
};

void Population::Admit(const Node& node) {
  for (const Node& p : members_) {
    if (p.ir == node.ir) return;
  }
  if (members_.size() < kPopulation) {
    members_.push_back(node);
    return;
  }
  auto worst = std::min_element(members_.begin(), members_.end(),
                                [](const Node& a, const Node& b) { return a.gflops < b.gflops; });
  if (node.gflops > worst->gflops) *worst = node;
}

const Node& Population::Tournament() {
  const Node* best = &members_[Uniform(members_.size())];
  for (int i = 0; i < 2; ++i) {
    const Node& other = members_[Uniform(members_.size())];
    if (other.gflops > best->gflops) best = &other;
  }
  return *best;
}

absl::Status Population::Rollout(Node node, int steps) {
  ASSIGN_OR_RETURN(std::unique_ptr<StateSource> source, s_.Materialize(node));
  Node best_seen;
  for (int d = 0; d < steps && !s_.Expired(); ++d) {
    const std::vector<int> legal = LegalActions(node);
    if (legal.empty()) break;
    ASSIGN_OR_RETURN(Reached next, s_.Advance(*source, node, legal[Uniform(legal.size())]));
    node = std::move(next.node);
    if (node.gflops > best_seen.gflops) best_seen = node;
  }
  if (best_seen.gflops > 0) Admit(best_seen);
  return absl::OkStatus();
}

absl::StatusOr<Node> Population::MappedPolicyEpisode(const MappedPolicy& p) {
  ASSIGN_OR_RETURN(std::unique_ptr<StateSource> source, s_.Materialize(s_.root()));
  Node node = s_.root(), best = s_.root();
  for (int d = 0; d < options_.depth && !s_.Expired(); ++d) {
    std::vector<bool> mask(p.map.size());
    for (size_t i = 0; i < p.map.size(); ++i) mask[i] = node.mask[p.map[i]];
    const std::vector<int> ranked =
        RankActions(p.policy->Scores(node.features), mask, p.policy->num_actions());
    if (ranked.empty()) break;
    ASSIGN_OR_RETURN(Reached next, s_.Advance(*source, node, p.map[ranked.front()]));
    node = std::move(next.node);
    if (node.gflops > best.gflops) best = node;
  }
  return best;
}

absl::StatusOr<size_t> Population::Seed() {
  size_t sketched = 0;
  for (const std::vector<int>& path : options_.sketches) {
    // Within half the time, but two at least while the time lasts: a large program's start
    // (its untiled kernel, the reference run) can take half of it alone, and the sketches are
    // then still the best use of the rest.
    if ((sketched >= 2 && s_.Elapsed() >= s_.limit() / 2) || s_.Expired()) break;
    ASSIGN_OR_RETURN(Reached reached, s_.EvaluatePath(path));
    if (reached.node.gflops > 0 && reached.node.ir != s_.root().ir) {
      Admit(reached.node);
      ++sketched;
    }
  }
  if (sketched >= 2) return sketched;
  if (options_.policy.has_value()) {
    ASSIGN_OR_RETURN(Node seeded, MappedPolicyEpisode(*options_.policy));
    if (seeded.ir != s_.root().ir) Admit(seeded);
  }
  const std::vector<int> path =
      options_.unsketched_seed ? options_.unsketched_seed() : std::vector<int>{};
  if (!path.empty()) {
    ASSIGN_OR_RETURN(Reached seeded, s_.EvaluatePath(path));
    if (seeded.node.gflops > 0 && seeded.node.ir != s_.root().ir) Admit(seeded.node);
  }
  return sketched;
}

absl::Status Population::FillWithRollouts(size_t sketched) {
  const size_t rollouts = sketched >= 2          ? 0
                          : members_.size() > 1 ? kSeededRollouts
                                                : kPopulation;
  for (size_t i = 0; i < rollouts && !s_.Expired(); ++i) {
    RETURN_IF_ERROR(Rollout(s_.root(), options_.depth));
  }
  return absl::OkStatus();
}

std::vector<int> Population::Vary(const Node& parent, int op) {
  const size_t max_path = 2 * static_cast<size_t>(options_.depth);
  std::vector<int> path = parent.path;
  const std::vector<int> legal = LegalActions(parent);
  const auto some_legal = [&] {
    return legal.empty() ? Uniform(parent.mask.size()) : legal[Uniform(legal.size())];
  };
  if (path.empty()) op = kExtend;
  if (op == kExtend || op == kCutAndExtend) {
    if (op == kCutAndExtend) {
      path.resize(path.size() - std::min<size_t>(path.size(), 1 + Uniform(3)));
    }
    for (int n = 1 + Uniform(3); n > 0; --n) path.push_back(some_legal());
  } else if (op == kReplace) {
    path[Uniform(path.size())] = some_legal();
  } else {
    const Node& other = Tournament();
    const size_t a = Uniform(path.size() + 1), b = Uniform(other.path.size() + 1);
    path.resize(a);
    path.insert(path.end(), other.path.begin() + b, other.path.end());
  }
  if (path.size() > max_path) path.resize(max_path);
  return path;
}

absl::Status Population::VaryAndMeasure() {
  const Node parent = Tournament();
  const int op = Uniform(kVariations);
  if (op == kExtend || parent.path.empty()) return Rollout(parent, 1 + Uniform(3));
  if (op == kCutAndExtend) {
    std::vector<int> path = parent.path;
    path.resize(path.size() - std::min<size_t>(path.size(), 1 + Uniform(3)));
    ASSIGN_OR_RETURN(Reached cut, s_.EvaluatePath(std::move(path)));
    return Rollout(cut.node, 1 + Uniform(3));
  }
  ASSIGN_OR_RETURN(Reached child, s_.EvaluatePath(Vary(parent, op)));
  if (child.node.gflops > 0) Admit(child.node);
  return absl::OkStatus();
}

absl::Status Population::VaryByModel(int candidates) {
  std::vector<std::pair<double, std::vector<int>>> ranked;
  for (int c = 0; c < candidates && !s_.Expired(); ++c) {
    // The variation is drawn before the parent (the order GCC evaluated these as arguments).
    const int op = Uniform(kVariations);
    const Node& parent = Tournament();
    std::vector<int> path = Vary(parent, op);
    absl::StatusOr<Searcher::Prediction> p = s_.Predict(path);
    if (!p.ok()) return s_.Expired() ? absl::OkStatus() : p.status();
    if (!p->visited && p->gflops > 0) ranked.emplace_back(p->gflops, std::move(path));
  }
  if (ranked.empty()) return absl::OkStatus();  // every candidate was a state seen before
  // One of the better half, at random: the model weeds out the slow, but its argmax alone
  // would narrow the search to what it already believes.
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  const int top = static_cast<int>((ranked.size() + 1) / 2);
  ASSIGN_OR_RETURN(Reached child, s_.EvaluatePath(std::move(ranked[Uniform(top)].second)));
  if (child.node.gflops > 0) Admit(child.node);
  return absl::OkStatus();
}

absl::Status Population::Generation() {
  const int candidates = options_.cost_model.has_value() ? options_.cost_model->candidates : 0;
  // Until the model predicts (it learns from the server's first measurements), and on a server
  // without one, children are measured as they come.
  if (candidates > 1 && !model_ready_ && s_.evaluated() - model_checked_at_ >= 8) {
    model_checked_at_ = s_.evaluated();
    absl::StatusOr<Searcher::Prediction> p = s_.Predict({});
    if (!p.ok()) return s_.Expired() ? absl::OkStatus() : p.status();
    model_ready_ = p->gflops > 0;
  }
  return model_ready_ ? VaryByModel(candidates) : VaryAndMeasure();
}

}  // namespace

absl::Status Evolution(Searcher& s, const EvolutionOptions& options) {
  if (options.depth == 0 || LegalActions(s.root()).empty()) {
    return absl::OkStatus();  // nothing to try
  }
  Population population(s, options);
  ASSIGN_OR_RETURN(const size_t sketched, population.Seed());
  RETURN_IF_ERROR(population.FillWithRollouts(sketched));
  while (!s.Expired()) RETURN_IF_ERROR(population.Generation());
  return absl::OkStatus();
}

}  // namespace looptool::client::internal
