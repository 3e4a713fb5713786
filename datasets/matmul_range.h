// mm64_256_16_range-v0: LoopTune's 2197 matmuls, M, N, K in 64, 80, ..., 256, named `mmM_N_K`
// (m rows of C and A, n columns of C and B, k the reduction), with a deterministic 80/20
// train/test split.
#ifndef LOOPTOOL_DATASETS_MATMUL_RANGE_H_
#define LOOPTOOL_DATASETS_MATMUL_RANGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace looptool::datasets {

inline constexpr char kMatmulRangeDataset[] = "mm64_256_16_range-v0";
// Matmuls off the range's grid: odd, prime and rectangular sizes in 32..512, for evaluation
// only (nothing trains on them: every one is in the test split).
inline constexpr char kMatmulOffGridDataset[] = "matmul_offgrid-v0";

struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
  bool operator==(const MatmulShape& o) const { return m == o.m && n == o.n && k == o.k; }
};

// "mm112_208_256" -> {m=112, n=208, k=256}. Any positive sizes parse (the service applies its
// caps when it parses the program); INVALID_ARGUMENT for other names.
absl::StatusOr<MatmulShape> ParseMatmulName(absl::string_view name);
std::string MatmulName(const MatmulShape& shape);
// "C[m,n] += A[m,k] * B[k,n]\nm=112 n=208 k=256\n".
std::string MatmulProgram(const MatmulShape& shape);

// The 2197 shapes in LoopTune's generator order (m, then n, then k ascending).
std::vector<MatmulShape> MatmulRange();
// matmul_offgrid-v0's 12 shapes, in a fixed order.
const std::vector<MatmulShape>& OffGridMatmuls();
// Whether a shape of the range is in the test split. The split is a fixed hash of the name
// (FNV-1a, 64 bit): a shape is in test when hash % 5 == 0, so about 20%; the same on every
// machine and independent of the order shapes are listed in.
bool InTestSplit(const MatmulShape& shape);

}  // namespace looptool::datasets

#endif  // LOOPTOOL_DATASETS_MATMUL_RANGE_H_
