#include "backend/schedule/loop.h"

#include <cstddef>

namespace looptool {

int64_t InnerExtent(const LoopOrder& order, int depth) {
  for (std::size_t d = depth + 1; d < order.size(); ++d) {
    if (order[d].var == order[depth].var) return Extent(order, static_cast<int>(d));
  }
  return 1;
}

int64_t Extent(const LoopOrder& order, int depth) {
  return order[depth].size * InnerExtent(order, depth) + order[depth].tail;
}

int VarDepth(const LoopOrder& order, int depth) {
  int n = 0;
  for (int d = 0; d < depth; ++d) n += order[d].var == order[depth].var;
  return n;
}

}  // namespace looptool
