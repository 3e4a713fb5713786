// The benchmark datasets the server knows without AddBenchmark: URI -> program text in the
// loop-nest language. URIs are `benchmark://<dataset>/<name>`.
#ifndef LOOPTOOL_DATASETS_REGISTRY_H_
#define LOOPTOOL_DATASETS_REGISTRY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace looptool::datasets {

struct DatasetInfo {
  std::string name;         // "mm64_256_16_range-v0"
  std::string description;
  int64_t size = 0;         // benchmarks listed (pattern datasets resolve more names)
};

// Every dataset, in a fixed order.
std::vector<DatasetInfo> Datasets();

// The names of a dataset's benchmarks (without the URI prefix); empty for unknown datasets.
std::vector<std::string> BenchmarkNames(absl::string_view dataset);
// Whether `name` of `dataset` is in its test split (datasets/split.h; every benchmark of an
// evaluation-only dataset, matmul_offgrid-v0).
bool InTestSplit(absl::string_view dataset, absl::string_view name);

enum class Split { kAll, kTrain, kTest };
// "all", "train" or "test"; INVALID_ARGUMENT otherwise.
absl::StatusOr<Split> ParseSplit(absl::string_view name);
// The URIs of a dataset's benchmarks in `split`, in the dataset's order. NOT_FOUND, listing the
// datasets, for an unknown one.
absl::StatusOr<std::vector<std::string>> BenchmarkUris(absl::string_view dataset, Split split);

// The program of a benchmark URI, or nullopt when no dataset resolves it. Matmul URIs resolve
// for any shape `mmM_N_K` (the server's caps apply when the program is parsed).
std::optional<std::string> ResolveUri(absl::string_view uri);

// "benchmark://<dataset>/<name>".
std::string Uri(absl::string_view dataset, absl::string_view name);

}  // namespace looptool::datasets

#endif  // LOOPTOOL_DATASETS_REGISTRY_H_
