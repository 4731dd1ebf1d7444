// Several inputs against f16 rows on AVX2 + F16C, as outer products: a
// panel of 16 rows is widened a chunk of columns at a time and stored column
// by column (16 floats a column, two vectors), and each column multiplies
// the panel's two row vectors by one input value broadcast, for 6 inputs at
// once: 12 accumulators, 2 vector loads and 6 broadcasts per 12 multiply-adds,
// no horizontal sums, and each accumulator is 8 rows' outputs for one input,
// stored as they lie in y. The row-dot tile (matmul_f16_k in kernels_simd.h)
// loads 7 vectors per 12 multiply-adds, 4 of them the inputs', which a
// prompt pass's 32 inputs (96-256 KiB) stream from L2 for every 3 rows.
//
// The widening transposes 8 rows x 8 columns at a time (vcvtph2ps, then 24
// shuffles); it is done once per weight per call, for every input.
//
// Sums run over the columns in order, one chunk at a time added to y: not
// the order of the row-dot tile or of matvec, so an f16 matmul row is not
// the matvec row bit for bit (within fp32 rounding of the reference, as
// every f16 kernel; tests/kernels/kernels_test.cc).
//
// Included from kernels_simd.h only when compiled with AVX2, FMA and F16C;
// every function is a template on Arch (kernels_simd.h's one-definition
// note), used with xsimd::fma3<xsimd::avx2> only.
#ifndef TINYAI_KERNELS_SIMD_MATMUL_F16_AVX2_H_
#define TINYAI_KERNELS_SIMD_MATMUL_F16_AVX2_H_

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/simd/isa.h"

namespace tinyai {
namespace kernels {
namespace simd {
namespace f16avx2 {
inline namespace TINYAI_ISA_NAMESPACE {

constexpr size_t kPanelRows = 16;   // two vectors of 8 rows
constexpr size_t kChunkCols = 128;  // a packed chunk: 8 KiB; 32 inputs' columns of it: 16 KiB
constexpr size_t kTileInputs = 6;    // 12 accumulators
// (24 rows x 4 inputs and 32 x 3, also 12 accumulators, measured alike within
// this host's noise: tinyai-bench-kernels matmul_f16 n:32, 3 rounds.)
// Fewer inputs than this take the row-dot tile: the outer products need
// enough inputs to repay the transposition.
constexpr size_t kMinInputs = 8;

// r[k] (row k's 8 columns) becomes column k's 8 rows.
template <class Arch>
inline void Transpose8x8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// Rows [0, rows) (at most kPanelRows) of h, columns [0, cols) (at most
// kChunkCols), widened into pack[c * kPanelRows + i]; rows past `rows` are
// zeros. Halves are read only inside the rows and columns given.
template <class Arch>
inline void Pack(const uint16_t* h, size_t ldh, size_t rows, size_t cols, float* pack) {
  const size_t vec_cols = cols - cols % 8;
  for (size_t i0 = 0; i0 < kPanelRows; i0 += 8) {
    for (size_t c = 0; c < vec_cols; c += 8) {
      __m256 r[8];
      for (size_t k = 0; k < 8; ++k) {
        r[k] = i0 + k < rows
                   ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + (i0 + k) * ldh + c)))
                   : _mm256_setzero_ps();
      }
      Transpose8x8<Arch>(r);
      for (size_t k = 0; k < 8; ++k) _mm256_store_ps(pack + (c + k) * kPanelRows + i0, r[k]);
    }
  }
  for (size_t c = vec_cols; c < cols; ++c) {
    for (size_t i = 0; i < kPanelRows; ++i) pack[c * kPanelRows + i] = i < rows ? detail::At<Arch>(h + i * ldh, c) : 0.0f;
  }
}

// J inputs (x, ldx) against a packed chunk of cols columns: y[j * ldy + i]
// for rows i < rows, set (Add false) or added to (Add true).
template <class Arch, bool Add, size_t... J>
inline void Tile(const float* pack, size_t cols, const float* x, size_t ldx, float* y, size_t ldy, size_t rows,
                 std::index_sequence<J...>) {
  constexpr size_t V = kPanelRows / 8;
  __m256 acc[V][sizeof...(J)];
  for (size_t v = 0; v < V; ++v) ((acc[v][J] = _mm256_setzero_ps()), ...);
  for (size_t c = 0; c < cols; ++c) {
    __m256 w[V];
    for (size_t v = 0; v < V; ++v) w[v] = _mm256_load_ps(pack + c * kPanelRows + 8 * v);
    const auto fma = [&](size_t j, __m256 xj) {
      for (size_t v = 0; v < V; ++v) acc[v][j] = _mm256_fmadd_ps(w[v], xj, acc[v][j]);
    };
    (fma(J, _mm256_broadcast_ss(x + J * ldx + c)), ...);
  }
  if (rows == kPanelRows) {
    const auto store = [&](float* out, size_t j) {
      for (size_t v = 0; v < V; ++v)
        _mm256_storeu_ps(out + 8 * v, Add ? _mm256_add_ps(_mm256_loadu_ps(out + 8 * v), acc[v][j]) : acc[v][j]);
    };
    (store(y + J * ldy, J), ...);
  } else {
    alignas(32) float tmp[kPanelRows];
    const auto store = [&](float* out, size_t j) {
      for (size_t v = 0; v < V; ++v) _mm256_store_ps(tmp + 8 * v, acc[v][j]);
      for (size_t i = 0; i < rows; ++i) out[i] = Add ? out[i] + tmp[i] : tmp[i];
    };
    (store(y + J * ldy, J), ...);
  }
}

// The next chunk to pack (next: its first row, prows rows of pcols halves;
// prows 0 after the last), prefetched into L2 a share of its rows per tile,
// so its reads spread over the tiles' arithmetic (the fp32 Matmul's way).
struct Ahead {
  const uint16_t* next;
  size_t ldh, prows, pcols;
};

template <class Arch, bool Add>
inline void Tiles(const float* pack, size_t cols, const float* x, size_t ldx, float* y, size_t ldy, size_t rows,
                  size_t n, const Ahead& ahead) {
  const size_t tiles = (n + kTileInputs - 1) / kTileInputs;
  size_t j = 0, t = 0;
  const auto prefetch = [&] {
    const size_t p0 = t * ahead.prows / tiles, p1 = (t + 1) * ahead.prows / tiles;
    for (size_t i = p0; i < p1; ++i)
      for (size_t c = 0; c < ahead.pcols; c += 32) detail::PrefetchL2<Arch>(ahead.next + i * ahead.ldh + c);
    ++t;
  };
  for (; j + kTileInputs <= n; j += kTileInputs) {
    prefetch();
    Tile<Arch, Add>(pack, cols, x + j * ldx, ldx, y + j * ldy, ldy, rows, std::make_index_sequence<kTileInputs>());
  }
  if (j < n) prefetch();
  const float* xj = x + j * ldx;
  float* yj = y + j * ldy;
  switch (n - j) {
    case 5: Tile<Arch, Add>(pack, cols, xj, ldx, yj, ldy, rows, std::make_index_sequence<5>()); break;
    case 4: Tile<Arch, Add>(pack, cols, xj, ldx, yj, ldy, rows, std::make_index_sequence<4>()); break;
    case 3: Tile<Arch, Add>(pack, cols, xj, ldx, yj, ldy, rows, std::make_index_sequence<3>()); break;
    case 2: Tile<Arch, Add>(pack, cols, xj, ldx, yj, ldy, rows, std::make_index_sequence<2>()); break;
    case 1: Tile<Arch, Add>(pack, cols, xj, ldx, yj, ldy, rows, std::make_index_sequence<1>()); break;
    default: break;
  }
}

// y[j * ldy + r] = row r of h . input j, for n >= kMinInputs inputs.
template <class Arch>
void Matmul(const uint16_t* h, size_t ldh, const float* x, size_t ldx, float* y, size_t ldy, size_t rows,
            size_t cols, size_t n) {
  alignas(64) float pack[kChunkCols * kPanelRows];
  for (size_t r = 0; r < rows; r += kPanelRows) {
    const size_t rr = rows - r < kPanelRows ? rows - r : kPanelRows;
    for (size_t c0 = 0; c0 < cols; c0 += kChunkCols) {
      const size_t kc = cols - c0 < kChunkCols ? cols - c0 : kChunkCols;
      Pack<Arch>(h + r * ldh + c0, ldh, rr, kc, pack);
      // The next chunk's halves (the next panel's first, after the last)
      // into L2 while the tiles run: 16 short rows are streams too short
      // for the hardware prefetcher.
      const bool last = c0 + kChunkCols >= cols;
      const size_t nr = last ? r + kPanelRows : r, nc = last ? 0 : c0 + kChunkCols;
      Ahead ahead{h, ldh, 0, 0};
      if (nr < rows) {
        ahead.next = h + nr * ldh + nc;
        ahead.prows = rows - nr < kPanelRows ? rows - nr : kPanelRows;
        ahead.pcols = cols - nc < kChunkCols ? cols - nc : kChunkCols;
      }
      if (c0 == 0) {
        Tiles<Arch, false>(pack, kc, x + c0, ldx, y + r, ldy, rr, n, ahead);
      } else {
        Tiles<Arch, true>(pack, kc, x + c0, ldx, y + r, ldy, rr, n, ahead);
      }
    }
  }
}

}  // namespace TINYAI_ISA_NAMESPACE
}  // namespace f16avx2
}  // namespace simd
}  // namespace kernels
}  // namespace tinyai

#endif  // TINYAI_KERNELS_SIMD_MATMUL_F16_AVX2_H_
