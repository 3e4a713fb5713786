#include "datasets/matmul_range.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "util/strict_int.h"
#include "datasets/split.h"

namespace looptool::datasets {

absl::StatusOr<MatmulShape> ParseMatmulName(absl::string_view name) {
  absl::string_view rest = name;
  std::vector<absl::string_view> parts;
  if (absl::ConsumePrefix(&rest, "mm")) parts = absl::StrSplit(rest, '_');
  MatmulShape s;
  if (parts.size() != 3 || !ParseDecimal(parts[0], &s.m) || !ParseDecimal(parts[1], &s.n) ||
      !ParseDecimal(parts[2], &s.k) || s.m < 1 || s.n < 1 || s.k < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is not a matmul name of the form mmM_N_K, e.g. mm112_208_256"));
  }
  return s;
}

std::string MatmulName(const MatmulShape& s) { return absl::StrCat("mm", s.m, "_", s.n, "_", s.k); }

std::string MatmulProgram(const MatmulShape& s) {
  return absl::StrCat("C[m,n] += A[m,k] * B[k,n]\nm=", s.m, " n=", s.n, " k=", s.k, "\n");
}

const std::vector<MatmulShape>& OffGridMatmuls() {
  static const auto* const shapes = new std::vector<MatmulShape>{
      {37, 61, 97},    {127, 131, 139}, {100, 100, 100}, {53, 200, 311},
      {250, 70, 190},  {512, 32, 64},   {32, 512, 128},  {96, 384, 48},
      {199, 211, 223}, {300, 300, 45},  {64, 450, 333},  {481, 97, 257},
  };
  return *shapes;
}

std::vector<MatmulShape> MatmulRange() {
  std::vector<MatmulShape> out;
  for (int64_t m = 64; m <= 256; m += 16) {
    for (int64_t n = 64; n <= 256; n += 16) {
      for (int64_t k = 64; k <= 256; k += 16) out.push_back({m, n, k});
    }
  }
  return out;
}

bool InTestSplit(const MatmulShape& shape) { return NameInTestSplit(MatmulName(shape)); }

}  // namespace looptool::datasets
