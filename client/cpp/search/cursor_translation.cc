#include "client/cpp/search/cursor_translation.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace looptool::client {

std::vector<std::string> CursorToLevelActions(const std::vector<std::string>& cursor_actions) {
  std::vector<std::string> out;
  int c = 0;
  for (const std::string& a : cursor_actions) {
    if (a == "up") {
      --c;
    } else if (a == "down") {
      ++c;
    } else if (a == "swap_down") {
      out.push_back(absl::StrCat("interchange_L", c, "_L", c + 1));
      ++c;
    } else if (a == "swap_up") {
      out.push_back(absl::StrCat("interchange_L", c, "_L", c - 1));
      --c;
    } else if (a == "unroll" || a == "vectorize") {
      out.push_back(absl::StrCat(a, "_L", c));
    } else if (absl::StartsWith(a, "split_")) {
      out.push_back(absl::StrCat("tile_L", c, "_", a.substr(6)));
    } else {
      break;
    }
    if (c < 0) break;
  }
  return out;
}

}  // namespace looptool::client
