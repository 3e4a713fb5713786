#include "backend/schedule/loop_tree.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "backend/schedule/order_rules.h"
#include "util/check.h"

namespace looptool {
namespace {

template <typename... Args>
absl::Status Invalid(const Args&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

}  // namespace

bool CanFoldRows(const Program& program, int stmt) {
  const Statement& st = program.statement(stmt);
  if (st.reduction == Reduction::kAssign || st.combiner != Combiner::kIdentity) return false;
  bool stride_two = false, rows = false;
  for (int v : program.LoopVars(stmt)) {
    const int64_t stride = program.ElementStride(st.inputs[0], v);
    stride_two = stride_two || stride == 2;
    rows = rows || (stride > 2 && program.IsReductionVar(stmt, v));
  }
  return stride_two && rows;
}

LoopTree::LoopTree(std::shared_ptr<const Program> program,
                   std::vector<StatementSchedule> schedules, Cursor cursor)
    : program_(std::move(program)), schedules_(std::move(schedules)), cursor_(cursor) {
  BuildTreeView();
}

LoopTree LoopTree::Initial(std::shared_ptr<const Program> program) {
  std::vector<StatementSchedule> schedules;
  for (int s = 0; s < program->num_statements(); ++s) {
    StatementSchedule sched;
    const std::vector<int> out = program->OutputVars(s);
    for (int v : program->LoopVars(s)) {
      const Loop loop{v, program->var(v).extent, 0};
      sched.compute.push_back(loop);
      if (std::find(out.begin(), out.end(), v) != out.end()) sched.write.push_back(loop);
    }
    schedules.push_back(std::move(sched));
  }
  return LoopTree(std::move(program), std::move(schedules), Cursor{0, 0});
}

absl::StatusOr<LoopTree> LoopTree::Create(std::shared_ptr<const Program> program,
                                          std::vector<StatementSchedule> schedules,
                                          Cursor cursor) {
  if (static_cast<int>(schedules.size()) != program->num_statements()) {
    return Invalid("the schedule has ", schedules.size(), " statements; the program has ",
                   program->num_statements());
  }
  for (int s = 0; s < program->num_statements(); ++s) {
    for (const bool compute : {true, false}) {
      const LoopOrder& order = compute ? schedules[s].compute : schedules[s].write;
      const std::vector<int> vars = compute ? program->LoopVars(s) : program->OutputVars(s);
      if (schedule_internal::OrderHolds(*program, order, vars)) continue;
      absl::Status st = schedule_internal::CheckOrder(
          *program, order, vars,
          absl::StrCat("the ", compute ? "compute" : "write", " nest of statement ", s + 1));
      if (!st.ok()) return st;
    }
    if (schedules[s].stream && program->statement(s).reduction != Reduction::kAssign) {
      return Invalid("statement ", s + 1,
                     " accumulates into its output; only an output assigned once streams");
    }
    if (schedules[s].fold && !CanFoldRows(*program, s)) {
      return Invalid("statement ", s + 1,
                     " is not a sum or max of one operand read with stride 2; only such a "
                     "window's rows fold");
    }
  }
  if (cursor.statement < 0 || cursor.statement >= program->num_statements() || cursor.depth < 0 ||
      cursor.depth >= static_cast<int>(schedules[cursor.statement].compute.size())) {
    return Invalid("the cursor (statement ", cursor.statement + 1, ", loop ", cursor.depth + 1,
                   ") is not on a compute loop");
  }
  return LoopTree(std::move(program), std::move(schedules), cursor);
}

LoopTree LoopTree::WithCursor(Cursor cursor) const {
  LT_CHECK(cursor.statement >= 0 && cursor.statement < program_->num_statements());
  LT_CHECK(cursor.depth >= 0 &&
           cursor.depth < static_cast<int>(schedules_[cursor.statement].compute.size()));
  LoopTree t = *this;
  t.cursor_ = cursor;
  return t;
}

std::vector<Cursor> LoopTree::CursorPositions() const {
  std::vector<Cursor> out;
  for (int s = 0; s < static_cast<int>(schedules_.size()); ++s) {
    for (int d = 0; d < static_cast<int>(schedules_[s].compute.size()); ++d) out.push_back({s, d});
  }
  return out;
}

bool LoopTree::operator==(const LoopTree& o) const {
  return (program_ == o.program_ || *program_ == *o.program_) && schedules_ == o.schedules_ &&
         cursor_ == o.cursor_;
}

void LoopTree::BuildTreeView() {
  // At most every loop of both nests and three leaves per statement (an action mask builds
  // hundreds of trees: no reallocation as they grow).
  size_t most = 0;
  for (const StatementSchedule& sched : schedules_) {
    most += sched.compute.size() + sched.write.size() + 3;
  }
  nodes_.clear();
  nodes_.reserve(most);
  compute_refs_.assign(schedules_.size(), {});
  for (size_t s = 0; s < schedules_.size(); ++s) {
    compute_refs_[s].reserve(schedules_[s].compute.size());
  }
  shared_.assign(schedules_.size(), 0);
  num_loops_ = 0;
  int next_id = static_cast<int>(program_->InputTensors().size());  // reads are %0..%(n-1)

  // Which of a statement's nests a loop belongs to.
  enum class Nests { kBoth, kCompute, kWrite };
  // Appends loop `order_depth` of `stmt`'s nests under `parent` (at tree depth `depth`, with
  // `iters` iterations down to it); returns its node's index.
  auto push_loop = [&](int stmt, const Loop& loop, int order_depth, Nests nests, int parent,
                       int depth, int64_t iters) {
    TreeNode n;
    n.kind = TreeNode::Kind::kLoop;
    n.parent = parent;
    n.depth = depth;
    n.statement = stmt;
    n.loop = loop;
    n.order_depth = order_depth;
    n.in_compute = nests != Nests::kWrite;
    n.in_write = nests != Nests::kCompute;
    n.iterations = iters;
    nodes_.push_back(n);
    ++num_loops_;
    const int ref = static_cast<int>(nodes_.size()) - 1;
    if (n.in_compute) compute_refs_[stmt].push_back(ref);
    return ref;
  };
  auto push_leaf = [&](int stmt, TreeNode::Leaf leaf, int parent, int depth) {
    TreeNode n;
    n.kind = TreeNode::Kind::kLeaf;
    n.parent = parent;
    n.depth = depth;
    n.statement = stmt;
    n.leaf = leaf;
    n.node_id = next_id++;
    nodes_.push_back(n);
  };

  for (int s = 0; s < static_cast<int>(schedules_.size()); ++s) {
    const LoopOrder& c = schedules_[s].compute;
    const LoopOrder& w = schedules_[s].write;
    int shared = 0;
    while (shared < static_cast<int>(c.size()) && shared < static_cast<int>(w.size()) &&
           c[shared] == w[shared]) {
      ++shared;
    }
    shared_[s] = shared;
    int parent = -1, depth = 0;
    int64_t iters = 1;
    for (int d = 0; d < shared; ++d) {
      iters *= c[d].size;
      parent = push_loop(s, c[d], d, Nests::kBoth, parent, depth++, iters);
    }
    const int branch_parent = parent, branch_depth = depth;
    const int64_t branch_iters = iters;
    for (int d = shared; d < static_cast<int>(c.size()); ++d) {
      iters *= c[d].size;
      parent = push_loop(s, c[d], d, Nests::kCompute, parent, depth++, iters);
    }
    const Statement& st = program_->statement(s);
    if (st.combiner != Combiner::kIdentity || st.reduction == Reduction::kAssign) {
      push_leaf(s, TreeNode::Leaf::kCombine, parent, depth);
    }
    if (st.reduction != Reduction::kAssign) push_leaf(s, TreeNode::Leaf::kReduce, parent, depth);
    parent = branch_parent;
    depth = branch_depth;
    iters = branch_iters;
    for (int d = shared; d < static_cast<int>(w.size()); ++d) {
      iters *= w[d].size;
      parent = push_loop(s, w[d], d, Nests::kWrite, parent, depth++, iters);
    }
    push_leaf(s, TreeNode::Leaf::kWrite, parent, depth);
  }
}

}  // namespace looptool
