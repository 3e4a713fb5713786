// Stride histograms: LoopTune's description of how a loop walks memory. For each input access
// under a loop, the access's stride per iteration of the loop (elements) and how often the loop
// iterates; binned by ceil(log2 stride) into 16 buckets (strides above 2^15 are dropped).
#ifndef LOOPTOOL_BACKEND_FEATURES_STRIDE_HISTOGRAM_H_
#define LOOPTOOL_BACKEND_FEATURES_STRIDE_HISTOGRAM_H_

#include <array>
#include <cstdint>
#include <vector>

#include "backend/schedule/loop_tree.h"

namespace looptool {

inline constexpr int kStrideBuckets = 16;
using StrideHistogram = std::array<double, kStrideBuckets>;

struct StrideAccess {
  int64_t stride = 0;     // elements between consecutive iterations of the loop, > 0
  int64_t frequency = 0;  // iterations of the loop over a whole run (product of the sizes of
                          // the loop and its enclosing loops)
  int tensor = -1;        // the tensor read, or -1 for the statement's accumulator
};

// The accesses under tree loop `ref` with a non-zero stride along it, as loop_tool's
// gen_loops_strides_freq collects them: every input operand of every leaf under the loop, and
// for write leaves the accumulator they read. The accumulator lives inside the loops its two
// nests share (loop_tool allocates it at their common ancestor), so it has stride 0 along them.
// The product the reduction reads is a register value and never counts.
std::vector<StrideAccess> LoopStrideAccesses(const LoopTree& tree, int ref);

// ceil(log2(stride)): 1 -> 0, 2 -> 1, 3..4 -> 2, 208 -> 8; -1 for strides above 2^15.
int StrideBucket(int64_t stride);

// Sums frequencies per bucket; `normalize` divides by the total frequency of the binned accesses
// (an empty histogram stays all zero).
StrideHistogram MakeStrideHistogram(const std::vector<StrideAccess>& accesses, bool normalize);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_FEATURES_STRIDE_HISTOGRAM_H_
