#include "datasets/registry.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "datasets/catalog.h"
#include "datasets/matmul_range.h"
#include "datasets/split.h"

namespace looptool::datasets {

namespace {
constexpr char kPrefix[] = "benchmark://";
}  // namespace

std::vector<DatasetInfo> Datasets() {
  std::vector<DatasetInfo> out = {
      {kMatmulRangeDataset,
       "LoopTune's matmuls C[m,n] += A[m,k] * B[k,n], m, n, k in 64..256 step 16 (any mmM_N_K "
       "resolves)",
       static_cast<int64_t>(MatmulRange().size())},
      {kMatmulOffGridDataset,
       "Matmuls off that grid (odd, prime and rectangular sizes in 32..512), for evaluation only",
       static_cast<int64_t>(OffGridMatmuls().size())}};
  for (const CatalogDataset& d : Catalog()) {
    out.push_back({d.name, d.description, static_cast<int64_t>(d.benchmarks.size())});
  }
  return out;
}

std::vector<std::string> BenchmarkNames(absl::string_view dataset) {
  std::vector<std::string> out;
  if (dataset == kMatmulRangeDataset) {
    for (const MatmulShape& s : MatmulRange()) out.push_back(MatmulName(s));
  }
  if (dataset == kMatmulOffGridDataset) {
    for (const MatmulShape& s : OffGridMatmuls()) out.push_back(MatmulName(s));
  }
  for (const CatalogDataset& d : Catalog()) {
    if (d.name != dataset) continue;
    for (const CatalogBenchmark& b : d.benchmarks) out.push_back(b.name);
  }
  return out;
}

bool InTestSplit(absl::string_view dataset, absl::string_view name) {
  if (dataset == kMatmulRangeDataset) {
    auto shape = ParseMatmulName(name);
    return shape.ok() && datasets::InTestSplit(*shape);
  }
  if (dataset == kMatmulOffGridDataset) return true;
  for (const CatalogDataset& d : Catalog()) {
    if (d.name == dataset && d.evaluation_only) return true;
  }
  return NameInTestSplit(name);
}

absl::StatusOr<Split> ParseSplit(absl::string_view name) {
  if (name == "all") return Split::kAll;
  if (name == "train") return Split::kTrain;
  if (name == "test") return Split::kTest;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown split '", name, "': use all, train or test"));
}

absl::StatusOr<std::vector<std::string>> BenchmarkUris(absl::string_view dataset, Split split) {
  const std::vector<std::string> names = BenchmarkNames(dataset);
  if (names.empty()) {
    std::vector<std::string> known;
    for (const DatasetInfo& d : Datasets()) known.push_back(d.name);
    return absl::NotFoundError(absl::StrCat("unknown dataset '", dataset,
                                            "'; known: ", absl::StrJoin(known, ", ")));
  }
  std::vector<std::string> uris;
  for (const std::string& name : names) {
    if (split == Split::kAll || InTestSplit(dataset, name) == (split == Split::kTest)) {
      uris.push_back(Uri(dataset, name));
    }
  }
  return uris;
}

std::optional<std::string> ResolveUri(absl::string_view uri) {
  absl::string_view rest = uri;
  if (!absl::ConsumePrefix(&rest, kPrefix)) return std::nullopt;
  const size_t slash = rest.find('/');
  if (slash == absl::string_view::npos) return std::nullopt;
  const absl::string_view dataset = rest.substr(0, slash), name = rest.substr(slash + 1);
  if (dataset == kMatmulRangeDataset) {
    auto shape = ParseMatmulName(name);
    if (shape.ok()) return MatmulProgram(*shape);
    return std::nullopt;
  }
  if (dataset == kMatmulOffGridDataset) {
    for (const MatmulShape& s : OffGridMatmuls()) {
      if (MatmulName(s) == name) return MatmulProgram(s);
    }
    return std::nullopt;
  }
  for (const CatalogDataset& d : Catalog()) {
    if (d.name != dataset) continue;
    for (const CatalogBenchmark& b : d.benchmarks) {
      if (b.name == name) return b.program;
    }
  }
  return std::nullopt;
}

std::string Uri(absl::string_view dataset, absl::string_view name) {
  return absl::StrCat(kPrefix, dataset, "/", name);
}

}  // namespace looptool::datasets
