// The shared-token file that a server requires of its clients and its clients send, read by one
// rule for both (the Python client, looptool.auth, keeps the same rule): the first line, with
// the whitespace around it (spaces, tabs, a CR of CRLF) dropped, must be a non-empty run of
// visible ASCII (0x21-0x7e), which is what a gRPC metadata value "Bearer <token>" carries
// unchanged.
#ifndef LOOPTOOL_UTIL_AUTH_TOKEN_H_
#define LOOPTOOL_UTIL_AUTH_TOKEN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace looptool {

// The token in the file at `path`. INVALID_ARGUMENT, naming the file and what is wrong with it,
// when it cannot be read or its first line is empty or holds other characters.
absl::StatusOr<std::string> ReadAuthTokenFile(const std::string& path);
// The same rule for a file's text.
absl::StatusOr<std::string> ParseAuthToken(absl::string_view text);

// A server's per-client tokens: each line "<name> <token>" gives the client `name` (1-64 of
// [A-Za-z0-9_.@-]) its own token (visible ASCII, as above); blank lines and lines starting with
// '#' are skipped, whitespace around the fields dropped. Names and tokens are unique.
struct ClientToken {
  std::string name;
  std::string token;
};
absl::StatusOr<std::vector<ClientToken>> ParseClientTokens(absl::string_view text);
// The per-client tokens in the file at `path`; INVALID_ARGUMENT naming the file, and the line,
// when it cannot be read or a line breaks the rule, or the file names no client.
absl::StatusOr<std::vector<ClientToken>> ReadClientTokensFile(const std::string& path);

}  // namespace looptool

#endif  // LOOPTOOL_UTIL_AUTH_TOKEN_H_
