// The datasets the server resolves, served as SendSessionParameter keys that need no session
// (the session id is ignored), so that clients list benchmarks and splits from the server
// instead of mirroring them:
//   looptool.datasets             one line per dataset: "<name> <size> <test size> <description>"
//   looptool.dataset_benchmarks   value "<dataset>" or "<dataset>:<split>" (all, train, test):
//                                 the benchmark URIs, one per line, in the dataset's order
#ifndef LOOPTOOL_SERVICE_DATASET_PARAMETERS_H_
#define LOOPTOOL_SERVICE_DATASET_PARAMETERS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace looptool::service {

// The answer to `key` with `value`, or nullopt for a key that is not one of the above.
// INVALID_ARGUMENT for an unknown split, NOT_FOUND for an unknown dataset.
std::optional<absl::StatusOr<std::string>> DatasetParameter(absl::string_view key,
                                                            absl::string_view value);

}  // namespace looptool::service

#endif  // LOOPTOOL_SERVICE_DATASET_PARAMETERS_H_
