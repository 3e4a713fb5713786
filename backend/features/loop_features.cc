#include "backend/features/loop_features.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/features/stride_histogram.h"
#include "util/check.h"

namespace looptool {
namespace {

float Log2p1(double x) { return static_cast<float>(std::log2(1.0 + std::max(x, 0.0))); }

// How the statement's accesses use one variable (columns 12-16, 20, 21).
struct VarUse {
  float reduced = 0, output_last = 0, input_last = 0, unused = 0, min_stride = 0, coeff = 0,
        window = 0;
};

bool Uses(const Access& a, int var) {
  for (const AffineIndex& ix : a.index) {
    if (ix.Coefficient(var) != 0) return true;
  }
  return false;
}

VarUse UseOf(const Program& p, int stmt, int var) {
  const Statement& s = p.statement(stmt);
  VarUse u;
  u.reduced = p.IsReductionVar(stmt, var) ? 1.0f : 0.0f;
  u.output_last = !s.output.index.empty() && s.output.index.back().Coefficient(var) != 0;
  int inputs_last = 0, unused = 0, using_it = 0, windows = 0;
  int64_t min_stride = 0, max_coeff = 1;
  std::vector<const Access*> all = {&s.output};
  for (const Access& a : s.inputs) all.push_back(&a);
  for (const Access* a : all) {
    if (!Uses(*a, var)) {
      ++unused;
      continue;
    }
    ++using_it;
    if (a != &s.output && a->index.back().Coefficient(var) != 0) ++inputs_last;
    const int64_t stride = p.ElementStride(*a, var);
    if (stride > 0 && (min_stride == 0 || stride < min_stride)) min_stride = stride;
    bool window = false;
    for (const AffineIndex& ix : a->index) {
      const int64_t c = ix.Coefficient(var);
      if (c == 0) continue;
      max_coeff = std::max(max_coeff, c);
      if (ix.terms.size() > 1) window = true;
    }
    windows += window ? 1 : 0;
  }
  u.input_last = s.inputs.empty() ? 0.0f : float(inputs_last) / float(s.inputs.size());
  u.unused = float(unused) / float(all.size());
  u.min_stride = Log2p1(static_cast<double>(min_stride));
  u.coeff = static_cast<float>(std::log2(static_cast<double>(max_coeff)));
  u.window = using_it == 0 ? 0.0f : float(windows) / float(using_it);
  return u;
}

}  // namespace

std::vector<float> LoopFeatures(const LoopTree& tree, int max_rows) {
  LT_CHECK(max_rows >= 1);
  std::vector<float> out(static_cast<size_t>(max_rows) * kLoopSetFeatures, 0.0f);
  const Program& program = tree.program();
  int row = 0;
  for (const Cursor& c : tree.CursorPositions()) {
    if (row == max_rows) break;
    const LoopOrder& order = tree.schedule(c.statement).compute;
    const Loop& loop = order[c.depth];
    const int ref = tree.ComputeLoopRef(c.statement, c.depth);
    const TreeNode& node = tree.nodes()[ref];
    bool innermost = true;
    for (size_t d = c.depth + 1; d < order.size(); ++d) innermost &= order[d].var != loop.var;
    const VarUse use = UseOf(program, c.statement, loop.var);
    float* r = &out[static_cast<size_t>(row++) * kLoopSetFeatures];
    r[0] = 1.0f;
    r[1] = Log2p1(static_cast<double>(loop.size));
    r[2] = Log2p1(static_cast<double>(loop.tail));
    r[3] = Log2p1(static_cast<double>(Extent(order, c.depth)));
    r[4] = Log2p1(static_cast<double>(InnerExtent(order, c.depth)));
    r[5] = Log2p1(static_cast<double>(program.var(loop.var).extent));
    r[6] = static_cast<float>(c.depth);
    r[7] = static_cast<float>(order.size() - 1 - c.depth);
    r[8] = static_cast<float>(VarDepth(order, c.depth));
    r[9] = innermost ? 1.0f : 0.0f;
    r[10] = loop.vectorize ? 1.0f : 0.0f;
    r[11] = loop.unroll ? 1.0f : 0.0f;
    r[12] = use.reduced;
    r[13] = use.output_last;
    r[14] = use.input_last;
    r[15] = use.unused;
    r[16] = use.min_stride;
    r[17] = node.in_write ? 1.0f : 0.0f;
    r[18] = Log2p1(static_cast<double>(node.iterations));
    r[19] = static_cast<float>(c.statement);
    r[20] = use.coeff;
    r[21] = use.window;
    const StrideHistogram h = MakeStrideHistogram(LoopStrideAccesses(tree, ref), true);
    for (int b = 0; b < kStrideBuckets; ++b) r[22 + b] = static_cast<float>(h[b]);
  }
  return out;
}

}  // namespace looptool
