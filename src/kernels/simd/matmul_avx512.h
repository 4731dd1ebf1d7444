// fp32 and f16 matrix products on AVX-512 with the inputs in the lanes:
// include only from kernels_x86_avx512.cc.
//
// The xsimd Tile (kernels_simd.h) computes each output as a dot product
// along the row, 3 rows x 4 inputs at a time, and reduces its 12
// accumulators across the lanes at the end. Here a block of up to 16
// inputs is transposed once per call (xt[k][t] = input t's column k, on the
// stack, kLaneCols columns at a time), and a tile of 16 rows keeps one
// accumulator per row whose lane t is input t's sum: per column k, one load
// of xt[k] and 16 multiply-adds with one weight of each row broadcast from
// memory (vfmadd231ps zmm, zmm, m32{1to16}). No reduction across lanes: the
// 16 accumulators are transposed (16 x 16) and added to y once per block of
// columns. Rows whose stride puts a tile's 16 lines in a few L1 sets go 8
// to a tile (RowsCrowdL1).
//
// Each output is the fp32 sum over the columns in order, chunk by chunk
// (kLaneCols columns of floats, kCopyCols of halves: MatmulLanesHalves):
// for every k of a chunk acc = fma(w[k], x[k], acc) from zero, then y = the
// first chunk's acc, y += each later chunk's. That depends only on the row,
// the input and cols, never on where the row falls in a tile or a call, or
// on the other inputs: slices of any size give the same bits (the weight
// stream's capped and uncapped runs agree), and so do batches of any size
// this kernel takes (the table gives it 12 inputs or more:
// kernels_x86_avx512.cc; fewer go to the xsimd tiles, which sum in another
// order).
#ifndef TINYAI_KERNELS_SIMD_MATMUL_AVX512_H_
#define TINYAI_KERNELS_SIMD_MATMUL_AVX512_H_

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/simd/isa.h"

namespace tinyai {
namespace kernels {
namespace avx512 {
inline namespace TINYAI_ISA_NAMESPACE {

constexpr size_t kLaneInputs = 16;  // inputs per block, one per lane
constexpr size_t kLaneRows = 16;    // rows per tile
constexpr size_t kCrowdedRows = 8;  // rows per tile when 16 rows crowd the L1 (RowsCrowdL1)
constexpr size_t kLaneCols = 1024;  // columns per block: xt is 64 KiB
constexpr size_t kCopyCols = 256;   // columns per copied piece of rows: 16 KiB

// r[i] = row i of a 16 x 16 block of floats; on return r[j] holds column j.
inline void Transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  // In each 128-bit lane, 4 x 4 blocks transposed: u[4g + c] lane L holds
  // column 4L + c of rows 4g..4g+3.
  __m512 u[16];
  for (int g = 0; g < 4; ++g) {
    u[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // Then the 4 x 4 grid of 128-bit lanes: column 4L + c gathers lane L of
  // u[c], u[4 + c], u[8 + c], u[12 + c].
  for (int c = 0; c < 4; ++c) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(3, 2, 3, 2));
    r[c] = _mm512_shuffle_f32x4(v0, v2, _MM_SHUFFLE(2, 0, 2, 0));
    r[4 + c] = _mm512_shuffle_f32x4(v0, v2, _MM_SHUFFLE(3, 1, 3, 1));
    r[8 + c] = _mm512_shuffle_f32x4(v1, v3, _MM_SHUFFLE(2, 0, 2, 0));
    r[12 + c] = _mm512_shuffle_f32x4(v1, v3, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

inline __mmask16 FirstLanes(size_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << count) - 1u);
}

// xt[k * 16 + t] = x[t * ldx + k] for k < kc, t < nt (nt <= 16); lanes
// t >= nt zero.
inline void PackInputs(const float* x, size_t ldx, size_t nt, size_t kc, float* xt) {
  for (size_t k0 = 0; k0 < kc; k0 += 16) {
    const size_t kk = kc - k0 < 16 ? kc - k0 : 16;
    const __mmask16 m = FirstLanes(kk);
    __m512 r[16];
    for (size_t t = 0; t < 16; ++t) r[t] = t < nt ? _mm512_maskz_loadu_ps(m, x + t * ldx + k0) : _mm512_setzero_ps();
    Transpose16(r);
    for (size_t k = 0; k < kk; ++k) _mm512_store_ps(xt + (k0 + k) * 16, r[k]);
  }
}

// acc[i] lane t += w[i * ldw + k] * xt[k * 16 + t] for k < kc, in order.
// With next (the following tile's rows, same stride), one 64-byte line of
// each of its rows is prefetched into L2 per 16 columns. (GCC keeps about
// half of the 16 row pointers on the stack; copying the rows to a buffer of
// constant stride, which frees them, measured slower: 93 against 121 GFLOP/s
// in cache, 44 against 88 from DRAM.)
template <size_t... I>
inline void LaneTile(const float* w, size_t ldw, const float* xt, size_t kc, const float* next, __m512* acc,
                     std::index_sequence<I...>) {
  size_t k = 0;
  for (; k + 16 <= kc; k += 16) {
    if (next != nullptr) ((_mm_prefetch(reinterpret_cast<const char*>(next + I * ldw + k), _MM_HINT_T1)), ...);
    for (size_t kk = k; kk < k + 16; ++kk) {
      const __m512 xv = _mm512_load_ps(xt + kk * 16);
      ((acc[I] = _mm512_fmadd_ps(_mm512_set1_ps(w[I * ldw + kk]), xv, acc[I])), ...);
    }
  }
  for (; k < kc; ++k) {
    const __m512 xv = _mm512_load_ps(xt + k * 16);
    ((acc[I] = _mm512_fmadd_ps(_mm512_set1_ps(w[I * ldw + k]), xv, acc[I])), ...);
  }
}

// Two blocks of 16 inputs against kPairRows rows: acc0[i] lane t += w[i *
// ldw + k] * xt0[k * 16 + t], acc1 likewise with xt1, for k < kc in order -
// LaneTile's arithmetic for each block, with each weight broadcast once for
// both (2 + 8 loads per 16 multiply-adds, where a 16-row tile takes 17 and
// GCC spills half its row pointers to the stack: 8 fit in registers). The
// bits are LaneTile's, block by block. A last tile of nr < kPairRows rows
// reads row nr - 1 again in the places of the rows it lacks (their sums are
// not stored): the inputs packed for the tiles serve it too, where copying
// its rows and packing the inputs again for a tile of 16 (MatmulLanesBlocks)
// cost as much as a whole pass over 40 rows.
constexpr size_t kPairRows = 8;
template <size_t... I>
inline void LaneTilePair(const float* w, size_t ldw, size_t nr, const float* xt0, const float* xt1, size_t kc,
                         const float* next, __m512* acc0, __m512* acc1, std::index_sequence<I...>) {
  const float* row[sizeof...(I)] = {(w + (I < nr ? I : nr - 1) * ldw)...};
  auto column = [&](size_t k) {  // column k of every row against both blocks
    const __m512 x0 = _mm512_load_ps(xt0 + k * 16), x1 = _mm512_load_ps(xt1 + k * 16);
    auto step = [&](size_t i) {
      const __m512 wv = _mm512_set1_ps(row[i][k]);
      acc0[i] = _mm512_fmadd_ps(wv, x0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(wv, x1, acc1[i]);
    };
    (step(I), ...);
  };
  size_t k = 0;
  for (; k + 16 <= kc; k += 16) {
    if (next != nullptr) ((_mm_prefetch(reinterpret_cast<const char*>(next + I * ldw + k), _MM_HINT_T1)), ...);
    for (size_t kk = k; kk < k + 16; ++kk) column(kk);
  }
  for (; k < kc; ++k) column(k);
}

// y[t * ldy + i] = acc[i] lane t (add: y +=) for i < nr, t < nt.
inline void StoreTile(__m512* acc, float* y, size_t ldy, size_t nr, size_t nt, bool add) {
  Transpose16(acc);
  const __mmask16 m = FirstLanes(nr);
  for (size_t t = 0; t < nt; ++t) {
    __m512 v = acc[t];
    if (add) v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + t * ldy), v);
    _mm512_mask_storeu_ps(y + t * ldy, m, v);
  }
}

// Rows [r, r + nr) of w, columns [c0, c0 + kc), as floats at out (row
// stride kCopyCols), rows nr..15 zero.
inline void CopyRows(const float* w, size_t ldw, size_t nr, size_t c0, size_t kc, float* out) {
  for (size_t i = 0; i < kLaneRows; ++i) {
    if (i < nr) {
      std::memcpy(out + i * kCopyCols, w + i * ldw + c0, kc * sizeof(float));
    } else {
      std::memset(out + i * kCopyCols, 0, kc * sizeof(float));
    }
  }
}
inline void CopyRows(const uint16_t* w, size_t ldw, size_t nr, size_t c0, size_t kc, float* out) {
  for (size_t i = 0; i < kLaneRows; ++i) {
    float* o = out + i * kCopyCols;
    if (i >= nr) {
      std::memset(o, 0, kc * sizeof(float));
      continue;
    }
    const uint16_t* h = w + i * ldw + c0;
    size_t c = 0;
    for (; c + 16 <= kc; c += 16) {
      _mm512_store_ps(o + c, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + c))));
    }
    if (c < kc) {
      const __mmask16 m = FirstLanes(kc - c);
      _mm512_mask_storeu_ps(o + c, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, h + c)));
    }
  }
}

// Columns [0, kc) of 16 rows (stride ldw) into L2, for the next tile.
template <class W>
inline void PrefetchRows(const W* w, size_t ldw, size_t kc) {
  for (size_t i = 0; i < kLaneRows; ++i) {
    const char* row = reinterpret_cast<const char*>(w + i * ldw);
    for (size_t b = 0; b < kc * sizeof(W); b += 64) _mm_prefetch(row + b, _MM_HINT_T1);
  }
}

// No columns: every output is 0 (y may be null when rows is 0).
inline void ZeroOutputs(float* y, size_t ldy, size_t rows, size_t n) {
  if (rows == 0) return;
  for (size_t j = 0; j < n; ++j) std::memset(y + j * ldy, 0, rows * sizeof(float));
}

// Whether the 16 rows of a tile, at this stride in bytes, fall into so few
// sets of a 32 KiB 8-way L1 (64 sets of 64-byte lines: addresses 4 KiB
// apart share a set) that their lines evict each other between the 16
// columns each line serves: more than 4 of the 16 in one set. Rows of 1,024
// or 2,048 floats put all 16 in one set, 5,632 floats 8 in each of two
// (crowded); 768 floats put 4 in each of four (not crowded). Crowded rows go
// 8 to a tile: on a Zen 4 core (32 KiB, 8-way L1), 768 rows of 2,048 floats
// x 32 inputs went from 40 to 101 GFLOP/s and 5,632 rows of 2,048 from 45
// to 87 (tinyai-bench-kernels matmul/avx512vnni; the AVX2 tiles: 73, 72).
inline bool RowsCrowdL1(size_t row_bytes) {
  int in_set[64] = {};
  int most = 0;
  for (size_t i = 0; i < kLaneRows; ++i) {
    const int c = ++in_set[(i * row_bytes / 64) % 64];
    if (c > most) most = c;
  }
  return most > 4;
}

// y[j * ldy + r] = dot(row r of w, x + j * ldx) for r < rows, j < n, in
// tiles of 16 rows (8 where RowsCrowdL1), the last rows % 16 (% 8) copied to
// rows_buf kCopyCols columns at a time. Any rows, cols and n. Stack: 80 KiB
// (xt and one piece of rows).
__attribute__((noinline)) inline void MatmulLanesBlocks(const float* w, size_t ldw, const float* x, size_t ldx,
                                                        float* y, size_t ldy, size_t rows, size_t cols, size_t n) {
  alignas(64) float xt[kLaneCols * kLaneInputs];
  alignas(64) float rows_buf[kLaneRows * kCopyCols];
  constexpr auto kTile = std::make_index_sequence<kLaneRows>();
  constexpr auto kCrowdedTile = std::make_index_sequence<kCrowdedRows>();
  const size_t step = RowsCrowdL1(ldw * sizeof(float)) ? kCrowdedRows : kLaneRows;
  if (cols == 0) return ZeroOutputs(y, ldy, rows, n);
  for (size_t j0 = 0; j0 < n; j0 += kLaneInputs) {
    const size_t nt = n - j0 < kLaneInputs ? n - j0 : kLaneInputs;
    for (size_t c0 = 0; c0 < cols; c0 += kLaneCols) {
      const size_t kc = cols - c0 < kLaneCols ? cols - c0 : kLaneCols;
      PackInputs(x + j0 * ldx + c0, ldx, nt, kc, xt);
      for (size_t r = 0; r < rows; r += step) {
        const size_t nr = rows - r < step ? rows - r : step;
        __m512 acc[kLaneRows];
        for (__m512& a : acc) a = _mm512_setzero_ps();
        if (nr == step) {
          const float* wf = w + r * ldw + c0;
          const float* next = r + 2 * step <= rows ? wf + step * ldw : nullptr;  // the next tile's rows
          if (step == kLaneRows) {
            LaneTile(wf, ldw, xt, kc, next, acc, kTile);
          } else {
            LaneTile(wf, ldw, xt, kc, next, acc, kCrowdedTile);
          }
        } else {  // the last rows, kCopyCols columns at a time (a tile of 16, rows nr.. zero)
          for (size_t p = 0; p < kc; p += kCopyCols) {
            const size_t pc = kc - p < kCopyCols ? kc - p : kCopyCols;
            CopyRows(w + r * ldw, ldw, nr, c0 + p, pc, rows_buf);
            LaneTile(rows_buf, kCopyCols, xt + p * kLaneInputs, pc, nullptr, acc, kTile);
          }
        }
        StoreTile(acc, y + j0 * ldy + r, ldy, nr, nt, c0 != 0);
      }
    }
  }
}

// Rows [0, rows) (any number) against two blocks of inputs: 16 from x and
// nt1 from x + 16 * ldx, kPairRows rows at a time (LaneTilePair; the last
// tile may be short), each row's weights loaded once for both blocks. Stack:
// 128 KiB (both blocks' xt). Not inlined, so that its frame and
// MatmulLanesBlocks' are never one.
__attribute__((noinline)) inline void MatmulLanesPairs(const float* w, size_t ldw, const float* x, size_t ldx, float* y,
                                                       size_t ldy, size_t rows, size_t cols, size_t nt1) {
  alignas(64) float xt[2][kLaneCols * kLaneInputs];
  constexpr auto kTile = std::make_index_sequence<kPairRows>();
  for (size_t c0 = 0; c0 < cols; c0 += kLaneCols) {
    const size_t kc = cols - c0 < kLaneCols ? cols - c0 : kLaneCols;
    PackInputs(x + c0, ldx, kLaneInputs, kc, xt[0]);
    PackInputs(x + kLaneInputs * ldx + c0, ldx, nt1, kc, xt[1]);
    for (size_t r = 0; r < rows; r += kPairRows) {
      const size_t nr = rows - r < kPairRows ? rows - r : kPairRows;
      __m512 acc0[kLaneRows], acc1[kLaneRows];
      for (size_t i = 0; i < kLaneRows; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
      const float* wf = w + r * ldw + c0;
      const float* next = r + 2 * kPairRows <= rows ? wf + kPairRows * ldw : nullptr;  // the next tile's rows
      LaneTilePair(wf, ldw, nr, xt[0], xt[1], kc, next, acc0, acc1, kTile);
      StoreTile(acc0, y + r, ldy, nr, kLaneInputs, c0 != 0);
      StoreTile(acc1, y + kLaneInputs * ldy + r, ldy, nr, nt1, c0 != 0);
    }
  }
}

// As MatmulLanesBlocks, two blocks of 16 inputs at a time (a prompt pass's
// 32) where n > 16: the rows in tiles of kPairRows (MatmulLanesPairs, the
// last rows % 8 in a short tile); a lone block of 16 or fewer as
// MatmulLanesBlocks does.
// The same bits: every output is summed as there. On one Zen 5 core
// against 32 inputs (tinyai-bench-kernels matmul, 768 x 768 to 32,000 x
// 768) 184-202 against 138-161 GFLOP/s, a prompt of 128 tokens 1.08-1.1x
// (110M and ~1B shapes). Stack: 128 KiB at most (the pieces are called one
// after the other).
inline void MatmulLanes(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy, size_t rows,
                        size_t cols, size_t n) {
  if (cols == 0 || n <= kLaneInputs || rows == 0) return MatmulLanesBlocks(w, ldw, x, ldx, y, ldy, rows, cols, n);
  size_t j0 = 0;
  for (; j0 + kLaneInputs < n; j0 += 2 * kLaneInputs) {
    const size_t nt1 = n - j0 - kLaneInputs < kLaneInputs ? n - j0 - kLaneInputs : kLaneInputs;
    MatmulLanesPairs(w, ldw, x + j0 * ldx, ldx, y + j0 * ldy, ldy, rows, cols, nt1);
  }
  if (j0 < n) MatmulLanesBlocks(w, ldw, x + j0 * ldx, ldx, y + j0 * ldy, ldy, rows, cols, n - j0);
}

// The same products over halves (uint16_t, IEEE binary16): 16 rows x
// kCopyCols columns converted to floats once for up to 32 inputs (two blocks
// of 16 in the lanes, each with its own accumulators in turn), the columns
// in chunks of kCopyCols. Converting once per 16 inputs instead cost a
// Zen 4 core 8-15% against the fp32 tiles. Stack: 48 KiB.
inline void MatmulLanesHalves(const uint16_t* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy,
                              size_t rows, size_t cols, size_t n) {
  constexpr size_t kBlocks = 2;  // blocks of kLaneInputs inputs per conversion
  alignas(64) float xt[kBlocks][kCopyCols * kLaneInputs];
  alignas(64) float rows_buf[kLaneRows * kCopyCols];
  constexpr auto kTile = std::make_index_sequence<kLaneRows>();
  if (cols == 0) return ZeroOutputs(y, ldy, rows, n);
  for (size_t j0 = 0; j0 < n; j0 += kBlocks * kLaneInputs) {
    size_t nt[kBlocks] = {};
    size_t blocks = 0;
    for (; blocks < kBlocks && j0 + blocks * kLaneInputs < n; ++blocks) {
      const size_t left = n - j0 - blocks * kLaneInputs;
      nt[blocks] = left < kLaneInputs ? left : kLaneInputs;
    }
    for (size_t c0 = 0; c0 < cols; c0 += kCopyCols) {
      const size_t kc = cols - c0 < kCopyCols ? cols - c0 : kCopyCols;
      for (size_t b = 0; b < blocks; ++b) PackInputs(x + (j0 + b * kLaneInputs) * ldx + c0, ldx, nt[b], kc, xt[b]);
      for (size_t r = 0; r < rows; r += kLaneRows) {
        const size_t nr = rows - r < kLaneRows ? rows - r : kLaneRows;
        CopyRows(w + r * ldw, ldw, nr, c0, kc, rows_buf);
        if (r + 2 * kLaneRows <= rows) PrefetchRows(w + (r + kLaneRows) * ldw + c0, ldw, kc);
        for (size_t b = 0; b < blocks; ++b) {
          __m512 acc[kLaneRows];
          for (__m512& a : acc) a = _mm512_setzero_ps();
          LaneTile(rows_buf, kCopyCols, xt[b], kc, nullptr, acc, kTile);
          StoreTile(acc, y + (j0 + b * kLaneInputs) * ldy + r, ldy, nr, nt[b], c0 != 0);
        }
      }
    }
  }
}

}  // namespace TINYAI_ISA_NAMESPACE
}  // namespace avx512
}  // namespace kernels
}  // namespace tinyai

#endif  // TINYAI_KERNELS_SIMD_MATMUL_AVX512_H_
