#include "util/auth_token.h"

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "util/status_macros.h"

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

namespace {

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read the token file ", path));
  return text.str();
}

bool ValidClientName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' &&
        c != '@' && c != '-') {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<ClientToken>> ParseClientTokens(absl::string_view text) {
  std::vector<ClientToken> out;
  std::set<std::string, std::less<>> names, tokens;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.find_first_of(" \t");
    const absl::string_view name = line.substr(0, space);
    const absl::string_view rest =
        space == absl::string_view::npos ? absl::string_view() : line.substr(space);
    if (!ValidClientName(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", number, ": a client's name is 1-64 of A-Z a-z 0-9 _ . @ -, got '", name,
          "'"));
    }
    absl::StatusOr<std::string> token = ParseAuthToken(rest);
    if (!token.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", number, " (client ", name, "): ", token.status().message()));
    }
    if (!names.insert(std::string(name)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", number, ": client ", name, " is named twice"));
    }
    if (!tokens.insert(*token).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "line ", number, " (client ", name, "): its token is another client's"));
    }
    out.push_back(ClientToken{std::string(name), *std::move(token)});
  }
  if (out.empty()) return absl::InvalidArgumentError("it names no client ('<name> <token>' lines)");
  return out;
}

absl::StatusOr<std::vector<ClientToken>> ReadClientTokensFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadTokenFile(path));
  absl::StatusOr<std::vector<ClientToken>> tokens = ParseClientTokens(text);
  if (!tokens.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the client tokens file ", path,
                                                   " is unusable: ", tokens.status().message()));
  }
  return tokens;
}

absl::StatusOr<std::string> ReadAuthTokenFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadTokenFile(path));
  absl::StatusOr<std::string> token = ParseAuthToken(text);
  if (!token.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the token file ", path, " is unusable: ", token.status().message()));
  }
  return token;
}

}  // namespace looptool
