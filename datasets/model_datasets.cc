#include "datasets/model_datasets.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace looptool::datasets {

absl::StatusOr<CatalogDataset> ParseModelDataset(absl::string_view name, absl::string_view text) {
  CatalogDataset d;
  d.name = std::string(name);
  d.evaluation_only = true;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    const auto error = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("model dataset ", name, " line ", line_number, ": ", why));
    };
    if (d.description.empty() && absl::StartsWith(line, "# ")) {
      // The first comment: "<name>: <what the layers are from>".
      absl::string_view what = line.substr(2);
      absl::ConsumePrefix(&what, absl::StrCat(name, ": "));
      d.description = absl::StrCat("Every distinct layer of ", what,
                                   "; weights = layers per program; for evaluation only");
      continue;
    }
    if (absl::StartsWith(line, "#") || absl::StripAsciiWhitespace(line).empty()) continue;
    if (absl::ConsumePrefix(&line, "@ ")) {
      if (!d.benchmarks.empty() && d.benchmarks.back().program.empty()) {
        return error("the benchmark before has no program");
      }
      std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(' ', 2));
      CatalogBenchmark b;
      if (parts.size() < 2 || parts[0].empty() || !absl::SimpleAtoi(parts[1], &b.weight) ||
          b.weight < 1) {
        return error("expected '@ <name> <weight> <reference>'");
      }
      b.name = std::string(parts[0]);
      if (parts.size() == 3) b.reference = std::string(parts[2]);
      d.benchmarks.push_back(std::move(b));
      continue;
    }
    if (d.benchmarks.empty()) return error("a program line before the first '@' header");
    absl::StrAppend(&d.benchmarks.back().program, line, "\n");
  }
  if (d.benchmarks.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("model dataset ", name, " has no benchmark"));
  }
  if (d.benchmarks.back().program.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model dataset ", name, ": the last benchmark has no program"));
  }
  return d;
}

}  // namespace looptool::datasets
