// NEON products for the grouped integer dtypes (src/common/groups.h), for
// AArch64 and 32-bit ARM with NEON: include only from kernels_arm_neon.cc.
//
// Per group of 32 the weights' integer values (q4: code - 8; q4nl: the grid
// value, by a table lookup; q8: the codes) meet the input's codes in
// widening multiplies: int8 x int8 pairs summed into int16 (vmull_s8 +
// vmlal_s8; no pair exceeds 2 * 127 * 127 < 32768), then added pairwise
// into int32 (vpadalq_s16); q8_g32's int16 inputs use vmull_s16 / vmlal_s16
// straight into int32. One float multiply-add by d_w * d_x per group.
// (ARMv8.2's sdot would do a group in fewer instructions; it needs a run-time
// check of the CPU and is not used yet.)
#ifndef TINYAI_KERNELS_SIMD_GROUPED_NEON_H_
#define TINYAI_KERNELS_SIMD_GROUPED_NEON_H_

#include <arm_neon.h>

#include <cstring>
#include <type_traits>

#include "common/half.h"
#include "kernels/kernels.h"
#include "kernels/ref/kernels_ref.h"

namespace tinyai {
namespace kernels {
namespace neon {

inline float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return HalfToFloat(h);
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

// The group's integer dot product with x, as 4 int32 partial sums.
template <int32_t DType>
inline int32x4_t GroupDot(const uint8_t* g, const InputGroupOf<DType>& x) {
  if (DType == TINYAI_DTYPE_Q8_G32) {
    const int16_t* q = reinterpret_cast<const InputGroup16&>(x).q;
    int32x4_t acc = vdupq_n_s32(0);
    for (int half = 0; half < 2; ++half) {
      const int8x16_t w = vld1q_s8(reinterpret_cast<const int8_t*>(g + 2 + 16 * half));
      const int16x8_t lo = vmovl_s8(vget_low_s8(w)), hi = vmovl_s8(vget_high_s8(w));
      acc = vmlal_s16(acc, vget_low_s16(lo), vld1_s16(q + 16 * half));
      acc = vmlal_s16(acc, vget_high_s16(lo), vld1_s16(q + 16 * half + 4));
      acc = vmlal_s16(acc, vget_low_s16(hi), vld1_s16(q + 16 * half + 8));
      acc = vmlal_s16(acc, vget_high_s16(hi), vld1_s16(q + 16 * half + 12));
    }
    return acc;
  } else {
    const int8_t* q = reinterpret_cast<const InputGroup&>(x).q;
    const uint8x16_t packed = vld1q_u8(g + 2);
    const uint8x16_t low = vandq_u8(packed, vdupq_n_u8(15)), high = vshrq_n_u8(packed, 4);
    int8x16_t a, b;
    if (DType == TINYAI_DTYPE_Q4_G32) {
      a = vsubq_s8(vreinterpretq_s8_u8(low), vdupq_n_s8(8));
      b = vsubq_s8(vreinterpretq_s8_u8(high), vdupq_n_s8(8));
    } else {
      const int8x16_t grid = vld1q_s8(kQ4NLGrid);
      a = Lookup(grid, low);
      b = Lookup(grid, high);
    }
    return DotAdd8(DotAdd8(vdupq_n_s32(0), a, vld1q_s8(q)), b, vld1q_s8(q + 16));
  }
}

// One row after the other, two groups at a time (two accumulator chains).
template <int32_t DType>
void MatvecQ(const uint8_t* w, size_t row_bytes, const void* input, float* y, size_t rows, size_t cols) {
  const InputGroupOf<DType>* x = static_cast<const InputGroupOf<DType>*>(input);
  const size_t bytes = GroupBytes(DType), groups = GroupsPerRow(cols);
  for (size_t r = 0; r < rows; ++r) {
    const uint8_t* row = w + r * row_bytes;
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    size_t g = 0;
    for (; g + 2 <= groups; g += 2) {
      const uint8_t* g0 = row + g * bytes;
      const uint8_t* g1 = g0 + bytes;
      acc0 = vmlaq_n_f32(acc0, vcvtq_f32_s32(GroupDot<DType>(g0, x[g])), HalfAt(g0) * x[g].d);
      acc1 = vmlaq_n_f32(acc1, vcvtq_f32_s32(GroupDot<DType>(g1, x[g + 1])), HalfAt(g1) * x[g + 1].d);
    }
    if (g < groups) {
      const uint8_t* g0 = row + g * bytes;
      acc0 = vmlaq_n_f32(acc0, vcvtq_f32_s32(GroupDot<DType>(g0, x[g])), HalfAt(g0) * x[g].d);
    }
    y[r] = HorizontalSum(vaddq_f32(acc0, acc1));
  }
}

template <int32_t DType>
void MatmulQ(const uint8_t* w, size_t row_bytes, const void* input, size_t ldx, float* y, size_t ldy, size_t rows,
             size_t cols, size_t n) {
  const InputGroupOf<DType>* x = static_cast<const InputGroupOf<DType>*>(input);
  for (size_t j = 0; j < n; ++j) MatvecQ<DType>(w, row_bytes, x + j * ldx, y + j * ldy, rows, cols);
}

struct Grouped {
  static constexpr void (*kQuantizeInput)(const float*, size_t, InputGroup*) = &ref::QuantizeInput;
  static constexpr void (*kQuantizeInput16)(const float*, size_t, InputGroup16*) = &ref::QuantizeInput16;
  template <int32_t DType>
  static constexpr WeightKernels Weights() {
    return WeightKernels{nullptr, nullptr, &ref::DequantizeRowQ<DType>, &MatvecQ<DType>, &MatmulQ<DType>,
                         InputFormOf(DType), nullptr, nullptr};
  }
};

}  // namespace neon
}  // namespace kernels
}  // namespace tinyai

#endif  // TINYAI_KERNELS_SIMD_GROUPED_NEON_H_
