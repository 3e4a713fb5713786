#include "bench/hand_schedules.h"

#include "absl/strings/str_cat.h"
#include "backend/schedule/ir_text.h"
#include "util/check.h"

namespace looptool::bench {

std::string MatmulTile::Name() const {
  return absl::StrCat("k/", kb, " m/", mb, " n/", nb, " k m n");
}

std::vector<MatmulTile> MatmulTiles() {
  // The last keeps whole rows of n <= 128 in registers (4 x up to 8 vectors), for narrow shapes.
  return {{4, 64, 64}, {4, 64, 32}, {6, 64, 32}, {8, 32, 64}, {4, 48, 64}, {4, 128, 64}};
}

LoopTree TiledMatmul(std::shared_ptr<const Program> program, const MatmulTile& tile) {
  // Program variables: m = 0, n = 1, k = 2 (C[m,n] += A[m,k] * B[k,n]).
  const int64_t M = program->var(0).extent, N = program->var(1).extent, K = program->var(2).extent;
  LoopOrder order, write;
  auto outer = [&](int var, int64_t extent, int64_t block) {
    if (block < extent) order.push_back({var, extent / block, extent % block});
  };
  auto inner = [&](int var, int64_t extent, int64_t block) {
    order.push_back({var, std::min(extent, block), 0});
  };
  outer(2, K, tile.kb);
  outer(0, M, tile.mb);
  outer(1, N, tile.nb);
  inner(2, K, tile.kb);
  inner(0, M, tile.mb);
  inner(1, N, tile.nb);
  write = {{0, M, 0}, {1, N, 0}};
  auto tree = LoopTree::Create(std::move(program), {{order, write}}, Cursor{0, 0});
  LT_CHECK(tree.ok());
  return *std::move(tree);
}

absl::StatusOr<LoopTree> ScheduleFromOrder(const std::string& program_text,
                                           const std::string& order) {
  Limits limits;
  return ParseIr(absl::StrCat(program_text, "\ncompute 1: ", order, "\n"), limits);
}

}  // namespace looptool::bench
