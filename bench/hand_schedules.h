// Hand schedules for the benchmarks, built as loop orders (every one is reachable with the
// loop_tool actions: splits, then swaps).
#ifndef LOOPTOOL_BENCH_HAND_SCHEDULES_H_
#define LOOPTOOL_BENCH_HAND_SCHEDULES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/schedule/loop_tree.h"

namespace looptool::bench {

// A matmul tile: order k/kb, m/mb, n/nb, k, m, n (the "k/64, m/4, n/64, k, m, n").
struct MatmulTile {
  int mb, nb, kb;
  std::string Name() const;
};

// The tiles the benchmark tries per shape (the best is reported).
std::vector<MatmulTile> MatmulTiles();

// The tiled schedule of `C[m,n] += A[m,k] * B[k,n]`; an outer loop whose block covers its whole
// variable is left out.
LoopTree TiledMatmul(std::shared_ptr<const Program> program, const MatmulTile& tile);

// A schedule from loop-order text, e.g. "co(16 step) ..." via the `ir` syntax: the program's ir
// with `compute 1:` replaced by `order`. Fails on invalid orders.
absl::StatusOr<LoopTree> ScheduleFromOrder(const std::string& program_text, const std::string& order);

}  // namespace looptool::bench

#endif  // LOOPTOOL_BENCH_HAND_SCHEDULES_H_
