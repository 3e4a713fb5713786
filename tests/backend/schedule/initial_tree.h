// Test helper: the untiled initial LoopTree of a program written in the loop-nest language.
#ifndef LOOPTOOL_TESTS_BACKEND_SCHEDULE_INITIAL_TREE_H_
#define LOOPTOOL_TESTS_BACKEND_SCHEDULE_INITIAL_TREE_H_

#include <string>

#include "backend/schedule/loop_tree.h"

namespace looptool::testing {

// LoopTree::Initial of `program` parsed with default Limits. REQUIRES: `program` parses (a parse
// error fails the test, then aborts on the empty StatusOr).
LoopTree Initial(const std::string& program);

}  // namespace looptool::testing

#endif  // LOOPTOOL_TESTS_BACKEND_SCHEDULE_INITIAL_TREE_H_
