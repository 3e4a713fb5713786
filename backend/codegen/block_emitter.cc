#include "backend/codegen/block_emitter.h"

#include <limits>
#include <map>
#include <optional>
#include <tuple>

#include "util/check.h"

namespace looptool {
namespace {

using namespace Xbyak::util;  // NOLINT: registers and address frames read like assembly here

constexpr int kNever = std::numeric_limits<int>::max();

class Block {
 public:
  Block(const std::vector<PointOp>& ops, const StatementPlan& s,
        const std::vector<Xbyak::Reg64>& pointers, const BlockRegisters& regs, VectorOps& vec)
      : ops_(ops), s_(s), pointers_(pointers), regs_(regs), vec_(vec) {
    for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
      uses_[ops_[i].x].push_back(i);
      if (Binary()) uses_[ops_[i].y].push_back(i);
    }
    for (int r : regs_.cache) cached_[r] = std::nullopt;
  }

  void Emit() {
    for (int i = 0; i < static_cast<int>(ops_.size()); ++i) EmitOp(i);
  }

 private:
  bool Binary() const { return s_.combiner != Combiner::kIdentity; }

  Xbyak::RegExp At(const OperandRef& o) const { return pointers_[o.input] + o.offset; }

  // The next op after `i` that reads `o`, or kNever.
  int NextUse(const OperandRef& o, int i) const {
    for (int use : uses_.at(o)) {
      if (use > i) return use;
    }
    return kNever;
  }

  // Whether `o` must be in a register for any instruction to read it.
  bool MustBeRegister(const OperandRef& o) const {
    if (o.lanes < vec_.width() && o.kind == AccessPlan::Kind::kVector) return true;  // masked
    if (o.kind == AccessPlan::Kind::kStrided) return true;
    if (o.kind == AccessPlan::Kind::kBroadcast && !vec_.CanBroadcastFromMemory()) return true;
    return s_.reduction == Reduction::kAssign && s_.combiner == Combiner::kIdentity;
  }

  void LoadInto(int reg, const OperandRef& o) {
    if (o.kind == AccessPlan::Kind::kBroadcast) {
      vec_.Broadcast(vec_.V(reg), dword[At(o)]);
    } else if (o.kind == AccessPlan::Kind::kStrided) {
      vec_.LoadStrided(vec_.V(reg), At(o), o.stride, o.lanes, vec_.V(regs_.tmp));
    } else {
      vec_.Load(vec_.V(reg), ptr[At(o)], o.lanes);
    }
  }

  // A cache register for `o` (whose next use is `next`), evicting the cached operand used
  // farthest in the future if that is later than `next`; -1 when caching would not pay.
  int CacheRegister(int next) {
    int victim = -1, victim_next = -1;
    for (auto& [reg, held] : cached_) {
      if (!held) return reg;
      if (held->second > victim_next) {
        victim = reg;
        victim_next = held->second;
      }
    }
    if (victim_next <= next) return -1;
    where_.erase(cached_[victim]->first);
    cached_[victim] = std::nullopt;
    return victim;
  }

  struct Resolved {
    bool in_register = false;
    Xbyak::Xmm reg;
  };

  // Where the instruction reads `o` from: its cache register; a new cache register when it is
  // read again later; `load_reg` when it must be in a register; else memory (in_register false).
  Resolved Resolve(const OperandRef& o, int i, bool need_register, int load_reg) {
    // Operands of the current op are pinned (next use = i) until it is emitted, so that
    // resolving the other operand never evicts them.
    auto it = where_.find(o);
    if (it != where_.end()) {
      cached_[it->second]->second = i;
      return {true, vec_.V(it->second)};
    }
    const int next = NextUse(o, i);
    if (next != kNever) {
      const int reg = CacheRegister(next);
      if (reg >= 0) {
        LoadInto(reg, o);
        cached_[reg] = std::make_pair(o, i);
        where_[o] = reg;
        return {true, vec_.V(reg)};
      }
    }
    if (need_register || MustBeRegister(o)) {
      LoadInto(load_reg, o);
      return {true, vec_.V(load_reg)};
    }
    return {false, Xbyak::Xmm()};
  }

  Xbyak::Address MemoryOf(const OperandRef& o) const {
    return o.kind == AccessPlan::Kind::kBroadcast ? vec_.BroadcastMemory(At(o))
                                                  : vec_.VectorMemory(At(o));
  }

  // After op i: the next use of each operand it read, for later eviction decisions.
  void Unpin(const OperandRef& o, int i) {
    auto it = where_.find(o);
    if (it != where_.end()) cached_[it->second]->second = NextUse(o, i);
  }

  void EmitOp(int i) {
    EmitOpPinned(i);
    Unpin(ops_[i].x, i);
    if (Binary()) Unpin(ops_[i].y, i);
  }

  void EmitOpPinned(int i) {
    const PointOp& op = ops_[i];
    OperandRef x = op.x, y = op.y;
    if (!Binary()) {
      const Resolved rx = Resolve(x, i, false, regs_.load0);
      if (rx.in_register) {
        EmitAccumulate(op, rx.reg, rx.reg);
      } else {
        EmitAccumulate(op, MemoryOf(x), vec_.V(regs_.load0));
      }
      return;
    }
    // Binary: x must be a register. Prefer the operand already cached as x.
    if (!where_.count(x) && where_.count(y)) std::swap(x, y);
    const Resolved rx = Resolve(x, i, true, regs_.load0);
    const Resolved ry = Resolve(y, i, false, regs_.load1);
    if (ry.in_register) {
      EmitAccumulate(op, rx.reg, ry.reg);
    } else {
      EmitAccumulate(op, rx.reg, MemoryOf(y));
    }
  }

  void EmitAccumulate(const PointOp& op, const Xbyak::Operand& x, const Xbyak::Operand& y) {
    vec_.Accumulate({s_.reduction, s_.combiner, s_.horizontal}, vec_.V(op.acc), x, y, op.lanes,
                    vec_.V(regs_.tmp));
  }

  const std::vector<PointOp>& ops_;
  const StatementPlan& s_;
  const std::vector<Xbyak::Reg64>& pointers_;
  const BlockRegisters& regs_;
  VectorOps& vec_;
  std::map<OperandRef, std::vector<int>> uses_;
  std::map<int, std::optional<std::pair<OperandRef, int>>> cached_;  // reg -> (operand, next use)
  std::map<OperandRef, int> where_;                                  // operand -> reg
};

}  // namespace

bool OperandRef::operator<(const OperandRef& o) const {
  return std::tie(input, offset, kind, lanes, stride) <
         std::tie(o.input, o.offset, o.kind, o.lanes, o.stride);
}

bool OperandRef::operator==(const OperandRef& o) const {
  return std::tie(input, offset, kind, lanes, stride) ==
         std::tie(o.input, o.offset, o.kind, o.lanes, o.stride);
}

void EmitBlock(const std::vector<PointOp>& block, const StatementPlan& statement,
               const std::vector<Xbyak::Reg64>& input_pointers, const BlockRegisters& regs,
               VectorOps& ops) {
  Block(block, statement, input_pointers, regs, ops).Emit();
}

}  // namespace looptool
