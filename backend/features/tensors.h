// The tensor observations of a LoopTree, as LoopTune's users know them.
#ifndef LOOPTOOL_BACKEND_FEATURES_TENSORS_H_
#define LOOPTOOL_BACKEND_FEATURES_TENSORS_H_

#include <vector>

#include "backend/schedule/loop_tree.h"

namespace looptool {

inline constexpr int kLoopFeatures = 20;

// `loops_tensor`: one row of kLoopFeatures numbers per loop of the tree, in pre-order (every loop
// of every nest; LoopTune covered only the first root): [is cursor, size, tail, is a compute
// loop, normalised stride histogram (16)]. Rows past the tree's loops are zero, up to
// `max_loops` rows (flattened, row-major). REQUIRES: tree.num_loops() <= max_loops.
std::vector<float> LoopsTensor(const LoopTree& tree, int max_loops);

// `stride_tensor`: the stride histograms of all loops summed, unnormalised (16 numbers).
std::vector<float> StrideTensor(const LoopTree& tree);

// `5_prev_actions_tensor`: five rows of one-hot action indices, the most recent action first;
// rows for actions not yet taken are zero (flattened, 5 * num_actions numbers).
inline constexpr int kPrevActions = 5;
std::vector<float> PrevActionsTensor(const std::vector<int>& history, int num_actions);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_FEATURES_TENSORS_H_
