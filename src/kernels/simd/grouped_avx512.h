// AVX-512 products for the grouped integer dtypes (src/common/groups.h):
// include only from kernels_x86_avx512.cc (AVX-512 F/BW/DQ/VL, kVnni false)
// and kernels_x86_avx512vnni.cc (the same plus AVX512-VNNI, kVnni true).
//
// The 4-bit dtypes take two groups per 512-bit register: their 64 codes
// become unsigned bytes u (q4: the nibble; q4nl with VNNI: grid value + 128,
// by a byte shuffle), multiplied with the input's int8 codes by vpdpbusd
// (VNNI) or vpmaddubsw + vpmaddwd, minus the same product with the code of
// zero (8, or 128) for each input pair, which depends on the input only and
// is computed once per product. Without VNNI, q4nl's pairs of 241 * 127
// would saturate vpmaddubsw's int16 sums, so it multiplies |value| with the
// input negated where the value is negative, and needs no offset. q8_g32 takes one group per register: its codes
// widened to int16 against the int16 input by vpdpwssd or vpmaddwd. Then one
// float multiply-add per group by d_w * d_x.
#ifndef TINYAI_KERNELS_SIMD_GROUPED_AVX512_H_
#define TINYAI_KERNELS_SIMD_GROUPED_AVX512_H_

#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "kernels/kernels.h"
#include "kernels/ref/kernels_ref.h"

namespace tinyai {
namespace kernels {
namespace avx512 {

inline uint16_t HalfBits(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return h;
}

// u8 x s8 products summed in fours into int32 lanes.
template <bool kVnni>
inline __m512i DotU8S8(__m512i u, __m512i s) {
  if constexpr (kVnni) {
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s);
  } else {
    return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
  }
}

// s16 x s16 products summed in pairs into int32 lanes.
template <bool kVnni>
inline __m512i DotS16(__m512i a, __m512i b) {
  if constexpr (kVnni) {
    return _mm512_dpwssd_epi32(_mm512_setzero_si512(), a, b);
  } else {
    return _mm512_madd_epi16(a, b);
  }
}

// [a x8, b x8] as floats.
inline __m512 PairOf(float a, float b) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(a)), _mm256_set1_ps(b), 1);
}

// The 64 codes of groups g and g+1 (at p and p + 18) as unsigned bytes in
// the input's order: g's 0..31, then g+1's 0..31.
template <int32_t DType>
inline __m512i Codes4(const uint8_t* p) {
  const __m256i packed = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 + kQ4GroupBytes)), 1);
  const __m256i mask = _mm256_set1_epi8(15);
  const __m256i low = _mm256_and_si256(packed, mask), high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), mask);
  // [g low, g+1 low, g high, g+1 high] -> [g low, g high, g+1 low, g+1 high]
  __m512i codes = _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
  codes = _mm512_shuffle_i64x2(codes, codes, _MM_SHUFFLE(3, 1, 2, 0));
  return codes;
}

// q4nl's grid values + 128 (VNNI), or the grid values themselves.
template <bool kVnni>
inline __m512i Grid(__m512i codes) {
  alignas(16) static const uint8_t kShifted[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};
  const void* table = kVnni ? static_cast<const void*>(kShifted) : static_cast<const void*>(kQ4NLGrid);
  return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128(static_cast<const __m128i*>(table))), codes);
}

// What the 4-bit products need of one pair of input groups (g, g+1).
struct Pair {
  __m512i q;       // the 64 int8 codes
  __m512i offset;  // the product of q with the code of zero, per int32 lane
  __m512 d;        // [d_g x8, d_g+1 x8]
};

template <int32_t DType, bool kVnni>
inline Pair MakePair(const InputGroup& a, const InputGroup& b) {
  Pair p;
  p.q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q))),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.q)), 1);
  const bool signed_grid = DType == TINYAI_DTYPE_Q4NL_G32 && !kVnni;
  p.offset = signed_grid ? _mm512_setzero_si512()
                         : DotU8S8<kVnni>(_mm512_set1_epi8(static_cast<char>(DType == TINYAI_DTYPE_Q4_G32 ? 8 : 128)), p.q);
  p.d = PairOf(a.d, b.d);
  return p;
}

// The pair's float contribution to a row: (codes . q - offset) * d_w * d_x.
template <int32_t DType, bool kVnni>
inline __m512 PairProduct(const uint8_t* g, const Pair& x, __m512 acc) {
  __m512i dot;
  if constexpr (DType == TINYAI_DTYPE_Q4_G32) {
    dot = _mm512_sub_epi32(DotU8S8<kVnni>(Codes4<DType>(g), x.q), x.offset);
  } else if constexpr (kVnni) {
    dot = _mm512_sub_epi32(DotU8S8<kVnni>(Grid<kVnni>(Codes4<DType>(g)), x.q), x.offset);
  } else {
    const __m512i v = Grid<kVnni>(Codes4<DType>(g));
    const __m512i negated = _mm512_mask_sub_epi8(x.q, _mm512_movepi8_mask(v), _mm512_setzero_si512(), x.q);
    dot = DotU8S8<kVnni>(_mm512_abs_epi8(v), negated);
  }
  const __m512 dw = _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(static_cast<short>(HalfBits(g)))),
                                                           _mm_set1_epi16(static_cast<short>(HalfBits(g + kQ4GroupBytes))), 1));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, x.d), acc);
}

// A last, unpaired group of a 4-bit row: the pair's arithmetic with a zero
// second group (its input half is zero, so it adds nothing).
template <int32_t DType, bool kVnni>
inline float LastGroup(const uint8_t* g, const InputGroup& x) {
  alignas(64) uint8_t two[2 * kQ4GroupBytes] = {};
  std::memcpy(two, g, kQ4GroupBytes);
  InputGroup zero = {};
  const Pair p = MakePair<DType, kVnni>(x, zero);
  return _mm512_reduce_add_ps(PairProduct<DType, kVnni>(two, p, _mm512_setzero_ps()));
}

// Rows of a 4-bit dtype against one input, one row after the other; the
// input's pairs are prepared once (kMaxPairs at a time: rows up to 8,192
// values in one pass).
template <int32_t DType, bool kVnni>
void Matvec4(const uint8_t* w, size_t row_bytes, const InputGroup* x, float* y, size_t rows, size_t cols) {
  constexpr size_t kMaxPairs = 128;  // 24 KiB of prepared pairs on the stack
  const size_t groups = GroupsPerRow(cols), pairs = groups / 2;
  Pair prepared[kMaxPairs];
  for (size_t r = 0; r < rows; ++r) y[r] = 0.0f;
  for (size_t p0 = 0; p0 < pairs;) {
    const size_t p1 = pairs - p0 < kMaxPairs ? pairs : p0 + kMaxPairs;
    for (size_t p = p0; p < p1; ++p) prepared[p - p0] = MakePair<DType, kVnni>(x[2 * p], x[2 * p + 1]);
    for (size_t r = 0; r < rows; ++r) {
      const uint8_t* row = w + r * row_bytes;
      __m512 acc = _mm512_setzero_ps();
      for (size_t p = p0; p < p1; ++p) acc = PairProduct<DType, kVnni>(row + 2 * p * kQ4GroupBytes, prepared[p - p0], acc);
      y[r] += _mm512_reduce_add_ps(acc);
    }
    p0 = p1;
  }
  if (groups % 2 != 0) {
    for (size_t r = 0; r < rows; ++r) y[r] += LastGroup<DType, kVnni>(w + r * row_bytes + (groups - 1) * kQ4GroupBytes, x[groups - 1]);
  }
}

// q8_g32 rows against one int16 input.
template <bool kVnni>
void Matvec8(const uint8_t* w, size_t row_bytes, const InputGroup16* x, float* y, size_t rows, size_t cols) {
  const size_t groups = GroupsPerRow(cols);
  for (size_t r = 0; r < rows; ++r) {
    const uint8_t* row = w + r * row_bytes;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    size_t g = 0;
    auto one = [&](size_t k, __m512 acc) {
      const uint8_t* grp = row + k * kQ8GroupBytes;
      const __m512i codes = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(grp + 2)));
      const __m512i dot = DotS16<kVnni>(codes, _mm512_loadu_si512(x[k].q));
      return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(_cvtsh_ss(HalfBits(grp)) * x[k].d), acc);
    };
    for (; g + 2 <= groups; g += 2) {
      acc0 = one(g, acc0);
      acc1 = one(g + 1, acc1);
    }
    if (g < groups) acc0 = one(g, acc0);
    y[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  }
}

template <int32_t DType, bool kVnni>
void MatvecQ(const uint8_t* w, size_t row_bytes, const void* x, float* y, size_t rows, size_t cols) {
  if constexpr (DType == TINYAI_DTYPE_Q8_G32) {
    Matvec8<kVnni>(w, row_bytes, static_cast<const InputGroup16*>(x), y, rows, cols);
  } else {
    Matvec4<DType, kVnni>(w, row_bytes, static_cast<const InputGroup*>(x), y, rows, cols);
  }
}

// Several inputs: each input against a panel of rows small enough to stay
// in L1/L2 (16 KiB), so the rows come from memory once for all inputs.
template <int32_t DType, bool kVnni>
void MatmulQ(const uint8_t* w, size_t row_bytes, const void* x, size_t ldx, float* y, size_t ldy, size_t rows,
             size_t cols, size_t n) {
  using In = InputGroupOf<DType>;
  const In* in = static_cast<const In*>(x);
  size_t panel = (16u << 10) / (row_bytes == 0 ? 1 : row_bytes);
  if (panel == 0) panel = 1;
  for (size_t r = 0; r < rows; r += panel) {
    const size_t count = rows - r < panel ? rows - r : panel;
    for (size_t j = 0; j < n; ++j) MatvecQ<DType, kVnni>(w + r * row_bytes, row_bytes, in + j * ldx, y + j * ldy + r, count, cols);
  }
}

template <bool kVnni>
struct Grouped {
  static constexpr void (*kQuantizeInput)(const float*, size_t, InputGroup*) = &ref::QuantizeInput;
  static constexpr void (*kQuantizeInput16)(const float*, size_t, InputGroup16*) = &ref::QuantizeInput16;
  template <int32_t DType>
  static constexpr WeightKernels Weights() {
    return WeightKernels{nullptr, nullptr, &ref::DequantizeRowQ<DType>, &MatvecQ<DType, kVnni>, &MatmulQ<DType, kVnni>,
                         InputFormOf(DType)};
  }
};

}  // namespace avx512
}  // namespace kernels
}  // namespace tinyai

#endif  // TINYAI_KERNELS_SIMD_GROUPED_AVX512_H_
