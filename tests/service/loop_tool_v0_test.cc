// CompilerGym's upstream loop_tool-v0 environment served by LoopTool: the action spaces, the
// observations and the exact loop trees of upstream's own tests (v0.2.5 tests/loop_tool/
// actions_test.py, CPU backend), the resize example of upstream's docstring, the default-space
// switch reported in new_action_space, and random walks that keep the nest covering N.
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/service/server_process.h"

namespace looptool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ServerProcess;
namespace cg = compiler_gym;

enum { kToggleMode = 0, kUp = 1, kDown = 2, kToggleThread = 3, kSplit = 4 };

class LoopToolV0Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServerProcess(); }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Terminate(), 0);
    delete server_;
  }

  int Obs(const std::string& name) { return testing::ObservationIndex(server_->stub(), name); }
  int Space(const std::string& name) {
    grpc::ClientContext ctx;
    cg::GetSpacesReply spaces;
    EXPECT_TRUE(server_->stub().GetSpaces(&ctx, {}, &spaces).ok());
    for (int i = 0; i < spaces.action_space_list_size(); ++i) {
      if (spaces.action_space_list(i).name() == name) return i;
    }
    ADD_FAILURE() << "no action space " << name;
    return -1;
  }
  grpc::Status Start(const std::string& uri, int space, cg::StartSessionReply* reply) {
    cg::StartSessionRequest r;
    r.mutable_benchmark()->set_uri(uri);
    r.set_action_space(space);
    grpc::ClientContext ctx;
    return server_->stub().StartSession(&ctx, r, reply);
  }
  int64_t StartOk(const std::string& uri, const std::string& space = "simple") {
    cg::StartSessionReply reply;
    grpc::Status s = Start(uri, Space(space), &reply);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return reply.session_id();
  }
  // Steps `actions` one Step each (as CompilerGym's env.step does) and returns the last reply
  // with observation `obs`.
  cg::StepReply Steps(int64_t id, std::vector<int> actions, const std::string& obs) {
    cg::StepReply reply;
    const bool observe_only = actions.empty();
    if (observe_only) actions.push_back(-1);
    for (int a : actions) {
      cg::StepRequest r;
      r.set_session_id(id);
      if (a >= 0) r.add_action()->set_int64_value(a);
      r.add_observation_space(Obs(obs));
      grpc::ClientContext ctx;
      reply.Clear();
      grpc::Status s = server_->stub().Step(&ctx, r, &reply);
      EXPECT_TRUE(s.ok()) << s.error_message();
      // Upstream never reports "no effect"; an observation-only step has no action to report.
      EXPECT_EQ(reply.action_had_no_effect(), observe_only);
    }
    return reply;
  }
  std::string Tree(int64_t id, const std::vector<int>& actions) {
    cg::StepReply r = Steps(id, actions, "loop_tree");
    return r.observation_size() ? r.observation(0).string_value() : "";
  }
  std::vector<int64_t> State(int64_t id, const std::vector<int>& actions) {
    cg::StepReply r = Steps(id, actions, "action_state");
    if (r.observation_size() != 1) return {};
    const auto& t = r.observation(0).int64_tensor();
    EXPECT_THAT(t.shape(), ElementsAre(3));
    return {t.value().begin(), t.value().end()};
  }
  static ServerProcess* server_;
};
ServerProcess* LoopToolV0Test::server_ = nullptr;

constexpr char k1024[] = "benchmark://loop_tool-cpu-v0/1024";

TEST_F(LoopToolV0Test, SpacesAreUpstreams) {
  grpc::ClientContext ctx;
  cg::GetSpacesReply spaces;
  ASSERT_TRUE(server_->stub().GetSpaces(&ctx, {}, &spaces).ok());
  const auto& state = spaces.observation_space_list(Obs("action_state"));
  EXPECT_TRUE(state.deterministic());
  EXPECT_FALSE(state.platform_dependent());
  EXPECT_THAT(state.space().int64_box().high().shape(), ElementsAre(3));
  EXPECT_THAT(state.space().int64_box().high().value(), ElementsAre(1LL << 36, 1LL << 36, 1LL << 36));
}

// upstream test_induced_remainder: toggle_mode, up, toggle_mode, up, up.
TEST_F(LoopToolV0Test, InducedRemainder) {
  EXPECT_EQ(Tree(StartOk(k1024), {kToggleMode, kUp, kToggleMode, kUp, kUp}),
            "for a in 341 r 1 : L0 cpu_parallel [thread]\n"
            " for a' in 3 : L1\n"
            "  for a'' in 1 : L2\n"
            "   %0[a] <- read()\n"
            "  for a'' in 1 : L4\n"
            "   %1[a] <- read()\n"
            "  for a'' in 1 : L6\n"
            "   %2[a] <- add(%0, %1)\n"
            "  for a'' in 1 : L8\n"
            "   %3[a] <- write(%2)\n");
}

// upstream test_thread_removal: toggle_thread.
TEST_F(LoopToolV0Test, ThreadRemoval) {
  EXPECT_EQ(Tree(StartOk(k1024), {kToggleThread}),
            "for a in 1024 : L0\n"
            " for a' in 1 : L1\n"
            "  for a'' in 1 : L2\n"
            "   %0[a] <- read()\n"
            "  for a'' in 1 : L4\n"
            "   %1[a] <- read()\n"
            "  for a'' in 1 : L6\n"
            "   %2[a] <- add(%0, %1)\n"
            "  for a'' in 1 : L8\n"
            "   %3[a] <- write(%2)\n");
}

// upstream test_thread_addition: toggle_mode, up, toggle_thread.
TEST_F(LoopToolV0Test, ThreadAddition) {
  EXPECT_THAT(Tree(StartOk(k1024), {kToggleMode, kUp, kToggleThread}),
              ::testing::StartsWith("for a in 1024 : L0 cpu_parallel [thread]\n"
                                    " for a' in 1 : L1 cpu_parallel [thread]\n"
                                    "  for a'' in 1 : L2\n"));
}

// upstream test_basic: flops after each of nine actions; the kernel runs (LoopTool's JIT).
TEST_F(LoopToolV0Test, FlopsAfterEachStep) {
  const int64_t id = StartOk(k1024);
  for (int a : {0, 1, 0, 1, 1, 0, 1, 0, 1}) {
    cg::StepReply r = Steps(id, {a}, "flops");
    ASSERT_EQ(r.observation_size(), 1);
    EXPECT_GT(r.observation(0).double_value(), 0);
  }
}

// The resize example of upstream's docstring, step by step ([cursor, size, tail] of the cursor
// loop; the loop_tree shows the whole nest).
TEST_F(LoopToolV0Test, ResizeExampleOfUpstreamsDocstring) {
  const int64_t id = StartOk(k1024);
  EXPECT_THAT(State(id, {}), ElementsAre(0, 1024, 0));
  const std::vector<int> select_next = {kToggleMode, kUp, kToggleMode};
  const std::vector<int> select_previous = {kToggleMode, kDown, kToggleMode};
  EXPECT_THAT(State(id, select_next), ElementsAre(1, 1, 0));          // 1. cursor = 1
  EXPECT_THAT(State(id, {kUp}), ElementsAre(1, 2, 0));                // 2. [512, 2, 1]
  EXPECT_THAT(State(id, {kUp}), ElementsAre(1, 3, 0));                // 3. [(341, 1), 3, 1]
  EXPECT_THAT(Tree(id, {}), HasSubstr("for a in 341 r 1 : L0"));
  EXPECT_THAT(State(id, {kUp}), ElementsAre(1, 4, 0));                // 4. [256, 4, 1]
  EXPECT_THAT(State(id, select_next), ElementsAre(2, 1, 0));
  EXPECT_THAT(State(id, {kUp}), ElementsAre(2, 2, 0));                // 5. [256, 2, 2]
  EXPECT_THAT(State(id, {kUp}), ElementsAre(2, 3, 0));                // 6. [256, (1, 1), 3]
  EXPECT_THAT(Tree(id, {}), ::testing::StartsWith("for a in 256 : L0 cpu_parallel [thread]\n"
                                                  " for a' in 1 r 1 : L1\n"
                                                  "  for a'' in 3 : L2\n"));
  EXPECT_THAT(State(id, select_previous), ElementsAre(1, 1, 1));
  EXPECT_THAT(State(id, {kDown}), ElementsAre(1, 1, 0));              // 7. [(341, 1), 1, 3]
  EXPECT_THAT(Tree(id, {}), HasSubstr("for a in 341 r 1 : L0"));
  EXPECT_THAT(State(id, select_next), ElementsAre(2, 3, 0));
  EXPECT_THAT(State(id, {kDown}), ElementsAre(2, 2, 0));              // 8. [(341, 1), (1, 1), 2]
  EXPECT_THAT(State(id, select_previous), ElementsAre(1, 1, 1));
  EXPECT_THAT(State(id, {kDown}), ElementsAre(1, 1, 0));              // 9. [512, 1, 2]
  EXPECT_THAT(Tree(id, {}), ::testing::StartsWith("for a in 512 : L0 cpu_parallel [thread]\n"
                                                  " for a' in 1 : L1\n"
                                                  "  for a'' in 2 : L2\n"));
  // Size changes at cursor 0 do nothing; select mode wraps around.
  EXPECT_THAT(State(id, {kToggleMode, kDown, kToggleMode, kUp}), ElementsAre(0, 512, 0));
  EXPECT_THAT(State(id, {kToggleMode, kDown}), ElementsAre(2, 2, 0));
}

TEST_F(LoopToolV0Test, DefaultSpaceIsSimpleAndReportedBack) {
  cg::StartSessionReply reply;
  // CompilerGym's client sends index 0 when no space was chosen: upstream's default, simple.
  ASSERT_TRUE(Start(k1024, 0, &reply).ok());
  EXPECT_EQ(reply.new_action_space().name(), "simple");
  EXPECT_THAT(reply.new_action_space().space().named_discrete().name(),
              ElementsAre("toggle_mode", "up", "down", "toggle_thread"));
  reply.Clear();
  ASSERT_TRUE(Start(k1024, Space("split"), &reply).ok());
  EXPECT_EQ(reply.new_action_space().name(), "split");
  // split is a no-op, as upstream.
  EXPECT_THAT(State(reply.session_id(), {kSplit}), ElementsAre(0, 1024, 0));
  // LoopTool's own spaces: the default needs no change; another is reported back (issue: a
  // client that keeps its default space locally would send the wrong indices).
  reply.Clear();
  ASSERT_TRUE(Start("benchmark://mm64_256_16_range-v0/mm64_64_64", 0, &reply).ok());
  EXPECT_FALSE(reply.has_new_action_space());
  reply.Clear();
  ASSERT_TRUE(Start("benchmark://mm64_256_16_range-v0/mm64_64_64", 1, &reply).ok());
  EXPECT_EQ(reply.new_action_space().name(), "loop_tune");
  // Spaces that do not apply to the benchmark are refused.
  grpc::Status s = Start(k1024, 1, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("loop_tune does not apply"));
  s = Start("benchmark://mm64_256_16_range-v0/mm64_64_64", Space("simple"), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "Action space simple does not apply to benchmark://mm64_256_16_range-v0/mm64_64_64: "
            "it is CompilerGym loop_tool-v0's, and that benchmark is served by LoopTool, whose "
            "action spaces are loop_tool, loop_tune, loop_nest");
}

TEST_F(LoopToolV0Test, BenchmarksAndErrors) {
  cg::StartSessionReply reply;
  for (const char* uri : {"benchmark://loop_tool-cpu-v0/0", "benchmark://loop_tool-cpu-v0/8388608",
                          "benchmark://loop_tool-cpu-v0/ 12", "benchmark://loop_tool-cpu-v0/x"}) {
    EXPECT_EQ(Start(uri, 0, &reply).error_code(), grpc::StatusCode::NOT_FOUND) << uri;
  }
  EXPECT_EQ(Start("benchmark://loop_tool-cuda-v0/1024", 0, &reply).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  const int64_t id = StartOk("benchmark://loop_tool-cpu-v0/1");
  cg::StepRequest r;
  r.set_session_id(id);
  r.add_action()->set_int64_value(4);  // simple has 4 actions
  cg::StepReply step;
  grpc::ClientContext ctx;
  grpc::Status s = server_->stub().Step(&ctx, r, &step);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  r.clear_action();
  r.add_observation_space(Obs("loops_tensor"));
  grpc::ClientContext ctx2;
  s = server_->stub().Step(&ctx2, r, &step);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("flops, loop_tree and action_state"));
}

// The extents of the three loops in a loop_tree text.
std::vector<std::pair<int64_t, int64_t>> Levels(const std::string& tree) {
  static const std::regex line(R"(^ *for a'* in (\d+)(?: r (\d+))? : L(\d+))");
  std::vector<std::pair<int64_t, int64_t>> out;
  size_t start = 0;
  while (start < tree.size() && out.size() < 3) {
    const size_t end = tree.find('\n', start);
    std::smatch m;
    const std::string l = tree.substr(start, end - start);
    if (std::regex_search(l, m, line)) {
      out.push_back({std::stoll(m[1]), m[2].matched ? std::stoll(m[2]) : 0});
    }
    start = end == std::string::npos ? tree.size() : end + 1;
  }
  return out;
}

TEST_F(LoopToolV0Test, RandomWalksKeepTheNestCoveringN) {
  for (int64_t n : {1, 7, 128, 1000, 65537}) {
    for (const char* space : {"simple", "split"}) {
      const int64_t id = StartOk("benchmark://loop_tool-cpu-v0/" + std::to_string(n), space);
      std::mt19937 rng(static_cast<uint32_t>(n));
      const int actions = std::string(space) == "simple" ? 4 : 5;
      for (int step = 0; step < 150; ++step) {
        const std::string tree = Tree(id, {static_cast<int>(rng() % actions)});
        auto levels = Levels(tree);
        ASSERT_EQ(levels.size(), 3u) << tree;
        const int64_t inner = levels[2].first + levels[2].second;
        const int64_t middle = levels[1].first * inner + levels[1].second;
        ASSERT_EQ(levels[0].first * middle + levels[0].second, n) << tree;
        ASSERT_EQ(levels[2].second, 0) << tree;  // no tail on the innermost loop
        if (step % 50 == 49) {
          cg::StepReply r = Steps(id, {}, "flops");
          ASSERT_EQ(r.observation_size(), 1);
          EXPECT_GT(r.observation(0).double_value(), 0) << tree;
        }
      }
    }
  }
}

}  // namespace
}  // namespace looptool

namespace looptool {
namespace {

// --upstream_spaces_first: CompilerGym's loop_tool-v0 client defaults to the first space listed
// (before its first reset, and after a fork), so upstream's come first; index 0 then means
// simple, and LoopTool's benchmarks still start in loop_tool, reported back.
TEST(UpstreamSpacesFirst, OrderAndDefaults) {
  testing::ServerProcess server({"--upstream_spaces_first"});
  ASSERT_TRUE(server.ok());
  grpc::ClientContext ctx;
  cg::GetSpacesReply spaces;
  ASSERT_TRUE(server.stub().GetSpaces(&ctx, {}, &spaces).ok());
  std::vector<std::string> names;
  for (const auto& s : spaces.action_space_list()) names.push_back(s.name());
  EXPECT_THAT(names, ElementsAre("simple", "split", "loop_tool", "loop_tune", "loop_nest"));
  // Only the action spaces move: the observation spaces keep their order (LoopTool's first).
  std::vector<std::string> observations;
  for (const auto& s : spaces.observation_space_list()) observations.push_back(s.name());
  ASSERT_EQ(observations.size(), 23u);
  EXPECT_EQ(observations.front(), "ir");
  EXPECT_EQ(observations.back(), "action_state");
  auto start = [&](const std::string& uri, int space, cg::StartSessionReply* reply) {
    cg::StartSessionRequest r;
    r.mutable_benchmark()->set_uri(uri);
    r.set_action_space(space);
    grpc::ClientContext c;
    return server.stub().StartSession(&c, r, reply);
  };
  cg::StartSessionReply reply;
  ASSERT_TRUE(start(k1024, 0, &reply).ok());
  EXPECT_FALSE(reply.has_new_action_space());  // simple, as listed first
  reply.Clear();
  ASSERT_TRUE(start("benchmark://mm64_256_16_range-v0/mm64_64_64", 0, &reply).ok());
  EXPECT_EQ(reply.new_action_space().name(), "loop_tool");
  reply.Clear();
  ASSERT_TRUE(start("benchmark://mm64_256_16_range-v0/mm64_64_64", 3, &reply).ok());
  EXPECT_EQ(reply.new_action_space().name(), "loop_tune");
  EXPECT_EQ(start(k1024, 2, &reply).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(server.Terminate(), 0);
}

}  // namespace
}  // namespace looptool
