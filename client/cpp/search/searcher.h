// Searcher: what every search algorithm shares: the clock and the time limit, the states visited
// (keyed by their `ir`: program, schedule and cursor), the best one, progress reports, and the
// ways to reach and measure a state. A state is a Node: the path of action indices that reaches
// it from the start, and what it was observed to be. A new state's kernel is measured once;
// reached again (by any path) it comes from the cache and is not counted again.
#ifndef LOOPTOOL_CLIENT_CPP_SEARCH_SEARCHER_H_
#define LOOPTOOL_CLIENT_CPP_SEARCH_SEARCHER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cpp/search/clock.h"
#include "client/cpp/search/search.h"
#include "client/cpp/search/state_source.h"

namespace looptool::client::internal {

struct Node {
  std::vector<int> path;        // action indices from the start
  std::string ir;               // the state's key (program, schedule and cursor)
  std::string loop_tree;
  double gflops = 0;            // 0 when its kernel could not be measured
  std::vector<bool> mask;       // actions that would change the state
  std::vector<float> features;  // the guiding policy's observation (Searcher's `features`)
  std::string plan_features;    // plan_features, when the search reports what it measures
  std::string timing;           // timing, likewise
};

// A state's kernel: its ir without the cursor (which does not change the kernel).
std::string KernelKey(const std::string& ir);

// A state reached by an action: its node, and whether it was never seen before (a seen one comes
// from the cache, with the new path, and is not counted again).
struct Reached {
  Node node;
  bool is_new = false;
};

// Whether Expand() returns children already visited (from the cache) or only new ones.
enum class SeenChildren { kSkip, kInclude };

class Searcher {
 public:
  // The clock starts now. `features`: the observation nodes carry in Node::features, the one the
  // guiding policy reads (loops_tensor, loop_features), or "" for none.
  Searcher(const StateSource& start, const SearchOptions& options, const Clock& clock,
           std::string features);

  // Measures the start state (and reads the peak). The source's status when it cannot.
  absl::Status Init();

  // Whether the search's own time (the limit less the re-timing share) is up.
  bool Expired() const { return Elapsed() >= limit_; }
  double limit() const { return limit_; }
  // When the search's own time is up (calls made for it end then).
  absl::Time deadline() const { return deadline_; }
  double Elapsed() const;
  const Clock& clock() const { return clock_; }
  const StateSource& start() const { return start_; }
  const Node& root() const { return root_; }
  const Node& best() const { return best_; }
  int64_t evaluated() const { return progress_.states_evaluated; }
  double start_gflops() const { return root_.gflops; }
  double peak() const { return progress_.peak_gflops; }

  // A source in `node`'s state: a fork of the start, stepped along the path in one call. Its
  // calls (and its forks') end at the search's deadline.
  absl::StatusOr<std::unique_ptr<StateSource>> Materialize(const Node& node);
  // The state `path` reaches from the start, on a fork stepped along it in one call (actions
  // without effect are skipped by the server). New states are measured and counted.
  absl::StatusOr<Reached> EvaluatePath(std::vector<int> path);
  // Applies `action` to `source` (in `parent`'s state) and returns the state it reaches. The
  // kernel of a new state is measured; one that fails to compile, verify or run scores 0.
  absl::StatusOr<Reached> Advance(StateSource& source, const Node& parent, int action);
  // The children of `parent` (whose state `source` holds), best first: only states never seen
  // before, or with SeenChildren::kInclude also those (from the cache, not measured again).
  absl::StatusOr<std::vector<Node>> Expand(const StateSource& source, const Node& parent,
                                           SeenChildren seen = SeenChildren::kSkip);

  // The server's cost model's guess (predicted_gflops) for the state `path` reaches, untimed:
  // `gflops` is 0 while the model has learned too little or the server has none.
  struct Prediction {
    double gflops = 0;
    bool visited = false;  // the state was visited before
  };
  absl::StatusOr<Prediction> Predict(const std::vector<int>& path);

  // The fastest of the best `k` distinct kernels visited and the start, each timed again
  // (StateSource::Remeasure; the best first, the start after the winners it beat, else last) while the time limit lasts (and
  // until one has been re-timed, past it), then all of them again, in turn, in rounds while it
  // lasts (at most 16 in all; the second round's winners, those the first re-timed, even past
  // it); with its fastest re-timed GFLOPS (on_retimed hears each
  // re-timing, with the kernel's fastest so far); nullopt when none could be re-timed. Also the
  // start's fastest re-timed GFLOPS (0 when it was not). A search that ends early re-times for
  // the time it would have kept (5% of the limit, at most 0.5 s).
  struct Retimed {
    Node node;
    double gflops = 0, start_gflops = 0;
    double peak_gflops = 0;  // measured beside `node`'s re-timing (0: not measured)
  };
  std::optional<Retimed> RetimeBest(int k);

 private:
  // The observations of a state whose kernel could not be measured: all but flops.
  std::vector<std::string> Unmeasured() const;
  // The state a step observed, registered as visited (and measured, counted and compared with
  // the best when new).
  absl::StatusOr<Reached> Record(std::vector<int> path, const StepResult& r);
  void Report();
  // Reports a newly visited, measured node to SearchOptions::on_measured, once per kernel.
  void ReportMeasured(const Node& node);

  const StateSource& start_;
  const SearchOptions& options_;
  const Clock& clock_;
  const std::string features_;
  const std::vector<std::string> observations_;
  const absl::Time t0_;
  const double limit_;  // seconds for the algorithm; the rest of the time limit re-times
  const absl::Time deadline_;
  Node root_, best_;
  std::map<std::string, Node> visited_;  // by ir (program, schedule and cursor)
  std::set<std::string> reported_;       // kernels given to on_measured
  SearchProgress progress_;
};

// The indices of the actions `node`'s mask allows.
std::vector<int> LegalActions(const Node& node);

}  // namespace looptool::client::internal

#endif  // LOOPTOOL_CLIENT_CPP_SEARCH_SEARCHER_H_
