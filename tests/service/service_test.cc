// Drives a real looptool-server over loopback with the generated C++ stubs: every RPC, the
// status codes and messages CompilerGym's clients key on, observations equal to the in-process
// engine's, fork independence, concurrent clients, idle reaping, crashing and hanging kernels,
// and SIGTERM.
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backend/actions/action_space.h"
#include "backend/env/environment.h"
#include "backend/ir/parser.h"
#include "datasets/matmul_range.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/service/eventually.h"
#include "tests/service/server_process.h"

extern char** environ;

namespace looptool {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::Eventually;
using testing::ServerProcess;
namespace cg = compiler_gym;

constexpr char kMm[] = "benchmark://mm64_256_16_range-v0/mm112_208_256";
const std::vector<std::string> kLoopTuneSequence = {"split_4",  "down",    "swap_down",
                                                    "down",     "split_16", "swap_up",
                                                    "swap_up",  "swap_up", "split_8"};

// A thin synchronous client over the stub, for readable tests.
class Client {
 public:
  explicit Client(cg::CompilerGymService::Stub& stub) : stub_(stub) {
    // The first call waits for the new channel's connection: a connect attempt can fail
    // transiently on a loaded host (once in CI, 16 clients connecting at once: "failed to
    // connect to all addresses ... No such file or directory"), and a fail-fast call would then
    // fail at once instead of letting gRPC reconnect.
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    EXPECT_TRUE(stub_.GetSpaces(&ctx, cg::GetSpacesRequest(), &spaces_).ok());
  }
  int Obs(const std::string& name) const {
    for (int i = 0; i < spaces_.observation_space_list_size(); ++i) {
      if (spaces_.observation_space_list(i).name() == name) return i;
    }
    ADD_FAILURE() << "no observation space " << name;
    return -1;
  }
  int Act(const std::string& name, int space = 0) const {
    const auto& names = spaces_.action_space_list(space).space().named_discrete().name();
    for (int i = 0; i < names.size(); ++i) {
      if (names[i] == name) return i;
    }
    ADD_FAILURE() << "no action " << name;
    return -1;
  }
  grpc::Status Start(const std::string& uri, const std::vector<std::string>& obs,
                     cg::StartSessionReply* reply, int action_space = 0) {
    cg::StartSessionRequest r;
    r.mutable_benchmark()->set_uri(uri);
    r.set_action_space(action_space);
    for (const auto& o : obs) r.add_observation_space(Obs(o));
    grpc::ClientContext ctx;
    return stub_.StartSession(&ctx, r, reply);
  }
  int64_t StartOk(const std::string& uri = kMm) {
    cg::StartSessionReply reply;
    grpc::Status s = Start(uri, {}, &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return reply.session_id();
  }
  grpc::Status Step(int64_t id, const std::vector<std::string>& actions,
                    const std::vector<std::string>& obs, cg::StepReply* reply) {
    cg::StepRequest r;
    r.set_session_id(id);
    for (const auto& a : actions) r.add_action()->set_int64_value(Act(a));
    for (const auto& o : obs) r.add_observation_space(Obs(o));
    grpc::ClientContext ctx;
    return stub_.Step(&ctx, r, reply);
  }
  std::string LoopTree(int64_t id) {
    cg::StepReply reply;
    grpc::Status s = Step(id, {}, {"loop_tree"}, &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return reply.observation_size() ? reply.observation(0).string_value() : "";
  }
  int64_t Fork(int64_t id) {
    cg::ForkSessionRequest r;
    r.set_session_id(id);
    cg::ForkSessionReply reply;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub_.ForkSession(&ctx, r, &reply).ok());
    return reply.session_id();
  }
  int End(int64_t id) {
    cg::EndSessionRequest r;
    r.set_session_id(id);
    cg::EndSessionReply reply;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub_.EndSession(&ctx, r, &reply).ok());
    return reply.remaining_sessions();
  }
  grpc::Status Param(int64_t id, const std::string& key, const std::string& value,
                     cg::SendSessionParameterReply* reply) {
    cg::SendSessionParameterRequest r;
    r.set_session_id(id);
    auto* p = r.add_parameter();
    p->set_key(key);
    p->set_value(value);
    grpc::ClientContext ctx;
    return stub_.SendSessionParameter(&ctx, r, reply);
  }
  grpc::Status AddBenchmark(const std::string& uri, const std::string& program) {
    cg::AddBenchmarkRequest r;
    auto* b = r.add_benchmark();
    b->set_uri(uri);
    b->mutable_program()->set_contents(program);
    cg::AddBenchmarkReply reply;
    grpc::ClientContext ctx;
    return stub_.AddBenchmark(&ctx, r, &reply);
  }
  const cg::GetSpacesReply& spaces() const { return spaces_; }

 private:
  cg::CompilerGymService::Stub& stub_;
  cg::GetSpacesReply spaces_;
};

// The same episode run in-process, for exact comparisons.
Environment LocalEnv(const std::string& program_text, const std::vector<std::string>& actions) {
  auto program = ParseProgram(program_text, Limits());
  EXPECT_TRUE(program.ok());
  Environment env(LoopTree::Initial(std::make_shared<const Program>(*program)),
                  LoopToolActionSpace(), Limits());
  for (const auto& a : actions) {
    env.Step(LoopToolActionSpace().IndexOf(*ActionFromName(a))).IgnoreError();
  }
  return env;
}

std::string Mm112() { return datasets::MatmulProgram({112, 208, 256}); }

class ServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServerProcess({"--timing_budget_ms=1"}, ServerProcess::kTestServerBinary);
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Terminate(), 0);  // SIGTERM: drained, exit status 0
    delete server_;
  }
  void SetUp() override { ASSERT_TRUE(server_->ok()); }
  static ServerProcess* server_;
};
ServerProcess* ServiceTest::server_ = nullptr;

TEST_F(ServiceTest, GetVersionAndSpaces) {
  grpc::ClientContext ctx;
  cg::GetVersionReply version;
  ASSERT_TRUE(server_->stub().GetVersion(&ctx, cg::GetVersionRequest(), &version).ok());
  EXPECT_EQ(version.service_version(), "0.2.5");
  EXPECT_THAT(version.compiler_version(), StartsWith("LoopTool"));

  Client c(server_->stub());
  const auto& spaces = c.spaces();
  ASSERT_EQ(spaces.action_space_list_size(), 5);  // ours, then upstream loop_tool-v0's
  EXPECT_EQ(spaces.action_space_list(0).name(), "loop_tool");
  EXPECT_THAT(spaces.action_space_list(0).space().named_discrete().name(),
              ::testing::ElementsAre("up", "down", "swap_up", "swap_down", "split_2", "split_4",
                                     "split_8", "split_16", "split_32", "split_64", "split_128",
                                     "split_256", "split_512", "split_1024", "merge", "unroll",
                                     "vectorize"));
  EXPECT_EQ(spaces.action_space_list(1).name(), "loop_tune");
  EXPECT_THAT(spaces.action_space_list(1).space().named_discrete().name(),
              ::testing::ElementsAre("up", "down", "swap_up", "swap_down", "split_4", "split_8",
                                     "split_16"));
  EXPECT_EQ(spaces.action_space_list(2).name(), "loop_nest");
  const auto& nest = spaces.action_space_list(2).space().named_discrete().name();
  ASSERT_EQ(nest.size(), 592);
  EXPECT_EQ(nest[575], "stream_L15");
  EXPECT_EQ(nest[591], "fold_L15");
  EXPECT_EQ(nest[4], "tile_L0_6");
  EXPECT_EQ(nest[258], "interchange_L0_L2");
  EXPECT_EQ(nest[559], "merge_L15");
  std::vector<std::string> names;
  for (const auto& s : spaces.observation_space_list()) {
    names.push_back(s.name());
    EXPECT_TRUE(s.has_default_observation()) << s.name();
  }
  EXPECT_THAT(names, ::testing::ElementsAre("ir", "loop_tree", "loops_tensor", "stride_tensor",
                                            "5_prev_actions_tensor", "ir_graph_networkx",
                                            "ir_tree_networkx", "action_mask", "flop_count",
                                            "flops", "runtime", "timing", "peak_gflops",
                                            "predicted_gflops", "sketches", "kernel_plan",
                                            "kernel_abi",
                                            "machine_code", "roofline", "roofline_fraction",
                                            "plan_features", "loop_features",
                                            "action_state"));
  EXPECT_EQ(spaces.action_space_list(3).name(), "simple");
  EXPECT_THAT(spaces.action_space_list(3).space().named_discrete().name(),
              ::testing::ElementsAre("toggle_mode", "up", "down", "toggle_thread"));
  EXPECT_EQ(spaces.action_space_list(4).name(), "split");
  EXPECT_THAT(spaces.action_space_list(4).space().named_discrete().name(),
              ::testing::ElementsAre("toggle_mode", "up", "down", "toggle_thread", "split"));
  const auto& loops = spaces.observation_space_list(c.Obs("loops_tensor"));
  ASSERT_TRUE(loops.space().has_float_box());
  EXPECT_THAT(loops.space().float_box().low().shape(), ::testing::ElementsAre(1, 16 * 20));
  const auto& graph = spaces.observation_space_list(c.Obs("ir_graph_networkx"));
  EXPECT_TRUE(graph.space().has_string_value());
  cg::Opaque opaque;
  ASSERT_TRUE(graph.default_observation().any_value().UnpackTo(&opaque));
  EXPECT_EQ(opaque.format(), "json://networkx/MultiDiGraph");
  const auto& flops = spaces.observation_space_list(c.Obs("flops"));
  EXPECT_TRUE(flops.space().has_double_value());
  EXPECT_FALSE(flops.deterministic());
  EXPECT_TRUE(flops.platform_dependent());
}

TEST_F(ServiceTest, ObservationsEqualTheInProcessEngine) {
  Client c(server_->stub());
  cg::StartSessionReply start;
  ASSERT_TRUE(c.Start(kMm, {"loop_tree", "loops_tensor", "flop_count"}, &start).ok());
  ASSERT_EQ(start.observation_size(), 3);
  const Environment local = LocalEnv(Mm112(), {});
  EXPECT_EQ(start.observation(0).string_value(), local.Observe("loop_tree")->text);
  const auto& t = start.observation(1).float_tensor();
  EXPECT_THAT(t.shape(), ::testing::ElementsAre(1, 320));
  EXPECT_THAT(std::vector<float>(t.value().begin(), t.value().end()),
              ::testing::ContainerEq(local.Observe("loops_tensor")->floats));
  // LoopTune's numbers for the m loop: cursor 1, size 112, tail 0, compute nest, bucket 8 = 1.
  EXPECT_EQ(t.value(0), 1);
  EXPECT_EQ(t.value(1), 112);
  EXPECT_EQ(t.value(2), 0);
  EXPECT_EQ(t.value(3), 1);
  EXPECT_EQ(t.value(4 + 8), 1.0f);
  EXPECT_EQ(start.observation(2).int64_value(), 2LL * 112 * 208 * 256);

  cg::StepReply step;
  const std::vector<std::string> all = {"ir",           "loop_tree",        "loops_tensor",
                                        "stride_tensor", "5_prev_actions_tensor",
                                        "ir_graph_networkx", "ir_tree_networkx", "action_mask"};
  ASSERT_TRUE(c.Step(start.session_id(), kLoopTuneSequence, all, &step).ok());
  EXPECT_FALSE(step.action_had_no_effect());
  const Environment after = LocalEnv(Mm112(), kLoopTuneSequence);
  EXPECT_EQ(step.observation(0).string_value(), after.Observe("ir")->text);
  EXPECT_EQ(step.observation(1).string_value(), after.Observe("loop_tree")->text);
  EXPECT_THAT(step.observation(1).string_value(), HasSubstr("    for m' in 4 : L4\n     for n'' in 16 : L5\n"));
  for (int i : {2, 3, 4}) {
    const auto& v = step.observation(i).float_tensor().value();
    EXPECT_THAT(std::vector<float>(v.begin(), v.end()),
                ::testing::ContainerEq(after.Observe(all[i])->floats))
        << all[i];
  }
  for (int i : {5, 6}) {
    cg::Opaque opaque;
    ASSERT_TRUE(step.observation(i).any_value().UnpackTo(&opaque)) << all[i];
    EXPECT_EQ(opaque.format(), "json://networkx/MultiDiGraph");
    EXPECT_EQ(opaque.data(), after.Observe(all[i])->text);
  }
  const auto& mask = step.observation(7).boolean_tensor().value();
  EXPECT_THAT(std::vector<bool>(mask.begin(), mask.end()),
              ::testing::ContainerEq(after.Observe("action_mask")->bools));
}

TEST_F(ServiceTest, StepNoEffectIsTheAndOverActions) {
  Client c(server_->stub());
  const int64_t id = c.StartOk();
  cg::StepReply r;
  ASSERT_TRUE(c.Step(id, {}, {"loop_tree"}, &r).ok());  // no actions: observations only
  EXPECT_TRUE(r.action_had_no_effect());
  EXPECT_EQ(r.observation_size(), 1);
  r.Clear();
  ASSERT_TRUE(c.Step(id, {"up"}, {}, &r).ok());  // cursor on the first loop
  EXPECT_TRUE(r.action_had_no_effect());
  r.Clear();
  ASSERT_TRUE(c.Step(id, {"up", "down"}, {}, &r).ok());
  EXPECT_FALSE(r.action_had_no_effect());
  EXPECT_FALSE(r.end_of_session());
}

TEST_F(ServiceTest, ActionsByName) {
  Client c(server_->stub());
  const int64_t id = c.StartOk();
  cg::StepRequest req;
  req.set_session_id(id);
  req.add_action()->set_string_value("split_4");
  cg::StepReply reply;
  grpc::ClientContext ctx;
  ASSERT_TRUE(server_->stub().Step(&ctx, req, &reply).ok());
  EXPECT_EQ(c.LoopTree(id), LocalEnv(Mm112(), {"split_4"}).Observe("loop_tree")->text);
}

// loop_nest takes MLIR-RL's multi-discrete actions: (transformation, level, parameter) as an
// int64_tensor or an event_list, the same action as its flat index and its name.
TEST_F(ServiceTest, LoopNestMultiDiscreteActions) {
  Client c(server_->stub());
  cg::StartSessionReply started;
  ASSERT_TRUE(c.Start(kMm, {}, &started, /*action_space=*/2).ok());
  const int64_t id = started.session_id();
  const auto step = [&](const cg::Event& e, cg::StepReply* reply) {
    cg::StepRequest req;
    req.set_session_id(id);
    *req.add_action() = e;
    req.add_observation_space(c.Obs("action_mask"));
    grpc::ClientContext ctx;
    return server_->stub().Step(&ctx, req, reply);
  };
  cg::Event tile;  // tile_L0_6: m by 6 rows
  for (int64_t v : {0, 0, 4}) tile.mutable_int64_tensor()->add_value(v);
  tile.mutable_int64_tensor()->add_shape(3);
  cg::StepReply reply;
  ASSERT_TRUE(step(tile, &reply).ok());
  EXPECT_FALSE(reply.action_had_no_effect());
  EXPECT_EQ(reply.observation(0).boolean_tensor().value_size(), 592);
  cg::Event swap;  // interchange_L2_L1: k above m'
  for (int64_t v : {1, 2, 1}) swap.mutable_event_list()->add_event()->set_int64_value(v);
  ASSERT_TRUE(step(swap, &reply).ok());
  EXPECT_FALSE(reply.action_had_no_effect());
  Environment nest(LoopTree::Initial(std::make_shared<const Program>(
                       *ParseProgram(Mm112(), Limits()))),
                   LoopNestActionSpace(), Limits());
  ASSERT_TRUE(nest.Step(4).ok());
  ASSERT_TRUE(nest.Step(256 + 2 * 16 + 1).ok());
  EXPECT_EQ(c.LoopTree(id), nest.Observe("loop_tree")->text);
  cg::Event by_name;
  by_name.set_string_value("interchange_L1_L2");  // and back
  ASSERT_TRUE(step(by_name, &reply).ok());
  EXPECT_FALSE(reply.action_had_no_effect());
  ASSERT_TRUE(nest.Step(256 + 1 * 16 + 2).ok());
  EXPECT_EQ(c.LoopTree(id), nest.Observe("loop_tree")->text);

  cg::Event out_of_range;
  for (int64_t v : {0, 16, 0}) out_of_range.mutable_int64_tensor()->add_value(v);
  grpc::Status s = step(out_of_range, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "loop_nest action (0, 16, 0): the level is out of range (0..15)");
  cg::Event two;
  for (int64_t v : {0, 1}) two.mutable_int64_tensor()->add_value(v);
  s = step(two, &reply);
  EXPECT_EQ(s.error_message(),
            "A multi-discrete action must hold three integers: (transformation, level, parameter)");
  EXPECT_EQ(c.LoopTree(id), nest.Observe("loop_tree")->text);  // refused actions change nothing
  // In another space a triple is refused.
  const int64_t other = c.StartOk();
  cg::StepRequest req;
  req.set_session_id(other);
  *req.add_action() = tile;
  grpc::ClientContext ctx;
  s = server_->stub().Step(&ctx, req, &reply);
  EXPECT_EQ(s.error_message(),
            "A multi-discrete action (transformation, level, parameter) is for action space "
            "loop_nest, not loop_tool");
}

// The datasets and their splits are served (no session needed), so that clients never mirror
// them: the lists are the server's.
TEST_F(ServiceTest, DatasetsAndSplitsAreServedWithoutASession) {
  Client c(server_->stub());
  cg::SendSessionParameterReply reply;
  ASSERT_TRUE(c.Param(0, "looptool.datasets", "", &reply).ok());
  ASSERT_EQ(reply.reply_size(), 1);
  std::vector<std::string> lines = absl::StrSplit(reply.reply(0), '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 3u);
  EXPECT_THAT(lines[0], StartsWith("mm64_256_16_range-v0 2197 "));
  EXPECT_THAT(lines[1], StartsWith("matmul_offgrid-v0 12 12 Matmuls off that grid"));
  const auto list = [&](const std::string& value) {
    cg::SendSessionParameterReply r;
    grpc::Status s = c.Param(987654321, "looptool.dataset_benchmarks", value, &r);
    EXPECT_TRUE(s.ok()) << value << ": " << s.error_message();
    std::vector<std::string> uris;
    if (r.reply_size() == 1) uris = absl::StrSplit(r.reply(0), '\n', absl::SkipEmpty());
    return uris;
  };
  const std::vector<std::string> all = list("mm64_256_16_range-v0");
  const std::vector<std::string> train = list("mm64_256_16_range-v0:train");
  const std::vector<std::string> test = list("mm64_256_16_range-v0:test");
  ASSERT_EQ(all.size(), 2197u);
  EXPECT_EQ(all.front(), "benchmark://mm64_256_16_range-v0/mm64_64_64");
  EXPECT_EQ(train.size() + test.size(), all.size());
  EXPECT_GT(test.size(), 2197u / 6);  // about a fifth
  EXPECT_LT(test.size(), 2197u / 4);
  std::set<std::string> seen(train.begin(), train.end());
  for (const std::string& uri : test) EXPECT_TRUE(seen.insert(uri).second) << uri;
  EXPECT_EQ(seen, std::set<std::string>(all.begin(), all.end()));
  const std::vector<std::string> offgrid = list("matmul_offgrid-v0:test");
  ASSERT_EQ(offgrid.size(), 12u);
  EXPECT_EQ(offgrid.front(), "benchmark://matmul_offgrid-v0/mm37_61_97");
  EXPECT_TRUE(list("matmul_offgrid-v0:train").empty());
  // The served URIs start sessions.
  EXPECT_NE(c.StartOk(offgrid.back()), 0);
  // Errors name what was wrong.
  grpc::Status s = c.Param(0, "looptool.dataset_benchmarks", "nope-v0", &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), StartsWith("unknown dataset 'nope-v0'; known: mm64_256_16_range-v0"));
  s = c.Param(0, "looptool.dataset_benchmarks", "conv2d-v0:validation", &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "unknown split 'validation': use all, train or test");
  // Session keys still need a session.
  s = c.Param(987654321, "looptool.benchmark", "", &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  // At most 64 parameters in one request.
  cg::SendSessionParameterRequest many;
  for (int i = 0; i < 65; ++i) many.add_parameter()->set_key("looptool.datasets");
  grpc::ClientContext ctx;
  s = server_->stub().SendSessionParameter(&ctx, many, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "Too many parameters in one request: at most 64");
}

TEST_F(ServiceTest, StatusCodesAndMessages) {
  Client c(server_->stub());
  cg::StepReply step;
  grpc::Status s = c.Step(987654, {"down"}, {}, &step);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "Session not found: 987654");

  cg::StartSessionReply start;
  s = c.Start("benchmark://mm64_256_16_range-v0/nonsense", {}, &start);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "Benchmark not found: benchmark://mm64_256_16_range-v0/nonsense");
  s = c.Start("", {}, &start);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "No benchmark URI set for StartSession()");
  s = c.Start(kMm, {}, &start, /*action_space=*/7);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "Action space index out of range: 7");

  const int64_t id = c.StartOk();
  const std::string before = c.LoopTree(id);
  cg::StepRequest bad;
  bad.set_session_id(id);
  bad.add_action()->set_int64_value(c.Act("split_4"));
  bad.add_action()->set_int64_value(17);  // out of range: the whole step changes nothing
  grpc::ClientContext ctx;
  s = server_->stub().Step(&ctx, bad, &step);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("Action index 17 is out of range for action space loop_tool"));
  EXPECT_EQ(c.LoopTree(id), before);

  cg::StepRequest bad_obs;
  bad_obs.set_session_id(id);
  bad_obs.add_action()->set_int64_value(c.Act("split_4"));  // not applied: the request is bad
  bad_obs.add_observation_space(99);
  grpc::ClientContext ctx2;
  s = server_->stub().Step(&ctx2, bad_obs, &step);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "Observation space index out of range: 99");
  EXPECT_EQ(c.LoopTree(id), before);

  cg::SendSessionParameterReply param;
  s = c.Param(id, "nope", "1", &param);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "Unknown parameter: nope");
  s = c.Param(424242, "nope", "1", &param);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);

  // EndSession of an unknown id is OK and reports the count.
  const int remaining = c.End(555555);
  EXPECT_GE(remaining, 1);
  EXPECT_EQ(c.End(id), remaining - 1);
}

TEST_F(ServiceTest, AddBenchmarkParsesOnArrival) {
  Client c(server_->stub());
  grpc::Status s = c.AddBenchmark("benchmark://user/bad", "C[m,n] += A[m,k] * ; m=4 n=4 k=4");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("Malformed program for benchmark benchmark://user/bad"));
  EXPECT_THAT(s.error_message(), HasSubstr("line 1, column"));
  s = c.AddBenchmark("benchmark://user/huge", "C[m,n] += A[m,k] * B[k,n]; m=100000 n=4 k=4");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  ASSERT_TRUE(c.AddBenchmark("benchmark://user/rowsum", "O[r] += I[r,c]; r=64 c=48").ok());
  const int64_t id = c.StartOk("benchmark://user/rowsum");
  EXPECT_EQ(c.LoopTree(id), LocalEnv("O[r] += I[r,c]; r=64 c=48", {}).Observe("loop_tree")->text);

  // A program sent with StartSession is added first.
  cg::StartSessionRequest r;
  r.mutable_benchmark()->set_uri("benchmark://user/gemv");
  r.mutable_benchmark()->mutable_program()->set_contents("y[m] += A[m,k] * x[k]; m=32 k=64");
  cg::StartSessionReply reply;
  grpc::ClientContext ctx;
  ASSERT_TRUE(server_->stub().StartSession(&ctx, r, &reply).ok());

  cg::SendSessionParameterReply param;
  ASSERT_TRUE(c.Param(id, "service.benchmark_cache.get_size_in_bytes", "", &param).ok());
  EXPECT_GT(std::stoll(param.reply(0)), 0);
  // Clients may lower their cache's cap, not raise it past the server's (64 MiB per client).
  param.Clear();
  ASSERT_TRUE(c.Param(id, "service.benchmark_cache.set_max_size_in_bytes", "99999999999", &param).ok());
  EXPECT_EQ(param.reply(0), "67108864");
  param.Clear();
  s = c.Param(id, "service.benchmark_cache.set_max_size_in_bytes", "lots", &param);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(ServiceLimits, LoopNestTooLargeIsRefused) {
  ServerProcess server({"--max_loops=3"});
  ASSERT_TRUE(server.ok());
  Client c(server.stub());
  cg::StartSessionReply reply;
  grpc::Status s = c.Start(kMm, {}, &reply);  // m (shared by both nests), k, n, and the write-back n
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            std::string("Loop nest too large: benchmark ") + kMm +
                " has 4 loops, this server allows at most 3");
  ASSERT_TRUE(c.AddBenchmark("benchmark://user/rowsum", "O[r] += I[r,c]; r=64 c=48").ok());
  EXPECT_TRUE(c.Start("benchmark://user/rowsum", {}, &reply).ok());  // r, c, write-back
  EXPECT_EQ(server.Terminate(), 0);
}

// --stream_stores_min_bytes reaches the kernel plan, the machine code and the kernel workers: a
// 64 x 64 elementwise add (16 KiB out) streams its stores with the threshold at 16 KiB and not
// one byte above; the streamed kernel is verified against the interpreter in the worker before
// it is timed, its code (two bodies, the alignment check) differs from the plain one, and its
// kernel_abi names the streamed output.
TEST(ServiceCodegen, StreamStoresFlag) {
  std::vector<std::string> codes;
  for (const std::string bytes : {"16384", "16385"}) {
    SCOPED_TRACE(bytes);
    ServerProcess server({"--stream_stores_min_bytes=" + bytes, "--timing_budget_ms=1"});
    ASSERT_TRUE(server.ok());
    Client c(server.stub());
    ASSERT_TRUE(c.AddBenchmark("benchmark://user/add", "C[m,n] = A[m,n] + B[m,n]; m=64 n=64").ok());
    const int64_t id = c.StartOk("benchmark://user/add");
    cg::StepReply r;
    const grpc::Status s =
        c.Step(id, {}, {"kernel_plan", "machine_code", "flops", "kernel_abi"}, &r);
    ASSERT_TRUE(s.ok()) << s.error_message();
    const std::string& plan = r.observation(0).string_value();
    EXPECT_EQ(plan.find("stores streamed") != std::string::npos, bytes == "16384") << plan;
    const std::string& abi = r.observation(3).string_value();  // C is tensor 0
    EXPECT_EQ(abi.find("\"streamed_outputs\":[0]") != std::string::npos, bytes == "16384") << abi;
    codes.push_back(r.observation(1).byte_tensor().value());
    EXPECT_GT(r.observation(2).double_value(), 0);
    EXPECT_EQ(server.Terminate(), 0);
  }
  ASSERT_EQ(codes.size(), 2u);
  EXPECT_FALSE(codes[0].empty());
  EXPECT_NE(codes[0], codes[1]);
}

TEST_F(ServiceTest, ForkIsIndependentAndIdsAreUnguessable) {
  Client c(server_->stub());
  const int64_t parent = c.StartOk();
  cg::StepReply r;
  ASSERT_TRUE(c.Step(parent, {"split_4"}, {}, &r).ok());
  const std::string parent_tree = c.LoopTree(parent);
  const int64_t child = c.Fork(parent);
  EXPECT_NE(child, parent);
  EXPECT_GE(child, 0);
  EXPECT_EQ(c.LoopTree(child), parent_tree);
  ASSERT_TRUE(c.Step(child, {"down", "swap_down", "split_16"}, {}, &r).ok());
  EXPECT_EQ(c.LoopTree(parent), parent_tree);
  EXPECT_EQ(c.LoopTree(child),
            LocalEnv(Mm112(), {"split_4", "down", "swap_down", "split_16"})
                .Observe("loop_tree")->text);
  c.End(child);
  // Ids are 63 random bits, never those of a live or recently ended session: no two of many
  // fresh ones are neighbours, so a client cannot step or end another's session by counting.
  std::set<int64_t> ids = {parent, child};
  for (int i = 0; i < 50; ++i) {
    const int64_t id = c.StartOk();
    EXPECT_GE(id, 0);
    EXPECT_TRUE(ids.insert(id).second) << id;
    c.End(id);
  }
  int64_t previous = -1;
  for (int64_t id : ids) {
    if (previous >= 0) {
      EXPECT_GT(id - previous, 1 << 20) << "neighbouring ids " << previous << ", " << id;
    }
    previous = id;
  }
  cg::StepReply gone;
  EXPECT_EQ(c.Step(child, {}, {}, &gone).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServiceTest, TimingObservations) {
  Client c(server_->stub());
  const int64_t id = c.StartOk("benchmark://mm64_256_16_range-v0/mm64_64_64");
  cg::StepReply r;
  ASSERT_TRUE(c.Step(id, {}, {"flops", "runtime", "peak_gflops", "flop_count"}, &r).ok());
  const double gflops = r.observation(0).double_value(), seconds = r.observation(1).double_value();
  EXPECT_GT(gflops, 0);
  EXPECT_GT(seconds, 0);
  // The measured peak: a failed measurement would read exactly 1.0, and no core reaches 1000.
  EXPECT_GT(r.observation(2).double_value(), 1.0);
  EXPECT_LT(r.observation(2).double_value(), 1000.0);
  EXPECT_NEAR(gflops, r.observation(3).int64_value() / seconds * 1e-9, 1e-6 * gflops);
  // The measurement is cached: a cursor move reports the very same number.
  cg::StepReply again;
  ASSERT_TRUE(c.Step(id, {"down"}, {"flops"}, &again).ok());
  EXPECT_EQ(again.observation(0).double_value(), gflops);

  // looptool.remeasure times the kernel again and measures the FMA peak on its core right after
  // it (how near either lands to the first numbers is the benchmarks' business: tests share the
  // CI's two cores); the cached flops stays as it was.
  cg::SendSessionParameterReply param;
  ASSERT_TRUE(c.Param(id, "looptool.remeasure", "", &param).ok());
  ASSERT_EQ(param.reply_size(), 2);
  EXPECT_GT(std::stod(param.reply(0)), 0);
  const double beside = std::stod(param.reply(1));
  EXPECT_GT(beside, 1.0);  // as for peak_gflops above
  EXPECT_LT(beside, 1000.0);
  cg::StepReply cached;
  ASSERT_TRUE(c.Step(id, {}, {"flops"}, &cached).ok());
  EXPECT_EQ(cached.observation(0).double_value(), gflops);

  // Upstream loop_tool-v0 sessions (its "simple" space) have no kernel of ours to re-time.
  int simple = -1;
  for (int i = 0; i < c.spaces().action_space_list_size(); ++i) {
    if (c.spaces().action_space_list(i).name() == "simple") simple = i;
  }
  ASSERT_GE(simple, 0);
  cg::StartSessionReply v0;
  ASSERT_TRUE(c.Start("benchmark://loop_tool-cpu-v0/1024", {}, &v0, simple).ok());
  param.Clear();
  const grpc::Status s = c.Param(v0.session_id(), "looptool.remeasure", "", &param);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(s.error_message(), HasSubstr("cannot re-time"));
}

TEST_F(ServiceTest, CrashingAndHangingKernelsFailOneStepOnly) {
  Client c(server_->stub());
  const int64_t victim = c.StartOk("benchmark://mm64_256_16_range-v0/mm64_80_96");
  const int64_t bystander = c.StartOk("benchmark://mm64_256_16_range-v0/mm64_96_80");
  cg::SendSessionParameterReply param;
  ASSERT_TRUE(c.Param(victim, "test.inject_fault", "crash", &param).ok());
  cg::StepReply r;
  grpc::Status s = c.Step(victim, {"split_4"}, {"flops"}, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(s.error_message(), HasSubstr("crashed"));
  r.Clear();
  s = c.Step(bystander, {"split_8"}, {"flops"}, &r);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_GT(r.observation(0).double_value(), 0);
  r.Clear();
  // The victim's session goes on, as it was before the failed step (which changed nothing).
  s = c.Step(victim, {}, {"flops", "loop_tree"}, &r);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(r.observation(1).string_value(),
            LocalEnv(datasets::MatmulProgram({64, 80, 96}), {}).Observe("loop_tree")->text);
}

TEST(ServiceLimits, TreesBeyondSixteenLoopsAreTimedWhenTheServerAllowsThem) {
  ServerProcess server({"--max_loops=24", "--timing_budget_ms=1"});
  ASSERT_TRUE(server.ok());
  Client c(server.stub());
  // Split by 2 where the cursor is, else walk down, until the tree has more than 16 loops.
  std::vector<std::string> actions;
  Limits limits;
  limits.max_loops = 24;
  Environment local(LoopTree::Initial(std::make_shared<const Program>(
                        *ParseProgram(datasets::MatmulProgram({64, 64, 64}), limits))),
                    LoopToolActionSpace(), limits);
  while (local.tree().num_loops() <= 16) {
    bool moved = false;
    for (const std::string a : {"split_2", "down"}) {
      if (*local.Step(LoopToolActionSpace().IndexOf(*ActionFromName(a))) == NoEffectReason::kNone) {
        actions.push_back(a);
        moved = true;
        break;
      }
    }
    ASSERT_TRUE(moved) << "stuck at " << local.tree().num_loops() << " loops";
  }
  ASSERT_LE(local.tree().num_loops(), 24);
  const int64_t id = c.StartOk("benchmark://mm64_256_16_range-v0/mm64_64_64");
  cg::StepReply r;
  grpc::Status s = c.Step(id, actions, {"loop_tree", "flops"}, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(r.observation(0).string_value(), local.Observe("loop_tree")->text);
  EXPECT_GT(r.observation(1).double_value(), 0);
  EXPECT_EQ(server.Terminate(), 0);
}

// What a server run that should refuse to start printed and how it ended.
struct Refusal {
  int exit_code = -1;  // -1: killed, or still running after the deadline (it started)
  std::string output;  // stdout and stderr together
};

// Runs the server binary with `args`, capturing its output; a server still running after 20 s
// (it started after all) gets SIGTERM, then SIGKILL.
Refusal RunServerToExit(const std::vector<std::string>& args) {
  Refusal r;
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return r;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
  std::vector<std::string> argv_strings = {ServerProcess::kServerBinary};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (spawned != 0) {
    close(pipe_fds[0]);
    r.output = "posix_spawn failed";
    return r;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool timed_out = false;
  char buffer[4096];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{pipe_fds[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;  // end of file: the server exited (or closed its output)
    r.output.append(buffer, n);
  }
  close(pipe_fds[0]);
  if (timed_out) {
    // SIGTERM, and SIGKILL if it has not exited 5 s later (its pidfd is readable once it has).
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    kill(pid, SIGTERM);
    pollfd exited{pidfd, POLLIN, 0};
    if (pidfd < 0 || poll(&exited, 1, 5000) != 1) kill(pid, SIGKILL);
    if (pidfd >= 0) close(pidfd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!timed_out && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

TEST(ServiceLimits, BadFlagsAreRefusedEachWithItsOwnMessage) {
  // The flag types' own checks (service/server_flags.h), reported by Abseil's flag parser.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--session_idle_timeout=0"},
       "Illegal value '0' specified for flag 'session_idle_timeout'; must be positive"},
      {{"--max_sessions=0"}, "Illegal value '0' specified for flag 'max_sessions'; must be positive"},
      {{"--eval_deadline=-1"},
       "Illegal value '-1' specified for flag 'eval_deadline'; must be positive"},
      {{"--timing_budget_ms=0"},
       "Illegal value '0' specified for flag 'timing_budget_ms'; must be positive"},
      {{"--max_loops=0"}, "Illegal value '0' specified for flag 'max_loops'; must be positive"},
      {{"--max_kernel_seconds=-1"},
       "Illegal value '-1' specified for flag 'max_kernel_seconds'; must be 0 or more"},
      {{"--timing=fast"},
       "Illegal value 'fast' specified for flag 'timing'; must be adaptive or fixed, got 'fast'"},
      {{"--eval_cores=1,x"}, "specified for flag 'eval_cores'; takes CPU numbers (0, 1, ...), got 'x'"},
      {{"--eval_cores=-2"}, "specified for flag 'eval_cores'; takes CPU numbers (0, 1, ...), got '-2'"},
      {{"--isa=neon"}, "Illegal value 'neon' specified for flag 'isa'"},
      {{"--auth_token_file=/nonexistent/token"},
       "looptool-server: cannot read the token file /nonexistent/token"},
      {{"--tls_cert_file=/nonexistent/cert.pem"},
       "looptool-server: TLS needs both a certificate file and a key file"},
      {{"--bind=0.0.0.0"},
       "looptool-server: refusing to listen on 0.0.0.0 without a shared token"},
      {{"stray"}, "looptool-server: unexpected argument 'stray'"},
      {{"--no_such_flag"}, "Unknown command line flag 'no_such_flag'"},
      {{"--max_sessions=abc"}, "Illegal value 'abc' specified for flag 'max_sessions'"},
      {{"--stream_stores_min_bytes=-1"},
       "Illegal value '-1' specified for flag 'stream_stores_min_bytes'; must be 0 or more"},
      {{"--stream_stores_min_bytes=1.5"},
       "specified for flag 'stream_stores_min_bytes'; '1.5' is not a number"},
      {{"--stream_stores_min_bytes=99999999999999999999"},
       "specified for flag 'stream_stores_min_bytes'; '99999999999999999999' is not a number"},
  };
  for (const auto& [args, message] : cases) {
    const Refusal r = RunServerToExit(args);
    EXPECT_EQ(r.exit_code, 1) << args[0] << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(message)) << args[0];
    EXPECT_THAT(r.output, ::testing::Not(HasSubstr("listening on"))) << args[0];
  }
}

TEST(ServiceLimits, HangingKernelHitsTheDeadline) {
  // (3 s: the second step measures on a fresh worker, under ASan too, well within it.)
  ServerProcess server({"--eval_deadline=3", "--timing_budget_ms=1"},
                       ServerProcess::kTestServerBinary);
  ASSERT_TRUE(server.ok());
  Client c(server.stub());
  const int64_t id = c.StartOk();
  cg::SendSessionParameterReply param;
  ASSERT_TRUE(c.Param(id, "test.inject_fault", "hang", &param).ok());
  cg::StepReply r;
  grpc::Status s = c.Step(id, {}, {"flops"}, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  r.Clear();
  s = c.Step(id, {}, {"flops"}, &r);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(server.Terminate(), 0);
}

// A session's start hints its program's reference run to a worker through the server's timer
// (the test server's fault-injecting timer passes hints on as the plain server's does). The
// pool's counts (test.prepares): the hint reaches a worker with no step taken, which makes the
// reference (prepared) or finds it made by the start's own measurement, whichever ran first
// (cached); a measured step afterwards adds one measurement and no hint. With
// --prepare_references=false no hint is made.
TEST(ServiceTiming, ASessionsStartSendsItsProgramsReferenceRunToAWorker) {
  for (const bool prepare : {true, false}) {
    ServerProcess server(
        {"--timing_budget_ms=1", absl::StrCat("--prepare_references=", prepare ? "true" : "false")},
        ServerProcess::kTestServerBinary);
    ASSERT_TRUE(server.ok());
    Client c(server.stub());
    const int64_t id = c.StartOk();
    // {prepared, cached, failed, measured}; all -1 when the parameter failed.
    const auto counts = [&] {
      cg::SendSessionParameterReply param;
      const grpc::Status s = c.Param(id, "test.prepares", "", &param);
      EXPECT_TRUE(s.ok()) << s.error_message();
      std::vector<int64_t> n(4, -1);
      if (!s.ok() || param.reply_size() != 1) return n;
      const std::vector<std::string> words = absl::StrSplit(param.reply(0), ' ');
      for (size_t i = 0; i < words.size() && i < n.size(); ++i) n[i] = std::stoll(words[i]);
      return n;
    };
    if (prepare) {
      EXPECT_TRUE(Eventually([&] { return counts()[0] + counts()[1] == 1; }, absl::Seconds(60),
                             absl::Milliseconds(5)));
    }
    const std::vector<int64_t> before = counts();
    EXPECT_EQ(before[0] + before[1], prepare ? 1 : 0);
    EXPECT_EQ(before[2], 0);
    cg::StepReply r;
    const grpc::Status s = c.Step(id, {}, {"flops"}, &r);
    EXPECT_TRUE(s.ok()) << s.error_message();
    const std::vector<int64_t> after = counts();
    EXPECT_EQ(after[0], before[0]);
    EXPECT_EQ(after[1], before[1]);
    EXPECT_EQ(after[2], 0);
    EXPECT_EQ(after[3], before[3] + 1);
    EXPECT_EQ(server.Terminate(), 0);
  }
}

TEST(ServiceLimits, MaxSessionsAndIdleReaping) {
  ServerProcess server({"--max_sessions=3", "--session_idle_timeout=3"});
  ASSERT_TRUE(server.ok());
  Client c(server.stub());
  const int64_t a = c.StartOk();
  c.StartOk();
  c.StartOk();
  cg::StartSessionReply reply;
  grpc::Status s = c.Start(kMm, {}, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("Too many sessions"));
  // The reaper ends all three once they are idle for 3 s: wait for it, counting the sessions
  // left with EndSession of an id that is no session's (it touches none), for a minute at most.
  constexpr int64_t kNoSession = 987654321;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (c.End(kNoSession) > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  cg::StepReply r;
  s = c.Step(a, {}, {}, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(c.End(a), 0);  // all three were reaped
  EXPECT_EQ(server.Terminate(), 0);
}

TEST_F(ServiceTest, SixteenConcurrentClientsManySessions) {
  constexpr int kThreads = 16, kSessions = 6, kSteps = 25;
  const std::vector<std::string> names = LoopToolActionSpace().Names();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto stub = server_->NewStub();
      Client c(*stub);
      std::mt19937 rng(t);
      for (int s = 0; s < kSessions; ++s) {
        const int64_t id = c.StartOk();
        std::vector<std::string> taken;
        for (int i = 0; i < kSteps; ++i) {
          const std::string a = names[rng() % 14];  // cursor, swaps and splits
          cg::StepReply r;
          if (!c.Step(id, {a}, {"loops_tensor"}, &r).ok()) ++failures;
          taken.push_back(a);
        }
        if (c.LoopTree(id) != LocalEnv(Mm112(), taken).Observe("loop_tree")->text) ++failures;
        c.End(id);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace looptool
