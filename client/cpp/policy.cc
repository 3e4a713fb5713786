#include "client/cpp/policy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "client/cpp/built_in_policies.h"
#include "nlohmann/json.hpp"
#include "util/status_macros.h"

namespace looptool::client {
namespace {

using Json = nlohmann::json;

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
  if (Text(j, "preprocess") != "log2p1") return Bad("preprocess is not log2p1");
  Policy p;
  const std::string kind = Text(j, "kind");
  if (kind == "dueling_q") {
    p.kind_ = Kind::kDuelingQ;
  } else if (kind == "actor_critic") {
    p.kind_ = Kind::kActorCritic;
  } else if (kind == "sketch_value") {
    p.kind_ = Kind::kSketchValue;
  } else {
    return Bad(absl::StrCat("unknown kind '", kind, "'"));
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
    Layer l;
    l.in = static_cast<int>(in);
    l.out = static_cast<int>(out);
    const Json none;
    ASSIGN_OR_RETURN(l.weight, Floats(spec.contains("weight") ? spec["weight"] : none,
                                      size_t(l.in) * l.out, absl::StrCat(name, ".weight")));
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
  ASSIGN_OR_RETURN(p.head_, layer(j.contains("head") ? j["head"] : none, "head"));
  ASSIGN_OR_RETURN(p.value_, layer(j.contains("value") ? j["value"] : none, "value"));
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

absl::StatusOr<Policy> Policy::Find(const std::string& name_or_path) {
  if (name_or_path == "sketch_value") return Default();
  if (name_or_path == "looptune_dqn") return LoopTuneDqn();
  return Load(name_or_path);
}

void Policy::Apply(const Layer& layer, const std::vector<float>& x, std::vector<float>& y) {
  y.assign(layer.out, 0.0f);
  for (int o = 0; o < layer.out; ++o) {
    const float* w = &layer.weight[size_t(o) * layer.in];
    double sum = layer.bias[o];
    for (int i = 0; i < layer.in; ++i) sum += double(w[i]) * x[i];
    y[o] = static_cast<float>(sum);
  }
}

std::vector<float> Policy::Scores(absl::Span<const float> observation) const {
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

int Policy::Act(absl::Span<const float> observation, const std::vector<bool>& mask) const {
  const std::vector<int> ranked = RankActions(Scores(observation), mask);
  return ranked.empty() ? -1 : ranked.front();
}

std::vector<int> RankActions(const std::vector<float>& scores, const std::vector<bool>& mask) {
  std::vector<int> out;
  for (int a = 0; a < static_cast<int>(std::min(scores.size(), mask.size())); ++a) {
    if (mask[a]) out.push_back(a);
  }
  std::stable_sort(out.begin(), out.end(), [&](int a, int b) { return scores[a] > scores[b]; });
  return out;
}

}  // namespace looptool::client
