// The default tuning policy's file (datasets/policies/looptune_dqn.json), built into the binary
// by a genrule so `looptool tune --search=policy` needs no file at run time.
#ifndef LOOPTOOL_CLIENT_CPP_DEFAULT_POLICY_H_
#define LOOPTOOL_CLIENT_CPP_DEFAULT_POLICY_H_

#include "absl/strings/string_view.h"

namespace looptool::client {

absl::string_view DefaultPolicyJson();

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_DEFAULT_POLICY_H_
