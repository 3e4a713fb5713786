// The search algorithms on a deterministic fake (fake_state_source.h), with its own clock: which
// states each measures and in what order, that no state is measured twice, that time limits
// and deadlines hold, re-timing, the sketches first, the cost model, a policy's one timed state,
// and the one sketch parser. (Against a real server: tests/client/env_test.cc.)
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cpp/built_in_policies.h"
#include "client/cpp/policy.h"
#include "client/cpp/search/neighbor_paths.h"
#include "client/cpp/search/search.h"
#include "client/cpp/search/short_candidate_loss.h"
#include "client/cpp/search/sketch_paths.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/client/policy_json.h"
#include "tests/client/search/fake_state_source.h"

namespace looptool::client {
namespace {

using testing::FakeStateSource;
using testing::FakeWorld;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Trial {
  std::shared_ptr<FakeWorld> world = std::make_shared<FakeWorld>();
  SearchOptions options;

  Trial(const std::string& search, double limit) {
    options.search = *ParseSearch(search);
    options.time_limit_seconds = limit;
    options.retime_top = 0;
    options.policy_seed = false;
    // The fakes' cost models score a distance, not log2 GFLOPS: every candidate is timed while
    // the time lasts, unless a test says otherwise (ALoopSetPolicyPassesOverCandidates...).
    options.pass_predicted_slower = std::numeric_limits<double>::infinity();
  }
  absl::StatusOr<SearchResult> Go() {
    FakeStateSource start(world);
    return Search(start, options, world->clock);
  }
  // The search counts each distinct state it had measured once, however often it reached it
  // (the start is not counted).
  void ExpectEachStateCountedOnce(const SearchResult& r) const {
    EXPECT_EQ(r.states_evaluated, static_cast<int64_t>(world->measured.size()) - 1);
  }
};

// `t` refused before any step: INVALID_ARGUMENT whose message names `what`, nothing measured.
void ExpectRefusedBeforeAnyStep(Trial& t, const std::string& what) {
  absl::StatusOr<SearchResult> r = t.Go();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << what;
  EXPECT_THAT(r.status().message(), HasSubstr(what));
  EXPECT_TRUE(t.world->measured.empty()) << what;
}

TEST(SearchAlgorithms, Greedy1ClimbsToTheOptimumMeasuringEachStateOnce) {
  Trial run("greedy1", 100);
  run.options.depth = 20;
  absl::StatusOr<SearchResult> r = run.Go();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ir, "knobs 5 2 7");
  EXPECT_EQ(r->gflops, 90);
  EXPECT_EQ(r->start_gflops, run.world->Gflops({0, 0, 0}));
  EXPECT_EQ(r->actions.size(), 14u);  // 5 + 2 + 7 moves, each toward the target
  run.ExpectEachStateCountedOnce(*r);
  EXPECT_EQ(run.world->measured.front(), "knobs 0 0 0");
}

TEST(SearchAlgorithms, Greedy2RevisitsWithoutMeasuringAgain) {
  Trial run("greedy2", 100);
  run.options.depth = 20;
  absl::StatusOr<SearchResult> r = run.Go();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ir, "knobs 5 2 7");
  run.ExpectEachStateCountedOnce(*r);
}

TEST(SearchAlgorithms, Beam2BfsKeepsTheTwoBestChildrenPerNode) {
  Trial run("beam2bfs", 100);
  run.options.depth = 2;
  absl::StatusOr<SearchResult> r = run.Go();
  ASSERT_TRUE(r.ok()) << r.status();
  // Level 1: the start's three children (every knob up); the two best are knob 2 (x2) and knob 0
  // (x4/3). Level 2: their new children, in action order.
  EXPECT_THAT(run.world->measured,
              ElementsAre("knobs 0 0 0", "knobs 1 0 0", "knobs 0 1 0", "knobs 0 0 1",
                          "knobs 1 0 1", "knobs 0 1 1", "knobs 0 0 2", "knobs 2 0 0",
                          "knobs 1 1 0"));
  EXPECT_EQ(r->states_evaluated, 8);
  EXPECT_EQ(r->ir, "knobs 0 0 2");
  EXPECT_THAT(r->actions, ElementsAre("inc_2", "inc_2"));
}

TEST(SearchAlgorithms, BeamDfsGoesDepthFirst) {
  Trial run("beam2dfs", 100);
  run.options.depth = 3;
  absl::StatusOr<SearchResult> r = run.Go();
  ASSERT_TRUE(r.ok()) << r.status();
  // The start's children; then the best child's (knob 2) and its two best children's children,
  // before the second best child's (knob 0).
  EXPECT_THAT(run.world->measured,
              ElementsAre("knobs 0 0 0", "knobs 1 0 0", "knobs 0 1 0", "knobs 0 0 1",
                          "knobs 1 0 1", "knobs 0 1 1", "knobs 0 0 2", "knobs 1 0 2",
                          "knobs 0 1 2", "knobs 0 0 3", "knobs 2 0 1", "knobs 1 1 1",
                          "knobs 2 0 0", "knobs 1 1 0", "knobs 3 0 0", "knobs 2 1 0",
                          "knobs 1 2 0"));
  run.ExpectEachStateCountedOnce(*r);
}

TEST(SearchAlgorithms, RandomIsReproducibleBySeedAndKeepsItsLimit) {
  Trial a("random", 0.5), b("random", 0.5), c("random", 0.5);
  c.options.seed = 7;
  absl::StatusOr<SearchResult> ra = a.Go(), rb = b.Go(), rc = c.Go();
  ASSERT_TRUE(ra.ok() && rb.ok() && rc.ok());
  EXPECT_EQ(a.world->measured, b.world->measured);
  EXPECT_EQ(ra->actions, rb->actions);
  EXPECT_NE(a.world->measured, c.world->measured);
  // 0.5 s of the fake's time: at most one measurement past the limit.
  EXPECT_LE(ra->seconds, 0.5 + 0.011);
  EXPECT_GT(ra->states_evaluated, 10);
  a.ExpectEachStateCountedOnce(*ra);
}

// Evolution's first measured states with sketches "inc_2 inc_2 inc_0" and "inc_0": the start,
// then those two.
void ExpectTheStartThenTwoSketches(const FakeWorld& world) {
  ASSERT_GE(world.measured.size(), 3u);
  EXPECT_EQ(world.measured[0], "knobs 0 0 0");
  EXPECT_EQ(world.measured[1], "knobs 1 0 2");
  EXPECT_EQ(world.measured[2], "knobs 1 0 0");
}

TEST(SearchAlgorithms, EvolutionMeasuresTheSketchesFirstAndFindsTheOptimum) {
  Trial run("evolution", 5);
  run.world->sketches = "inc_2 inc_2 inc_0\ninc_0\n";
  absl::StatusOr<SearchResult> r = run.Go();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectTheStartThenTwoSketches(*run.world);
  EXPECT_EQ(r->ir, "knobs 5 2 7");
  EXPECT_EQ(r->gflops, 90);
  run.ExpectEachStateCountedOnce(*r);
  // Without sketches in the session's space (a name it lacks), evolution starts from random
  // rollouts from the start: its first measured states are walks of single actions from it.
  Trial unsketched("evolution", 5);
  unsketched.world->sketches = "inc_2 inc_2 inc_0\ntile_L0_4\n";
  ASSERT_TRUE(unsketched.Go().ok());
  ASSERT_GE(unsketched.world->measured.size(), 3u);
  EXPECT_EQ(unsketched.world->measured[1].substr(0, 6), "knobs ");
  int moved = 0;  // one action from the start: the knobs sum to 1 (the sketch's reach 3)
  for (char c : unsketched.world->measured[1].substr(6)) moved += c == ' ' ? 0 : c - '0';
  EXPECT_EQ(moved, 1) << unsketched.world->measured[1];
}

// A start that takes more than half the time (a large program's untiled kernel and reference
// run) still leaves the rest to the sketches: two at least are measured, then no more past half.
TEST(SearchAlgorithms, EvolutionMeasuresTwoSketchesAfterASlowStart) {
  Trial run("evolution", 10);
  run.world->start_measure_cost = absl::Seconds(6);
  run.world->sketches = "inc_2 inc_2 inc_0\ninc_0\ninc_1 inc_1 inc_1 inc_1\n";
  absl::StatusOr<SearchResult> r = run.Go();
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectTheStartThenTwoSketches(*run.world);
  for (const std::string& m : run.world->measured) EXPECT_NE(m, "knobs 0 4 0");  // past half
}

TEST(SearchAlgorithms, EvolutionWithACostModelMeasuresOnlyWhatItRanksWell) {
  Trial with("evolution", 1), without("evolution", 1);
  with.world->cost_model = true;
  absl::StatusOr<SearchResult> rw = with.Go(), ro = without.Go();
  ASSERT_TRUE(rw.ok() && ro.ok());
  // Once the model predicts (it is exact here), children are proposed six at a time and only one
  // of the better half measured: the model is asked more often than kernels are measured, and
  // the optimum is measured sooner.
  EXPECT_GT(with.world->predictions, static_cast<int>(with.world->measured.size()));
  EXPECT_EQ(without.world->predictions, 0);
  const auto found_at = [](const FakeWorld& w) {
    return std::find(w.measured.begin(), w.measured.end(), "knobs 5 2 7") - w.measured.begin();
  };
  EXPECT_EQ(rw->ir, "knobs 5 2 7");
  EXPECT_LT(found_at(*with.world), found_at(*without.world));
  with.ExpectEachStateCountedOnce(*rw);
  // Beyond cost_model_up_to_seconds the model is not asked.
  Trial longer("evolution", 3);
  longer.world->cost_model = true;
  ASSERT_TRUE(longer.Go().ok());
  EXPECT_EQ(longer.world->predictions, 0);
}

TEST(SearchAlgorithms, EveryAlgorithmKeepsTheTimeLimit) {
  for (const char* search : {"greedy1", "greedy2", "beam4dfs", "beam4bfs", "random",
                             "evolution"}) {
    Trial run(search, 0.3);
    run.options.depth = 50;
    run.world->target = {7, 7, 7};
    const absl::Time t0 = run.world->clock.Now();
    absl::StatusOr<SearchResult> r = run.Go();
    ASSERT_TRUE(r.ok()) << search << ": " << r.status();
    // A call in flight at the limit ends at the search's deadline.
    EXPECT_LE(absl::ToDoubleSeconds(run.world->clock.Now() - t0), 0.3 + 1e-9) << search;
    EXPECT_GT(r->gflops, r->start_gflops) << search;
  }
}

TEST(SearchAlgorithms, TheStartSlowerThanTheLimitIsADeadlineExceededThatSaysSo) {
  Trial run("evolution", 1);
  run.world->measure_cost = absl::Seconds(2);
  absl::StatusOr<SearchResult> r = run.Go();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(r.status().message(),
              HasSubstr("the start state's kernel was not timed within the 1 s time limit"));
}

TEST(SearchAlgorithms, RetimingReportsTheRetimedBestAndStart) {
  Trial run("greedy1", 100);
  run.options.depth = 20;
  run.options.retime_top = 3;
  run.world->measure_cost = absl::Milliseconds(1);
  absl::StatusOr<SearchResult> r = run.Go();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->retimed);
  // The 3 best distinct kernels and the start, 16 rounds (the most): greedy ends long before the
  // time limit, and 64 re-timings of 1 ms fit in the 0.5 s it would have kept.
  EXPECT_EQ(run.world->remeasured, 16 * 4);
  EXPECT_DOUBLE_EQ(r->gflops, 0.99 * 90);
  EXPECT_EQ(r->search_gflops, 90);
  EXPECT_DOUBLE_EQ(r->start_gflops, 0.99 * run.world->Gflops({0, 0, 0}));
  // A server that measures no peak beside its re-timings: the peak is the server's.
  EXPECT_FALSE(r->peak_beside_retimed);
  EXPECT_EQ(r->peak_gflops, r->server_peak_gflops);
}

// A re-timing the host's other load slowed (the first round's, here: half speed) is not the
// result: the best's fastest re-timing is, and the peak measured beside it.
TEST(SearchAlgorithms, RetimingReportsEachWinnersFastestRound) {
  Trial run("greedy1", 100);
  run.options.depth = 20;
  run.options.retime_top = 3;
  run.world->measure_cost = absl::Milliseconds(40);
  run.world->remeasure_factors = {0.5, 0.5, 0.5, 0.5, 0.97, 0.6, 0.6, 0.8, 0.9, 0.9};
  std::vector<double> heard;
  run.options.on_retimed = [&](const std::string& kernel, double gflops) {
    if (kernel == "knobs 5 2 7\n") heard.push_back(gflops);
  };
  absl::StatusOr<SearchResult> r = run.Go();
  ASSERT_TRUE(r.ok()) << r.status();
  // Re-timings of 40 ms while the 0.5 s greedy would have kept lasts: 13 (the last one starts
  // at about 0.48 s), the best's in rounds 1 to 4 (re-timings 0, 4, 8 and 12).
  EXPECT_EQ(run.world->remeasured, 13);
  EXPECT_DOUBLE_EQ(r->gflops, 0.97 * 90);
  EXPECT_EQ(r->search_gflops, 90);
  // Each heard with the fastest so far.
  EXPECT_THAT(heard, ElementsAre(0.5 * 90, 0.97 * 90, 0.97 * 90, 0.97 * 90));
}

// Re-timings that outlast the reserved time end the rounds, after the second round's winners
// (not the start), which run even past it: a first round of 0.4 s (re-timings of 100 ms) leaves
// time for the best alone, one of 0.8 s (200 ms) for none; a slow spell over the winners' first
// readings (0.6) then decides nothing, as their second readings come after the start's.
TEST(SearchAlgorithms, RetimingRoundsEndWithTheReservedTimeAfterTheWinnersSecondRound) {
  struct Case {
    int milliseconds;
    std::vector<double> factors;
    double best_factor;
  };
  for (const Case& c : {Case{100, {0.5, 0.99, 0.99, 0.99, 0.98, 0.5, 0.5}, 0.98},
                        Case{200, {0.6, 0.6, 0.6, 0.99, 0.97, 0.6, 0.6}, 0.97}}) {
    SCOPED_TRACE(c.milliseconds);
    Trial run("greedy1", 100);
    run.options.depth = 20;
    run.options.retime_top = 3;
    run.world->measure_cost = absl::Milliseconds(c.milliseconds);
    run.world->remeasure_factors = c.factors;
    absl::StatusOr<SearchResult> r = run.Go();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(run.world->remeasured, 4 + 3);
    EXPECT_DOUBLE_EQ(r->gflops, c.best_factor * 90);
    EXPECT_DOUBLE_EQ(r->start_gflops, 0.99 * run.world->Gflops({0, 0, 0}));
  }
}

// A search that found nothing faster than the start and used up its limit: the start, the
// search's best, is re-timed first and is the result (were it re-timed last, the time would be
// gone before it and a slower runner-up would be reported).
TEST(SearchAlgorithms, RetimingAfterTheLimitTimesTheStartFirstWhenItIsTheBest) {
  Trial run("random", 1);
  run.world->target = {0, 0, 0};
  run.world->measure_cost = absl::Milliseconds(40);
  run.options.depth = 3;
  run.options.retime_top = 3;
  std::vector<std::string> retimed;
  run.options.on_retimed = [&](const std::string& kernel, double) { retimed.push_back(kernel); };
  absl::StatusOr<SearchResult> r = run.Go();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->retimed);
  ASSERT_FALSE(retimed.empty());
  EXPECT_EQ(retimed[0], "knobs 0 0 0\n");
  EXPECT_LT(retimed.size(), 4u);  // not every candidate: the time was up
  EXPECT_EQ(r->ir, "knobs 0 0 0");
  EXPECT_DOUBLE_EQ(r->gflops, 0.99 * 90);
  EXPECT_DOUBLE_EQ(r->start_gflops, 0.99 * 90);
  EXPECT_EQ(r->search_gflops, 90);
}

TEST(SearchAlgorithms, RetimingReportsThePeakMeasuredBesideTheRetimedBest) {
  Trial run("greedy1", 100);
  run.options.depth = 20;
  run.options.retime_top = 3;
  run.world->remeasure_peak = 77.5;
  absl::StatusOr<SearchResult> r = run.Go();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->peak_beside_retimed);
  EXPECT_EQ(r->peak_gflops, 77.5);
  EXPECT_NE(r->server_peak_gflops, 77.5);
  EXPECT_GT(r->server_peak_gflops, 0);
}

TEST(SearchAlgorithms, BadSpecsAreRefused) {
  Trial run("greedy1", 1);
  run.options.search.lookahead = 0;
  EXPECT_EQ(run.Go().status().code(), absl::StatusCode::kInvalidArgument);
  run.options.search = *ParseSearch("beam2bfs");
  run.options.search.width = 0;
  EXPECT_EQ(run.Go().status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(run.world->measured.empty());
}

// A sketch_value policy over the fake's loops_tensor (its knobs): value log2(1 + knob 0).
Policy KnobZeroValue() {
  const auto b64 = [](const std::vector<float>& v) {
    return absl::Base64Escape(
        absl::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  };
  const std::string layer = R"({"in": 3, "out": 3, "weight": ")" +
                            b64({1, 0, 0, 0, 1, 0, 0, 0, 1}) + R"(", "bias": ")" +
                            b64({0, 0, 0}) + R"("})";
  const std::string head = R"({"in": 3, "out": 1, "weight": ")" + b64({1, 0, 0}) +
                           R"(", "bias": ")" + b64({0}) + R"("})";
  absl::StatusOr<Policy> p = Policy::Parse(
      R"({"format": "looptool-policy", "version": 1, "kind": "sketch_value",
          "action_space": "fake", "observation_space": "loops_tensor", "input_size": 3,
          "num_actions": 1, "preprocess": "log2p1", "trunk": [)" +
      layer + R"(], "head": )" + head + R"(, "value": )" + head + R"(, "meta": {}})");
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

TEST(SearchAlgorithms, ASketchValuePolicyTimesOnlyTheSketchItValuesMost) {
  Trial run("policy", 5);
  run.world->sketches = "inc_2\ninc_0 inc_0 inc_0\ninc_0\n";
  const Policy policy = KnobZeroValue();
  run.options.policy = &policy;
  absl::StatusOr<SearchResult> r = run.Go();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->actions, ElementsAre("inc_0", "inc_0", "inc_0"));
  EXPECT_THAT(run.world->measured, ElementsAre("knobs 3 0 0"));  // nothing else timed
  EXPECT_EQ(r->states_evaluated, 1);
  // policy_guided: evolution from the top half of the ranked sketches (two of three), measured
  // in the policy's order after the start; the third never timed first.
  Trial guided("policy_guided", 5);
  guided.world->sketches = run.world->sketches;
  guided.options.policy = &policy;
  ASSERT_TRUE(guided.Go().ok());
  EXPECT_EQ(guided.world->measured[1], "knobs 3 0 0");
  EXPECT_EQ(guided.world->measured[2], "knobs 1 0 0");
}

// The built-in loop_set policy (its scores on the fake's loop_features are arbitrary but fixed)
// with a cost model over the fake's plan_features: minus the knobs' distance to the target,
// -(|k0 - 5| + |k1 - 2| + |k2 - 7|), as relu(k - t) + relu(t - k) per knob (or to `target`).
nlohmann::json LoopSetWithDistanceCostJson(const std::vector<int>& target = FakeWorld().target) {
  const auto b64 = [](const std::vector<float>& v) {
    return absl::Base64Escape(
        absl::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  };
  nlohmann::json j = nlohmann::json::parse(LoopSetPolicyJson());
  j.erase("members");  // its own network alone
  std::vector<float> w1(6 * 3, 0.0f), b1(6);
  for (int i = 0; i < 3; ++i) {
    w1[(2 * i) * 3 + i] = 1;
    b1[2 * i] = -target[i];
    w1[(2 * i + 1) * 3 + i] = -1;
    b1[2 * i + 1] = target[i];
  }
  j["cost"] = {{"observation_space", "plan_features"},
               {"names", {"knob_0", "knob_1", "knob_2"}},
               {"mean", b64({0, 0, 0})},
               {"scale", b64({1, 1, 1})},
               {"layers",
                {{{"in", 3}, {"out", 6}, {"weight", b64(w1)}, {"bias", b64(b1)}},
                 {{"in", 6}, {"out", 1}, {"weight", b64(std::vector<float>(6, -1))},
                  {"bias", b64({0})}}}}};
  return j;
}

Policy LoopSetWithDistanceCost(const nlohmann::json& members = nlohmann::json()) {
  nlohmann::json j = LoopSetWithDistanceCostJson();
  if (!members.is_null()) j["members"] = members;
  absl::StatusOr<Policy> p = Policy::Parse(j.dump());
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

// The knobs of a fake state's key ("knobs 5 2 7" -> {5, 2, 7}).
std::vector<int> Knobs(const std::string& key) {
  std::vector<int> knobs;
  for (absl::string_view part : absl::StrSplit(key.substr(6), ' ')) {
    int k = 0;
    EXPECT_TRUE(absl::SimpleAtoi(part, &k)) << key;
    knobs.push_back(k);
  }
  return knobs;
}

// The cost model's score of a fake state's key ("knobs 5 2 7").
double DistanceScore(const std::string& key) {
  const std::vector<int> target = FakeWorld().target;
  std::vector<std::string> parts = absl::StrSplit(key, ' ');
  double score = 0;
  for (int i = 0; i < 3; ++i) {
    int k = 0;
    EXPECT_TRUE(absl::SimpleAtoi(parts[i + 1], &k));
    score -= std::abs(k - target[i]);
  }
  return score;
}

// A policy with members plays each network's episodes, sharing their number, and ranks them all
// by its one cost model. A member identical to its own network first ends where the policy's
// eight did, which are left out without counting, then goes on to the next eight: sixteen
// candidates are the network's sixteen likeliest, timed as when it plays them alone. A member
// that stops as soon as it may adds its one-action episode beside the greedy one.
TEST(SearchAlgorithms, ALoopSetPolicysMembersPlayTheirOwnEpisodes) {
  const nlohmann::json j = LoopSetWithDistanceCostJson();
  const auto all_timed = [](const Policy& policy, int candidates) {
    Trial t("policy", 60);
    t.world->loop_set = true;
    t.options.policy = &policy;
    t.options.policy_candidates = candidates;
    t.options.policy_timed = candidates;  // one wave
    t.options.policy_seconds = 5;
    EXPECT_TRUE(t.Go().ok());
    return t.world->measured;
  };
  const Policy alone = LoopSetWithDistanceCost();
  const Policy twice = LoopSetWithDistanceCost(nlohmann::json::array({testing::NetworkLayers(j, 0)}));
  const std::vector<std::string> sixteen = all_timed(alone, 16);
  ASSERT_EQ(sixteen.size(), 16u);
  EXPECT_EQ(all_timed(twice, 16), sixteen);
  EXPECT_EQ(all_timed(alone, 8).size(), 8u);

  const Policy stopping = LoopSetWithDistanceCost(nlohmann::json::array({testing::NetworkLayers(j, 1000)}));
  const auto policy = [](const Policy& p, int candidates, int timed) {
    Trial t("policy", 5);
    t.world->loop_set = true;
    t.options.policy = &p;
    t.options.policy_candidates = candidates;
    t.options.policy_timed = timed;
    EXPECT_TRUE(t.Go().ok());
    return t.world->measured;
  };
  const std::vector<std::string> greedy = policy(alone, 1, 1);
  ASSERT_EQ(greedy.size(), 1u);
  EXPECT_EQ(policy(stopping, 1, 1), greedy);  // one candidate: the policy's own greedy episode
  // Two episodes, and the start timed right after the first.
  std::vector<std::string> two = policy(stopping, 2, 3);
  ASSERT_EQ(two.size(), 3u);
  EXPECT_EQ(two[1], "knobs 0 0 0");
  two.erase(two.begin() + 1);
  const std::string one_step = two[0] == greedy[0] ? two[1] : two[0];
  EXPECT_THAT(two, ::testing::Contains(greedy[0]));
  EXPECT_EQ(DistanceScore(one_step) - DistanceScore("knobs 0 0 0"), 1) << one_step;
}

TEST(SearchAlgorithms, ALoopSetPolicyTimesTheFewEpisodesItsCostModelRanksFirst) {
  const Policy policy = LoopSetWithDistanceCost();
  const auto trial = [&policy](const std::string& search, double limit) {
    Trial t(search, limit);
    t.world->loop_set = true;
    t.options.policy = &policy;
    return t;
  };
  // One candidate: the greedy episode, its final state the only one timed.
  Trial greedy = trial("policy", 5);
  greedy.options.policy_candidates = 1;
  absl::StatusOr<SearchResult> g = greedy.Go();
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(greedy.world->measured.size(), 1u);
  EXPECT_FALSE(g->actions.empty());  // one action at least
  // Sixteen, one timed: still one state timed, and one the cost model ranks at least as high as
  // the greedy episode's (which is among the candidates).
  Trial ranked = trial("policy", 5);
  ranked.options.policy_candidates = 16;
  ranked.options.policy_timed = 1;
  absl::StatusOr<SearchResult> r = ranked.Go();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(ranked.world->measured.size(), 1u);
  EXPECT_EQ(r->states_evaluated, 1);
  EXPECT_GE(DistanceScore(ranked.world->measured[0]), DistanceScore(greedy.world->measured[0]));
  EXPECT_EQ(r->ir, ranked.world->measured[0]);
  // Three timed: the one above first, then the next two in the cost model's order, distinct;
  // the fastest of the three is the result.
  Trial top3 = trial("policy", 5);
  top3.options.policy_candidates = 16;
  top3.options.policy_timed = 3;
  absl::StatusOr<SearchResult> r3 = top3.Go();
  ASSERT_TRUE(r3.ok()) << r3.status();
  const std::vector<std::string>& three = top3.world->measured;
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(r3->states_evaluated, 3);
  EXPECT_EQ(three[0], ranked.world->measured[0]);
  EXPECT_EQ(std::set<std::string>(three.begin(), three.end()).size(), 3u);
  EXPECT_LE(DistanceScore(three[1]), DistanceScore(three[0]));
  EXPECT_LE(DistanceScore(three[2]), DistanceScore(three[1]));
  double fastest3 = 0;
  std::string fastest3_ir;
  for (const std::string& ir : three) {
    const std::vector<int> knobs = Knobs(ir);
    if (top3.world->Gflops(knobs) > fastest3) {
      fastest3 = top3.world->Gflops(knobs);
      fastest3_ir = ir;
    }
  }
  EXPECT_DOUBLE_EQ(r3->gflops, fastest3);
  EXPECT_EQ(r3->ir, fastest3_ir);
  // A cost model that misranks (the world's optimum moved, the model's not): the same three
  // timed in the same order, and the third, now the fastest, is the result.
  Trial moved = trial("policy", 5);
  moved.options.policy_candidates = 16;
  moved.options.policy_timed = 3;
  moved.world->target = {3, 1, 7};
  absl::StatusOr<SearchResult> rm = moved.Go();
  ASSERT_TRUE(rm.ok()) << rm.status();
  EXPECT_EQ(moved.world->measured, three);
  EXPECT_EQ(rm->ir, three[2]);
  EXPECT_DOUBLE_EQ(rm->gflops, moved.world->Gflops({3, 1, 0}));
  EXPECT_EQ(three[2], "knobs 3 1 0");
  // The defaults: up to sixteen timed within 0.3 s (each timing here 10 ms): every candidate,
  // the first three as above. A 60 ms budget (the time limit where shorter): fewer episodes
  // (played in half of it) and fewer timed, distinct, none past it.
  Trial all = trial("policy", 5);
  ASSERT_EQ(all.options.policy_candidates, 16);
  ASSERT_EQ(all.options.policy_timed, 64);
  ASSERT_EQ(all.options.policy_seconds, 0.3);
  const absl::Time t0 = all.world->clock.Now();
  ASSERT_TRUE(all.Go().ok());
  const std::vector<std::string>& every = all.world->measured;
  ASSERT_GT(every.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(every.begin(), every.begin() + 3), three);
  EXPECT_LE(all.world->clock.Now() - t0, absl::Milliseconds(300));
  for (const double limit : {5.0, 0.06}) {
    Trial budget = trial("policy", limit);
    budget.options.policy_seconds = limit == 5.0 ? 0.06 : 0.3;
    const absl::Time b0 = budget.world->clock.Now();
    absl::StatusOr<SearchResult> rb = budget.Go();
    ASSERT_TRUE(rb.ok()) << rb.status();
    const std::vector<std::string>& some = budget.world->measured;
    ASSERT_GE(some.size(), 2u) << limit;
    EXPECT_LT(some.size(), every.size()) << limit;
    EXPECT_EQ(rb->states_evaluated, static_cast<int64_t>(some.size()));
    EXPECT_EQ(std::set<std::string>(some.begin(), some.end()).size(), some.size());
    EXPECT_LE(budget.world->clock.Now() - b0, absl::Milliseconds(60)) << limit;
  }
  // Nothing to time, or no time: refused before any step.
  for (const auto& [n, seconds] : {std::pair(0, 0.3), std::pair(16, 0.0)}) {
    Trial bad = trial("policy", 5);
    bad.options.policy_timed = n;
    bad.options.policy_seconds = seconds;
    absl::StatusOr<SearchResult> rb = bad.Go();
    EXPECT_EQ(rb.status().code(), absl::StatusCode::kInvalidArgument) << n;
    EXPECT_THAT(rb.status().message(), ::testing::HasSubstr("1 candidate or more")) << n;
    EXPECT_TRUE(bad.world->measured.empty()) << n;
  }
  // policy_guided over the same sixteen episodes: timed in the cost model's order (the first
  // the one `policy` timed), then, with time left, the next waves; distinct, the fastest the
  // result.
  Trial guided = trial("policy_guided", 0.5);
  guided.options.guided_candidates = 16;
  absl::StatusOr<SearchResult> best = guided.Go();
  ASSERT_TRUE(best.ok()) << best.status();
  const std::vector<std::string>& timed = guided.world->measured;
  ASSERT_GT(timed.size(), 16u);
  EXPECT_EQ(best->states_evaluated, static_cast<int64_t>(timed.size()));
  EXPECT_EQ(std::set<std::string>(timed.begin(), timed.end()).size(), timed.size());
  EXPECT_EQ(DistanceScore(timed[0]), DistanceScore(ranked.world->measured[0]));
  double fastest = 0;
  for (size_t i = 0; i < timed.size(); ++i) {
    if (i > 0 && i < 16) {
      EXPECT_LE(DistanceScore(timed[i]), DistanceScore(timed[i - 1])) << i;
    }
    fastest = std::max(fastest, guided.world->Gflops(Knobs(timed[i])));
  }
  EXPECT_DOUBLE_EQ(best->gflops, fastest);
  // A time limit that ends before the second timing: the first is timed, nothing else.
  Trial short_guided = trial("policy_guided", 0.012);
  ASSERT_TRUE(short_guided.Go().ok());
  EXPECT_EQ(short_guided.world->measured.size(), 1u);
}

// With time left after a wave, the policy plays the next likeliest episodes and times them
// likewise: its first wave as when it has one, its first two waves the likeliest episodes of
// twice the number, each wave timed in its cost model's order, no more than policy_timed in
// all, and only the two fastest of earlier waves keep their sessions.
TEST(SearchAlgorithms, ALoopSetPolicyPlaysAndTimesWavesWhileTimeIsLeft) {
  const Policy policy = LoopSetWithDistanceCost();
  struct Run {
    absl::StatusOr<SearchResult> result;
    std::vector<std::string> measured;
    int most_live = 0;
    int remeasured = 0;
    absl::Duration took;
  };
  const auto run = [&policy](int candidates, int timed, double seconds) {
    Trial t("policy", 60);
    t.world->loop_set = true;
    t.options.policy = &policy;
    t.options.policy_candidates = candidates;
    t.options.policy_timed = timed;
    t.options.policy_seconds = seconds;
    const absl::Time t0 = t.world->clock.Now();
    Run r{t.Go()};
    r.measured = t.world->measured;
    r.most_live = t.world->most_live_sources;
    r.remeasured = t.world->remeasured;
    r.took = t.world->clock.Now() - t0;
    return r;
  };
  const Run four = run(4, 4, 5);
  const Run eight = run(8, 8, 5);
  const Run waves = run(4, 12, 5);
  ASSERT_TRUE(waves.result.ok()) << waves.result.status();
  ASSERT_EQ(four.measured.size(), 4u);
  ASSERT_EQ(eight.measured.size(), 8u);
  const std::vector<std::string>& w = waves.measured;
  ASSERT_EQ(w.size(), 12u);
  EXPECT_EQ(waves.result->states_evaluated, 12);
  EXPECT_EQ(std::set<std::string>(w.begin(), w.end()).size(), 12u);
  EXPECT_EQ(std::vector<std::string>(w.begin(), w.begin() + 4), four.measured);
  EXPECT_EQ(std::set<std::string>(w.begin(), w.begin() + 8),
            std::set<std::string>(eight.measured.begin(), eight.measured.end()));
  for (size_t i = 1; i < w.size(); ++i) {
    if (i % 4 != 0) {
      EXPECT_LE(DistanceScore(w[i]), DistanceScore(w[i - 1])) << i;
    }
  }
  // Sessions: the start's and its fork, a wave's four, and the fastest two kept; twelve and more
  // were every wave's kept.
  EXPECT_LE(waves.most_live, 8);
  EXPECT_GT(waves.most_live, 4);
  // A budget that ends the waves: more than the first wave timed, fewer than allowed; the
  // waves' timings leave the re-timings their time (two 10 ms calls and the 40 ms peak beside
  // the first), none past the budget.
  const Run budget = run(4, 64, 0.2);
  ASSERT_TRUE(budget.result.ok()) << budget.result.status();
  EXPECT_GT(budget.measured.size(), 4u);
  EXPECT_LT(budget.measured.size(), 64u);
  EXPECT_EQ(budget.remeasured, 2);
  EXPECT_LE(budget.took, absl::Milliseconds(200));
}

// With a cost model, a candidate scored pass_predicted_slower (2 by default) below the fastest
// kernel timed so far is not timed: every kernel timed scores no lower than that against the
// fastest timed before it, fewer of the first wave are timed than where every one is, and the
// time left plays more waves. Below 0 (or NaN): refused before any step.
TEST(SearchAlgorithms, ALoopSetPolicyPassesOverCandidatesItsCostModelPredictsFarSlower) {
  const Policy policy = LoopSetWithDistanceCost();
  struct Run {
    absl::StatusOr<SearchResult> result;
    std::vector<std::string> measured;
    int most_live = 0;
  };
  const auto run = [&policy](double pass, const std::string& search) {
    Trial t(search, search == "policy" ? 60 : 0.5);
    t.world->loop_set = true;
    t.options.policy = &policy;
    t.options.policy_candidates = 16;
    t.options.guided_candidates = 16;
    t.options.policy_seconds = 0.3;
    t.options.pass_predicted_slower = pass;
    Run r{t.Go()};
    r.measured = t.world->measured;
    r.most_live = t.world->most_live_sources;
    return r;
  };
  ASSERT_EQ(SearchOptions().pass_predicted_slower, 2.0);
  const FakeWorld world;
  // The lowest score of a kernel timed against the fastest timed before it, and how many of
  // the first `n` timed score more than 2 below it.
  const auto worst = [&world](const std::vector<std::string>& timed) {
    double fastest = -1, anchor = 0, worst_gap = 0;
    for (const std::string& ir : timed) {
      if (fastest >= 0) worst_gap = std::min(worst_gap, DistanceScore(ir) - anchor);
      if (world.Gflops(Knobs(ir)) > fastest) {
        fastest = world.Gflops(Knobs(ir));
        anchor = DistanceScore(ir);
      }
    }
    return worst_gap;
  };
  for (const std::string search : {"policy", "policy_guided"}) {
    const Run every = run(std::numeric_limits<double>::infinity(), search);
    const Run passing = run(2, search);
    ASSERT_TRUE(every.result.ok()) << every.result.status();
    ASSERT_TRUE(passing.result.ok()) << passing.result.status();
    EXPECT_LT(worst(every.measured), -2) << search;  // some far slower were timed
    EXPECT_GE(worst(passing.measured), -2) << search;
    // Each kernel once. (Not always as fast: the fake's distance misranks some kernels, as a
    // cost model may.)
    EXPECT_EQ(std::set<std::string>(passing.measured.begin(), passing.measured.end()).size(),
              passing.measured.size());
    EXPECT_EQ(passing.result->states_evaluated, static_cast<int64_t>(passing.measured.size()));
    // The passed over end their sessions as the untimed do.
    EXPECT_LE(passing.most_live, every.most_live) << search;
    // A margin of 0: only candidates scored as high as the fastest are timed after it.
    const Run strict = run(0, search);
    ASSERT_TRUE(strict.result.ok()) << strict.result.status();
    EXPECT_GE(worst(strict.measured), 0) << search;
  }
  // Sixteen timed at most: where every one is timed, the first wave's; where some are passed
  // over, fewer of the first wave's, in the same order.
  Trial all("policy", 60);
  all.world->loop_set = true;
  all.options.policy = &policy;
  all.options.policy_candidates = 16;
  all.options.policy_timed = 16;
  Trial some = all;
  some.world = std::make_shared<FakeWorld>();
  some.world->loop_set = true;
  some.options.pass_predicted_slower = 2;
  ASSERT_TRUE(all.Go().ok());
  ASSERT_TRUE(some.Go().ok());
  ASSERT_EQ(all.world->measured.size(), 16u);
  ASSERT_FALSE(some.world->measured.empty());
  EXPECT_EQ(some.world->measured[0], all.world->measured[0]);
  const std::vector<std::string>& first_wave = all.world->measured;
  std::vector<std::string> of_first_wave;
  for (const std::string& ir : some.world->measured) {
    if (std::count(first_wave.begin(), first_wave.end(), ir) > 0) of_first_wave.push_back(ir);
  }
  EXPECT_LT(of_first_wave.size(), first_wave.size());
  EXPECT_TRUE(std::includes(first_wave.begin(), first_wave.end(), of_first_wave.begin(),
                            of_first_wave.end(), [&](const std::string& a, const std::string& b) {
                              return std::find(first_wave.begin(), first_wave.end(), a) <
                                     std::find(first_wave.begin(), first_wave.end(), b);
                            }));
  for (const double bad : {-1.0, std::nan("")}) {
    Trial t("policy", 60);
    t.world->loop_set = true;
    t.options.policy = &policy;
    t.options.pass_predicted_slower = bad;
    ExpectRefusedBeforeAnyStep(t, "pass_predicted_slower");
  }
}

// The start state is one more candidate of the first wave, timed right after the best-ranked
// one: where it is the fastest (an elementwise kernel's untiled nest may be), it is the result,
// with no action, even where the cost model ranks it last and only two are timed; where it is
// predicted far slower than the first timed, it is passed over.
TEST(SearchAlgorithms, ALoopSetPolicyTimesTheStartStateRightAfterItsFirstCandidate) {
  const Policy policy = LoopSetWithDistanceCost();
  const auto trial = [&policy](const std::string& search, int timed) {
    Trial t(search, 5);
    t.world->loop_set = true;
    t.world->target = {0, 0, 0};  // the start the fastest; the cost model ranks it last
    t.options.policy = &policy;
    // Two episodes: knob 0 raised by 2 and by 1 (the third likeliest, up and down again, ends
    // in the start: the next wave's).
    t.options.policy_candidates = 2;
    t.options.policy_timed = timed;
    t.options.guided_candidates = 2;
    t.options.guided_timed = timed;
    return t;
  };
  for (const std::string search : {"policy", "policy_guided"}) {
    Trial all = trial(search, 3);
    absl::StatusOr<SearchResult> r = all.Go();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_THAT(all.world->measured, ElementsAre("knobs 2 0 0", "knobs 0 0 0", "knobs 1 0 0"))
        << search;
    EXPECT_EQ(r->ir, "knobs 0 0 0") << search;
    EXPECT_TRUE(r->actions.empty()) << search;
    EXPECT_DOUBLE_EQ(r->search_gflops, all.world->Gflops({0, 0, 0})) << search;
    Trial two = trial(search, 2);
    absl::StatusOr<SearchResult> r2 = two.Go();
    ASSERT_TRUE(r2.ok()) << r2.status();
    EXPECT_THAT(two.world->measured, ElementsAre("knobs 2 0 0", "knobs 0 0 0")) << search;
    EXPECT_EQ(r2->ir, "knobs 0 0 0") << search;
    // Scored 14 below the target, against 12 for the first timed: passed over at a margin of 1.
    Trial passing = trial(search, 3);
    passing.options.pass_predicted_slower = 1;
    absl::StatusOr<SearchResult> r3 = passing.Go();
    ASSERT_TRUE(r3.ok()) << r3.status();
    ASSERT_FALSE(passing.world->measured.empty());
    EXPECT_EQ(passing.world->measured[0], "knobs 2 0 0") << search;
    EXPECT_EQ(std::count(passing.world->measured.begin(), passing.world->measured.end(),
                         "knobs 0 0 0"),
              0)
        << search;
    EXPECT_NE(r3->ir, "knobs 0 0 0") << search;
  }
}

// Where the cost model ranks the start first (its target the start, the world's elsewhere), the
// best-ranked episode is timed first and the start right after it: the first timing has no
// fastest to cut it short, and an untiled nest may be slow.
TEST(SearchAlgorithms, ALoopSetPolicyTimesAnEpisodeBeforeAStartItsCostModelRanksFirst) {
  absl::StatusOr<Policy> policy = Policy::Parse(LoopSetWithDistanceCostJson({0, 0, 0}).dump());
  ASSERT_TRUE(policy.ok()) << policy.status();
  for (const std::string search : {"policy", "policy_guided"}) {
    Trial t(search, 5);
    t.world->loop_set = true;
    t.options.policy = &*policy;
    t.options.policy_candidates = 2;
    t.options.policy_timed = 3;
    t.options.guided_candidates = 2;
    t.options.guided_timed = 3;
    absl::StatusOr<SearchResult> r = t.Go();
    ASSERT_TRUE(r.ok()) << r.status();
    // The cost model's ranking: the start (score 0) first, then knob 0 raised by 1 (-1), by 2.
    EXPECT_THAT(t.world->measured, ElementsAre("knobs 1 0 0", "knobs 0 0 0", "knobs 2 0 0"))
        << search;
    EXPECT_EQ(r->ir, "knobs 2 0 0") << search;  // the nearest the world's target (5, 2, 7)
  }
}

// The first timing of a program new to the server waits for its reference run (the world's
// start_measure_cost: 150 ms of a 0.3 s budget). A server that says what the kernel took its
// worker (work_seconds: 10 ms) lets the search read that (and its step overhead) as what
// re-timing the kernel costs, and both finalists are re-timed; from a server that does not say,
// the first timing call's 160 ms leaves no room to re-time the fastest, the first timed.
// A loop_set `search` with `policy` in a world whose server says work_seconds, or not.
Trial SayingTrial(const std::string& search, double limit, const Policy& policy, bool says) {
  Trial t(search, limit);
  t.world->loop_set = true;
  t.world->work_seconds = says;
  t.options.policy = &policy;
  return t;
}

TEST(SearchAlgorithms, ALoopSetPolicyDoesNotReadAProgramsReferenceRunAsARetimingsCost) {
  const Policy policy = LoopSetWithDistanceCost();
  for (const bool says : {true, false}) {
    Trial t = SayingTrial("policy", 5, policy, says);
    t.world->start_measure_cost = absl::Milliseconds(150);
    t.options.policy_candidates = 2;
    t.options.policy_timed = 3;
    absl::StatusOr<SearchResult> r = t.Go();
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(t.world->measured.size(), 3u) << says;
    EXPECT_EQ(r->ir, t.world->measured[0]) << says;  // the first timed, the fastest
    EXPECT_EQ(t.world->remeasured, says ? 2 : 0);
    EXPECT_EQ(r->retimed, says);
    EXPECT_LE(t.world->clock.Now() - absl::UnixEpoch(), absl::Milliseconds(300)) << says;
  }
}

// Where every kernel waits 60 ms for a worker (other sessions' kernels; in no work_seconds), the
// timing calls after the first show it, and the re-timings' estimates count it: the timings stop
// where both finalists' re-timings still fit, as where the server does not say work_seconds.
TEST(SearchAlgorithms, ALoopSetPolicyCountsWaitsForAWorkerInItsRetimingEstimates) {
  const Policy policy = LoopSetWithDistanceCost();
  for (const bool says : {true, false}) {
    Trial t = SayingTrial("policy_guided", 1, policy, says);
    t.world->queue_cost = absl::Milliseconds(60);
    t.options.guided_candidates = 16;
    t.options.guided_timed = 64;
    absl::StatusOr<SearchResult> r = t.Go();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GE(t.world->measured.size(), 5u) << says;
    EXPECT_EQ(t.world->remeasured, 2) << says;
    EXPECT_TRUE(r->retimed) << says;
    EXPECT_LE(t.world->clock.Now() - absl::UnixEpoch(), absl::Seconds(1)) << says;
  }
}

TEST(SearchAlgorithms, ALoopSetPolicyRetimesItsTwoFastestCandidatesWhereTheyFit) {
  const Policy policy = LoopSetWithDistanceCost();
  Trial t("policy", 5);
  t.world->loop_set = true;
  t.options.policy = &policy;
  t.options.policy_candidates = 16;
  t.options.policy_timed = 3;
  // The fastest re-times slower (its timing stands), the second 1.5x faster (a slow spell
  // during its timing): the second is the result, at its re-timed speed.
  t.world->remeasure_factors = {0.9, 1.5};
  t.world->remeasure_peak = 123;
  std::vector<std::pair<std::string, double>> heard;
  t.options.on_retimed = [&heard](const std::string& kernel, double gflops) {
    heard.emplace_back(kernel, gflops);
  };
  absl::StatusOr<SearchResult> r = t.Go();
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<std::string>& three = t.world->measured;
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(r->states_evaluated, 3);
  EXPECT_EQ(t.world->remeasured, 2);
  std::vector<std::pair<double, std::string>> by_speed;
  for (const std::string& ir : three) by_speed.emplace_back(t.world->Gflops(Knobs(ir)), ir);
  std::sort(by_speed.rbegin(), by_speed.rend());
  ASSERT_GT(1.5 * by_speed[1].first, by_speed[0].first);
  EXPECT_EQ(r->ir, by_speed[1].second);
  EXPECT_DOUBLE_EQ(r->gflops, 1.5 * by_speed[1].first);
  EXPECT_DOUBLE_EQ(r->search_gflops, by_speed[1].first);
  EXPECT_TRUE(r->retimed);
  EXPECT_TRUE(r->peak_beside_retimed);
  EXPECT_EQ(r->peak_gflops, 123);
  // on_retimed hears each with its kernel key (the ir's lines, cursor left out) and its GFLOPS.
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[0], std::pair(by_speed[0].second + "\n", by_speed[0].first));
  EXPECT_EQ(heard[1], std::pair(by_speed[1].second + "\n", 1.5 * by_speed[1].first));
  // One candidate timed: it alone is re-timed.
  Trial one("policy", 5);
  one.world->loop_set = true;
  one.options.policy = &policy;
  one.options.policy_candidates = 16;
  one.options.policy_timed = 1;
  ASSERT_TRUE(one.Go().ok());
  EXPECT_EQ(one.world->remeasured, 1);
  // Timings that fill the budget (10 ms each in 60 ms) leave no room: none re-timed, none past.
  Trial full("policy", 5);
  full.world->loop_set = true;
  full.options.policy = &policy;
  full.options.policy_seconds = 0.06;
  const absl::Time t0 = full.world->clock.Now();
  absl::StatusOr<SearchResult> rf = full.Go();
  ASSERT_TRUE(rf.ok()) << rf.status();
  EXPECT_EQ(full.world->remeasured, 0);
  EXPECT_FALSE(rf->retimed);
  EXPECT_LE(full.world->clock.Now() - t0, absl::Milliseconds(60));
}

// policy_guided keeps its re-timings whole: its first wave's timings (as many candidates as
// would fill the time) stop where the two re-timings (10 ms each, the first with the 40 ms
// peak) still fit after them, and both run within the limit.
TEST(SearchAlgorithms, PolicyGuidedStopsItsTimingsWhereItsRetimingsStillFit) {
  const Policy policy = LoopSetWithDistanceCost();
  Trial t("policy_guided", 0.2);
  t.world->loop_set = true;
  t.options.policy = &policy;
  t.options.guided_candidates = 64;
  const absl::Time t0 = t.world->clock.Now();
  absl::StatusOr<SearchResult> r = t.Go();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(t.world->remeasured, 2);
  EXPECT_TRUE(r->retimed);
  EXPECT_GE(r->states_evaluated, 4);
  EXPECT_LE(t.world->clock.Now() - t0, absl::Milliseconds(200));
  // A slow candidate's timing (100 ms, knobs 0 0 0, the third timed, not a finalist) does not
  // stop the timings as if the finalists' re-timings would take as long: they go on past 0.16 s
  // (where two 100 ms re-timings and the peak would leave 0.4 s), and both re-timings run within
  // the limit.
  Trial slow("policy_guided", 0.4);
  slow.world->loop_set = true;
  slow.world->slow_states = {"knobs 0 0 0"};
  slow.options.policy = &policy;
  slow.options.guided_candidates = 64;
  slow.options.guided_neighbor_share = 0;  // the first wave's timings to the re-timings' reserve
  std::vector<absl::Duration> at;
  const absl::Time s0 = slow.world->clock.Now();
  slow.options.on_measured = [&](const MeasuredKernel&) {
    at.push_back(slow.world->clock.Now() - s0);
  };
  absl::StatusOr<SearchResult> rs = slow.Go();
  ASSERT_TRUE(rs.ok()) << rs.status();
  ASSERT_GE(slow.world->measured.size(), 5u);
  EXPECT_EQ(slow.world->measured[2], "knobs 0 0 0") << absl::StrJoin(slow.world->measured, ", ");
  ASSERT_FALSE(at.empty());
  EXPECT_GT(at.back(), absl::Milliseconds(250));
  EXPECT_EQ(slow.world->remeasured, 2);
  EXPECT_LE(slow.world->clock.Now() - s0, absl::Milliseconds(400));
}

// A path's neighbors: its tiles' nearest other factors of the same loop pointer, the nearest on
// either side first (none past the ends of that pointer's factors).
TEST(SearchAlgorithms, NeighborPathsChangeOneTileFactor) {
  const std::vector<std::string> names = {
      "tile_L0_2",  "tile_L0_4", "tile_L0_8", "tile_L0_16",        "tile_L0_32",
      "tile_L1_4",  "tile_L1_8", "unroll_L0", "interchange_L1_L0", "tile_L10_8",
      "tile_L10_+4", "tile_L10_-16"};
  // One factor changed, then tile_L0_8 and tile_L1_4 traded into 4 x 8 (the product 32 kept;
  // 16 x 2 and 2 x 16 have no tile_L1_2 or tile_L1_16), then factors two places away.
  EXPECT_THAT(internal::NeighborPaths({2, 8, 5}, names),
              ElementsAre(std::vector<int>{1, 8, 5}, std::vector<int>{3, 8, 5},
                          std::vector<int>{2, 8, 6}, std::vector<int>{1, 8, 6},
                          std::vector<int>{0, 8, 5}, std::vector<int>{4, 8, 5}));
  // A pointer with one factor (tile_L10_8, not tile_L1_'s; a signed number is not a factor)
  // has none to change to, and a name with a sign is none.
  EXPECT_TRUE(internal::NeighborPaths({9, 7}, names).empty());
  EXPECT_TRUE(internal::NeighborPaths({10, 11}, names).empty());
  EXPECT_TRUE(internal::NeighborPaths({}, names).empty());
}

// Two tiles trade a factor, their product kept: the nearest below and above for the first tile
// after the paths one factor away, then the second nearest after those two places away (a 16 x 16
// register block reshaped into 8 x 32 and 32 x 8, then 4 x 64; 64 x 4 has no tile_L2_64).
TEST(SearchAlgorithms, NeighborPathsTradeAFactorBetweenTwoTiles) {
  const std::vector<std::string> names = {
      "tile_L2_4",  "tile_L2_8",  "tile_L2_16", "tile_L2_32", "interchange_L2_L0", "tile_L5_4",
      "tile_L5_8",  "tile_L5_16", "tile_L5_32", "tile_L5_64", "tile_L5_12"};
  EXPECT_THAT(internal::NeighborPaths({2, 4, 7}, names),
              ElementsAre(std::vector<int>{1, 4, 7}, std::vector<int>{3, 4, 7},
                          std::vector<int>{2, 4, 10}, std::vector<int>{2, 4, 8},
                          std::vector<int>{1, 4, 8}, std::vector<int>{3, 4, 6},
                          std::vector<int>{0, 4, 7}, std::vector<int>{2, 4, 6},
                          std::vector<int>{2, 4, 9}, std::vector<int>{0, 4, 9}));
  // One tile has nothing to trade with.
  EXPECT_THAT(internal::NeighborPaths({2}, names),
              ElementsAre(std::vector<int>{1}, std::vector<int>{3}, std::vector<int>{0}));
}

// The short candidates count as unlikely as the wave's rank-th likeliest episode, from 1: the
// wave's greedy episode at rank 1 (and below), its least likely where it holds fewer than rank.
TEST(SearchAlgorithms, ShortCandidatesCountAsTheRankthLikeliestEpisode) {
  const std::vector<double> losses = {2.5, 0, 0.75, 4, 0, 1.25};
  EXPECT_EQ(internal::ShortCandidateLoss(losses, 1), 0);
  EXPECT_EQ(internal::ShortCandidateLoss(losses, 0), 0);
  EXPECT_EQ(internal::ShortCandidateLoss(losses, 2), 0);  // two greedy episodes (a member's)
  EXPECT_EQ(internal::ShortCandidateLoss(losses, 3), 0.75);
  EXPECT_EQ(internal::ShortCandidateLoss(losses, 4), 1.25);
  EXPECT_EQ(internal::ShortCandidateLoss(losses, 5), 2.5);
  EXPECT_EQ(internal::ShortCandidateLoss(losses, 6), 4);
  EXPECT_EQ(internal::ShortCandidateLoss(losses, 16), 4);
  EXPECT_EQ(internal::ShortCandidateLoss({}, 16), 0);
}

// policy_guided leaves guided_neighbor_share of its time to the fastest's neighbors. Its first
// wave (four episodes: the knobs 3 0 0, 2 0 0, 1 0 0 and 0 0 0) has 3 0 0 the fastest, by the
// path tile_L0_1 x3 (inc_0, named as a tile factor of which inc_1 and inc_2 are the next two);
// the new states one tile factor away, 2 1 0 (a factor one away, the first tile_L0_2) and 2 0 1
// (two away), are timed next, each once (as the cost model ranks them, ties in NeighborPaths'
// order), where without the share the next wave's episodes follow. A share outside 0..0.5 is
// refused.
// policy_guided with `policy` (which must outlive it) in a world whose actions are tile factors of
// one loop (FakeWorld::tile_names), four episodes a wave, `share` of its time for neighbors.
Trial GuidedAmongTileFactors(const Policy& policy, double share) {
  Trial t("policy_guided", 1);
  t.world->loop_set = true;
  t.world->tile_names = true;
  t.options.policy = &policy;
  t.options.guided_candidates = 4;
  t.options.guided_neighbor_share = share;
  return t;
}

TEST(SearchAlgorithms, PolicyGuidedTimesTheFastestsNeighborsInItsShare) {
  const Policy policy = LoopSetWithDistanceCost();
  const auto run = [&policy](double share) {
    Trial t = GuidedAmongTileFactors(policy, share);
    absl::StatusOr<SearchResult> r = t.Go();
    EXPECT_TRUE(r.ok()) << r.status();
    return t.world->measured;
  };
  const std::vector<std::string> with = run(0.5), without = run(0);
  for (const std::vector<std::string>* m : {&with, &without}) {
    ASSERT_GT(m->size(), 6u);
    EXPECT_THAT(std::vector<std::string>(m->begin(), m->begin() + 4),
                ElementsAre("knobs 3 0 0", "knobs 2 0 0", "knobs 1 0 0", "knobs 0 0 0"))
        << absl::StrJoin(*m, ", ");
    EXPECT_EQ(std::set<std::string>(m->begin(), m->end()).size(), m->size());
  }
  EXPECT_THAT(std::vector<std::string>(with.begin() + 4, with.begin() + 6),
              ElementsAre("knobs 2 1 0", "knobs 2 0 1"));
  EXPECT_NE(std::vector<std::string>(without.begin() + 4, without.begin() + 6),
            std::vector<std::string>(with.begin() + 4, with.begin() + 6))
      << absl::StrJoin(without, ", ");
  for (const double bad : {-0.1, 0.6}) {
    Trial refused("policy_guided", 1);
    refused.world->loop_set = true;
    refused.options.policy = &policy;
    refused.options.guided_neighbor_share = bad;
    ExpectRefusedBeforeAnyStep(refused, "guided_neighbor_share");
  }
}

// Each new fastest's neighbors are timed in turn: the first wave's fastest (3 0 0, path
// inc_0 x3) gives 2 1 0 and 2 0 1; 2 0 1 is faster, and its own give 1 1 1 and 1 0 2 (the others
// one factor away are states timed already); 1 0 2 is faster, and its give 0 1 2 and 0 0 3, which
// only ties it: the next wave comes then (4 0 0).
TEST(SearchAlgorithms, PolicyGuidedTimesEachNewFastestsNeighborsInTurn) {
  const Policy policy = LoopSetWithDistanceCost();
  Trial t = GuidedAmongTileFactors(policy, 0.5);
  absl::StatusOr<SearchResult> r = t.Go();
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<std::string>& m = t.world->measured;
  ASSERT_GT(m.size(), 10u);
  EXPECT_THAT(std::vector<std::string>(m.begin(), m.begin() + 11),
              ElementsAre("knobs 3 0 0", "knobs 2 0 0", "knobs 1 0 0", "knobs 0 0 0",
                          "knobs 2 1 0", "knobs 2 0 1", "knobs 1 1 1", "knobs 1 0 2",
                          "knobs 0 1 2", "knobs 0 0 3", "knobs 4 0 0"))
      << absl::StrJoin(m, ", ");
  EXPECT_EQ(t.world->Gflops({1, 0, 2}), t.world->Gflops({0, 0, 3}));
}

// Tuning records: every kernel the world measured is reported once, in order, with actions that
// reach it, its GFLOPS and plan features; each re-timing once, of a reported kernel.
TEST(SearchAlgorithms, EveryMeasuredKernelIsReportedOnceWithAPathToIt) {
  // With a server of before the timing observation too: kernels reported without it.
  for (const bool timing : {true, false}) {
    for (const char* search : {"greedy2", "beam2bfs", "random", "evolution", "policy"}) {
      Trial run(search, 2);
      run.world->timing = timing;
      run.options.depth = 20;
      run.options.retime_top = 3;
      std::vector<MeasuredKernel> reported;
      std::vector<std::pair<std::string, double>> retimed;
      run.options.on_measured = [&](const MeasuredKernel& m) { reported.push_back(m); };
      run.options.on_retimed = [&](const std::string& kernel, double gflops) {
        retimed.emplace_back(kernel, gflops);
      };
      // A policy episode times its final state only: one report, of that state.
      const Policy policy = KnobZeroValue();
      if (std::string(search) == "policy") {
        run.options.policy = &policy;
        run.world->sketches = "inc_2\ninc_0 inc_0 inc_0\ninc_0\n";
      }
      absl::StatusOr<SearchResult> r = run.Go();
      ASSERT_TRUE(r.ok()) << search << ": " << r.status();
      std::vector<std::string> keys, expected;
      for (const MeasuredKernel& m : reported) keys.push_back(m.kernel);
      for (const std::string& k : run.world->measured) expected.push_back(k + "\n");
      EXPECT_EQ(keys, expected) << search;
      EXPECT_GT(reported.size(), std::string(search) == "policy" ? 0u : 10u) << search;
      std::set<std::string> kernels(keys.begin(), keys.end());
      for (const MeasuredKernel& m : reported) {
        FakeStateSource replay(run.world);
        std::vector<int> path;
        for (const std::string& a : m.actions) path.push_back(replay.ActionIndex(a));
        ASSERT_TRUE(replay.Step(path, {}).ok());
        const std::string ir = FakeWorld::Key(replay.knobs());
        EXPECT_EQ(m.kernel, ir + "\n") << search;
        EXPECT_EQ(m.loop_tree, ir);
        EXPECT_EQ(m.plan_features, "{\"knobs\":\"" + ir + "\"}");
        EXPECT_EQ(m.timing, timing ? absl::StrCat("{\"timing\":\"settled\",\"timed_runs\":",
                                                  ir.size(), "}")
                                   : "");
        EXPECT_EQ(m.gflops, run.world->Gflops(replay.knobs()));
      }
      EXPECT_EQ(static_cast<int>(retimed.size()), run.world->remeasured) << search;
      for (const auto& [kernel, gflops] : retimed) {
        EXPECT_TRUE(kernels.count(kernel)) << search << ": " << kernel;
        EXPECT_GT(gflops, 0);
      }
    }
  }
}

TEST(SketchParser, OneRuleTheFirstUnknownActionIsAnError) {
  auto world = std::make_shared<FakeWorld>();
  FakeStateSource space(world);
  absl::StatusOr<std::vector<std::vector<int>>> paths =
      internal::ParseSketches("inc_0 dec_2\n\ninc_1\n", space);
  ASSERT_TRUE(paths.ok()) << paths.status();
  EXPECT_THAT(*paths, ElementsAre(ElementsAre(0, 5), ElementsAre(2)));
  absl::StatusOr<std::vector<std::vector<int>>> bad =
      internal::ParseSketches("inc_0\ninc_1 tile_L0_4\n", space);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "the server's sketch action 'tile_L0_4' is not in action space fake");
}

}  // namespace
}  // namespace looptool::client
