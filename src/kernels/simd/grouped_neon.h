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
  using WeightGroup = neon::WeightGroup<DType>;
  // acc + the group's products with x, scaled by d_w * d_x.
  template <int32_t DType>
  static Acc AddGroup(Acc acc, const WeightGroup<DType>& w, const InputGroupOf<DType>& x) {
    return vmlaq_n_f32(acc, vcvtq_f32_s32(w.template Products<Dot && DType != TINYAI_DTYPE_Q8_G32>(x)), w.d * x.d);
  }
};

template <bool Dot>
using Grouped = grouped::Table<Micro<Dot>>;

}  // namespace TINYAI_ISA_NAMESPACE
}  // namespace neon
}  // namespace kernels
}  // namespace tinyai

#endif  // TINYAI_KERNELS_SIMD_GROUPED_NEON_H_
