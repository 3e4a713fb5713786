// Policy files built by hand in tests: float32 arrays as the files keep them (little-endian,
// base64) and a layer object {"in", "out", "weight", "bias"}.
#ifndef LOOPTOOL_TESTS_CLIENT_POLICY_JSON_H_
#define LOOPTOOL_TESTS_CLIENT_POLICY_JSON_H_

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "nlohmann/json.hpp"

namespace looptool::client::testing {

inline std::string B64(const std::vector<float>& v) {
  std::string bytes(v.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return absl::Base64Escape(bytes);
}

inline nlohmann::json Layer(int in, int out, const std::vector<float>& w,
                            const std::vector<float>& b) {
  return {{"in", in}, {"out", out}, {"weight", B64(w)}, {"bias", B64(b)}};
}

// A loop_set policy file's network as a member of another (its layers alone), with its stop
// score (the value layer's one bias) raised by `stop_more`.
inline nlohmann::json NetworkLayers(const nlohmann::json& policy, float stop_more) {
  nlohmann::json m;
  for (const char* k : {"trunk", "mix", "head", "query", "key", "value"}) m[k] = policy[k];
  std::string bytes;
  if (absl::Base64Unescape(m["value"]["bias"].get<std::string>(), &bytes) &&
      bytes.size() == sizeof(float)) {
    float bias = 0;
    std::memcpy(&bias, bytes.data(), sizeof(bias));
    m["value"]["bias"] = B64({bias + stop_more});
  }
  return m;
}

}  // namespace looptool::client::testing

#endif  // LOOPTOOL_TESTS_CLIENT_POLICY_JSON_H_
