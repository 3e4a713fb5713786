// The C++ client decodes everything the server declares: for every observation space GetSpaces
// lists (whichever engine serves it), its default observation and its value on a session of each
// engine that serves it decode into the Value kind its declared space calls for, with the
// declared shape. A space a new engine or observation adds is checked without changing this
// test. (tests/python/conformance_test.py checks the Python client the same way.)
#include <string>
#include <vector>

#include "client/cpp/connection.h"
#include "client/cpp/env.h"
#include "client/cpp/value.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/server_process.h"

namespace looptool::client {
namespace {

namespace cg = compiler_gym;
using testing::ServerProcess;

// The Value kinds a declared space admits (a string space carries text or, for graphs, an
// opaque JSON value), and the shape it declares (empty: none).
struct Expected {
  std::vector<Value::Kind> kinds;
  std::vector<int64_t> shape;
};

Expected ExpectedFor(const cg::Space& space) {
  switch (space.value_case()) {
    case cg::Space::kStringValue:
      return {{Value::Kind::kString, Value::Kind::kGraphJson}, {}};
    case cg::Space::kFloatBox:
      return {{Value::Kind::kFloats},
              {space.float_box().low().shape().begin(), space.float_box().low().shape().end()}};
    case cg::Space::kInt64Box:
      return {{Value::Kind::kInt64s},
              {space.int64_box().low().shape().begin(), space.int64_box().low().shape().end()}};
    case cg::Space::kBooleanSequence:
      return {{Value::Kind::kBools}, {}};
    case cg::Space::kByteSequence:
      return {{Value::Kind::kBytes}, {}};
    case cg::Space::kDoubleValue:
      return {{Value::Kind::kDouble}, {}};
    case cg::Space::kInt64Value:
      return {{Value::Kind::kInt64}, {}};
    default:
      ADD_FAILURE() << "a space of a kind the client does not know: " << space.DebugString();
      return {};
  }
}

void ExpectConforms(const Value& v, const Expected& e, const std::string& what) {
  EXPECT_THAT(e.kinds, ::testing::Contains(v.kind)) << what;
  if (!e.shape.empty()) {
    EXPECT_EQ(v.shape, e.shape) << what;
  }
  int64_t elements = 1;
  for (int64_t d : e.shape) elements *= d;
  if (v.kind == Value::Kind::kFloats && !e.shape.empty()) {
    EXPECT_EQ(static_cast<int64_t>(v.floats.size()), elements) << what;
  }
  if (v.kind == Value::Kind::kInt64s && !e.shape.empty()) {
    EXPECT_EQ(static_cast<int64_t>(v.integers.size()), elements) << what;
  }
  if (v.kind == Value::Kind::kBytes) {
    EXPECT_EQ(v.shape, std::vector<int64_t>{static_cast<int64_t>(v.text.size())}) << what;
  }
}

TEST(Conformance, EveryDeclaredObservationDecodesAsDeclared) {
  ServerProcess server({"--timing_budget_ms=1"});
  ASSERT_TRUE(server.ok());
  auto connection = Connection::Connect("127.0.0.1:" + std::to_string(server.port()));
  ASSERT_TRUE(connection.ok()) << connection.status();
  // A session of each engine: LoopTool's and upstream loop_tool-v0's.
  std::vector<Env> sessions;
  for (const std::string uri : {"benchmark://mm64_256_16_range-v0/mm64_64_64",
                                "benchmark://loop_tool-cpu-v0/1024"}) {
    absl::StatusOr<Env> env = Env::Start(*connection, uri, uri.find("loop_tool-cpu") ==
                                                                   std::string::npos
                                                               ? "loop_nest"
                                                               : "simple");
    ASSERT_TRUE(env.ok()) << uri << ": " << env.status();
    sessions.push_back(*std::move(env));
  }
  int observed = 0;
  for (const cg::ObservationSpace& space : (*connection)->spaces().observation_space_list()) {
    const Expected expected = ExpectedFor(space.space());
    absl::StatusOr<Value> fallback = FromEvent(space.default_observation());
    ASSERT_TRUE(fallback.ok()) << space.name() << ": " << fallback.status();
    ExpectConforms(*fallback, expected, space.name() + " (default)");
    int served = 0;
    for (Env& env : sessions) {
      absl::StatusOr<Value> v = env.Observe(space.name());
      if (absl::IsInvalidArgument(v.status())) continue;  // not this engine's
      ASSERT_TRUE(v.ok()) << space.name() << " on " << env.benchmark() << ": " << v.status();
      ExpectConforms(*v, expected, space.name() + " on " + env.benchmark());
      ++served;
      ++observed;
    }
    EXPECT_GE(served, 1) << space.name() << " is served by no engine";
  }
  // The names both engines serve (flops, loop_tree) were observed twice.
  EXPECT_GT(observed, (*connection)->spaces().observation_space_list_size());
  // The int64 tensor (upstream's action_state) in particular.
  absl::StatusOr<Value> state = sessions[1].Observe("action_state");
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->kind, Value::Kind::kInt64s);
  EXPECT_THAT(state->integers, ::testing::ElementsAre(0, 1024, 0));
}

}  // namespace
}  // namespace looptool::client
