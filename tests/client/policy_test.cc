// Policy: the file format (what parses, what is refused and why), the forward pass on a
// hand-computed network (log2p1, ReLU trunk, dueling and actor-critic heads), masked action
// choice with ties, and the committed default policy. (Agreement with PyTorch on real
// observations is tests/python/rl_test.py's, which runs policy_scores.)
#include "client/cpp/policy.h"

#include <cstring>

#include "absl/strings/escaping.h"
#include "client/cpp/built_in_policies.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/policy_json.h"
#include "nlohmann/json.hpp"

namespace looptool::client {
namespace {

using nlohmann::json;
using testing::B64;
using testing::Layer;
using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;

// trunk 2 -> 2 (W = [[1, 0], [0, -1]], b = [0, 0.5]), head 2 -> 3, value 2 -> 1.
json Tiny(const std::string& kind) {
  return {{"format", "looptool-policy"},
          {"version", 1},
          {"kind", kind},
          {"action_space", "tiny"},
          {"observation_space", "loops_tensor"},
          {"input_size", 2},
          {"num_actions", 3},
          {"preprocess", "log2p1"},
          {"trunk", {Layer(2, 2, {1, 0, 0, -1}, {0, 0.5})}},
          {"head", Layer(2, 3, {1, 0, 0, 1, 1, 1}, {0, 0, 0})},
          {"value", Layer(2, 1, {2, 0}, {1})},
          {"meta", {{"seed", 7}}}};
}

TEST(Policy, DuelingForwardPassByHand) {
  absl::StatusOr<Policy> p = Policy::Parse(Tiny("dueling_q").dump());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->kind(), Policy::Kind::kDuelingQ);
  EXPECT_EQ(p->input_size(), 2);
  EXPECT_EQ(p->num_actions(), 3);
  EXPECT_EQ(p->action_space(), "tiny");
  EXPECT_EQ(p->meta(), R"({"seed":7})");
  // x = [3, 1] -> log2(1 + x) = [2, 1] -> relu([2, -1 + 0.5]) = [2, 0]; A = [2, 0, 2], mean 4/3;
  // V = 2 * 2 + 1 = 5; Q = V + A - mean(A).
  EXPECT_THAT(p->Scores(std::vector<float>{3, 1}),
              ElementsAre(FloatNear(5 + 2 - 4.0 / 3, 1e-6), FloatNear(5 - 4.0 / 3, 1e-6),
                          FloatNear(5 + 2 - 4.0 / 3, 1e-6)));
  // Negative inputs count as 0: log2(1 + 0) = 0 -> h = relu([0, 0.5]) = [0, 0.5].
  EXPECT_THAT(p->Scores(std::vector<float>{-5, 0}),
              ElementsAre(FloatNear(1 + 0 - 1.0 / 3, 1e-6), FloatNear(1 + 0.5 - 1.0 / 3, 1e-6),
                          FloatNear(1 + 0.5 - 1.0 / 3, 1e-6)));
}

TEST(Policy, SketchValueScoresAreTheStatesValue) {
  json j = Tiny("sketch_value");
  j["num_actions"] = 1;
  j["head"] = Layer(2, 1, {1, -2}, {0.25});
  absl::StatusOr<Policy> p = Policy::Parse(j.dump());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->kind(), Policy::Kind::kSketchValue);
  // h = [2, 0] (above); value = 1 * 2 - 2 * 0 + 0.25. The value layer is not used.
  EXPECT_THAT(p->Scores(std::vector<float>{3, 1}), ElementsAre(FloatNear(2.25, 1e-6)));
  // One output only: a sketch_value policy scores states, not actions.
  EXPECT_THAT(Policy::Parse(Tiny("sketch_value").dump()).status().message(),
              HasSubstr("a sketch_value policy has one output"));
}

TEST(Policy, ActorCriticScoresAreLogits) {
  absl::StatusOr<Policy> p = Policy::Parse(Tiny("actor_critic").dump());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->Scores(std::vector<float>{3, 1}),
              ElementsAre(FloatNear(2, 1e-6), FloatNear(0, 1e-6), FloatNear(2, 1e-6)));
}

TEST(Policy, ActTakesTheBestAllowedActionLowestIndexOnTies) {
  absl::StatusOr<Policy> p = Policy::Parse(Tiny("dueling_q").dump());
  ASSERT_TRUE(p.ok()) << p.status();
  const std::vector<float> x = {3, 1};  // Q = [5.67, 3.67, 5.67]
  EXPECT_EQ(p->Act(x, {true, true, true}), 0);
  EXPECT_EQ(p->Act(x, {false, true, true}), 2);
  EXPECT_EQ(p->Act(x, {false, true, false}), 1);
  EXPECT_EQ(p->Act(x, {false, false, false}), -1);
  EXPECT_THAT(RankActions({1, 3, 3, 2}, {true, true, true, false}, 4), ElementsAre(1, 2, 0));
  // A loop_set policy's stop score (index num_actions) is never ranked, though a longer mask of
  // the session's space (actions appended after the policy) allows that index.
  EXPECT_THAT(RankActions({1, 3, 9}, {true, true, true, true}, 2), ElementsAre(1, 0));
}

TEST(Policy, RefusesWhatIsNotAPolicyAndSaysWhy) {
  const auto error = [](const json& j) {
    absl::StatusOr<Policy> p = Policy::Parse(j.dump());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(p.status().message());
  };
  EXPECT_THAT(std::string(Policy::Parse("{not json").status().message()), HasSubstr("not a JSON"));
  json j = Tiny("dueling_q");
  j["format"] = "other";
  EXPECT_THAT(error(j), HasSubstr("format is not looptool-policy"));
  j = Tiny("dueling_q");
  j["version"] = 2;
  EXPECT_THAT(error(j), HasSubstr("version is not 1"));
  j = Tiny("softmax");
  EXPECT_THAT(error(j), HasSubstr("unknown kind 'softmax'"));
  j = Tiny("dueling_q");
  j["preprocess"] = "none";
  EXPECT_THAT(error(j), HasSubstr("preprocess is not log2p1"));
  j = Tiny("dueling_q");
  j["head"] = Layer(3, 3, std::vector<float>(9, 0), {0, 0, 0});
  EXPECT_THAT(error(j), HasSubstr("do not match the trunk"));
  j = Tiny("dueling_q");
  j["trunk"][0]["weight"] = B64({1, 2, 3});
  EXPECT_THAT(error(j), HasSubstr("trunk[0].weight holds 3 numbers, not 4"));
  j = Tiny("dueling_q");
  j["trunk"][0]["bias"] = "***";
  EXPECT_THAT(error(j), HasSubstr("trunk[0].bias is not valid base64"));
  j = Tiny("dueling_q");
  j["num_actions"] = 4;
  EXPECT_THAT(error(j), HasSubstr("disagree with the layers"));
  // Fields of the wrong JSON type are refused, not thrown.
  j = Tiny("dueling_q");
  j["format"] = 5;
  EXPECT_THAT(error(j), HasSubstr("format is not looptool-policy"));
  j = Tiny("dueling_q");
  j["input_size"] = "320";
  EXPECT_THAT(error(j), HasSubstr("disagree with the layers"));
  j = Tiny("dueling_q");
  j["trunk"][0]["in"] = 1e12;
  EXPECT_THAT(error(j), HasSubstr("trunk[0] has no in/out sizes in 1..65536"));
  j = Tiny("dueling_q");
  j["head"] = "a string";
  EXPECT_THAT(error(j), HasSubstr("head is not an object"));
  j = Tiny("dueling_q");
  j["action_space"] = {1, 2};
  EXPECT_EQ(Policy::Parse(j.dump()).value().action_space(), "");
  EXPECT_EQ(Policy::Load("/nonexistent/policy.json").status().code(),
            absl::StatusCode::kNotFound);
}

json LoopSetLayers(float stop_more) {
  return testing::NetworkLayers(json::parse(LoopSetPolicyJson()), stop_more);
}

// A loop_set policy's "members": networks of the same file (layers only, the file's other
// fields theirs too), each scoring as that file with its layers would; the policy's own scores
// are its own network's. Anything else there is refused, saying which member and why.
TEST(Policy, ALoopSetPolicysMembersAreNetworksOfTheSameFile) {
  json j = json::parse(LoopSetPolicyJson());
  j.erase("cost");
  j.erase("members");
  const Policy alone = *Policy::Parse(j.dump());
  EXPECT_TRUE(alone.members().empty());
  j["members"] = json::array({LoopSetLayers(0), LoopSetLayers(5)});
  absl::StatusOr<Policy> p = Policy::Parse(j.dump());
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->members().size(), 2u);
  std::vector<float> obs(2 * alone.input_size(), 0.0f);
  obs[0] = obs[alone.input_size()] = 1;  // two real rows
  obs[1] = 0.5f;
  const std::vector<float> own = alone.Scores(obs);
  EXPECT_EQ(p->Scores(obs), own);
  EXPECT_EQ(p->members()[0].Scores(obs), own);
  const std::vector<float> raised = p->members()[1].Scores(obs);
  EXPECT_EQ(std::vector<float>(raised.begin(), raised.end() - 1),
            std::vector<float>(own.begin(), own.end() - 1));
  EXPECT_NEAR(raised.back(), own.back() + 5, 1e-4);
  EXPECT_TRUE(p->members()[0].members().empty());
  EXPECT_EQ(p->members()[0].cost_model(), nullptr);

  const auto refused = [&](const json& members) {
    json bad = j;
    bad["members"] = members;
    return std::string(Policy::Parse(bad.dump()).status().message());
  };
  EXPECT_EQ(refused(json::array({LoopSetLayers(0), LoopSetLayers(0), LoopSetLayers(0),
                                 LoopSetLayers(0), LoopSetLayers(0), LoopSetLayers(0),
                                 LoopSetLayers(0), LoopSetLayers(0)})),
            "not a LoopTool policy file: members is not a list of at most 7 networks");
  EXPECT_EQ(refused(LoopSetLayers(0)),
            "not a LoopTool policy file: members is not a list of at most 7 networks");
  json with_cost = LoopSetLayers(0);
  with_cost["cost"] = json::object();
  EXPECT_EQ(refused(json::array({with_cost})),
            "not a LoopTool policy file: members[0] is not a network (layers only)");
  json headless = LoopSetLayers(0);
  headless.erase("head");
  EXPECT_EQ(refused(json::array({LoopSetLayers(0), headless})),
            "not a LoopTool policy file: members[1]: head is not an object");
  json narrow = LoopSetLayers(0);
  narrow["trunk"][0] = Layer(2, narrow["trunk"][0]["out"].get<int>(),
                             std::vector<float>(2 * narrow["trunk"][0]["out"].get<int>()),
                             std::vector<float>(narrow["trunk"][0]["out"].get<int>()));
  EXPECT_EQ(refused(json::array({narrow})),
            "not a LoopTool policy file: members[0]: input_size or num_actions disagree with "
            "the layers");
}

TEST(Policy, TheDefaultIsASketchValuePolicyOverLoopNestsSketches) {
  const Policy& p = Policy::Default();
  EXPECT_EQ(p.kind(), Policy::Kind::kSketchValue);
  EXPECT_EQ(p.action_space(), "loop_nest");
  EXPECT_EQ(p.observation_space(), "loops_tensor");
  EXPECT_EQ(p.input_size(), 320);
  EXPECT_EQ(p.num_actions(), 1);
  EXPECT_THAT(p.meta(), HasSubstr("\"command\""));
  EXPECT_THAT(p.meta(), HasSubstr("sketch-value"));
  // By name, as `looptool tune --policy=NAME` finds them.
  EXPECT_EQ(Policy::Find("sketch_value")->meta(), p.meta());
  EXPECT_EQ(Policy::Find("looptune_dqn")->meta(), Policy::LoopTuneDqn().meta());
  EXPECT_EQ(Policy::Find("no_such_policy").status().code(), absl::StatusCode::kNotFound);
}

// The built-in loop_set policies: one learned from records timed at AVX-512 and one from records
// timed at AVX2, the same architecture over the same space; LoopSetFor picks by the vectors'
// width, and `--policy=loop_set` by name is the AVX-512 file (the search picks per server).
TEST(Policy, LoopSetForPicksThePolicyLearnedAtTheIsasVectors) {
  const Policy& avx512 = Policy::LoopSet();
  const Policy& avx2 = Policy::LoopSetFor("avx2");
  EXPECT_EQ(&Policy::LoopSetFor("avx512"), &avx512);
  EXPECT_EQ(&Policy::LoopSetFor("sse"), &avx2);
  EXPECT_NE(&avx2, &avx512);
  for (const Policy* p : {&avx512, &avx2}) {
    EXPECT_EQ(p->kind(), Policy::Kind::kLoopSet);
    EXPECT_EQ(p->action_space(), "loop_nest");
    EXPECT_EQ(p->observation_space(), "loop_features");
    EXPECT_EQ(p->input_size(), 38);
    EXPECT_EQ(p->num_actions(), 560);
    EXPECT_NE(p->cost_model(), nullptr);
  }
  EXPECT_THAT(avx512.meta(), HasSubstr("\"records_isa\":\"avx512\""));
  EXPECT_THAT(avx2.meta(), HasSubstr("\"records_isa\":\"avx2\""));
  EXPECT_EQ(Policy::Find("loop_set")->meta(), avx512.meta());
}

TEST(Policy, LoopTuneDqnIsADuelingQPolicyOverLoopTunesSpace) {
  const Policy& p = Policy::LoopTuneDqn();
  EXPECT_EQ(p.kind(), Policy::Kind::kDuelingQ);
  EXPECT_EQ(p.action_space(), "loop_tune");
  EXPECT_EQ(p.observation_space(), "loops_tensor");
  EXPECT_EQ(p.input_size(), 320);  // 16 loops x 20 features, the server's default --max_loops
  EXPECT_EQ(p.num_actions(), 7);
  EXPECT_THAT(p.meta(), HasSubstr("\"command\""));
}

}  // namespace
}  // namespace looptool::client
