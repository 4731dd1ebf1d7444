// The GGUF block dtypes' products on x86: q4_k, q5_k, q6_k (blocks of 256
// against 8 input groups) and q5_g32, q5m_g32 (groups of 32). Include only
// from a per-ISA header (grouped_avx2.h, grouped_avx512.h), compiled with at
// least -mavx2 -mfma -mf16c; everything here lives in that flag set's inline
// namespace.
//
// Per sub-block of 32: its codes as 32 unsigned bytes (q6_k: code + 32,
// 0..63), vpmaddubsw with the input's int8 codes (pairs to int16: at most
// 2 * 63 * 127 < 32768) and vpmaddwd (to int32; q6_k: by the two 16-value
// halves' int8 scales, so the scaled integer sum is exact; its + 32 comes
// off once a block against the input's 16-value sums); the 8 sub-blocks'
// int32 vectors reduced to one vector of 8 sums (lane s: sub-block s),
// converted once and scaled by d * sc[s] * x[s].d in one multiply-add; q4_k
// and q5_k take their minimums off as dmin * mn[s] * x[s].d * x[s].sum in
// one more. The drivers' rows (prompts) do it with 256-bit vectors; the
// matvec (MatvecK) lays the input out once per call and, where the flags
// have AVX-512, puts two sub-blocks in a 512-bit register and two blocks'
// sums in one accumulator, the same integers and the same float steps (with
// VNNI, q6_k sums each 16-value half by vpdpbusd and scales the halves by
// one vpmulld: HalfDotsQ6K).
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

// A q4_k/q5_k block's eight sc[s] and mn[s] (KScaleMin's unpacking, four
// sub-blocks a 32-bit word: of the words q0, q1, q2 at bytes 4, 8, 12,
// sc[0..3] = q0 & 0x3f3f3f3f and mn[0..3] = q1 & 0x3f3f3f3f; sc[4..7] = (q2
// & 0x0f0f0f0f) | ((q0 >> 2) & 0x30303030), mn[4..7] = ((q2 >> 4) &
// 0x0f0f0f0f) | ((q1 >> 2) & 0x30303030)) as bytes sc[0..7], mn[0..7], from
// the block's first 16 bytes v = [d|dmin, q0, q1, q2]: two vpshufd put [q0,
// q2, q1, q2] and [q0, q0, q1, q1] under the four results, then one shift
// (a count a word), two masks and an or, in vector registers (the scalar
// steps took about a quarter of a q4_k block's time in cache; PairScalesMins
// does two blocks so).
inline __m128i ScaleMinVector(__m128i v) {
  const __m128i x = _mm_shuffle_epi32(v, _MM_SHUFFLE(3, 2, 3, 1));  // [q0, q2, q1, q2]
  const __m128i y = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 1, 1));  // [q0, q0, q1, q1]
  const __m128i low = _mm_and_si128(_mm_srlv_epi32(x, _mm_setr_epi32(0, 0, 0, 4)),
                                    _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  const __m128i high = _mm_and_si128(_mm_srli_epi32(y, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(low, high);  // sc[0..7], mn[0..7]
}

// The block's eight d * sc[s] and dmin * mn[s].
inline void ScalesMins(const uint8_t* b, __m256* scale, __m256* mins) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  const __m128i bytes = ScaleMinVector(v);
  const __m128 f = _mm_cvtph_ps(v);  // [d, dmin, unused, unused]
  const __m256 d = _mm256_broadcastss_ps(f), dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(f));
  *scale = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)));
  *mins = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(bytes, bytes))));
}

// What a block's products need of the 8 input groups it meets besides
// their codes, once for all the rows a matvec runs: lane s x[s].d and
// x[s].sum; for q6_k the sums of the sixteen 16-value halves' codes (int16
// j: codes 16j..16j+15; at most 16 * 127).
struct BlockInput {
  __m256 d, sum;
  __m256i half_sums;
};

// The sixteen 16-value halves' sums of 8 groups' codes (int16 j: half j).
inline __m256i HalfSums(const InputGroup* x) {
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  __m256i s[8];  // lanes 0..3: group s's first half in fours, lanes 4..7 its second
  for (int k = 0; k < 8; ++k) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[k].q));
    s[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
  }
  // Two rounds of vphaddd: lanes 0..3 the first halves of four groups, 4..7
  // their second halves; packed to int16, then interleaved to half order.
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
  const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
  const __m256i p = _mm256_packs_epi32(a, b);  // first halves of groups 0..7 | second halves of groups 0..7
  const __m128i first = _mm256_castsi256_si128(p), second = _mm256_extracti128_si256(p, 1);
  return _mm256_set_m128i(_mm_unpackhi_epi16(first, second), _mm_unpacklo_epi16(first, second));
}

template <int32_t DType>
inline BlockInput InputOf(const InputGroup* x) {
  return BlockInput{InputScales(x), InputSums(x), DType == TINYAI_DTYPE_Q6_K ? HalfSums(x) : _mm256_setzero_si256()};
}

// MatvecK's layout of the input, kChunk blocks of it laid out once for all
// the rows: each block's BlockInput as arrays (two consecutive blocks' are
// one 512-bit load) and its 256 codes one group after the other (two
// groups' codes are one 512-bit load).
template <size_t kChunk>
struct ChunkInput {
  alignas(64) float d[kChunk][8];
  alignas(64) float sum[kChunk][8];
  alignas(64) int16_t half_sums[kChunk][16];
#if defined(__AVX512VNNI__)
  // q6_k with VNNI: 32 * the half sums as int32, in Lanes4's order (element
  // 4i + j: half 4j + i; HalfDotsQ6K).
  alignas(64) int32_t half_offsets[kChunk][16];
#endif
  alignas(64) int8_t q[kChunk][kSuperBlock];

  template <int32_t DType>
  void Set(size_t b, const InputGroup* x) {
    const BlockInput in = InputOf<DType>(x);
    _mm256_store_ps(d[b], in.d);
    _mm256_store_ps(sum[b], in.sum);
    _mm256_store_si256(reinterpret_cast<__m256i*>(half_sums[b]), in.half_sums);
#if defined(__AVX512VNNI__)
    if (DType == TINYAI_DTYPE_Q6_K) {
      const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
      _mm512_store_si512(half_offsets[b], _mm512_slli_epi32(_mm512_permutexvar_epi32(order, _mm512_cvtepi16_epi32(in.half_sums)), 5));
    }
#endif
    for (size_t k = 0; k < 8; ++k) std::memcpy(q[b] + kGroup * k, x[k].q, kGroup);
  }
  BlockInput Block(size_t b) const {
    return BlockInput{_mm256_load_ps(d[b]), _mm256_load_ps(sum[b]),
                      _mm256_load_si256(reinterpret_cast<const __m256i*>(half_sums[b]))};
  }
};

// Where the codes of input group s of a block are: InputGroup's q (the
// drivers' rows) or one after the other (MatvecK's layout).
template <size_t kStride>
inline const int8_t* CodesOf(const int8_t* q, int s) {
  return q + kStride * static_cast<size_t>(s);
}

// Every K-quant block's products end the same way, whatever the width that
// computed them: the 8 sub-blocks' exact integer dot products (lane s:
// sub-block s; q6_k already scaled by its int8 scales and offset by -32),
// converted once and scaled by d * sc[s] * x[s].d (q6_k: d * x[s].d) in one
// multiply-add, q4_k/q5_k's minimums off in one more.
template <int32_t DType>
inline __m256 Finish(const uint8_t* b, __m256i dots, const BlockInput& in, __m256 acc) {
  if constexpr (DType == TINYAI_DTYPE_Q6_K) {
    const __m256 dx = _mm256_mul_ps(_mm256_set1_ps(Half(b + 208)), in.d);
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots), dx, acc);
  } else {
    __m256 scale, mins;
    ScalesMins(b, &scale, &mins);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots), _mm256_mul_ps(scale, in.d), acc);
    return _mm256_fnmadd_ps(_mm256_mul_ps(mins, in.d), in.sum, acc);
  }
}

// A q4_k or q5_k block's 8 sub-block dot products with 256-bit vectors, the
// input's codes of group s at CodesOf<kStride>(q, s).
template <int32_t DType, size_t kStride>
inline __m256i DotsK45(const uint8_t* b, const int8_t* q) {
  constexpr bool kQ5 = DType == TINYAI_DTYPE_Q5_K;
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
    s[2 * c] = Dot32(lo, CodesOf<kStride>(q, 2 * c));
    s[2 * c + 1] = Dot32(hi, CodesOf<kStride>(q, 2 * c + 1));
  }
  return Reduce8(s);
}

// q6_k's codes as unsigned bytes 0..63 (code + 32), so that vpmaddubsw
// takes them as they are (pairs at most 2 * 63 * 127), and the offset comes
// off once a block as 32 * sum_j sc[j] * half_sums[j] (one vpmaddwd: lane s
// pairs halves 2s and 2s + 1, as the sub-block dots do).
inline __m256i Q6KOffset(const uint8_t* b, const BlockInput& in) {
  const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)));
  return _mm256_slli_epi32(_mm256_madd_epi16(sc, in.half_sums), 5);
}

// A q6_k block's 8 sub-block dot products with 256-bit vectors (each half's
// 16 values by its int8 scale). Per 128-value half h, three loads: L = ql +
// 64h (its bytes l, l + 32: the low nibbles of sub-blocks 4h, 4h + 1, the
// high nibbles of 4h + 2, 4h + 3) and H = qh + 32h (bit pairs 0, 2, 4, 6
// the codes' bits 4-5 of the same four sub-blocks); each sub-block's codes
// then take four or five bitwise operations. The scales sit as int16 with
// the even (first) halves in the low 128-bit lane and the odd ones in the
// high lane, so one vpshufb puts sub-block s's two scales under its two
// halves.
template <size_t kStride>
inline __m256i DotsQ6K(const uint8_t* b, const int8_t* q, const BlockInput& in) {
  const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
  const __m256i sc_even_odd =
      _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
  const __m256i m4 = _mm256_set1_epi8(15), m_top = _mm256_set1_epi8(0x30);
  __m256i s[8];
  for (int h = 0; h < 2; ++h) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * h));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * h + 32));
    const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h));
    __m256i u[4];
    u[0] = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m_top));
    u[1] = _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m_top));
    u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(hb, m_top));
    u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4), _mm256_and_si256(_mm256_srli_epi16(hb, 2), m_top));
    for (int k = 0; k < 4; ++k) {
      const int sb = 4 * h + k;
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(CodesOf<kStride>(q, sb)));
      const __m256i scales = _mm256_shuffle_epi8(sc_even_odd, _mm256_set1_epi16(static_cast<int16_t>((2 * sb) | (2 * sb + 1) << 8)));
      s[sb] = _mm256_madd_epi16(_mm256_maddubs_epi16(u[k], xq), scales);
    }
  }
  return _mm256_sub_epi32(Reduce8(s), Q6KOffset(b, in));
}

#if defined(__AVX512BW__)
// The AVX-512 tables' products in MatvecK: two sub-blocks a 512-bit
// register (their input codes one 64-byte load: MatvecK lays a block's
// codes out one group after the other), the same exact integers as the
// 256-bit products.

// u8 x s8 products summed in fours (vpdpbusd with VNNI).
inline __m512i Dot64(__m512i codes, const int8_t* q) {
  const __m512i x = _mm512_loadu_si512(q);
#if defined(__AVX512VNNI__)
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes, x);
#else
  return _mm512_madd_epi16(_mm512_maddubs_epi16(codes, x), _mm512_set1_epi16(1));
#endif
}

// A block's sub-block sums from four vectors v[j] of sub-blocks 2j (128-bit
// lanes 0, 1) and 2j + 1 (lanes 2, 3): two rounds of unpack and add leave,
// in 128-bit lane i, [v0, v1, v2, v3]'s lane-i sums. Lanes 0 + 1 are then
// sub-blocks 0, 2, 4, 6 and lanes 2 + 3 sub-blocks 1, 3, 5, 7 (Sums8,
// Sums16 add and interleave them).
inline __m512i Lanes4(const __m512i* v) {
  const __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(v[0], v[1]), _mm512_unpackhi_epi32(v[0], v[1]));
  const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2], v[3]), _mm512_unpackhi_epi32(v[2], v[3]));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
}

// Lane s: sub-block s's sum, from one block's Lanes4.
inline __m256i Sums8(__m512i c) {
  const __m512i t = _mm512_add_epi32(c, _mm512_shuffle_i32x4(c, c, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_castsi512_si256(
      _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 0, 0, 0, 0, 0, 0, 0, 0), t));
}

// Lanes 0..7: block a's sub-block sums, 8..15 block b's, from their Lanes4
// (two vpermt2d and one add for both blocks).
inline __m512i Sums16(__m512i a, __m512i b) {
  const __m512i p = _mm512_permutex2var_epi32(a, _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 16, 24, 17, 25, 18, 26, 19, 27), b);
  const __m512i q = _mm512_permutex2var_epi32(a, _mm512_setr_epi32(4, 12, 5, 13, 6, 14, 7, 15, 20, 28, 21, 29, 22, 30, 23, 31), b);
  return _mm512_add_epi32(p, q);
}

// The 32 bytes at p in both 256-bit halves.
inline __m512i Both(const uint8_t* p) {
  return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// q4_k/q5_k: the 32 packed bytes of sub-blocks 2c and 2c + 1 in both
// halves, shifted by 0 and 4 (their low and high nibbles): the pair's codes
// in one register, against groups 2c and 2c + 1 (adjacent in q).
template <int32_t DType>
inline __m512i LanesK45(const uint8_t* b, const int8_t* q) {
  constexpr bool kQ5 = DType == TINYAI_DTYPE_Q5_K;
  const uint8_t* qs = b + (kQ5 ? 48 : 16);
  const __m512i m4 = _mm512_set1_epi8(15);
  const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
  __m512i high_bits = _mm512_setzero_si512();
  if (kQ5) high_bits = Both(b + 16);
  __m512i s[4];
  for (int c = 0; c < 4; ++c) {
    __m512i codes = _mm512_and_si512(_mm512_srlv_epi16(Both(qs + 32 * c), shift), m4);
    if (kQ5) {
      // Bit 2c of qh for the low half, 2c + 1 for the high half: + 16.
      const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * c))),
                                             _mm256_set1_epi8(static_cast<char>(1 << (2 * c + 1))), 1);
      codes = _mm512_mask_add_epi8(codes, _mm512_test_epi8_mask(high_bits, bit), codes, _mm512_set1_epi8(16));
    }
    s[c] = Dot64(codes, q + 2 * kGroup * c);
  }
  return Lanes4(s);
}

// q6_k's codes + 32 of half h (0, 1) of a block: ql's 64 bytes in one
// register (bytes l and l + 32: the low nibbles of sub-blocks 4h and 4h + 1,
// the high ones of 4h + 2 and 4h + 3) and qh's 32 in both 256-bit halves,
// shifted so that each half's bit pair lands on bits 4-5 (left 4 and 2 for
// the low nibbles, right 0 and 2 for the high). lo: sub-blocks 4h, 4h + 1;
// hi: 4h + 2, 4h + 3; each 128-bit lane one 16-value half.
inline void CodesQ6K(const uint8_t* b, int h, __m512i* lo, __m512i* hi) {
  const __m512i m4 = _mm512_set1_epi8(15), m_top = _mm512_set1_epi8(0x30);
  const __m512i left = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
  const __m512i right = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  const __m512i l = _mm512_loadu_si512(b + 64 * h);
  const __m512i hb = Both(b + 128 + 32 * h);
  *lo = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(_mm512_sllv_epi16(hb, left), m_top));
  *hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), _mm512_and_si512(_mm512_srlv_epi16(hb, right), m_top));
}

// q6_k: each pair of sub-blocks' codes (CodesQ6K) by the int16 scales under
// each 16-value half, sc[4j + lane] (vpermw). The -32 offset is not taken
// off (Q6KOffset, Q6KOffsets).
inline __m512i LanesQ6K(const uint8_t* b, const int8_t* q) {
  const __m512i sc = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192))));
  __m512i s[4];
  for (int h = 0; h < 2; ++h) {
    __m512i codes[2];
    CodesQ6K(b, h, &codes[0], &codes[1]);
    for (int k = 0; k < 2; ++k) {
      const int j = 2 * h + k;  // sub-blocks 2j, 2j + 1
      const __m512i scales = _mm512_permutexvar_epi16(
          _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(4 * j + 1)),
                                                                     _mm_set1_epi16(static_cast<int16_t>(4 * j)))),
                             _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(4 * j + 3)),
                                              _mm_set1_epi16(static_cast<int16_t>(4 * j + 2))),
                             1),
          sc);
      const __m512i x = _mm512_loadu_si512(q + 2 * kGroup * j);
      s[j] = _mm512_madd_epi16(_mm512_maddubs_epi16(codes[k], x), scales);
    }
  }
  return Lanes4(s);
}

#if defined(__AVX512VNNI__)
// q6_k with VNNI: the same codes against the input by vpdpbusd (fours of
// products, no scales), Lanes4 to one int32 a 16-value half (element 4i + j:
// half 4j + i), the + 32 offset off per half (ChunkInput's half_offsets),
// then one vpmulld by the halves' int8 scales in the same order. The same
// exact integers as LanesQ6K minus Q6KOffset, in 4 vpdpbusd and one vpmulld
// where LanesQ6K takes 4 vpmaddubsw, 4 vpmaddwd and 4 vpermw.
inline __m512i HalfDotsQ6K(const uint8_t* b, const int8_t* q, const int32_t* half_offsets) {
  __m512i s[4];
  for (int h = 0; h < 2; ++h) {
    __m512i lo, hi;
    CodesQ6K(b, h, &lo, &hi);
    s[2 * h] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512(q + 2 * kGroup * (2 * h)));
    s[2 * h + 1] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi, _mm512_loadu_si512(q + 2 * kGroup * (2 * h + 1)));
  }
  const __m512i halves = _mm512_sub_epi32(Lanes4(s), _mm512_load_si512(half_offsets));
  const __m128i sc = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)),
                                      _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  return _mm512_mullo_epi32(halves, _mm512_cvtepi8_epi32(sc));
}
#endif

// Q6KOffset of two blocks (a's in lanes 0..7, b's in 8..15), against their
// half sums one after the other.
inline __m512i Q6KOffsets(const uint8_t* a, const uint8_t* b, const int16_t* half_sums) {
  const __m256i sc8 = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 192))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)), 1);
  return _mm512_slli_epi32(_mm512_madd_epi16(_mm512_cvtepi8_epi16(sc8), _mm512_loadu_si512(half_sums)), 5);
}

// Two q4_k/q5_k blocks' d * sc[s] (lanes 0..7 block a's, 8..15 block b's)
// and dmin * mn[s]: ScalesMins of both at once, a block's first 16 bytes a
// 128-bit lane (ScaleMinVector's steps). The same integers and float steps
// as ScalesMins, so the sums are bit for bit; the scalar
// unpacking took about a quarter of a q4_k block's time in cache (5.9 ns a
// block, 4.3 without it: docs/benchmarks.md, "K-quants: where a block's time
// goes").
inline void PairScalesMins(const uint8_t* a, const uint8_t* b, __m512* scale, __m512* mins) {
  const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
  const __m256i x = _mm256_shuffle_epi32(v, _MM_SHUFFLE(3, 2, 3, 1));  // ScaleMinVector, a block a lane
  const __m256i y = _mm256_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 1, 1));
  const __m256i low = _mm256_and_si256(_mm256_srlv_epi32(x, _mm256_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4)),
                                       _mm256_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f,
                                                         0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  const __m256i high =
      _mm256_and_si256(_mm256_srli_epi32(y, 2), _mm256_setr_epi32(0, 0x30303030, 0, 0x30303030, 0, 0x30303030, 0, 0x30303030));
  // A block's 16 bytes are now its sc[0..7], mn[0..7]: to [sc a, sc b, mn a, mn b].
  const __m256i bytes = _mm256_permute4x64_epi64(_mm256_or_si256(low, high), _MM_SHUFFLE(3, 1, 2, 0));
  const __m512 f = _mm512_cvtph_ps(v);  // lane 0: a's d, 1: a's dmin, 8: b's d, 9: b's dmin (the rest unused)
  const __m512 d = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8), f);
  const __m512 dmin = _mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 9, 9, 9, 9, 9, 9, 9, 9), f);
  *scale = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(bytes))));
  *mins = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(bytes, 1))));
}

// Two blocks' products, a at b and the next at b + kBytes, against the
// input's blocks i and i + 1 of the chunk: acc's lanes 0..7 take the first
// block's, 8..15 the second's, each lane the arithmetic of Finish (the same
// operations in the same order, so bit for bit what two 256-bit
// accumulators would hold).
template <int32_t DType, size_t kChunk>
inline __m512 FmaPair(const uint8_t* b, const ChunkInput<kChunk>& in, size_t i, __m512 acc) {
  constexpr size_t kBytes = GroupBytes(DType);
  const uint8_t* next = b + kBytes;
  const __m512 dx = _mm512_load_ps(in.d[i]);  // blocks i and i + 1: 16 floats in a row
  if constexpr (DType == TINYAI_DTYPE_Q6_K) {
#if defined(__AVX512VNNI__)
    const __m512i dots = Sums16(HalfDotsQ6K(b, in.q[i], in.half_offsets[i]), HalfDotsQ6K(next, in.q[i + 1], in.half_offsets[i + 1]));
#else
    const __m512i dots = _mm512_sub_epi32(Sums16(LanesQ6K(b, in.q[i]), LanesQ6K(next, in.q[i + 1])),
                                          Q6KOffsets(b, next, in.half_sums[i]));
#endif
    const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(Half(b + 208)), _mm256_set1_ps(Half(next + 208)), 1);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), _mm512_mul_ps(d, dx), acc);
  } else {
    const __m512i dots = Sums16(LanesK45<DType>(b, in.q[i]), LanesK45<DType>(next, in.q[i + 1]));
    __m512 scale, mins;
    PairScalesMins(b, next, &scale, &mins);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), _mm512_mul_ps(scale, dx), acc);
    return _mm512_fnmadd_ps(_mm512_mul_ps(mins, dx), _mm512_load_ps(in.sum[i]), acc);
  }
}
#endif  // __AVX512BW__

// acc + a K-quant block's product with the 8 input groups from x on (the
// drivers' rows: the input's codes read where they are).
template <int32_t DType>
inline __m256 FmaK(const uint8_t* b, const InputGroup* x, __m256 acc) {
  const BlockInput in = InputOf<DType>(x);
  constexpr size_t kStride = sizeof(InputGroup);
  if constexpr (DType == TINYAI_DTYPE_Q6_K) {
    return Finish<DType>(b, DotsQ6K<kStride>(b, x[0].q, in), in, acc);
  } else {
    return Finish<DType>(b, DotsK45<DType, kStride>(b, x[0].q), in, acc);
  }
}

// The same against block i of MatvecK's layout: 512-bit products where the
// flags have AVX-512, else 256-bit.
template <int32_t DType, size_t kChunk>
inline __m256 FmaLaidOut(const uint8_t* b, const ChunkInput<kChunk>& chunk, size_t i, __m256 acc) {
  const BlockInput in = chunk.Block(i);
  const int8_t* q = chunk.q[i];
#if defined(__AVX512BW__)
  if constexpr (DType == TINYAI_DTYPE_Q6_K) {
#if defined(__AVX512VNNI__)
    return Finish<DType>(b, Sums8(HalfDotsQ6K(b, q, chunk.half_offsets[i])), in, acc);
#else
    return Finish<DType>(b, _mm256_sub_epi32(Sums8(LanesQ6K(b, q)), Q6KOffset(b, in)), in, acc);
#endif
  } else {
    return Finish<DType>(b, Sums8(LanesK45<DType>(b, q)), in, acc);
  }
#else
  if constexpr (DType == TINYAI_DTYPE_Q6_K) {
    return Finish<DType>(b, DotsQ6K<kGroup>(b, q, in), in, acc);
  } else {
    return Finish<DType>(b, DotsK45<DType, kGroup>(b, q), in, acc);
  }
#endif
}

// A q5_g32 or q5m_g32 group's 32 codes (0..31) as unsigned bytes.
template <int32_t DType>
inline __m256i CodesQ5(const uint8_t* g) {
  const uint8_t* p = g + (DType == TINYAI_DTYPE_Q5M_G32 ? 4 : 2);
  uint32_t h;
  std::memcpy(&h, p, sizeof h);
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 4));
  const __m256i codes = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(15));
  // Byte j of the vector takes byte j / 8 of h, then its bit j % 8.
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(h)),
                                             _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2,
                                                              2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
  return _mm256_or_si256(codes, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(16)));
}

// acc + a q5_g32 or q5m_g32 group's product with x.
template <int32_t DType>
inline __m256 FmaQ5(const uint8_t* g, const InputGroup& x, __m256 acc) {
  constexpr bool kMin = DType == TINYAI_DTYPE_Q5M_G32;
  __m256i dot = Dot32(CodesQ5<DType>(g), x.q);
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
  if constexpr (IsSuperBlockDType(DType)) {
    return FmaK<DType>(b, &x, acc);
  } else {
    return FmaQ5<DType>(b, x, acc);
  }
}

// Prefetches the n bytes at p into L2.
inline void PrefetchBytes(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; i += 64) _mm_prefetch(reinterpret_cast<const char*>(p + i), _MM_HINT_T1);
  _mm_prefetch(reinterpret_cast<const char*>(p + n - 1), _MM_HINT_T1);
}

// A K-quant matvec (WeightKernels::matvec_q): the input laid out once per
// call, for kChunk blocks at a time (BlockInput, and the codes one group
// after the other), then each row one sequential stream of blocks, two
// accumulators, the bytes kAhead rows on prefetched into L2 as the row goes
// (rows of 1-5 KB are streams too short for the hardware prefetcher; the
// q8_g32 products' kAheadRows).
template <int32_t DType>
void MatvecK(const uint8_t* w, size_t row_bytes, const void* input, float* y, size_t rows, size_t cols) {
  constexpr size_t kChunk = 64, kAhead = 4, kBytes = GroupBytes(DType);
  const InputGroup* x = static_cast<const InputGroup*>(input);
  const size_t blocks = cols / kSuperBlock;
  ChunkInput<kChunk> in;  // 22 KiB (26 KiB with VNNI: q6_k's half offsets)
  for (size_t r = 0; r < rows; ++r) y[r] = 0.0f;
  for (size_t b0 = 0; b0 < blocks; b0 += kChunk) {
    const size_t count = blocks - b0 < kChunk ? blocks - b0 : kChunk;
    for (size_t b = 0; b < count; ++b) in.template Set<DType>(b, x + 8 * (b0 + b));
    for (size_t r = 0; r < rows; ++r) {
      const uint8_t* row = w + r * row_bytes + b0 * kBytes;
      const uint8_t* ahead = r + kAhead < rows ? row + kAhead * row_bytes : nullptr;
      size_t b = 0;
#if defined(__AVX512BW__)
      __m512 acc = _mm512_setzero_ps();  // lanes 0..7: the even blocks' sums, 8..15 the odd blocks'
      for (; b + 2 <= count; b += 2) {
        if (ahead != nullptr) PrefetchBytes(ahead + b * kBytes, 2 * kBytes);
        acc = FmaPair<DType>(row + b * kBytes, in, b, acc);
      }
      __m256 acc0 = _mm512_castps512_ps256(acc), acc1 = _mm512_extractf32x8_ps(acc, 1);
#else
      __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
      for (; b + 2 <= count; b += 2) {
        if (ahead != nullptr) PrefetchBytes(ahead + b * kBytes, 2 * kBytes);
        acc0 = FmaLaidOut<DType>(row + b * kBytes, in, b, acc0);
        acc1 = FmaLaidOut<DType>(row + (b + 1) * kBytes, in, b + 1, acc1);
      }
#endif
      if (b < count) {
        if (ahead != nullptr) PrefetchBytes(ahead + b * kBytes, kBytes);
        acc0 = FmaLaidOut<DType>(row + b * kBytes, in, b, acc0);
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
