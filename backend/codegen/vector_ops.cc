#include "backend/codegen/vector_ops.h"

#include "util/check.h"

namespace looptool {

using namespace Xbyak::util;  // NOLINT: registers and address frames read like assembly here

namespace {
// Byte offsets of stride 2's index tables from even_table_ (EmitMaskTable writes them).
constexpr int kFull16 = 0, kMasked16 = 64, kFull8 = 128, kMasked8 = 160, kAvx2Masked = 192;
constexpr int kPairEven16 = 256, kPairOdd16 = 320, kPairEven8 = 384, kPairOdd8 = 416;
}  // namespace

VectorOps::VectorOps(Xbyak::CodeGenerator& g, Isa isa, const std::vector<int>& tail_lanes)
    : g_(g), isa_(isa), width_(Traits(isa).vector_width), mask_register_(-1) {
  if (isa_ == Isa::kAvx512) {
    for (size_t i = 0; i < tail_lanes.size() && i < 6; ++i) {
      mask_of_lanes_[tail_lanes[i]] = static_cast<int>(i) + 1;
    }
  }
}

void VectorOps::SetWidth(int width, int mask_register) {
  width_ = width;
  mask_register_ = mask_register;
  avx2_mask_lanes_ = -1;
}

Xbyak::Xmm VectorOps::V(int i) const {
  if (width_ == 1) return Xbyak::Xmm(i);
  if (isa_ == Isa::kAvx512 && width_ == 16) return Xbyak::Zmm(i);
  return Xbyak::Ymm(i);  // AVX2, or AVX-512's 8-lane form (EVEX: ymm0-31, k-masks)
}

void VectorOps::LoadTailMasks() {
  for (const auto& [lanes, k] : mask_of_lanes_) {
    g_.mov(eax, (1u << lanes) - 1);
    g_.kmovw(Xbyak::Opmask(k), eax);
  }
}

void VectorOps::EmitMaskTable() {
  if (isa_ == Isa::kAvx2) {
    g_.align(32);
    g_.L(mask_table_);
    for (int i = 0; i < 8; ++i) g_.dd(0xffffffffu);
    for (int i = 0; i < 8; ++i) g_.dd(0);
  }
  if (even_table_used_) {
    // Stride 2's permute indices, none across a cache line (offsets kFull16 ... kAvx2Masked):
    // vpermt2ps indices picking elements 0, 2, ... of a full chunk's first load
    // (elements 0..W-1) and then of its second (elements W-1..2W-2, table indices W..2W-1);
    // vpermi2ps indices of a masked chunk (LoadStrideTwoMasked): element 2i from the memory
    // operand (elements 0..W-1, table indices W..2W-1) while 2i < W, else from the register
    // (elements W-1.., indices 0..W-1); AVX2's vpermps indices of a masked chunk of up to 4
    // lanes (element 7, past the span and so zero, for the lanes above 3).
    const auto full = [&](int w) {
      for (int i = 0; i < w; ++i) g_.dd(static_cast<uint32_t>(i < w / 2 ? 2 * i : 2 * i + 1));
    };
    const auto masked = [&](int w) {
      for (int i = 0; i < w; ++i) {
        g_.dd(static_cast<uint32_t>(2 * i < w ? w + 2 * i : 2 * i - (w - 1)));
      }
    };
    g_.align(64);
    g_.L(even_table_);
    full(16);    // kFull16
    masked(16);  // kMasked16
    full(8);     // kFull8
    masked(8);   // kMasked8
    for (int i = 0; i < 8; ++i) g_.dd(static_cast<uint32_t>(i < 4 ? 2 * i : 7));  // kAvx2Masked
    // LoadStrideTwoPair's indices over elements 0..W-1 (table 1) and W..2W-1 (table 2):
    // element 2i (even) or 2i + 1 (odd) is table index 2i or 2i + 1 at either width.
    for (int i = 0; i < 8; ++i) g_.dd(0);  // padding to kPairEven16
    for (int w : {16, 8}) {
      for (int phase : {0, 1}) {
        for (int i = 0; i < w; ++i) g_.dd(static_cast<uint32_t>(2 * i + phase));
      }
    }
  }
  for (auto& [stride, label] : offset_tables_) {
    g_.align(64);
    g_.L(label);
    for (int i = 0; i < 16; ++i) g_.dd(static_cast<uint32_t>(i * stride));
  }
}

void VectorOps::LaneOffsets(const Xbyak::Xmm& offsets, int64_t stride, int lanes) {
  g_.vmovdqu32(offsets, ptr[rip + offset_tables_[stride]]);
  if (lanes == width_) {
    g_.kxnorw(k7, k7, k7);
  } else {
    g_.mov(eax, (1u << lanes) - 1);
    g_.kmovw(k7, eax);
  }
}

void VectorOps::LoadStrided(const Xbyak::Xmm& dst, const Xbyak::RegExp& src, int64_t stride,
                            int lanes, const Xbyak::Xmm& scratch) {
  LT_CHECK(width_ > 1 && stride > 1 && dst.getIdx() != scratch.getIdx());
  const int64_t step = stride * 4;  // bytes between lanes
  if (isa_ == Isa::kAvx512) {
    if (stride == 2 && lanes == width_) {
      g_.vmovups(dst, ptr[src]);
      if (even_index_register_ >= 0) {
        g_.vpermt2ps(dst, V(even_index_register_), ptr[src + (width_ - 1) * 4]);
        return;
      }
      g_.vmovdqu32(scratch, EvenTable(kFull16, kFull8));
      g_.vpermt2ps(dst, scratch, ptr[src + (width_ - 1) * 4]);
      return;
    }
    if (stride == 2) {
      LoadStrideTwoMasked(dst, src, lanes, scratch);
      return;
    }
    // A gather of the active lanes (masked lanes are not read, so never fault).
    g_.vpxord(dst, dst, dst);
    LaneOffsets(scratch, stride, lanes);
    g_.vgatherdps(dst | k7, ptr[src + scratch * 4]);
    return;
  }
  // AVX2, 8 lanes.
  const Xbyak::Ymm d(dst.getIdx()), t(scratch.getIdx());
  if (stride == 2 && lanes == 8) {
    // elements 0..7 and 7..14; per 128-bit half keep the even ones of the first and the odd
    // ones of the second (0 2 8 10 | 4 6 12 14), then order the 64-bit pairs 0 2 1 3.
    g_.vmovups(d, ptr[src]);
    g_.vmovups(t, ptr[src + 7 * 4]);
    g_.vshufps(d, d, t, 0xD8);
    g_.vpermpd(d, d, 0xD8);
    return;
  }
  if (stride == 2 && mask_register_ >= 0) {
    // A masked chunk: the 2 * lanes - 1 elements spanned, those past it zero (vmaskmovps reads
    // none of them). Up to 4 lanes one masked load and a permute (table: 0 2 4 6, then element
    // 7, which is past the span, for the lanes above 3); 5 to 7 lanes elements 0..7 whole and
    // 7.. masked, then the full chunk's shuffles.
    const int span = 2 * lanes - 1;
    if (span <= 8) {
      SetAvx2Mask(span);
      g_.vmaskmovps(d, Xbyak::Ymm(mask_register_), ptr[src]);
      g_.vmovups(t, EvenTable(kAvx2Masked, kAvx2Masked));
      g_.vpermps(d, t, d);
      return;
    }
    SetAvx2Mask(span - 7);
    g_.vmaskmovps(t, Xbyak::Ymm(mask_register_), ptr[src + 7 * 4]);
    g_.vmovups(d, ptr[src]);
    g_.vshufps(d, d, t, 0xD8);
    g_.vpermpd(d, d, 0xD8);
    return;
  }
  // Lane by lane: lanes 0-3 into dst's low half, 4-7 into scratch's, then joined (VEX writes
  // to an xmm zero the upper half, so inactive lanes are zero).
  const Xbyak::Xmm lo(dst.getIdx()), hi(scratch.getIdx());
  for (int i = 0; i < lanes; ++i) {
    const Xbyak::Xmm& half = i < 4 ? lo : hi;
    const Xbyak::Address at = ptr[src + i * step];
    if (i % 4 == 0) {
      g_.vmovss(half, at);
    } else {
      g_.vinsertps(half, half, at, static_cast<uint8_t>((i % 4) << 4));
    }
  }
  if (lanes > 4) g_.vinsertf128(d, d, hi, 1);
}

void VectorOps::LoadStrideTwoMasked(const Xbyak::Xmm& dst, const Xbyak::RegExp& src, int lanes,
                                    const Xbyak::Xmm& scratch) {
  // The elements read span 2 * lanes - 1 floats from src; nothing past them is loaded.
  const int span = 2 * lanes - 1;
  if (width_ == 16 && lanes == 8) {
    // Half the width: the full chunk of 8 lanes at 256 bits (elements 0..7 and 7..14, both
    // inside the span), no mask; the 256-bit ops zero lanes 8..15.
    const Xbyak::Ymm d(dst.getIdx()), t(scratch.getIdx());
    even_table_used_ = true;
    g_.vmovups(d, ptr[src]);
    g_.vmovdqu32(t, ptr[rip + even_table_ + kFull8]);
    g_.vpermt2ps(d, t, ptr[src + 7 * 4]);
    return;
  }
  if (span <= width_) {
    // One masked load of the span, then the even elements (table entries 2i below W / 2).
    g_.mov(eax, (1u << span) - 1);
    g_.kmovw(k7, eax);
    g_.vmovups(dst | k7 | T_z, ptr[src]);
    g_.vmovdqu32(scratch, EvenTable(kFull16, kFull8));
    const Xbyak::Ymm d = width_ == 16 ? Xbyak::Zmm(dst.getIdx()) : Xbyak::Ymm(dst.getIdx());
    const Xbyak::Ymm t = width_ == 16 ? Xbyak::Zmm(scratch.getIdx()) : Xbyak::Ymm(scratch.getIdx());
    g_.vpermps(d | Mask(lanes) | T_z, t, d);
    return;
  }
  // Elements W-1 .. span-1 by a masked load (table 1), elements 0 .. W-1 from memory (table 2,
  // all inside the span): element 2i is table 2's lane 2i, or table 1's lane 2i - (W - 1).
  g_.mov(eax, (1u << (span - (width_ - 1))) - 1);
  g_.kmovw(k7, eax);
  g_.vmovups(scratch | k7 | T_z, ptr[src + (width_ - 1) * 4]);
  g_.vmovdqu32(dst, EvenTable(kMasked16, kMasked8));
  g_.vpermi2ps(dst | Mask(lanes) | T_z, scratch, ptr[src]);
}

Xbyak::Address VectorOps::EvenTable(int at16, int at8) {
  even_table_used_ = true;
  return ptr[rip + even_table_ + (width_ == 16 ? at16 : at8)];
}

void VectorOps::HoldEvenIndex(int reg) {
  LT_CHECK(PermutesStrideTwo() && reg >= 0);
  g_.vmovdqu32(V(reg), EvenTable(kFull16, kFull8));
  even_index_register_ = reg;
}

void VectorOps::HoldPairIndices(int even_reg, int odd_reg) {
  LT_CHECK(PermutesStrideTwo() && even_reg >= 0 && odd_reg >= 0 && even_reg != odd_reg);
  g_.vmovdqu32(V(even_reg), EvenTable(kPairEven16, kPairEven8));
  g_.vmovdqu32(V(odd_reg), EvenTable(kPairOdd16, kPairOdd8));
  pair_index_registers_ = {even_reg, odd_reg};
}

void VectorOps::LoadStrideTwoPair(const Xbyak::Xmm& even, const Xbyak::Xmm& odd,
                                  const Xbyak::RegExp& src, const Xbyak::Xmm& scratch,
                                  int lanes, bool through_next) {
  LT_CHECK(width_ > 1 && even.getIdx() != odd.getIdx() && even.getIdx() != scratch.getIdx() &&
           odd.getIdx() != scratch.getIdx() && lanes >= 1 && lanes <= width_ &&
           (lanes == width_ || isa_ == Isa::kAvx512) && (!through_next || lanes < width_));
  if (isa_ == Isa::kAvx512) {
    // The elements read: 0 .. span - 1, nothing past them; the rest of the two sources zero,
    // so that lane i >= lanes of either phase (element 2i or 2i + 1, past 2 * lanes - 1) is
    // zero (but the even phase's lane `lanes` through_next).
    const int span = 2 * lanes + (through_next ? 1 : 0);
    if (span >= 2 * width_) {
      g_.vmovups(even, ptr[src]);
      g_.vmovups(scratch, ptr[src + width_ * 4]);
    } else if (span > width_) {  // elements 0..W-1 whole, W..span-1 masked
      g_.vmovups(even, ptr[src]);
      g_.mov(eax, (1u << (span - width_)) - 1);
      g_.kmovw(k7, eax);
      g_.vmovups(scratch | k7 | T_z, ptr[src + width_ * 4]);
    } else {  // one masked load; the second source zero
      g_.mov(eax, (1u << span) - 1);
      g_.kmovw(k7, eax);
      g_.vmovups(even | k7 | T_z, ptr[src]);
      g_.vpxord(scratch, scratch, scratch);
    }
    StrideTwoPhases(even, &odd, scratch);
    return;
  }
  // AVX2: per 128-bit half the even (odd) elements of the first load, then of the second
  // (0 2 8 10 | 4 6 12 14), then the 64-bit pairs in order 0 2 1 3.
  const Xbyak::Ymm e(even.getIdx()), o(odd.getIdx()), t(scratch.getIdx());
  g_.vmovups(e, ptr[src]);
  g_.vmovups(t, ptr[src + 8 * 4]);
  g_.vshufps(o, e, t, 0xDD);
  g_.vshufps(e, e, t, 0x88);
  g_.vpermpd(e, e, 0xD8);
  g_.vpermpd(o, o, 0xD8);
}

void VectorOps::StrideTwoPhases(const Xbyak::Xmm& lo, const Xbyak::Xmm* odd,
                                const Xbyak::Xmm& hi) {
  LT_CHECK(PermutesStrideTwo() && pair_index_registers_.first >= 0 &&
           lo.getIdx() != hi.getIdx());
  if (odd != nullptr) {
    LT_CHECK(odd->getIdx() != lo.getIdx() && odd->getIdx() != hi.getIdx());
    g_.vmovaps(*odd, lo);
    g_.vpermt2ps(*odd, V(pair_index_registers_.second), hi);
  }
  g_.vpermt2ps(lo, V(pair_index_registers_.first), hi);
}

void VectorOps::EvenPhase(const Xbyak::Xmm& lo, const Xbyak::Xmm& hi, const Xbyak::Xmm& scratch) {
  LT_CHECK(PermutesStrideTwo() && lo.getIdx() != hi.getIdx());
  if (even_index_register_ >= 0) {
    g_.vpermt2ps(lo, V(even_index_register_), hi);
    return;
  }
  LT_CHECK(scratch.getIdx() != lo.getIdx() && scratch.getIdx() != hi.getIdx());
  g_.vmovdqu32(scratch, EvenTable(kFull16, kFull8));
  g_.vpermt2ps(lo, scratch, hi);
}

void VectorOps::Reduce(Reduction reduction, const Xbyak::Xmm& d, const Xbyak::Operand& b) {
  LT_CHECK(reduction == Reduction::kSum || reduction == Reduction::kMax);
  reduction == Reduction::kMax ? Max(d, d, b) : Add(d, d, b);
}

Xbyak::Opmask VectorOps::Mask(int lanes) {
  auto it = mask_of_lanes_.find(lanes);
  if (it != mask_of_lanes_.end()) return Xbyak::Opmask(it->second);
  g_.mov(eax, (1u << lanes) - 1);
  g_.kmovw(k7, eax);
  return k7;
}

void VectorOps::SetAvx2Mask(int lanes) {
  LT_CHECK(mask_register_ >= 0);
  if (avx2_mask_lanes_ == lanes) return;
  g_.vmovups(Xbyak::Ymm(mask_register_), ptr[rip + mask_table_ + (8 - lanes) * 4]);
  avx2_mask_lanes_ = lanes;
}

bool VectorOps::MoveNarrow(const Xbyak::Xmm& reg, const Xbyak::Address& at, int lanes,
                           bool load) {
  if (sse() || width_ == 1 || lanes >= width_) return false;
  const Xbyak::Xmm x(reg.getIdx());
  const Xbyak::Ymm y(reg.getIdx());
  if (lanes == 1) {
    load ? g_.vmovss(x, at) : g_.vmovss(at, x);
  } else if (lanes == 2) {
    load ? g_.vmovsd(x, at) : g_.vmovsd(at, x);
  } else if (lanes == 4 || lanes == 8) {
    const Xbyak::Xmm& r = lanes == 4 ? x : y;  // y keeps its ymm kind
    load ? g_.vmovups(r, at) : g_.vmovups(at, r);
  } else {
    return false;
  }
  return true;
}

void VectorOps::Load(const Xbyak::Xmm& dst, const Xbyak::Address& src, int lanes) {
  if (width_ == 1) {
    sse() ? g_.movss(dst, src) : g_.vmovss(dst, src);
  } else if (lanes == width_) {
    g_.vmovups(dst, src);
  } else if (MoveNarrow(dst, src, lanes, /*load=*/true)) {
    // 1, 2, 4 or 8 lanes: emitted, no mask
  } else if (isa_ == Isa::kAvx512) {
    g_.vmovups(dst | Mask(lanes) | T_z, src);
  } else {
    SetAvx2Mask(lanes);
    g_.vmaskmovps(dst, Xbyak::Ymm(mask_register_), src);
  }
}

void VectorOps::Broadcast(const Xbyak::Xmm& dst, const Xbyak::Address& src) {
  if (width_ == 1) {
    sse() ? g_.movss(dst, src) : g_.vmovss(dst, src);
  } else {
    g_.vbroadcastss(dst, src);
  }
}

void VectorOps::Store(const Xbyak::Address& dst, const Xbyak::Xmm& src, int lanes) {
  if (width_ == 1) {
    sse() ? g_.movss(dst, src) : g_.vmovss(dst, src);
  } else if (lanes == width_) {
    g_.vmovups(dst, src);
  } else if (MoveNarrow(src, dst, lanes, /*load=*/false)) {
    // 1, 2, 4 or 8 lanes: emitted, no mask
  } else if (isa_ == Isa::kAvx512) {
    g_.vmovups(dst | Mask(lanes), src);
  } else {
    SetAvx2Mask(lanes);
    g_.vmaskmovps(dst, Xbyak::Ymm(mask_register_), src);
  }
}

void VectorOps::StoreStrided(const Xbyak::RegExp& dst, int64_t stride, const Xbyak::Xmm& src,
                             int lanes, const Xbyak::Xmm& scratch) {
  LT_CHECK(width_ > 1 && stride > 1 && lanes >= 1 && lanes <= width_ &&
           src.getIdx() != scratch.getIdx());
  if (isa_ == Isa::kAvx512) {
    // A scatter of the active lanes (k7 set, cleared by the scatter as lanes complete).
    LaneOffsets(scratch, stride, lanes);
    g_.vscatterdps(ptr[dst + scratch * 4] | k7, src);
    return;
  }
  // AVX2, lane by lane: lanes 0-3 from src's low half, 4-7 from its high half in scratch.
  const Xbyak::Xmm lo(src.getIdx()), hi(scratch.getIdx());
  if (lanes > 4) g_.vextractf128(hi, Xbyak::Ymm(src.getIdx()), 1);
  for (int i = 0; i < lanes; ++i) {
    const Xbyak::Xmm& half = i < 4 ? lo : hi;
    const Xbyak::Address at = ptr[dst + i * stride * 4];
    if (i % 4 == 0) {
      g_.vmovss(at, half);
    } else {
      g_.vextractps(at, half, static_cast<uint8_t>(i % 4));
    }
  }
}

void VectorOps::StoreStreaming(const Xbyak::Address& dst, const Xbyak::Xmm& src) {
  LT_CHECK(width_ > 1);
  sse() ? g_.movntps(dst, src) : g_.vmovntps(dst, src);
}

void VectorOps::ShiftInOneLane(const Xbyak::Xmm& dst, const Xbyak::Xmm& hi,
                               const Xbyak::Xmm& lo) {
  ShiftInLanes(dst, hi, lo, 1);
}

void VectorOps::ShiftInLanes(const Xbyak::Xmm& dst, const Xbyak::Xmm& hi, const Xbyak::Xmm& lo,
                             int lanes) {
  LT_CHECK(PermutesStrideTwo() && (width_ == 8 || width_ == 16) && lanes > 0 && lanes < width_);
  g_.valignd(dst, hi, lo, static_cast<uint8_t>(lanes));
}

void VectorOps::Copy(const Xbyak::Xmm& dst, const Xbyak::Xmm& src) {
  if (dst.getIdx() == src.getIdx()) return;
  sse() ? g_.movaps(dst, src) : g_.vmovaps(dst, src);
}

void VectorOps::Zero(const Xbyak::Xmm& dst) {
  if (sse()) {
    g_.xorps(dst, dst);
  } else if (isa_ == Isa::kAvx512 && width_ > 1) {
    g_.vpxord(dst, dst, dst);
  } else {
    g_.vxorps(dst, dst, dst);
  }
}

void VectorOps::NegativeInfinity(const Xbyak::Xmm& dst) {
  g_.mov(eax, 0xff800000u);
  const Xbyak::Xmm low(dst.getIdx());
  if (sse()) {
    g_.movd(low, eax);
    return;
  }
  g_.vmovd(low, eax);
  if (width_ > 1) g_.vbroadcastss(dst, low);
}

void VectorOps::Relu(const Xbyak::Xmm& acc, const Xbyak::Xmm& zero) {
  if (width_ == 1) {
    ReluScalar(acc, zero);
  } else {
    g_.vmaxps(acc, acc, zero);
  }
}

Xbyak::Address VectorOps::VectorMemory(const Xbyak::RegExp& at) const {
  return width_ == 1 ? dword[at] : ptr[at];
}

Xbyak::Address VectorOps::BroadcastMemory(const Xbyak::RegExp& at) const {
  LT_CHECK(CanBroadcastFromMemory());
  return ptr_b[at];
}

void VectorOps::Add(const Xbyak::Xmm& d, const Xbyak::Xmm& a, const Xbyak::Operand& b) {
  if (width_ > 1) {
    g_.vaddps(d, a, b);
  } else if (!sse()) {
    g_.vaddss(d, a, b);
  } else {
    if (d.getIdx() != a.getIdx()) g_.movss(d, a);
    g_.addss(d, b);
  }
}

void VectorOps::Mul(const Xbyak::Xmm& d, const Xbyak::Xmm& a, const Xbyak::Operand& b) {
  if (width_ > 1) {
    g_.vmulps(d, a, b);
  } else if (!sse()) {
    g_.vmulss(d, a, b);
  } else {
    if (d.getIdx() != a.getIdx()) g_.movss(d, a);
    g_.mulss(d, b);
  }
}

void VectorOps::Max(const Xbyak::Xmm& d, const Xbyak::Xmm& a, const Xbyak::Operand& b) {
  if (width_ > 1) {
    g_.vmaxps(d, a, b);
  } else if (!sse()) {
    g_.vmaxss(d, a, b);
  } else {
    if (d.getIdx() != a.getIdx()) g_.movss(d, a);
    g_.maxss(d, b);
  }
}

void VectorOps::Fma(const Xbyak::Xmm& acc, const Xbyak::Xmm& a, const Xbyak::Operand& b) {
  LT_CHECK(!sse());
  width_ > 1 ? g_.vfmadd231ps(acc, a, b) : g_.vfmadd231ss(acc, a, b);
}

void VectorOps::Accumulate(const Arithmetic& arithmetic, const Xbyak::Xmm& acc,
                           const Xbyak::Operand& x, const Xbyak::Operand& y, int lanes,
                           const Xbyak::Xmm& tmp) {
  const Reduction reduction = arithmetic.reduction;
  const Combiner combiner = arithmetic.combiner;
  auto reg = [](const Xbyak::Operand& o) -> const Xbyak::Xmm& {
    LT_CHECK(o.isXMM() || o.isYMM() || o.isZMM());
    return static_cast<const Xbyak::Xmm&>(o);
  };
  const bool masked = lanes < width_;
  if (masked && arithmetic.horizontal && isa_ == Isa::kAvx2 && reduction == Reduction::kSum &&
      combiner == Combiner::kIdentity && arithmetic.x_zero_beyond_lanes) {
    Add(acc, acc, x);  // the inactive lanes add 0
    return;
  }
  if (masked && arithmetic.horizontal && isa_ == Isa::kAvx2) {
    // No merge masking on AVX2: compute the new accumulator in `tmp`, blend the active lanes.
    if (reduction == Reduction::kSum && combiner == Combiner::kMultiply) {
      Copy(tmp, acc);
      Fma(tmp, reg(x), y);
    } else if (combiner == Combiner::kIdentity) {
      reduction == Reduction::kMax ? Max(tmp, acc, x) : Add(tmp, acc, x);
    } else {
      combiner == Combiner::kMultiply ? Mul(tmp, reg(x), y) : Add(tmp, reg(x), y);
      reduction == Reduction::kMax ? Max(tmp, acc, tmp) : Add(tmp, acc, tmp);
    }
    SetAvx2Mask(lanes);
    g_.vblendvps(acc, acc, tmp, Xbyak::Ymm(mask_register_));
    return;
  }
  // The write into the accumulator merges only active lanes on AVX-512.
  const Xbyak::Xmm out = masked && isa_ == Isa::kAvx512 ? (acc | Mask(lanes)) : acc;
  switch (reduction) {
    case Reduction::kSum:
      if (combiner == Combiner::kMultiply && !sse()) {
        Fma(out, reg(x), y);
      } else if (combiner == Combiner::kIdentity) {
        Add(out, acc, x);
      } else {
        combiner == Combiner::kMultiply ? Mul(tmp, reg(x), y) : Add(tmp, reg(x), y);
        Add(out, acc, tmp);
      }
      break;
    case Reduction::kMax:
      if (combiner == Combiner::kIdentity) {
        Max(out, acc, x);
      } else {
        combiner == Combiner::kMultiply ? Mul(tmp, reg(x), y) : Add(tmp, reg(x), y);
        Max(out, acc, tmp);
      }
      break;
    case Reduction::kAssign:
      if (combiner == Combiner::kMultiply) {
        Mul(acc, reg(x), y);
      } else if (combiner == Combiner::kAdd) {
        Add(acc, reg(x), y);
      } else {
        Copy(acc, reg(x));
      }
      break;
  }
}

void VectorOps::ReduceLanes(Reduction reduction, const Xbyak::Xmm& acc, const Xbyak::Xmm& tmp) {
  if (width_ == 1) return;
  auto op = [&](const Xbyak::Xmm& d, const Xbyak::Xmm& b) {
    reduction == Reduction::kMax ? g_.vmaxps(d, d, b) : g_.vaddps(d, d, b);
  };
  if (isa_ == Isa::kAvx512 && width_ == 16) {
    const Xbyak::Zmm a(acc.getIdx()), t(tmp.getIdx());
    g_.vshuff32x4(t, a, a, 0x4E);  // swap 256-bit halves
    op(acc, tmp);
    g_.vshuff32x4(t, a, a, 0xB1);  // swap 128-bit lanes within each half
    op(acc, tmp);
  } else if (isa_ == Isa::kAvx512) {  // 8 lanes, possibly in ymm16-31 (no VEX vperm2f128)
    const Xbyak::Ymm a(acc.getIdx()), t(tmp.getIdx());
    g_.vshuff32x4(t, a, a, 0x01);  // swap 128-bit halves
    op(acc, tmp);
  } else {
    const Xbyak::Ymm a(acc.getIdx()), t(tmp.getIdx());
    g_.vperm2f128(t, a, a, 0x01);  // swap 128-bit halves
    op(acc, tmp);
  }
  g_.vpermilps(tmp, acc, 0x4E);  // swap 64-bit pairs
  op(acc, tmp);
  g_.vpermilps(tmp, acc, 0xB1);  // swap neighbours
  op(acc, tmp);
}

int VectorOps::FoldLanes(Reduction reduction, const std::vector<int>& regs, int tmp) {
  const int n = static_cast<int>(regs.size());
  LT_CHECK((width_ == 8 || width_ == 16) && n >= 1 && n <= width_);
  auto op = [&](const Xbyak::Xmm& d, const Xbyak::Xmm& b) {
    reduction == Reduction::kMax ? g_.vmaxps(d, d, b) : g_.vaddps(d, d, b);
  };
  // The tree pairs positions p and p + h at each level (h = 1, 2, 4, 8). Level by level, 16 lanes:
  // 256-bit halves, then 128-bit chunks (each chunk of the survivor then holds one register's 4
  // partial results), then pairs and single lanes within chunks. It leaves the register at
  // position 4 m + k in lane 4 k + m (8 lanes: position 2 m + k), so register o goes to the
  // position whose lane is o.
  const int quarter = width_ / 4;
  std::vector<int> at(width_, -1);  // position -> register, -1 where no register is
  for (int o = 0; o < n; ++o) at[quarter * (o % 4) + o / 4] = regs[o];
  // Shuffles want their registers typed by width (ymm or zmm; the kind travels in the Operand).
  auto R = [&](int i) -> Xbyak::Ymm {
    return width_ == 16 ? Xbyak::Ymm(Xbyak::Zmm(i)) : Xbyak::Ymm(i);
  };
  const Xbyak::Ymm t = R(tmp);
  for (int h = 1; h < width_; h *= 2) {
    for (int p = 0; p < width_; p += 2 * h) {
      int a = at[p], b = at[p + h];
      if (a < 0 && b < 0) continue;
      if (a < 0) a = b;  // a lone register pairs with itself: only its own lanes matter
      if (b < 0) b = a;
      const Xbyak::Ymm x = R(a), y = R(b);
      const int level = width_ == 16 ? h : 2 * h;  // 8 lanes start at the 128-bit level
      if (level == 1) {         // 256-bit halves: [x.lo, y.lo] + [x.hi, y.hi]
        g_.vshuff32x4(t, x, y, 0x44);
        g_.vshuff32x4(x, x, y, 0xEE);
      } else if (level == 2 && width_ == 16) {  // 128-bit chunks 0, 2 and 1, 3 of each
        g_.vshuff32x4(t, x, y, 0x88);
        g_.vshuff32x4(x, x, y, 0xDD);
      } else if (level == 2) {  // 8 lanes: [x.lo, y.lo] + [x.hi, y.hi]
        if (isa_ == Isa::kAvx512) {
          g_.vshuff32x4(t, x, y, 0x0);
          g_.vshuff32x4(x, x, y, 0x3);
        } else {
          g_.vperm2f128(t, x, y, 0x20);
          g_.vperm2f128(x, x, y, 0x31);
        }
      } else if (level == 4) {  // within chunks: lanes 0, 1 and 2, 3 of each
        g_.vshufps(t, x, y, 0x44);
        g_.vshufps(x, x, y, 0xEE);
      } else {                  // within chunks: lanes 0, 2 and 1, 3 of each
        g_.vshufps(t, x, y, 0x88);
        g_.vshufps(x, x, y, 0xDD);
      }
      op(x, t);
      at[p] = a;
      at[p + h] = -1;
    }
  }
  LT_CHECK(at[0] >= 0);
  return at[0];
}

void VectorOps::TransposeStep(int h, const Xbyak::Xmm& lo, const Xbyak::Xmm& a,
                              const Xbyak::Xmm& b) {
  LT_CHECK(width_ == 8 || width_ == 16);
  auto R = [&](const Xbyak::Xmm& x) -> Xbyak::Ymm {
    return width_ == 16 ? Xbyak::Ymm(Xbyak::Zmm(x.getIdx())) : Xbyak::Ymm(x.getIdx());
  };
  const Xbyak::Ymm l = R(lo), x = R(a), y = R(b);
  if (h == 1) {
    g_.vunpcklps(l, x, y);
    g_.vunpckhps(y, x, y);
  } else if (h == 2) {
    g_.vshufps(l, x, y, 0x44);
    g_.vshufps(y, x, y, 0xEE);
  } else if (width_ == 16) {  // h 4 and 8: 128-bit chunks 0, 2 and 1, 3 of each
    g_.vshuff32x4(l, x, y, 0x88);
    g_.vshuff32x4(y, x, y, 0xDD);
  } else if (isa_ == Isa::kAvx512) {  // 8 lanes, h 4: 128-bit halves (EVEX: ymm16-31 too)
    g_.vshuff32x4(l, x, y, 0x0);
    g_.vshuff32x4(y, x, y, 0x3);
  } else {
    g_.vperm2f128(l, x, y, 0x20);
    g_.vperm2f128(y, x, y, 0x31);
  }
}

void VectorOps::CombineVector(Reduction reduction, const Xbyak::Xmm& acc, const Xbyak::Address& at,
                              int lanes, const Xbyak::Xmm& tmp) {
  Load(tmp, at, lanes);
  reduction == Reduction::kMax ? Max(acc, acc, tmp) : Add(acc, acc, tmp);
}

void VectorOps::CombineScalar(Reduction reduction, const Xbyak::Xmm& acc,
                              const Xbyak::Address& at) {
  const Xbyak::Xmm x = Scalar(acc);
  if (sse()) {
    reduction == Reduction::kMax ? g_.maxss(x, at) : g_.addss(x, at);
  } else {
    reduction == Reduction::kMax ? g_.vmaxss(x, x, at) : g_.vaddss(x, x, at);
  }
}

void VectorOps::StoreScalar(const Xbyak::Address& at, const Xbyak::Xmm& acc) {
  sse() ? g_.movss(at, Scalar(acc)) : g_.vmovss(at, Scalar(acc));
}

void VectorOps::ReluScalar(const Xbyak::Xmm& acc, const Xbyak::Xmm& zero) {
  const Xbyak::Xmm x = Scalar(acc), z = Scalar(zero);
  sse() ? g_.maxss(x, z) : g_.vmaxss(x, x, z);
}

}  // namespace looptool
