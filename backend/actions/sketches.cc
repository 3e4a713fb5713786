#include "backend/actions/sketches.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/actions/apply.h"
#include "backend/codegen/isa.h"
#include "backend/codegen/register_budget.h"

namespace looptool {
namespace {

// Register blocks (rows, vectors), best first: the tiles of bench/hand_schedules.cc's fastest
// kernels (4 x 4 vectors, 4 x 3, 8 x 2) lead; rows 1 only for outputs with one variable.
constexpr std::pair<int, int> kBlocks[] = {{4, 4},  {4, 3}, {8, 2},  {6, 3}, {6, 2}, {6, 4},
                                           {12, 2}, {16, 1}, {24, 1}, {12, 1}, {8, 3}, {3, 4},
                                           {2, 4},  {8, 1}, {1, 4},  {1, 3}, {1, 2}, {1, 1}};
// A reduction longer than this gets a variant tiled by kReductionTile.
constexpr int64_t kReductionUntiledMax = 96;
constexpr int kReductionTile = 64;

// One loop of the wanted order: a variable and which of its loops (0 the outer, 1 the inner of a
// split; 0 for an unsplit variable).
struct Slot {
  int var;
  int part;
};

struct Plan {
  std::vector<std::pair<int, int64_t>> splits;  // variable, inner size
  std::vector<Slot> order;                      // outer to inner
  std::string description;
  int accumulators = 0;
};

// The actions that turn `tree`'s untiled compute nest of statement `stmt` into `plan`, each
// applying in turn, and the tree they reach; nullopt when one would not apply.
std::optional<std::pair<std::vector<Action>, LoopTree>> Realize(const LoopTree& tree, int stmt,
                                                                const Plan& plan,
                                                                const Limits& limits) {
  int base = 0;  // the level pointer of the statement's outermost compute loop
  for (const Cursor& c : tree.CursorPositions()) {
    if (c.statement == stmt) break;
    ++base;
  }
  constexpr int kLevels = 16;  // loop_nest's level pointers
  LoopTree t = tree;
  std::vector<Action> actions;
  const auto apply = [&](const Action& a) {
    if (a.level >= kLevels || a.target >= kLevels) return false;
    ActionResult r = Apply(t, a, limits);
    if (!r.had_effect()) return false;
    t = std::move(r.tree);
    actions.push_back(a);
    return true;
  };
  for (const auto& [var, size] : plan.splits) {
    const LoopOrder& o = t.schedule(stmt).compute;
    int d = 0;
    while (o[d].var != var) ++d;
    if (!apply({Action::Kind::kSplit, static_cast<int>(size), base + d})) return std::nullopt;
  }
  for (int i = 0; i < static_cast<int>(plan.order.size()); ++i) {
    const LoopOrder& o = t.schedule(stmt).compute;
    int j = i;
    while (j < static_cast<int>(o.size()) &&
           !(o[j].var == plan.order[i].var && VarDepth(o, j) == plan.order[i].part)) {
      ++j;
    }
    if (j == static_cast<int>(o.size())) return std::nullopt;
    if (j != i && !apply({Action::Kind::kInterchange, 0, base + j, base + i})) {
      return std::nullopt;
    }
  }
  return std::make_pair(std::move(actions), std::move(t));
}

// What the costliest statement's nest offers the sketches, when rules 1) and 2) hold.
struct Nest {
  int stmt = 0;
  int v = 0;                    // the vector variable: the output's last, or rule 2')'s
  int64_t ev = 0;               // its extent
  std::vector<int> out;         // the output's variables
  std::vector<int> rows_vars;   // the others, those the vector operands do not read first; {-1}
                                // for a 1-D output
  std::vector<int> block_vars;  // output variables that pick a block of the vector operands
                                // (their outermost index) and that no broadcast operand reads
  std::vector<int> reductions;  // in loop order
  int largest = -1;             // the longest reduction (-1: none)
  std::vector<int64_t> reduction_tiles;  // the largest's tile sizes tried (0: untiled)
  int max_accumulators = 0;     // what the code generator leaves the output block
  std::vector<std::pair<int64_t, int>> vector_blocks;  // v's size (0: all of v), vectors
};

// The largest input stride along the vector variable a sketch takes: a convolution's or
// pooling's stride (two loads and a permute for 2, a gather above); a transpose's stride is a
// row's length, where a gather per vector is no start.
constexpr int64_t kMaxSketchStride = 4;

// The floats of a cache line (64 bytes on every x86-64 target).
constexpr int kLineFloats = 16;

struct Candidate {
  int rank;  // lower first
  Plan plan;
};

bool Contains(const std::vector<int>& xs, int x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}

// The statement the sketches schedule: the one with the most FLOPs (the first of equals).
int CostliestStatement(const Program& p) {
  int stmt = 0;
  for (int s = 1; s < p.num_statements(); ++s) {
    if (p.StatementFlops(s) > p.StatementFlops(stmt)) stmt = s;
  }
  return stmt;
}

// The nest of `tree`'s costliest statement, or nullopt where rules 1) or 2) fail. With
// `vector_var` (an output variable other than the last), the nest vectorized along it instead,
// where rule 2') holds: the statement is a sum or max, the output is strided along it (its
// accumulators are stored by a scatter) and every input reads it with stride 0 or 1, one at
// least with 1 (O[k,h,w] += I[c,h,w] * W[c,k] along k).
std::optional<Nest> AnalyzeNest(const LoopTree& tree, const SketchOptions& options,
                                int vector_var = -1) {
  const Program& p = tree.program();
  if (p.num_statements() == 0) return std::nullopt;
  const int lanes = Traits(options.target).vector_width;
  Nest n;
  n.stmt = CostliestStatement(p);
  // 1) Untiled.
  std::set<int> seen;
  for (const Loop& loop : tree.schedule(n.stmt).compute) {
    if (!seen.insert(loop.var).second) return std::nullopt;
  }
  // 2) The vector variable steps by 1 in the output and by 0 to kMaxSketchStride in every input
  // (a stride above 1 is a strided load: VectorOps::LoadStrided).
  const Statement& st = p.statement(n.stmt);
  n.out = p.OutputVars(n.stmt);
  if (n.out.empty()) return std::nullopt;
  n.v = vector_var >= 0 ? vector_var : n.out.back();
  n.ev = p.var(n.v).extent;
  if (n.ev < 2) return std::nullopt;
  if (vector_var < 0 && p.ElementStride(st.output, n.v) != 1) return std::nullopt;
  if (vector_var >= 0 &&
      (vector_var == n.out.back() || !Contains(n.out, vector_var) ||
       (st.reduction != Reduction::kSum && st.reduction != Reduction::kMax) ||
       p.ElementStride(st.output, n.v) <= 1 ||
       p.ElementStride(st.output, n.v) > kMaxVectorStride)) {  // scalar code otherwise
    return std::nullopt;
  }
  const int64_t max_stride = vector_var >= 0 ? 1 : kMaxSketchStride;
  std::vector<const Access*> vector_operands;
  for (const Access& in : st.inputs) {
    const int64_t stride = p.ElementStride(in, n.v);
    if (stride < 0 || stride > max_stride) return std::nullopt;
    if (stride >= 1) vector_operands.push_back(&in);
  }
  if (vector_var >= 0 && vector_operands.empty()) return std::nullopt;
  // Row variables: the other output variables, those the vector operands do not read first (a
  // vector loaded once serves every row).
  for (int x : n.out) {
    if (x != n.v && p.var(x).extent > 1) n.rows_vars.push_back(x);
  }
  const auto reads = [&](int x) {
    int count = 0;
    for (const Access* a : vector_operands) count += p.ElementStride(*a, x) != 0;
    return count;
  };
  std::stable_sort(n.rows_vars.begin(), n.rows_vars.end(),
                   [&](int a, int b) { return reads(a) < reads(b); });
  // Block variables: a weight blocked by output channel, W[b,r,s,c,k'] of O[h,w,b,k'], reads
  // b outermost and the input I[h+r,w+s,c] not at all; each b's block of W serves every row of
  // the map, so b's loop goes outside everything (the reduction's tile included) and that block
  // stays in cache while the rows pass (oneDNN's blocked weights,
  // bench/results/layout_blocked_weights.md). So: some input is a broadcast operand (reads no
  // v) and none of those reads x; every vector operand reads x with its largest stride and no
  // other row variable (a batch n of I[n,c,h+r,w+s] is no block: I's block is one row's).
  const bool broadcasts = std::any_of(st.inputs.begin(), st.inputs.end(), [&](const Access& in) {
    return p.ElementStride(in, n.v) == 0;
  });
  for (int x : n.rows_vars) {
    bool block = broadcasts && !vector_operands.empty();
    for (const Access& in : st.inputs) {
      const int64_t stride = p.ElementStride(in, x);
      if (p.ElementStride(in, n.v) == 0) {
        block &= stride == 0;  // a broadcast operand: must not read x
        continue;
      }
      for (int y : p.LoopVars(n.stmt)) block &= stride > 0 && p.ElementStride(in, y) <= stride;
      for (int y : n.rows_vars) block &= y == x || p.ElementStride(in, y) == 0;
    }
    if (block) n.block_vars.push_back(x);
  }
  if (n.rows_vars.empty()) n.rows_vars.push_back(-1);
  // Reductions, the largest of which may be tiled.
  for (int x : p.LoopVars(n.stmt)) {
    if (std::find(n.out.begin(), n.out.end(), x) != n.out.end()) continue;
    n.reductions.push_back(x);
    if (n.largest < 0 || p.var(x).extent > p.var(n.largest).extent) n.largest = x;
  }
  n.reduction_tiles = {0};
  if (n.largest >= 0 && p.var(n.largest).extent > kReductionUntiledMax) {
    n.reduction_tiles.insert(n.reduction_tiles.begin(), kReductionTile);
  }
  n.max_accumulators = BudgetFor(options.target, lanes, st.post_op).accumulators;
  // v's blocks: 1-4 vectors, or all of v when it fits in 4.
  for (int c = 1; c <= 4; ++c) {
    if (int64_t{c} * lanes < n.ev) n.vector_blocks.push_back({int64_t{c} * lanes, c});
  }
  if (n.ev <= 4 * lanes) {
    n.vector_blocks.push_back({0, static_cast<int>((n.ev + lanes - 1) / lanes)});
  }
  return n;
}

// The share of its vectors' lanes a nest's vector variable fills (full-width vectors; AVX-512's
// 8-lane vectors of short loops count as half empty): along the output's last variable, with
// the output variables outside it across which every tensor is contiguous taken in as the code
// generator fuses them (kernel_plan.cc, FuseContiguousLoops) where that fills more.
double LaneUse(const Program& p, const Nest& n, int lanes) {
  const auto use = [&](int64_t e) {
    return static_cast<double>(e) / static_cast<double>((e + lanes - 1) / lanes * lanes);
  };
  const Statement& st = p.statement(n.stmt);
  double best = use(n.ev);
  if (n.v != n.out.back()) return best;
  int64_t fused = n.ev;
  for (int i = static_cast<int>(n.out.size()) - 2; i >= 0; --i) {
    const int u = n.out[i];
    bool contiguous = p.ElementStride(st.output, u) == fused * p.ElementStride(st.output, n.v);
    for (const Access& in : st.inputs) {
      contiguous &= p.ElementStride(in, u) == fused * p.ElementStride(in, n.v);
    }
    if (!contiguous) break;
    fused *= p.var(u).extent;
    best = std::max(best, use(fused));
  }
  return best;
}

// The block variables a plan puts outermost: those not among the block's own row variables.
std::vector<int> BlockVarsOutside(const Nest& n, const std::vector<int>& rows) {
  std::vector<int> outer;
  for (int x : n.block_vars) {
    if (!Contains(rows, x)) outer.push_back(x);
  }
  return outer;
}

// One-variable blocks: `rows` of u x v's vectors innermost, the reductions around them, the
// outer tiles outside. A second row variable or an untiled reduction ranks with blocks a few
// places down.
void AddOneVariableBlocks(const Program& p, const Nest& n, std::vector<Candidate>& out) {
  for (int b = 0; b < static_cast<int>(std::size(kBlocks)); ++b) {
    const auto [rows, vectors] = kBlocks[b];
    if (rows * vectors > n.max_accumulators) continue;
    for (const auto& [nb, c] : n.vector_blocks) {
      if (c != vectors) continue;
      for (int ui = 0; ui < static_cast<int>(n.rows_vars.size()); ++ui) {
        const int u = n.rows_vars[ui];
        if ((u < 0) != (rows == 1)) continue;
        for (int ki = 0; ki < static_cast<int>(n.reduction_tiles.size()); ++ki) {
          const int64_t kb = n.reduction_tiles[ki];
          Plan plan;
          std::vector<std::string> words;
          const bool split_u = u >= 0 && rows < p.var(u).extent;
          const bool split_v = nb > 0;
          if (kb > 0) plan.splits.push_back({n.largest, kb});
          if (split_u) plan.splits.push_back({u, rows});
          if (split_v) plan.splits.push_back({n.v, nb});
          const std::vector<int> outer = BlockVarsOutside(n, {u});
          for (int x : outer) plan.order.push_back({x, 0});
          if (kb > 0) plan.order.push_back({n.largest, 0});
          if (split_u) plan.order.push_back({u, 0});
          if (split_v) plan.order.push_back({n.v, 0});
          for (int x : n.out) {
            if (x != u && x != n.v && !Contains(outer, x)) plan.order.push_back({x, 0});
          }
          for (int r : n.reductions) plan.order.push_back({r, r == n.largest && kb > 0 ? 1 : 0});
          if (u >= 0) plan.order.push_back({u, split_u ? 1 : 0});
          plan.order.push_back({n.v, split_v ? 1 : 0});
          if (u >= 0) {
            words.push_back(absl::StrCat("rows ", p.var(u).name,
                                         split_u ? absl::StrCat("/", rows) : std::string()));
          }
          words.push_back(absl::StrCat("vector ", p.var(n.v).name,
                                       split_v ? absl::StrCat("/", nb) : std::string()));
          if (kb > 0) words.push_back(absl::StrCat("reduction ", p.var(n.largest).name, "/", kb));
          plan.description = absl::StrJoin(words, ", ");
          plan.accumulators = static_cast<int>(
              (u >= 0 ? std::min<int64_t>(rows, p.var(u).extent) : 1) * vectors);
          out.push_back({b + 4 * ki + 8 * ui, std::move(plan)});
        }
      }
    }
  }
}

// Two row variables (a convolution's output channel u and a short output row x2, <= 8): rows of
// u x all of x2 x the vectors. Each weight broadcast then serves a vector per row of x2 and each
// input vector every row of u: about half the loads per FMA of a one-variable block
// (bench/results/tune_bench_conv_2d_blocks.md). The block's input vectors (one per row of x2 and
// vector) and a broadcast stay in registers beside the accumulators, each loaded once per
// reduction step; blocks without room for them re-load every operand for every row (4 x 7 x 1 on
// AVX-512), so they are left out.
void AddTwoVariableBlocks(const Program& p, const Nest& n, std::vector<Candidate>& out) {
  if (n.rows_vars.size() < 2 || n.rows_vars[0] < 0) return;
  const int u = n.rows_vars[0];
  for (size_t i2 = 1; i2 < n.rows_vars.size(); ++i2) {
    const int x2 = n.rows_vars[i2];
    const int64_t e2 = p.var(x2).extent;
    if (e2 > 8) continue;
    int rank = 0;
    for (int rows : {3, 2, 4}) {
      ++rank;
      for (const auto& [nb, c] : n.vector_blocks) {
        const int64_t cached = e2 * c + 1;
        if (rows * e2 * c + cached > n.max_accumulators || rows >= p.var(u).extent) continue;
        for (int ki = 0; ki < static_cast<int>(n.reduction_tiles.size()); ++ki) {
          const int64_t kb = n.reduction_tiles[ki];
          Plan plan;
          const bool split_v = nb > 0;
          if (kb > 0) plan.splits.push_back({n.largest, kb});
          plan.splits.push_back({u, rows});
          if (split_v) plan.splits.push_back({n.v, nb});
          const std::vector<int> outer = BlockVarsOutside(n, {u, x2});
          for (int x : outer) plan.order.push_back({x, 0});
          if (kb > 0) plan.order.push_back({n.largest, 0});
          plan.order.push_back({u, 0});
          if (split_v) plan.order.push_back({n.v, 0});
          for (int x : n.out) {
            if (x != u && x != x2 && x != n.v && !Contains(outer, x)) plan.order.push_back({x, 0});
          }
          for (int r : n.reductions) plan.order.push_back({r, r == n.largest && kb > 0 ? 1 : 0});
          plan.order.push_back({u, 1});
          plan.order.push_back({x2, 0});
          plan.order.push_back({n.v, split_v ? 1 : 0});
          plan.description = absl::StrCat(
              "rows ", p.var(u).name, "/", rows, " x ", p.var(x2).name, ", vector ",
              p.var(n.v).name, split_v ? absl::StrCat("/", nb) : std::string(),
              kb > 0 ? absl::StrCat(", reduction ", p.var(n.largest).name, "/", kb) : "");
          plan.accumulators = static_cast<int>(rows * e2 * c);
          out.push_back({rank + 4 * ki, std::move(plan)});
        }
      }
    }
  }
}

// Copies whose input is strided along the vector variable v (transposes, layout changes such as
// HWC to CHW), where rule 2) fails: blocks of E consecutive elements of the input's contiguous
// variable e (an output variable) x one vector of v, which the code generator loads as rows of
// the input and transposes in registers (backend/codegen/block_emitter.cc). The order: the
// other output variables, e's tiles, v's tiles, e's block, v's vector (e outside v: each block
// writes the same rows of the output, vector after vector); E a vector's lanes, then half.
// Where a vector is shorter than a cache line (kLineFloats: AVX2's 8 lanes), e spans two
// lines or more and v more than a vector, a variant that tiles e by whole lines outside v's
// tiles, the line's blocks inside them (other output variables, e's lines, v's tiles, e's
// blocks, e's block, v's vector): each
// input line is read whole before v moves on, where E-wide tiles leave half of each line to
// a later pass over all of v, by which time a power-of-two row stride (rows in few cache
// sets) has evicted it (2-D transposes of 512 KiB and more at 8 lanes). Its cost: twice the
// output's rows written at a time, a half line each; so where the output's rows are the
// longer (its stride along e above the input's along v: the rows that crowd the cache sets
// are the output's), it comes after the variant without.
// Returns the statement, or -1 where the nest is no such copy.
int AddTransposeBlocks(const LoopTree& tree, const SketchOptions& options,
                       std::vector<Candidate>& out) {
  const Program& p = tree.program();
  if (p.num_statements() != 1) return -1;
  const Statement& st = p.statement(0);
  if (st.reduction != Reduction::kAssign || st.combiner != Combiner::kIdentity ||
      st.inputs.size() != 1) {
    return -1;
  }
  std::set<int> seen;
  for (const Loop& loop : tree.schedule(0).compute) {
    if (!seen.insert(loop.var).second) return -1;  // rule 1): untiled
  }
  const std::vector<int> out_vars = p.OutputVars(0);
  if (out_vars.size() < 2) return -1;
  const int v = out_vars.back();
  const Access& in = st.inputs[0];
  if (p.ElementStride(st.output, v) != 1 || p.ElementStride(in, v) <= kMaxSketchStride) return -1;
  int e = -1;
  for (int x : out_vars) {
    if (x != v && p.ElementStride(in, x) == 1) e = x;
  }
  const int lanes = Traits(options.target).vector_width;
  if (e < 0 || p.var(e).extent < lanes / 2 || lanes < 8) return -1;
  const int budget = BudgetFor(options.target, lanes, st.post_op).accumulators;
  const int64_t ee = p.var(e).extent, ev = p.var(v).extent;
  const bool lines_first = p.ElementStride(in, v) >= p.ElementStride(st.output, e);
  int rank = 0;
  for (int block : {lanes, lanes / 2}) {
    if (block > budget) continue;
    for (const bool lines : {lines_first, !lines_first}) {
      // With v in one vector the line variant visits as the plain block does: none then.
      if (lines && (lanes >= kLineFloats || ee < 2 * kLineFloats || lanes >= ev)) continue;
      Plan plan;
      const bool split_e = block < ee, split_v = lanes < ev;
      if (split_e) plan.splits.push_back({e, block});
      if (lines) plan.splits.push_back({e, kLineFloats / block});  // e's lines, outermost
      if (split_v) plan.splits.push_back({v, lanes});
      for (int x : out_vars) {
        if (x != e && x != v) plan.order.push_back({x, 0});
      }
      if (split_e) plan.order.push_back({e, 0});
      if (split_v) plan.order.push_back({v, 0});
      if (lines) plan.order.push_back({e, 1});
      plan.order.push_back({e, split_e ? (lines ? 2 : 1) : 0});
      plan.order.push_back({v, split_v ? 1 : 0});
      plan.description = absl::StrCat(
          "transpose ", p.var(e).name, lines ? absl::StrCat("/", kLineFloats) : std::string(),
          split_e ? absl::StrCat("/", block) : std::string(), ", vector ", p.var(v).name,
          split_v ? absl::StrCat("/", lanes) : std::string());
      plan.accumulators = static_cast<int>(std::min<int64_t>(block, ee));
      out.push_back({rank++, std::move(plan)});
    }
  }
  return 0;
}

// Reductions whose output's last variable v is read with a row's stride (attention scores,
// S[h,i,j] += Q[h,i,d] * K[h,j,d], read K along j; a global pool O[c] += I[c,h,w] reads I along
// c), where rule 2) fails: vectorize instead a reduction variable d that every input reading it
// steps by 1 (the innermost: the last index of the inputs), and hold a block of B consecutive
// elements of v in registers, one accumulator each, which the code generator folds into one
// vector of the output (backend/codegen/emitter.cc). The order: the other output variables, v's
// tiles, then, where d spans more than a vector, the other reductions, d's vectors, v's block,
// d's lanes (each vector of d read once for the whole block); and after it v's block, the
// other reductions, d. B a vector's lanes, then half, then 24.
// Returns the statement, or -1 where the nest is no such reduction.
int AddReductionVectorBlocks(const LoopTree& tree, const SketchOptions& options,
                             std::vector<Candidate>& out) {
  const Program& p = tree.program();
  if (p.num_statements() != 1) return -1;
  const Statement& st = p.statement(0);
  if (st.reduction == Reduction::kAssign) return -1;
  std::set<int> seen;
  for (const Loop& loop : tree.schedule(0).compute) {
    if (!seen.insert(loop.var).second) return -1;  // rule 1): untiled
  }
  const std::vector<int> out_vars = p.OutputVars(0);
  if (out_vars.empty()) return -1;
  const int v = out_vars.back();
  if (p.ElementStride(st.output, v) != 1 || p.var(v).extent < 2) return -1;
  std::vector<int> reductions;
  for (int x : p.LoopVars(0)) {
    if (std::find(out_vars.begin(), out_vars.end(), x) == out_vars.end()) reductions.push_back(x);
  }
  int d = -1;
  for (int x : reductions) {
    bool read = false, unit = true;
    for (const Access& in : st.inputs) {
      const int64_t stride = p.ElementStride(in, x);
      read |= stride != 0;
      unit &= stride == 0 || stride == 1;
    }
    if (read && unit && (d < 0 || p.var(x).extent > p.var(d).extent)) d = x;
  }
  if (d < 0) return -1;
  const int lanes = Traits(options.target).vector_width;
  const int budget = BudgetFor(options.target, lanes, st.post_op).accumulators;
  const int64_t ev = p.var(v).extent;
  int rank = 0;
  for (int block : {lanes, lanes / 2, 24}) {
    if (block > budget || (block >= ev && block != lanes)) continue;
    const bool split_v = block < ev;
    // Where d spans several vectors, first the block inside d's vectors: for each vector of d,
    // the block's accumulators each take one FMA, the other input's vector loaded once for all
    // of them (attention scores: one Q vector, then the block's K vectors); then d whole
    // inside the block, each accumulator reading all of its row before the next.
    for (const bool per_vector : {true, false}) {
      const bool split_d = per_vector && p.var(d).extent > lanes;
      if (per_vector && !split_d) continue;
      Plan plan;
      if (split_v) plan.splits.push_back({v, block});
      if (split_d) plan.splits.push_back({d, lanes});
      for (int x : out_vars) {
        if (x != v) plan.order.push_back({x, 0});
      }
      if (split_v) plan.order.push_back({v, 0});
      if (split_d) {
        for (int r : reductions) {
          if (r != d) plan.order.push_back({r, 0});
        }
        plan.order.push_back({d, 0});
        plan.order.push_back({v, split_v ? 1 : 0});
        plan.order.push_back({d, 1});
      } else {
        plan.order.push_back({v, split_v ? 1 : 0});
        for (int r : reductions) {
          if (r != d) plan.order.push_back({r, 0});
        }
        plan.order.push_back({d, 0});
      }
      plan.description = absl::StrCat(
          "fold ", p.var(v).name, split_v ? absl::StrCat("/", block) : std::string(),
          split_d ? absl::StrCat(" per vector of ", p.var(d).name) : std::string(), ", vector ",
          p.var(d).name, " (reduced)");
      plan.accumulators = static_cast<int>(std::min<int64_t>(block, ev));
      out.push_back({rank++, std::move(plan)});
    }
  }
  return 0;
}

}  // namespace

std::vector<Sketch> LoopNestSketches(const LoopTree& tree, const Limits& limits,
                                     const SketchOptions& options) {
  const Program& p = tree.program();
  const int lanes = Traits(options.target).vector_width;
  std::vector<Candidate> candidates;
  int stmt = -1;
  double lane_use = 0;  // of the blocks vectorized along the output's last variable
  if (const std::optional<Nest> nest = AnalyzeNest(tree, options)) {
    stmt = nest->stmt;
    AddOneVariableBlocks(p, *nest, candidates);
    AddTwoVariableBlocks(p, *nest, candidates);
    for (Candidate& c : candidates) c.rank = 2 * c.rank + 1;
    lane_use = LaneUse(p, *nest, lanes);
  }
  // Rule 2'): blocks vectorized along another output variable, first at each rank where they
  // fill a tenth more of their vectors' lanes than those above (a 7x7 map's 49 of 64 against
  // all; a 14x14 map's 196 of 208 stay ahead), else after all of them (and after the
  // fallbacks' below, where rule 2) fails).
  std::vector<Candidate> channels;
  int channels_stmt = -1;
  for (int x : p.num_statements() > 0 ? p.OutputVars(CostliestStatement(p)) : std::vector<int>{}) {
    const std::optional<Nest> other = AnalyzeNest(tree, options, x);
    if (!other.has_value()) continue;
    channels_stmt = other->stmt;
    std::vector<Candidate> more;
    AddOneVariableBlocks(p, *other, more);
    AddTwoVariableBlocks(p, *other, more);
    const bool first = stmt >= 0 && LaneUse(p, *other, lanes) >= lane_use + 0.1;
    for (Candidate& c : more) {
      c.rank = 2 * c.rank + (first ? 0 : 1 << 20);
      channels.push_back(std::move(c));
    }
  }
  if (stmt < 0) {
    stmt = AddTransposeBlocks(tree, options, candidates);
    if (stmt < 0) stmt = AddReductionVectorBlocks(tree, options, candidates);
  }
  if (!channels.empty() && (stmt < 0 || stmt == channels_stmt)) {
    stmt = channels_stmt;
    for (Candidate& c : channels) candidates.push_back(std::move(c));
  }
  if (stmt < 0) return {};
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.rank < b.rank; });

  std::vector<Sketch> sketches;
  std::vector<std::vector<StatementSchedule>> reached;
  for (const Candidate& c : candidates) {
    if (static_cast<int>(sketches.size()) >= options.max_sketches) break;
    auto realized = Realize(tree, stmt, c.plan, limits);
    if (!realized.has_value() || realized->first.empty()) continue;
    const std::vector<StatementSchedule>& schedules = realized->second.schedules();
    if (std::find(reached.begin(), reached.end(), schedules) != reached.end()) continue;
    reached.push_back(schedules);
    sketches.push_back({c.plan.description, std::move(realized->first), c.plan.accumulators});
  }
  return sketches;
}

std::string SketchesText(const std::vector<Sketch>& sketches) {
  std::string text;
  for (const Sketch& s : sketches) {
    absl::StrAppend(&text, absl::StrJoin(s.actions, " ", [](std::string* o, const Action& a) {
                      absl::StrAppend(o, ActionName(a));
                    }),
                    "\n");
  }
  return text;
}

}  // namespace looptool
