// `loop_features`: what a policy over a set of loops sees of a loop tree. One row per compute loop
// in the order level pointers name them (LoopTree::CursorPositions(): statement by statement,
// outermost first, so row p is loop_nest's L<p>), each row self-contained (sizes as log2(1 + x),
// flags 0/1), so a network applied to every row and pooled over the rows (DeepSets) handles any
// number of loops. Rows past the tree's compute loops are zero (column 0, "is a loop", tells).
//
// Columns (kLoopSetFeatures = 38):
//   0 is a loop (1)              1 log2(1+size)              2 log2(1+tail)
//   3 log2(1+elements covered)   4 log2(1+elements per iteration, the next inner same-variable
//                                  loop's extent)            5 log2(1+the variable's extent)
//   6 depth in the compute nest  7 loops inside it in the nest   8 same-variable loops around it
//   9 innermost over its variable   10 vectorize mark   11 unroll mark
//   12 the variable is reduced   13 it is the output's last index
//   14 fraction of the statement's inputs whose last index uses it
//   15 fraction of the statement's accesses (output included) that do not use it (reuse)
//   16 log2(1 + smallest element stride of the variable over the accesses that use it)
//   17 shared with the write-back nest   18 log2(1+iterations: its size times its enclosing loops')
//   19 statement index   20 log2(largest coefficient of the variable in an index: 1 for stride 2)
//   21 fraction of the accesses using it where it shares an index with another variable
//      (a sliding window: oh + kh)
//   22..37 the loop's normalised stride histogram (backend/features/stride_histogram.h)
#ifndef LOOPTOOL_BACKEND_FEATURES_LOOP_FEATURES_H_
#define LOOPTOOL_BACKEND_FEATURES_LOOP_FEATURES_H_

#include <vector>

#include "backend/schedule/loop_tree.h"

namespace looptool {

inline constexpr int kLoopSetFeatures = 38;

// `max_rows` rows of kLoopSetFeatures numbers, flattened row-major; compute loops past
// `max_rows` are left out (level pointers reach 16 loops). REQUIRES: max_rows >= 1.
std::vector<float> LoopFeatures(const LoopTree& tree, int max_rows);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_FEATURES_LOOP_FEATURES_H_
