#include "util/auth_token.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace looptool {

absl::StatusOr<std::string> ParseAuthToken(absl::string_view text) {
  const size_t end = text.find('\n');
  const absl::string_view line =
      absl::StripAsciiWhitespace(end == absl::string_view::npos ? text : text.substr(0, end));
  if (line.empty()) return absl::InvalidArgumentError("its first line holds no token");
  for (char c : line) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "its token holds the character 0x%02x; a token is visible ASCII (0x21-0x7e) only",
          static_cast<unsigned char>(c)));
    }
  }
  return std::string(line);
}

absl::StatusOr<std::string> ReadAuthTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read the token file ", path));
  absl::StatusOr<std::string> token = ParseAuthToken(text.str());
  if (!token.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the token file ", path, " is unusable: ", token.status().message()));
  }
  return token;
}

}  // namespace looptool
