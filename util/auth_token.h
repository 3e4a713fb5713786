// The shared-token file that a server requires of its clients and its clients send, read by one
// rule for both (the Python client, looptool.auth, keeps the same rule): the first line, with
// the whitespace around it (spaces, tabs, a CR of CRLF) dropped, must be a non-empty run of
// visible ASCII (0x21-0x7e), which is what a gRPC metadata value "Bearer <token>" carries
// unchanged.
#ifndef LOOPTOOL_UTIL_AUTH_TOKEN_H_
#define LOOPTOOL_UTIL_AUTH_TOKEN_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace looptool {

// The token in the file at `path`. INVALID_ARGUMENT, naming the file and what is wrong with it,
// when it cannot be read or its first line is empty or holds other characters.
absl::StatusOr<std::string> ReadAuthTokenFile(const std::string& path);
// The same rule for a file's text.
absl::StatusOr<std::string> ParseAuthToken(absl::string_view text);

}  // namespace looptool

#endif  // LOOPTOOL_UTIL_AUTH_TOKEN_H_
