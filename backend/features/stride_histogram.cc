#include "backend/features/stride_histogram.h"

#include "backend/ir/strides.h"

namespace looptool {
namespace {

// Row-major stride of `var` in the statement's accumulator, which is laid out over the output
// variables in output order.
int64_t AccumulatorStride(const Program& p, int stmt, int var) {
  const std::vector<int> out = p.OutputVars(stmt);
  std::vector<int64_t> shape;
  for (int v : out) shape.push_back(p.var(v).extent);
  const std::vector<int64_t> strides = RowMajorStrides(shape);
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == var) return strides[i];
  }
  return 0;
}

}  // namespace

std::vector<StrideAccess> LoopStrideAccesses(const LoopTree& tree, int ref) {
  const auto& nodes = tree.nodes();
  const TreeNode& loop = nodes[ref];
  const Program& p = tree.program();
  const Statement& st = p.statement(loop.statement);
  const StatementSchedule& sched = tree.schedule(loop.statement);
  const int var = loop.loop.var;
  std::vector<StrideAccess> out;
  auto add = [&](int64_t element_stride, const LoopOrder& order, int tensor) {
    const int64_t stride = element_stride * InnerExtent(order, loop.order_depth);
    if (stride > 0) out.push_back({stride, loop.iterations, tensor});
  };
  for (int i = ref + 1; i < static_cast<int>(nodes.size()) && nodes[i].depth > loop.depth; ++i) {
    const TreeNode& n = nodes[i];
    if (n.kind != TreeNode::Kind::kLeaf) continue;
    switch (n.leaf) {
      case TreeNode::Leaf::kCombine:
        for (const Access& in : st.inputs) {
          add(p.ElementStride(in, var), sched.compute, in.tensor);
        }
        break;
      case TreeNode::Leaf::kReduce:
        if (st.combiner == Combiner::kIdentity) {
          add(p.ElementStride(st.inputs[0], var), sched.compute, st.inputs[0].tensor);
        }
        break;
      case TreeNode::Leaf::kWrite:
        if (!loop.in_compute) add(AccumulatorStride(p, loop.statement, var), sched.write, -1);
        break;
    }
  }
  return out;
}

int StrideBucket(int64_t stride) {
  int bucket = 0;
  while ((int64_t{1} << bucket) < stride) ++bucket;
  return bucket < kStrideBuckets ? bucket : -1;
}

StrideHistogram MakeStrideHistogram(const std::vector<StrideAccess>& accesses, bool normalize) {
  StrideHistogram h{};
  double total = 0;
  for (const StrideAccess& a : accesses) {
    const int b = StrideBucket(a.stride);
    if (b < 0) continue;
    h[b] += static_cast<double>(a.frequency);
    total += static_cast<double>(a.frequency);
  }
  if (normalize && total > 0) {
    for (double& v : h) v /= total;
  }
  return h;
}

}  // namespace looptool
