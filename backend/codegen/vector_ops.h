// VectorOps: the vector instructions of one (ISA, width) pair, so that the emitter says what to
// compute ("load a chunk", "accumulate x * y") and this class says it in AVX-512, AVX2, AVX
// scalar or SSE scalar. Masked chunks (lanes < width) use k-registers on AVX-512 and a vmaskmov
// mask register on AVX2; widths of 1 need no masks. A chunk of 1, 2, 4 or 8 lanes below the width
// is loaded and stored by the plain move of that many floats (vmovss, vmovsd, an xmm or a ymm
// vmovups) instead: the same bytes, the lanes above zeroed on a load, and no mask (AVX2's masked
// store takes many micro-ops on AMD cores).
//
// Register roles (named by the caller): accumulators, cached operands, two temporaries, the zero
// register of relu, and on AVX2 the lane-mask register.
#ifndef LOOPTOOL_BACKEND_CODEGEN_VECTOR_OPS_H_
#define LOOPTOOL_BACKEND_CODEGEN_VECTOR_OPS_H_

#include <map>
#include <utility>
#include <vector>

#include <xbyak/xbyak.h>

#include "backend/codegen/isa.h"
#include "backend/ir/program.h"

namespace looptool {

// What one statement computes at each iteration point: acc = reduction(acc, combiner(x, y)),
// and whether its accumulators are horizontal (per-lane partial results of a vectorized
// reduction variable, reduced across lanes on exit).
struct Arithmetic {
  Reduction reduction = Reduction::kAssign;
  Combiner combiner = Combiner::kIdentity;
  bool horizontal = false;
  // The operand x of a kIdentity point was loaded with its inactive lanes zeroed (a masked or
  // strided load, not a broadcast): a masked horizontal sum may then add all lanes, with no
  // blend on AVX2.
  bool x_zero_beyond_lanes = false;
};

class VectorOps {
 public:
  // `tail_lanes` are the lane counts whose AVX-512 masks the prologue loads into k1..k6 (others
  // use k7 on demand).
  VectorOps(Xbyak::CodeGenerator& g, Isa isa, const std::vector<int>& tail_lanes);

  // Width of the statement being emitted (the ISA's vector width, or 1 for scalar code) and the
  // AVX2 mask register it reserved.
  void SetWidth(int width, int mask_register);
  int width() const { return width_; }
  bool sse() const { return isa_ == Isa::kSse; }
  // Register i at the active width: zmm, ymm or xmm.
  Xbyak::Xmm V(int i) const;

  // Kernel prologue work: loads the AVX-512 tail masks. Emits nothing for other ISAs.
  void LoadTailMasks();
  // Emits the AVX2 lane-mask table and the strided loads' index tables; call once after the
  // kernel's last instruction.
  void EmitMaskTable();
  // Forgets which mask the AVX2 mask register holds (after a label another path jumps to).
  void ForgetMask() { avx2_mask_lanes_ = -1; }

  void Load(const Xbyak::Xmm& dst, const Xbyak::Address& src, int lanes);
  // dst's first `lanes` lanes = the floats at src, src + stride, ... (stride > 1 elements; the
  // other lanes zero). Full chunks of stride 2: two loads (elements 0..W-1 and W-1..2W-2, never
  // past the last element read) and a permute; masked chunks of stride 2: a masked load of the
  // elements spanned (beside a full load where they pass a vector) and a permute (on AVX2
  // through the mask register SetWidth named, else lane by lane; on AVX-512 a chunk of 8 lanes
  // at 16 as a full chunk at 8: two loads and a permute, no mask); other strides: on AVX-512 a
  // gather (lane offsets from a table), on AVX2 lane by lane (vmovss, vinsertps; the mask
  // register untouched). `scratch` (not dst) and eax are overwritten; AVX-512 may set k7.
  void LoadStrided(const Xbyak::Xmm& dst, const Xbyak::RegExp& src, int64_t stride, int lanes,
                   const Xbyak::Xmm& scratch);
  // Whether LoadStrided of a full chunk of stride 2 permutes with an index table (AVX-512): a
  // block that does so often may hold the table in a register (HoldEvenIndex).
  bool PermutesStrideTwo() const { return isa_ == Isa::kAvx512 && width_ > 1; }
  // Loads stride 2's permute indices into register `reg` (at the current width), and makes
  // LoadStrided read them from there instead of loading them for every chunk, until
  // ReleaseEvenIndex. The caller keeps `reg` untouched meanwhile. Needs PermutesStrideTwo().
  void HoldEvenIndex(int reg);
  void ReleaseEvenIndex() { even_index_register_ = -1; }
  // The even and odd phases of one span, full chunks of stride 2 at elements 0 and 1 from src
  // (a pool's or strided convolution's column taps 0 and 1): two loads (elements 0..2W-1, the
  // last of which the odd chunk reads too) and two permutes, where LoadStrided twice takes
  // four loads. AVX-512 permutes by the index tables HoldPairIndices put in registers; AVX2
  // shuffles. `scratch` (neither destination) is overwritten. On AVX-512 the chunks may be
  // masked ones of `lanes` < W: elements 0 .. 2 * lanes - 1 (the odd chunk's last), nothing
  // past them: those of the first vector whole where they fill it, the rest by a masked load
  // (k7 set, eax overwritten); both phases' lanes from `lanes` on are zero, as LoadStrided's.
  // With `through_next` (masked only), element 2 * lanes too: the even phase's lane `lanes`
  // holds it (the chunk two elements on, tap 2, is then the even phase shifted by a lane),
  // which the caller's reads must include.
  void LoadStrideTwoPair(const Xbyak::Xmm& even, const Xbyak::Xmm& odd, const Xbyak::RegExp& src,
                         const Xbyak::Xmm& scratch, int lanes, bool through_next = false);
  // Loads LoadStrideTwoPair's two index tables (at the current width) into registers
  // `even_reg` and `odd_reg`, which the caller keeps untouched until ReleasePairIndices. Needs
  // PermutesStrideTwo().
  void HoldPairIndices(int even_reg, int odd_reg);
  void ReleasePairIndices() { pair_index_registers_ = {-1, -1}; }
  // LoadStrideTwoPair's permutes of a span already in registers: `lo` holds its elements
  // 0..W-1, `hi` W..2W-1; the even phase goes to `lo`, the odd one to `odd` (unless null).
  // Needs HoldPairIndices.
  void StrideTwoPhases(const Xbyak::Xmm& lo, const Xbyak::Xmm* odd, const Xbyak::Xmm& hi);
  // LoadStrided's permute of a full chunk of stride 2 already in registers: `lo` holds elements
  // 0..W-1, `hi` W-1..2W-2; the chunk goes to `lo`. `scratch` takes the index table unless
  // HoldEvenIndex holds it. Needs PermutesStrideTwo().
  void EvenPhase(const Xbyak::Xmm& lo, const Xbyak::Xmm& hi, const Xbyak::Xmm& scratch);
  // d = d + b, or max(d, b), lane by lane over the full width (b a register or memory).
  void Reduce(Reduction reduction, const Xbyak::Xmm& d, const Xbyak::Operand& b);
  // dst = lanes 1..W-1 of `lo`, then lane 0 of `hi` (valignd): the full chunk of stride 2 two
  // elements on from `lo`'s, where `hi` is the chunk 2W elements on from `lo`'s (a stride-2
  // window's column tap 2 from tap 0 of its vector and of the next). Needs PermutesStrideTwo().
  void ShiftInOneLane(const Xbyak::Xmm& dst, const Xbyak::Xmm& hi, const Xbyak::Xmm& lo);
  // dst = lanes `lanes`..W-1 of `lo`, then lanes 0..`lanes`-1 of `hi` (valignd; 0 < lanes < W):
  // the contiguous chunk `lanes` elements on from `lo`'s, where `hi` is the chunk W elements on
  // (a stride-1 window's column tap from tap 0 of its vector and of the next). Needs
  // PermutesStrideTwo().
  void ShiftInLanes(const Xbyak::Xmm& dst, const Xbyak::Xmm& hi, const Xbyak::Xmm& lo, int lanes);
  void Broadcast(const Xbyak::Xmm& dst, const Xbyak::Address& src);
  void Store(const Xbyak::Address& dst, const Xbyak::Xmm& src, int lanes);
  // The first `lanes` lanes of src to dst, dst + stride, ... (stride > 1 elements; the
  // others untouched): on AVX-512 a scatter (lane offsets from LoadStrided's tables; k7 set),
  // on AVX2 lane by lane (vmovss, vextractps). `scratch` (not src) and eax are overwritten.
  void StoreStrided(const Xbyak::RegExp& dst, int64_t stride, const Xbyak::Xmm& src, int lanes,
                    const Xbyak::Xmm& scratch);
  // A full vector stored past the caches (movntps / vmovntps); `dst` must be aligned to the
  // vector's bytes. Weakly ordered: the kernel ends with an sfence.
  void StoreStreaming(const Xbyak::Address& dst, const Xbyak::Xmm& src);
  void Copy(const Xbyak::Xmm& dst, const Xbyak::Xmm& src);
  void Zero(const Xbyak::Xmm& dst);
  void NegativeInfinity(const Xbyak::Xmm& dst);
  void Relu(const Xbyak::Xmm& acc, const Xbyak::Xmm& zero);

  // The element operand `x` as a memory operand of an arithmetic instruction: a full vector,
  // an embedded broadcast (AVX-512 only) or one float (width 1).
  Xbyak::Address VectorMemory(const Xbyak::RegExp& at) const;
  Xbyak::Address BroadcastMemory(const Xbyak::RegExp& at) const;
  bool CanBroadcastFromMemory() const { return isa_ == Isa::kAvx512 && width_ > 1; }

  // acc = reduce(acc, combine(x, y)) for one iteration point of `arithmetic`, with `tmp` as
  // scratch. For binary combiners `x` is a register and `y` a register or memory operand; for
  // kIdentity `x` may be either (a register for kAssign) and `y` is ignored. With `lanes` below
  // the width, a horizontal accumulator keeps its inactive lanes (merge masking, or a blend on
  // AVX2).
  void Accumulate(const Arithmetic& arithmetic, const Xbyak::Xmm& acc, const Xbyak::Operand& x,
                  const Xbyak::Operand& y, int lanes, const Xbyak::Xmm& tmp);

  // Reduces the lanes of `acc` (sum or max) into lane 0, using `tmp`.
  void ReduceLanes(Reduction reduction, const Xbyak::Xmm& acc, const Xbyak::Xmm& tmp);
  // Reduces the lanes of up to `width` accumulators at once: afterwards lane o of the register
  // returned holds the reduction (sum or max) of all lanes of register regs[o] (its other lanes
  // are unspecified). Two shuffles and one add per pair of registers at each of log2(width)
  // levels (15 pairs for 16 registers, against 16 ReduceLanes' 64 shuffles and adds); `regs`
  // and `tmp` are overwritten. Needs a vector width of 8 or 16 and 1 <= regs.size() <= width.
  int FoldLanes(Reduction reduction, const std::vector<int>& regs, int tmp);
  // One step of an in-register transpose of `width` rows: at level h (1, 2, 4, ... below the
  // width) rows a and b (h apart) become `lo` (written to `lo`, which may be neither) and `hi`
  // (written over b). After every level, slot s holds column TransposedSlot(s) of the rows, row r
  // in lane r: 32-bit interleaves, 64-bit pairs, then 128-bit (and 256-bit) chunks.
  void TransposeStep(int h, const Xbyak::Xmm& lo, const Xbyak::Xmm& a, const Xbyak::Xmm& b);
  static int TransposedSlot(int s) { return (s & ~3) | ((s & 1) << 1) | ((s & 2) >> 1); }
  // acc = reduce(acc, the `lanes` floats at `at`) lane by lane, using `tmp`.
  void CombineVector(Reduction reduction, const Xbyak::Xmm& acc, const Xbyak::Address& at,
                     int lanes, const Xbyak::Xmm& tmp);
  // Lane 0 of acc = reduce(lane 0 of acc, the float at `at`) / store lane 0 to `at`.
  void CombineScalar(Reduction reduction, const Xbyak::Xmm& acc, const Xbyak::Address& at);
  void StoreScalar(const Xbyak::Address& at, const Xbyak::Xmm& acc);
  void ReluScalar(const Xbyak::Xmm& acc, const Xbyak::Xmm& zero);

 private:
  // AVX-512 gathers and scatters: lane i's offset, i * stride elements, into `offsets` (from
  // the table EmitMaskTable writes), and k7 = the first `lanes` lanes (eax overwritten).
  void LaneOffsets(const Xbyak::Xmm& offsets, int64_t stride, int lanes);
  Xbyak::Opmask Mask(int lanes);       // AVX-512
  // Stride 2's index table at byte offset `at16` (16 lanes) or `at8` (8) from even_table_,
  // which EmitMaskTable then writes.
  Xbyak::Address EvenTable(int at16, int at8);
  // AVX-512 stride 2, lanes < width: one or two masked loads and a permute (no gather).
  void LoadStrideTwoMasked(const Xbyak::Xmm& dst, const Xbyak::RegExp& src, int lanes,
                           const Xbyak::Xmm& scratch);
  void SetAvx2Mask(int lanes);         // loads the table row into the mask register
  Xbyak::Xmm Scalar(const Xbyak::Xmm& r) const { return Xbyak::Xmm(r.getIdx()); }
  // The plain move of `lanes` (1, 2, 4 or 8) floats between `reg`'s low lanes and `at`, when
  // lanes is below the width and the ISA has VEX moves; false (nothing emitted) otherwise.
  bool MoveNarrow(const Xbyak::Xmm& reg, const Xbyak::Address& at, int lanes, bool load);
  void Add(const Xbyak::Xmm& d, const Xbyak::Xmm& a, const Xbyak::Operand& b);
  void Mul(const Xbyak::Xmm& d, const Xbyak::Xmm& a, const Xbyak::Operand& b);
  void Max(const Xbyak::Xmm& d, const Xbyak::Xmm& a, const Xbyak::Operand& b);
  void Fma(const Xbyak::Xmm& acc, const Xbyak::Xmm& a, const Xbyak::Operand& b);

  Xbyak::CodeGenerator& g_;
  Isa isa_;
  int width_;
  int mask_register_;
  std::map<int, int> mask_of_lanes_;  // AVX-512: lanes -> k register
  int avx2_mask_lanes_ = -1;
  Xbyak::Label mask_table_;
  Xbyak::Label even_table_;  // stride 2's permute indices: full, masked (AVX-512), masked (AVX2)
  bool even_table_used_ = false;
  int even_index_register_ = -1;             // HoldEvenIndex's register, or -1
  std::pair<int, int> pair_index_registers_ = {-1, -1};  // HoldPairIndices' (even, odd)
  std::map<int64_t, Xbyak::Label> offset_tables_;  // stride -> i * stride, 16 dwords
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_CODEGEN_VECTOR_OPS_H_
