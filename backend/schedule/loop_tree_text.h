// LoopTreeText: the `loop_tree` observation, a LoopTree in loop_tool's dump format, one line per
// loop or leaf, indented one space per level, the cursor's line marked as LoopTune's agent does:
//
//   for n in 1 r 80 : L0  <<<<<< cursor (line 0 )
//    for n' in 8 : L1
//     for m in 28 : L2 unroll
//      %2[m, k, n] <- multiply(%0, %1)
//
// Differences from loop_tool's text: variables print without loop_tool's numeric suffixes
// (`m`, not `m_285062`) and lines carry no trailing blanks.
#ifndef LOOPTOOL_BACKEND_SCHEDULE_LOOP_TREE_TEXT_H_
#define LOOPTOOL_BACKEND_SCHEDULE_LOOP_TREE_TEXT_H_

#include <string>

#include "backend/schedule/loop_tree.h"

namespace looptool {

// The whole tree, each line ending in '\n'.
std::string LoopTreeText(const LoopTree& tree);

// One loop as `for`-line text without indent, ref or cursor: "n' in 8", "n in 1 r 80".
std::string LoopHeader(const Program& program, const LoopOrder& order, int depth);

// One leaf's operation: "%2[m, k, n] <- multiply(%0, %1)"; a streamed statement's write ends in
// " stream" ("%4[m, n] <- write(%3) stream"), a folded one's reduction in " fold"
// ("%1[r, c] <- max(%0) fold").
std::string LeafText(const LoopTree& tree, int ref);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_SCHEDULE_LOOP_TREE_TEXT_H_
