#include "backend/features/tensors.h"

#include "backend/features/stride_histogram.h"
#include "util/check.h"

namespace looptool {

std::vector<float> LoopsTensor(const LoopTree& tree, int max_loops) {
  LT_CHECK(tree.num_loops() <= max_loops);
  std::vector<float> out(static_cast<size_t>(max_loops) * kLoopFeatures, 0.0f);
  const int cursor = tree.cursor_ref();
  int row = 0;
  for (int ref = 0; ref < static_cast<int>(tree.nodes().size()); ++ref) {
    const TreeNode& n = tree.nodes()[ref];
    if (n.kind != TreeNode::Kind::kLoop) continue;
    float* r = &out[static_cast<size_t>(row++) * kLoopFeatures];
    r[0] = ref == cursor ? 1.0f : 0.0f;
    r[1] = static_cast<float>(n.loop.size);
    r[2] = static_cast<float>(n.loop.tail);
    r[3] = n.in_compute ? 1.0f : 0.0f;
    const StrideHistogram h = MakeStrideHistogram(LoopStrideAccesses(tree, ref), true);
    for (int b = 0; b < kStrideBuckets; ++b) r[4 + b] = static_cast<float>(h[b]);
  }
  return out;
}

std::vector<float> StrideTensor(const LoopTree& tree) {
  std::vector<float> out(kStrideBuckets, 0.0f);
  for (int ref = 0; ref < static_cast<int>(tree.nodes().size()); ++ref) {
    if (tree.nodes()[ref].kind != TreeNode::Kind::kLoop) continue;
    const StrideHistogram h = MakeStrideHistogram(LoopStrideAccesses(tree, ref), false);
    for (int b = 0; b < kStrideBuckets; ++b) out[b] += static_cast<float>(h[b]);
  }
  return out;
}

std::vector<float> PrevActionsTensor(const std::vector<int>& history, int num_actions) {
  std::vector<float> out(static_cast<size_t>(kPrevActions) * num_actions, 0.0f);
  for (int i = 0; i < kPrevActions && i < static_cast<int>(history.size()); ++i) {
    const int a = history[history.size() - 1 - i];
    if (a >= 0 && a < num_actions) out[static_cast<size_t>(i) * num_actions + a] = 1.0f;
  }
  return out;
}

}  // namespace looptool
