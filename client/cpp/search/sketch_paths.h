// The server's `sketches` observation (backend/actions/sketches.h: one starting schedule per
// line, loop_nest action names separated by spaces) read as paths of a session's action
// indices: the one parser of it.
#ifndef LOOPTOOL_CLIENT_CPP_SEARCH_SKETCH_PATHS_H_
#define LOOPTOOL_CLIENT_CPP_SEARCH_SKETCH_PATHS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/cpp/search/state_source.h"

namespace looptool::client::internal {

// `text`'s sketches as action indices of `space`'s action space, in the server's order.
// INVALID_ARGUMENT, naming it, for an action the space lacks (every one, in a space without
// loop_nest's names).
absl::StatusOr<std::vector<std::vector<int>>> ParseSketches(absl::string_view text,
                                                            const StateSource& space);

// The sketches of `start`'s state, observed on a fork whose calls end by `deadline`. The
// observation's status when the server has none or does not answer in time; ParseSketches'.
absl::StatusOr<std::vector<std::vector<int>>> ObserveSketches(const StateSource& start,
                                                              absl::Time deadline);

}  // namespace looptool::client::internal

#endif  // LOOPTOOL_CLIENT_CPP_SEARCH_SKETCH_PATHS_H_
