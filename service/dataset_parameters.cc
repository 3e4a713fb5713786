#include "service/dataset_parameters.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "datasets/registry.h"
#include "util/status_macros.h"

namespace looptool::service {
namespace {

std::string DatasetLines() {
  std::string out;
  for (const datasets::DatasetInfo& d : datasets::Datasets()) {
    int64_t test = 0;
    for (const std::string& name : datasets::BenchmarkNames(d.name)) {
      test += datasets::InTestSplit(d.name, name);
    }
    absl::StrAppend(&out, d.name, " ", d.size, " ", test, " ", d.description, "\n");
  }
  return out;
}

absl::StatusOr<std::string> BenchmarkLines(absl::string_view value) {
  const size_t colon = value.find(':');
  datasets::Split split = datasets::Split::kAll;
  if (colon != absl::string_view::npos) {
    ASSIGN_OR_RETURN(split, datasets::ParseSplit(value.substr(colon + 1)));
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> uris,
                   datasets::BenchmarkUris(value.substr(0, colon), split));
  return absl::StrCat(absl::StrJoin(uris, "\n"), "\n");
}

}  // namespace

std::optional<absl::StatusOr<std::string>> DatasetParameter(absl::string_view key,
                                                            absl::string_view value) {
  if (key == "looptool.datasets") return DatasetLines();
  if (key == "looptool.dataset_benchmarks") return BenchmarkLines(value);
  return std::nullopt;
}

}  // namespace looptool::service
