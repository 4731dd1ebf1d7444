// AVX-512 products for the grouped integer dtypes (src/common/groups.h):
// include only from kernels_x86_avx512.cc (AVX-512 F/BW/DQ/VL, kVnni false)
// and kernels_x86_avx512vnni.cc (the same plus AVX512-VNNI, kVnni true).
//
// The 4-bit dtypes take two groups per 512-bit register: their 64 codes
// become unsigned bytes u (q4: the nibble; q4nl with VNNI: grid value + 128,
// by a byte shuffle), multiplied with the input's int8 codes by vpdpbusd
// (VNNI) or vpmaddubsw + vpmaddwd, minus the same product with the code of
// zero (8, or 128) for each input pair, which depends on the input only and
// is computed once per product. q5_g32 and q5m_g32 take the same steps
// (their fifth bits one masked byte add of 16; q5_g32's zero is 16, q5m_g32
// adds its m_w * d_x * sum_x apart), one row after the other (MatvecPairs).
// Without VNNI, q4nl's pairs of 241 * 127
// would saturate vpmaddubsw's int16 sums, so it multiplies |value| with the
// input negated where the value is negative, and needs no offset. q8_g32 takes one group per register: its codes
// widened to int16 against the int16 input by vpdpwssd or vpmaddwd. Then one
// float multiply-add per group by d_w * d_x. A q8_g32 batch of 12 inputs or
// more puts them in the lanes instead (Matmul8Lanes).
#ifndef TINYAI_KERNELS_SIMD_GROUPED_AVX512_H_
#define TINYAI_KERNELS_SIMD_GROUPED_AVX512_H_

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "common/panels.h"
#include "kernels/kernels.h"
#include "kernels/ref/kernels_ref.h"
#include "kernels/simd/grouped_blocks_x86.h"
#include "kernels/simd/grouped_drivers.h"
#include "kernels/simd/isa.h"
#include "kernels/simd/matmul_avx512.h"

namespace tinyai {
namespace kernels {
namespace avx512 {
inline namespace TINYAI_ISA_NAMESPACE {

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

// Whether a dtype's pairs of groups take a group a 256-bit half (q5_g32,
// q5m_g32), else a 128-bit lane each of g's and g+1's first and last 16 codes.
template <int32_t DType>
constexpr bool GroupHalves() {
  return DType == TINYAI_DTYPE_Q5_G32 || DType == TINYAI_DTYPE_Q5M_G32;
}

// The 64 codes of groups g and g+1 (at p and p + GroupBytes) as unsigned
// bytes, one 128-bit lane each, in the order MakePair puts the input in.
// q4_g32 and q4nl_g32: their stored order, g's 0..15, g+1's 0..15, g's
// 16..31, g+1's 16..31 (a byte holds j low, j + 16 high). q5_g32 and
// q5m_g32 (nibbles 6 and 8 bytes in): g's 0..15, 16..31, then g+1's
// (GroupHalves), so that their 32-bit h (bit j: 16 more for code j) side by
// side are the mask of one masked byte add.
template <int32_t DType>
inline __m512i Codes4(const uint8_t* p) {
  constexpr size_t kBytes = GroupBytes(DType);
  if constexpr (GroupHalves<DType>()) {
    constexpr size_t kNibbles = DType == TINYAI_DTYPE_Q5_G32 ? 6 : 8;
    const __m512i packed = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kNibbles)))),
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kNibbles + kBytes))), 1);
    // Lanes 1 and 3 (words 8..15, 24..31) shifted right by 4: the high nibbles.
    const __m512i codes = _mm512_and_si512(_mm512_mask_srli_epi16(packed, 0xff00ff00u, packed, 4), _mm512_set1_epi8(15));
    uint32_t ha, hb;
    std::memcpy(&ha, p + kNibbles - 4, sizeof ha);
    std::memcpy(&hb, p + kNibbles - 4 + kBytes, sizeof hb);
    return _mm512_mask_add_epi8(codes, _cvtu64_mask64(ha | static_cast<uint64_t>(hb) << 32), codes, _mm512_set1_epi8(16));
  } else {
    const __m256i packed = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 + kBytes)), 1);
    const __m256i mask = _mm256_set1_epi8(15);
    const __m256i low = _mm256_and_si256(packed, mask), high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), mask);
    return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
  }
}

// q4nl's grid values + 128 (VNNI), or the grid values themselves.
template <bool kVnni>
inline __m512i Grid(__m512i codes) {
  alignas(16) static const uint8_t kShifted[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};
  const void* table = kVnni ? static_cast<const void*>(kShifted) : static_cast<const void*>(kQ4NLGrid);
  return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128(static_cast<const __m128i*>(table))), codes);
}

// What the products of the rows in pairs of groups need of one pair of
// input groups (a, b), in Codes4's order.
struct Pair {
  __m512i q;       // the 64 int8 codes: a 0..15, b 0..15, a 16..31, b 16..31 (GroupHalves: a's, then b's)
  __m512i offset;  // minus the product of q with the code of zero, per int32 lane
  __m128 d;        // [d_a, d_b, 0, 0]; q5m_g32: [d_a, d_b, d_a * sum_a, d_b * sum_b]
};

// [s[0] x4, s[1] x4, s[0] x4, s[1] x4] (GroupHalves: [s[0] x8, s[1] x8]): a
// pair's two scales over its lanes.
template <int32_t DType>
inline __m512 SpreadPair(__m128 s) {
  const __m512i order = GroupHalves<DType>() ? _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1)
                                             : _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1);
  return _mm512_permutexvar_ps(order, _mm512_castps128_ps512(s));
}

// The code that stands for zero: q4_g32's 8, q5_g32's 16, q4nl's grid value
// + 128 (VNNI); q5m_g32's codes are values as they are (its minimum is added
// apart) and q4nl without VNNI multiplies signed grid values.
template <int32_t DType, bool kVnni>
constexpr int ZeroCode() {
  return DType == TINYAI_DTYPE_Q4_G32 ? 8 : DType == TINYAI_DTYPE_Q5_G32 ? 16 : DType == TINYAI_DTYPE_Q4NL_G32 && kVnni ? 128 : 0;
}

template <int32_t DType, bool kVnni>
inline Pair MakePair(const InputGroup& a, const InputGroup& b) {
  Pair p;
  if constexpr (GroupHalves<DType>()) {
    p.q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q))),
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.q)), 1);
  } else {
    const __m128i a0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.q)),
                  a1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.q + 16)),
                  b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.q)),
                  b1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.q + 16));
    const __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(a0), b0, 1),
                  hi = _mm256_inserti128_si256(_mm256_castsi128_si256(a1), b1, 1);
    p.q = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  }
  constexpr int kZero = ZeroCode<DType, kVnni>();
  p.offset = kZero == 0 ? _mm512_setzero_si512()
                        : _mm512_sub_epi32(_mm512_setzero_si512(), DotU8S8<kVnni>(_mm512_set1_epi8(static_cast<char>(kZero)), p.q));
  p.d = DType == TINYAI_DTYPE_Q5M_G32
            ? _mm_setr_ps(a.d, b.d, a.d * static_cast<float>(a.sum), b.d * static_cast<float>(b.sum))
            : _mm_setr_ps(a.d, b.d, 0.0f, 0.0f);
  return p;
}

// u8 x s8 products summed in fours and added to acc.
template <bool kVnni>
inline __m512i DotU8S8Add(__m512i acc, __m512i u, __m512i s) {
  if constexpr (kVnni) {
    return _mm512_dpbusd_epi32(acc, u, s);
  } else {
    return _mm512_add_epi32(acc, DotU8S8<false>(u, s));
  }
}

// The pair's float contribution to a row: (codes . q - offset) * d_w * d_x;
// q5m_g32 adds m_w * d_x * sum_x, each group's in one lane.
template <int32_t DType, bool kVnni>
inline __m512 PairProduct(const uint8_t* g, const Pair& x, __m512 acc) {
  constexpr size_t kBytes = GroupBytes(DType);
  __m512i dot;
  if constexpr (DType != TINYAI_DTYPE_Q4NL_G32) {
    dot = DotU8S8Add<kVnni>(x.offset, Codes4<DType>(g), x.q);
  } else if constexpr (kVnni) {
    dot = DotU8S8Add<kVnni>(x.offset, Grid<kVnni>(Codes4<DType>(g)), x.q);
  } else {
    const __m512i v = Grid<kVnni>(Codes4<DType>(g));
    const __m512i negated = _mm512_mask_sub_epi8(x.q, _mm512_movepi8_mask(v), _mm512_setzero_si512(), x.q);
    dot = DotU8S8<kVnni>(_mm512_abs_epi8(v), negated);
  }
  if constexpr (DType == TINYAI_DTYPE_Q5M_G32) {
    uint32_t da, db;  // [d, m] of each group
    std::memcpy(&da, g, sizeof da);
    std::memcpy(&db, g + kBytes, sizeof db);
    const __m128 dm = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(da | static_cast<uint64_t>(db) << 32)));
    const __m128 t = _mm_mul_ps(_mm_permute_ps(dm, _MM_SHUFFLE(3, 1, 2, 0)), x.d);  // [d_a, d_b, m_a, m_b] * x.d
    // The pair's sum apart, then one add: a row's chain of dependent steps
    // stays one instruction a pair.
    const __m512 mins = _mm512_zextps128_ps512(_mm_movehl_ps(_mm_setzero_ps(), t));
    return _mm512_add_ps(acc, _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), SpreadPair<DType>(t), mins));
  } else {
    const __m128 dw = _mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(HalfBits(g)), HalfBits(g + kBytes), 1));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), SpreadPair<DType>(_mm_mul_ps(dw, x.d)), acc);
  }
}

// A last, unpaired group of a row: the pair's arithmetic with a zero
// second group (its input half is zero, so it adds nothing).
template <int32_t DType, bool kVnni>
inline float LastGroup(const uint8_t* g, const InputGroup& x) {
  constexpr size_t kBytes = GroupBytes(DType);
  alignas(64) uint8_t two[2 * kBytes] = {};
  std::memcpy(two, g, kBytes);
  InputGroup zero = {};
  const Pair p = MakePair<DType, kVnni>(x, zero);
  return _mm512_reduce_add_ps(PairProduct<DType, kVnni>(two, p, _mm512_setzero_ps()));
}

// The sums of four accumulators' lanes: [sum a, sum b, sum c, sum d].
inline __m128 Sum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  auto half = [](__m512 v) { return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); };
  auto quarter = [](__m256 v) { return _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); };
  const __m128 qa = quarter(half(a)), qb = quarter(half(b)), qc = quarter(half(c)), qd = quarter(half(d));
  return _mm_hadd_ps(_mm_hadd_ps(qa, qb), _mm_hadd_ps(qc, qd));
}

// The input's pairs prepared kMaxPairs at a time (rows up to 8,192 values
// in one pass; 20 KiB on the stack), body(prepared, p0, p1) run over each
// chunk of pairs p0..p1 after y's rows are zeroed (it adds to them), then a
// last, unpaired group's products added.
template <int32_t DType, bool kVnni, class Body>
__attribute__((always_inline)) inline void ForPreparedPairs(const uint8_t* w, size_t row_bytes, const InputGroup* x, float* y, size_t rows, size_t cols,
                             Body body) {
  constexpr size_t kMaxPairs = 128;
  constexpr size_t kBytes = GroupBytes(DType);
  const size_t groups = GroupsPerRow(cols), pairs = groups / 2;
  Pair prepared[kMaxPairs];
  for (size_t r = 0; r < rows; ++r) y[r] = 0.0f;
  for (size_t p0 = 0; p0 < pairs;) {
    const size_t p1 = pairs - p0 < kMaxPairs ? pairs : p0 + kMaxPairs;
    for (size_t p = p0; p < p1; ++p) prepared[p - p0] = MakePair<DType, kVnni>(x[2 * p], x[2 * p + 1]);
    body(static_cast<const Pair*>(prepared), p0, p1);
    p0 = p1;
  }
  if (groups % 2 != 0) {
    for (size_t r = 0; r < rows; ++r) y[r] += LastGroup<DType, kVnni>(w + r * row_bytes + (groups - 1) * kBytes, x[groups - 1]);
  }
}

// One row's n pairs of groups from row on against prepared: two
// accumulators, the even and the odd pairs, added and reduced as Sum4 does
// (Matvec4 reduces four rows at once the same way). When ahead is not null
// the same bytes there are prefetched into L2, a line for every 64 bytes or
// fewer read.
template <int32_t DType, bool kVnni>
__attribute__((always_inline)) inline float RowPairs(const uint8_t* row, const Pair* prepared, size_t n, const uint8_t* ahead) {
  constexpr size_t kBytes = GroupBytes(DType);
  __m512 even = _mm512_setzero_ps(), odd = _mm512_setzero_ps();
  size_t p = 0;
  for (; p + 2 <= n; p += 2, row += 4 * kBytes) {
    if (ahead != nullptr) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead + 2 * p * kBytes), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(ahead + 2 * (p + 1) * kBytes), _MM_HINT_T1);
    }
    even = PairProduct<DType, kVnni>(row, prepared[p], even);
    odd = PairProduct<DType, kVnni>(row + 2 * kBytes, prepared[p + 1], odd);
  }
  if (p < n) even = PairProduct<DType, kVnni>(row, prepared[p], even);
  if (ahead != nullptr && n > 0) _mm_prefetch(reinterpret_cast<const char*>(ahead + 2 * n * kBytes - 1), _MM_HINT_T1);
  const __m512 acc = _mm512_add_ps(even, odd);
  return _mm_cvtss_f32(Sum4(acc, acc, acc, acc));
}

// Rows in pairs of groups against one input, four rows side by side (two
// accumulators a row, its even and odd pairs; one reduction for the four;
// the last rows % 4 by RowPairs, reduced the same way, so a row's value does
// not depend on where a slice of the rows starts).
template <int32_t DType, bool kVnni>
void Matvec4(const uint8_t* w, size_t row_bytes, const InputGroup* x, float* y, size_t rows, size_t cols) {
  constexpr size_t kBytes = GroupBytes(DType);
  ForPreparedPairs<DType, kVnni>(w, row_bytes, x, y, rows, cols, [&](const Pair* prepared, size_t p0, size_t p1) __attribute__((always_inline)) {
    const size_t n = p1 - p0;
    size_t r = 0;
    for (; r + 4 <= rows; r += 4) {
      const uint8_t* row = w + r * row_bytes + 2 * p0 * kBytes;
      __m512 e[4], o[4];  // each row's even and odd pairs
      for (int i = 0; i < 4; ++i) e[i] = o[i] = _mm512_setzero_ps();
      size_t p = 0;
      for (; p + 2 <= n; p += 2, row += 4 * kBytes) {
        for (int i = 0; i < 4; ++i) e[i] = PairProduct<DType, kVnni>(row + i * row_bytes, prepared[p], e[i]);
        for (int i = 0; i < 4; ++i) o[i] = PairProduct<DType, kVnni>(row + i * row_bytes + 2 * kBytes, prepared[p + 1], o[i]);
      }
      if (p < n) {
        for (int i = 0; i < 4; ++i) e[i] = PairProduct<DType, kVnni>(row + i * row_bytes, prepared[p], e[i]);
      }
      const __m128 sums = Sum4(_mm512_add_ps(e[0], o[0]), _mm512_add_ps(e[1], o[1]), _mm512_add_ps(e[2], o[2]), _mm512_add_ps(e[3], o[3]));
      _mm_storeu_ps(y + r, _mm_add_ps(_mm_loadu_ps(y + r), sums));
    }
    for (; r < rows; ++r) y[r] += RowPairs<DType, kVnni>(w + r * row_bytes + 2 * p0 * kBytes, prepared, n, nullptr);
  });
}

// q8_g32 rows against one int16 input.
// The products prefetch into L2 what they will read soon: rows of 1-6 KB
// are streams too short for the hardware prefetcher. q8_g32 (rows one
// after the other) prefetches each group's bytes kAheadRows rows on: from
// DRAM, one thread, 2,048 x 768 (tinyai-bench-kernels matvec_q_cold), 7.2 G
// weights/s without, 8.5 one row (816 B) ahead, 10.3 two, 11.5 four, 11.2
// eight; on the ~1B shape (2,176-byte rows; tinyai-bench decode tokens/s,
// 1 / 2 threads) four rows 11.1 / 19.0, one 10.7 / 18.5. Panels prefetch
// kPanelPrefetchBytes on: q4nl_g32 on the ~1B shape, the next panel
// (3-25 KB) 16.7 / 29.0, 2 KiB 18.4 / 32.4, 4 KiB 19.6 / 36.0, 8 KiB
// 15.9 / 29.0.
constexpr size_t kAheadRows = 4;
constexpr size_t kPanelPrefetchBytes = 4096;

// A q8_g32 group's codes widened to int16 once for every input it meets
// (the drivers' RowTile: one row a matvec, four inputs a row in a matmul,
// the same arithmetic and order per input, so a prompt's products equal one
// token's bit for bit; four inputs ran 1.5x one input four times over in
// cache, tinyai-bench-kernels matmul_q n:8, 33 against 23 G products/s).
template <int32_t DType>
struct WeightGroup {
  static_assert(DType == TINYAI_DTYPE_Q8_G32, "the 4-bit rows take pairs of groups (Matvec4)");
  __m512i codes;
  float d;
  explicit WeightGroup(const uint8_t* g)
      : codes(_mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 2)))),
        d(_cvtsh_ss(HalfBits(g))) {}
};

// q8_g32 rows against up to 16 int16 inputs in the lanes (a prompt pass),
// as matmul_avx512.h does for fp32: a block of inputs is transposed once
// per kQ8LaneGroups groups of columns (xt: per group and pair p of columns,
// lane t holds input t's codes 2p and 2p + 1 as one int32; dt: lane t input
// t's scale), and a tile of kQ8LaneRows rows keeps one float accumulator a
// row whose lane t is input t's sum. Per group each row's 32 codes are
// widened to int16 once and meet the 16 column pairs of xt in 16 vpmaddwd +
// vpaddd with the row's pair broadcast: the group's exact integer dot
// products for 16 inputs at once, then one float multiply-add by d_w * d_x.
// About 22 instructions per row and group for 16 inputs, where a RowTile of
// four takes about 6 per input (a scratch kernel on a Zen 4 core, with
// vpdpwssd: 76 against 36 G products/s in cache). With VNNI the same
// integers come from bytes instead (PackInputsBytes, Q8ByteLaneTile).
//
// Each output is the sum over the groups in order, in fp32, of the exact
// group products times d_w * d_x, block by block of columns (y = the first
// block's sum, y += each later one's): it depends on the row, the input and
// cols, not on where the row falls in a tile or a slice, nor on the other
// inputs of its block, so capped and uncapped runs agree bit for bit. It is
// not RowTile's order (lanes summed at the end): a prompt's q8 products on
// this table agree with a token's within fp32 rounding, as its fp32 and f16
// products do (kMinQ8LaneInputs).
constexpr size_t kQ8LaneGroups = 32;    // groups per block of columns: xt is 32 KiB
constexpr size_t kQ8LaneRows = 8;       // rows per tile
constexpr size_t kMinQ8LaneInputs = 12;  // fewer inputs go to the drivers' RowTile

inline void PackInputs16(const InputGroup16* x, size_t ldx, size_t nt, size_t g0, size_t ng, int32_t* xt, float* dt) {
  for (size_t g = 0; g < ng; ++g) {
    __m512 r[16];
    for (size_t t = 0; t < 16; ++t) {
      r[t] = t < nt ? _mm512_castsi512_ps(_mm512_loadu_si512(x[t * ldx + g0 + g].q)) : _mm512_setzero_ps();
      dt[g * 16 + t] = t < nt ? x[t * ldx + g0 + g].d : 0.0f;
    }
    Transpose16(r);  // r[p] lane t: input t's codes 2p, 2p + 1
    for (size_t p = 0; p < 16; ++p) _mm512_store_ps(reinterpret_cast<float*>(xt + (g * 16 + p) * 16), r[p]);
  }
}

// acc[i] lane t += (group g of row i . input t's group g) * d_w * d_x over
// the ng groups from w (row i at w + i * row_bytes), in order (the int16
// form: the tables without VNNI).
template <size_t... I>
inline void Q8LaneTile(const uint8_t* w, size_t row_bytes, const int32_t* xt, const float* dt, size_t ng, __m512* acc,
                       std::index_sequence<I...>) {
  constexpr size_t K = sizeof...(I);
  for (size_t g = 0; g < ng; ++g) {
    const uint8_t* grp = w + g * kQ8GroupBytes;
    alignas(64) int32_t wide[K][16];  // row i's codes as int16 pairs
    ((_mm512_store_si512(wide[I], _mm512_cvtepi8_epi16(_mm256_loadu_si256(
                                      reinterpret_cast<const __m256i*>(grp + I * row_bytes + 2))))),
     ...);
    __m512i s[K];
    ((s[I] = _mm512_setzero_si512()), ...);
#pragma GCC unroll 16
    for (size_t p = 0; p < 16; ++p) {
      const __m512i xv = _mm512_load_si512(xt + (g * 16 + p) * 16);
      ((s[I] = _mm512_add_epi32(s[I], _mm512_madd_epi16(xv, _mm512_set1_epi32(wide[I][p])))), ...);
    }
    const __m512 d = _mm512_load_ps(dt + g * 16);
    ((acc[I] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[I]),
                               _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(HalfBits(grp + I * row_bytes))), d), acc[I])),
     ...);
  }
}

// With VNNI, the same integers from bytes: each int16 input code is
// 256 * hi + lo (hi = q >> 8 signed, lo = q & 255 unsigned), so a group's
// dot product with the row's int8 codes w is 256 * (w . hi) + (w . lo), and
// both halves are vpdpbusd's: w . lo with lo the unsigned operand, w . hi as
// (w + 128) . hi - 128 * sum(hi) with w + 128 (w xor 0x80) the unsigned one
// and the sum per input and group computed once in the packing (xc). Per
// four columns one broadcast of the row's four codes straight from the
// weights meets two vectors of 16 inputs (xt: per group, p < 8 lane t holds
// input t's low bytes 4p..4p+3, p >= 8 its high bytes), where the int16 form
// widened each group to a stack copy and broadcast every pair from it. The
// integers are the int16 form's exactly, and so are the float steps after:
// the outputs do not change by a bit.
inline void PackInputsBytes(const InputGroup16* x, size_t ldx, size_t nt, size_t g0, size_t ng, int32_t* xt,
                            int32_t* xc, float* dt) {
  const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
  for (size_t g = 0; g < ng; ++g) {
    __m512 r[16];
    for (size_t t = 0; t < 16; ++t) {
      if (t < nt) {
        const __m512i v = _mm512_loadu_si512(x[t * ldx + g0 + g].q);
        const __m256i lo = _mm512_cvtepi16_epi8(v);
        const __m256i hi = _mm512_cvtepi16_epi8(_mm512_srai_epi16(v, 8));
        r[t] = _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
        dt[g * 16 + t] = x[t * ldx + g0 + g].d;
      } else {
        r[t] = _mm512_setzero_ps();
        dt[g * 16 + t] = 0.0f;
      }
    }
    Transpose16(r);
    __m512i sum = _mm512_setzero_si512();
    for (size_t p = 0; p < 16; ++p) {
      const __m512i v = _mm512_castps_si512(r[p]);
      _mm512_store_si512(xt + (g * 16 + p) * 16, v);
      if (p >= 8) sum = _mm512_dpbusd_epi32(sum, k128, v);  // 128 * the high bytes' sum
    }
    _mm512_store_si512(xc + g * 16, _mm512_sub_epi32(_mm512_setzero_si512(), sum));
  }
}

template <size_t... I>
inline void Q8ByteLaneTile(const uint8_t* w, size_t row_bytes, const int32_t* xt, const int32_t* xc, const float* dt,
                           size_t ng, __m512* acc, std::index_sequence<I...>) {
  constexpr size_t K = sizeof...(I);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (size_t g = 0; g < ng; ++g) {
    const uint8_t* grp = w + g * kQ8GroupBytes;
    __m512i lo[K], hi[K];
    const __m512i c = _mm512_load_si512(xc + g * 16);
    ((lo[I] = _mm512_setzero_si512()), ...);
    ((hi[I] = c), ...);
#pragma GCC unroll 8
    for (size_t p = 0; p < 8; ++p) {
      const __m512i xl = _mm512_load_si512(xt + (g * 16 + p) * 16);
      const __m512i xh = _mm512_load_si512(xt + (g * 16 + 8 + p) * 16);
      auto step = [&](size_t i, __m512i& l, __m512i& h) {
        int32_t q4;
        std::memcpy(&q4, grp + i * row_bytes + 2 + 4 * p, 4);
        const __m512i wb = _mm512_set1_epi32(q4);
        l = _mm512_dpbusd_epi32(l, xl, wb);
        h = _mm512_dpbusd_epi32(h, _mm512_xor_si512(wb, flip), xh);
      };
      (step(I, lo[I], hi[I]), ...);
    }
    const __m512 d = _mm512_load_ps(dt + g * 16);
    ((acc[I] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(hi[I], 8), lo[I])),
                               _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(HalfBits(grp + I * row_bytes))), d), acc[I])),
     ...);
  }
}

// y[j * ldy + r] for r < rows, j < n (kMinQ8LaneInputs <= n <= 16).
template <bool kVnni>
void Matmul8Lanes(const uint8_t* w, size_t row_bytes, const InputGroup16* x, size_t ldx, float* y, size_t ldy,
                  size_t rows, size_t cols, size_t n) {
  alignas(64) int32_t xt[kQ8LaneGroups * 16 * 16];
  alignas(64) float dt[kQ8LaneGroups * 16];
  const size_t groups = GroupsPerRow(cols);
  if (groups == 0) {
    for (size_t j = 0; j < n; ++j) std::memset(y + j * ldy, 0, rows * sizeof(float));
    return;
  }
  for (size_t g0 = 0; g0 < groups; g0 += kQ8LaneGroups) {
    const size_t ng = groups - g0 < kQ8LaneGroups ? groups - g0 : kQ8LaneGroups;
    alignas(64) int32_t xc[kVnni ? kQ8LaneGroups * 16 : 1];  // the bytes form's high sums
    if constexpr (kVnni) {
      PackInputsBytes(x, ldx, n, g0, ng, xt, xc, dt);
    } else {
      PackInputs16(x, ldx, n, g0, ng, xt, dt);
    }
    const uint8_t* block = w + g0 * kQ8GroupBytes;
    // The tile of the rows from r on (as many as the index sequence holds):
    // in bytes with VNNI, in int16 without.
    auto tile = [&](size_t r, auto tile_rows) {
      __m512 acc[16];
      for (__m512& a : acc) a = _mm512_setzero_ps();
      if constexpr (kVnni) {
        Q8ByteLaneTile(block + r * row_bytes, row_bytes, xt, xc, dt, ng, acc, tile_rows);
      } else {
        Q8LaneTile(block + r * row_bytes, row_bytes, xt, dt, ng, acc, tile_rows);
      }
      StoreTile(acc, y + r, ldy, tile_rows.size(), n, g0 != 0);
    };
    size_t r = 0;
    for (; r + kQ8LaneRows <= rows; r += kQ8LaneRows) tile(r, std::make_index_sequence<kQ8LaneRows>());
    for (; r < rows; ++r) tile(r, std::make_index_sequence<1>());  // the last rows one at a time, each as in a tile
  }
}

// Rows in pairs of groups against one input, one row after the other (each
// thread's rows one sequential stream), the bytes kAheadRows rows on
// prefetched into L2 as the row goes (RowPairs: Matvec4's order and
// arithmetic for a row), so a token's products equal a prompt's bit for bit. From DRAM Matvec4's four rows side by side ran at
// well under half of this (tinyai-bench-stream, ~1B, 2 threads: q4_g32 rows
// without VNNI 16-17 GB/s against 45, q5_g32 20-25 against 48-50); in cache
// they ran 1.15-1.2x this, so the prompts' row panels (Matvec4Rows) keep
// them.
template <int32_t DType, bool kVnni>
void MatvecPairs(const uint8_t* w, size_t row_bytes, const InputGroup* x, float* y, size_t rows, size_t cols) {
  constexpr size_t kBytes = GroupBytes(DType);
  ForPreparedPairs<DType, kVnni>(w, row_bytes, x, y, rows, cols, [&](const Pair* prepared, size_t p0, size_t p1) __attribute__((always_inline)) {
    for (size_t r = 0; r < rows; ++r) {
      const uint8_t* row = w + r * row_bytes + 2 * p0 * kBytes;
      const uint8_t* ahead = r + kAheadRows < rows ? row + kAheadRows * row_bytes : nullptr;
      y[r] += RowPairs<DType, kVnni>(row, prepared, p1 - p0, ahead);
    }
  });
}

template <int32_t DType, bool kVnni>
void MatvecPairRows(const uint8_t* w, size_t row_bytes, const void* x, float* y, size_t rows, size_t cols) {
  MatvecPairs<DType, kVnni>(w, row_bytes, static_cast<const InputGroup*>(x), y, rows, cols);
}

// The rows in pairs of groups of a prompt's row panels (the drivers'
// MatmulQ): four rows side by side (Matvec4: in cache 1.15-1.2x
// MatvecPairs, the same sums bit for bit).
template <int32_t DType, bool kVnni>
void Matvec4Rows(const uint8_t* w, size_t row_bytes, const void* x, float* y, size_t rows, size_t cols) {
  Matvec4<DType, kVnni>(w, row_bytes, static_cast<const InputGroup*>(x), y, rows, cols);
}

// A q8_g32 matmul's first inputs: kMinQ8LaneInputs or more of them in the
// lanes (Matmul8Lanes), 16 at a time; returns how many it took (the driver's
// rows take the rest).
template <bool kVnni>
size_t Matmul8LanesFirst(const uint8_t* w, size_t row_bytes, const InputGroup16* in, size_t ldx, float* y, size_t ldy,
                         size_t rows, size_t cols, size_t n) {
  size_t j = 0;
  while (n - j >= kMinQ8LaneInputs) {
    const size_t nt = n - j < kLaneInputs ? n - j : kLaneInputs;
    Matmul8Lanes<kVnni>(w, row_bytes, in + j * ldx, ldx, y + j * ldy, ldy, rows, cols, nt);
    j += nt;
  }
  return j;
}

// Panels of a 4-bit dtype (common/panels.h) against J inputs
// (grouped::PanelsTile drives it): y[j*ldy + r], with VNNI. Per group, the
// eight rows' code bytes 0..7 and 8..15 are one 64-byte load each, split
// into nibbles (and, for q4nl, grid values) once for all J inputs; each
// input's matching 8 values, broadcast to every row, meet them in four
// vpdpbusd: int32 lane 2r + k then holds row r's products of elements
// {8c + 4k .. 8c + 4k + 3} and their + 16 (c = 0, 1), the zero code's offset
// (8, or 128 for q4nl's shifted grid) in lane 2r. The eight rows' scales are
// one 16-byte load and one conversion a group. Groups alternate between two
// accumulators an input; the two lanes of a row are added at the end. An
// input's arithmetic and its order do not depend on J, so a batch's outputs
// are matvec_panels' bit for bit (tested).
template <int32_t DType, size_t J>
struct PanelTile {
  const __m512i mask = _mm512_set1_epi8(15);
  const __m512i spread = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  static constexpr int32_t kZeroCode = DType == TINYAI_DTYPE_Q4_G32 ? 8 : 128;
  __m512 even[J], odd[J];

  static __m512i Codes(__m512i nibbles) { return DType == TINYAI_DTYPE_Q4_G32 ? nibbles : Grid<true>(nibbles); }
  static __m512i Input(const int8_t* q) {
    int64_t v;
    std::memcpy(&v, q, sizeof v);
    return _mm512_set1_epi64(v);
  }
  void Begin() {
    for (size_t j = 0; j < J; ++j) even[j] = odd[j] = _mm512_setzero_ps();
  }
  void Group(const uint8_t* b, size_t g, const InputGroup* x, size_t ldx) {
    const __m512i c0 = _mm512_loadu_si512(b + kPanelScaleBytes);
    const __m512i c1 = _mm512_loadu_si512(b + kPanelScaleBytes + kPanelRows * kPanelHalfCodeBytes);
    const __m512i low0 = Codes(_mm512_and_si512(c0, mask)), high0 = Codes(_mm512_and_si512(_mm512_srli_epi16(c0, 4), mask));
    const __m512i low1 = Codes(_mm512_and_si512(c1, mask)), high1 = Codes(_mm512_and_si512(_mm512_srli_epi16(c1, 4), mask));
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
    for (size_t j = 0; j < J; ++j) {
      const InputGroup& xg = x[j * ldx + g];
      const int8_t* q = xg.q;
      __m512i s = _mm512_maskz_set1_epi32(0x5555, -kZeroCode * xg.sum);
      s = _mm512_dpbusd_epi32(s, low0, Input(q));
      s = _mm512_dpbusd_epi32(s, high0, Input(q + 16));
      s = _mm512_dpbusd_epi32(s, low1, Input(q + 8));
      s = _mm512_dpbusd_epi32(s, high1, Input(q + 24));
      const __m512 d = _mm512_permutexvar_ps(spread, _mm512_castps256_ps512(_mm256_mul_ps(dw, _mm256_set1_ps(xg.d))));
      if (g % 2 == 0) {
        even[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), d, even[j]);
      } else {
        odd[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), d, odd[j]);
      }
    }
  }
  void End(float* y, size_t ldy) const {
    const __m512i pick = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
    for (size_t j = 0; j < J; ++j) {
      const __m512 acc = _mm512_add_ps(even[j], odd[j]);
      const __m512 rows = _mm512_add_ps(acc, _mm512_permute_ps(acc, 0xB1));  // lane 2r: row r
      _mm256_storeu_ps(y + j * ldy, _mm512_castps512_ps256(_mm512_permutexvar_ps(pick, rows)));
    }
  }
};

// The micro-kernel of the grouped drivers (grouped_drivers.h), with and
// without VNNI: q8_g32's rows by the drivers' RowTile (one group a register,
// codes widened to int16) with rows prefetched kAheadRows on, its batches of
// 12 inputs or more in the lanes (Matmul8Lanes); the 4-bit, q5_g32 and
// q5m_g32 rows in pairs of groups, one row after the other (MatvecPairs),
// their batches four rows side by side row panel by row panel
// (Matvec4Rows in the drivers' MatmulQ); 4-bit panels with VNNI only (none written without it: such
// a host keeps rows in the row layout); the K-quants' MatvecK.
template <bool kVnni>
struct Micro : grouped::Defaults<Micro<kVnni>> {
  using Acc = __m512;
  static Acc Zero() { return _mm512_setzero_ps(); }
  static float Sum(Acc a, Acc b) { return _mm512_reduce_add_ps(_mm512_add_ps(a, b)); }
  // The GGUF block dtypes (grouped_blocks_x86.h, 256-bit): the drivers'
  // rows, each block's sum added to the accumulator's low half.
  template <int32_t DType>
  static constexpr bool HasDType() {
    return true;
  }
  template <int32_t DType>
  using WeightGroup = std::conditional_t<x86blocks::Handles(DType), x86blocks::BlockRef, avx512::WeightGroup<DType>>;
  template <int32_t DType>
  static Acc AddGroup(Acc acc, const WeightGroup<DType>& w, const InputGroupOf<DType>& x) {
    if constexpr (x86blocks::Handles(DType)) {
      return _mm512_add_ps(acc, _mm512_zextps256_ps512(x86blocks::Fma<DType>(w.p, x, _mm256_setzero_ps())));
    } else {
      const __m512i dot = DotS16<kVnni>(w.codes, _mm512_loadu_si512(x.q));
      return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(w.d * x.d), acc);
    }
  }
  static void Prefetch(const uint8_t* p) { __builtin_prefetch(p, 0, 1); }
  template <int32_t DType>
  static constexpr size_t AheadRows() {
    return DType == TINYAI_DTYPE_Q8_G32 ? kAheadRows : 0;
  }
  // q8: four inputs a row tile (then one at a time); the 4-bit rows one input at a time.
  template <int32_t DType>
  static constexpr unsigned RowTiles() {
    return DType == TINYAI_DTYPE_Q8_G32 ? 4u : 0u;
  }
  // Several inputs meet a panel of rows small enough to stay in L1/L2, so the
  // rows come from memory once for all inputs.
  static constexpr size_t kMatmulPanelBytes = 16u << 10;
  template <int32_t DType>
  static constexpr auto OwnMatvec() {
    if constexpr (IsSuperBlockDType(DType)) {
      return &x86blocks::MatvecK<DType>;
    } else if constexpr (DType == TINYAI_DTYPE_Q8_G32) {
      return nullptr;
    } else {
      return &MatvecPairRows<DType, kVnni>;
    }
  }
  template <int32_t DType>
  static constexpr auto OwnPanelMatvec() {
    if constexpr (IsSuperBlockDType(DType) || DType == TINYAI_DTYPE_Q8_G32) {
      return nullptr;
    } else {
      return &Matvec4Rows<DType, kVnni>;
    }
  }
  template <int32_t DType>
  static constexpr auto OwnMatmulFirst() {
    if constexpr (DType == TINYAI_DTYPE_Q8_G32) {
      return &Matmul8LanesFirst<kVnni>;
    } else {
      return nullptr;
    }
  }

  template <int32_t DType>
  static constexpr bool Panels() {
    return kVnni;
  }
  template <int32_t DType, size_t J>
  using PanelTile = avx512::PanelTile<DType, J>;
  static constexpr size_t kPanelPrefetchBytes = avx512::kPanelPrefetchBytes;
  static void PrefetchPanel(const uint8_t* next) {  // into L2 (see kAheadRows)
    __builtin_prefetch(next, 0, 1);
    __builtin_prefetch(next + 64, 0, 1);
    __builtin_prefetch(next + 128, 0, 1);
  }
  // Panels against n inputs, eight at a time: on a Zen 4 host 8 inputs a tile
  // multiplied 1.65x faster than matvec_panels input by input, 4 a tile about
  // 5% below 8 (tinyai-bench-kernels matmul_panels, docs/benchmarks.md).
  static constexpr size_t kPanelInputs = 8;

  // The input quantizer's step (grouped::QuantizeGroups): a group's codes
  // as two vectors of sixteen int32.
  static constexpr bool kQuantizer = true;
  struct Codes {
    __m512i q[2];
  };
  // One input group quantized as the reference does (the same max, the same
  // top / max, the product rounded to nearest even, so the conversion is
  // exact): 32 values, masked past n. Returns false for a group holding an
  // infinity or NaN (the reference's NaN scale and zero codes then).
  static bool QuantizeGroup(const float* src, size_t n, float top, Codes* out, float* d) {
    const __mmask16 m0 = n >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1);
    const __mmask16 m1 =
        n >= 32 ? __mmask16(0xffff) : n <= 16 ? __mmask16(0) : static_cast<__mmask16>((1u << (n - 16)) - 1);
    const __m512 v0 = _mm512_maskz_loadu_ps(m0, src), v1 = _mm512_maskz_loadu_ps(m1, src + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    if (!std::isfinite(amax) || _mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) != 0 ||
        _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q) != 0) {
      return false;
    }
    const __m512 inverse = _mm512_set1_ps(amax > 0.0f ? top / amax : 0.0f);
    constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    out->q[0] = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, inverse), kNearest);
    out->q[1] = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, inverse), kNearest);
    *d = amax / top;
    return true;
  }
  // A group's codes stored as int8 with their sum, or as int16.
  static void StoreCodes(const Codes& c, InputGroup* out) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out->q), _mm512_cvtepi32_epi8(c.q[0]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out->q + 16), _mm512_cvtepi32_epi8(c.q[1]));
    out->sum = _mm512_reduce_add_epi32(_mm512_add_epi32(c.q[0], c.q[1]));
  }
  static void StoreCodes(const Codes& c, InputGroup16* out) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->q), _mm512_cvtepi32_epi16(c.q[0]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->q + 16), _mm512_cvtepi32_epi16(c.q[1]));
  }

  // A q8_g32 group's 32 values widened to fp32 (grouped::DequantizeRowQ8):
  // the reference's d * code, bit for bit, 16 at a time.
  static constexpr bool kDequantizeQ8 = true;
  static void DequantizeGroupQ8(const uint8_t* group, float* out) {
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(HalfBits(group)));
    for (size_t k = 0; k < kGroup; k += 16) {
      const __m512i codes = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + 2 + k)));
      _mm512_storeu_ps(out + k, _mm512_mul_ps(d, _mm512_cvtepi32_ps(codes)));
    }
  }
};

template <bool kVnni>
using Grouped = grouped::Table<Micro<kVnni>>;

}  // namespace TINYAI_ISA_NAMESPACE
}  // namespace avx512
}  // namespace kernels
}  // namespace tinyai

#endif  // TINYAI_KERNELS_SIMD_GROUPED_AVX512_H_
