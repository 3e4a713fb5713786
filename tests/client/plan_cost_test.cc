// PlanCost and a loop_set policy's "cost" entry: the forward pass by hand (normalization, ReLU
// between layers, none after the last), plan_features JSON by name (missing names count 0),
// and what is refused and why, in PlanCost::Create and in the policy file. (Agreement with the
// numpy forward pass on real plan_features is tests/python/loop_set_test.py's.)
#include "client/cpp/plan_cost.h"

#include <cstring>

#include "absl/strings/escaping.h"
#include "client/cpp/built_in_policies.h"
#include "client/cpp/policy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/policy_json.h"
#include "nlohmann/json.hpp"

namespace looptool::client {
namespace {

using nlohmann::json;
using testing::B64;
using testing::Layer;
using ::testing::DoubleNear;
using ::testing::HasSubstr;

// 2 features -> 2 (W = [[1, -1], [2, 0]], b = [0, -1]) -> ReLU -> 1 (W = [3, 1], b = 0.5).
std::vector<DenseLayer> TinyLayers() {
  return {DenseLayer{2, 2, {1, -1, 2, 0}, {0, -1}}, DenseLayer{2, 1, {3, 1}, {0.5}}};
}

TEST(PlanCost, ForwardPassByHand) {
  const PlanCost c =
      PlanCost::Create({"a", "b"}, {1, 0}, {2, 4}, TinyLayers()).value();
  // x = ((5 - 1) / 2, (4 - 0) / 4) = (2, 1); hidden = relu(2 - 1, 4 - 1) = (1, 3);
  // out = 3 * 1 + 1 * 3 + 0.5 = 6.5.
  EXPECT_DOUBLE_EQ(c.Score({5, 4}), 6.5);
  // x = (0, 2): hidden = relu(-2, -1) = (0, 0): out = 0.5 (no ReLU after the last layer).
  EXPECT_DOUBLE_EQ(c.Score({1, 8}), 0.5);
  EXPECT_THAT(c.ScoreJson(R"({"b": 4, "a": 5, "other": 9})").value(), DoubleNear(6.5, 1e-12));
  // "b" missing counts 0: x = (2, 0), hidden = (2, 3), out = 6 + 3 + 0.5.
  EXPECT_DOUBLE_EQ(c.ScoreJson(R"({"a": 5})").value(), 9.5);
  EXPECT_THAT(std::string(c.ScoreJson("[1, 2]").status().message()),
              HasSubstr("not a JSON object"));
  EXPECT_THAT(std::string(c.ScoreJson(R"({"a": "5"})").status().message()),
              HasSubstr("a is not a number"));
  EXPECT_THAT(std::string(c.ScoreJson("{").status().message()), HasSubstr("not a JSON object"));
}

TEST(PlanCost, RefusesWhatDoesNotChain) {
  const auto error = [](std::vector<std::string> names, std::vector<double> mean,
                        std::vector<double> scale, std::vector<DenseLayer> layers) {
    absl::StatusOr<PlanCost> c = PlanCost::Create(names, mean, scale, layers);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(c.status().message());
  };
  EXPECT_THAT(error({}, {}, {}, TinyLayers()), HasSubstr("non-empty"));
  EXPECT_THAT(error({"a", "b"}, {0}, {1, 1}, TinyLayers()), HasSubstr("of one length"));
  EXPECT_THAT(error({"a", "b"}, {0, 0}, {1, 0}, TinyLayers()), HasSubstr("positive"));
  EXPECT_THAT(error({"a"}, {0}, {1}, TinyLayers()), HasSubstr("do not chain"));
  std::vector<DenseLayer> two_out = {DenseLayer{2, 2, {1, 0, 0, 1}, {0, 0}}};
  EXPECT_THAT(error({"a", "b"}, {0, 0}, {1, 1}, two_out), HasSubstr("one number"));
  std::vector<DenseLayer> short_weight = {DenseLayer{2, 1, {1}, {0}}};
  EXPECT_THAT(error({"a", "b"}, {0, 0}, {1, 1}, short_weight), HasSubstr("do not chain"));
  EXPECT_THAT(error({"a", "b"}, {0, 0}, {1, 1}, {}), HasSubstr("one number"));
}

json TinyCost() {
  return {{"observation_space", "plan_features"},
          {"names", {"a", "b"}},
          {"mean", B64({1, 0})},
          {"scale", B64({2, 4})},
          {"layers", {Layer(2, 2, {1, -1, 2, 0}, {0, -1}), Layer(2, 1, {3, 1}, {0.5})}}};
}

TEST(PlanCost, ALoopSetPolicyFileCarriesOne) {
  json j = json::parse(LoopSetPolicyJson());
  j.erase("cost");
  EXPECT_EQ(Policy::Parse(j.dump()).value().cost_model(), nullptr);
  j["cost"] = TinyCost();
  EXPECT_EQ(Policy::Parse(j.dump()).value().cost_model()->loss_weight(), 0);
  j["cost"]["loss_weight"] = 0.5;
  const Policy p = Policy::Parse(j.dump()).value();
  ASSERT_NE(p.cost_model(), nullptr);
  EXPECT_EQ(p.cost_model()->loss_weight(), 0.5);
  EXPECT_THAT(p.cost_model()->names(), ::testing::ElementsAre("a", "b"));
  EXPECT_DOUBLE_EQ(p.cost_model()->Score({5, 4}), 6.5);
  // A copy of the policy carries its own.
  const Policy copy = p;
  EXPECT_DOUBLE_EQ(copy.cost_model()->Score({1, 8}), 0.5);
}

// A block-diagonal layer stored as its blocks (plan_cost.ensemble's hidden layers) is the dense
// layer with zeros outside them; blocks that do not tile the layer are refused, saying so.
TEST(PlanCost, ABlockDiagonalLayerStoredAsItsBlocksIsTheDenseOne) {
  const auto cost_with = [](const json& hidden) {
    json c = TinyCost();
    c["layers"] = {Layer(2, 3, {1, -1, 2, 0, -1, 3}, {0, -1, 0.5}), hidden,
                   Layer(3, 1, {3, 1, -2}, {0.5})};
    json j = json::parse(LoopSetPolicyJson());
    j["cost"] = c;
    return Policy::Parse(j.dump());
  };
  // [[2, 0, 0], [0, 1, -1], [0, 0.5, 3]]: blocks 1 x 1 and 2 x 2.
  const Policy dense =
      cost_with(Layer(3, 3, {2, 0, 0, 0, 1, -1, 0, 0.5, 3}, {0.25, 0, -1})).value();
  json blocks = Layer(3, 3, {2, 1, -1, 0.5, 3}, {0.25, 0, -1});
  blocks["blocks"] = {{1, 1}, {2, 2}};
  const Policy compact = cost_with(blocks).value();
  for (const std::vector<double>& x : {std::vector<double>{5, 4}, {1, 8}, {-3, 2}, {7, -6}}) {
    EXPECT_DOUBLE_EQ(compact.cost_model()->Score(x), dense.cost_model()->Score(x));
  }
  EXPECT_NE(dense.cost_model()->Score({5, 4}), dense.cost_model()->Score({-3, 2}));
  const auto error = [&](const json& b, int numbers = 5) {
    json l = Layer(3, 3, std::vector<float>(numbers, 1.0f), {0, 0, 0});
    l["blocks"] = b;
    return std::string(cost_with(l).status().message());
  };
  EXPECT_THAT(error({{1, 1}, {2, 1}}), HasSubstr("cost.layers[1].blocks do not add up to 3 x 3"));
  EXPECT_THAT(error({{1, 1}, {2, 0}}), HasSubstr("pairs of positive integers"));
  EXPECT_THAT(error({{1, 1}, {2}}), HasSubstr("pairs of positive integers"));
  EXPECT_THAT(error("1x1"), HasSubstr("pairs of positive integers"));
  EXPECT_THAT(error({{1, 1}, {2, 2}}, 9),
              HasSubstr("cost.layers[1].weight holds 9 numbers, not 5"));
  // A small file for a 16 GiB layer is refused before anything is allocated.
  json huge = Layer(65536, 65536, {}, {});
  huge["blocks"] = json::array();
  for (int i = 0; i < 65536; ++i) huge["blocks"].push_back({1, 1});
  EXPECT_THAT(std::string(cost_with(huge).status().message()),
              HasSubstr("cost.layers[1] has more than 16777216 weights"));
}

TEST(PlanCost, APolicyFileWithABadOneIsRefusedSayingWhy) {
  const auto error = [](const json& cost) {
    json j = json::parse(LoopSetPolicyJson());
    j["cost"] = cost;
    absl::StatusOr<Policy> p = Policy::Parse(j.dump());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(p.status().message());
  };
  EXPECT_THAT(error("a string"), HasSubstr("cost is not an object"));
  json c = TinyCost();
  c["observation_space"] = "loops_tensor";
  EXPECT_THAT(error(c), HasSubstr("observation_space plan_features"));
  c = TinyCost();
  c["names"] = {"a", 2};
  EXPECT_THAT(error(c), HasSubstr("cost.names holds a non-string"));
  c = TinyCost();
  c["mean"] = B64({1, 2, 3});
  EXPECT_THAT(error(c), HasSubstr("cost.mean holds 3 numbers, not 2"));
  c = TinyCost();
  c["scale"] = B64({1, -1});
  EXPECT_THAT(error(c), HasSubstr("every scale must be positive"));
  c = TinyCost();
  c["layers"][1] = Layer(3, 1, {1, 1, 1}, {0});
  EXPECT_THAT(error(c), HasSubstr("layer sizes do not chain"));
  c = TinyCost();
  c["layers"][1]["weight"] = "***";
  EXPECT_THAT(error(c), HasSubstr("cost.layers[1].weight is not valid base64"));
  c = TinyCost();
  c["loss_weight"] = "0.5";
  EXPECT_THAT(error(c), HasSubstr("cost.loss_weight is not a number"));
  c = TinyCost();
  c["loss_weight"] = -1;
  EXPECT_THAT(error(c), HasSubstr("loss_weight must be a number >= 0"));
  c = TinyCost();
  c["layers"] = json::array();
  EXPECT_THAT(error(c), HasSubstr("cost is not an object"));
}

}  // namespace
}  // namespace looptool::client
