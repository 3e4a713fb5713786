// The `ir` observation: a LoopTree as text, the program followed by its schedule, such that
// ParseIr(PrintIr(t)) == t:
//
//   C[m, n] += A[m, k] * B[k, n]
//   m=112 n=208 k=256
//   compute 1: n(1 r 80) n(8) m(28) k(256) m(4) n(16)
//   write 1: m(28) m(4) n(208)
//   cursor 1 1
//
// `compute S:` and `write S:` list statement S's loops outermost first as var(size[ r tail]
// [ unroll][ vectorize]); `stream S` marks statement S's output stores non-temporal
// (StatementSchedule::stream); `fold S` folds statement S's stride-2 window rows before the
// permutes (StatementSchedule::fold); `cursor S D` puts the cursor on compute loop D of
// statement S (both 1-based). Statements without schedule lines keep the initial schedule; a
// text without a cursor line has the cursor on the first loop.
#ifndef LOOPTOOL_BACKEND_SCHEDULE_IR_TEXT_H_
#define LOOPTOOL_BACKEND_SCHEDULE_IR_TEXT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/schedule/loop_tree.h"
#include "backend/ir/limits.h"

namespace looptool {

std::string PrintIr(const LoopTree& tree);

// The schedule lines alone, without the cursor: the key under which a schedule's kernel and
// timing are cached (the cursor changes neither).
std::string ScheduleKey(const LoopTree& tree);

// Parses a program with an optional schedule. INVALID_ARGUMENT names line and column for syntax
// errors, the rule for invalid schedules (LoopTree::Create), and the cap for a tree of more than
// limits.max_loops loops.
absl::StatusOr<LoopTree> ParseIr(absl::string_view text, const Limits& limits);

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_SCHEDULE_IR_TEXT_H_
