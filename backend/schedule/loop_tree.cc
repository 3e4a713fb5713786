#include "backend/schedule/loop_tree.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "util/check.h"

namespace looptool {
namespace {

template <typename... Args>
absl::Status Invalid(const Args&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

// Rules 1-3 of LoopTree::Create for one order. `vars` are the variables it must loop over.
absl::Status CheckOrder(const Program& program, const LoopOrder& order,
                        const std::vector<int>& vars, const std::string& where) {
  std::set<int> want(vars.begin(), vars.end()), have;
  // Innermost loop first, so that no extent computed below can overflow: each loop covers at
  // most its variable's extent (found by tools/fuzz.sh: a size of 2.5e18 overflowed).
  for (int d = static_cast<int>(order.size()) - 1; d >= 0; --d) {
    const Loop& l = order[d];
    if (l.var < 0 || l.var >= static_cast<int>(program.vars().size())) continue;  // below
    const int64_t extent = program.var(l.var).extent;
    if (l.size < 1 || l.tail < 0) break;  // reported below
    if (l.size > extent || l.tail > extent) {
      return Invalid(where, ": loop ", d + 1, " over '", program.var(l.var).name,
                     "' covers more than the variable's extent ", extent);
    }
    if (l.tail >= InnerExtent(order, d)) break;  // reported below
    if (Extent(order, d) > extent) {
      return Invalid(where, ": loop ", d + 1, " over '", program.var(l.var).name,
                     "' covers more than the variable's extent ", extent);
    }
  }
  int vectorized = 0;
  for (int d = 0; d < static_cast<int>(order.size()); ++d) {
    const Loop& l = order[d];
    if (l.var < 0 || l.var >= static_cast<int>(program.vars().size()) || !want.count(l.var)) {
      return Invalid(where, " loops over a variable its statement does not have");
    }
    const std::string& name = program.var(l.var).name;
    const int64_t inner = InnerExtent(order, d);
    if (l.size < 1) return Invalid(where, ": loop ", d + 1, " over '", name, "' has size ", l.size);
    if (l.tail < 0 || l.tail >= inner) {
      return Invalid(where, ": loop ", d + 1, " over '", name, "' has tail ", l.tail,
                     ", which must be below its inner extent ", inner);
    }
    if (l.vectorize) {
      ++vectorized;
      if (inner != 1) {
        return Invalid(where, ": loop ", d + 1, " over '", name,
                       "' is marked vectorize but is not the innermost loop over '", name, "'");
      }
    }
  }
  for (int d = 0; d < static_cast<int>(order.size()); ++d) {
    const Loop& l = order[d];
    if (!have.count(l.var) && Extent(order, d) != program.var(l.var).extent) {
      return Invalid(where, ": the loops over '", program.var(l.var).name, "' cover ",
                     Extent(order, d), " elements, not its extent ", program.var(l.var).extent);
    }
    have.insert(l.var);
  }
  if (have != want) {
    for (int v : want) {
      if (!have.count(v)) return Invalid(where, " has no loop over '", program.var(v).name, "'");
    }
  }
  if (vectorized > 1) return Invalid(where, " marks ", vectorized, " loops vectorize; at most one");
  return absl::OkStatus();
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
    absl::Status st = CheckOrder(*program, schedules[s].compute, program->LoopVars(s),
                                 absl::StrCat("the compute nest of statement ", s + 1));
    if (!st.ok()) return st;
    st = CheckOrder(*program, schedules[s].write, program->OutputVars(s),
                    absl::StrCat("the write nest of statement ", s + 1));
    if (!st.ok()) return st;
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
  nodes_.clear();
  compute_refs_.assign(schedules_.size(), {});
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
