#include "backend/interp/interpreter.h"

#include <algorithm>
#include <limits>
#include <random>

#include "eigen3/Eigen/Core"
#include "backend/ir/strides.h"
#include "util/check.h"

namespace looptool {
namespace {

// An affine address: offset + sum(stride[var] * value[var]).
struct Address {
  int64_t offset = 0;
  std::vector<int64_t> stride;  // per program variable

  int64_t At(const std::vector<int64_t>& value) const {
    int64_t a = offset;
    for (size_t v = 0; v < stride.size(); ++v) a += stride[v] * value[v];
    return a;
  }
};

Address AccessAddress(const Program& p, const Access& access) {
  Address a;
  a.stride.assign(p.vars().size(), 0);
  const std::vector<int64_t> dim_stride = RowMajorStrides(p.tensor(access.tensor).shape);
  for (size_t d = 0; d < dim_stride.size(); ++d) {
    a.offset += access.index[d].offset * dim_stride[d];
    for (const auto& t : access.index[d].terms) a.stride[t.var] += t.coeff * dim_stride[d];
  }
  return a;
}

// Row-major over `vars` with their extents.
Address DenseAddress(const Program& p, const std::vector<int>& vars) {
  Address a;
  a.stride.assign(p.vars().size(), 0);
  std::vector<int64_t> extents;
  for (int v : vars) extents.push_back(p.var(v).extent);
  const std::vector<int64_t> strides = RowMajorStrides(extents);
  for (size_t i = 0; i < vars.size(); ++i) a.stride[vars[i]] = strides[i];
  return a;
}

class Interpreter {
 public:
  Interpreter(const LoopTree& tree, TensorData& data, VisitCounts* counts)
      : tree_(tree), p_(tree.program()), data_(data), counts_(counts) {
    const int nv = static_cast<int>(p_.vars().size());
    base_.assign(nv, 0);
    limit_.assign(nv, 0);
    for (int v = 0; v < nv; ++v) limit_[v] = p_.var(v).extent;
    for (int s = 0; s < p_.num_statements(); ++s) {
      const Statement& st = p_.statement(s);
      StatementInfo info;
      for (const Access& in : st.inputs) info.inputs.push_back(AccessAddress(p_, in));
      info.output = AccessAddress(p_, st.output);
      info.accumulator = DenseAddress(p_, p_.OutputVars(s));
      info.iteration = DenseAddress(p_, p_.LoopVars(s));
      int64_t acc_size = 1;
      for (int v : p_.OutputVars(s)) acc_size *= p_.var(v).extent;
      const float init = st.reduction == Reduction::kMax ? -std::numeric_limits<float>::infinity()
                                                         : 0.0f;
      info.acc.assign(acc_size, init);
      stmts_.push_back(std::move(info));
      if (counts_) {
        counts_->compute.emplace_back(p_.IterationVolume(s), 0);
        counts_->write.emplace_back(acc_size, 0);
      }
    }
    children_.resize(tree.nodes().size());
    steps_.resize(tree.nodes().size());
    counts_scratch_.resize(tree.nodes().size());
    index_scratch_.resize(tree.nodes().size());
    leaf_parent_.assign(tree.nodes().size(), true);
    for (int ref = 0; ref < static_cast<int>(tree.nodes().size()); ++ref) {
      const TreeNode& n = tree.nodes()[ref];
      if (n.kind == TreeNode::Kind::kLeaf) leaf_parent_[ref] = false;
      if (n.parent >= 0) {
        children_[n.parent].push_back(ref);
        if (n.kind == TreeNode::Kind::kLoop) leaf_parent_[n.parent] = false;
      } else {
        roots_.push_back(ref);
      }
    }
    chains_.resize(tree.nodes().size());
    for (int r : roots_) ChainFrom(r);
  }

  void Run() {
    for (int r : roots_) Exec(r);
  }

 private:
  // How a leaf's addresses move along one loop (elements per iteration).
  struct Delta {
    int64_t x = 0, y = 0, acc = 0, out = 0;
  };
  // One leaf of a perfect nest's innermost loop (PerfectNest): its pointers at the current
  // iteration of the loops above and their steps along each loop of the nest.
  struct Step {
    TreeNode::Leaf kind;
    const Statement* st;
    int statement;
    const float* x = nullptr;
    const float* y = nullptr;
    float* acc = nullptr;
    float* out = nullptr;
    std::vector<Delta> along;  // per loop of the chain, outermost first

    // Only the pointers the leaf reads or writes move (the others stay null).
    void Advance(const Delta& d, int64_t times) {
      x += d.x * times;
      if (y != nullptr) y += d.y * times;
      acc += d.acc * times;
      if (out != nullptr) out += d.out * times;
    }
  };

  struct StatementInfo {
    std::vector<Address> inputs;
    Address output, accumulator, iteration;
    TensorBuffer acc;  // large ones mapped with their pages populated (CacheLineAllocator)
  };

  void Exec(int ref) {
    const TreeNode& n = tree_.nodes()[ref];
    if (n.kind == TreeNode::Kind::kLeaf) {
      Leaf(n);
      return;
    }
    if (!counts_ && !chains_[ref].empty()) {
      PerfectNest(ref);
      return;
    }
    const StatementSchedule& sched = tree_.schedule(n.statement);
    const int64_t inner = InnerExtent(n.in_compute ? sched.compute : sched.write, n.order_depth);
    const int v = n.loop.var;
    const int64_t base = base_[v], limit = limit_[v];
    const int64_t iterations = n.loop.size + (n.loop.tail > 0 ? 1 : 0);
    for (int64_t i = 0; i < iterations; ++i) {
      const int64_t start = i * inner;
      if (start >= limit) break;
      const int64_t chunk = i < n.loop.size ? inner : n.loop.tail;
      base_[v] = base + start;
      limit_[v] = std::min(chunk, limit - start);
      for (int c : children_[ref]) Exec(c);
    }
    base_[v] = base;
    limit_[v] = limit;
  }

  void Leaf(const TreeNode& n) {
    const Statement& st = p_.statement(n.statement);
    StatementInfo& info = stmts_[n.statement];
    float* acc = &info.acc[info.accumulator.At(base_)];
    switch (n.leaf) {
      case TreeNode::Leaf::kCombine: {
        const float x = data_[st.inputs[0].tensor][info.inputs[0].At(base_)];
        float value = x;
        if (st.combiner != Combiner::kIdentity) {
          const float y = data_[st.inputs[1].tensor][info.inputs[1].At(base_)];
          value = st.combiner == Combiner::kMultiply ? x * y : x + y;
        }
        combined_ = value;
        if (st.reduction == Reduction::kAssign) {
          *acc = value;
          Count(n);
        }
        return;
      }
      case TreeNode::Leaf::kReduce: {
        const float value = st.combiner == Combiner::kIdentity
                                ? data_[st.inputs[0].tensor][info.inputs[0].At(base_)]
                                : combined_;
        *acc = st.reduction == Reduction::kSum ? *acc + value : std::max(*acc, value);
        Count(n);
        return;
      }
      case TreeNode::Leaf::kWrite: {
        float value = *acc;
        if (st.post_op == PostOp::kRelu) value = std::max(value, 0.0f);
        data_[st.output.tensor][info.output.At(base_)] = value;
        if (counts_) ++counts_->write[n.statement][info.accumulator.At(base_)];
        return;
      }
    }
  }

  // Sets chains_ for `ref`'s subtree: chains_[ref] the loops of a perfect nest from `ref` down,
  // each the only child of the one above and the innermost loop over its variable (inner extent
  // 1, no tail), the last one's children all leaves; empty where `ref` does not start one.
  void ChainFrom(int ref) {
    const TreeNode& n = tree_.nodes()[ref];
    if (n.kind != TreeNode::Kind::kLoop) return;
    for (int c : children_[ref]) ChainFrom(c);
    const StatementSchedule& sched = tree_.schedule(n.statement);
    if (n.loop.tail != 0 ||
        InnerExtent(n.in_compute ? sched.compute : sched.write, n.order_depth) != 1) {
      return;
    }
    if (leaf_parent_[ref]) {
      chains_[ref] = {ref};
    } else if (children_[ref].size() == 1 && !chains_[children_[ref][0]].empty()) {
      chains_[ref] = {ref};
      const std::vector<int>& below = chains_[children_[ref][0]];
      chains_[ref].insert(chains_[ref].end(), below.begin(), below.end());
    }
  }

  // The generic loops' work for a perfect nest (chains_[ref]), with the leaves' addresses
  // stepped instead of recomputed: the interpreter's hot path. The loops' variables are not
  // set in base_ as they run: nothing below them reads it.
  void PerfectNest(int ref) {
    const std::vector<int>& chain = chains_[ref];
    const int depth = static_cast<int>(chain.size());
    // The leaves' strides along each loop of the chain are fixed: worked out once per chain,
    // and only their pointers at this iteration of the loops above computed here.
    std::vector<Step>& steps = steps_[ref];
    if (steps.empty()) {
      for (int c : children_[chain.back()]) {
        const TreeNode& leaf = tree_.nodes()[c];
        const Statement& st = p_.statement(leaf.statement);
        const StatementInfo& info = stmts_[leaf.statement];
        Step s{leaf.leaf, &st, leaf.statement};
        for (int level : chain) {
          const int v = tree_.nodes()[level].loop.var;
          Delta d;
          d.acc = info.accumulator.stride[v];
          d.x = info.inputs[0].stride[v];
          if (st.inputs.size() > 1) d.y = info.inputs[1].stride[v];
          if (leaf.leaf == TreeNode::Leaf::kWrite) d.out = info.output.stride[v];
          s.along.push_back(d);
        }
        steps.push_back(s);
      }
    }
    std::vector<int64_t>& counts = counts_scratch_[ref];
    counts.assign(depth, 0);
    for (int l = 0; l < depth; ++l) {
      const TreeNode& n = tree_.nodes()[chain[l]];
      counts[l] = std::min(n.loop.size, limit_[n.loop.var]);
      if (counts[l] <= 0) return;
    }
    for (Step& s : steps) {
      const Statement& st = *s.st;
      StatementInfo& info = stmts_[s.statement];
      s.acc = &info.acc[info.accumulator.At(base_)];
      s.x = &data_[st.inputs[0].tensor][info.inputs[0].At(base_)];
      if (st.inputs.size() > 1) s.y = &data_[st.inputs[1].tensor][info.inputs[1].At(base_)];
      if (s.kind == TreeNode::Leaf::kWrite) {
        s.out = &data_[st.output.tensor][info.output.At(base_)];
      }
    }
    std::vector<int64_t>& index = index_scratch_[ref];
    index.assign(depth, 0);
    const int inner = depth - 1;
    // A sum of products alone in its loop (every contraction's start) reads the combine leaf's
    // pointers only: the reduce leaf's are not stepped.
    const bool fused = FusedProduct(steps);
    const size_t stepped = fused ? 1 : steps.size();
    while (true) {
      if (fused) {
        ProductInner(steps[0], inner, counts[inner]);
      } else {
        RunInner(steps, inner, counts[inner]);
      }
      // The next iteration of the loops above the innermost (an odometer), pointers stepped.
      int l = inner - 1;
      for (; l >= 0; --l) {
        if (++index[l] < counts[l]) {
          for (size_t i = 0; i < stepped; ++i) steps[i].Advance(steps[i].along[l], 1);
          break;
        }
        for (size_t i = 0; i < stepped; ++i) {
          steps[i].Advance(steps[i].along[l], -(counts[l] - 1));
        }
        index[l] = 0;
      }
      if (l < 0) return;
    }
  }

  // Whether `steps` are a multiply leaf and the sum that reduces it, alone (ProductInner).
  static bool FusedProduct(const std::vector<Step>& steps) {
    return steps.size() == 2 && steps[0].kind == TreeNode::Leaf::kCombine &&
           steps[1].kind == TreeNode::Leaf::kReduce && steps[0].st == steps[1].st &&
           steps[0].st->combiner == Combiner::kMultiply &&
           steps[0].st->reduction == Reduction::kSum;
  }

  // One run of the innermost loop (level `inner` of the chain) of a multiply leaf and its sum
  // (FusedProduct), `count` iterations from its pointers (left as they are).
  void ProductInner(const Step& step, int inner, int64_t count) {
    const float *x = step.x, *y = step.y;
    float* acc = step.acc;
    const Delta& d = step.along[inner];
    const int64_t dx = d.x, dy = d.y, dacc = d.acc;
    float value = 0;
    if (dacc == 1 && (dx == 0 || dy == 0)) {
      // Along an output row, one factor fixed (a convolution's weight, a matmul's A[m, k]).
      const float* v = dy == 0 ? x : y;
      const int64_t dv = dy == 0 ? dx : dy;
      const float w = dy == 0 ? *y : *x;
      if (dv == 1) {  // an axpy (Eigen's, vectorised: the same products and sums)
        Eigen::Map<Eigen::ArrayXf>(acc, count) += Eigen::Map<const Eigen::ArrayXf>(v, count) * w;
      } else {
        for (int64_t i = 0; i < count; ++i) acc[i] += v[i * dv] * w;
      }
      value = v[(count - 1) * dv] * w;
    } else if (dacc == 0) {  // along the reduction: the same sum, held in a register
      float sum = *acc;
      for (int64_t i = 0; i < count; ++i) {
        value = x[i * dx] * y[i * dy];
        sum += value;
      }
      *acc = sum;
    } else {
      for (int64_t i = 0; i < count; ++i) {
        value = x[i * dx] * y[i * dy];
        acc[i * dacc] += value;
      }
    }
    combined_ = value;
  }

  // One run of the innermost loop of `steps`' chain (level `inner`), `count` iterations from
  // their pointers (left as they are).
  void RunInner(std::vector<Step>& steps, int inner, int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
      for (Step& s : steps) {
        const Statement& st = *s.st;
        const Delta& d = s.along[inner];
        switch (s.kind) {
          case TreeNode::Leaf::kCombine: {
            float value = s.x[i * d.x];
            if (st.combiner == Combiner::kMultiply) value *= s.y[i * d.y];
            if (st.combiner == Combiner::kAdd) value += s.y[i * d.y];
            combined_ = value;
            if (st.reduction == Reduction::kAssign) s.acc[i * d.acc] = value;
            break;
          }
          case TreeNode::Leaf::kReduce: {
            const float value = st.combiner == Combiner::kIdentity ? s.x[i * d.x] : combined_;
            float& acc = s.acc[i * d.acc];
            acc = st.reduction == Reduction::kSum ? acc + value : std::max(acc, value);
            break;
          }
          case TreeNode::Leaf::kWrite: {
            float value = s.acc[i * d.acc];
            if (st.post_op == PostOp::kRelu) value = std::max(value, 0.0f);
            s.out[i * d.out] = value;
            break;
          }
        }
      }
    }
  }

  void Count(const TreeNode& n) {
    if (counts_) ++counts_->compute[n.statement][stmts_[n.statement].iteration.At(base_)];
  }

  const LoopTree& tree_;
  const Program& p_;
  TensorData& data_;
  VisitCounts* counts_;
  std::vector<StatementInfo> stmts_;
  std::vector<std::vector<int>> children_;
  std::vector<bool> leaf_parent_;  // loops whose children are all leaves (the last of a chain)
  std::vector<int> roots_;
  std::vector<int64_t> base_, limit_;  // per variable: first element and elements available
  float combined_ = 0;                 // the combine leaf's value, read by the reduce leaf
  std::vector<std::vector<int>> chains_;   // per loop: the perfect nest it starts (ChainFrom)
  std::vector<std::vector<Step>> steps_;   // per chain's first loop: its leaves (PerfectNest)
  std::vector<std::vector<int64_t>> counts_scratch_, index_scratch_;  // per chain, reused
};

}  // namespace

TensorData AllocateTensors(const Program& program) {
  TensorData data;
  for (int t = 0; t < static_cast<int>(program.tensors().size()); ++t) {
    // Tensor t starts 17 t cache lines past a page: the same place in every process, and no
    // two of the first tensors at the same offset within their pages.
    data.emplace_back(program.NumElements(t), 0.0f,
                      CacheLineAllocator<float>(static_cast<size_t>(t) * 17 * 64));
  }
  return data;
}

void FillInputs(const Program& program, uint64_t seed, bool small_integers, TensorData& data) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> reals(-1.0f, 1.0f);
  for (int t : program.InputTensors()) {
    if (!small_integers) {
      for (float& x : data[t]) x = reals(rng);
      continue;
    }
    // Eight integers per draw, one per byte (byte % 5 - 2: 0 a 1/256 likelier than the others),
    // a tenth of a distribution call's cost each (a reference's inputs reach millions).
    uint64_t bits = 0;
    for (size_t i = 0; i < data[t].size(); ++i) {
      if (i % 8 == 0) bits = rng();
      data[t][i] = static_cast<float>(static_cast<int>(bits & 0xff) % 5 - 2);
      bits >>= 8;
    }
  }
}

void Interpret(const LoopTree& tree, TensorData& data, VisitCounts* counts) {
  LT_CHECK(data.size() == tree.program().tensors().size());
  Interpreter(tree, data, counts).Run();
}

}  // namespace looptool
