#include "backend/codegen/emitter.h"

#include <algorithm>
#include <array>
#include <map>
#include <utility>
#include <vector>

#include <xbyak/xbyak_util.h>

#include "backend/codegen/block_emitter.h"
#include "backend/codegen/vector_ops.h"
#include "util/check.h"

namespace looptool {
namespace {

using namespace Xbyak::util;  // NOLINT: registers and address frames read like assembly here

constexpr int kStackSlots = 32;  // loop counters that do not fit in registers
// Xbyak::util::StackFrame's temporaries in its order: the free registers, then the callee-saved
// ones (which the frame pushes and pops).
const Xbyak::Reg64 kGprPool[] = {rsi, rdx, rcx, r8, r9, r10, r11, rbx, rbp, r12, r13, r14, r15};

// A runtime loop counter, counting down from its trip count to 1.
struct Counter {
  int gpr = -1;   // index into kGprPool, or -1
  int slot = -1;  // stack slot when no register was free
};

// Where the emitter stands inside a statement's nest: static displacements of each access from
// its pointer register, the elements left of each variable, the active lanes, and what is known
// about the reduction loops outside the register scope (for "first visit" and "last visit").
struct Point {
  std::array<int64_t, 3> disp{};  // elements; access 0 is the output, 1 and 2 the inputs
  std::vector<int64_t> limit;     // per program variable
  int lanes = 1;
  bool in_scope = false;
  int set = 0;  // the accumulator set of a block spread over sets (KernelEmitter::sets_)
  bool not_first = false, not_last = false;
  std::vector<std::pair<Counter, int64_t>> first;  // counter == value on the first visit
  std::vector<Counter> last;                        // counter == 1 on the last visit
};

// One output element or vector of the register block.
struct TileEntry {
  int64_t disp;  // elements from the output pointer
  int lanes;
};

class KernelEmitter {
 public:
  KernelEmitter(const KernelPlan& plan, Xbyak::CodeGenerator& g)
      : plan_(plan), g_(g), vec_(g, plan.isa, plan.tail_lanes) {}

  void Emit() {
    // One parameter (rdi, the tensors), every other general register as a temporary, and the
    // counter slots at rsp[0..8 * kStackSlots), the frame padding rsp to 16 bytes.
    Xbyak::util::StackFrame frame(&g_, 1, static_cast<int>(std::size(kGprPool)),
                                  kStackSlots * 8, /*makeEpilog=*/false);
    LT_CHECK(frame.p[0] == rdi);
    for (size_t i = 0; i < std::size(kGprPool); ++i) LT_CHECK(frame.t[i] == kGprPool[i]);
    vec_.LoadTailMasks();
    std::vector<int> streamed;  // tensors, each aligned where the plan streams its stores
    for (const StatementPlan& s : plan_.statements) {
      if (s.stream_output) streamed.push_back(s.output.tensor);
    }
    if (streamed.empty()) {
      EmitBody(frame);
    } else {
      // Non-temporal stores fault on an unaligned address: the plan proved each streamed store
      // aligned relative to its tensor's base, so a base off the largest vector's bytes takes
      // the copy of the body with plain stores.
      Xbyak::Label plain;
      g_.xor_(eax, eax);
      for (int t : streamed) g_.or_(rax, qword[rdi + 8 * t]);
      g_.test(al, Traits(plan_.isa).vector_width * 4 - 1);
      g_.jnz(plain, Xbyak::CodeGenerator::T_NEAR);
      streaming_ = true;
      EmitBody(frame);
      g_.L(plain);
      streaming_ = false;
      EmitBody(frame);
    }
    vec_.EmitMaskTable();
  }

 private:
  // The statements, then the return (an sfence first after streamed stores: they are weakly
  // ordered, and the caller may hand the output to another thread).
  void EmitBody(Xbyak::util::StackFrame& frame) {
    for (const StatementPlan& s : plan_.statements) EmitStatement(s);
    if (streaming_) g_.sfence();
    frame.close(/*callRet=*/false);
    if (plan_.isa != Isa::kSse) g_.vzeroupper();
    g_.ret();
  }

  // ---- statements -----------------------------------------------------------------------
  void EmitStatement(const StatementPlan& s) {
    s_ = &s;
    const RegisterBudget& b = s.budget;
    tmp_ = b.arithmetic;
    load0_ = b.operand0;
    load1_ = b.operand1;
    zero_ = b.relu_zero;
    LT_CHECK(s.accumulators <= b.accumulators);
    cache_regs_.clear();
    for (int r = s.accumulators; r < b.accumulators; ++r) cache_regs_.push_back(r);
    vec_.SetWidth(s.width, b.lane_mask);

    // Pointers: output, then inputs.
    gpr_used_.assign(std::size(kGprPool), false);
    slot_used_.assign(kStackSlots, false);
    accesses_ = {&s.output};
    for (const AccessPlan& in : s.inputs) accesses_.push_back(&in);
    pointers_.clear();
    for (size_t a = 0; a < accesses_.size(); ++a) {
      gpr_used_[a] = true;
      pointers_.push_back(kGprPool[a]);
      g_.mov(pointers_[a], qword[rdi + 8 * accesses_[a]->tensor]);
    }
    input_pointers_.assign(pointers_.begin() + 1, pointers_.end());

    Point start;
    start.lanes = s.width;
    start.limit.assign(s.output.stride.size(), 0);
    for (const LoopPlan& l : s.loops) {
      start.limit[l.var] = std::max(start.limit[l.var], l.size * l.inner + l.tail);
    }
    EmitLevel(0, start);
    LT_CHECK(pending_.empty());
  }

  // ---- the loop nest ----------------------------------------------------------------------
  int n() const { return static_cast<int>(s_->loops.size()); }

  // `pt` moved `elements` along loop j's variable; `count` is the new limit (or lanes).
  Point Child(const Point& pt, int j, int64_t elements, int64_t count) const {
    const LoopPlan& l = s_->loops[j];
    Point c = pt;
    for (size_t a = 0; a < accesses_.size(); ++a) c.disp[a] += elements * accesses_[a]->stride[l.var];
    if (l.vector) {
      c.lanes = static_cast<int>(count);
    } else {
      c.limit[l.var] = count;
    }
    return c;
  }

  void EmitLevel(int j, const Point& pt) {
    if (!pt.in_scope && j == s_->scope) {
      EmitScope(j, pt);
      return;
    }
    if (j == n()) {
      AppendOp(pt);
      return;
    }
    const LoopPlan& l = s_->loops[j];
    const int64_t lim = pt.limit[l.var];
    const int64_t step = l.vector ? s_->width : l.inner;
    const int64_t full = lim / step, rem = lim % step;
    const bool outer_reduction = l.reduction && !l.in_scope;

    if (l.unrolled || full <= 1) {
      // Unrolled reduction steps in the scope take the block's accumulator sets in turn.
      const bool spread = pt.in_scope && l.reduction && sets_ > 1;
      for (int64_t i = 0; i < full; ++i) {
        Point c = Child(pt, j, i * step, step);
        if (outer_reduction) {
          c.not_first |= i > 0;
          c.not_last |= i + 1 < full || rem > 0;
        }
        if (spread) c.set = static_cast<int>((pt.set + i) % sets_);
        EmitLevel(j + 1, c);
      }
      if (rem > 0) {
        Point c = Child(pt, j, full * step, rem);
        if (outer_reduction) c.not_first |= full > 0;
        if (spread) c.set = static_cast<int>((pt.set + full) % sets_);
        EmitLevel(j + 1, c);
      }
      return;
    }

    // A runtime loop of `full` iterations, then the partial one, then the pointers go back.
    FlushBlock();
    const Counter cnt = AllocCounter();
    SetCounter(cnt, full);
    Xbyak::Label top;
    Place(top);
    Point c = Child(pt, j, 0, step);
    if (outer_reduction) {
      c.first.emplace_back(cnt, full);
      if (rem > 0) {
        c.not_last = true;
      } else {
        c.last.push_back(cnt);
      }
    }
    EmitLevel(j + 1, c);
    FlushBlock();
    Advance(l.var, step);
    DecrementAndLoop(cnt, top);
    FreeCounter(cnt);
    if (rem > 0) {
      Point r = Child(pt, j, 0, rem);
      if (outer_reduction) r.not_first = true;
      EmitLevel(j + 1, r);
      FlushBlock();
    }
    Advance(l.var, -full * step);
  }

  // Moves every pointer whose access depends on `var` by `elements` of it.
  void Advance(int var, int64_t elements) {
    for (size_t a = 0; a < accesses_.size(); ++a) {
      const int64_t bytes = elements * accesses_[a]->stride[var] * 4;
      if (bytes != 0) g_.add(pointers_[a], static_cast<int32_t>(bytes));
    }
  }

  // ---- the register scope -------------------------------------------------------------------
  void Tile(int j, const Point& pt, std::vector<TileEntry>& out) const {
    if (j == n()) {
      for (const TileEntry& e : out) {
        if (e.disp == pt.disp[0]) return;
      }
      out.push_back({pt.disp[0], s_->horizontal ? s_->width : pt.lanes});
      return;
    }
    const LoopPlan& l = s_->loops[j];
    if (l.reduction) {
      Tile(j + 1, pt, out);
      return;
    }
    const int64_t step = l.vector ? s_->width : l.inner;
    const int64_t lim = pt.limit[l.var];
    const int64_t full = lim / step, rem = lim % step;
    for (int64_t i = 0; i < full; ++i) Tile(j + 1, Child(pt, j, i * step, step), out);
    if (rem > 0) Tile(j + 1, Child(pt, j, full * step, rem), out);
  }

  Xbyak::Address OutputAt(const TileEntry& e) const { return ptr[OutputExp(e)]; }
  Xbyak::RegExp OutputExp(const TileEntry& e) const {
    return pointers_[0] + (e.disp + s_->output.offset) * 4;
  }
  bool StridedOutput() const { return s_->output.kind == AccessPlan::Kind::kStrided; }
  int64_t OutputStride() const { return s_->output.stride[s_->loops[s_->vector_loop].var]; }

  void EmitScope(int j, const Point& pt) {
    FlushBlock();
    tile_.clear();
    Tile(j, pt, tile_);
    LT_CHECK(static_cast<int>(tile_.size()) <= s_->accumulators);
    acc_of_.clear();
    for (int i = 0; i < static_cast<int>(tile_.size()); ++i) acc_of_[tile_[i].disp] = i;
    // A block smaller than the latency needs (a tail's) spreads over sets of accumulators in
    // the registers the full block would take: set k's accumulator i is register k * size + i.
    const int size = static_cast<int>(tile_.size());
    sets_ = 1;
    if (s_->spread_small_blocks && size > 0 && size < kLatencyChains) {
      sets_ = std::min((kLatencyChains + size - 1) / size, s_->accumulators / size);
    }

    // Entry: identity on the first visit of the block, else its partial results.
    const bool vertical_reduce = s_->reduction != Reduction::kAssign && !s_->horizontal;
    if (s_->horizontal) {
      Identity();
    } else if (vertical_reduce) {
      if (pt.not_first) {
        LoadTile();
      } else if (pt.first.empty()) {
        Identity();
      } else {
        Xbyak::Label load, body;
        JumpUnlessAll(pt.first, load);
        Identity();
        g_.jmp(body, Xbyak::CodeGenerator::T_NEAR);
        Place(load);
        LoadTile();
        Place(body);
      }
    }

    for (int i = size; i < sets_ * size; ++i) {  // the other sets start from the identity
      s_->reduction == Reduction::kMax ? vec_.NegativeInfinity(vec_.V(i)) : vec_.Zero(vec_.V(i));
    }

    Point inside = pt;
    inside.in_scope = true;
    inside.set = 0;
    EmitLevel(j, inside);
    FlushBlock();
    if (sets_ > 1) {  // set 0 takes the others in (every lane: the stores mask a tail's)
      const Arithmetic combine{s_->reduction, Combiner::kIdentity, false};
      for (int k = 1; k < sets_; ++k) {
        for (int i = 0; i < size; ++i) {
          vec_.Accumulate(combine, vec_.V(i), vec_.V(k * size + i), vec_.V(k * size + i),
                          s_->width, vec_.V(tmp_));
        }
      }
      sets_ = 1;
    }

    // Exit: fold lanes and earlier partial results (horizontal), relu on the last visit, store.
    if (s_->horizontal) {
      EmitHorizontalExit(pt);
      return;
    }
    if (s_->post_op == PostOp::kRelu && !pt.not_last) {
      OnLastVisit(pt, [&] {
        for (int i = 0; i < static_cast<int>(tile_.size()); ++i) vec_.Relu(vec_.V(i), vec_.V(zero_));
      });
    }
    for (int i = 0; i < static_cast<int>(tile_.size()); ++i) {
      if (StridedOutput()) {
        vec_.StoreStrided(OutputExp(tile_[i]), OutputStride(), vec_.V(i), tile_[i].lanes,
                          vec_.V(tmp_));
      } else if (streaming_ && s_->stream_output && tile_[i].lanes == s_->width) {
        LT_CHECK((tile_[i].disp + s_->output.offset) % s_->width == 0);
        vec_.StoreStreaming(OutputAt(tile_[i]), vec_.V(i));
      } else {
        vec_.Store(OutputAt(tile_[i]), vec_.V(i), tile_[i].lanes);
      }
    }
  }

  // Zeroes the relu register and emits `relu`, run only on the last visit of the reduction loops
  // outside the scope.
  template <typename F>
  void OnLastVisit(const Point& pt, F relu) {
    std::vector<std::pair<Counter, int64_t>> last;
    for (const Counter& c : pt.last) last.emplace_back(c, 1);
    Xbyak::Label skip;
    if (!last.empty()) JumpUnlessAll(last, skip);
    vec_.Zero(vec_.V(zero_));
    relu();
    if (!last.empty()) Place(skip);
  }

  // A horizontal tile's exit. The accumulators of consecutive output elements (the same row of
  // the output, one element apart) fold together, up to a vector's width at a time, into one
  // register whose lanes are those elements: then the partial results of earlier visits are
  // combined, relu applied and the elements stored as one vector. A lone element folds alone.
  struct FoldGroup {
    int64_t disp;  // of its first element
    int lanes;     // elements
    int reg;       // the register holding them, lane by lane
  };

  std::vector<FoldGroup> FoldTile() {
    std::vector<int> order(tile_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return tile_[a].disp < tile_[b].disp; });
    std::vector<FoldGroup> groups;
    for (size_t i = 0; i < order.size();) {
      std::vector<int> regs = {order[i]};
      size_t j = i + 1;
      while (j < order.size() && static_cast<int>(regs.size()) < s_->width &&
             tile_[order[j]].disp == tile_[order[i]].disp + static_cast<int64_t>(regs.size())) {
        regs.push_back(order[j++]);
      }
      FoldGroup g{tile_[order[i]].disp, static_cast<int>(regs.size()), regs[0]};
      if (regs.size() == 1) {
        vec_.ReduceLanes(s_->reduction, vec_.V(regs[0]), vec_.V(tmp_));
      } else {
        g.reg = vec_.FoldLanes(s_->reduction, regs, tmp_);
      }
      groups.push_back(g);
      i = j;
    }
    return groups;
  }

  void EmitHorizontalExit(const Point& pt) {
    const std::vector<FoldGroup> groups = FoldTile();
    auto at = [&](const FoldGroup& g) { return ptr[pointers_[0] + (g.disp + s_->output.offset) * 4]; };
    auto combine = [&] {
      for (const FoldGroup& g : groups) {
        if (g.lanes == 1) {
          vec_.CombineScalar(s_->reduction, vec_.V(g.reg), at(g));
        } else {
          vec_.CombineVector(s_->reduction, vec_.V(g.reg), at(g), g.lanes, vec_.V(tmp_));
        }
      }
    };
    if (pt.not_first) {
      combine();
    } else if (!pt.first.empty()) {
      Xbyak::Label later, done;
      JumpUnlessAll(pt.first, later);
      g_.jmp(done, Xbyak::CodeGenerator::T_NEAR);
      Place(later);
      combine();
      Place(done);
    }
    if (s_->post_op == PostOp::kRelu && !pt.not_last) {
      OnLastVisit(pt, [&] {
        for (const FoldGroup& g : groups) {
          g.lanes == 1 ? vec_.ReluScalar(vec_.V(g.reg), vec_.V(zero_))
                       : vec_.Relu(vec_.V(g.reg), vec_.V(zero_));
        }
      });
    }
    for (const FoldGroup& g : groups) {
      if (g.lanes == 1) {
        vec_.StoreScalar(at(g), vec_.V(g.reg));
      } else {
        vec_.Store(at(g), vec_.V(g.reg), g.lanes);
      }
    }
  }

  void Identity() {
    if (tile_.empty()) return;
    if (s_->reduction == Reduction::kMax) {
      vec_.NegativeInfinity(vec_.V(0));
      for (int i = 1; i < static_cast<int>(tile_.size()); ++i) vec_.Copy(vec_.V(i), vec_.V(0));
    } else {
      for (int i = 0; i < static_cast<int>(tile_.size()); ++i) vec_.Zero(vec_.V(i));
    }
  }

  void LoadTile() {
    for (int i = 0; i < static_cast<int>(tile_.size()); ++i) {
      if (StridedOutput()) {
        vec_.LoadStrided(vec_.V(i), OutputExp(tile_[i]), OutputStride(), tile_[i].lanes,
                         vec_.V(tmp_));
      } else {
        vec_.Load(vec_.V(i), OutputAt(tile_[i]), tile_[i].lanes);
      }
    }
  }

  // ---- point operations -----------------------------------------------------------------------
  void AppendOp(const Point& pt) {
    auto it = acc_of_.find(pt.disp[0]);
    LT_CHECK(it != acc_of_.end());
    PointOp op;
    op.acc = it->second + pt.set * static_cast<int>(tile_.size());
    op.lanes = pt.lanes;
    auto operand = [&](int input) {
      const AccessPlan& a = s_->inputs[input];
      OperandRef o;
      o.input = input;
      o.offset = (pt.disp[1 + input] + a.offset) * 4;
      o.kind = a.kind;
      o.lanes = a.kind == AccessPlan::Kind::kBroadcast ? s_->width : pt.lanes;
      if (a.kind == AccessPlan::Kind::kStrided) o.stride = a.stride[s_->loops[s_->vector_loop].var];
      return o;
    };
    op.x = operand(0);
    if (s_->inputs.size() > 1) op.y = operand(1);
    pending_.push_back(op);
  }

  void FlushBlock() {
    if (pending_.empty()) return;
    BlockRegisters regs;
    regs.cache = cache_regs_;
    regs.load0 = load0_;
    regs.load1 = load1_;
    regs.tmp = tmp_;
    const bool lend = LendsReservedRegisters();
    if (lend) {
      regs.cache.push_back(tmp_);
      regs.cache.push_back(s_->budget.lane_mask);
    }
    std::vector<PointOp> half = TakeHalfWidthOps();
    if (!pending_.empty()) EmitBlock(pending_, *s_, input_pointers_, regs, vec_);
    if (!half.empty()) {
      vec_.SetWidth(s_->width / 2, s_->budget.lane_mask);
      EmitBlock(half, *s_, input_pointers_, regs, vec_);
      vec_.SetWidth(s_->width, s_->budget.lane_mask);
    }
    if (lend) vec_.ForgetMask();  // the mask register held operands
    pending_.clear();
  }

  // With StatementPlan::half_width_tails, the pending block's ops of 8 lanes (of 16) leave it,
  // in order, to be emitted as a block of their own at 8 lanes. Each accumulator's ops keep
  // their order (an accumulator's lanes are the same in every op), so results are exactly those
  // of one block; the 256-bit ops zero the accumulator's upper lanes, past the 8 its masked
  // store writes.
  std::vector<PointOp> TakeHalfWidthOps() {
    std::vector<PointOp> half;
    if (!s_->half_width_tails) return half;
    LT_CHECK(plan_.isa == Isa::kAvx512 && s_->width == 16 && !s_->horizontal);
    std::vector<PointOp> full;
    for (PointOp& op : pending_) {
      if (op.lanes != s_->width / 2) {
        full.push_back(op);
        continue;
      }
      for (OperandRef* o : {&op.x, &op.y}) o->lanes = std::min(o->lanes, s_->width / 2);
      half.push_back(op);
    }
    if (!half.empty()) pending_ = std::move(full);
    return half;
  }

  // Whether the pending block, on AVX2, needs neither the arithmetic temporary nor the lane
  // mask, which then cache operands too (AVX2 has 16 registers and no broadcast memory
  // operand: a block of 12 accumulators otherwise has no register for the vectors each row
  // reads again). Neither is touched by an FMA, an add or max of one operand, or a copy, of
  // full vectors read whole: masked lanes need the mask (loads, blends), strided reads and
  // transposes the temporary, other combiners the temporary.
  bool LendsReservedRegisters() const {
    if (plan_.isa != Isa::kAvx2 || s_->width == 1 || s_->budget.lane_mask < 0) return false;
    const bool binary = s_->combiner != Combiner::kIdentity;
    const bool fma = s_->reduction == Reduction::kSum && s_->combiner == Combiner::kMultiply;
    if (binary && !fma && s_->reduction != Reduction::kAssign) return false;
    for (const PointOp& op : pending_) {
      if (op.lanes < s_->width) return false;
      for (const OperandRef* o : {&op.x, &op.y}) {
        if (o == &op.y && !binary) continue;
        if (o->kind == AccessPlan::Kind::kStrided || o->lanes < s_->width) return false;
      }
    }
    return true;
  }

  // ---- counters and control flow ----------------------------------------------------------------
  Counter AllocCounter() {
    for (size_t i = 0; i < gpr_used_.size(); ++i) {
      if (!gpr_used_[i]) {
        gpr_used_[i] = true;
        return {static_cast<int>(i), -1};
      }
    }
    for (int i = 0; i < kStackSlots; ++i) {
      if (!slot_used_[i]) {
        slot_used_[i] = true;
        return {-1, i};
      }
    }
    LT_CHECK(false);  // more nested runtime loops than Limits::max_loops allows
    return {};
  }

  void FreeCounter(const Counter& c) {
    if (c.gpr >= 0) gpr_used_[c.gpr] = false;
    if (c.slot >= 0) slot_used_[c.slot] = false;
  }

  void SetCounter(const Counter& c, int64_t value) {
    if (c.gpr >= 0) {
      g_.mov(kGprPool[c.gpr], value);
    } else {
      g_.mov(qword[rsp + c.slot * 8], static_cast<int32_t>(value));
    }
  }

  void DecrementAndLoop(const Counter& c, const Xbyak::Label& top) {
    if (c.gpr >= 0) {
      g_.dec(kGprPool[c.gpr]);
    } else {
      g_.dec(qword[rsp + c.slot * 8]);
    }
    g_.jnz(top, Xbyak::CodeGenerator::T_NEAR);
  }

  // Falls through when every counter equals its value; jumps to `target` otherwise.
  void JumpUnlessAll(const std::vector<std::pair<Counter, int64_t>>& conditions,
                     const Xbyak::Label& target) {
    for (const auto& [c, value] : conditions) {
      if (c.gpr >= 0) {
        g_.cmp(kGprPool[c.gpr], static_cast<int32_t>(value));
      } else {
        g_.cmp(qword[rsp + c.slot * 8], static_cast<int32_t>(value));
      }
      g_.jne(target, Xbyak::CodeGenerator::T_NEAR);
    }
  }

  // Labels are join points: what the AVX2 mask register holds is unknown after one.
  void Place(Xbyak::Label& label) {
    g_.L(label);
    vec_.ForgetMask();
  }

  const KernelPlan& plan_;
  Xbyak::CodeGenerator& g_;
  VectorOps vec_;
  const StatementPlan* s_ = nullptr;
  std::vector<const AccessPlan*> accesses_;
  std::vector<Xbyak::Reg64> pointers_, input_pointers_;
  std::vector<bool> gpr_used_, slot_used_;
  int tmp_ = 0, load0_ = 0, load1_ = 0, zero_ = -1;
  std::vector<int> cache_regs_;
  std::vector<TileEntry> tile_;
  std::map<int64_t, int> acc_of_;  // output displacement -> accumulator register (set 0)
  int sets_ = 1;                    // accumulator sets of the current block
  bool streaming_ = false;          // the body whose plan-streamed stores are non-temporal
  std::vector<PointOp> pending_;
};

}  // namespace

void EmitKernel(const KernelPlan& plan, Xbyak::CodeGenerator& g) {
  KernelEmitter(plan, g).Emit();
}

}  // namespace looptool
