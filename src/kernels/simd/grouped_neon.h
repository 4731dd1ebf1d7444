// NEON products for the grouped integer dtypes (src/common/groups.h), for
// AArch64 and 32-bit ARM with NEON: include only from kernels_arm_neon.cc and
// (AArch64, with dotprod) kernels_arm_neon_dot.cc.
//
// Per group of 32 the weights' integer values (q4: code - 8; q4nl: the grid
// value, by a table lookup; q8: the codes) meet the input's codes in
// widening multiplies: int8 x int8 pairs summed into int16 (vmull_s8 +
// vmlal_s8; no pair exceeds 2 * 127 * 127 < 32768), then added pairwise
// into int32 (vpadalq_s16); q8_g32's int16 inputs use vmull_s16 / vmlal_s16
// straight into int32. One float multiply-add by d_w * d_x per group.
// On AArch64 CPUs with ARMv8.2's dot product (dispatch.cc asks the kernel's
// HWCAP_ASIMDDP), the 4-bit groups take sdot instead: four products summed
// into each int32 lane by one instruction (Grouped<true>, kernels_arm_neon_dot.cc).
#ifndef TINYAI_KERNELS_SIMD_GROUPED_NEON_H_
#define TINYAI_KERNELS_SIMD_GROUPED_NEON_H_

#include <arm_neon.h>

#include <cstring>
#include <type_traits>

#include "common/half.h"
#include "kernels/kernels.h"
#include "kernels/ref/kernels_ref.h"
#include "kernels/simd/grouped_drivers.h"
#include "kernels/simd/isa.h"

namespace tinyai {
namespace kernels {
namespace neon {
// Compiled with and without dotprod (kernels_arm_neon_dot.cc and
// kernels_arm_neon.cc): each build's helpers live in the inline namespace of
// its flags (simd/isa.h), so the linker never merges a dotprod copy into the
// plain one.
inline namespace TINYAI_ISA_NAMESPACE {

// A group's half-precision scale: one conversion instruction on AArch64
// (ARMv8's FCVT; the software conversion took about 15 instructions a
// group, more than the group's sdot products); 32-bit NEON without the
// half-precision extension converts in software. Both are exact.
inline float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
#if defined(__aarch64__)
  return vget_lane_f32(vget_low_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h)))), 0);
#else
  return HalfToFloat(h);
#endif
}

inline float HorizontalSum(float32x4_t v) {
#if defined(__aarch64__)
  return vaddvq_f32(v);
#else
  const float32x2_t s = vadd_f32(vget_low_f32(v), vget_high_f32(v));
  return vget_lane_f32(vpadd_f32(s, s), 0);
#endif
}

// 16 signed values from 16 codes 0..15 through a 16-entry table.
inline int8x16_t Lookup(int8x16_t table, uint8x16_t codes) {
#if defined(__aarch64__)
  return vqtbl1q_s8(table, codes);
#else
  int8x8x2_t t;
  t.val[0] = vget_low_s8(table);
  t.val[1] = vget_high_s8(table);
  return vcombine_s8(vtbl2_s8(t, vreinterpret_s8_u8(vget_low_u8(codes))),
                     vtbl2_s8(t, vreinterpret_s8_u8(vget_high_u8(codes))));
#endif
}

// int16 pair sums of a * b over 16 int8 values, added into acc.
inline int32x4_t DotAdd8(int32x4_t acc, int8x16_t a, int8x16_t b) {
  int16x8_t p = vmull_s8(vget_low_s8(a), vget_low_s8(b));
  p = vmlal_s8(p, vget_high_s8(a), vget_high_s8(b));
  return vpadalq_s16(acc, p);
}

// One weight group's integer values, decoded once for every input it meets.
template <int32_t DType>
struct WeightGroup {
  // q8: the codes widened to int16, elements 0..7, 8..15, 16..23, 24..31;
  // q4 / q4nl: elements 0..15 and 16..31 as int8 (code - 8, or the grid value).
  int16x8_t w16[4];
  int8x16_t a, b;
  float d;

  explicit WeightGroup(const uint8_t* g) : d(HalfAt(g)) {
    if (DType == TINYAI_DTYPE_Q8_G32) {
      for (int half = 0; half < 2; ++half) {
        const int8x16_t w = vld1q_s8(reinterpret_cast<const int8_t*>(g + 2 + 16 * half));
        w16[2 * half] = vmovl_s8(vget_low_s8(w));
        w16[2 * half + 1] = vmovl_s8(vget_high_s8(w));
      }
    } else {
      const uint8x16_t packed = vld1q_u8(g + 2);
      const uint8x16_t low = vandq_u8(packed, vdupq_n_u8(15)), high = vshrq_n_u8(packed, 4);
      if (DType == TINYAI_DTYPE_Q4_G32) {
        a = vsubq_s8(vreinterpretq_s8_u8(low), vdupq_n_s8(8));
        b = vsubq_s8(vreinterpretq_s8_u8(high), vdupq_n_s8(8));
      } else {
        const int8x16_t grid = vld1q_s8(kQ4NLGrid);
        a = Lookup(grid, low);
        b = Lookup(grid, high);
      }
    }
  }

  // The group's integer dot product with x, as 4 int32 partial sums: q8 by
  // widening int16 multiplies; q4 and q4nl by widening int8 multiplies, or
  // with Dot (ARMv8.2's dot product, compiled only where the compiler
  // targets it) by sdot, four products a lane.
  template <bool Dot>
  int32x4_t Products(const InputGroupOf<DType>& x) const {
    if constexpr (DType == TINYAI_DTYPE_Q8_G32) {
      const int16_t* q = x.q;
      int32x4_t acc = vdupq_n_s32(0);
      for (int k = 0; k < 4; ++k) {
        acc = vmlal_s16(acc, vget_low_s16(w16[k]), vld1_s16(q + 8 * k));
        acc = vmlal_s16(acc, vget_high_s16(w16[k]), vld1_s16(q + 8 * k + 4));
      }
      return acc;
    } else if constexpr (Dot) {
#if defined(__ARM_FEATURE_DOTPROD)
      return vdotq_s32(vdotq_s32(vdupq_n_s32(0), a, vld1q_s8(x.q)), b, vld1q_s8(x.q + 16));
#else
      static_assert(!Dot, "the dot-product kernels need a compiler targeting ARMv8.2 dotprod");
      return vdupq_n_s32(0);
#endif
    } else {
      return DotAdd8(DotAdd8(vdupq_n_s32(0), a, vld1q_s8(x.q)), b, vld1q_s8(x.q + 16));
    }
  }
};

// ---- The GGUF block dtypes: q4_k, q5_k, q6_k (256 values against 8 input
// groups) and q5_g32, q5m_g32. Each sub-block of 32's codes as int8 (q6_k:
// code - 32; q5_g32: code - 16), its integer dot product with the input's
// (sdot with Dot, else widening multiplies), one float multiply-add by its
// scale times the input's; q4_k, q5_k and q5m_g32 add their minimum's term
// (dmin * mn * x.d * x.sum) to lane 0.

// A block's bytes (a K-quant's codes are too many to hold for several
// inputs: they are decoded from L1 for each).
struct BlockRef {
  const uint8_t* p;
  explicit BlockRef(const uint8_t* b) : p(b) {}
};

constexpr bool HandlesBlock(int32_t dtype) {
  return IsSuperBlockDType(dtype) || dtype == TINYAI_DTYPE_Q5_G32 || dtype == TINYAI_DTYPE_Q5M_G32;
}

template <bool Dot>
inline int32x4_t Dot16(int32x4_t acc, int8x16_t a, const int8_t* q) {
#if defined(__ARM_FEATURE_DOTPROD)
  if constexpr (Dot) return vdotq_s32(acc, a, vld1q_s8(q));
#endif
  return DotAdd8(acc, a, vld1q_s8(q));
}

// Bytes whose bit `bit` of b is set: 16, else 0.
inline uint8x16_t FifthBit(uint8x16_t b, int bit) {
  return vandq_u8(vtstq_u8(b, vdupq_n_u8(static_cast<uint8_t>(1u << bit))), vdupq_n_u8(16));
}

inline float32x4_t AddToLane0(float32x4_t acc, float v) { return vsetq_lane_f32(vgetq_lane_f32(acc, 0) + v, acc, 0); }

template <bool Dot, int32_t DType>
inline float32x4_t BlockFma(float32x4_t acc, const uint8_t* b, const InputGroup* x) {
  if constexpr (DType == TINYAI_DTYPE_Q6_K) {
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float d = HalfAt(b + 208);
    for (int h = 0; h < 2; ++h) {
      const uint8x16_t hb[2] = {vld1q_u8(b + 128 + 32 * h), vld1q_u8(b + 128 + 32 * h + 16)};
      for (int k = 0; k < 4; ++k) {
        const int s = 4 * h + k;
        int32x4_t half[2];
        for (int i = 0; i < 2; ++i) {
          const uint8x16_t src = vld1q_u8(b + 64 * h + 32 * (k % 2) + 16 * i);
          const uint8x16_t nibble = k < 2 ? vandq_u8(src, vdupq_n_u8(15)) : vshrq_n_u8(src, 4);
          uint8x16_t top;
          switch (k) {  // the shift must be a constant
            case 0: top = vandq_u8(hb[i], vdupq_n_u8(3)); break;
            case 1: top = vandq_u8(vshrq_n_u8(hb[i], 2), vdupq_n_u8(3)); break;
            case 2: top = vandq_u8(vshrq_n_u8(hb[i], 4), vdupq_n_u8(3)); break;
            default: top = vshrq_n_u8(hb[i], 6); break;
          }
          const int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(nibble, vshlq_n_u8(top, 4))), vdupq_n_s8(32));
          half[i] = Dot16<Dot>(vdupq_n_s32(0), q, x[s].q + 16 * i);
        }
        const int32x4_t isum = vmlaq_n_s32(vmulq_n_s32(half[0], sc[2 * s]), half[1], sc[2 * s + 1]);
        acc = vmlaq_n_f32(acc, vcvtq_f32_s32(isum), d * x[s].d);
      }
    }
    return acc;
  } else if constexpr (IsSuperBlockDType(DType)) {
    constexpr bool kQ5 = DType == TINYAI_DTYPE_Q5_K;
    const float d = HalfAt(b), dmin = HalfAt(b + 2);
    const uint8_t* qs = b + (kQ5 ? 48 : 16);
    uint8x16_t qh[2] = {vdupq_n_u8(0), vdupq_n_u8(0)};
    if (kQ5) {
      qh[0] = vld1q_u8(b + 16);
      qh[1] = vld1q_u8(b + 32);
    }
    float minimum = 0.0f;
    for (int s = 0; s < 8; ++s) {
      int32_t sc, mn;
      KScaleMin(b + 4, static_cast<size_t>(s), &sc, &mn);
      int32x4_t isum = vdupq_n_s32(0);
      for (int i = 0; i < 2; ++i) {
        const uint8x16_t src = vld1q_u8(qs + 32 * (s / 2) + 16 * i);
        uint8x16_t codes = s % 2 == 0 ? vandq_u8(src, vdupq_n_u8(15)) : vshrq_n_u8(src, 4);
        if (kQ5) codes = vorrq_u8(codes, FifthBit(qh[i], s));
        isum = Dot16<Dot>(isum, vreinterpretq_s8_u8(codes), x[s].q + 16 * i);
      }
      acc = vmlaq_n_f32(acc, vcvtq_f32_s32(isum), (d * static_cast<float>(sc)) * x[s].d);
      minimum += static_cast<float>(x[s].sum) * ((dmin * static_cast<float>(mn)) * x[s].d);
    }
    return AddToLane0(acc, -minimum);
  } else {
    constexpr bool kMin = DType == TINYAI_DTYPE_Q5M_G32;
    const uint8_t* p = b + (kMin ? 4 : 2);
    uint8_t h[4];
    std::memcpy(h, p, 4);
    static const uint8_t kBits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t bits = vld1q_u8(kBits);
    const uint8x16_t packed = vld1q_u8(p + 4);
    int32x4_t isum = vdupq_n_s32(0);
    for (int i = 0; i < 2; ++i) {  // elements 0..15 (low nibbles), 16..31 (high)
      const uint8x16_t spread = vcombine_u8(vdup_n_u8(h[2 * i]), vdup_n_u8(h[2 * i + 1]));
      uint8x16_t codes = i == 0 ? vandq_u8(packed, vdupq_n_u8(15)) : vshrq_n_u8(packed, 4);
      codes = vorrq_u8(codes, vandq_u8(vtstq_u8(spread, bits), vdupq_n_u8(16)));
      int8x16_t q = vreinterpretq_s8_u8(codes);
      if (!kMin) q = vsubq_s8(q, vdupq_n_s8(16));
      isum = Dot16<Dot>(isum, q, x->q + 16 * i);
    }
    acc = vmlaq_n_f32(acc, vcvtq_f32_s32(isum), HalfAt(b) * x->d);
    if (kMin) acc = AddToLane0(acc, static_cast<float>(x->sum) * (HalfAt(b + 2) * x->d));
    return acc;
  }
}

// The micro-kernel of the grouped drivers (grouped_drivers.h). Dot: the
// 4-bit dtypes' products by sdot (kernels_arm_neon_dot.cc, compiled for
// ARMv8.2 dotprod); q8_g32 keeps its int16 inputs (for its error, as on every
// table) and so its widening multiplies. The products of one row (a
// matvec), and of one row against four or two inputs (RowTile, each group
// decoded once for them while the row streams: a matmul), are the drivers';
// the inputs are quantized and q8 rows widened by the reference.
template <bool Dot>
struct Micro : grouped::Defaults<Micro<Dot>> {
  using Acc = float32x4_t;
  static Acc Zero() { return vdupq_n_f32(0.0f); }
  static float Sum(Acc a, Acc b) { return HorizontalSum(vaddq_f32(a, b)); }
  template <int32_t DType>
  static constexpr bool HasDType() {
    return true;
  }
  template <int32_t DType>
  using WeightGroup = std::conditional_t<HandlesBlock(DType), BlockRef, neon::WeightGroup<DType>>;
  // acc + the group's products with x, scaled by d_w * d_x.
  template <int32_t DType>
  static Acc AddGroup(Acc acc, const WeightGroup<DType>& w, const InputGroupOf<DType>& x) {
    if constexpr (HandlesBlock(DType)) {
      return BlockFma<Dot, DType>(acc, w.p, &x);
    } else {
      return vmlaq_n_f32(acc, vcvtq_f32_s32(w.template Products<Dot && DType != TINYAI_DTYPE_Q8_G32>(x)), w.d * x.d);
    }
  }
};

template <bool Dot>
using Grouped = grouped::Table<Micro<Dot>>;

}  // namespace TINYAI_ISA_NAMESPACE
}  // namespace neon
}  // namespace kernels
}  // namespace tinyai

#endif  // TINYAI_KERNELS_SIMD_GROUPED_NEON_H_
