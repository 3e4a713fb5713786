// LoopTree: the state an agent edits. A Program plus, for each statement, the loop order of its
// compute nest and of its write-back nest, and a cursor on one compute loop. As in loop_tool, the
// two nests of a statement share their common leading loops, so the state reads as a tree; a
// LoopTree is an immutable value and actions map one to the next (backend/actions).
//
// The tree view numbers loops and leaves in pre-order (TreeRefs, loop_tool's `L<ref>`). For
// `C[m,n] += A[m,k] * B[k,n]` the initial tree is LoopTune's:
//
//   for m in 112 : L0  <<<<<< cursor (line 0 )
//    for k in 256 : L1
//     for n in 208 : L2
//      %2[m, k, n] <- multiply(%0, %1)
//      %3[m, n] <- add(%2)
//    for n in 208 : L5
//     %4[m, n] <- write(%3)
#ifndef LOOPTOOL_BACKEND_SCHEDULE_LOOP_TREE_H_
#define LOOPTOOL_BACKEND_SCHEDULE_LOOP_TREE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/ir/program.h"
#include "backend/schedule/loop.h"

namespace looptool {

// The schedule of one statement: its compute nest (every variable of the statement) and its
// write-back nest (the output variables; it writes the finished accumulator to the output and
// applies the post-op), whether the code generator stores the output with non-temporal
// stores, past the caches (`stream`; only a statement that assigns each output element once),
// and whether it folds a stride-2 window's rows before permuting them (`fold`; only a sum or max
// of one operand read with stride 2: a pool's window).
struct StatementSchedule {
  LoopOrder compute;
  LoopOrder write;
  bool stream = false;
  bool fold = false;
  bool operator==(const StatementSchedule& o) const {
    return compute == o.compute && write == o.write && stream == o.stream && fold == o.fold;
  }
};

// Whether statement `stmt` of `program` may carry a `fold` mark: it sums or maxes one operand
// (no combiner) whose elements step by 2 along some variable (a stride-2 window's columns) and
// by more than 2 along some reduction variable (its rows: a window of several).
bool CanFoldRows(const Program& program, int stmt);

// The cursor sits on a compute loop: statement index and depth in its compute order.
struct Cursor {
  int statement = 0;
  int depth = 0;
  bool operator==(const Cursor& o) const { return statement == o.statement && depth == o.depth; }
};

// One line of the tree: a loop, or a leaf (an operation of the program).
struct TreeNode {
  enum class Kind { kLoop, kLeaf };
  // kCombine: multiply/add of the operands, or copy; kReduce: the add/max reduction of the
  // combined value into the accumulator; kWrite: accumulator to output (with the post-op).
  enum class Leaf { kCombine, kReduce, kWrite };

  Kind kind = Kind::kLoop;
  int parent = -1;  // TreeRef of the enclosing loop, -1 for a root
  int depth = 0;    // nesting depth, 0 for a root
  int statement = 0;
  // Loops only.
  Loop loop;
  int order_depth = 0;      // index in the order(s) the loop belongs to
  bool in_compute = false;  // the loop is compute[order_depth]
  bool in_write = false;    // the loop is write[order_depth] (both when shared)
  // loop.size times the enclosing loop's `iterations` (1 for a root): the product of `size`
  // over the loop and every loop around it; tails (partial iterations) are not counted.
  int64_t iterations = 0;
  // Leaves only.
  Leaf leaf = Leaf::kCombine;
  int node_id = 0;  // the `%id` of the operation
};

class LoopTree {
 public:
  // The untiled initial state: each compute nest loops over Program::LoopVars in that order,
  // each write-back nest over the output variables in the compute nest's order (so the two share
  // their leading loops), cursor on the first loop.
  static LoopTree Initial(std::shared_ptr<const Program> program);

  // A state from explicit orders. Checks, per statement: 1) the compute order loops over exactly
  // the statement's variables and the write order over exactly its output variables; 2) every
  // loop has size >= 1 and 0 <= tail < its inner extent, and the outermost loop over each
  // variable covers the variable's extent; 3) `vectorize` marks at most one loop per order, and
  // only the innermost loop over its variable; 4) `stream` marks only a statement that assigns
  // its output (Reduction::kAssign); 5) `fold` marks only a statement CanFoldRows allows; 6) the
  // cursor names an existing compute loop.
  // Returns INVALID_ARGUMENT saying which rule failed where.
  static absl::StatusOr<LoopTree> Create(std::shared_ptr<const Program> program,
                                         std::vector<StatementSchedule> schedules, Cursor cursor);

  const Program& program() const { return *program_; }
  const std::shared_ptr<const Program>& program_ptr() const { return program_; }
  const std::vector<StatementSchedule>& schedules() const { return schedules_; }
  const StatementSchedule& schedule(int stmt) const { return schedules_[stmt]; }
  Cursor cursor() const { return cursor_; }
  // The same schedules with the cursor elsewhere. REQUIRES: `cursor` names a compute loop.
  LoopTree WithCursor(Cursor cursor) const;

  // Pre-order tree view: loops and leaves; indices are TreeRefs.
  const std::vector<TreeNode>& nodes() const { return nodes_; }
  int num_loops() const { return num_loops_; }
  int cursor_ref() const { return ComputeLoopRef(cursor_.statement, cursor_.depth); }
  // TreeRef of compute[depth] of a statement.
  int ComputeLoopRef(int stmt, int depth) const { return compute_refs_[stmt][depth]; }
  // Number of leading loops the statement's compute and write nests share.
  int SharedDepth(int stmt) const { return shared_[stmt]; }
  // All compute loops in cursor order (statement by statement, outermost first).
  std::vector<Cursor> CursorPositions() const;

  // Value equality of program, schedules and cursor.
  bool operator==(const LoopTree& o) const;
  bool operator!=(const LoopTree& o) const { return !(*this == o); }

 private:
  LoopTree(std::shared_ptr<const Program> program, std::vector<StatementSchedule> schedules,
           Cursor cursor);
  void BuildTreeView();

  std::shared_ptr<const Program> program_;
  std::vector<StatementSchedule> schedules_;
  Cursor cursor_;
  // Derived.
  std::vector<TreeNode> nodes_;
  std::vector<std::vector<int>> compute_refs_;
  std::vector<int> shared_;
  int num_loops_ = 0;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_SCHEDULE_LOOP_TREE_H_
