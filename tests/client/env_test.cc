// The C++ client library against a real server: typed observations equal to the in-process
// engine's, forks, closing, errors, reconnection after a server restart, and every search
// algorithm beating a poor start with a schedule that replays to exactly the state and GFLOPS
// it reports (and returning the start itself when it explores nothing).
#include "client/cpp/env.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "backend/actions/action_space.h"
#include "backend/env/environment.h"
#include "backend/ir/parser.h"
#include "client/cpp/policy.h"
#include "client/cpp/search/cursor_translation.h"
#include "client/cpp/search/env_state_source.h"
#include "client/cpp/search/search.h"
#include "datasets/matmul_range.h"
#include "gmock/gmock.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/service/server_process.h"

namespace looptool::client {
namespace {

using ::testing::HasSubstr;
using testing::ServerProcess;

constexpr char kMm[] = "benchmark://mm64_256_16_range-v0/mm112_208_256";
const std::vector<std::string> kLoopTuneSequence = {"split_4",  "down",    "swap_down",
                                                    "down",     "split_16", "swap_up",
                                                    "swap_up",  "swap_up", "split_8"};

Environment LocalEnv(const std::string& program_text, const std::vector<std::string>& actions) {
  Environment env(LoopTree::Initial(std::make_shared<const Program>(
                      *ParseProgram(program_text, Limits()))),
                  LoopToolActionSpace(), Limits());
  for (const auto& a : actions) {
    env.Step(LoopToolActionSpace().IndexOf(*ActionFromName(a))).IgnoreError();
  }
  return env;
}

class ClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServerProcess({"--timing_budget_ms=1"}); }
  static void TearDownTestSuite() { delete server_; }
  void SetUp() override {
    ASSERT_TRUE(server_->ok());
    auto c = Connection::Connect("127.0.0.1:" + std::to_string(server_->port()));
    ASSERT_TRUE(c.ok()) << c.status();
    connection_ = *c;
  }
  static ServerProcess* server_;
  std::shared_ptr<Connection> connection_;
};
ServerProcess* ClientTest::server_ = nullptr;

TEST_F(ClientTest, TypedObservationsEqualTheEngine) {
  auto env = Env::Start(connection_, kMm);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->action_names().size(), 17u);
  EXPECT_EQ(env->ActionIndex("split_16"), 7);
  auto r = env->StepNamed(kLoopTuneSequence, {"loop_tree", "loops_tensor", "action_mask",
                                              "ir_graph_networkx", "flop_count"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->action_had_no_effect);
  const Environment local = LocalEnv(datasets::MatmulProgram({112, 208, 256}), kLoopTuneSequence);
  EXPECT_EQ(r->observations[0].kind, Value::Kind::kString);
  EXPECT_EQ(r->observations[0].text, local.Observe("loop_tree")->text);
  EXPECT_EQ(r->observations[1].kind, Value::Kind::kFloats);
  EXPECT_THAT(r->observations[1].shape, ::testing::ElementsAre(1, 320));
  EXPECT_EQ(r->observations[1].floats, local.Observe("loops_tensor")->floats);
  EXPECT_EQ(r->observations[2].kind, Value::Kind::kBools);
  EXPECT_EQ(r->observations[2].bools, local.Observe("action_mask")->bools);
  EXPECT_EQ(r->observations[3].kind, Value::Kind::kGraphJson);
  EXPECT_EQ(r->observations[3].text, local.Observe("ir_graph_networkx")->text);
  EXPECT_EQ(r->observations[4].kind, Value::Kind::kInt64);
  EXPECT_EQ(r->observations[4].integer, 2LL * 112 * 208 * 256);
  // The same values by name; a name not asked for is absent.
  EXPECT_THAT(r->names, ::testing::ElementsAre("loop_tree", "loops_tensor", "action_mask",
                                               "ir_graph_networkx", "flop_count"));
  ASSERT_NE(r->Find("flop_count"), nullptr);
  EXPECT_EQ(r->Find("flop_count")->integer, 2LL * 112 * 208 * 256);
  EXPECT_EQ(r->Find("loop_tree")->text, local.Observe("loop_tree")->text);
  EXPECT_EQ(r->Get("action_mask")->bools, local.Observe("action_mask")->bools);
  EXPECT_EQ(r->Find("flops"), nullptr);
  EXPECT_EQ(r->Get("flops").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(r->Get("flops").status().message()), HasSubstr("loop_tree, "));
}

TEST_F(ClientTest, TheSpaceTheServerReportsIsTheOneIndexed) {
  // Upstream loop_tool-v0 benchmarks run in `simple`, whatever the client asked by default.
  auto env = Env::Start(connection_, "benchmark://loop_tool-cpu-v0/1024");
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_THAT(env->action_names(), ::testing::ElementsAre("toggle_mode", "up", "down",
                                                          "toggle_thread"));
  auto r = env->StepNamed({"toggle_mode", "up", "toggle_mode", "up", "up"}, {"loop_tree"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->Find("loop_tree")->text,
              ::testing::StartsWith("for a in 341 r 1 : L0 cpu_parallel [thread]\n"));
}

TEST_F(ClientTest, ForkCloseAndErrors) {
  auto env = Env::Start(connection_, kMm);
  ASSERT_TRUE(env.ok());
  ASSERT_TRUE(env->StepNamed({"split_4"}).ok());
  auto fork = env->Fork();
  ASSERT_TRUE(fork.ok());
  EXPECT_NE(fork->session_id(), env->session_id());
  ASSERT_TRUE(fork->StepNamed({"down", "split_8"}).ok());
  EXPECT_EQ(env->Observe("loop_tree")->text,
            LocalEnv(datasets::MatmulProgram({112, 208, 256}), {"split_4"}).Observe("loop_tree")->text);
  EXPECT_EQ(env->StepNamed({"jump"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(env->Step({99}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(env->Observe("nope").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(fork->Close().ok());
  EXPECT_TRUE(fork->Close().ok());  // idempotent
  EXPECT_EQ(fork->Observe("ir").status().code(), absl::StatusCode::kFailedPrecondition);

  // Reset: a new session on the same or another benchmark, in the start state.
  const int64_t old_session = env->session_id();
  ASSERT_TRUE(env->Reset().ok());
  EXPECT_NE(env->session_id(), old_session);
  EXPECT_EQ(env->Observe("loop_tree")->text,
            LocalEnv(datasets::MatmulProgram({112, 208, 256}), {}).Observe("loop_tree")->text);
  ASSERT_TRUE(env->Reset("benchmark://mm64_256_16_range-v0/mm64_80_96").ok());
  EXPECT_EQ(env->benchmark(), "benchmark://mm64_256_16_range-v0/mm64_80_96");
  EXPECT_EQ(env->Observe("flop_count")->integer, 2 * 64 * 80 * 96);
  EXPECT_EQ(env->Reset("benchmark://nope/x").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(env->Observe("ir").status().code(), absl::StatusCode::kFailedPrecondition);

  auto missing = Env::Start(connection_, "benchmark://mm64_256_16_range-v0/oops");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("Benchmark not found"));
  auto user = Env::StartProgram(connection_, "benchmark://user-v0/gemv",
                                "y[m] += A[m,k] * x[k]; m=64 k=128");
  ASSERT_TRUE(user.ok()) << user.status();
  EXPECT_EQ(user->Observe("flop_count")->integer, 2 * 64 * 128);
}

// Env::CloseAll ends every open session it is given (their calls sent together, 8 open at most:
// 20 here), on the server too: a step on one of their ids is NOT_FOUND. Closed and null ones are
// passed over; the session they were forked from goes on. EndSources does the same for the
// sessions sources own.
TEST_F(ClientTest, CloseAllEndsEverySessionOnTheServer) {
  auto env = Env::Start(connection_, kMm);
  ASSERT_TRUE(env.ok()) << env.status();
  std::vector<Env> forks;
  std::vector<int64_t> ids;
  for (int i = 0; i < 21; ++i) {
    auto fork = env->Fork();
    ASSERT_TRUE(fork.ok()) << fork.status();
    ids.push_back(fork->session_id());
    forks.push_back(*std::move(fork));
  }
  ASSERT_TRUE(forks[0].Close().ok());
  std::vector<Env*> all = {nullptr};
  for (Env& fork : forks) all.push_back(&fork);
  auto owned = env->Fork();
  ASSERT_TRUE(owned.ok()) << owned.status();
  ids.push_back(owned->session_id());
  EXPECT_TRUE(Env::CloseAll(all).ok());
  std::vector<std::unique_ptr<StateSource>> sources;
  sources.push_back(std::make_unique<EnvStateSource>(*std::move(owned)));
  sources.push_back(nullptr);
  EndSources(sources);
  EXPECT_TRUE(sources.empty());
  for (const Env& fork : forks) EXPECT_FALSE(fork.Fork().ok());  // closed
  for (const int64_t id : ids) {
    compiler_gym::StepRequest request;
    request.set_session_id(id);
    compiler_gym::StepReply reply;
    const absl::Status step = connection_->Invoke(
        [&](grpc::ClientContext* ctx) { return connection_->stub().Step(ctx, request, &reply); });
    EXPECT_EQ(step.code(), absl::StatusCode::kNotFound) << id << ": " << step;
  }
  EXPECT_TRUE(env->Observe("ir").ok());
  EXPECT_TRUE(Env::CloseAll({}).ok());
}

TEST_F(ClientTest, EverySearchReportsWhatReplays) {
  // The start: mm64_80_96 as m n k, the reduction innermost and B read with a stride of 80,
  // about 30x slower than m k n, which one swap_up (the cursor is on k) restores. Against the
  // real server every search runs, reports its best (never below the start) with the peak and
  // its progress, and that state replays exactly; how much better it is is the benchmarks'.
  auto start = Env::Start(connection_, "benchmark://mm64_256_16_range-v0/mm64_80_96");
  ASSERT_TRUE(start.ok());
  ASSERT_TRUE(start->StepNamed({"down", "swap_down"}).ok());
  const std::string start_tree = start->Observe("loop_tree")->text;
  ASSERT_THAT(start_tree, HasSubstr(" for n in 80 : L1\n  for k in 96 : L2  <<<<<< cursor"));
  const double start_gflops = start->Observe("flops")->number;  // measured, then cached
  const double peak = start->Observe("peak_gflops")->number;
  EXPECT_GT(peak, 1.0);  // a failed peak measurement reads exactly 1.0
  for (const std::string& algorithm : SearchAlgorithms()) {
    if (absl::StartsWith(algorithm, "policy")) continue;  // PolicySearches* below
    SearchOptions o;
    absl::StatusOr<SearchSpec> spec = ParseSearch(algorithm);
    ASSERT_TRUE(spec.ok()) << spec.status();
    o.search = *spec;
    o.time_limit_seconds = 1.0;
    o.retime_top = 0;  // the search's own measurements (re-timing: the test below)
    int64_t progress_calls = 0;
    double last_best = 0;
    bool best_never_fell = true;
    o.on_progress = [&](const SearchProgress& p) {
      ++progress_calls;
      EXPECT_EQ(p.peak_gflops, peak);
      if (p.best_gflops < last_best) best_never_fell = false;
      last_best = p.best_gflops;
    };
    auto r = Search(*start, o);
    ASSERT_TRUE(r.ok()) << algorithm << ": " << r.status();
    EXPECT_FALSE(r->retimed);
    EXPECT_EQ(r->search_gflops, r->gflops);
    EXPECT_EQ(r->start_gflops, start_gflops) << algorithm;  // the start's own measurement
    EXPECT_EQ(r->peak_gflops, peak) << algorithm;
    // The best state measured (the start among them); how much better, and that the limit
    // holds, are the benchmarks' and search_algorithms_test's (a fake clock) to show.
    EXPECT_GE(r->gflops, r->start_gflops) << algorithm;
    EXPECT_TRUE(best_never_fell) << algorithm;
    EXPECT_EQ(last_best, r->gflops) << algorithm;  // the best reported is the one returned
    EXPECT_GT(r->states_evaluated, 0) << algorithm;
    EXPECT_GT(progress_calls, r->states_evaluated) << algorithm;
    // Replay: the same state (ir, cursor included) and, measurements being cached per schedule,
    // the very same GFLOPS.
    auto replay = start->Fork();
    ASSERT_TRUE(replay.ok());
    auto s = replay->StepNamed(r->actions, {"ir", "loop_tree", "flops"});
    ASSERT_TRUE(s.ok()) << algorithm;
    EXPECT_EQ(s->Find("ir")->text, r->ir) << algorithm;
    EXPECT_EQ(s->Find("loop_tree")->text, r->loop_tree) << algorithm;
    EXPECT_EQ(s->Find("flops")->number, r->gflops) << algorithm;
  }
  // The searches left the start state alone.
  EXPECT_EQ(start->Observe("loop_tree")->text, start_tree);
  SearchOptions bad;
  bad.search = {SearchSpec::Kind::kBeamDfs, /*width=*/0, /*lookahead=*/0};
  EXPECT_EQ(Search(*start, bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad.search = {SearchSpec::Kind::kGreedy, /*width=*/0, /*lookahead=*/0};
  EXPECT_EQ(Search(*start, bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, SearchesReportTheirBestStatesRetimed) {
  // By default the best 3 kernels and the start are timed again at the end: the result is the
  // fastest re-timed one, reported with its re-timed GFLOPS next to the search's measurement.
  auto start = Env::Start(connection_, "benchmark://mm64_256_16_range-v0/mm64_80_96");
  ASSERT_TRUE(start.ok());
  ASSERT_TRUE(start->StepNamed({"down", "swap_down"}).ok());
  const double start_gflops = start->Observe("flops")->number;
  for (const char* algorithm : {"evolution", "beam2bfs"}) {
    SearchOptions o;
    o.search = *ParseSearch(algorithm);
    o.time_limit_seconds = 1.0;
    double last_best = 0;
    o.on_progress = [&](const SearchProgress& p) { last_best = p.best_gflops; };
    auto r = Search(*start, o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->retimed) << algorithm;
    // The start re-timed: a new measurement of the same kernel (search_algorithms_test checks
    // which kernels are re-timed and what is reported, exactly, on a fake).
    EXPECT_GT(r->start_gflops, 0) << algorithm;
    EXPECT_GT(start_gflops, 0) << algorithm;
    // The chosen state is one the search measured, at most its best, and replays to it.
    EXPECT_LE(r->search_gflops, last_best) << algorithm;
    auto replay = start->Fork();
    ASSERT_TRUE(replay.ok());
    auto s = replay->StepNamed(r->actions, {"ir", "flops"});
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->Find("ir")->text, r->ir) << algorithm;
    EXPECT_EQ(s->Find("flops")->number, r->search_gflops) << algorithm;  // cached: as searched
    // Re-timed (local_timer_test shows it runs the kernel again).
    EXPECT_GT(r->gflops, 0) << algorithm;
  }
}

TEST_F(ClientTest, ASearchThatExploresNothingReturnsTheStartItself) {
  // The start is the initial best: with depth 0 every search returns it, with no actions and
  // the start's own loop tree and measurement.
  auto start = Env::Start(connection_, "benchmark://mm64_256_16_range-v0/mm64_80_96");
  ASSERT_TRUE(start.ok());
  const double start_gflops = start->Observe("flops")->number;
  for (const std::string& algorithm : SearchAlgorithms()) {
    // The policy searches need a policy of this session's space: PolicySearches* below.
    if (absl::StartsWith(algorithm, "policy")) continue;
    SearchOptions o;
    o.search = *ParseSearch(algorithm);
    o.depth = 0;
    o.time_limit_seconds = 0.3;
    o.retime_top = 0;
    auto r = Search(*start, o);
    ASSERT_TRUE(r.ok()) << algorithm << ": " << r.status();
    EXPECT_TRUE(r->actions.empty()) << algorithm;
    EXPECT_EQ(r->start_gflops, start_gflops) << algorithm;
    EXPECT_EQ(r->gflops, start_gflops) << algorithm;
    EXPECT_EQ(r->loop_tree, start->Observe("loop_tree")->text) << algorithm;
    EXPECT_EQ(r->ir, start->Observe("ir")->text) << algorithm;
    EXPECT_EQ(r->states_evaluated, 0) << algorithm;
    // Re-timed, the start is still the result, at its new time.
    o.retime_top = 3;
    auto again = Search(*start, o);
    ASSERT_TRUE(again.ok()) << algorithm << ": " << again.status();
    EXPECT_TRUE(again->actions.empty()) << algorithm;
    EXPECT_TRUE(again->retimed) << algorithm;
    EXPECT_EQ(again->gflops, again->start_gflops) << algorithm;
    EXPECT_EQ(again->search_gflops, start_gflops) << algorithm;
  }
}

// A policy over `space`'s actions (loop_tool's 17 by default) that ignores its input:
// Q(a) = bias[a] - mean(bias).
Policy FixedPreferencePolicy(const std::map<std::string, float>& preference,
                             const ActionSpace& space = LoopToolActionSpace(), int input = 320) {
  const int actions = space.size();
  const auto b64 = [](const std::vector<float>& v) {
    std::string bytes(v.size() * sizeof(float), '\0');
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return absl::Base64Escape(bytes);
  };
  const auto layer = [&](int in, int out, const std::vector<float>& b) {
    return nlohmann::json{{"in", in}, {"out", out},
                          {"weight", b64(std::vector<float>(size_t(in) * out, 0))},
                          {"bias", b64(b)}};
  };
  std::vector<float> bias(actions, 0);
  for (const auto& [name, q] : preference) {
    bias[space.IndexOf(*ActionFromName(name))] = q;
  }
  nlohmann::json j = {{"format", "looptool-policy"}, {"version", 1}, {"kind", "dueling_q"},
                      {"action_space", space.name}, {"observation_space", "loops_tensor"},
                      {"input_size", input}, {"num_actions", actions}, {"preprocess", "log2p1"},
                      {"trunk", {layer(input, 1, {0})}}, {"head", layer(1, actions, bias)},
                      {"value", layer(1, 1, {0})}};
  return *Policy::Parse(j.dump());
}

// A time limit shorter than the start's first measurement leaves no search: a clear
// DEADLINE_EXCEEDED, and the same search with room succeeds (the server kept the measurement).
TEST_F(ClientTest, ALimitShorterThanTheStartsMeasurementSaysSo) {
  auto start = Env::StartProgram(connection_, "benchmark://user-v0/mm301",
                                 "C[m,n] += A[m,k] * B[k,n]\nm=301 n=301 k=301\n", "loop_nest");
  ASSERT_TRUE(start.ok()) << start.status();
  SearchOptions o;
  o.search = *ParseSearch("evolution");
  o.time_limit_seconds = 0.001;
  auto r = Search(*start, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(r.status().message(),
              HasSubstr("the start state's kernel was not timed within the 0.001 s time limit"));
  // The start measured without a limit first (the one cut off above may not have been kept), so
  // that a loaded CI host's slow first measurement cannot use up the search's time.
  ASSERT_TRUE(start->Observe("flops").ok());
  o.time_limit_seconds = 3;
  r = Search(*start, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->gflops, 0);
}

TEST_F(ClientTest, PolicySearchesFollowThePolicy) {
  // The poor start of the test above; the policy prefers swap_up, then split_16, then down.
  auto start = Env::Start(connection_, "benchmark://mm64_256_16_range-v0/mm64_80_96");
  ASSERT_TRUE(start.ok());
  ASSERT_TRUE(start->StepNamed({"down", "swap_down"}).ok());
  const double start_gflops = start->Observe("flops")->number;
  const Policy policy = FixedPreferencePolicy({{"swap_up", 5}, {"split_16", 4}, {"down", 3}});
  // What the policy must do: at every step, the most preferred action the mask allows.
  std::vector<std::string> expected;
  auto walk = start->Fork();
  ASSERT_TRUE(walk.ok());
  for (int d = 0; d < 10; ++d) {
    const std::vector<bool> mask = walk->Observe("action_mask")->bools;
    std::string choice;
    for (const char* name : {"swap_up", "split_16", "down"}) {
      if (mask[walk->ActionIndex(name)]) {
        choice = name;
        break;
      }
    }
    if (choice.empty()) choice = walk->action_names()[std::find(mask.begin(), mask.end(), true) -
                                                      mask.begin()];
    expected.push_back(choice);
    ASSERT_TRUE(walk->StepNamed({choice}).ok());
  }
  SearchOptions o;
  o.search = *ParseSearch("policy");
  o.policy = &policy;
  auto r = Search(*start, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->actions, expected);
  EXPECT_EQ(r->loop_tree, walk->Observe("loop_tree")->text);
  EXPECT_EQ(r->ir, walk->Observe("ir")->text);
  EXPECT_EQ(r->gflops, walk->Observe("flops")->number);  // the final state's, cached
  EXPECT_EQ(r->start_gflops, 0);  // not timed
  EXPECT_EQ(r->states_evaluated, 1);
  EXPECT_EQ(r->actions.front(), "swap_up");  // it restores m k n

  // policy_guided: the policy's own episode is measured first, so its best is at least as good.
  o.search = *ParseSearch("policy_guided");
  o.time_limit_seconds = 3.0;  // room to reach the episode's end on a loaded machine
  o.retime_top = 0;
  auto g = Search(*start, o);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->start_gflops, start_gflops);
  EXPECT_GE(g->gflops, r->gflops);
  EXPECT_GT(g->states_evaluated, 1);
  auto replay = start->Fork();
  ASSERT_TRUE(replay.ok());
  auto s = replay->StepNamed(g->actions, {"loop_tree", "flops"});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->Find("loop_tree")->text, g->loop_tree);
  EXPECT_EQ(s->Find("flops")->number, g->gflops);
}

TEST_F(ClientTest, EvolutionStartsFromThePolicysEpisodeMappedIntoTheSessionsSpace) {
  // A loop_tune policy (7 actions) preferring swap_up, in a loop_tool session: its actions are
  // mapped by name, and its episode is evolution's first: the first state measured after the
  // start is swap_up's child, which restores m k n.
  auto start = Env::Start(connection_, "benchmark://mm64_256_16_range-v0/mm64_80_96");
  ASSERT_TRUE(start.ok());
  ASSERT_TRUE(start->StepNamed({"down", "swap_down"}).ok());
  ASSERT_TRUE(start->Observe("flops").ok());  // measured, then cached
  const Policy tune_policy = FixedPreferencePolicy({{"swap_up", 5}}, LoopTuneActionSpace());
  ASSERT_EQ(tune_policy.num_actions(), 7);
  for (bool seeded : {true, false}) {
    SearchOptions o;
    o.search = *ParseSearch("evolution");
    o.time_limit_seconds = 0.5;
    o.policy = &tune_policy;
    o.policy_seed = seeded;
    o.retime_top = 0;  // the search's own numbers, the start's among them
    std::vector<std::vector<std::string>> measured;  // each measured state's actions, in order
    o.on_measured = [&](const MeasuredKernel& m) { measured.push_back(m.actions); };
    auto r = Search(*start, o);
    ASSERT_TRUE(r.ok()) << r.status();
    if (seeded) {
      ASSERT_GE(measured.size(), 2u);
      EXPECT_THAT(measured[0], ::testing::IsEmpty());  // the start
      EXPECT_THAT(measured[1], ::testing::ElementsAre("swap_up"));
    }
    EXPECT_GT(r->gflops, r->start_gflops);
  }
}

// A sketch_value policy that values a state at `sign` * log2(1 + loops_tensor[feature]).
Policy SketchValuePolicy(int feature, float sign, int input = 320) {
  const auto b64 = [](const std::vector<float>& v) {
    std::string bytes(v.size() * sizeof(float), '\0');
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return absl::Base64Escape(bytes);
  };
  const auto layer = [&](int in, int out, const std::vector<float>& w, std::vector<float> b) {
    return nlohmann::json{{"in", in}, {"out", out}, {"weight", b64(w)}, {"bias", b64(b)}};
  };
  std::vector<float> pick(input, 0);
  pick[feature] = 1;
  nlohmann::json j = {{"format", "looptool-policy"}, {"version", 1}, {"kind", "sketch_value"},
                      {"action_space", "loop_nest"}, {"observation_space", "loops_tensor"},
                      {"input_size", input}, {"num_actions", 1}, {"preprocess", "log2p1"},
                      {"trunk", {layer(input, 1, pick, {0})}}, {"head", layer(1, 1, {sign}, {0})},
                      {"value", layer(1, 1, {0}, {0})}};
  return *Policy::Parse(j.dump());
}

TEST_F(ClientTest, ASketchValuePolicyTakesTheSketchWhoseStateItValuesMost) {
  auto start = Env::Start(connection_, kMm, "loop_nest");
  ASSERT_TRUE(start.ok());
  const std::string text = start->Observe("sketches")->text;
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 4u) << text;
  std::vector<std::string> chosen;
  for (float sign : {1.0f, -1.0f}) {
    // Feature 1 is the outermost loop's size: the policies prefer the sketch whose outer loop is
    // the largest (+1) or the smallest (-1), the first such line on ties.
    const Policy policy = SketchValuePolicy(1, sign);
    std::string expected, expected_tree;
    float best = -1e30f;
    double expected_gflops = 0;
    for (const std::string& line : lines) {
      auto fork = start->Fork();
      ASSERT_TRUE(fork.ok());
      auto s = fork->StepNamed(absl::StrSplit(line, ' ', absl::SkipEmpty()),
                               {"loops_tensor", "loop_tree"});
      ASSERT_TRUE(s.ok()) << s.status();
      const float size = std::max(s->Find("loops_tensor")->floats[1], 0.0f);
      const float value = sign * std::log2(1.0f + size);
      if (value > best) {
        best = value;
        expected = line;
        expected_tree = s->Find("loop_tree")->text;
        expected_gflops = fork->Observe("flops")->number;
      }
    }
    SearchOptions o;
    o.search = *ParseSearch("policy");
    o.policy = &policy;
    auto r = Search(*start, o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(absl::StrJoin(r->actions, " "), expected);
    EXPECT_EQ(r->loop_tree, expected_tree);
    EXPECT_EQ(r->gflops, expected_gflops);  // the server's cached measurement of that state
    EXPECT_EQ(r->states_evaluated, 1);
    EXPECT_EQ(r->start_gflops, 0);  // not timed
    chosen.push_back(expected);

    // policy_guided: evolution whose first measured state is the policy's top sketch.
    o.search = *ParseSearch("policy_guided");
    o.time_limit_seconds = 0.5;
    o.retime_top = 0;  // the search's own best, so the top sketch's cached measurement counts
    double start_measured = -1, first_best = -1;  // the start's first measurement, not re-timed
    o.on_progress = [&](const SearchProgress& p) {
      if (start_measured < 0) start_measured = p.best_gflops;
      if (p.states_evaluated == 1) first_best = p.best_gflops;
    };
    auto g = Search(*start, o);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(first_best, std::max(expected_gflops, start_measured));
    EXPECT_GE(g->search_gflops, expected_gflops);
  }
  EXPECT_NE(chosen[0], chosen[1]);

  // A session in another space: the policy cannot apply loop_nest's sketches there.
  auto tool = Env::Start(connection_, kMm, "loop_tool");
  ASSERT_TRUE(tool.ok());
  SearchOptions o;
  o.search = *ParseSearch("policy");
  o.policy = &Policy::Default();
  auto bad = Search(*tool, o);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("chooses among the server's sketches"));
}

// The loop tree without its cursor mark (cursor and level-pointer actions leave it elsewhere).
std::string WithoutCursor(std::string tree) {
  for (size_t at; (at = tree.find("  <<<<<< cursor")) != std::string::npos;) {
    tree.erase(at, tree.find('\n', at) - at);
  }
  return tree;
}

TEST(CursorToLevelActions, TracksTheCursorAndStopsAtMerge) {
  EXPECT_EQ(CursorToLevelActions({"down", "split_16", "swap_down", "up", "swap_up", "down",
                                  "vectorize", "unroll", "merge", "split_4"}),
            (std::vector<std::string>{"tile_L1_16", "interchange_L1_L2", "interchange_L1_L0",
                                      "vectorize_L1", "unroll_L1"}));
  EXPECT_EQ(CursorToLevelActions({"up", "split_4"}), std::vector<std::string>{});
}

// The built-in LoopTune policy's episode on `uri`, in its own space (loop_tune).
absl::StatusOr<SearchResult> BuiltInPolicyEpisode(const std::shared_ptr<Connection>& connection,
                                                  const std::string& uri) {
  absl::StatusOr<Env> tune = Env::Start(connection, uri, Policy::LoopTuneDqn().action_space());
  if (!tune.ok()) return tune.status();
  SearchOptions o;
  o.search = *ParseSearch("policy");
  o.policy = &Policy::LoopTuneDqn();
  return Search(*tune, o);
}

// The built-in LoopTune policy's episode translated to loop_nest reaches the same schedule.
TEST_F(ClientTest, TranslatedPolicyEpisodesReachTheSameSchedule) {
  for (const char* uri : {kMm, "benchmark://mm64_256_16_range-v0/mm64_80_96"}) {
    auto r = BuiltInPolicyEpisode(connection_, uri);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_GE(r->actions.size(), 5u);
    const std::vector<std::string> level = CursorToLevelActions(r->actions);
    auto nest = Env::Start(connection_, uri, "loop_nest");
    ASSERT_TRUE(nest.ok());
    auto stepped = nest->StepNamed(level, {"loop_tree"});
    ASSERT_TRUE(stepped.ok()) << stepped.status();
    EXPECT_FALSE(stepped->action_had_no_effect);
    EXPECT_EQ(WithoutCursor(stepped->Find("loop_tree")->text), WithoutCursor(r->loop_tree))
        << absl::StrJoin(r->actions, " ") << "\n" << absl::StrJoin(level, " ");
  }
}

// In loop_nest, evolution's first state after the start is the policy's episode, translated:
// the same schedule, so the server's cached measurement of it: after one state the best is the
// faster of the start and the episode (on AVX-512 the policy's schedule runs ~1.5x the start's;
// on an AVX2-only host it ran at about half).
TEST_F(ClientTest, EvolutionInLoopNestStartsFromTheTranslatedPolicyEpisode) {
  const std::string uri = kMm;
  auto episode = BuiltInPolicyEpisode(connection_, uri);
  ASSERT_TRUE(episode.ok()) << episode.status();
  auto start = Env::Start(connection_, uri, "loop_nest");
  ASSERT_TRUE(start.ok());
  const double start_gflops = start->Observe("flops")->number;
  const double first_expected = std::max(start_gflops, episode->gflops);
  SearchOptions o;
  o.search = *ParseSearch("evolution");
  o.time_limit_seconds = 0.5;
  o.sketches = false;  // (sketches would replace the policy's seed)
  o.retime_top = 0;     // the search's own best (re-timing may pick a runner-up of the top few)
  double first_best = -1;
  o.on_progress = [&](const SearchProgress& progress) {
    if (progress.states_evaluated == 1) first_best = progress.best_gflops;
  };
  auto r = Search(*start, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(first_best, first_expected);
  EXPECT_GE(r->search_gflops, first_expected);
  for (const std::string& a : r->actions) EXPECT_GE(start->ActionIndex(a), 0) << a;
}

// On a fresh server the cost model knows nothing: evolution measures children as they come until
// the model has learned from enough kernels (24), and only then ranks them. (It once took the
// start's "visited" answer for a ready model and proposed children forever, measuring none.)
TEST(CostModelSearch, EvolutionMeasuresUntilTheModelHasLearned) {
  ServerProcess fresh({"--timing_budget_ms=1"});
  ASSERT_TRUE(fresh.ok());
  auto connection = Connection::Connect("127.0.0.1:" + std::to_string(fresh.port()));
  ASSERT_TRUE(connection.ok());
  auto start = Env::Start(*connection, kMm, "loop_nest");
  ASSERT_TRUE(start.ok());
  EXPECT_EQ(start->Observe("predicted_gflops")->number, 0);  // nothing measured yet
  SearchOptions o;
  o.search = *ParseSearch("evolution");
  o.time_limit_seconds = 4;  // 25 kernels or more, on a loaded machine too
  o.cost_model_up_to_seconds = 4;
  o.depth = 1;  // 16 rollouts measure at most 16 states: fewer than the model needs
  o.policy_seed = false;
  o.sketches = false;
  o.cost_model_candidates = 6;
  // The search's own measurements, the start's among them: its best is never below the start.
  // (Re-timed, the winner's and the start's numbers come from different timings and may cross.)
  o.retime_top = 0;
  auto r = Search(*start, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->states_evaluated, 24);
  EXPECT_GT(start->Observe("predicted_gflops")->number, 0);  // it learned, and predicts
  EXPECT_GE(r->search_gflops, r->start_gflops);
}

// The server's sketches over the wire: the first is bench/hand_schedules.cc's "k/64 m/4 n/B
// k m n" for a matmul, B the block of n the server's vector unit holds (4 x 4 zmm on AVX-512,
// 4 x 3 ymm on AVX2). Evolution measures every one first, in the server's order, right after the
// start (checked by the actions of the states it measures, not by their speed), and so starts a
// small convolution, whose untiled kernel runs at a few % of peak, from blocked schedules.
TEST_F(ClientTest, EvolutionStartsFromTheServersSketches) {
  auto mm = Env::Start(connection_, kMm, "loop_nest");
  ASSERT_TRUE(mm.ok()) << mm.status();
  const std::string sketches = mm->Observe("sketches")->text;
  const bool avx2 = absl::StrContains(mm->Observe("kernel_plan")->text, "\n  avx2, ");
  EXPECT_EQ(sketches.substr(0, sketches.find('\n')),
            absl::StrCat("tile_L1_64 tile_L0_4 tile_L4_", avx2 ? "24" : "64",
                         " interchange_L2_L0 interchange_L4_L2 interchange_L4_L3"));
  auto tiled = mm->Fork();
  ASSERT_TRUE(tiled.ok());
  ASSERT_TRUE(tiled->StepNamed({"tile_L0_4"}).ok());
  EXPECT_EQ(tiled->Observe("sketches")->text, "");  // only for an untiled nest

  auto conv = Env::StartProgram(
      connection_, "benchmark://user-v0/small_conv",
      "O[k,h,w] += I[c, h+r, w+s] * W[k,c,r,s]\nk=32 h=12 w=30 c=32 r=3 s=3\n", "loop_nest");
  ASSERT_TRUE(conv.ok()) << conv.status();
  const std::string conv_sketches = conv->Observe("sketches")->text;
  const int lines = static_cast<int>(std::count(conv_sketches.begin(), conv_sketches.end(), '\n'));
  ASSERT_GE(lines, 8);
  SearchOptions o;
  o.search = *ParseSearch("evolution");
  o.time_limit_seconds = 3;
  o.retime_top = 0;
  std::vector<std::string> measured;  // each measured state's actions, space-separated, in order
  o.on_measured = [&](const MeasuredKernel& m) {
    measured.push_back(absl::StrJoin(m.actions, " "));
  };
  auto r = Search(*conv, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GE(r->states_evaluated, lines);
  // The start, then every sketch, in the server's order.
  std::vector<std::string> expected = {""};
  for (absl::string_view line : absl::StrSplit(conv_sketches, '\n', absl::SkipEmpty())) {
    expected.emplace_back(line);
  }
  ASSERT_GE(measured.size(), expected.size());
  EXPECT_EQ(std::vector<std::string>(measured.begin(), measured.begin() + expected.size()),
            expected);
  EXPECT_GT(r->gflops, r->start_gflops);
}

// The loop_set policy acts in loop_nest's first 560 actions and never streams or folds; its
// searches time their fastest episode once more with stream_L<p> appended for every output the
// program assigns and fold_L<p> for every stride-2 window, and keep whichever is faster. A
// matmul accumulates and multiplies: nothing marked is timed.
TEST_F(ClientTest, LoopSetPolicySearchesTimeTheirFastestMarked) {
  // A transpose assigns one output, a concatenation two (one stream_L<p> each: another loop of
  // a streamed statement would toggle its mark off), a CHW max pool folds one window, a matmul
  // takes no mark.
  struct Case {
    const char* name;
    const char* program;  // nullptr: kMm
    size_t count;  // the marking actions appended: one per statement marked
    const char* first;  // the first of them
    std::vector<std::string> marks;  // the `stream S` / `fold S` lines of ir
  };
  const Case cases[] = {
      {"transpose", "B[n,m] = A[m,n]\nm=96 n=64\n", 1, "stream_L0", {"\nstream 1\n"}},
      {"concat", "C[m,a] = A[m,a]\nC[m,b+16] = B[m,b]\nm=8 a=16 b=16\n", 2, "stream_L0",
       {"\nstream 1\n", "\nstream 2\n"}},
      {"pool", "O[r,c] max= I[2*r+kr, 2*c+kc]\nr=4 c=32 kr=3 kc=3\n", 1, "fold_L0",
       {"\nfold 1\n"}},
      {"matmul", nullptr, 0, "", {}},
  };
  const auto is_mark = [](const std::string& a) {
    return absl::StartsWith(a, "stream_L") || absl::StartsWith(a, "fold_L");
  };
  for (const Case& c : cases) {
    auto start = c.program != nullptr
                     ? Env::StartProgram(connection_, absl::StrCat("benchmark://user-v0/", c.name),
                                         c.program, "loop_nest")
                     : Env::Start(connection_, kMm, "loop_nest");
    ASSERT_TRUE(start.ok()) << start.status();
    for (const char* algorithm : {"policy", "policy_guided"}) {
      SCOPED_TRACE(absl::StrCat(algorithm, " ", c.name));
      SearchOptions o;
      o.search = *ParseSearch(algorithm);
      o.policy = &Policy::LoopSet();
      o.time_limit_seconds = 3.0;  // room for the timings on a loaded machine
      o.policy_seconds = 3.0;      // policy's own budget too (the marked timing must fit)
      std::vector<std::vector<std::string>> measured;
      o.on_measured = [&](const MeasuredKernel& k) { measured.push_back(k.actions); };
      auto r = Search(*start, o);
      ASSERT_TRUE(r.ok()) << r.status();
      std::vector<std::vector<std::string>> marked_runs;
      for (const auto& actions : measured) {
        size_t first = actions.size();  // of the trailing marks
        while (first > 0 && is_mark(actions[first - 1])) --first;
        for (size_t i = 0; i < first; ++i) EXPECT_FALSE(is_mark(actions[i]));
        if (first < actions.size()) marked_runs.push_back(actions);
      }
      if (c.count == 0) {
        EXPECT_TRUE(marked_runs.empty());
        continue;
      }
      // The start with every mark, a shorter candidate of the first wave, where it was timed;
      // the fastest with every mark (TryMarked), unless that is the start (its marks would be
      // the marked start's again) or the marked start itself.
      ASSERT_GE(marked_runs.size(), 1u);
      ASSERT_LE(marked_runs.size(), 2u);
      int from_start = 0;
      for (const std::vector<std::string>& variant : marked_runs) {
        std::vector<std::string> base = variant;
        while (!base.empty() && is_mark(base.back())) base.pop_back();
        from_start += base.empty();
        ASSERT_EQ(variant.size() - base.size(), c.count);
        EXPECT_EQ(variant[base.size()], c.first);  // the first statement's outermost
        // Every statement it may marked.
        auto marked = start->Fork();
        ASSERT_TRUE(marked.ok());
        auto m = marked->StepNamed(variant, {"ir"});
        ASSERT_TRUE(m.ok());
        for (const std::string& mark : c.marks) EXPECT_THAT(m->Find("ir")->text, HasSubstr(mark));
        // Appended to a timed state: the fastest (the one the result is, or extends).
        if (!base.empty()) {
          EXPECT_NE(std::find(measured.begin(), measured.end(), base), measured.end());
        }
      }
      EXPECT_LE(from_start, 1);
      if (marked_runs.size() == 2) {
        EXPECT_NE(marked_runs[0], marked_runs[1]);
      }
      // The result: one of the states timed, replayed to its ir, marked where it ends in marks.
      EXPECT_NE(std::find(measured.begin(), measured.end(), r->actions), measured.end());
      auto replay = start->Fork();
      ASSERT_TRUE(replay.ok());
      auto s = replay->StepNamed(r->actions, {"ir"});
      ASSERT_TRUE(s.ok());
      EXPECT_EQ(s->Find("ir")->text, r->ir);
      const bool ends_marked = !r->actions.empty() && is_mark(r->actions.back());
      for (const std::string& mark : c.marks) {  // every statement marked (or none)
        EXPECT_EQ(r->ir.find(mark) != std::string::npos, ends_marked);
      }
      const bool any_mark = r->ir.find("\nstream ") != std::string::npos ||
                            r->ir.find("\nfold ") != std::string::npos;
      EXPECT_EQ(any_mark, ends_marked);
    }
  }
}

// Beside its likeliest episodes, a loop_set policy's first wave holds the start, the start with
// every mark, and the states its greedy episodes passed through: with time for all of them,
// each is timed (a transpose: its output streamed).
TEST_F(ClientTest, ALoopSetPolicysFirstWaveHoldsTheStartAndItsGreedyEpisodesStates) {
  auto start = Env::StartProgram(connection_, "benchmark://user-v0/short_t",
                                 "B[n,m] = A[m,n]\nm=96 n=64\n", "loop_nest");
  ASSERT_TRUE(start.ok()) << start.status();
  SearchOptions o;
  o.search = *ParseSearch("policy");
  o.policy = &Policy::LoopSet();
  o.time_limit_seconds = 60;
  o.policy_candidates = 1;  // the greedy episode alone
  auto greedy = Search(*start, o);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  ASSERT_GT(greedy->actions.size(), 1u);
  o.policy_candidates = 4;
  o.policy_timed = 64;
  // Every candidate of the wave timed (none passed over as predicted far slower): this test
  // asks what the wave holds.
  o.pass_predicted_slower = std::numeric_limits<double>::infinity();
  o.policy_seconds = 60;
  std::vector<std::vector<std::string>> measured;
  o.on_measured = [&](const MeasuredKernel& k) { measured.push_back(k.actions); };
  auto r = Search(*start, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto timed = [&](const std::vector<std::string>& actions) {
    return std::count(measured.begin(), measured.end(), actions);
  };
  EXPECT_EQ(timed({}), 1);
  EXPECT_EQ(timed({"stream_L0"}), 1);
  // The start and its streamed form right after the best-ranked candidate.
  ASSERT_GE(measured.size(), 3u);
  const std::vector<std::vector<std::string>> first_three(measured.begin(), measured.begin() + 3);
  EXPECT_EQ(std::count(first_three.begin(), first_three.end(), std::vector<std::string>{}), 1);
  EXPECT_EQ(std::count(first_three.begin(), first_three.end(),
                       std::vector<std::string>{"stream_L0"}),
            1);
  int prefixes = 0;  // of the greedy episode, shorter, timed
  for (size_t n = 1; n < greedy->actions.size(); ++n) {
    prefixes += timed({greedy->actions.begin(), greedy->actions.begin() + n}) > 0;
  }
  EXPECT_GT(prefixes, 0);
  for (const auto& actions : measured) EXPECT_EQ(timed(actions), 1);  // each timed once
}

TEST_F(ClientTest, PolicySearchesRefuseAPolicyForAnotherSpace) {
  auto start = Env::Start(connection_, "benchmark://mm64_256_16_range-v0/mm64_80_96");
  ASSERT_TRUE(start.ok());
  for (const char* algorithm : {"policy", "policy_guided"}) {
    SearchOptions o;
    o.search = *ParseSearch(algorithm);
    const ActionSpace three{"loop_tool", {LoopToolActionSpace().actions.begin(),
                                          LoopToolActionSpace().actions.begin() + 3}};
    const Policy three_actions = FixedPreferencePolicy({}, three);
    o.policy = &three_actions;
    auto r = Search(*start, o);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << algorithm;
    EXPECT_THAT(r.status().message(), HasSubstr("a space of 3 actions")) << algorithm;
    const Policy other_input = FixedPreferencePolicy({}, LoopToolActionSpace(), /*input=*/100);
    o.policy = &other_input;
    r = Search(*start, o);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << algorithm;
    EXPECT_THAT(r.status().message(), HasSubstr("reads 100 numbers of loops_tensor; the server "
                                                "sends 320"))
        << algorithm;
    // evolution only seeds from a policy that fits, and goes on without one that does not.
    o.search = *ParseSearch("evolution");
    o.time_limit_seconds = 0.3;
    for (const Policy* p : {&three_actions, &other_input}) {
      o.policy = p;
      EXPECT_TRUE(Search(*start, o).ok());
    }
  }
}

TEST(Connection, UnreachableServerIsUnavailable) {
  auto c = Connection::Connect("127.0.0.1:1", absl::Milliseconds(300));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("127.0.0.1:1"));
}

TEST(Connection, RidesOutAServerRestart) {
  auto first = std::make_unique<ServerProcess>();
  ASSERT_TRUE(first->ok());
  const int port = first->port();
  auto c = Connection::Connect("127.0.0.1:" + std::to_string(port));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(Env::Start(*c, kMm).ok());
  EXPECT_EQ(first->Terminate(), 0);
  first.reset();
  ServerProcess second({"--port=" + std::to_string(port)});
  ASSERT_TRUE(second.ok());
  auto env = Env::Start(*c, kMm);  // the same connection, reconnected
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_GE(env->session_id(), 0);  // a new server: a session of its own
}

}  // namespace
}  // namespace looptool::client
