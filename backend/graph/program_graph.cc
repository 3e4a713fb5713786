#include "backend/graph/program_graph.h"

#include "absl/strings/str_cat.h"
#include "backend/features/stride_histogram.h"
#include "backend/schedule/loop_tree_text.h"

namespace looptool {
namespace {

using Vertex = ProgramGraph::vertex_descriptor;

const char* OpName(const Statement& st, TreeNode::Leaf leaf) {
  switch (leaf) {
    case TreeNode::Leaf::kCombine:
      if (st.combiner == Combiner::kIdentity) return "copy";
      return st.combiner == Combiner::kMultiply ? "multiply" : "add";
    case TreeNode::Leaf::kReduce:
      return st.reduction == Reduction::kSum ? "add" : "max";
    case TreeNode::Leaf::kWrite:
      return "write";
  }
  return "?";
}

// Loop and compute vertices in tree order with nesting edges; returns TreeRef -> vertex.
std::vector<Vertex> AddTree(const LoopTree& tree, ProgramGraph& g) {
  std::vector<Vertex> vertex_of(tree.nodes().size());
  const int cursor = tree.cursor_ref();
  for (int ref = 0; ref < static_cast<int>(tree.nodes().size()); ++ref) {
    const TreeNode& n = tree.nodes()[ref];
    GraphNode v;
    v.ref = ref;
    if (n.kind == TreeNode::Kind::kLoop) {
      const StatementSchedule& s = tree.schedule(n.statement);
      v.type = GraphNode::Type::kLoop;
      v.label = LoopHeader(tree.program(), n.in_compute ? s.compute : s.write, n.order_depth);
      v.var = tree.program().var(n.loop.var).name;
      v.size = n.loop.size;
      v.tail = n.loop.tail;
      v.cursor = ref == cursor;
      v.unroll = n.loop.unroll;
      v.vectorize = n.loop.vectorize;
      v.in_compute = n.in_compute;
    } else {
      v.type = GraphNode::Type::kCompute;
      v.label = LeafText(tree, ref);
      v.op = OpName(tree.program().statement(n.statement), n.leaf);
    }
    vertex_of[ref] = boost::add_vertex(v, g);
    if (n.parent >= 0) boost::add_edge(vertex_of[n.parent], vertex_of[ref], GraphEdge{}, g);
  }
  return vertex_of;
}

}  // namespace

ProgramGraph BuildTreeGraph(const LoopTree& tree) {
  ProgramGraph g;
  AddTree(tree, g);
  return g;
}

ProgramGraph BuildProgramGraph(const LoopTree& tree) {
  ProgramGraph g;
  const std::vector<Vertex> vertex_of = AddTree(tree, g);
  const Program& p = tree.program();

  std::vector<Vertex> tensor_vertex;
  for (const Tensor& t : p.tensors()) {
    GraphNode v;
    v.type = GraphNode::Type::kData;
    v.label = t.name;
    v.shape = t.shape;
    tensor_vertex.push_back(boost::add_vertex(v, g));
  }
  std::vector<Vertex> accumulator_vertex;
  for (int s = 0; s < p.num_statements(); ++s) {
    GraphNode v;
    v.type = GraphNode::Type::kData;
    v.label = absl::StrCat("acc", s + 1);
    for (int var : p.OutputVars(s)) v.shape.push_back(p.var(var).extent);
    accumulator_vertex.push_back(boost::add_vertex(v, g));
  }

  const auto& nodes = tree.nodes();
  for (int ref = 0; ref < static_cast<int>(nodes.size()); ++ref) {
    const TreeNode& n = nodes[ref];
    const Statement& st = p.statement(n.statement);
    if (n.kind == TreeNode::Kind::kLeaf) {
      const Vertex op = vertex_of[ref];
      const Vertex acc = accumulator_vertex[n.statement];
      const GraphEdge flow{GraphEdge::Type::kFlow};
      const bool reads_inputs = n.leaf == TreeNode::Leaf::kCombine ||
                                (n.leaf == TreeNode::Leaf::kReduce &&
                                 st.combiner == Combiner::kIdentity);
      if (reads_inputs) {
        for (const Access& in : st.inputs) boost::add_edge(tensor_vertex[in.tensor], op, flow, g);
      }
      if (n.leaf == TreeNode::Leaf::kWrite) {
        boost::add_edge(acc, op, flow, g);
        boost::add_edge(op, tensor_vertex[st.output.tensor], flow, g);
      } else {
        boost::add_edge(op, acc, flow, g);
      }
      continue;
    }
    // Access edges: one per access under this loop with a non-zero stride along it.
    for (const StrideAccess& a : LoopStrideAccesses(tree, ref)) {
      const Vertex data = a.tensor >= 0 ? tensor_vertex[a.tensor] : accumulator_vertex[n.statement];
      boost::add_edge(vertex_of[ref], data,
                      GraphEdge{GraphEdge::Type::kAccess, a.stride, a.frequency}, g);
    }
  }
  return g;
}

}  // namespace looptool
