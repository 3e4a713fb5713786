// A deterministic world for the searches' unit tests: states are `knobs` integers in [0, 7],
// start all 0; action inc_<i> / dec_<i> moves knob i by one (no effect at the bounds, which the
// action mask says). A state's GFLOPS is 10 + 80 * prod_i (1 - |k_i - target_i| / 8): a single
// optimum of 90 at the target, approached knob by knob. Time is the world's own clock: a call
// costs `call_cost`, the first measurement of a state `measure_cost` (later ones come from the
// cache, as the server's do), a re-timing `measure_cost` (its GFLOPS scaled: remeasure_factors); a call that would end after its
// deadline advances the clock to the deadline and fails DEADLINE_EXCEEDED; a failed step changes
// nothing, as the server's. The world counts what was measured, in order. plan_features is
// {"knobs":"<ir>"}; with `loop_set`, the space is named loop_nest and padded to a loop_set
// policy's 560 actions with no-ops the mask never allows, loop_features is one row of 38 per
// knob ([1, knob / 7, knob's index / 2, 0...]) and plan_features {"knob_0": k0, ...}. The world
// counts its live sources (sessions), as the server bounds them.
#ifndef LOOPTOOL_TESTS_CLIENT_SEARCH_FAKE_STATE_SOURCE_H_
#define LOOPTOOL_TESTS_CLIENT_SEARCH_FAKE_STATE_SOURCE_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "client/cpp/search/clock.h"
#include "client/cpp/search/state_source.h"

namespace looptool::client::testing {

class FakeClock final : public Clock {
 public:
  absl::Time Now() const override { return now_; }
  void Advance(absl::Duration d) { now_ += d; }

 private:
  absl::Time now_ = absl::UnixEpoch();
};

struct FakeWorld {
  std::vector<int> target = {5, 2, 7};
  int max_knob = 7;
  absl::Duration call_cost = absl::Microseconds(100);
  absl::Duration measure_cost = absl::Milliseconds(10);
  // The first measured state's (the start's) measurement instead, when positive (a large
  // program's untiled start and its reference run).
  absl::Duration start_measure_cost = absl::ZeroDuration();
  // States whose first measurement takes `slow_measure_cost` instead (a slow candidate's long
  // timing).
  std::set<std::string> slow_states;
  absl::Duration slow_measure_cost = absl::Milliseconds(100);
  std::string sketches;     // the `sketches` observation
  bool cost_model = false;  // predicted_gflops: the exact GFLOPS; else UNIMPLEMENTED
  bool loop_set = false;    // a space and observations a loop_set policy fits (above)
  // inc_0, inc_1, ... named tile_L0_1, tile_L0_2, ...: factors of one loop pointer, which a
  // policy_guided search's neighbors (NeighborPaths) change into one another.
  bool tile_names = false;
  bool timing = true;  // the `timing` observation (a server before 2026-12-06 has none)
  // `timing` says work_seconds: the state's measure_cost (or slow_measure_cost), never
  // start_measure_cost (what a server's worker took, its reference run left out); a server
  // before 2026-12-07 does not say.
  bool work_seconds = false;
  // What each measurement and re-timing waits beyond its cost (a worker busy with other
  // sessions' kernels), in no work_seconds.
  absl::Duration queue_cost = absl::ZeroDuration();

  FakeClock clock;
  std::vector<std::string> measured;  // states whose kernel was measured, in order
  std::map<std::string, int> times_observed;  // flops observations per state (cached or not)
  int remeasured = 0;
  double remeasure_peak = 0;  // the peak each re-timing reports
  // The n-th re-timing (from 0) reports remeasure_factors[n % size] x the state's GFLOPS.
  std::vector<double> remeasure_factors = {0.99};
  int predictions = 0;
  // Sources (sessions) alive now, and the most alive at once.
  int live_sources = 0;
  int most_live_sources = 0;

  double Gflops(const std::vector<int>& knobs) const;
  static std::string Key(const std::vector<int>& knobs);  // the `ir`: "knobs 5 2 7"
};

class FakeStateSource final : public StateSource {
 public:
  explicit FakeStateSource(std::shared_ptr<FakeWorld> world);
  FakeStateSource(const FakeStateSource& other);  // a fork: one more live source
  FakeStateSource& operator=(const FakeStateSource&) = delete;
  ~FakeStateSource() override;

  absl::StatusOr<std::unique_ptr<StateSource>> Fork() const override;
  absl::StatusOr<StepResult> Step(const std::vector<int>& actions,
                                  const std::vector<std::string>& observations) override;
  absl::StatusOr<Retiming> Remeasure() override;
  void set_deadline(absl::Time deadline) override { deadline_ = deadline; }
  const std::string& action_space() const override { return space_; }
  const std::vector<std::string>& action_names() const override { return names_; }
  absl::StatusOr<std::vector<std::string>> ActionNamesOf(const std::string& space) const override;
  absl::StatusOr<std::unique_ptr<StateSource>> StartInSpace(
      const std::string& space) const override;
  bool HasObservation(const std::string& name) const override {
    return name != "timing" || world_->timing;
  }

  const std::vector<int>& knobs() const { return knobs_; }

 private:
  void CountLive();
  // Advances the clock by `cost`; DEADLINE_EXCEEDED (at the deadline) when that passes it.
  absl::Status Spend(absl::Duration cost);
  absl::StatusOr<Value> ObserveOne(const std::string& name);

  std::shared_ptr<FakeWorld> world_;
  std::string space_ = "fake";
  std::vector<std::string> names_;
  std::vector<int> knobs_;
  absl::Time deadline_ = absl::InfiniteFuture();
};

}  // namespace looptool::client::testing

#endif  // LOOPTOOL_TESTS_CLIENT_SEARCH_FAKE_STATE_SOURCE_H_
