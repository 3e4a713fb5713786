#include "backend/schedule/loop_tree_text.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace looptool {
namespace {

std::string VarList(const Program& program, const std::vector<int>& vars) {
  std::vector<std::string> names;
  for (int v : vars) names.push_back(program.var(v).name);
  return absl::StrCat("[", absl::StrJoin(names, ", "), "]");
}

int ReadId(const Program& program, int tensor) {
  const std::vector<int> inputs = program.InputTensors();
  return static_cast<int>(std::find(inputs.begin(), inputs.end(), tensor) - inputs.begin());
}

}  // namespace

std::string LoopHeader(const Program& program, const LoopOrder& order, int depth) {
  const Loop& l = order[depth];
  std::string s = program.var(l.var).name;
  s.append(VarDepth(order, depth), '\'');
  absl::StrAppend(&s, " in ", l.size);
  if (l.tail) absl::StrAppend(&s, " r ", l.tail);
  return s;
}

std::string LeafText(const LoopTree& tree, int ref) {
  const TreeNode& n = tree.nodes()[ref];
  const Program& p = tree.program();
  const Statement& st = p.statement(n.statement);
  auto input = [&](int i) { return absl::StrCat("%", ReadId(p, st.inputs[i].tensor)); };
  const std::string out_vars = VarList(p, p.OutputVars(n.statement));
  switch (n.leaf) {
    case TreeNode::Leaf::kCombine: {
      if (st.combiner == Combiner::kIdentity) {
        return absl::StrCat("%", n.node_id, out_vars, " <- copy(", input(0), ")");
      }
      const char* op = st.combiner == Combiner::kMultiply ? "multiply" : "add";
      return absl::StrCat("%", n.node_id, VarList(p, p.LoopVars(n.statement)), " <- ", op, "(",
                          input(0), ", ", input(1), ")");
    }
    case TreeNode::Leaf::kReduce: {
      const char* op = st.reduction == Reduction::kSum ? "add" : "max";
      const std::string arg = st.combiner == Combiner::kIdentity
                                  ? input(0)
                                  : absl::StrCat("%", n.node_id - 1);
      return absl::StrCat("%", n.node_id, out_vars, " <- ", op, "(", arg, ")",
                          tree.schedule(n.statement).fold ? " fold" : "");
    }
    case TreeNode::Leaf::kWrite: {
      std::string arg = absl::StrCat("%", n.node_id - 1);
      if (st.post_op == PostOp::kRelu) arg = absl::StrCat("relu(", arg, ")");
      return absl::StrCat("%", n.node_id, out_vars, " <- write(", arg, ")",
                          tree.schedule(n.statement).stream ? " stream" : "");
    }
  }
  return "";
}

std::string LoopTreeText(const LoopTree& tree) {
  std::string out;
  const int cursor = tree.cursor_ref();
  for (int ref = 0; ref < static_cast<int>(tree.nodes().size()); ++ref) {
    const TreeNode& n = tree.nodes()[ref];
    out.append(n.depth, ' ');
    if (n.kind == TreeNode::Kind::kLeaf) {
      absl::StrAppend(&out, LeafText(tree, ref), "\n");
      continue;
    }
    const StatementSchedule& sched = tree.schedule(n.statement);
    const LoopOrder& order = n.in_compute ? sched.compute : sched.write;
    absl::StrAppend(&out, "for ", LoopHeader(tree.program(), order, n.order_depth), " : L", ref);
    if (n.loop.unroll) absl::StrAppend(&out, " unroll");
    if (n.loop.vectorize) absl::StrAppend(&out, " vectorize");
    if (ref == cursor) absl::StrAppend(&out, "  <<<<<< cursor (line ", ref, " )");
    out += "\n";
  }
  return out;
}

}  // namespace looptool
