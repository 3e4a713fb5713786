#include "client/cpp/policy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <numeric>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/cpp/built_in_policies.h"
#include "nlohmann/json.hpp"
#include "util/status_macros.h"

namespace looptool::client {
namespace {

using Json = nlohmann::json;

// A loop_set policy's layout (client/python/looptool/rl/loop_set.py): loop_nest's 16 levels, per
// row 16 tile sizes then unroll, vectorize, merge; the flat space's 560 actions, then stop.
constexpr int kLevels = 16;
constexpr int kTileSizes = 16;
constexpr int kLoopSetPerRow = kTileSizes + 3;
constexpr int kLoopSetActions = 560;
constexpr float kAbsent = -1e9f;  // the score of an action on a level the observation lacks
constexpr int64_t kMaxLayerWeights = int64_t{1} << 24;  // a layer's weights at most (64 MiB)
constexpr size_t kMaxMembers = 7;  // a loop_set policy's other networks at most

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("not a LoopTool policy file: ", what));
}

// Little-endian float32s from base64; `count` of them.
absl::StatusOr<std::vector<float>> Floats(const Json& text, size_t count, absl::string_view what) {
  if (!text.is_string()) return Bad(absl::StrCat(what, " is not a base64 string"));
  std::string bytes;
  if (!absl::Base64Unescape(text.get<std::string>(), &bytes)) {
    return Bad(absl::StrCat(what, " is not valid base64"));
  }
  if (bytes.size() != count * sizeof(float)) {
    return Bad(absl::StrCat(what, " holds ", bytes.size() / sizeof(float), " numbers, not ",
                            count));
  }
  std::vector<float> out(count);
  std::memcpy(out.data(), bytes.data(), bytes.size());  // x86-64 is little-endian
  return out;
}

// Integers kept as float32 (exact below 2^24; a cost model's tree node indices).
absl::StatusOr<std::vector<int>> Ints(const Json& text, size_t count, absl::string_view what) {
  ASSIGN_OR_RETURN(const std::vector<float> f, Floats(text, count, what));
  std::vector<int> out(count);
  for (size_t i = 0; i < count; ++i) {
    if (!(std::abs(f[i]) < float{1 << 24}) || f[i] != std::round(f[i])) {
      return Bad(absl::StrCat(what, " holds a number that is not an index"));
    }
    out[i] = static_cast<int>(f[i]);
  }
  return out;
}

// j[key] when it is a string, else "" (nlohmann's value() throws on a type mismatch).
std::string Text(const Json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

// j[key] when it is an integer in int range, else -1.
int64_t Integer(const Json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number_integer()) return -1;
  const int64_t v = j[key].get<int64_t>();
  return v >= 0 && v <= (int64_t{1} << 30) ? v : -1;
}

}  // namespace

absl::StatusOr<Policy> Policy::Parse(absl::string_view text) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad("not a JSON object");
  if (Text(j, "format") != "looptool-policy") return Bad("format is not looptool-policy");
  if (Integer(j, "version") != 1) return Bad("version is not 1");
  Policy p;
  const std::string kind = Text(j, "kind");
  if (kind == "dueling_q") {
    p.kind_ = Kind::kDuelingQ;
  } else if (kind == "actor_critic") {
    p.kind_ = Kind::kActorCritic;
  } else if (kind == "sketch_value") {
    p.kind_ = Kind::kSketchValue;
  } else if (kind == "loop_set") {
    p.kind_ = Kind::kLoopSet;
  } else {
    return Bad(absl::StrCat("unknown kind '", kind, "'"));
  }
  const char* preprocess = p.kind_ == Kind::kLoopSet ? "none" : "log2p1";
  if (Text(j, "preprocess") != preprocess) {
    return Bad(absl::StrCat("preprocess is not ", preprocess, " (a ", kind, " policy)"));
  }
  p.action_space_ = Text(j, "action_space");
  p.observation_space_ = Text(j, "observation_space");
  p.meta_ = j.contains("meta") ? j["meta"].dump() : "{}";
  const auto layer = [](const Json& spec, absl::string_view name) -> absl::StatusOr<Layer> {
    if (!spec.is_object()) return Bad(absl::StrCat(name, " is not an object"));
    const int64_t in = Integer(spec, "in"), out = Integer(spec, "out");
    if (in < 1 || out < 1 || in > 1 << 16 || out > 1 << 16) {
      return Bad(absl::StrCat(name, " has no in/out sizes in 1..65536"));
    }
    if (in * out > kMaxLayerWeights) {  // (a layer in blocks holds fewer numbers than that)
      return Bad(absl::StrCat(name, " has more than ", kMaxLayerWeights, " weights"));
    }
    Layer l;
    l.in = static_cast<int>(in);
    l.out = static_cast<int>(out);
    const Json none;
    const Json& weight = spec.contains("weight") ? spec["weight"] : none;
    if (!spec.contains("blocks")) {
      ASSIGN_OR_RETURN(l.weight,
                       Floats(weight, size_t(l.in) * l.out, absl::StrCat(name, ".weight")));
    } else {
      // Block-diagonal: [[out, in], ...] down the diagonal, only their numbers stored.
      const Json& blocks = spec["blocks"];
      std::vector<std::pair<int64_t, int64_t>> sizes;
      int64_t rows = 0, cols = 0, count = 0;
      for (const Json& b : blocks.is_array() ? blocks : Json::array()) {
        if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() ||
            !b[1].is_number_integer() || b[0].get<int64_t>() < 1 || b[1].get<int64_t>() < 1 ||
            b[0].get<int64_t>() > l.out || b[1].get<int64_t>() > l.in) {
          sizes.clear();
          break;
        }
        sizes.emplace_back(b[0].get<int64_t>(), b[1].get<int64_t>());
        rows += sizes.back().first;
        cols += sizes.back().second;
        count += sizes.back().first * sizes.back().second;
        if (rows > l.out || cols > l.in) break;  // refused below
      }
      if (sizes.empty()) {
        return Bad(absl::StrCat(name, ".blocks must be a list of [out, in] pairs of positive "
                                "integers"));
      }
      if (rows != l.out || cols != l.in) {
        return Bad(absl::StrCat(name, ".blocks do not add up to ", l.out, " x ", l.in));
      }
      ASSIGN_OR_RETURN(std::vector<float> flat,
                       Floats(weight, size_t(count), absl::StrCat(name, ".weight")));
      l.weight.assign(size_t(l.in) * l.out, 0.0f);
      int64_t r = 0, c = 0, k = 0;
      for (const auto& [o, i] : sizes) {
        for (int64_t y = 0; y < o; ++y) {
          std::copy_n(&flat[k + y * i], i, &l.weight[size_t(r + y) * l.in + c]);
        }
        r += o;
        c += i;
        k += o * i;
      }
    }
    ASSIGN_OR_RETURN(l.bias, Floats(spec.contains("bias") ? spec["bias"] : none, l.out,
                                    absl::StrCat(name, ".bias")));
    return l;
  };
  if (!j.contains("trunk") || !j["trunk"].is_array() || j["trunk"].empty()) {
    return Bad("no trunk layers");
  }
  for (size_t i = 0; i < j["trunk"].size(); ++i) {
    ASSIGN_OR_RETURN(Layer l, layer(j["trunk"][i], absl::StrCat("trunk[", i, "]")));
    if (!p.layers_.empty() && l.in != p.layers_.back().out) return Bad("trunk sizes do not chain");
    p.layers_.push_back(std::move(l));
  }
  const Json none;
  const auto named = [&](const char* name) {
    return layer(j.contains(name) ? j[name] : none, name);
  };
  ASSIGN_OR_RETURN(p.head_, named("head"));
  ASSIGN_OR_RETURN(p.value_, named("value"));
  if (p.kind_ == Kind::kLoopSet) {
    ASSIGN_OR_RETURN(const Layer mix, named("mix"));
    ASSIGN_OR_RETURN(const Layer query, named("query"));
    ASSIGN_OR_RETURN(const Layer key, named("key"));
    const int h = p.layers_.back().out;
    if (mix.in != 3 * h || mix.out != h || p.head_.in != h || p.head_.out != kLoopSetPerRow ||
        query.in != h || key.in != h || query.out != key.out || p.value_.in != 2 * h ||
        p.value_.out != 1) {
      return Bad("loop_set layers do not fit: mix 3H->H, head H->19, query and key H->D, "
                 "value 2H->1");
    }
    p.network_ =
        std::make_shared<const LoopSetNetwork>(p.layers_, mix, p.head_, query, key, p.value_);
    p.num_actions_ = kLoopSetActions;
    if (Integer(j, "input_size") != p.input_size() ||
        Integer(j, "num_actions") != p.num_actions()) {
      return Bad("input_size or num_actions disagree with the layers");
    }
    if (j.contains("cost")) {
      const Json& c = j["cost"];
      if (!c.is_object() || Text(c, "observation_space") != "plan_features" ||
          !c.contains("names") || !c["names"].is_array() || c["names"].empty() ||
          c["names"].size() > 4096 || !c.contains("layers") || !c["layers"].is_array() ||
          c["layers"].empty() || c["layers"].size() > 16) {
        return Bad("cost is not an object with observation_space plan_features, names and "
                   "layers");
      }
      std::vector<std::string> names;
      for (const Json& n : c["names"]) {
        if (!n.is_string()) return Bad("cost.names holds a non-string");
        names.push_back(n.get<std::string>());
      }
      ASSIGN_OR_RETURN(std::vector<float> mean, Floats(c.contains("mean") ? c["mean"] : none,
                                                       names.size(), "cost.mean"));
      ASSIGN_OR_RETURN(std::vector<float> scale, Floats(c.contains("scale") ? c["scale"] : none,
                                                        names.size(), "cost.scale"));
      std::vector<Layer> layers;
      for (size_t i = 0; i < c["layers"].size(); ++i) {
        ASSIGN_OR_RETURN(Layer l, layer(c["layers"][i], absl::StrCat("cost.layers[", i, "]")));
        layers.push_back(std::move(l));
      }
      double loss_weight = 0;
      if (c.contains("loss_weight")) {
        if (!c["loss_weight"].is_number()) return Bad("cost.loss_weight is not a number");
        loss_weight = c["loss_weight"].get<double>();
      }
      double mlp_weight = 1;
      if (c.contains("mlp_weight")) {
        if (!c["mlp_weight"].is_number()) return Bad("cost.mlp_weight is not a number");
        mlp_weight = c["mlp_weight"].get<double>();
      }
      PlanTrees trees;
      if (c.contains("trees")) {
        const Json& t = c["trees"];
        const int64_t nodes = t.is_object() ? Integer(t, "nodes") : -1;
        const int64_t count = t.is_object() ? Integer(t, "trees") : -1;
        if (nodes < 1 || nodes > PlanTrees::kMaxNodes || count < 1 || count > nodes) {
          return Bad(absl::StrCat("cost.trees is not an object with 0 < trees <= nodes <= ",
                                  PlanTrees::kMaxNodes));
        }
        const auto field = [&](const char* key) { return t.contains(key) ? t[key] : none; };
        ASSIGN_OR_RETURN(trees.roots, Ints(field("roots"), count, "cost.trees.roots"));
        ASSIGN_OR_RETURN(trees.feature, Ints(field("feature"), nodes, "cost.trees.feature"));
        ASSIGN_OR_RETURN(trees.left, Ints(field("left"), nodes, "cost.trees.left"));
        ASSIGN_OR_RETURN(trees.right, Ints(field("right"), nodes, "cost.trees.right"));
        ASSIGN_OR_RETURN(trees.threshold,
                         Floats(field("threshold"), nodes, "cost.trees.threshold"));
        ASSIGN_OR_RETURN(trees.value, Floats(field("value"), nodes, "cost.trees.value"));
      }
      absl::StatusOr<PlanCost> cost = PlanCost::Create(
          std::move(names), std::vector<double>(mean.begin(), mean.end()),
          std::vector<double>(scale.begin(), scale.end()), std::move(layers), loss_weight,
          std::move(trees), mlp_weight);
      if (!cost.ok()) return Bad(cost.status().message());
      p.cost_ = *std::move(cost);
    }
    if (j.contains("members")) {
      // Networks of the same shape of input, without a cost model of their own: the file's
      // header fields go with each.
      const Json& members = j["members"];
      if (!members.is_array() || members.size() > kMaxMembers) {
        return Bad(absl::StrCat("members is not a list of at most ", kMaxMembers, " networks"));
      }
      for (size_t i = 0; i < members.size(); ++i) {
        if (!members[i].is_object() || members[i].contains("cost") ||
            members[i].contains("members")) {
          return Bad(absl::StrCat("members[", i, "] is not a network (layers only)"));
        }
        Json m = members[i];
        for (const char* key : {"format", "version", "kind", "action_space", "observation_space",
                                "input_size", "num_actions", "preprocess"}) {
          m[key] = j[key];
        }
        absl::StatusOr<Policy> member = Parse(m.dump());
        if (!member.ok()) {
          return Bad(absl::StrCat("members[", i, "]: ",
                                  absl::StripPrefix(member.status().message(),
                                                    "not a LoopTool policy file: ")));
        }
        p.members_.push_back(*std::move(member));
      }
    }
    return p;
  }
  p.num_actions_ = p.head_.out;
  if (p.head_.in != p.layers_.back().out || p.value_.in != p.head_.in || p.value_.out != 1) {
    return Bad("head or value sizes do not match the trunk");
  }
  if (Integer(j, "input_size") != p.input_size() ||
      Integer(j, "num_actions") != p.num_actions()) {
    return Bad("input_size or num_actions disagree with the layers");
  }
  if (p.kind_ == Kind::kSketchValue && p.num_actions() != 1) {
    return Bad("a sketch_value policy has one output, the state's value");
  }
  return p;
}

absl::StatusOr<Policy> Policy::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read policy file ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<Policy> p = Parse(text.str());
  if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", p.status().message()));
  return p;
}

namespace {

// A built-in policy file, parsed once. The files are checked when they are committed
// (tests/client/policy_test.cc); a bad one is a build defect.
const Policy& BuiltIn(absl::string_view json) {
  absl::StatusOr<Policy> p = Policy::Parse(json);
  if (!p.ok()) std::abort();
  return *new Policy(*std::move(p));
}

}  // namespace

const Policy& Policy::Default() {
  static const Policy& policy = BuiltIn(SketchValuePolicyJson());
  return policy;
}

const Policy& Policy::LoopTuneDqn() {
  static const Policy& policy = BuiltIn(LoopTuneDqnPolicyJson());
  return policy;
}

const Policy& Policy::LoopSet() {
  static const Policy& policy = BuiltIn(LoopSetPolicyJson());
  return policy;
}

const Policy& Policy::LoopSetFor(absl::string_view isa) {
  if (isa != "avx2" && isa != "sse") return LoopSet();
  static const Policy& policy = BuiltIn(LoopSetAvx2PolicyJson());
  return policy;
}

absl::StatusOr<Policy> Policy::Find(const std::string& name_or_path) {
  if (name_or_path == "sketch_value") return Default();
  if (name_or_path == "looptune_dqn") return LoopTuneDqn();
  if (name_or_path == "loop_set") return LoopSet();
  return Load(name_or_path);
}

void Policy::Apply(const Layer& layer, absl::Span<const float> x, std::vector<float>& y) {
  y.assign(layer.out, 0.0f);
  for (int o = 0; o < layer.out; ++o) {
    const float* w = &layer.weight[size_t(o) * layer.in];
    double sum = layer.bias[o];
    for (int i = 0; i < layer.in; ++i) sum += double(w[i]) * x[i];
    y[o] = static_cast<float>(sum);
  }
}

bool Policy::ObservationFits(size_t size) const {
  const size_t width = static_cast<size_t>(input_size());
  if (kind_ == Kind::kLoopSet) return size >= width && size % width == 0;
  return size == width;
}

std::vector<float> Policy::Scores(absl::Span<const float> observation) const {
  if (kind_ == Kind::kLoopSet) return LoopSetScores(observation);
  std::vector<float> h(observation.size()), next;
  for (size_t i = 0; i < observation.size(); ++i) {
    h[i] = std::log2(1.0f + std::max(observation[i], 0.0f));
  }
  for (const Layer& l : layers_) {
    Apply(l, h, next);
    for (float& v : next) v = std::max(v, 0.0f);
    h.swap(next);
  }
  std::vector<float> scores;
  Apply(head_, h, scores);
  if (kind_ != Kind::kDuelingQ) return scores;
  std::vector<float> value;
  Apply(value_, h, value);
  const double mean = std::accumulate(scores.begin(), scores.end(), 0.0) / scores.size();
  for (float& s : scores) s = static_cast<float>(value[0] + (s - mean));
  return scores;
}

std::vector<float> Policy::LoopSetScores(absl::Span<const float> observation) const {
  const size_t rows = observation.size() / static_cast<size_t>(input_size());
  const LoopSetOutputs out = network_->Apply(observation);
  std::vector<float> scores(kLoopSetActions + 1, kAbsent);
  const int levels = static_cast<int>(std::min<size_t>(rows, kLevels));
  for (int p = 0; p < levels; ++p) {
    for (int t = 0; t < kTileSizes; ++t) {
      scores[kTileSizes * p + t] = static_cast<float>(out.head(p, t));
    }
    for (int t = 0; t < levels; ++t) {
      scores[kLevels * kTileSizes + kLevels * p + t] = static_cast<float>(out.attention(p, t));
    }
    for (int extra = 0; extra < 3; ++extra) {  // unroll, vectorize, merge
      scores[2 * kLevels * kLevels + extra * kLevels + p] =
          static_cast<float>(out.head(p, kTileSizes + extra));
    }
  }
  scores[kLoopSetActions] = static_cast<float>(out.stop);
  return scores;
}

int Policy::Act(absl::Span<const float> observation, const std::vector<bool>& mask) const {
  const std::vector<float> scores = Scores(observation);
  const std::vector<int> ranked = RankActions(scores, mask, num_actions_);
  if (ranked.empty()) return -1;
  if (kind_ == Kind::kLoopSet && scores[kLoopSetActions] > scores[ranked.front()]) return -1;
  return ranked.front();
}

int Policy::BestAllowed(absl::Span<const float> observation, const std::vector<bool>& mask) const {
  const std::vector<int> ranked = RankActions(Scores(observation), mask, num_actions_);
  return ranked.empty() ? -1 : ranked.front();
}

std::vector<int> RankActions(const std::vector<float>& scores, const std::vector<bool>& mask,
                             int num_actions) {
  std::vector<int> out;
  const size_t n = std::min({scores.size(), mask.size(), static_cast<size_t>(num_actions)});
  for (int a = 0; a < static_cast<int>(n); ++a) {
    if (mask[a]) out.push_back(a);
  }
  std::stable_sort(out.begin(), out.end(), [&](int a, int b) { return scores[a] > scores[b]; });
  return out;
}

}  // namespace looptool::client
