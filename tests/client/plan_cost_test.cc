// PlanCost and a loop_set policy's "cost" entry: the forward pass by hand (normalization, ReLU
// between layers, none after the last), plan_features JSON by name (missing names count 0),
// trees blended in (the walk by hand, float comparisons at a threshold), and what is refused
// and why, in PlanCost::Create and in the policy file. (Agreement with the
// numpy forward pass on real plan_features is tests/python/loop_set_test.py's.)
#include "client/cpp/plan_cost.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
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

// Score skips each output's leading and trailing zero weights (a block-diagonal layer's): the
// same numbers as the dense pass, for rows that start, end or are all zeros, or hold them inside,
// in the first layer and in a block-diagonal one after it.
TEST(PlanCost, ZerosAtARowsEndsChangeNothing) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  const int in = 9, hidden = 6, blocks = 4;
  DenseLayer first{in, hidden, std::vector<float>(in * hidden), std::vector<float>(hidden)};
  for (float& w : first.weight) w = u(rng);
  for (float& b : first.bias) b = u(rng);
  for (int i = 0; i < 3; ++i) first.weight[0 * in + i] = 0;      // leading zeros
  for (int i = 5; i < in; ++i) first.weight[1 * in + i] = 0;     // trailing zeros
  for (int i = 0; i < in; ++i) first.weight[2 * in + i] = 0;     // none but zeros
  first.bias[2] = 0.5;                                           // (its output passes the ReLU)
  first.weight[3 * in + 4] = 0;                                  // a zero inside
  first.weight[4 * in + 0] = first.weight[4 * in + in - 1] = 0;  // both ends
  // Two 2 x 3 blocks down the diagonal: outputs 2 and 3 read columns 3..5 only.
  DenseLayer middle{hidden, blocks, std::vector<float>(hidden * blocks),
                    std::vector<float>(blocks)};
  for (int o = 0; o < blocks; ++o) {
    for (int i = 0; i < 3; ++i) middle.weight[o * hidden + (o < 2 ? 0 : 3) + i] = u(rng);
    middle.bias[o] = 0.25f + 0.5f * u(rng);
  }
  DenseLayer last{blocks, 1, std::vector<float>(blocks), {0.25f}};
  for (float& w : last.weight) w = u(rng);
  std::vector<double> mean(in), scale(in);
  for (int i = 0; i < in; ++i) {
    mean[i] = u(rng);
    scale[i] = 1.5 + u(rng);
  }
  std::vector<std::string> names;
  for (int i = 0; i < in; ++i) names.push_back(absl::StrCat("f", i));
  const PlanCost c = PlanCost::Create(names, mean, scale, {first, middle, last}).value();
  // The dense pass: y = relu(W x + b) through the hidden layers, none after the last.
  const auto dense = [](const DenseLayer& l, const std::vector<double>& x, bool relu) {
    std::vector<double> y(l.out);
    for (int o = 0; o < l.out; ++o) {
      double sum = l.bias[o];
      for (int i = 0; i < l.in; ++i) sum += double(l.weight[o * l.in + i]) * x[i];
      y[o] = relu ? std::max(sum, 0.0) : sum;
    }
    return y;
  };
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> f(in), x(in);
    for (int i = 0; i < in; ++i) {
      f[i] = 4 * u(rng);
      x[i] = (f[i] - mean[i]) / scale[i];
    }
    const double out = dense(last, dense(middle, dense(first, x, true), true), false)[0];
    EXPECT_NEAR(c.Score(f), out, 1e-12) << trial;
  }
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

// Two trees over the raw features: tree 0 splits on b at 4 (node 0: left 1, right 2), leaves
// 10 and 20; tree 1 (root 3) splits on a at 0.1f, leaves -1 and 1; and the MLP's score halved.
PlanTrees TinyTrees() {
  PlanTrees t;
  t.roots = {0, 3};
  t.feature = {1, -1, -1, 0, -1, -1};
  t.left = {1, -1, -1, 4, -1, -1};
  t.right = {2, -1, -1, 5, -1, -1};
  t.threshold = {4, 0, 0, 0.1f, 0, 0};
  t.value = {0, 10, 20, 0, -1, 1};
  return t;
}

TEST(PlanCost, TreesAddTheirLeavesToTheWeightedMlp) {
  const PlanCost c =
      PlanCost::Create({"a", "b"}, {1, 0}, {2, 4}, TinyLayers(), 0, TinyTrees(), 0.5).value();
  // (5, 4): MLP 6.5 -> 3.25; b = 4 is not < 4: right, 20; a = 5 >= 0.1: right, 1.
  EXPECT_DOUBLE_EQ(c.Score({5, 4}), 3.25 + 20 + 1);
  // (1, 8): MLP 0.5 -> 0.25; 20; a = 1: 1.
  EXPECT_DOUBLE_EQ(c.Score({1, 8}), 0.25 + 20 + 1);
  // a = 0.1 (a double just below 0.1f) compares as a float: equal, not less: right.
  // a = 0.09: left (-1); b = 3.9: left (10). MLP: x = (-0.455, 0.975): relu(-1.43, -1.91) = 0.
  EXPECT_DOUBLE_EQ(c.Score({0.1, 3.9}), 0.25 + 10 + 1);
  EXPECT_DOUBLE_EQ(c.Score({0.09, 3.9}), 0.25 + 10 - 1);
  // Without trees and with weight 1: the MLP alone, as before.
  EXPECT_DOUBLE_EQ(
      PlanCost::Create({"a", "b"}, {1, 0}, {2, 4}, TinyLayers()).value().Score({5, 4}), 6.5);
}

TEST(PlanCost, RefusesTreesThatDoNotWalk) {
  const auto error = [](const std::function<void(PlanTrees&)>& change, double mlp_weight = 1) {
    PlanTrees t = TinyTrees();
    change(t);
    absl::StatusOr<PlanCost> c =
        PlanCost::Create({"a", "b"}, {1, 0}, {2, 4}, TinyLayers(), 0, t, mlp_weight);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(c.status().message());
  };
  EXPECT_THAT(error([](PlanTrees& t) { t.left[0] = 0; }), HasSubstr("node 0's"));  // a loop
  EXPECT_THAT(error([](PlanTrees& t) { t.right[3] = 6; }), HasSubstr("node 3's"));
  EXPECT_THAT(error([](PlanTrees& t) { t.feature[0] = 2; }), HasSubstr("node 0's"));
  EXPECT_THAT(error([](PlanTrees& t) { t.left[1] = 2; }), HasSubstr("node 1's"));  // a leaf
  EXPECT_THAT(error([](PlanTrees& t) { t.value[2] = NAN; }), HasSubstr("node 2's"));
  EXPECT_THAT(error([](PlanTrees& t) { t.roots = {0, 6}; }), HasSubstr("a root is not a node"));
  EXPECT_THAT(error([](PlanTrees& t) { t.roots.clear(); }), HasSubstr("1..nodes roots"));
  EXPECT_THAT(error([](PlanTrees& t) { t.value.pop_back(); }), HasSubstr("per node"));
  EXPECT_THAT(error([](PlanTrees&) {}, -0.5), HasSubstr("mlp_weight must be a number >= 0"));
}

json Floats32(const std::vector<int>& v) { return B64(std::vector<float>(v.begin(), v.end())); }

TEST(PlanCost, APolicyFileCarriesTrees) {
  const PlanTrees t = TinyTrees();
  json c = TinyCost();
  c["mlp_weight"] = 0.5;
  c["trees"] = {{"nodes", 6},
                {"trees", 2},
                {"roots", Floats32(t.roots)},
                {"feature", Floats32(t.feature)},
                {"left", Floats32(t.left)},
                {"right", Floats32(t.right)},
                {"threshold", B64(t.threshold)},
                {"value", B64(t.value)}};
  json j = json::parse(LoopSetPolicyJson());
  j["cost"] = c;
  const Policy p = Policy::Parse(j.dump()).value();
  EXPECT_DOUBLE_EQ(p.cost_model()->Score({5, 4}), 3.25 + 20 + 1);
  EXPECT_DOUBLE_EQ(p.cost_model()->Score({0.09, 3.9}), 0.25 + 10 - 1);
  const auto error = [&](const char* key, const json& value) {
    json bad = j;
    bad["cost"]["trees"][key] = value;
    return std::string(Policy::Parse(bad.dump()).status().message());
  };
  EXPECT_THAT(error("nodes", 0), HasSubstr("0 < trees <= nodes"));
  EXPECT_THAT(error("trees", 7), HasSubstr("0 < trees <= nodes"));
  EXPECT_THAT(error("left", B64({1, -1, -1, 4.5f, -1, -1})),
              HasSubstr("cost.trees.left holds a number that is not an index"));
  EXPECT_THAT(error("value", B64({1, 2})), HasSubstr("cost.trees.value holds 2 numbers, not 6"));
  EXPECT_THAT(error("right", Floats32({2, -1, -1, 3, -1, -1})), HasSubstr("node 3's"));
  json bad = j;
  bad["cost"]["mlp_weight"] = "1";
  EXPECT_THAT(std::string(Policy::Parse(bad.dump()).status().message()),
              HasSubstr("cost.mlp_weight is not a number"));
}

}  // namespace
}  // namespace looptool::client
