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

}  // namespace looptool::client::testing

#endif  // LOOPTOOL_TESTS_CLIENT_POLICY_JSON_H_
