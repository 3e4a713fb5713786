#include "backend/codegen/block_emitter.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
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
    PlanRowFolds();
    EmitRowFolds();
    PlanTransposes();
    PlanPairs();
    PlanShifts();
    HoldEvenIndex();
    for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
      auto group = transpose_before_.find(i);
      if (group != transpose_before_.end() && !EmitTranspose(group->second)) {
        for (int op : group->second.ops) transposed_[op] = false;  // strided loads after all
      }
      if (!transposed_[i] && !folded_[i]) EmitOp(i);
    }
    vec_.ReleaseEvenIndex();
    vec_.ReleasePairIndices();
  }

 private:
  // ---- stride 2's window rows folded before the permutes --------------------------------------
  // An accumulator of a sum or max with nothing multiplied (a pool) that reads, on each of two
  // or more rows, the full chunks of stride 2 at elements d and d + 1 (column taps 0 and 1), and
  // maybe d + 2 (tap 2), of one input: reduce(acc, chunk(row, tap)) over rows and taps is
  // reduce(acc, chunk of the rows' spans reduced lane by lane, tap), for a chunk takes the same
  // lanes of every span. So the rows' spans are summed or maxed as they lie in memory (one
  // vector operation per row and vector, from memory) and permuted once: the even and odd
  // phases of the span at d (taps 0 and 1), and tap 2 shifted in from the next vector's even
  // phase when the block holds that accumulator too (the same rows, 2W elements on), else
  // permuted from the rows' spans at d + 2. A 3x3 window then takes 3 permutes a vector where
  // the chunks took 9 (AVX-512, 8 or 16 lanes).
  struct RowFold {
    int acc = 0;
    int input = 0;
    int64_t base = 0;           // bytes: the offset of the chunk at (first row, tap 0)
    std::vector<int64_t> rows;  // bytes from `base`, ascending, 0 first
    bool tap2 = false;          // it reads the chunk at d + 2 on every row too
    int next = -1;              // the fold 2W elements on, on the same rows (tap 2 by shift)
    bool has_prev = false;
  };

  void PlanRowFolds() {
    folded_.assign(ops_.size(), false);
    const int w = vec_.width();
    if (!s_.fold_rows || Binary() || s_.horizontal || !vec_.PermutesStrideTwo() ||
        (w != 8 && w != 16) ||
        (s_.reduction != Reduction::kSum && s_.reduction != Reduction::kMax) ||
        cached_.size() < 4) {
      return;
    }
    std::map<int, std::vector<int>> by_acc;
    for (int i = 0; i < static_cast<int>(ops_.size()); ++i) by_acc[ops_[i].acc].push_back(i);
    for (const auto& [acc, ops] : by_acc) {
      std::set<int64_t> offsets;
      const int input = ops_[ops[0]].x.input;
      bool ok = true;
      for (int i : ops) {
        const OperandRef& x = ops_[i].x;
        ok = ok && FullStrideTwo(x, w) && ops_[i].lanes == w && x.input == input &&
             offsets.insert(x.offset).second;
      }
      if (!ok) continue;
      RowFold f;
      f.acc = acc;
      f.input = input;
      f.base = *offsets.begin();
      f.tap2 = offsets.count(f.base + 8) > 0;
      // Rows in order: each the smallest offset left, with its taps.
      while (ok && !offsets.empty()) {
        const int64_t row = *offsets.begin();
        for (int64_t tap = 0; tap <= (f.tap2 ? 8 : 4); tap += 4) ok = ok && offsets.erase(row + tap);
        f.rows.push_back(row - f.base);
      }
      if (!ok || f.rows.size() < 2) continue;
      for (int i : ops) folded_[i] = true;
      folds_.push_back(f);
    }
    // Tap 2 by shift: a fold whose next vector's fold reads the same rows (where no other fold
    // starts at either place: accumulators reading the same window, as outputs that the input
    // does not depend on have, stay apart).
    std::map<std::pair<int, int64_t>, int> at;
    std::set<std::pair<int, int64_t>> shared;
    for (int k = 0; k < static_cast<int>(folds_.size()); ++k) {
      if (!at.emplace(std::pair{folds_[k].input, folds_[k].base}, k).second) {
        shared.insert({folds_[k].input, folds_[k].base});
      }
    }
    for (RowFold& f : folds_) {
      const std::pair<int, int64_t> here{f.input, f.base}, there{f.input, f.base + 2 * w * 4};
      auto it = at.find(there);
      if (!f.tap2 || it == at.end() || shared.count(here) || shared.count(there)) continue;
      RowFold& g = folds_[it->second];
      if (g.tap2 && g.rows == f.rows) {
        f.next = it->second;
        g.has_prev = true;
      }
    }
    // The folded ops are emitted first, from no cache register: they count as no uses.
    for (auto& [operand, uses] : uses_) {
      uses.erase(std::remove_if(uses.begin(), uses.end(), [&](int i) { return folded_[i]; }),
                 uses.end());
    }
  }

  // Emits every fold, chain by chain (a fold, then its next, ...), in four cache registers (the
  // pair's index tables, and the even phases of a vector and of the one before it), load0,
  // load1 and tmp; the cache is as empty after as before.
  void EmitRowFolds() {
    if (folds_.empty()) return;
    const int w = vec_.width();
    std::vector<int> free_regs;
    for (const auto& [reg, held] : cached_) free_regs.push_back(reg);
    std::sort(free_regs.rbegin(), free_regs.rend());
    vec_.HoldPairIndices(free_regs[0], free_regs[1]);
    const int evens[2] = {free_regs[2], free_regs[3]};
    const Xbyak::Xmm odd = vec_.V(regs_.load0), hi = vec_.V(regs_.load1), t = vec_.V(regs_.tmp);
    // reg = the rows' vectors at base + at, reduced lane by lane.
    auto fold_rows = [&](const Xbyak::Xmm& reg, const RowFold& f, int64_t at) {
      vec_.Load(reg, ptr[pointers_[f.input] + (f.base + at)], w);
      for (size_t r = 1; r < f.rows.size(); ++r) {
        vec_.Reduce(s_.reduction, reg, vec_.VectorMemory(pointers_[f.input] + (f.base + at + f.rows[r])));
      }
    };
    for (size_t start = 0; start < folds_.size(); ++start) {
      if (folds_[start].has_prev) continue;
      int prev = -1;
      for (int k = static_cast<int>(start), n = 0; k >= 0; k = folds_[k].next, ++n) {
        const RowFold& f = folds_[k];
        const Xbyak::Xmm even = vec_.V(evens[n % 2]);
        fold_rows(even, f, 0);
        fold_rows(hi, f, int64_t{w} * 4);
        vec_.StrideTwoPhases(even, &odd, hi);
        vec_.Reduce(s_.reduction, vec_.V(f.acc), even);
        vec_.Reduce(s_.reduction, vec_.V(f.acc), odd);
        if (prev >= 0) {  // the fold before: its tap 2, lanes 1.. of its even phase, then ours
          vec_.ShiftInOneLane(t, even, vec_.V(evens[(n + 1) % 2]));
          vec_.Reduce(s_.reduction, vec_.V(folds_[prev].acc), t);
        }
        if (f.tap2 && f.next < 0) {  // tap 2 from the rows' spans at d + 2 (elements 2..2W)
          fold_rows(odd, f, 8);
          fold_rows(hi, f, 8 + int64_t{w - 1} * 4);
          vec_.EvenPhase(odd, hi, t);
          vec_.Reduce(s_.reduction, vec_.V(f.acc), odd);
        }
        prev = k;
      }
    }
    vec_.ReleasePairIndices();
  }

  // ---- stride 2's permute indices -------------------------------------------------------------
  // A block that reads two or more full chunks of stride 2 (strided convolutions and pooling
  // in CHW) holds their permute indices in its highest cache register, loaded once, instead of
  // loading them beside every chunk (chunks PlanPairs paired count for nothing here: they
  // permute by the pair's tables); the cache is one register smaller then. (Decided after
  // PlanTransposes, which counted that register as a spare: a transpose planned in the same
  // block may then fall back to strided loads, correct but slower; copies that transpose
  // rarely read stride-2 chunks too.)
  void HoldEvenIndex() {
    if (!vec_.PermutesStrideTwo() || regs_.cache.empty()) return;
    // Chunks loaded alone: paired chunks permute by the pair's tables; shifted ones not at all.
    std::set<OperandRef> chunks;
    for (const OperandRef& o : FullStrideTwoChunks()) {
      if (!pair_even_.count(o) && !pair_odd_.count(o) && !shifted_.count(o)) chunks.insert(o);
    }
    if (chunks.size() < 2 || cached_.empty()) return;
    const int reg = cached_.rbegin()->first;  // the highest cache register PlanPairs left
    cached_.erase(reg);
    vec_.HoldEvenIndex(reg);
  }

  // ---- stride 2's even and odd phases from one span -------------------------------------------
  // Full chunks of stride 2 at elements d and d + 1 of one input (column taps 0 and 1 of a
  // stride-2 window) read the same span: when the block reads both, the first of them to be
  // loaded loads the pair (VectorOps::LoadStrideTwoPair: two loads instead of four) and the
  // other waits in a cache register. On AVX-512 the pair's two permute index tables take two
  // cache registers for the block, so pairing needs at least two pairs and leaves at least
  // four registers to the cache. A vector loop's masked last chunk pairs too (MaskedStrideTwo:
  // a 28-wide row's 12 lanes at 16), on AVX-512.
  static bool FullStrideTwo(const OperandRef& o, int width) {
    return o.kind == AccessPlan::Kind::kStrided && o.stride == 2 && o.lanes == width;
  }

  // The distinct full chunks of stride 2 the block's ops load (a transpose's ops read rows as
  // vectors instead).
  std::set<OperandRef> FullStrideTwoChunks() const {
    std::set<OperandRef> chunks;
    for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
      if (transposed_[i] || folded_[i]) continue;
      for (const OperandRef* o : {&ops_[i].x, &ops_[i].y}) {
        if (o == &ops_[i].y && !Binary()) continue;
        if (FullStrideTwo(*o, vec_.width())) chunks.insert(*o);
      }
    }
    return chunks;
  }

  // A masked chunk of stride 2 that pairs and shifts take (s_.masked_stride_two; AVX-512).
  bool MaskedStrideTwo(const OperandRef& o) const {
    return s_.masked_stride_two && vec_.PermutesStrideTwo() &&
           o.kind == AccessPlan::Kind::kStrided && o.stride == 2 && o.lanes < vec_.width();
  }

  // FullStrideTwoChunks() and the masked chunks MaskedStrideTwo() takes.
  std::set<OperandRef> PairableStrideTwoChunks() const {
    std::set<OperandRef> chunks = FullStrideTwoChunks();
    for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
      if (transposed_[i] || folded_[i]) continue;
      for (const OperandRef* o : {&ops_[i].x, &ops_[i].y}) {
        if (o == &ops_[i].y && !Binary()) continue;
        if (MaskedStrideTwo(*o)) chunks.insert(*o);
      }
    }
    return chunks;
  }

  void PlanPairs() {
    if (!s_.pair_phases || vec_.width() < 8 || vec_.sse()) return;
    const std::set<OperandRef> chunks = PairableStrideTwoChunks();
    for (const OperandRef& o : chunks) {
      OperandRef odd = o;
      odd.offset += 4;
      if (chunks.count(odd) && !pair_odd_.count(o)) {
        pair_even_.insert(o);
        pair_odd_.insert(odd);
      }
    }
    if (pair_even_.empty()) return;
    if (vec_.PermutesStrideTwo()) {
      std::vector<int> free_regs;
      for (const auto& [reg, held] : cached_) free_regs.push_back(reg);
      std::sort(free_regs.begin(), free_regs.end());
      if (pair_even_.size() < 2 || free_regs.size() < 6) {
        pair_even_.clear();
        pair_odd_.clear();
        return;
      }
      const int even_reg = free_regs[free_regs.size() - 1];
      const int odd_reg = free_regs[free_regs.size() - 2];
      cached_.erase(even_reg);
      cached_.erase(odd_reg);
      vec_.HoldPairIndices(even_reg, odd_reg);
    }
  }

  // ---- a tap's chunk shifted in from the chunks of this vector and the next -----------------
  // A full chunk of stride 2 at element d + 2 (a stride-2 window's column tap 2) holds lanes
  // 1..W-1 of the chunk at d (tap 0) and lane 0 of the chunk at d + 2W (tap 0 of the next vector
  // of outputs). When the block reads both of those (several vectors of the output row in one
  // block), it is made from them by one lane shift (VectorOps::ShiftInOneLane) instead of two
  // loads and a permute. Neither source may itself be made so, nor may the chunk be one of a
  // pair; the sources count the shifted chunk's reads as their own uses, so that the cache keeps
  // them for it. The next vector's chunk may be a masked one (MaskedStrideTwo: the last of the
  // row), whose lane 0 is read. AVX-512 (8 or 16 lanes) only.
  //
  // Likewise a full contiguous chunk at element d + t (0 < t < W; a stride-1 window's column tap
  // t in CHW) from the chunks at d and d + W, by a shift of t lanes, where the block reads both:
  // a 16-lane load off a cache line's alignment spans two lines (an 8-lane one half the time),
  // and such loads cost about twice an aligned one on the cores we target, more than the shift
  // (bench/results/zen5/codegen_unit_stride_shifts.md). With shift_unit_taps.
  void PlanShifts() {
    if (!vec_.PermutesStrideTwo() || (vec_.width() != 8 && vec_.width() != 16)) return;
    const int w = vec_.width();
    if (s_.shift_taps) {
      const std::set<OperandRef> chunks = FullStrideTwoChunks();
      // The next vector's tap 0 may be a masked chunk (its lane 0 is read): by offset.
      std::map<std::pair<int, int64_t>, OperandRef> masked;
      for (const OperandRef& o : PairableStrideTwoChunks()) {
        if (o.lanes < w) masked.emplace(std::pair{o.input, o.offset}, o);
      }
      // First a paired masked chunk's tap 2 (the chunk at d + 2, of its lanes, which reads
      // element 2 * lanes): its span's load takes that element too (through_next_), and the
      // chunk is the even phase shifted by one lane; its lanes from `lanes` on are not zero
      // then, so a vertical statement's only (a masked store never writes them).
      for (const auto& [at, o] : masked) {
        OperandRef t2 = o;
        t2.offset += 2 * 4;
        if (s_.horizontal || !pair_even_.count(o) || !uses_.count(t2) || uses_.at(t2).empty() ||
            pair_even_.count(t2) || pair_odd_.count(t2) || shifted_.count(t2)) {
          continue;
        }
        shifted_[t2] = {o, o, 1};
        through_next_.insert(o);
      }
      std::set<OperandRef> sources;
      for (const OperandRef& o : chunks) {  // by offset
        if (pair_even_.count(o) || pair_odd_.count(o) || sources.count(o)) continue;
        OperandRef lo = o, hi = o;
        lo.offset -= 2 * 4;
        hi.offset += (2 * w - 2) * 4;
        if (!chunks.count(hi)) {
          auto m = masked.find({hi.input, hi.offset});
          // (not one made by a shift itself: a source is loaded)
          if (m != masked.end() && !shifted_.count(m->second)) hi = m->second;
        }
        if (!chunks.count(lo) || !(chunks.count(hi) || hi.lanes < w) || shifted_.count(lo)) {
          continue;
        }
        shifted_[o] = {lo, hi, 1};  // hi, after o by offset, is not decided yet: it never will be
        sources.insert(lo);
        sources.insert(hi);
      }
    }
    if (s_.shift_unit_taps) {
      std::set<OperandRef> chunks, sources;
      for (const auto& [o, uses] : uses_) {
        if (o.kind == AccessPlan::Kind::kVector && o.lanes == w && !uses.empty()) chunks.insert(o);
      }
      for (const OperandRef& o : chunks) {  // by offset
        if (sources.count(o)) continue;
        for (int t = 1; t < w; ++t) {
          OperandRef lo = o, hi = o;
          lo.offset -= int64_t{t} * 4;
          hi.offset = lo.offset + int64_t{w} * 4;
          if (!chunks.count(lo) || !chunks.count(hi) || shifted_.count(lo)) continue;
          shifted_[o] = {lo, hi, t};  // hi, after o, is not decided yet: it never will be
          sources.insert(lo);
          sources.insert(hi);
          break;
        }
      }
    }
    for (const auto& [o, from] : shifted_) {
      for (const OperandRef& source : {from.lo, from.hi}) {
        std::vector<int>& uses = uses_[source];
        const std::vector<int>& more = uses_.at(o);
        uses.insert(uses.end(), more.begin(), more.end());
        std::sort(uses.begin(), uses.end());
        uses.erase(std::unique(uses.begin(), uses.end()), uses.end());
      }
    }
  }

  // Makes shifted chunk `o` in `reg` from its sources: each from its cache register, or loaded
  // there now (the low one into `reg` itself when no cache register pays). False, with nothing
  // emitted, when the high one finds no register but `reg`, or, for a contiguous chunk, when
  // neither source is held (two loads would replace one).
  bool LoadShifted(int reg, const OperandRef& o, int i) {
    const auto& [lo, hi, lanes] = shifted_.at(o);
    // A contiguous chunk is one load: shifted, it takes at most one too (a source held).
    if (o.kind == AccessPlan::Kind::kVector && !where_.count(lo) && !where_.count(hi)) return false;
    // Pin what is cached already, so that caching the other source cannot evict it.
    for (const OperandRef* source : {&lo, &hi}) {
      auto at = where_.find(*source);
      if (at != where_.end()) cached_[at->second]->second = i;
    }
    const int hi_reg = CachedSource(hi, i, reg, reg);
    if (hi_reg < 0) {
      Unpin(lo, i);
      return false;
    }
    int lo_reg = CachedSource(lo, i, reg, hi_reg);
    if (lo_reg < 0) {
      lo_reg = reg;
      LoadOperand(reg, lo, i);
    }
    vec_.ShiftInLanes(vec_.V(reg), vec_.V(hi_reg), vec_.V(lo_reg), lanes);
    Unpin(lo, i);
    Unpin(hi, i);
    return true;
  }

  // The cache register holding `source` for op `i` (pinned), loading it into a new one where
  // caching pays and that one is neither `avoid1` nor `avoid2`; else -1, nothing loaded.
  int CachedSource(const OperandRef& source, int i, int avoid1, int avoid2) {
    if (auto at = where_.find(source); at != where_.end()) return at->second;
    const int next = NextUse(source, i);
    const int r = next == kNever ? -1 : CacheRegister(next);
    if (r < 0 || r == avoid1 || r == avoid2) return -1;
    cached_[r] = std::make_pair(source, i);
    where_[source] = r;
    LoadOperand(r, source, i);
    return r;
  }

  // `o`'s partner in a pair (the other phase of its span), or nullopt.
  std::optional<OperandRef> Partner(const OperandRef& o) const {
    OperandRef p = o;
    if (pair_even_.count(o)) {
      p.offset += 4;
    } else if (pair_odd_.count(o)) {
      p.offset -= 4;
    } else {
      return std::nullopt;
    }
    return p;
  }

  // Loads `o` into `reg`: with its partner into a cache register when the partner is read
  // later in the block and not held yet, else alone.
  void LoadOperand(int reg, const OperandRef& o, int i) {
    if (shifted_.count(o) && LoadShifted(reg, o, i)) return;
    const std::optional<OperandRef> partner = Partner(o);
    if (partner && !where_.count(*partner)) {
      const int next = NextUse(*partner, i);
      const int preg = next == kNever ? -1 : CacheRegister(next);
      if (preg >= 0 && preg != reg) {
        const bool even = pair_even_.count(o) > 0;
        const OperandRef& base = even ? o : *partner;
        vec_.LoadStrideTwoPair(vec_.V(even ? reg : preg), vec_.V(even ? preg : reg), At(base),
                               vec_.V(regs_.tmp), o.lanes, through_next_.count(base) > 0);
        cached_[preg] = std::make_pair(*partner, next);
        where_[*partner] = preg;
        return;
      }
    }
    LoadInto(reg, o);
  }

  // ---- transposed reads ---------------------------------------------------------------------
  // A copy (kAssign of one input) whose input is read with a stride along the vector variable,
  // at C >= width / 2 consecutive elements by C ops of the block (a transpose, B[n,m] = A[m,n],
  // with a block of n in registers): instead of C strided loads (gathers), the `lanes` rows of
  // C consecutive elements are loaded as vectors and transposed in registers, straight into the
  // C ops' accumulators (the ops then emit nothing).
  struct TransposeGroup {
    std::vector<int> ops;  // by element: ops[c] reads element c of each row
    OperandRef first;      // ops[0]'s operand
  };

  void PlanTransposes() {
    transposed_.assign(ops_.size(), false);
    const int w = vec_.width();
    if (w < 8 || Binary() || s_.reduction != Reduction::kAssign) return;
    std::map<int, int> acc_uses;
    for (const PointOp& op : ops_) ++acc_uses[op.acc];
    // (lanes, stride) -> byte offset -> op, for strided operands read by one op.
    std::map<std::pair<int, int64_t>, std::map<int64_t, int>> runs;
    for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
      const OperandRef& x = ops_[i].x;
      if (x.kind != AccessPlan::Kind::kStrided || uses_.at(x).size() != 1 ||
          acc_uses[ops_[i].acc] != 1 || ops_[i].lanes != x.lanes) {
        continue;
      }
      runs[{x.lanes, x.stride}][x.offset] = i;
    }
    // Registers besides the accumulators: load0, load1 and the cache registers empty then.
    const int spare = 2 + static_cast<int>(regs_.cache.size());
    for (const auto& entry : runs) {
      const std::pair<int, int64_t> key = entry.first;  // (lanes, stride); a lambda captures it
      const std::map<int64_t, int>& by_offset = entry.second;
      std::vector<int> run;
      int64_t next = 0;
      auto close = [&] {
        for (size_t at = 0; at < run.size(); at += w) {
          const int c = static_cast<int>(std::min<size_t>(w, run.size() - at));
          if (c < w / 2 || w - c > spare) continue;
          const int64_t reach = ops_[run[at]].x.offset + (key.first - 1) * key.second * 4;
          if (reach > (int64_t{1} << 30)) continue;  // row displacements stay 32-bit
          TransposeGroup g;
          g.ops.assign(run.begin() + at, run.begin() + at + c);
          g.first = ops_[g.ops[0]].x;
          int first_use = *std::min_element(g.ops.begin(), g.ops.end());
          for (int op : g.ops) transposed_[op] = true;
          transpose_before_[first_use] = g;
        }
        run.clear();
      };
      for (const auto& [offset, op] : by_offset) {
        if (!run.empty() && offset != next) close();
        run.push_back(op);
        next = offset + 4;
      }
      close();
    }
  }

  // Emits the group's transpose; false (nothing emitted) when too few registers are free.
  bool EmitTranspose(const TransposeGroup& g) {
    const int w = vec_.width(), c = static_cast<int>(g.ops.size()), rows = g.first.lanes;
    held_.clear();  // the operand temporaries may serve as spares below
    // Rows go to the group's accumulators, then to spare registers; `free` is the renaming
    // scratch of each step.
    std::vector<int> slot;
    std::set<int> accs;
    for (int op : g.ops) {
      slot.push_back(ops_[op].acc);
      accs.insert(ops_[op].acc);
    }
    std::vector<int> spares = {regs_.load0, regs_.load1};
    for (const auto& [reg, held] : cached_) {
      if (!held) spares.push_back(reg);
    }
    if (static_cast<int>(spares.size()) < w - c) return false;
    for (size_t k = 0; static_cast<int>(slot.size()) < w; ++k) slot.push_back(spares[k]);
    int free = regs_.tmp;
    for (int r = 0; r < rows; ++r) {
      vec_.Load(vec_.V(slot[r]), ptr[At(g.first) + r * g.first.stride * 4], c);
    }
    for (int h = 1; h < w; h *= 2) {
      for (int i = 0; i < w; ++i) {
        if (i & h) continue;
        vec_.TransposeStep(h, vec_.V(free), vec_.V(slot[i]), vec_.V(slot[i + h]));
        std::swap(free, slot[i]);
      }
    }
    // Column e is in slot[TransposedSlot(e)]; move each into its op's accumulator (a parallel
    // move: a register is written once the column it held has moved; a cycle is broken through
    // a register that is no accumulator of the group, of which w + 1 - c >= 1 take part).
    std::map<int, int> pending;  // accumulator -> register holding its column
    for (int e = 0; e < c; ++e) {
      const int from = slot[VectorOps::TransposedSlot(e)], to = ops_[g.ops[e]].acc;
      if (from != to) pending[to] = from;
    }
    int scratch = accs.count(free) ? -1 : free;
    for (int r : slot) {
      if (scratch < 0 && !accs.count(r)) scratch = r;
    }
    LT_CHECK(scratch >= 0);
    while (!pending.empty()) {
      bool moved = false;
      for (auto it = pending.begin(); it != pending.end();) {
        bool needed = false;
        for (const auto& [to, from] : pending) needed |= from == it->first;
        if (needed) {
          ++it;
          continue;
        }
        vec_.Copy(vec_.V(it->first), vec_.V(it->second));
        it = pending.erase(it);
        moved = true;
      }
      if (!moved) {  // only cycles left: park one source in the scratch register
        const int parked = pending.begin()->second;
        vec_.Copy(vec_.V(scratch), vec_.V(parked));
        for (auto& [to, from] : pending) {
          if (from == parked) from = scratch;
        }
      }
    }
    return true;
  }

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
    // Made in a register from its sources: a stride-2 chunk always, a contiguous one where a
    // source is held (else LoadShifted loads it, and a memory operand serves as well).
    if (auto s = shifted_.find(o);
        s != shifted_.end() && (where_.count(s->second.lo) || where_.count(s->second.hi))) {
      return true;
    }
    if (o.lanes < vec_.width() && o.kind == AccessPlan::Kind::kVector) return true;  // masked
    if (o.kind == AccessPlan::Kind::kStrided) return true;
    if (o.kind == AccessPlan::Kind::kBroadcast && !vec_.CanBroadcastFromMemory()) return true;
    return s_.reduction == Reduction::kAssign && s_.combiner == Combiner::kIdentity;
  }

  void LoadInto(int reg, const OperandRef& o) {
    if (o.kind == AccessPlan::Kind::kBroadcast) {
      vec_.Broadcast(vec_.V(reg), dword[At(o)]);
    } else if (o.kind == AccessPlan::Kind::kStrided) {
      // A source of its tap 2's shift holds element 2 * lanes in lane `lanes` (PlanShifts).
      const int lanes = o.lanes + (through_next_.count(o) ? 1 : 0);
      vec_.LoadStrided(vec_.V(reg), At(o), o.stride, lanes, vec_.V(regs_.tmp));
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
    // Without broadcast memory operands (AVX2), an operand the next op reads in the same place
    // (its x, in load0) waits there instead of taking a cache register: a row's broadcast
    // against each vector of the block leaves the cache to the vectors every row reads.
    const bool held_for_next = !vec_.CanBroadcastFromMemory() &&
                               (need_register || MustBeRegister(o)) && load_reg == regs_.load0 &&
                               next == i + 1 && ops_[next].x == o;
    if (next != kNever && !held_for_next) {
      const int reg = CacheRegister(next);
      if (reg >= 0) {
        cached_[reg] = std::make_pair(o, i);  // pinned before its partner takes a register
        where_[o] = reg;
        LoadOperand(reg, o, i);
        return {true, vec_.V(reg)};
      }
    }
    if (need_register || MustBeRegister(o)) {
      // An operand temporary still holding `o` (the op before read it too, e.g. a row's
      // broadcast against each vector of the block when no cache register is free) is reused.
      auto held = held_.find(load_reg);
      if (held == held_.end() || !(held->second == o)) {
        LoadOperand(load_reg, o, i);
        held_[load_reg] = o;
      }
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
    // Binary: x must be a register. Prefer the operand already cached as x, so that the other
    // may be a memory operand (on AVX2, when it must be in a register anyway, x stays: in
    // load0, where the next op may find it).
    if (!where_.count(x) && where_.count(y) &&
        (vec_.CanBroadcastFromMemory() || !MustBeRegister(x))) {
      std::swap(x, y);
    }
    const Resolved rx = Resolve(x, i, true, regs_.load0);
    const Resolved ry = Resolve(y, i, false, regs_.load1);
    if (ry.in_register) {
      EmitAccumulate(op, rx.reg, ry.reg);
    } else {
      EmitAccumulate(op, rx.reg, MemoryOf(y));
    }
  }

  void EmitAccumulate(const PointOp& op, const Xbyak::Operand& x, const Xbyak::Operand& y) {
    Arithmetic arithmetic{s_.reduction, s_.combiner, s_.horizontal};
    // Masked and strided loads zero the lanes they do not read; a broadcast fills them all.
    arithmetic.x_zero_beyond_lanes = !Binary() && op.x.kind != AccessPlan::Kind::kBroadcast &&
                                     (x.isXMM() || x.isYMM());
    vec_.Accumulate(arithmetic, vec_.V(op.acc), x, y, op.lanes, vec_.V(regs_.tmp));
  }

  const std::vector<PointOp>& ops_;
  const StatementPlan& s_;
  const std::vector<Xbyak::Reg64>& pointers_;
  const BlockRegisters& regs_;
  VectorOps& vec_;
  std::map<OperandRef, std::vector<int>> uses_;
  std::map<int, std::optional<std::pair<OperandRef, int>>> cached_;  // reg -> (operand, next use)
  std::map<OperandRef, int> where_;                                  // operand -> reg
  // What each operand temporary (load0, load1) holds since it was last loaded; only loads in
  // Resolve and transposes write them within a block.
  std::map<int, OperandRef> held_;
  std::vector<bool> transposed_;                    // ops whose value a transpose wrote
  std::vector<bool> folded_;                        // ops a row fold emitted
  std::vector<RowFold> folds_;                      // PlanRowFolds' folds
  std::map<int, TransposeGroup> transpose_before_;  // first op of a group -> the group
  std::set<OperandRef> pair_even_, pair_odd_;       // PlanPairs' pairs: chunk d, chunk d + 1
  // PlanShifts' chunks made by a lane shift: their sources (stride 2: the chunks at d and d + 2W
  // for the chunk at d + 2, one lane; contiguous: the chunks at d and d + W for the chunk at
  // d + t, t lanes).
  struct Shift {
    OperandRef lo, hi;
    int lanes = 1;
  };
  std::map<OperandRef, Shift> shifted_;
  // Masked stride-2 chunks loaded through element 2 * lanes, for their tap 2's shift.
  std::set<OperandRef> through_next_;
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
