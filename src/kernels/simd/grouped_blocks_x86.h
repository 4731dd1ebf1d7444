// The GGUF block dtypes' products on x86 with 256-bit integer vectors
// (AVX2, and the AVX-512 tables, which add the result to their 512-bit
// accumulators): q4_k, q5_k, q6_k (blocks of 256 against 8 input groups)
// and q5_g32, q5m_g32 (groups of 32). Include only from a per-ISA header
// (grouped_avx2.h, grouped_avx512.h), compiled with at least -mavx2 -mfma
// -mf16c; everything here lives in that flag set's inline namespace.
//
// Per sub-block of 32: its codes as 32 unsigned bytes (q6_k: signed, as
// magnitude and sign, the q4nl trick), vpmaddubsw with the input's int8
// codes (pairs to int16: at most 2 * 63 * 127 < 32768) and vpmaddwd (to
// int32; q6_k: by the two 16-value halves' int8 scales, so the scaled
// integer sum is exact); the 8 sub-blocks' int32 vectors reduced to one
// vector of 8 sums (lane s: sub-block s), converted once and scaled by
// d * sc[s] * x[s].d in one multiply-add; q4_k and q5_k take their
// minimums off as dmin * mn[s] * x[s].d * x[s].sum in one more.
#ifndef TINYAI_KERNELS_SIMD_GROUPED_BLOCKS_X86_H_
#define TINYAI_KERNELS_SIMD_GROUPED_BLOCKS_X86_H_

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "common/groups.h"
#include "kernels/simd/isa.h"

namespace tinyai {
namespace kernels {
namespace x86blocks {
inline namespace TINYAI_ISA_NAMESPACE {

// A block's bytes: the micro-kernels' WeightGroup for these dtypes (there
// are too many codes in a K-quant block to hold in registers for several
// inputs; they are decoded from L1 for each).
struct BlockRef {
  const uint8_t* p;
  explicit BlockRef(const uint8_t* b) : p(b) {}
};

inline float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _cvtsh_ss(h);
}

// The int32 partial sums of 32 unsigned codes times 32 int8 inputs.
inline __m256i Dot32(__m256i codes, const int8_t* q) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(codes, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q))),
                           _mm256_set1_epi16(1));
}

// Lane k: the sum of s[k]'s eight lanes.
inline __m256i Reduce8(const __m256i* s) {
  const __m256i p = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
  const __m256i q = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(p, q, 0x20), _mm256_permute2x128_si256(p, q, 0x31));
}

// The 8 input groups' scales (lane s: x[s].d).
inline __m256 InputScales(const InputGroup* x) {
  return _mm256_setr_ps(x[0].d, x[1].d, x[2].d, x[3].d, x[4].d, x[5].d, x[6].d, x[7].d);
}

inline __m256 InputSums(const InputGroup* x) {
  return _mm256_cvtepi32_ps(_mm256_setr_epi32(x[0].sum, x[1].sum, x[2].sum, x[3].sum, x[4].sum, x[5].sum, x[6].sum, x[7].sum));
}

// Bytes whose bit `bit` is set: 16, else 0.
inline __m256i FifthBit(__m256i bits, int bit) {
  const __m256i m = _mm256_set1_epi8(static_cast<char>(1 << bit));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bits, m), m), _mm256_set1_epi8(16));
}

// A q4_k/q5_k block's eight d * sc[s] and dmin * mn[s] (KScaleMin's
// unpacking, four sub-blocks a 32-bit word: sc[0..3] and mn[0..3] are the
// low 6 bits of bytes 0..3 and 4..7; sc[4..7] and mn[4..7] the low and high
// nibbles of bytes 8..11 with the top 2 bits of bytes 0..3 and 4..7 above).
inline void ScalesMins(const uint8_t* b, __m256* scale, __m256* mins) {
  uint32_t q[3];
  std::memcpy(q, b + 4, sizeof q);
  const uint32_t sc_lo = q[0] & 0x3f3f3f3fu, mn_lo = q[1] & 0x3f3f3f3fu;
  const uint32_t sc_hi = (q[2] & 0x0f0f0f0fu) | ((q[0] >> 2) & 0x30303030u);
  const uint32_t mn_hi = ((q[2] >> 4) & 0x0f0f0f0fu) | ((q[1] >> 2) & 0x30303030u);
  const __m128i sc = _mm_cvtsi64_si128(static_cast<int64_t>(sc_lo | static_cast<uint64_t>(sc_hi) << 32));
  const __m128i mn = _mm_cvtsi64_si128(static_cast<int64_t>(mn_lo | static_cast<uint64_t>(mn_hi) << 32));
  *scale = _mm256_mul_ps(_mm256_set1_ps(Half(b)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc)));
  *mins = _mm256_mul_ps(_mm256_set1_ps(Half(b + 2)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mn)));
}

// The 8 input groups' scales and sums of a block, once for all the rows a
// matvec runs (lane s: x[s].d, x[s].sum).
struct BlockInput {
  __m256 d, sum;
};

inline BlockInput InputOf(const InputGroup* x) { return BlockInput{InputScales(x), InputSums(x)}; }

template <int32_t DType>
inline __m256 FmaK45(const uint8_t* b, const InputGroup* x, const BlockInput& in, __m256 acc);

// acc + a q4_k or q5_k block's product with the 8 input groups from x on.
template <int32_t DType>
inline __m256 FmaK45(const uint8_t* b, const InputGroup* x, __m256 acc) {
  return FmaK45<DType>(b, x, InputOf(x), acc);
}

template <int32_t DType>
inline __m256 FmaK45(const uint8_t* b, const InputGroup* x, const BlockInput& in, __m256 acc) {
  constexpr bool kQ5 = DType == TINYAI_DTYPE_Q5_K;
  __m256 scale, mins;
  ScalesMins(b, &scale, &mins);
  const uint8_t* qs = b + (kQ5 ? 48 : 16);
  const __m256i m4 = _mm256_set1_epi8(15);
  __m256i high_bits = _mm256_setzero_si256();
  if (kQ5) high_bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16));
  __m256i s[8];
  for (int c = 0; c < 4; ++c) {
    const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
    __m256i lo = _mm256_and_si256(packed, m4), hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), m4);
    if (kQ5) {
      lo = _mm256_or_si256(lo, FifthBit(high_bits, 2 * c));
      hi = _mm256_or_si256(hi, FifthBit(high_bits, 2 * c + 1));
    }
    s[2 * c] = Dot32(lo, x[2 * c].q);
    s[2 * c + 1] = Dot32(hi, x[2 * c + 1].q);
  }
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Reduce8(s)), _mm256_mul_ps(scale, in.d), acc);
  return _mm256_fnmadd_ps(_mm256_mul_ps(mins, in.d), in.sum, acc);
}

// acc + a q6_k block's product with the 8 input groups from x on.
inline __m256 FmaQ6K(const uint8_t* b, const InputGroup* x, const BlockInput& in, __m256 acc) {
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3), bias = _mm256_set1_epi8(32);
  __m256i s[8];
  for (int h = 0; h < 2; ++h) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * h));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * h + 32));
    const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h));
    for (int k = 0; k < 4; ++k) {
      const __m256i src = k % 2 == 0 ? a : c;
      const __m256i nibble = k < 2 ? _mm256_and_si256(src, m4) : _mm256_and_si256(_mm256_srli_epi16(src, 4), m4);
      const __m256i top = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * k), m2), 4);
      const __m256i q = _mm256_sub_epi8(_mm256_or_si256(nibble, top), bias);  // -32..31
      const int sb = 4 * h + k;
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[sb].q));
      const __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(xq, q));
      const __m256i scales = _mm256_set_m128i(_mm_set1_epi16(sc[2 * sb + 1]), _mm_set1_epi16(sc[2 * sb]));
      s[sb] = _mm256_madd_epi16(pairs, scales);
    }
  }
  const __m256 dx = _mm256_mul_ps(_mm256_set1_ps(Half(b + 208)), in.d);
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(Reduce8(s)), dx, acc);
}

// acc + a q5_g32 or q5m_g32 group's product with x.
template <int32_t DType>
inline __m256 FmaQ5(const uint8_t* g, const InputGroup& x, __m256 acc) {
  constexpr bool kMin = DType == TINYAI_DTYPE_Q5M_G32;
  const uint8_t* p = g + (kMin ? 4 : 2);
  uint32_t h;
  std::memcpy(&h, p, sizeof h);
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 4));
  const __m128i m4 = _mm_set1_epi8(15);
  __m256i codes = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(packed, 4), m4), _mm_and_si128(packed, m4));
  // Byte j of the vector takes byte j / 8 of h, then its bit j % 8.
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(h)),
                                             _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2,
                                                              2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
  codes = _mm256_or_si256(codes, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(16)));
  __m256i dot = Dot32(codes, x.q);
  if (!kMin) dot = _mm256_add_epi32(dot, _mm256_castsi128_si256(_mm_cvtsi32_si128(-16 * x.sum)));
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(Half(g) * x.d), acc);
  if (kMin) acc = _mm256_add_ps(acc, _mm256_set_m128(_mm_setzero_ps(), _mm_set_ss(static_cast<float>(x.sum) * (Half(g + 2) * x.d))));
  return acc;
}

// Whether this header has the products of DType.
constexpr bool Handles(int32_t dtype) { return IsSuperBlockDType(dtype) || dtype == TINYAI_DTYPE_Q5_G32 || dtype == TINYAI_DTYPE_Q5M_G32; }

// acc + block b's product with the input group(s) from x on.
template <int32_t DType>
inline __m256 Fma(const uint8_t* b, const InputGroup& x, __m256 acc) {
  if constexpr (DType == TINYAI_DTYPE_Q6_K) {
    return FmaQ6K(b, &x, InputOf(&x), acc);
  } else if constexpr (IsSuperBlockDType(DType)) {
    return FmaK45<DType>(b, &x, acc);
  } else {
    return FmaQ5<DType>(b, x, acc);
  }
}

// A K-quant matvec (WeightKernels::matvec_q): the input's scales and sums
// laid out as vectors once per call, for kChunk blocks at a time, then each
// row one sequential stream of blocks, two accumulators.
template <int32_t DType>
void MatvecK(const uint8_t* w, size_t row_bytes, const void* input, float* y, size_t rows, size_t cols) {
  constexpr size_t kChunk = 64, kBytes = GroupBytes(DType);
  const InputGroup* x = static_cast<const InputGroup*>(input);
  const size_t blocks = cols / kSuperBlock;
  BlockInput in[kChunk];
  for (size_t r = 0; r < rows; ++r) y[r] = 0.0f;
  for (size_t b0 = 0; b0 < blocks; b0 += kChunk) {
    const size_t count = blocks - b0 < kChunk ? blocks - b0 : kChunk;
    for (size_t b = 0; b < count; ++b) in[b] = InputOf(x + 8 * (b0 + b));
    for (size_t r = 0; r < rows; ++r) {
      const uint8_t* row = w + r * row_bytes + b0 * kBytes;
      __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
      size_t b = 0;
      for (; b + 2 <= count; b += 2) {
        const InputGroup* xb = x + 8 * (b0 + b);
        if constexpr (DType == TINYAI_DTYPE_Q6_K) {
          acc0 = FmaQ6K(row + b * kBytes, xb, in[b], acc0);
          acc1 = FmaQ6K(row + (b + 1) * kBytes, xb + 8, in[b + 1], acc1);
        } else {
          acc0 = FmaK45<DType>(row + b * kBytes, xb, in[b], acc0);
          acc1 = FmaK45<DType>(row + (b + 1) * kBytes, xb + 8, in[b + 1], acc1);
        }
      }
      if (b < count) {
        const InputGroup* xb = x + 8 * (b0 + b);
        if constexpr (DType == TINYAI_DTYPE_Q6_K) {
          acc0 = FmaQ6K(row + b * kBytes, xb, in[b], acc0);
        } else {
          acc0 = FmaK45<DType>(row + b * kBytes, xb, in[b], acc0);
        }
      }
      const __m256 v = _mm256_add_ps(acc0, acc1);
      __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
      h = _mm_add_ps(h, _mm_movehl_ps(h, h));
      h = _mm_add_ss(h, _mm_movehdup_ps(h));
      y[r] += _mm_cvtss_f32(h);
    }
  }
}

}  // namespace TINYAI_ISA_NAMESPACE
}  // namespace x86blocks
}  // namespace kernels
}  // namespace tinyai

#endif  // TINYAI_KERNELS_SIMD_GROUPED_BLOCKS_X86_H_
