#include "client/cpp/search/searcher.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "util/status_macros.h"

namespace looptool::client::internal {
namespace {

// The time kept at the end of the limit for re-timing the best states (SearchOptions::
// retime_top): 5% of it, at most 0.5 s; in it, each is re-timed in rounds while it lasts, up to
// kRetimeRoundsMax times. (One 10 ms re-timing on a shared VM reads anywhere from 65% to 100%
// of a kernel's speed, in slow spells of 0.1-0.2 s: rounds spread over the reserved time catch
// a quiet moment that three back-to-back ones miss.)
constexpr double kRetimeShare = 0.05;
constexpr double kRetimeSecondsMax = 0.5;
constexpr int kRetimeRoundsMax = 16;

double RetimeSeconds(const SearchOptions& options) {
  return std::min(kRetimeShare * options.time_limit_seconds, kRetimeSecondsMax);
}

std::vector<std::string> Observations(const StateSource& start, const std::string& features,
                                      bool reporting) {
  std::vector<std::string> o = {"ir", "loop_tree", "flops", "action_mask"};
  if (!features.empty()) o.push_back(features);
  if (reporting) {
    o.push_back("plan_features");
    if (start.HasObservation("timing")) o.push_back("timing");  // servers since 2026-12-06
  }
  return o;
}

double SearchSeconds(const SearchOptions& options) {
  if (options.retime_top <= 0) return options.time_limit_seconds;
  return options.time_limit_seconds - RetimeSeconds(options);
}

// The node of a step that observed ir, loop_tree, action_mask and, when the kernel could be
// measured, flops (and the `features` observation when asked for).
absl::StatusOr<Node> ToNode(std::vector<int> path, const StepResult& r,
                            const std::string& features) {
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
  if (const Value* f = features.empty() ? nullptr : r.Find(features)) n.features = f->floats;
  if (const Value* plan = r.Find("plan_features")) n.plan_features = plan->text;
  if (const Value* timing = r.Find("timing")) n.timing = timing->text;
  return n;
}

}  // namespace

std::string KernelKey(const std::string& ir) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(ir, '\n', absl::SkipEmpty())) {
    if (!absl::StartsWith(line, "cursor")) absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::vector<int> LegalActions(const Node& node) {
  std::vector<int> legal;
  for (int a = 0; a < static_cast<int>(node.mask.size()); ++a) {
    if (node.mask[a]) legal.push_back(a);
  }
  return legal;
}

Searcher::Searcher(const StateSource& start, const SearchOptions& options, const Clock& clock,
                   std::string features)
    : start_(start),
      options_(options),
      clock_(clock),
      features_(std::move(features)),
      observations_(Observations(start, features_, options.on_measured != nullptr)),
      t0_(clock.Now()),
      limit_(SearchSeconds(options)),
      deadline_(t0_ + absl::Seconds(limit_)) {}

double Searcher::Elapsed() const { return absl::ToDoubleSeconds(clock_.Now() - t0_); }

absl::Status Searcher::Init() {
  ASSIGN_OR_RETURN(std::unique_ptr<StateSource> source, start_.Fork());
  source->set_deadline(deadline_);
  std::vector<std::string> observations = observations_;
  observations.push_back("peak_gflops");
  ASSIGN_OR_RETURN(const StepResult r, source->Step({}, observations));
  progress_.peak_gflops = r.Find("peak_gflops")->number;
  ASSIGN_OR_RETURN(root_, ToNode({}, r, features_));
  visited_.emplace(root_.ir, root_);
  best_ = root_;
  ReportMeasured(root_);
  Report();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<StateSource>> Searcher::Materialize(const Node& node) {
  ASSIGN_OR_RETURN(std::unique_ptr<StateSource> source, start_.Fork());
  source->set_deadline(deadline_);
  if (!node.path.empty()) RETURN_IF_ERROR(source->Step(node.path, {}).status());
  return source;
}

absl::StatusOr<Reached> Searcher::EvaluatePath(std::vector<int> path) {
  ASSIGN_OR_RETURN(std::unique_ptr<StateSource> source, start_.Fork());
  source->set_deadline(deadline_);
  absl::StatusOr<StepResult> r = source->Step(path, observations_);
  if (!r.ok()) {
    if (Expired()) return r.status();
    // Only the measurement failed (the step changed nothing): the state, unmeasured.
    r = source->Step(path, Unmeasured());
    if (!r.ok()) return r.status();
  }
  return Record(std::move(path), *r);
}

absl::StatusOr<Reached> Searcher::Advance(StateSource& source, const Node& parent, int action) {
  std::vector<int> path = parent.path;
  path.push_back(action);
  absl::StatusOr<StepResult> r = source.Step({action}, observations_);
  if (!r.ok()) {
    if (Expired()) return r.status();
    // Only the measurement failed (the step changed nothing): take the action again, unmeasured.
    r = source.Step({action}, Unmeasured());
    if (!r.ok()) return r.status();
  }
  return Record(std::move(path), *r);
}

absl::StatusOr<Reached> Searcher::Record(std::vector<int> path, const StepResult& r) {
  ASSIGN_OR_RETURN(Node node, ToNode(std::move(path), r, features_));
  auto [it, inserted] = visited_.emplace(node.ir, node);
  if (!inserted) {
    Node seen = it->second;
    seen.path = std::move(node.path);
    return Reached{std::move(seen), /*is_new=*/false};
  }
  ++progress_.states_evaluated;
  if (node.gflops > best_.gflops) best_ = node;
  ReportMeasured(node);
  Report();
  return Reached{std::move(node), /*is_new=*/true};
}

absl::StatusOr<Searcher::Prediction> Searcher::Predict(const std::vector<int>& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<StateSource> source, start_.Fork());
  source->set_deadline(deadline_);
  absl::StatusOr<StepResult> r = source->Step(path, {"ir", "predicted_gflops"});
  if (!r.ok()) {
    if (r.status().code() == absl::StatusCode::kUnimplemented) return Prediction{};
    return r.status();
  }
  return Prediction{r->Find("predicted_gflops")->number,
                    visited_.count(r->Find("ir")->text) > 0};
}

std::optional<Searcher::Retimed> Searcher::RetimeBest(int k) {
  std::vector<const Node*> nodes;
  for (const auto& [ir, node] : visited_) {
    if (node.gflops > 0 && node.ir != root_.ir) nodes.push_back(&node);
  }
  std::stable_sort(nodes.begin(), nodes.end(),
                   [](const Node* a, const Node* b) { return a->gflops > b->gflops; });
  // The best first, the start in its place by the search's measurements: after the winners it
  // beat (so that one the search found no faster than the start is re-timed first, and the result
  // is never a runner-up the start outran), else last (a slow start, an untiled convolution that
  // re-times for seconds, must not use up the time the winners need).
  std::vector<const Node*> candidates;
  std::set<std::string> kernels = {KernelKey(root_.ir)};
  for (const Node* n : nodes) {
    if (static_cast<int>(candidates.size()) >= k) break;
    if (kernels.insert(KernelKey(n->ir)).second) candidates.push_back(n);
  }
  candidates.insert(std::find_if(candidates.begin(), candidates.end(),
                                 [&](const Node* n) { return n->gflops < root_.gflops; }),
                    &root_);
  // One re-timed candidate: its state, kept for the later rounds, and its fastest re-timing.
  struct Timed {
    const Node* node;
    std::unique_ptr<StateSource> source;
    double gflops = 0, peak_gflops = 0;
  };
  std::vector<Timed> timed;
  const auto retime = [&](Timed& t) {
    absl::StatusOr<Retiming> g = t.source->Remeasure();
    if (!g.ok()) return false;
    if (g->gflops > t.gflops) {
      t.gflops = g->gflops;
      t.peak_gflops = g->peak_gflops;
    }
    if (options_.on_retimed) options_.on_retimed(KernelKey(t.node->ir), t.gflops);
    return true;
  };
  double start_gflops = 0;
  // The rounds end with the limit, or, for a search that ended early, once the reserved time
  // has passed.
  const double end =
      std::min(options_.time_limit_seconds, Elapsed() + RetimeSeconds(options_));
  for (const Node* n : candidates) {
    // The time limit stops re-timing once one kernel is re-timed: a last step that ran past it
    // does not leave the result un-re-timed.
    if (!timed.empty() && Elapsed() >= options_.time_limit_seconds) break;
    absl::StatusOr<std::unique_ptr<StateSource>> source = start_.Fork();
    if (!source.ok()) break;
    if (!n->path.empty() && !(*source)->Step(n->path, {}).ok()) continue;
    Timed t{n, *std::move(source)};
    if (!retime(t)) continue;
    timed.push_back(std::move(t));
  }
  // Later rounds, while the time lasts: each timed again, in turn (the first round's order), and
  // its fastest re-timing kept. A host's other load (a neighbour's use of a shared cache) can slow
  // all of one budget's runs; re-timings spread over the reserved time are not all caught by it.
  // The second round's winners are re-timed even when the first round used up the time (a slow
  // start's re-timing can outlast the whole reserve): the start's re-timing then lies between
  // their two readings, so one slow spell does not decide both.
  for (int round = 1; round < kRetimeRoundsMax && (Elapsed() < end || round == 1); ++round) {
    for (Timed& t : timed) {
      if (Elapsed() >= end && round > 1) break;
      if (Elapsed() >= end && t.node == &root_) continue;  // the winners' second reading only
      retime(t);
    }
  }
  std::optional<Retimed> best;
  for (const Timed& t : timed) {
    if (t.node == &root_) start_gflops = t.gflops;
    if (!best.has_value() || t.gflops > best->gflops) {
      best = Retimed{*t.node, t.gflops, 0, t.peak_gflops};
    }
  }
  if (best.has_value()) best->start_gflops = start_gflops;
  return best;
}

absl::StatusOr<std::vector<Node>> Searcher::Expand(const StateSource& source, const Node& parent,
                                                   SeenChildren seen) {
  std::vector<Node> children;
  for (int a = 0; a < static_cast<int>(parent.mask.size()) && !Expired(); ++a) {
    if (!parent.mask[a]) continue;
    ASSIGN_OR_RETURN(std::unique_ptr<StateSource> child, source.Fork());
    ASSIGN_OR_RETURN(Reached reached, Advance(*child, parent, a));
    if (reached.is_new || seen == SeenChildren::kInclude) {
      children.push_back(std::move(reached.node));
    }
  }
  std::stable_sort(children.begin(), children.end(),
                   [](const Node& a, const Node& b) { return a.gflops > b.gflops; });
  return children;
}

std::vector<std::string> Searcher::Unmeasured() const {
  std::vector<std::string> out;
  for (const std::string& o : observations_) {
    if (o != "flops" && o != "timing") out.push_back(o);
  }
  return out;
}

void Searcher::ReportMeasured(const Node& node) {
  if (!options_.on_measured || node.gflops <= 0) return;
  std::string kernel = KernelKey(node.ir);
  if (!reported_.insert(kernel).second) return;
  MeasuredKernel m;
  for (int a : node.path) m.actions.push_back(start_.action_names()[a]);
  m.kernel = std::move(kernel);
  m.loop_tree = node.loop_tree;
  m.plan_features = node.plan_features;
  m.gflops = node.gflops;
  m.seconds = Elapsed();
  m.timing = node.timing;
  options_.on_measured(m);
}

void Searcher::Report() {
  progress_.best_gflops = best_.gflops;
  progress_.elapsed_seconds = Elapsed();
  if (options_.on_progress) options_.on_progress(progress_);
}

}  // namespace looptool::client::internal
