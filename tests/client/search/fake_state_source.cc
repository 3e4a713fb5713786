#include "tests/client/search/fake_state_source.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace looptool::client::testing {

double FakeWorld::Gflops(const std::vector<int>& knobs) const {
  double p = 1;
  for (size_t i = 0; i < knobs.size(); ++i) p *= 1 - std::abs(knobs[i] - target[i]) / 8.0;
  return 10 + 80 * p;
}

std::string FakeWorld::Key(const std::vector<int>& knobs) {
  return absl::StrCat("knobs ", absl::StrJoin(knobs, " "));
}

FakeStateSource::FakeStateSource(std::shared_ptr<FakeWorld> world)
    : world_(std::move(world)), knobs_(world_->target.size(), 0) {
  for (size_t i = 0; i < knobs_.size(); ++i) {
    names_.push_back(world_->tile_names ? absl::StrCat("tile_L0_", i + 1)
                                        : absl::StrCat("inc_", i));
    names_.push_back(absl::StrCat("dec_", i));
  }
  if (world_->loop_set) {
    space_ = "loop_nest";
    while (names_.size() < 560) names_.push_back(absl::StrCat("noop_", names_.size()));
  }
  CountLive();
}

FakeStateSource::FakeStateSource(const FakeStateSource& other)
    : world_(other.world_),
      space_(other.space_),
      names_(other.names_),
      knobs_(other.knobs_),
      deadline_(other.deadline_) {
  CountLive();
}

FakeStateSource::~FakeStateSource() { --world_->live_sources; }

void FakeStateSource::CountLive() {
  world_->most_live_sources = std::max(world_->most_live_sources, ++world_->live_sources);
}

absl::StatusOr<std::unique_ptr<StateSource>> FakeStateSource::Fork() const {
  return std::make_unique<FakeStateSource>(*this);
}

absl::Status FakeStateSource::Spend(absl::Duration cost) {
  if (world_->clock.Now() + cost > deadline_) {
    world_->clock.Advance(std::max(absl::ZeroDuration(), deadline_ - world_->clock.Now()));
    return absl::DeadlineExceededError("Deadline Exceeded");
  }
  world_->clock.Advance(cost);
  return absl::OkStatus();
}

absl::StatusOr<StepResult> FakeStateSource::Step(const std::vector<int>& actions,
                                                 const std::vector<std::string>& observations) {
  if (absl::Status s = Spend(world_->call_cost); !s.ok()) return s;
  StepResult r;
  const std::vector<int> before = knobs_;  // a failed step changes nothing, as the server's
  for (int a : actions) {
    if (a < 0 || a >= static_cast<int>(names_.size())) {
      knobs_ = before;
      return absl::InvalidArgumentError(absl::StrCat("no action ", a));
    }
    int& k = knobs_[a / 2];
    const int moved = std::min(world_->max_knob, std::max(0, k + (a % 2 == 0 ? 1 : -1)));
    if (moved != k) r.action_had_no_effect = false;
    k = moved;
  }
  for (const std::string& name : observations) {
    absl::StatusOr<Value> v = ObserveOne(name);
    if (!v.ok()) {
      knobs_ = before;
      return v.status();
    }
    r.names.push_back(name);
    r.observations.push_back(*std::move(v));
  }
  return r;
}

absl::StatusOr<Value> FakeStateSource::ObserveOne(const std::string& name) {
  Value v;
  const std::string key = FakeWorld::Key(knobs_);
  if (name == "ir" || name == "loop_tree") {
    v.text = key;
  } else if (name == "flops") {
    if (world_->times_observed[key] == 0) {
      const bool start = world_->measured.empty();
      if (absl::Status s = Spend(world_->queue_cost +
                                 (world_->slow_states.count(key) > 0 ? world_->slow_measure_cost
                                  : start && world_->start_measure_cost > absl::ZeroDuration()
                                      ? world_->start_measure_cost
                                      : world_->measure_cost));
          !s.ok()) {
        return s;
      }
      world_->measured.push_back(key);
    }
    ++world_->times_observed[key];
    v.kind = Value::Kind::kDouble;
    v.number = world_->Gflops(knobs_);
  } else if (name == "peak_gflops") {
    v.kind = Value::Kind::kDouble;
    v.number = 100;
  } else if (name == "action_mask") {
    v.kind = Value::Kind::kBools;
    for (size_t a = 0; a < names_.size(); ++a) {
      if (a >= 2 * knobs_.size()) {
        v.bools.push_back(false);  // loop_set's padding
        continue;
      }
      const int k = knobs_[a / 2];
      v.bools.push_back(a % 2 == 0 ? k < world_->max_knob : k > 0);
    }
  } else if (name == "loops_tensor") {
    v.kind = Value::Kind::kFloats;
    for (int k : knobs_) v.floats.push_back(static_cast<float>(k));
  } else if (name == "loop_features" && world_->loop_set) {
    v.kind = Value::Kind::kFloats;
    for (size_t i = 0; i < knobs_.size(); ++i) {
      std::vector<float> row(38, 0.0f);
      row[0] = 1;
      row[1] = knobs_[i] / 7.0f;
      row[2] = i / 2.0f;
      v.floats.insert(v.floats.end(), row.begin(), row.end());
    }
  } else if (name == "plan_features" && world_->loop_set) {
    std::vector<std::string> entries;
    for (size_t i = 0; i < knobs_.size(); ++i) {
      entries.push_back(absl::StrCat("\"knob_", i, "\":", knobs_[i]));
    }
    v.text = absl::StrCat("{", absl::StrJoin(entries, ","), "}");
  } else if (name == "plan_features") {
    v.text = absl::StrCat("{\"knobs\":\"", key, "\"}");
  } else if (name == "timing" && world_->timing) {  // how the state was timed: by key length
    const absl::Duration work =
        world_->slow_states.count(key) > 0 ? world_->slow_measure_cost : world_->measure_cost;
    v.text = absl::StrCat("{\"timing\":\"settled\",\"timed_runs\":", key.size(),
                          world_->work_seconds
                              ? absl::StrCat(",\"work_seconds\":", absl::ToDoubleSeconds(work))
                              : "",
                          "}");
  } else if (name == "sketches") {
    v.text = world_->sketches;
  } else if (name == "predicted_gflops") {
    if (!world_->cost_model) return absl::UnimplementedError("this server has no cost model");
    ++world_->predictions;
    v.kind = Value::Kind::kDouble;
    v.number = world_->Gflops(knobs_);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("Unknown observation space: ", name));
  }
  return v;
}

absl::StatusOr<Retiming> FakeStateSource::Remeasure() {
  world_->clock.Advance(world_->queue_cost + world_->measure_cost);
  const std::vector<double>& f = world_->remeasure_factors;
  const double factor = f[world_->remeasured++ % f.size()];
  return Retiming{factor * world_->Gflops(knobs_), world_->remeasure_peak};
}

absl::StatusOr<std::vector<std::string>> FakeStateSource::ActionNamesOf(
    const std::string& space) const {
  if (space == space_) return names_;
  return absl::NotFoundError(absl::StrCat("the server has no action space '", space, "'"));
}

absl::StatusOr<std::unique_ptr<StateSource>> FakeStateSource::StartInSpace(
    const std::string& space) const {
  if (space != space_) return ActionNamesOf(space).status();
  return std::make_unique<FakeStateSource>(world_);
}

}  // namespace looptool::client::testing
