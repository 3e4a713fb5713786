#include "backend/codegen/kernel_plan.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "backend/ir/printer.h"
#include "backend/ir/strides.h"
#include "util/check.h"

namespace looptool {
namespace {

AccessPlan PlanAccess(const Program& p, const Access& a) {
  AccessPlan plan;
  plan.tensor = a.tensor;
  plan.stride.assign(p.vars().size(), 0);
  const std::vector<int64_t> dim_stride = RowMajorStrides(p.tensor(a.tensor).shape);
  for (size_t d = 0; d < dim_stride.size(); ++d) {
    plan.offset += a.index[d].offset * dim_stride[d];
    for (const auto& t : a.index[d].terms) plan.stride[t.var] += t.coeff * dim_stride[d];
  }
  return plan;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Elements of `var` the loops at depth >= p cover (1 when none of them runs over `var`).
int64_t CoveredInside(const std::vector<LoopPlan>& loops, int p, int var) {
  for (int j = p; j < static_cast<int>(loops.size()); ++j) {
    if (loops[j].var == var) return loops[j].size * loops[j].inner + loops[j].tail;
  }
  return 1;
}

// Vector chunks the loops over the vector variable at depth >= j emit for `limit` elements
// (a loop of 8 over a vector of 16 lanes emits one masked chunk per iteration).
int64_t VectorChunks(const StatementPlan& s, int j, int64_t limit) {
  const int v = s.loops[s.vector_loop].var;
  for (; j < static_cast<int>(s.loops.size()); ++j) {
    const LoopPlan& l = s.loops[j];
    if (l.var != v) continue;
    if (l.vector) return CeilDiv(limit, s.width);
    const int64_t full = limit / l.inner, rem = limit % l.inner;
    return full * VectorChunks(s, j + 1, l.inner) + (rem ? VectorChunks(s, j + 1, rem) : 0);
  }
  return 1;
}

// Accumulator registers when the scope starts at depth p.
int64_t Footprint(const StatementPlan& s, const std::vector<int>& out_vars, int p) {
  const int v = s.loops[s.vector_loop].var;
  int64_t f = 1;
  for (int u : out_vars) {
    const int64_t covered = CoveredInside(s.loops, p, u);
    if (u == v && !s.horizontal) {
      f *= s.vector_loop >= p ? VectorChunks(s, p, covered) : 1;
    } else {
      f *= covered;
    }
  }
  return f;
}

// Iterations of loop j as emitted (vector loops count chunks).
int64_t EmittedCount(const LoopPlan& l, int width) {
  return l.vector ? CeilDiv(l.size, width) : l.size + (l.tail > 0 ? 1 : 0);
}

// Operations in loops[j..] fully unrolled, saturating.
int64_t UnrolledOps(const std::vector<LoopPlan>& loops, int j, int width) {
  int64_t ops = 1;
  for (int i = j; i < static_cast<int>(loops.size()); ++i) {
    ops *= EmittedCount(loops[i], width);
    if (ops > (int64_t{1} << 40)) return ops;
  }
  return ops;
}

// Element counts of `var` that reach its vector loop under every combination of tails, and so
// the masked lane counts (count % width) its chunks can have.
void CollectTailLanes(const StatementPlan& s, std::set<int>& lanes) {
  const int v = s.loops[s.vector_loop].var;
  std::set<int64_t> limits = {0};
  bool first = true;
  for (const LoopPlan& l : s.loops) {
    if (l.var != v) continue;
    const int64_t extent = l.size * l.inner + l.tail;
    if (first) limits = {extent};
    first = false;
    if (l.vector) break;
    std::set<int64_t> next;
    for (int64_t lim : limits) {
      if (lim / l.inner > 0) next.insert(l.inner);
      if (lim % l.inner) next.insert(lim % l.inner);
    }
    limits = std::move(next);
  }
  for (int64_t lim : limits) {
    if (lim % s.width) lanes.insert(static_cast<int>(lim % s.width));
  }
}

// StatementPlan::half_width_tails, and a note where the statement has such a chunk.
void PlanHalfWidthTails(const Program& p, Isa isa, const CodegenOptions& options,
                        StatementPlan& s) {
  if (!options.half_width_stride_two_tails || isa != Isa::kAvx512 || s.width != 16 ||
      s.horizontal) {
    return;
  }
  const int v = s.loops[s.vector_loop].var;
  bool stride_two = false;
  for (const AccessPlan& a : s.inputs) {
    stride_two = stride_two || (a.kind == AccessPlan::Kind::kStrided && a.stride[v] == 2);
  }
  if (!stride_two) return;
  s.half_width_tails = true;
  std::set<int> tails;
  CollectTailLanes(s, tails);
  if (tails.count(s.width / 2)) {
    s.notes.push_back(absl::StrCat("the last chunk of 8 lanes along '", p.var(v).name,
                                   "' runs at 8 lanes, after the block's others"));
  }
}

// The statement's loops, its accesses and which loop is vectorized (the one marked, else the
// innermost), before any decision.
StatementPlan PlanLoops(const Program& p, int s, const LoopOrder& order) {
  const Statement& st = p.statement(s);
  StatementPlan sp;
  sp.statement = s;
  sp.reduction = st.reduction;
  sp.combiner = st.combiner;
  sp.post_op = st.post_op;
  sp.output = PlanAccess(p, st.output);
  for (const Access& in : st.inputs) sp.inputs.push_back(PlanAccess(p, in));
  sp.vector_loop = static_cast<int>(order.size()) - 1;
  for (int j = 0; j < static_cast<int>(order.size()); ++j) {
    if (order[j].vectorize) sp.vector_loop = j;
  }
  for (int j = 0; j < static_cast<int>(order.size()); ++j) {
    LoopPlan l;
    l.var = order[j].var;
    l.size = order[j].size;
    l.tail = order[j].tail;
    l.unroll_marked = order[j].unroll;
    l.inner = InnerExtent(order, j);
    l.vector = j == sp.vector_loop;
    l.reduction = p.IsReductionVar(s, l.var);
    sp.loops.push_back(l);
  }
  LT_CHECK(sp.loops[sp.vector_loop].inner == 1);
  return sp;
}

// Vector chunks that `elements` take (AVX-512: 8 lanes for 8 or fewer elements), and how many
// of them are masked, as one number that orders loops by both (chunks first).
int64_t ChunkCost(Isa isa, int64_t elements) {
  const int width = isa == Isa::kAvx512 && elements <= 8 ? 8 : Traits(isa).vector_width;
  return 2 * CeilDiv(elements, width) + (elements % width != 0);
}

// Where every tensor is contiguous across the vector loop and the loop just outside it, the two
// become one vector loop (Halide's fuse, decided here, not scheduled): each access must move
// along the outer variable exactly the vector loop's extent times as far as along the vector
// variable (C[h,w] = A[h,w] + B[h,w]: h moves 7 elements, w 1, w's loop runs 7), the vector
// loop must be the only one over its variable, the outer loop the innermost over its own (the
// inner part of a split is fine: the loops over it outside keep stepping it) with no loop over
// that variable leaving a remainder, and the fused loop must take fewer vector chunks, or as
// many with fewer masked (a 7 x 7 map: 4 chunks of 16 lanes, one masked, instead of 7 masked
// chunks of 7). Repeats outward while it pays. The fused loop keeps the vector variable; the
// outer variable's position stays where the loops outside put it.
void FuseContiguousLoops(const Program& p, Isa isa, StatementPlan& sp) {
  auto only_loop_over = [&](int var) {
    int count = 0;
    for (const LoopPlan& l : sp.loops) count += l.var == var;
    return count == 1;
  };
  // Every loop over `var` runs whole steps: no remainder anywhere, so the innermost one always
  // runs its full size (a split loop's last iteration would otherwise run fewer).
  auto no_tails_over = [&](int var) {
    return std::none_of(sp.loops.begin(), sp.loops.end(),
                        [&](const LoopPlan& l) { return l.var == var && l.tail != 0; });
  };
  while (sp.vector_loop > 0) {
    LoopPlan& inner = sp.loops[sp.vector_loop];
    const LoopPlan& outer = sp.loops[sp.vector_loop - 1];
    const int v = inner.var, u = outer.var;
    // `outer` is the innermost loop over u (one element per iteration), possibly the inner part
    // of a split u: the loops over u outside it keep stepping u as before.
    if (u == v || !only_loop_over(v) || inner.tail != 0 || !no_tails_over(u) || outer.inner != 1) {
      return;
    }
    auto contiguous = [&](const AccessPlan& a) { return a.stride[u] == inner.size * a.stride[v]; };
    if (!contiguous(sp.output) || !std::all_of(sp.inputs.begin(), sp.inputs.end(), contiguous)) {
      return;
    }
    const int64_t fused = outer.size * inner.size;
    if (ChunkCost(isa, fused) >= outer.size * ChunkCost(isa, inner.size)) return;
    sp.notes.push_back(absl::StrCat("loops over '", p.var(u).name, "' (", outer.size, ") and '",
                                    p.var(v).name, "' (", inner.size,
                                    ") fused: the tensors are contiguous across them"));
    inner.size = fused;
    sp.loops.erase(sp.loops.begin() + (sp.vector_loop - 1));
    --sp.vector_loop;
  }
}

// The vector width: the ISA's, when every tensor moves by 0 to kMaxVectorStride elements along
// the vector variable (else scalar code, with a note), and how each is accessed: broadcast
// (stride 0; the output: a horizontal statement), vector (1) or strided (more).
void PlanVectorization(const Program& p, Isa isa, StatementPlan& sp) {
  const Statement& st = p.statement(sp.statement);
  const int v = sp.loops[sp.vector_loop].var;
  sp.width = Traits(isa).vector_width;
  // AVX-512 vectorizes a loop of 8 or fewer elements at 8 lanes (ymm, EVEX): as many useful
  // lanes per instruction as 16 would give, and on cores that split 512-bit operations in two
  // (AMD Zen 4) twice the instructions per cycle.
  if (isa == Isa::kAvx512 && sp.loops[sp.vector_loop].size <= 8) sp.width = 8;
  // Tensors may be strided up to kMaxVectorStride (a gather's or scatter's lane offsets are
  // 32-bit).
  auto check = [&](const AccessPlan& a, const std::string& name) {
    const int64_t stride = a.stride[v];
    const bool vectorizable = stride >= 0 && stride <= kMaxVectorStride;
    if (!vectorizable && sp.width > 1) {
      sp.width = 1;
      sp.notes.push_back(absl::StrCat("scalar code: ", name, " has stride ", a.stride[v],
                                      " along '", p.var(v).name, "'"));
    }
  };
  check(sp.output, p.tensor(st.output.tensor).name);
  for (size_t i = 0; i < sp.inputs.size(); ++i) {
    check(sp.inputs[i], p.tensor(st.inputs[i].tensor).name);
  }
  sp.horizontal = sp.width > 1 && sp.output.stride[v] == 0;
  if (sp.width > 1 && sp.output.stride[v] > 1) {
    sp.output.kind = AccessPlan::Kind::kStrided;
    sp.notes.push_back(absl::StrCat(
        p.tensor(st.output.tensor).name, " written with stride ", sp.output.stride[v],
        " along '", p.var(v).name, "': ",
        isa == Isa::kAvx512 ? "a scatter" : "lane by lane", " per vector",
        sp.reduction == Reduction::kAssign ? "" : " (loaded the same way where the block "
                                                  "resumes a partial result)"));
  }
  for (size_t i = 0; i < sp.inputs.size(); ++i) {
    AccessPlan& a = sp.inputs[i];
    a.kind = sp.width == 1 || a.stride[v] == 1 ? AccessPlan::Kind::kVector
             : a.stride[v] == 0              ? AccessPlan::Kind::kBroadcast
                                             : AccessPlan::Kind::kStrided;
    if (a.kind == AccessPlan::Kind::kStrided) {
      sp.notes.push_back(absl::StrCat(
          p.tensor(st.inputs[i].tensor).name, " read with stride ", a.stride[v], " along '",
          p.var(v).name, "': ",
          a.stride[v] == 2 ? "two loads and a permute per vector, " : "",
          a.stride[v] == 2         ? "masked loads and a permute"
          : isa == Isa::kAvx512   ? "a gather"
                                  : "lane by lane",
          a.stride[v] == 2 ? " when masked" : " per vector",
          st.reduction == Reduction::kAssign && st.combiner == Combiner::kIdentity
              ? " (a register block of half a vector or more of consecutive elements: rows "
                "loaded as vectors and transposed in registers)"
              : ""));
    }
  }
}

// The register scope: the outermost depth whose output block fits the accumulators the
// statement's register budget leaves.
void PlanRegisterScope(const Program& p, Isa isa, StatementPlan& sp) {
  sp.budget = BudgetFor(isa, sp.width, sp.post_op);
  const std::vector<int> out_vars = p.OutputVars(sp.statement);
  const int n = static_cast<int>(sp.loops.size());
  sp.scope = n;
  for (int depth = 0; depth <= n; ++depth) {
    if (Footprint(sp, out_vars, depth) <= sp.budget.accumulators) {
      sp.scope = depth;
      break;
    }
  }
  sp.accumulators = static_cast<int>(Footprint(sp, out_vars, sp.scope));
}

// Unrolling: output loops in the scope always (their accumulators are fixed registers);
// reduction loops in the scope while the unrolled body is small; `unroll` marks while the
// unrolled loop is not too large (else a note).
void PlanUnrolling(const CodegenOptions& options, StatementPlan& sp) {
  for (int j = 0; j < static_cast<int>(sp.loops.size()); ++j) {
    LoopPlan& l = sp.loops[j];
    l.in_scope = j >= sp.scope;
    const int64_t ops = UnrolledOps(sp.loops, j, sp.width);
    if (l.in_scope && !l.reduction) {
      l.unrolled = true;
    } else if (l.in_scope && ops <= options.max_unrolled_ops) {
      l.unrolled = true;
    } else if (l.unroll_marked) {
      if (ops <= options.max_annotated_unroll_ops) {
        l.unrolled = true;
      } else {
        sp.notes.push_back(absl::StrCat("unroll of loop ", j + 1, " ignored: ", ops,
                                        " operations unrolled exceed ",
                                        options.max_annotated_unroll_ops));
      }
    }
  }
}

// Small blocks spread over accumulator sets: where the reduction is vertical and some reduction
// loop inside the scope is unrolled (its steps are the ones that alternate sets).
void PlanAccumulatorSets(StatementPlan& sp) {
  if (sp.horizontal || (sp.reduction != Reduction::kSum && sp.reduction != Reduction::kMax)) {
    return;
  }
  sp.spread_small_blocks = std::any_of(sp.loops.begin(), sp.loops.end(), [](const LoopPlan& l) {
    return l.in_scope && l.reduction && l.unrolled && l.size >= 2;
  });
}

// Streams the output's stores where the schedule marks the statement (StatementSchedule::stream)
// or the options ask for it by size, and every full-vector store is aligned to the vector's bytes
// relative to the tensor's base: the output's offset and each loop's step along it are multiples
// of the width (a vector loop steps by the width, stride 1).
void PlanStreaming(const Program& p, const CodegenOptions& options, bool marked,
                   StatementPlan& sp) {
  const bool by_size = options.stream_output_min_bytes > 0 &&
                       p.NumElements(sp.output.tensor) * 4 >= options.stream_output_min_bytes;
  if (sp.reduction != Reduction::kAssign || (!marked && !by_size)) return;
  if (sp.width == 1 || sp.horizontal || sp.output.kind == AccessPlan::Kind::kStrided) {
    if (marked) sp.notes.push_back("stores not streamed: the output is not stored by vectors");
    return;
  }
  const auto refuse = [&](const std::string& why) {
    sp.notes.push_back(absl::StrCat("stores not streamed: ", why, " is not a multiple of ",
                                    sp.width, " elements"));
  };
  const LoopPlan& vector = sp.loops[sp.vector_loop];
  if (vector.size * vector.inner + vector.tail < sp.width) return;  // no full vector to store
  if (sp.output.offset % sp.width != 0) return refuse("the output's offset");
  for (const LoopPlan& l : sp.loops) {
    const int64_t step = l.vector ? sp.width : l.inner;
    if (step * sp.output.stride[l.var] % sp.width != 0) {
      return refuse(absl::StrCat("the output's step along '", p.var(l.var).name, "'"));
    }
  }
  sp.stream_output = true;
  sp.notes.push_back(absl::StrCat(
      "stores streamed (non-temporal) where the output's base is aligned to ", sp.width * 4,
      " bytes; plain stores otherwise"));
}

}  // namespace

KernelPlan Lower(const LoopTree& tree, Isa isa, const CodegenOptions& options) {
  const Program& p = tree.program();
  KernelPlan plan;
  plan.isa = isa;
  std::set<int> lanes;
  for (int s = 0; s < p.num_statements(); ++s) {
    const LoopOrder& order = tree.schedule(s).compute;
    StatementPlan sp = PlanLoops(p, s, order);
    sp.pair_phases = options.pair_stride_two_phases;
    sp.shift_taps = options.shift_stride_two_taps;
    sp.shift_unit_taps = options.shift_unit_stride_taps;
    sp.masked_stride_two = options.masked_stride_two_economies;
    sp.fold_rows = tree.schedule(s).fold;
    if (sp.fold_rows && isa != Isa::kAvx512) {
      sp.notes.push_back("rows not folded: a fold permutes with AVX-512's two-source permutes");
    }
    FuseContiguousLoops(p, isa, sp);
    PlanVectorization(p, isa, sp);
    if (sp.width > 1) CollectTailLanes(sp, lanes);
    PlanHalfWidthTails(p, isa, options, sp);
    PlanRegisterScope(p, isa, sp);
    PlanUnrolling(options, sp);
    PlanAccumulatorSets(sp);
    PlanStreaming(p, options, tree.schedule(s).stream, sp);
    plan.statements.push_back(std::move(sp));
  }
  plan.tail_lanes.assign(lanes.begin(), lanes.end());
  return plan;
}

std::string DescribePlan(const KernelPlan& plan, const Program& p) {
  std::string out;
  for (const StatementPlan& s : plan.statements) {
    absl::StrAppend(&out, "statement ", s.statement + 1, ": ",
                    PrintStatement(p, p.statement(s.statement)), "\n  ", Traits(plan.isa).name,
                    ", ", s.width, s.width == 1 ? " lane" : " lanes",
                    s.horizontal ? ", horizontal" : "", ", ", s.accumulators,
                    " accumulator", s.accumulators == 1 ? "" : "s", "\n");
    for (const std::string& note : s.notes) absl::StrAppend(&out, "  note: ", note, "\n");
    std::vector<int> seen(p.vars().size(), 0);
    for (int j = 0; j <= static_cast<int>(s.loops.size()); ++j) {
      const std::string indent(2 + j, ' ');
      if (j == s.scope) absl::StrAppend(&out, indent, "-- register scope\n");
      if (j == static_cast<int>(s.loops.size())) break;
      const LoopPlan& l = s.loops[j];
      std::string name = p.var(l.var).name;
      name.append(seen[l.var]++, '\'');
      absl::StrAppend(&out, indent, "for ", name, " in ", l.size);
      if (l.tail) absl::StrAppend(&out, " r ", l.tail);
      if (l.inner > 1) absl::StrAppend(&out, " step ", l.inner);
      if (l.vector && s.width > 1) absl::StrAppend(&out, " by ", s.width, " lanes");
      absl::StrAppend(&out, l.unrolled ? " (unrolled)" : " (loop)", "\n");
    }
  }
  return out;
}

}  // namespace looptool
