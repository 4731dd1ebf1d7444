// AVX2 products for the grouped integer dtypes (src/common/groups.h):
// include only from kernels_x86_avx2.cc (compiled with -mavx2 -mfma -mf16c).
//
// Per group of 32: the weights' codes as 32 bytes (q8: the int8 values;
// q4: the nibbles, 0..15; q4nl: the grid values, looked up with a byte
// shuffle), multiplied with the input's int8 codes by vpmaddubsw (unsigned
// times signed, pairs summed to int16; q8 and q4nl pass |w| and sign(w)*x,
// so no pair exceeds 2 * 127 * 127 < 32768) and vpmaddwd (pairs to int32),
// then one float multiply-add by d_w * d_x per group. q4 subtracts its
// codes' offset as 8 * the input group's sum. q8_g32 takes int16 inputs
// (src/common/groups.h): its codes widened to int16 and vpmaddwd.
#ifndef TINYAI_KERNELS_SIMD_GROUPED_AVX2_H_
#define TINYAI_KERNELS_SIMD_GROUPED_AVX2_H_

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

namespace tinyai {
namespace kernels {
namespace avx2 {
inline namespace TINYAI_ISA_NAMESPACE {

// The f16 word at p, as its bits.
inline uint16_t HalfBits(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return h;
}

inline float HalfAt(const uint8_t* p) { return _cvtsh_ss(HalfBits(p)); }

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// One weight group, decoded once for every input it meets.
template <int32_t DType>
struct WeightGroup {
  __m256i a, b;  // q8: the codes as int16 (0..15, 16..31); q4: nibbles; q4nl: |value| and value
  float d;

  explicit WeightGroup(const uint8_t* g) : d(HalfAt(g)) {
    if (DType == TINYAI_DTYPE_Q8_G32) {
      a = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 2)));
      b = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 18)));
    } else {
      const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 2));
      const __m128i low = _mm_and_si128(packed, _mm_set1_epi8(15));
      const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(15));
      const __m256i codes = _mm256_set_m128i(high, low);  // elements 0..15, then 16..31
      if (DType == TINYAI_DTYPE_Q4_G32) {
        a = codes;
      } else {
        const __m128i grid = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kQ4NLGrid));
        b = _mm256_shuffle_epi8(_mm256_set_m128i(grid, grid), codes);
        a = _mm256_abs_epi8(b);
      }
    }
  }

  // The 8 int32 partial sums of the codes' products with x.q (q4: of the
  // nibbles, before their offset).
  __m256i Products(const InputGroupOf<DType>& x) const {
    const __m256i* q = reinterpret_cast<const __m256i*>(x.q);
    if (DType == TINYAI_DTYPE_Q8_G32) {
      return _mm256_add_epi32(_mm256_madd_epi16(a, _mm256_loadu_si256(q)), _mm256_madd_epi16(b, _mm256_loadu_si256(q + 1)));
    }
    const __m256i xq = _mm256_loadu_si256(q);
    const __m256i ones = _mm256_set1_epi16(1);
    if (DType == TINYAI_DTYPE_Q4_G32) return _mm256_madd_epi16(_mm256_maddubs_epi16(a, xq), ones);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(xq, b)), ones);
  }

  // The 8 int32 partial sums of the group's integer dot product with x.
  __m256i Dot(const InputGroupOf<DType>& x) const {
    if (DType == TINYAI_DTYPE_Q4_G32) {
      return _mm256_add_epi32(Products(x), _mm256_castsi128_si256(_mm_cvtsi32_si128(-8 * Sum(x))));
    }
    return Products(x);
  }

 private:
  static int32_t Sum(const InputGroup& x) { return x.sum; }
  static int32_t Sum(const InputGroup16&) { return 0; }
};

// R rows against J inputs: y[j*ldy + r] for the tile.
template <int32_t DType, int R, int J>
inline void Tile(const uint8_t* w, size_t row_bytes, const InputGroupOf<DType>* x, size_t ldx, float* y, size_t ldy,
                 size_t groups) {
  constexpr size_t kBytes = DType == TINYAI_DTYPE_Q8_G32 ? kQ8GroupBytes : kQ4GroupBytes;
  __m256 acc[R][J];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) acc[r][j] = _mm256_setzero_ps();
  for (size_t g = 0; g < groups; ++g) {
    for (int r = 0; r < R; ++r) {
      const WeightGroup<DType> wg(w + r * row_bytes + g * kBytes);
      for (int j = 0; j < J; ++j) {
        const InputGroupOf<DType>& xg = x[j * ldx + g];
        acc[r][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(wg.Dot(xg)), _mm256_set1_ps(wg.d * xg.d), acc[r][j]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) y[j * ldy + r] = HorizontalSum(acc[r][j]);
}

// The f16 words at b and the 7 groups after it.
template <int32_t DType>
inline __m128i GatherHalves(const uint8_t* b) {
  constexpr size_t kBytes = GroupBytes(DType);
  __m128i h = _mm_cvtsi32_si128(HalfBits(b));
  h = _mm_insert_epi16(h, HalfBits(b + kBytes), 1);
  h = _mm_insert_epi16(h, HalfBits(b + 2 * kBytes), 2);
  h = _mm_insert_epi16(h, HalfBits(b + 3 * kBytes), 3);
  h = _mm_insert_epi16(h, HalfBits(b + 4 * kBytes), 4);
  h = _mm_insert_epi16(h, HalfBits(b + 5 * kBytes), 5);
  h = _mm_insert_epi16(h, HalfBits(b + 6 * kBytes), 6);
  return _mm_insert_epi16(h, HalfBits(b + 7 * kBytes), 7);
}

// q8_g32, one row after the other as the driver's MatvecQ, eight groups at a time: the
// eight groups' int32 lanes are summed across with six vphaddd and one
// cross-lane add (one vector of the eight groups' dot products), converted
// and scaled by d_w * d_x with one multiply-add, the eight weight scales
// gathered with vpinsrw and converted together, the input's from a copy
// made once per call. About 9 instructions a group against 13 (GCC 12);
// the rows' bytes a few rows ahead are prefetched into L2 (the AVX-512 q8
// kernel's kAheadRows). The groups past a multiple of eight take the
// driver's path (RowTile's arithmetic, one chain).
inline void MatvecQ8(const uint8_t* w, size_t row_bytes, const void* input, float* y, size_t rows, size_t cols) {
  constexpr int32_t kQ8 = TINYAI_DTYPE_Q8_G32;
  constexpr size_t kChunk = 256, kAhead = 4;  // groups whose input scales sit on the stack; rows prefetched ahead
  const InputGroup16* x = static_cast<const InputGroup16*>(input);
  const size_t groups = GroupsPerRow(cols);
  alignas(32) float dx[kChunk];
  for (size_t r = 0; r < rows; ++r) y[r] = 0.0f;
  for (size_t g0 = 0; g0 < groups; g0 += kChunk) {
    const size_t count = groups - g0 < kChunk ? groups - g0 : kChunk, full = count / 8 * 8;
    for (size_t g = 0; g < count; ++g) dx[g] = x[g0 + g].d;
    const InputGroup16* xc = x + g0;
    for (size_t r = 0; r < rows; ++r) {
      const uint8_t* row = w + r * row_bytes + g0 * kQ8GroupBytes;
      const uint8_t* ahead = r + kAhead < rows ? row + kAhead * row_bytes : nullptr;
      __m256 acc = _mm256_setzero_ps();
      for (size_t g = 0; g < full; g += 8) {
        const uint8_t* b = row + g * kQ8GroupBytes;
        if (ahead != nullptr) {
          for (size_t line = 0; line < 8 * kQ8GroupBytes; line += 64) {
            _mm_prefetch(reinterpret_cast<const char*>(ahead + g * kQ8GroupBytes + line), _MM_HINT_T1);
          }
        }
        __m256i s[8];
        for (int k = 0; k < 8; ++k) s[k] = WeightGroup<kQ8>(b + k * kQ8GroupBytes).Dot(xc[g + k]);
        const __m256i p = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
        const __m256i q = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
        const __m256i dots = _mm256_add_epi32(_mm256_permute2x128_si256(p, q, 0x20), _mm256_permute2x128_si256(p, q, 0x31));
        const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(GatherHalves<kQ8>(b)), _mm256_load_ps(dx + g));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots), d, acc);
      }
      __m256 rest = _mm256_setzero_ps();
      for (size_t g = full; g < count; ++g) {
        const WeightGroup<kQ8> wg(row + g * kQ8GroupBytes);
        rest = _mm256_fmadd_ps(_mm256_cvtepi32_ps(wg.Dot(xc[g])), _mm256_set1_ps(wg.d * xc[g].d), rest);
      }
      y[r] += HorizontalSum(_mm256_add_ps(acc, rest));
    }
  }
}

// q5_g32 and q5m_g32, one row after the other, eight groups at a time as
// MatvecQ8: the eight groups' codes (x86blocks::CodesQ5) against the int8
// input by vpmaddubsw and vpmaddwd, their int32 lanes summed across
// (x86blocks::Reduce8) to one vector of eight dot products, q5_g32's -16 *
// sum_x added as integers from a copy of the input's made once per call,
// then one conversion and one multiply-add by d_w * d_x, the eight weight
// scales gathered with vpinsrw; q5m_g32 adds its m_w * (d_x * sum_x) with
// one more. The rows' bytes kAhead rows on are prefetched into L2. The
// groups past a multiple of eight take x86blocks::FmaQ5 (the drivers'
// arithmetic).
template <int32_t DType>
inline void MatvecQ5(const uint8_t* w, size_t row_bytes, const void* input, float* y, size_t rows, size_t cols) {
  constexpr bool kMin = DType == TINYAI_DTYPE_Q5M_G32;
  constexpr size_t kBytes = GroupBytes(DType), kChunk = 256, kAhead = 4;
  const InputGroup* x = static_cast<const InputGroup*>(input);
  const size_t groups = GroupsPerRow(cols);
  alignas(32) float dx[kChunk];
  alignas(32) int32_t offset[kChunk];  // q5_g32: -16 * sum_x
  alignas(32) float dsum[kChunk];      // q5m_g32: d_x * sum_x
  for (size_t r = 0; r < rows; ++r) y[r] = 0.0f;
  for (size_t g0 = 0; g0 < groups; g0 += kChunk) {
    const size_t count = groups - g0 < kChunk ? groups - g0 : kChunk, full = count / 8 * 8;
    const InputGroup* xc = x + g0;
    for (size_t g = 0; g < count; ++g) {
      dx[g] = xc[g].d;
      offset[g] = -16 * xc[g].sum;
      dsum[g] = xc[g].d * static_cast<float>(xc[g].sum);
    }
    for (size_t r = 0; r < rows; ++r) {
      const uint8_t* row = w + r * row_bytes + g0 * kBytes;
      const uint8_t* ahead = r + kAhead < rows ? row + kAhead * row_bytes : nullptr;
      __m256 acc = _mm256_setzero_ps();
      for (size_t g = 0; g < full; g += 8) {
        const uint8_t* b = row + g * kBytes;
        if (ahead != nullptr) {
          for (size_t line = 0; line < 8 * kBytes; line += 64) {
            _mm_prefetch(reinterpret_cast<const char*>(ahead + g * kBytes + line), _MM_HINT_T1);
          }
        }
        __m256i s[8];
        for (int k = 0; k < 8; ++k) s[k] = x86blocks::Dot32(x86blocks::CodesQ5<DType>(b + k * kBytes), xc[g + k].q);
        __m256i dots = x86blocks::Reduce8(s);
        if (!kMin) dots = _mm256_add_epi32(dots, _mm256_load_si256(reinterpret_cast<const __m256i*>(offset + g)));
        const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(GatherHalves<DType>(b)), _mm256_load_ps(dx + g));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots), d, acc);
        if (kMin) acc = _mm256_fmadd_ps(_mm256_cvtph_ps(GatherHalves<DType>(b + 2)), _mm256_load_ps(dsum + g), acc);
      }
      __m256 rest = _mm256_setzero_ps();
      for (size_t g = full; g < count; ++g) rest = x86blocks::FmaQ5<DType>(row + g * kBytes, xc[g], rest);
      y[r] += HorizontalSum(_mm256_add_ps(acc, rest));
    }
  }
}

// Several inputs against rows, two rows by four inputs a tile (PairTile).
// Per group and row the codes are decoded once (WeightGroup); each of the
// tile's 8 (row, input) pairs gives 8 int32 partial sums, and instead of
// converting and scaling each pair's group on its own (four float
// instructions a pair and group, as Tile does), three levels of vphaddd and
// a cross-lane add leave the 8 pairs' group sums in one vector, lanes
// [row 0: inputs 0..3 | row 1: inputs 0..3]: one conversion, one multiply
// of the rows' scales by the inputs', one multiply-add a group for all 8.
// The inputs' scales (and q4's offsets, 8 * the group's sum) are laid out
// group by group for kTileInputs inputs once per call and kTileGroups groups
// (a chunk after the first adds to y), where the tiles load four at once.
constexpr size_t kTileGroups = 64, kTileInputs = 32;

template <int32_t DType>
struct InputTable {
  static constexpr bool kOffsets = DType == TINYAI_DTYPE_Q4_G32;
  alignas(32) float d[kTileGroups * kTileInputs];                             // [group][input]
  alignas(32) int32_t offset[kOffsets ? kTileGroups * kTileInputs : 1];  // [group][input]

  void Fill(const InputGroupOf<DType>* x, size_t ldx, size_t g0, size_t count, size_t inputs) {
    for (size_t j = 0; j < inputs; ++j) {
      for (size_t g = 0; g < count; ++g) {
        d[g * kTileInputs + j] = x[j * ldx + g0 + g].d;
        if constexpr (kOffsets) offset[g * kTileInputs + j] = 8 * x[j * ldx + g0 + g].sum;
      }
    }
  }
};

// Rows w and w + row_bytes against inputs j..j+3 of the table's (x at input
// 0 of it), groups [g0, g0 + count): y[k*ldy + i] for input k, row i.
template <int32_t DType, bool Add>
inline void PairTile(const uint8_t* w, size_t row_bytes, const InputGroupOf<DType>* x, size_t ldx,
                     const InputTable<DType>& t, size_t j, size_t g0, size_t count, float* y, size_t ldy) {
  constexpr size_t kBytes = DType == TINYAI_DTYPE_Q8_G32 ? kQ8GroupBytes : kQ4GroupBytes;
  const __m256i spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  const uint8_t* w0 = w + g0 * kBytes;
  const uint8_t* w1 = w0 + row_bytes;
  const InputGroupOf<DType>* xg = x + j * ldx + g0;
  __m256 acc = _mm256_setzero_ps();
  for (size_t g = 0; g < count; ++g) {
    const WeightGroup<DType> a(w0 + g * kBytes), b(w1 + g * kBytes);
    const InputGroupOf<DType>&x0 = xg[g], &x1 = xg[ldx + g], &x2 = xg[2 * ldx + g], &x3 = xg[3 * ldx + g];
    const __m256i a01 = _mm256_hadd_epi32(a.Products(x0), a.Products(x1));
    const __m256i b01 = _mm256_hadd_epi32(b.Products(x0), b.Products(x1));
    const __m256i a23 = _mm256_hadd_epi32(a.Products(x2), a.Products(x3));
    const __m256i b23 = _mm256_hadd_epi32(b.Products(x2), b.Products(x3));
    const __m256i ha = _mm256_hadd_epi32(a01, a23), hb = _mm256_hadd_epi32(b01, b23);  // per 128-bit half
    __m256i s = _mm256_add_epi32(_mm256_permute2x128_si256(ha, hb, 0x20), _mm256_permute2x128_si256(ha, hb, 0x31));
    const size_t at = g * kTileInputs + j;
    if constexpr (InputTable<DType>::kOffsets) {
      s = _mm256_sub_epi32(s, _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(t.offset + at))));
    }
    uint16_t h0, h1;
    std::memcpy(&h0, w0 + g * kBytes, sizeof h0);
    std::memcpy(&h1, w1 + g * kBytes, sizeof h1);
    const __m128 dw = _mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(h0), h1, 1));
    const __m256 d = _mm256_mul_ps(_mm256_permutevar8x32_ps(_mm256_castps128_ps256(dw), spread),
                                   _mm256_broadcast_ps(reinterpret_cast<const __m128*>(t.d + at)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc);
  }
  alignas(32) float out[8];
  _mm256_store_ps(out, acc);
  for (size_t k = 0; k < 4; ++k) {
    y[k * ldy] = (Add ? y[k * ldy] : 0.0f) + out[k];
    y[k * ldy + 1] = (Add ? y[k * ldy + 1] : 0.0f) + out[4 + k];
  }
}

template <int32_t DType>
void MatmulQ(const uint8_t* w, size_t row_bytes, const void* input, size_t ldx, float* y, size_t ldy, size_t rows,
             size_t cols, size_t n) {
  const InputGroupOf<DType>* x = static_cast<const InputGroupOf<DType>*>(input);
  const size_t groups = GroupsPerRow(cols), pairs = rows / 2 * 2, quads = n / 4 * 4;
  InputTable<DType> table;
  for (size_t j0 = 0; j0 < quads; j0 += kTileInputs) {
    const size_t inputs = quads - j0 < kTileInputs ? quads - j0 : kTileInputs;
    const InputGroupOf<DType>* xb = x + j0 * ldx;
    for (size_t g0 = 0; g0 < groups; g0 += kTileGroups) {
      const size_t count = groups - g0 < kTileGroups ? groups - g0 : kTileGroups;
      table.Fill(xb, ldx, g0, count, inputs);
      for (size_t r = 0; r < pairs; r += 2) {
        for (size_t j = 0; j < inputs; j += 4) {
          float* out = y + (j0 + j) * ldy + r;
          if (g0 == 0) {
            PairTile<DType, false>(w + r * row_bytes, row_bytes, xb, ldx, table, j, g0, count, out, ldy);
          } else {
            PairTile<DType, true>(w + r * row_bytes, row_bytes, xb, ldx, table, j, g0, count, out, ldy);
          }
        }
      }
    }
  }
  // The inputs past a multiple of four, and an odd last row.
  for (size_t r = 0; r < pairs; r += 2)
    for (size_t j = quads; j < n; ++j)
      Tile<DType, 2, 1>(w + r * row_bytes, row_bytes, x + j * ldx, ldx, y + j * ldy + r, ldy, groups);
  if (pairs < rows) {
    size_t j = 0;
    for (; j < quads; j += 4) Tile<DType, 1, 4>(w + pairs * row_bytes, row_bytes, x + j * ldx, ldx, y + j * ldy + pairs, ldy, groups);
    for (; j < n; ++j) Tile<DType, 1, 1>(w + pairs * row_bytes, row_bytes, x + j * ldx, ldx, y + j * ldy + pairs, ldy, groups);
  }
}

// Panels of a 4-bit dtype (common/panels.h) against J inputs
// (grouped::PanelsTile drives it): y[j*ldy + r]. Per group, the eight rows'
// code bytes 0..7 and 8..15 are two 32-byte loads each (rows 0..3, rows
// 4..7), split into nibbles once for all J inputs; each input's matching 8
// values, broadcast to every row, meet them in vpmaddubsw. q4's products of
// one row's 32 codes fit int16 (4 x 2 x 15 x 127), so its four are added
// before one vpmaddwd; q4nl's grid values take the sign trick (|v| and
// sign(v) * x), whose products need int32 each. One vphaddd leaves the eight
// rows' sums in the order 0, 1, 4, 5, 2, 3, 6, 7; the scales (one 16-byte
// load, one conversion) are put in the same order, and the rows back in
// theirs at the end. About 60 instructions for the eight rows' group of q4
// and one input (7.5 a row) against 22 a row and group for the rows' matvec
// (GCC 12); a further input adds about 28 by count of the source (the
// decoding of the nibbles and scales is shared).
template <int32_t DType, size_t J>
struct PanelTile {
  const __m256i mask = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
  const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  const __m256i grid = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kQ4NLGrid)));
  __m256 acc[J];

  static __m256i Input(const int8_t* q) {
    int64_t v;
    std::memcpy(&v, q, sizeof v);
    return _mm256_set1_epi64x(v);
  }
  // Four rows' 8 code bytes: q4: the nibbles (low, high); q4nl: their grid
  // values' magnitudes (low, high) and the values themselves (sign_low,
  // sign_high).
  struct Codes {
    __m256i low, high, sign_low, sign_high;
  };
  Codes Decode(const uint8_t* c) const {
    const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c));
    Codes k{_mm256_and_si256(packed, mask), _mm256_and_si256(_mm256_srli_epi16(packed, 4), mask), {}, {}};
    if (DType != TINYAI_DTYPE_Q4_G32) {
      k.sign_low = _mm256_shuffle_epi8(grid, k.low);
      k.sign_high = _mm256_shuffle_epi8(grid, k.high);
      k.low = _mm256_abs_epi8(k.sign_low);
      k.high = _mm256_abs_epi8(k.sign_high);
    }
    return k;
  }
  // Their products with the inputs lo and hi, as int16 pairs (q4) or int32 (q4nl).
  __m256i Products(const Codes& k, __m256i lo, __m256i hi) const {
    if (DType == TINYAI_DTYPE_Q4_G32) {
      return _mm256_add_epi16(_mm256_maddubs_epi16(k.low, lo), _mm256_maddubs_epi16(k.high, hi));
    }
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(k.low, _mm256_sign_epi8(lo, k.sign_low)), ones),
                            _mm256_madd_epi16(_mm256_maddubs_epi16(k.high, _mm256_sign_epi8(hi, k.sign_high)), ones));
  }
  __m256i Widen(__m256i v) const { return DType == TINYAI_DTYPE_Q4_G32 ? _mm256_madd_epi16(v, ones) : v; }
  static __m256i Add(__m256i a, __m256i b) {
    return DType == TINYAI_DTYPE_Q4_G32 ? _mm256_add_epi16(a, b) : _mm256_add_epi32(a, b);
  }

  void Begin() {
    for (size_t j = 0; j < J; ++j) acc[j] = _mm256_setzero_ps();
  }
  void Group(const uint8_t* b, size_t g, const InputGroup* x, size_t ldx) {
    constexpr size_t kCodes = kPanelScaleBytes, kHigh = kPanelScaleBytes + kPanelRows * kPanelHalfCodeBytes;
    constexpr size_t kFour = 4 * kPanelHalfCodeBytes;  // rows 4..7's bytes after rows 0..3's
    const Codes c03 = Decode(b + kCodes), h03 = Decode(b + kHigh);
    const Codes c47 = Decode(b + kCodes + kFour), h47 = Decode(b + kHigh + kFour);
    const __m256 dw = _mm256_permutevar8x32_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b))), order);
    for (size_t j = 0; j < J; ++j) {
      const InputGroup& xg = x[j * ldx + g];
      const __m256i x0 = Input(xg.q), x8 = Input(xg.q + 8), x16 = Input(xg.q + 16), x24 = Input(xg.q + 24);
      const __m256i rows03 = Widen(Add(Products(c03, x0, x16), Products(h03, x8, x24)));
      const __m256i rows47 = Widen(Add(Products(c47, x0, x16), Products(h47, x8, x24)));
      __m256i s = _mm256_hadd_epi32(rows03, rows47);  // rows 0, 1, 4, 5, 2, 3, 6, 7
      if (DType == TINYAI_DTYPE_Q4_G32) s = _mm256_sub_epi32(s, _mm256_set1_epi32(8 * xg.sum));
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(xg.d)), acc[j]);
    }
  }
  void End(float* y, size_t ldy) const {
    for (size_t j = 0; j < J; ++j) _mm256_storeu_ps(y + j * ldy, _mm256_permutevar8x32_ps(acc[j], order));
  }
};

// The micro-kernel of the grouped drivers (grouped_drivers.h): their
// quantizer, q8 widening, row matvec (the 4-bit dtypes) and panels, with
// this file's own q8 matvec (MatvecQ8) and matmul (MatmulQ: pairs of rows
// against four inputs).
struct Micro : grouped::Defaults<Micro> {
  using Acc = __m256;
  static Acc Zero() { return _mm256_setzero_ps(); }
  static float Sum(Acc a, Acc b) { return HorizontalSum(_mm256_add_ps(a, b)); }
  // The GGUF block dtypes (grouped_blocks_x86.h): the drivers' rows.
  template <int32_t DType>
  static constexpr bool HasDType() {
    return true;
  }
  template <int32_t DType>
  using WeightGroup = std::conditional_t<x86blocks::Handles(DType), x86blocks::BlockRef, avx2::WeightGroup<DType>>;
  template <int32_t DType>
  static Acc AddGroup(Acc acc, const WeightGroup<DType>& w, const InputGroupOf<DType>& x) {
    if constexpr (x86blocks::Handles(DType)) {
      return x86blocks::Fma<DType>(w.p, x, acc);
    } else {
      return _mm256_fmadd_ps(_mm256_cvtepi32_ps(w.Dot(x)), _mm256_set1_ps(w.d * x.d), acc);
    }
  }
  template <int32_t DType>
  static constexpr auto OwnMatvec() {
    if constexpr (DType == TINYAI_DTYPE_Q8_G32) {
      return &MatvecQ8;
    } else if constexpr (IsSuperBlockDType(DType)) {
      return &x86blocks::MatvecK<DType>;
    } else if constexpr (DType == TINYAI_DTYPE_Q5_G32 || DType == TINYAI_DTYPE_Q5M_G32) {
      return &MatvecQ5<DType>;
    } else {
      return nullptr;
    }
  }
  template <int32_t DType>
  static constexpr auto OwnMatmul() {
    if constexpr (x86blocks::Handles(DType)) {
      return nullptr;
    } else {
      return &MatmulQ<DType>;
    }
  }

  template <int32_t DType>
  static constexpr bool Panels() {
    return true;
  }
  template <int32_t DType, size_t J>
  using PanelTile = avx2::PanelTile<DType, J>;
  // How far on the panels prefetch into L2: the AVX-512 panels' distance (1
  // to 8 KiB measured alike on a Zen 3 host, docs/benchmarks.md).
  static constexpr size_t kPanelPrefetchBytes = 4096;
  static void PrefetchPanel(const uint8_t* next) {
    _mm_prefetch(reinterpret_cast<const char*>(next), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(next + 64), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(next + 128), _MM_HINT_T1);
  }
  // Inputs a panel meets at once: on a Zen 3 host 4 and 8 ran alike within
  // its noise, 2 slower (tinyai-bench-kernels matmul_panels,
  // docs/benchmarks.md).
  static constexpr size_t kPanelInputs = 8;

  // The input quantizer's step (grouped::QuantizeGroups): a group's codes
  // as four vectors of eight int32.
  static constexpr bool kQuantizer = true;
  struct Codes {
    __m256i q[4];
  };
  // The reference's codes exactly: the same max, the same top / max, the
  // same product rounded to nearest even (vroundps), so the conversion is
  // exact. n values (zero-padded past them). Returns false (leaving out
  // alone) for a group holding an infinity or NaN.
  static bool QuantizeGroup(const float* src, size_t n, float top, Codes* out, float* d) {
    alignas(32) float padded[kGroup];
    if (n < kGroup) {
      std::memset(padded, 0, kGroup * sizeof(float));
      std::memcpy(padded, src, n * sizeof(float));
      src = padded;
    }
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    __m256 v[4], m = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(src + 8 * i);
      m = _mm256_max_ps(m, _mm256_andnot_ps(sign_bit, v[i]));
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h);
    bool finite = std::isfinite(amax);
    for (int i = 0; i < 4 && finite; ++i) finite = _mm256_movemask_ps(_mm256_cmp_ps(v[i], v[i], _CMP_UNORD_Q)) == 0;
    if (!finite) return false;
    const __m256 inverse = _mm256_set1_ps(amax > 0.0f ? top / amax : 0.0f);
    for (int i = 0; i < 4; ++i) {
      out->q[i] =
          _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], inverse), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    *d = amax / top;
    return true;
  }
  // A group's codes stored as int8 with their sum, or as int16.
  static void StoreCodes(const Codes& c, InputGroup* out) {
    const __m256i* q = c.q;
    const __m256i total = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    // Pack 32-bit to 8-bit; the packs work per 128-bit lane, the permute
    // puts the elements back in order.
    const __m256i p16a = _mm256_packs_epi32(q[0], q[1]), p16b = _mm256_packs_epi32(q[2], q[3]);
    const __m256i p8 =
        _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->q), p8);
    out->sum = _mm_cvtsi128_si32(s);
  }
  static void StoreCodes(const Codes& c, InputGroup16* out) {
    // packs interleaves the two inputs per 128-bit lane; 0xd8 restores the order.
    const __m256i* q = c.q;
    __m256i* dst = reinterpret_cast<__m256i*>(out->q);
    _mm256_storeu_si256(dst, _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xd8));
    _mm256_storeu_si256(dst + 1, _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2], q[3]), 0xd8));
  }

  // A q8_g32 group's 32 values widened to fp32 (grouped::DequantizeRowQ8):
  // the reference's d * code, bit for bit, eight at a time.
  static constexpr bool kDequantizeQ8 = true;
  static void DequantizeGroupQ8(const uint8_t* group, float* out) {
    const __m256 d = _mm256_set1_ps(HalfAt(group));
    for (size_t k = 0; k < kGroup; k += 8) {
      const __m256i codes = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(group + 2 + k)));
      _mm256_storeu_ps(out + k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(codes)));
    }
  }
};

using Grouped = grouped::Table<Micro>;

}  // namespace TINYAI_ISA_NAMESPACE
}  // namespace avx2
}  // namespace kernels
}  // namespace tinyai

#endif  // TINYAI_KERNELS_SIMD_GROUPED_AVX2_H_
