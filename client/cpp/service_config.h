// The gRPC service config every LoopTool client channel uses (proto/client_service_config.json,
// embedded at build time; the Python client loads the same file): which calls gRPC retries on
// UNAVAILABLE, how often and with what backoff. Step is never retried: it applies actions, and a
// step whose connection broke after the server ran it must not run twice.
#ifndef LOOPTOOL_CLIENT_CPP_SERVICE_CONFIG_H_
#define LOOPTOOL_CLIENT_CPP_SERVICE_CONFIG_H_

#include "absl/strings/string_view.h"

namespace looptool::client {

absl::string_view ClientServiceConfigJson();

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_SERVICE_CONFIG_H_
