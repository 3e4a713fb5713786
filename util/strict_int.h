// ParseDecimal: a non-negative decimal integer with nothing around it. Names and URIs must not
// resolve when they carry spaces or signs that absl::SimpleAtoi would forgive (" 64", "+4", "4 ").
#ifndef LOOPTOOL_UTIL_STRICT_INT_H_
#define LOOPTOOL_UTIL_STRICT_INT_H_

#include <cstdint>
#include <limits>

#include "absl/strings/string_view.h"

namespace looptool {

// True, with the value in `out`, when `text` is 1-18 ASCII digits and nothing else.
inline bool ParseDecimal(absl::string_view text, int64_t* out) {
  if (text.empty() || text.size() > 18) return false;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

}  // namespace looptool

#endif  // LOOPTOOL_UTIL_STRICT_INT_H_
