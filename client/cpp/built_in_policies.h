// The built-in policy files (datasets/policies/sketch_value.json, the default, looptune_dqn.json,
// loop_set.json and loop_set_avx2.json), compiled into the binary by a genrule so `looptool tune
// --search=policy` needs no file at run time. Policy::Default(), LoopTuneDqn(), LoopSet() and
// LoopSetFor() parse them.
#ifndef LOOPTOOL_CLIENT_CPP_BUILT_IN_POLICIES_H_
#define LOOPTOOL_CLIENT_CPP_BUILT_IN_POLICIES_H_

#include "absl/strings/string_view.h"

namespace looptool::client {

absl::string_view SketchValuePolicyJson();
absl::string_view LoopTuneDqnPolicyJson();
absl::string_view LoopSetPolicyJson();
absl::string_view LoopSetAvx2PolicyJson();

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_BUILT_IN_POLICIES_H_
