// xsimd kernels, written once as functors templated on the xsimd architecture
// and instantiated per instruction set in kernels_<arch>.cc (each compiled
// with its own -m flags). dispatch.cc picks one table at run time.
//
// Following xsimd's dispatching guide, every operator() is defined out of
// class, and each per-arch file instantiates them with
// TINYAI_KERNELS_INSTANTIATE(Arch) before building its table with
// MakeTable<Arch>(name).
//
// One-definition-rule care: these headers are compiled with different -m
// flags in different translation units, so every helper here is a template
// on Arch (or a member of one); the intrinsics headers they include put
// theirs in the inline namespace of the flag set (isa.h,
// src/kernels/README.md). A non-template inline helper outside one would be
// merged by the linker and could run AVX2 code on an SSE2-only CPU. For the
// same reason scalar tails call expf/sqrtf (C library functions) rather than
// the inline std::exp/std::sqrt overloads.
//
// Numerics: reductions are reassociated (several accumulators, then a
// horizontal add) and use FMA where the arch has it, so results differ from
// Ref() by normal fp32 rounding; tests/kernels/kernels_test.cc bounds that.
#ifndef TINYAI_KERNELS_SIMD_KERNELS_SIMD_H_
#define TINYAI_KERNELS_SIMD_KERNELS_SIMD_H_

#include <math.h>
#include <string.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include <xsimd/xsimd.hpp>

#include "common/half.h"
#include "kernels/kernels.h"
#include "kernels/ref/kernels_ref.h"

namespace tinyai {
namespace kernels {

// Table getters, one per built instantiation; defined in the per-arch files.
// Call only when the running CPU supports the arch (dispatch.cc checks).
const KernelTable& X86Sse2Table();     // kernels_x86_sse2.cc, "sse2"
const KernelTable& X86Avx2FmaTable();  // kernels_x86_avx2.cc, "avx2+fma"
const KernelTable& X86Avx512Table();      // kernels_x86_avx512.cc, "avx512"
const KernelTable& X86Avx512VnniTable();  // kernels_x86_avx512vnni.cc, "avx512vnni"
const KernelTable& X86Avx512AmxTable();   // kernels_x86_avx512amx.cc, "avx512amx"
const KernelTable& ArmNeon64Table();   // kernels_arm_neon.cc on aarch64, "neon64"
const KernelTable& ArmNeon64DotTable();  // kernels_arm_neon_dot.cc on aarch64, "neon64dot"
const KernelTable& ArmNeonTable();     // kernels_arm_neon.cc on 32-bit ARM, "neon"

namespace simd {

// ---- Functors (signatures mirror KernelTable) ---------------------------------

struct matvec_k {
  template <class Arch>
  void operator()(Arch, const float* w, size_t ldw, const float* x, float* y, size_t rows,
                  size_t cols) const;
};

struct matmul_k {
  template <class Arch>
  void operator()(Arch, const float* w, size_t ldw, const float* x, size_t ldx, float* y,
                  size_t ldy, size_t rows, size_t cols, size_t n) const;
};

// f16 weights (TINYAI_DTYPE_F16): signatures mirror WeightKernels.
struct matvec_f16_k {
  template <class Arch>
  void operator()(Arch, const uint8_t* w, size_t row_bytes, const float* x, float* y, size_t rows,
                  size_t cols) const;
};

struct matmul_f16_k {
  template <class Arch>
  void operator()(Arch, const uint8_t* w, size_t row_bytes, const float* x, size_t ldx, float* y,
                  size_t ldy, size_t rows, size_t cols, size_t n) const;
};

struct dequantize_f16_k {
  template <class Arch>
  void operator()(Arch, const uint8_t* row, float* out, size_t cols) const;
};

struct vecmat_k {
  template <class Arch>
  void operator()(Arch, const float* a, const float* v, size_t ldv, float* out, size_t n,
                  size_t cols) const;
};

struct dot_k {
  template <class Arch>
  float operator()(Arch, const float* a, const float* b, size_t n) const;
};

struct rmsnorm_k {
  template <class Arch>
  void operator()(Arch, const float* x, const float* w, float* out, size_t n, float eps) const;
};

struct softmax_k {
  template <class Arch>
  void operator()(Arch, float* x, size_t n) const;
};

struct swiglu_k {
  template <class Arch>
  void operator()(Arch, float* gate, const float* up, size_t n) const;
};

struct add_k {
  template <class Arch>
  void operator()(Arch, float* y, const float* x, size_t n) const;
};

// ---- Helpers (all templated on Arch, see the ODR note above) -------------------

namespace detail {

template <class Arch>
using fbatch = xsimd::batch<float, Arch>;

template <class Arch>
inline fbatch<Arch> Load(const float* p) {
  return fbatch<Arch>::load_unaligned(p);
}

// Element i of a weight row, as a float (float rows, or halves).
template <class Arch>
inline float At(const float* p, size_t i) {
  return p[i];
}
template <class Arch>
inline float At(const uint16_t* p, size_t i) {
  uint16_t h;
  memcpy(&h, p + i, sizeof h);
  return HalfToFloat(h);
}

// S halves (IEEE binary16, TINYAI_DTYPE_F16) widened to a batch of floats:
// one instruction with F16C (x86, the AVX2 file is built with -mf16c) or on
// AArch64, else one value at a time (HalfToFloat).
template <class Arch>
inline fbatch<Arch> Load(const uint16_t* p) {
#if defined(__F16C__) && defined(__AVX2__)
  if constexpr (std::is_same<Arch, xsimd::fma3<xsimd::avx2>>::value) {
    return fbatch<Arch>(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
#endif
#if defined(__AVX512F__) && defined(__F16C__)
  if constexpr (std::is_same<Arch, xsimd::avx512bw>::value) {
    return fbatch<Arch>(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
  }
#endif
#if defined(__aarch64__)
  if constexpr (std::is_same<Arch, xsimd::neon64>::value) {
    return fbatch<Arch>(vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))));
  }
#endif
  // Without a conversion instruction: widen to 32 bits, then in the
  // vector's lanes move the exponent and mantissa into place (below); the
  // sign goes back last.
  using U = xsimd::batch<uint32_t, Arch>;
  U v;
#if defined(__SSE2__)
  if constexpr (std::is_same<Arch, xsimd::sse2>::value) {
    v = U(_mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), _mm_setzero_si128()));
  } else
#endif
#if (defined(__ARM_NEON) || defined(__ARM_NEON__)) && !defined(__aarch64__)
  if constexpr (std::is_same<Arch, xsimd::neon>::value) {
    v = U(vmovl_u16(vld1_u16(p)));
  } else
#endif
  {
    constexpr size_t S = fbatch<Arch>::size;
    alignas(64) uint32_t wide[S];
    for (size_t i = 0; i < S; ++i) {
      uint16_t h;
      memcpy(&h, p + i, sizeof h);
      wide[i] = h;
    }
    v = U::load_aligned(wide);
  }
  const U exponent = v & U(0x7c00u);
  const U magnitude = (v & U(0x7fffu)) << 13;
  U bits = magnitude + U((127u - 15u) << 23);  // normal: rebias the exponent
  bits = xsimd::select(exponent == U(0x7c00u), magnitude | U(0x7f800000u), bits);  // infinity, NaN
  // Zero and subnormal: the mantissa counts 2^-24 steps (converted, not
  // rescaled as a float subnormal: ARMv7 NEON flushes those to zero).
  using I = xsimd::batch<int32_t, Arch>;
  const fbatch<Arch> small = xsimd::to_float(xsimd::bitwise_cast<I>(v & U(0x3ffu))) * fbatch<Arch>(0x1p-24f);
  bits = xsimd::select(exponent == U(0u), xsimd::bitwise_cast<U>(small), bits);
  bits = bits | ((v & U(0x8000u)) << 16);
  return xsimd::bitwise_cast<fbatch<Arch>>(bits);
}

// Hint that the cache line holding p will be read soon, into L2 only
// (prefetcht2 on x86). Never faults.
template <class Arch, class W>
inline void PrefetchL2(const W* p) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 0, 1);
#else
  static_cast<void>(p);
#endif
}

// Hint that the cache line holding p will be read soon. Never faults.
template <class Arch, class W>
inline void Prefetch(const W* p) {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, 0, 3);
#else
  static_cast<void>(p);
#endif
}

// GCC at -O2 does not unroll short constant-trip loops over an array of
// batches, which leaves accumulators in memory (store-forwarding latency on
// every FMA, ~2x slower). So the per-row / per-vector work below is written as
// fold expressions over std::index_sequence: straight-line code in which every
// array index is a constant and the accumulators live in registers.

// Dot products of R rows of w against V vectors of x, as an R x V tile:
// y[v*ldy + r] = dot(w + r*ldw, x + v*ldx, cols). Each row chunk is loaded
// once for all V vectors, each vector chunk once for all R rows.
// Weight rows are float or uint16_t (halves); ldw counts elements, and one
// 64-byte line holds LineElems<W> of them.
template <class W>
constexpr size_t LineElems() {
  return 64 / sizeof(W);
}

// Add: y += the dot products instead of y = (a matmul over column chunks).
template <class Arch, size_t R, size_t V, class W = float, bool Add = false>
struct Tile {
  using B = fbatch<Arch>;
  static constexpr size_t S = B::size;

  // Also prefetches pf_rows rows starting at pf (row stride ldw), one line per
  // 64 bytes of a row, so a later panel streams in while this one computes.
  static void Run(const W* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy,
                  size_t cols, const W* pf, size_t pf_rows) {
    Run(w, ldw, x, ldx, y, ldy, cols, pf, pf_rows, std::make_index_sequence<R>(),
        std::make_index_sequence<V>(), std::make_index_sequence<R * V>());
  }

  template <size_t... Ri, size_t... Vi, size_t... Ti>
  static void Run(const W* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy,
                  size_t cols, const W* pf, size_t pf_rows, std::index_sequence<Ri...>,
                  std::index_sequence<Vi...>, std::index_sequence<Ti...>) {
    B acc[R * V] = {(static_cast<void>(Ti), B(0.0f))...};  // acc[r*V + v]
    const size_t vec_end = cols - cols % S;
    for (size_t c = 0; c < vec_end; c += S) {
      if (c % LineElems<W>() == 0) {  // one prefetch per 64-byte line
        for (size_t k = 0; k < pf_rows; ++k) Prefetch<Arch>(pf + k * ldw + c);
      }
      const B xv[V] = {Load<Arch>(x + Vi * ldx + c)...};
      const B wv[R] = {Load<Arch>(w + Ri * ldw + c)...};
      ((acc[Ti] = xsimd::fma(wv[Ti / V], xv[Ti % V], acc[Ti])), ...);
    }
    ((y[(Ti % V) * ldy + Ti / V] = (Add ? y[(Ti % V) * ldy + Ti / V] : 0.0f) + xsimd::hadd(acc[Ti]) +
                                    TailDot(w + (Ti / V) * ldw, x + (Ti % V) * ldx, vec_end, cols)),
     ...);
  }

  static float TailDot(const W* a, const float* b, size_t begin, size_t end) {
    float sum = 0.0f;
    for (size_t i = begin; i < end; ++i) sum += At<Arch>(a, i) * b[i];
    return sum;
  }
};

// y[i] = the sum of acc[i]'s lanes + tail[i], i < 8, on AVX: each sum is
// added in exactly xsimd::hadd's order, ((x0+x4)+(x1+x5)) + ((x2+x6)+(x3+x7)),
// so a matvec row equals the same row of a matmul tile bit for bit (a prompt
// and the same tokens one by one give the same logits), in 17 instructions
// for eight rows with the store, where hadd takes 5 a row (40): on a head's
// 64-column key rows those cost about as much as the rows' 64 FMAs.
template <class Arch>
inline void HAddRows8(const fbatch<Arch>* acc, const float* tail, float* y) {
#if defined(__AVX__)
  // [a0+a4 .. a3+a7 | b0+b4 .. b3+b7]
  const auto fold = [](__m256 a, __m256 b) {
    return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
  };
  const __m256 ae = fold(acc[0], acc[4]), bf = fold(acc[1], acc[5]);
  const __m256 cg = fold(acc[2], acc[6]), dh = fold(acc[3], acc[7]);
  const __m256 sums = _mm256_hadd_ps(_mm256_hadd_ps(ae, bf), _mm256_hadd_ps(cg, dh));  // [a b c d | e f g h]
  _mm256_storeu_ps(y, _mm256_add_ps(sums, _mm256_load_ps(tail)));
#else
  (void)acc, (void)tail, (void)y;
#endif
}

// matvec rows: R rows at once, one accumulator per row (R independent FMA
// chains, enough to cover FMA latency), each x chunk loaded once for all R
// rows, one 64-byte line per row per step. With next (the following R rows,
// or null after the last panel), each step also prefetches the same line of
// each next row into L2 (prefetcht2): rows of 0.5-3 KiB are streams too short
// for the hardware prefetcher to get going, and on this machine (AMD EPYC,
// AVX2) single-thread matvec from DRAM went from 11.7 to 6.2-6.7 ms (f32,
// 131,072 x 256), 4.7 to 2.2-2.5 ms (f16, 32,000 x 768); prefetching into
// L1, or two panels ahead, gained nothing.
template <class Arch, size_t R, class W = float>
struct MatvecRows {
  using B = fbatch<Arch>;
  static constexpr size_t S = B::size;
  static constexpr size_t U = S >= LineElems<W>() ? 1 : LineElems<W>() / S;  // batches per line

  static void Run(const W* w, size_t ldw, const float* x, float* y, size_t cols, const W* next) {
    Run(w, ldw, x, y, cols, next, std::make_index_sequence<R>());
  }

  template <size_t... I>
  static void Run(const W* w, size_t ldw, const float* x, float* y, size_t cols, const W* next,
                  std::index_sequence<I...>) {
    B acc[R] = {(static_cast<void>(I), B(0.0f))...};
    size_t c = 0;
    for (; c + U * S <= cols; c += U * S) {
      if (next != nullptr) ((PrefetchL2<Arch>(next + I * ldw + c)), ...);
      for (size_t u = 0; u < U; ++u) {
        const B xv = Load<Arch>(x + c + u * S);
        ((acc[I] = xsimd::fma(Load<Arch>(w + I * ldw + c + u * S), xv, acc[I])), ...);
      }
    }
    for (; c + S <= cols; c += S) {
      const B xv = Load<Arch>(x + c);
      ((acc[I] = xsimd::fma(Load<Arch>(w + I * ldw + c), xv, acc[I])), ...);
    }
    Finish(acc, w, ldw, x, y, c, cols, std::index_sequence<I...>());
  }

  // y[i] = the sum of acc[i]'s lanes + row i's columns from c on, scalar.
  template <size_t... I>
  static void Finish(const B* acc, const W* w, size_t ldw, const float* x, float* y, size_t c, size_t cols,
                     std::index_sequence<I...>) {
    if constexpr (R == 8 && S == 8 && std::is_base_of<xsimd::avx, Arch>::value) {
      alignas(32) float tail[8];
      ((tail[I] = Tile<Arch, 1, 1, W>::TailDot(w + I * ldw, x, c, cols)), ...);
      HAddRows8<Arch>(acc, tail, y);
    } else {
      ((y[I] = xsimd::hadd(acc[I]) + Tile<Arch, 1, 1, W>::TailDot(w + I * ldw, x, c, cols)), ...);
    }
  }

  // The same sums, reading the R rows one after the other (each row's
  // batches in order, one accumulator a row as above, so the same bits):
  // for rows of a few lines that follow each other in memory (a head's keys)
  // this is one sequential stream instead of R interleaved ones.
  static void RunInOrder(const W* w, size_t ldw, const float* x, float* y, size_t cols) {
    RunInOrder(w, ldw, x, y, cols, std::make_index_sequence<R>());
  }

  template <size_t... I>
  static void RunInOrder(const W* w, size_t ldw, const float* x, float* y, size_t cols, std::index_sequence<I...>) {
    static_assert(R % 4 == 0, "rows four at a time");
    const size_t vec_end = cols - cols % S;
    B acc[R] = {(static_cast<void>(I), B(0.0f))...};
    // Four rows at a time side by side (four FMA chains; one row alone is
    // bound by the FMA latency), the next four after them.
    for (size_t h = 0; h < R; h += 4) {
      const W* wh = w + h * ldw;
      B a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
      for (size_t c = 0; c < vec_end; c += S) {
        const B xv = Load<Arch>(x + c);
        a0 = xsimd::fma(Load<Arch>(wh + c), xv, a0);
        a1 = xsimd::fma(Load<Arch>(wh + ldw + c), xv, a1);
        a2 = xsimd::fma(Load<Arch>(wh + 2 * ldw + c), xv, a2);
        a3 = xsimd::fma(Load<Arch>(wh + 3 * ldw + c), xv, a3);
      }
      acc[h] = a0, acc[h + 1] = a1, acc[h + 2] = a2, acc[h + 3] = a3;
    }
    Finish(acc, w, ldw, x, y, vec_end, cols, std::index_sequence<I...>());
  }
};

// matvec one row after the other, A accumulators over A consecutive batches
// of the row (A independent FMA chains): the rows of a slice follow each
// other in memory, so each thread reads one sequential stream, which the
// hardware prefetcher follows without software prefetches. MatvecRows reads
// R rows side by side instead (R short streams, which need the prefetch of
// the next panel) and loads each x batch once for all of them, which is what
// wins in cache.
template <class Arch, class W, size_t A = 4>
struct MatvecStream {
  using B = fbatch<Arch>;
  static constexpr size_t S = B::size;

  static void Run(const W* w, size_t ldw, const float* x, float* y, size_t rows, size_t cols) {
    Run(w, ldw, x, y, rows, cols, std::make_index_sequence<A>());
  }

  template <size_t... I>
  static void Run(const W* w, size_t ldw, const float* x, float* y, size_t rows, size_t cols,
                  std::index_sequence<I...>) {
    for (size_t r = 0; r < rows; ++r) {
      const W* row = w + r * ldw;
      B acc[A] = {(static_cast<void>(I), B(0.0f))...};
      size_t c = 0;
      for (; c + A * S <= cols; c += A * S) {
        ((acc[I] = xsimd::fma(Load<Arch>(row + c + I * S), Load<Arch>(x + c + I * S), acc[I])), ...);
      }
      for (; c + S <= cols; c += S) acc[0] = xsimd::fma(Load<Arch>(row + c), Load<Arch>(x + c), acc[0]);
      B sum(0.0f);
      ((sum += acc[I]), ...);
      y[r] = xsimd::hadd(sum) + Tile<Arch, 1, 1, W>::TailDot(row, x, c, cols);
    }
  }
};

// vecmat's column panels of P batches from column c on, while whole panels
// fit in cols; returns the first column left.
template <class Arch, size_t P, size_t... I>
size_t VecmatPanels(const float* a, const float* v, size_t ldv, float* out, size_t n, size_t c, size_t cols,
                    std::index_sequence<I...>) {
  using B = fbatch<Arch>;
  constexpr size_t S = B::size;
  for (; c + P * S <= cols; c += P * S) {
    B acc[P] = {(static_cast<void>(I), B(0.0f))...};
    const float* vt = v + c;
    for (size_t t = 0; t < n; ++t, vt += ldv) {
      const B at(a[t]);
      ((acc[I] = xsimd::fma(at, Load<Arch>(vt + I * S), acc[I])), ...);
    }
    ((acc[I].store_unaligned(out + c + I * S)), ...);
  }
  return c;
}

template <class Arch, size_t P>
size_t VecmatPanels(const float* a, const float* v, size_t ldv, float* out, size_t n, size_t c, size_t cols) {
  return VecmatPanels<Arch, P>(a, v, ldv, out, n, c, cols, std::make_index_sequence<P>());
}

// Horizontal max via a small store (xsimd 8.1 has no reduce_max).
template <class Arch>
inline float HMax(const fbatch<Arch>& b) {
  constexpr size_t S = fbatch<Arch>::size;
  alignas(64) float tmp[S];
  b.store_unaligned(tmp);
  float m = tmp[0];
  for (size_t i = 1; i < S; ++i) m = tmp[i] > m ? tmp[i] : m;
  return m;
}

}  // namespace detail

// ---- Definitions -----------------------------------------------------------------

namespace detail {

template <class Arch, class W>
void Matvec(const W* w, size_t ldw, const float* x, float* y, size_t rows, size_t cols) {
  constexpr size_t R = 8;
  size_t r = 0;
  if (ldw == cols && cols * sizeof(W) <= kMatvecInOrderBytes) {
    for (; r + R <= rows; r += R) MatvecRows<Arch, R, W>::RunInOrder(w + r * ldw, ldw, x, y + r, cols);
  }
  for (; r + R <= rows; r += R) {
    MatvecRows<Arch, R, W>::Run(w + r * ldw, ldw, x, y + r, cols, r + 2 * R <= rows ? w + (r + R) * ldw : nullptr);
  }
  if (r + 4 <= rows) {
    MatvecRows<Arch, 4, W>::Run(w + r * ldw, ldw, x, y + r, cols, nullptr);
    r += 4;
  }
  for (; r < rows; ++r) MatvecRows<Arch, 1, W>::Run(w + r * ldw, ldw, x, y + r, cols, nullptr);
}

template <class Arch, class W>
void Matmul(const W* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy, size_t rows, size_t cols,
            size_t n) {
  // A panel of R rows (R * cols floats, a few KiB to tens of KiB) stays in L1/L2
  // while every group of V vectors passes over it, so each weight row comes from
  // memory once for all n vectors. While a panel is computed, the next one is
  // prefetched, so the DRAM stream overlaps the arithmetic. 3 x 4 (12
  // accumulators, 4 vector registers) measured best of 4x3, 6x2, 4x2, 2x4, 4x4
  // and 8x1 for AVX2 and SSE2, in cache and from DRAM.
  constexpr size_t R = 3;
  constexpr size_t V = 4;
  size_t r = 0;
  const size_t groups = n / V + n % V;  // Tile calls per panel of rows
  for (; r + R <= rows; r += R) {
    const W* wr = w + r * ldw;
    // Group g prefetches rows [g*R/groups, (g+1)*R/groups) of the next panel, so
    // the DRAM stream is spread over the whole computation of this panel.
    const bool has_next = r + 2 * R <= rows;
    size_t g = 0, j = 0;
    for (; j + V <= n; j += V, ++g) {
      const size_t p0 = g * R / groups, p1 = (g + 1) * R / groups;
      Tile<Arch, R, V, W>::Run(wr, ldw, x + j * ldx, ldx, y + j * ldy + r, ldy, cols,
                                    has_next ? wr + (R + p0) * ldw : wr, has_next ? p1 - p0 : 0);
    }
    for (; j < n; ++j, ++g) {
      const size_t p0 = g * R / groups, p1 = (g + 1) * R / groups;
      Tile<Arch, R, 1, W>::Run(wr, ldw, x + j * ldx, ldx, y + j * ldy + r, ldy, cols,
                                    has_next ? wr + (R + p0) * ldw : wr, has_next ? p1 - p0 : 0);
    }
  }
  for (; r < rows; ++r) {
    const W* wr = w + r * ldw;
    size_t j = 0;
    for (; j + V <= n; j += V)
      Tile<Arch, 1, V, W>::Run(wr, ldw, x + j * ldx, ldx, y + j * ldy + r, ldy, cols, wr, 0);
    for (; j < n; ++j)
      Tile<Arch, 1, 1, W>::Run(wr, ldw, x + j * ldx, ldx, y + j * ldy + r, ldy, cols, wr, 0);
  }
}

}  // namespace detail
}  // namespace simd
}  // namespace kernels
}  // namespace tinyai

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "kernels/simd/matmul_f16_avx2.h"
#endif

namespace tinyai {
namespace kernels {
namespace simd {

template <class Arch>
void matvec_k::operator()(Arch, const float* w, size_t ldw, const float* x, float* y, size_t rows,
                          size_t cols) const {
  detail::Matvec<Arch, float>(w, ldw, x, y, rows, cols);
}

template <class Arch>
void matmul_k::operator()(Arch, const float* w, size_t ldw, const float* x, size_t ldx, float* y,
                          size_t ldy, size_t rows, size_t cols, size_t n) const {
  detail::Matmul<Arch, float>(w, ldw, x, ldx, y, ldy, rows, cols, n);
}

template <class Arch>
void matvec_f16_k::operator()(Arch, const uint8_t* w, size_t row_bytes, const float* x, float* y, size_t rows,
                              size_t cols) const {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(w);
  // AVX2, from kMatvecStreamBytes up: one row after the other (one stream
  // per thread). The 110M shape's f16 decode, 2 threads, alternated 8 times
  // with the side-by-side rows: 1.06x tokens/s (median of the pairs; 7 of 8
  // faster). fp32 gained nothing measurable (1.01x), and NEON is unmeasured:
  // both keep MatvecRows.
#if defined(__F16C__) && defined(__AVX2__)
  if constexpr (std::is_same<Arch, xsimd::fma3<xsimd::avx2>>::value || std::is_same<Arch, xsimd::avx512bw>::value) {
    if (rows * row_bytes >= kMatvecStreamBytes) {
      detail::MatvecStream<Arch, uint16_t>::Run(h, row_bytes / 2, x, y, rows, cols);
      return;
    }
  }
#endif
  detail::Matvec<Arch, uint16_t>(h, row_bytes / 2, x, y, rows, cols);
}

// Several vectors against f16 rows: widening the halves in every tile would
// convert each row once per group of vectors, so R rows are widened a chunk
// of columns at a time into a small fp32 buffer (24 KiB on the stack: 2048
// columns, the 110M shape's widest rows, in one chunk), and the fp32 tiles
// run over it for every vector, adding each chunk's dot products. The next
// panel's chunk is prefetched meanwhile. tinyai-bench-kernels, 1 thread,
// 8 vectors: 32000 x 768 from DRAM 11.8 ms before the prefetch, 8.1 ms after
// (fp32 9.6 ms); in cache f16 stays about 1.3x fp32's time (the widening is
// extra work where fp32 runs near the FMA peak); chunks of 512 and 256
// columns were slower than 2048.
template <class Arch>
void matmul_f16_k::operator()(Arch, const uint8_t* w, size_t row_bytes, const float* x, size_t ldx, float* y,
                              size_t ldy, size_t rows, size_t cols, size_t n) const {
  constexpr size_t R = 3, V = 4, K = 2048;
  const uint16_t* h = reinterpret_cast<const uint16_t*>(w);
  const size_t ldh = row_bytes / 2;
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  if constexpr (std::is_same<Arch, xsimd::fma3<xsimd::avx2>>::value) {
    if (n >= f16avx2::kMinInputs) {
      f16avx2::Matmul<Arch>(h, ldh, x, ldx, y, ldy, rows, cols, n);
      return;
    }
  }
#endif
  if (n < V) {  // too few vectors to repay the copy
    detail::Matmul<Arch, uint16_t>(h, ldh, x, ldx, y, ldy, rows, cols, n);
    return;
  }
  alignas(64) float buf[R * K];
  for (size_t r = 0; r < rows; r += R) {
    const size_t rr = rows - r < R ? rows - r : R;
    for (size_t c0 = 0; c0 < cols; c0 += K) {
      const size_t kc = cols - c0 < K ? cols - c0 : K;
      for (size_t i = 0; i < rr; ++i) {
        dequantize_f16_k{}(Arch{}, reinterpret_cast<const uint8_t*>(h + (r + i) * ldh + c0), buf + i * K, kc);
      }
      // The same chunk of the next panel's rows is on its way from memory
      // while the tiles below run (the fp32 Matmul's prefetch, done here).
      for (size_t i = r + R; i < r + 2 * R && i < rows; ++i) {
        for (size_t c = 0; c < kc; c += 32) detail::PrefetchL2<Arch>(h + i * ldh + c0 + c);
      }
      // The first chunk sets y, the others add to it.
      auto tiles = [&](auto add) {
        constexpr bool A = decltype(add)::value;
        const float* xc = x + c0;
        size_t j = 0;
        for (; j + V <= n; j += V) {
          if (rr == R) {
            detail::Tile<Arch, R, V, float, A>::Run(buf, K, xc + j * ldx, ldx, y + j * ldy + r, ldy, kc, buf, 0);
          } else {
            for (size_t i = 0; i < rr; ++i)
              detail::Tile<Arch, 1, V, float, A>::Run(buf + i * K, K, xc + j * ldx, ldx, y + j * ldy + r + i, ldy,
                                                      kc, buf, 0);
          }
        }
        for (; j < n; ++j)
          for (size_t i = 0; i < rr; ++i)
            detail::Tile<Arch, 1, 1, float, A>::Run(buf + i * K, K, xc + j * ldx, ldx, y + j * ldy + r + i, ldy, kc,
                                                    buf, 0);
      };
      if (c0 == 0) {
        tiles(std::false_type{});
      } else {
        tiles(std::true_type{});
      }
    }
  }
}

template <class Arch>
void dequantize_f16_k::operator()(Arch, const uint8_t* row, float* out, size_t cols) const {
  using B = detail::fbatch<Arch>;
  constexpr size_t S = B::size;
  const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
  size_t c = 0;
  for (; c + S <= cols; c += S) detail::Load<Arch>(h + c).store_unaligned(out + c);
  for (; c < cols; ++c) out[c] = detail::At<Arch>(h, c);
}

template <class Arch>
void vecmat_k::operator()(Arch, const float* a, const float* v, size_t ldv, float* out, size_t n,
                          size_t cols) const {
  // Column panels of P batches held in registers across all n rows, so out is
  // written once and each t accumulates in the same order as Ref(). Eight
  // batches first: on AVX2 a 64-column head row is one panel, read once in
  // order (four batches read each row in two strided passes), with eight
  // independent FMA chains, which cover the FMA latency (four did not).
  size_t c = 0;
  c = detail::VecmatPanels<Arch, 8>(a, v, ldv, out, n, c, cols);
  c = detail::VecmatPanels<Arch, 4>(a, v, ldv, out, n, c, cols);
  c = detail::VecmatPanels<Arch, 1>(a, v, ldv, out, n, c, cols);
  if (c < cols) {
    for (size_t k = c; k < cols; ++k) out[k] = 0.0f;
    for (size_t t = 0; t < n; ++t) {
      const float at = a[t];
      const float* vt = v + t * ldv;
      for (size_t k = c; k < cols; ++k) out[k] += at * vt[k];
    }
  }
}

template <class Arch>
float dot_k::operator()(Arch, const float* a, const float* b, size_t n) const {
  using B = detail::fbatch<Arch>;
  constexpr size_t S = B::size;
  B acc0(0.0f), acc1(0.0f), acc2(0.0f), acc3(0.0f);
  size_t i = 0;
  for (; i + 4 * S <= n; i += 4 * S) {
    acc0 = xsimd::fma(detail::Load<Arch>(a + i), detail::Load<Arch>(b + i), acc0);
    acc1 = xsimd::fma(detail::Load<Arch>(a + i + S), detail::Load<Arch>(b + i + S), acc1);
    acc2 = xsimd::fma(detail::Load<Arch>(a + i + 2 * S), detail::Load<Arch>(b + i + 2 * S), acc2);
    acc3 = xsimd::fma(detail::Load<Arch>(a + i + 3 * S), detail::Load<Arch>(b + i + 3 * S), acc3);
  }
  for (; i + S <= n; i += S)
    acc0 = xsimd::fma(detail::Load<Arch>(a + i), detail::Load<Arch>(b + i), acc0);
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return xsimd::hadd((acc0 + acc1) + (acc2 + acc3)) + tail;
}

template <class Arch>
void rmsnorm_k::operator()(Arch, const float* x, const float* w, float* out, size_t n,
                           float eps) const {
  using B = detail::fbatch<Arch>;
  constexpr size_t S = B::size;
  if (n == 0) return;
  // Pass 1: sum of squares.
  B acc0(0.0f), acc1(0.0f);
  size_t i = 0;
  for (; i + 2 * S <= n; i += 2 * S) {
    const B x0 = detail::Load<Arch>(x + i);
    const B x1 = detail::Load<Arch>(x + i + S);
    acc0 = xsimd::fma(x0, x0, acc0);
    acc1 = xsimd::fma(x1, x1, acc1);
  }
  for (; i + S <= n; i += S) {
    const B x0 = detail::Load<Arch>(x + i);
    acc0 = xsimd::fma(x0, x0, acc0);
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += x[i] * x[i];
  float ss = xsimd::hadd(acc0 + acc1) + tail;
  ss /= static_cast<float>(n);
  ss += eps;
  ss = 1.0f / sqrtf(ss);
  // Pass 2: out = w * (ss * x); out may alias x (each element read before written).
  const B scale(ss);
  i = 0;
  for (; i + S <= n; i += S) {
    const B xv = detail::Load<Arch>(x + i);
    (detail::Load<Arch>(w + i) * (scale * xv)).store_unaligned(out + i);
  }
  for (; i < n; ++i) out[i] = w[i] * (ss * x[i]);
}

template <class Arch>
void softmax_k::operator()(Arch, float* x, size_t n) const {
  using B = detail::fbatch<Arch>;
  constexpr size_t S = B::size;
  if (n == 0) return;
  // Pass 1: max.
  float max_val = x[0];
  size_t i = 0;
  if (n >= S) {
    B m = detail::Load<Arch>(x);
    for (i = S; i + S <= n; i += S) m = xsimd::max(m, detail::Load<Arch>(x + i));
    max_val = detail::HMax<Arch>(m);
  }
  for (; i < n; ++i) max_val = x[i] > max_val ? x[i] : max_val;
  // Pass 2: exp(x - max) and the sum.
  const B mv(max_val);
  B acc(0.0f);
  i = 0;
  for (; i + S <= n; i += S) {
    const B e = xsimd::exp(detail::Load<Arch>(x + i) - mv);
    e.store_unaligned(x + i);
    acc += e;
  }
  float tail = 0.0f;
  for (; i < n; ++i) {
    x[i] = expf(x[i] - max_val);
    tail += x[i];
  }
  const float sum = xsimd::hadd(acc) + tail;
  // Pass 3: normalize.
  const B sv(sum);
  i = 0;
  for (; i + S <= n; i += S) (detail::Load<Arch>(x + i) / sv).store_unaligned(x + i);
  for (; i < n; ++i) x[i] /= sum;
}

template <class Arch>
void swiglu_k::operator()(Arch, float* gate, const float* up, size_t n) const {
  using B = detail::fbatch<Arch>;
  constexpr size_t S = B::size;
  const B one(1.0f);
  size_t i = 0;
  for (; i + S <= n; i += S) {
    const B g = detail::Load<Arch>(gate + i);
    const B silu = g * (one / (one + xsimd::exp(-g)));
    (silu * detail::Load<Arch>(up + i)).store_unaligned(gate + i);
  }
  for (; i < n; ++i) {
    float v = gate[i];
    v *= 1.0f / (1.0f + expf(-v));
    gate[i] = v * up[i];
  }
}

template <class Arch>
void add_k::operator()(Arch, float* y, const float* x, size_t n) const {
  using B = detail::fbatch<Arch>;
  constexpr size_t S = B::size;
  size_t i = 0;
  for (; i + 2 * S <= n; i += 2 * S) {
    (detail::Load<Arch>(y + i) + detail::Load<Arch>(x + i)).store_unaligned(y + i);
    (detail::Load<Arch>(y + i + S) + detail::Load<Arch>(x + i + S)).store_unaligned(y + i + S);
  }
  for (; i + S <= n; i += S)
    (detail::Load<Arch>(y + i) + detail::Load<Arch>(x + i)).store_unaligned(y + i);
  for (; i < n; ++i) y[i] += x[i];
}

// ---- Tables ------------------------------------------------------------------------

// Plain functions with KernelTable's signatures, forwarding to the functors.
template <class Arch>
struct TableFns {
  static void Matvec(const float* w, size_t ldw, const float* x, float* y, size_t rows,
                     size_t cols) {
    matvec_k{}(Arch{}, w, ldw, x, y, rows, cols);
  }
  static void Matmul(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy,
                     size_t rows, size_t cols, size_t n) {
    matmul_k{}(Arch{}, w, ldw, x, ldx, y, ldy, rows, cols, n);
  }
  static void Vecmat(const float* a, const float* v, size_t ldv, float* out, size_t n,
                     size_t cols) {
    vecmat_k{}(Arch{}, a, v, ldv, out, n, cols);
  }
  static float Dot(const float* a, const float* b, size_t n) { return dot_k{}(Arch{}, a, b, n); }
  static void Rmsnorm(const float* x, const float* w, float* out, size_t n, float eps) {
    rmsnorm_k{}(Arch{}, x, w, out, n, eps);
  }
  static void Softmax(float* x, size_t n) { softmax_k{}(Arch{}, x, n); }
  static void Swiglu(float* gate, const float* up, size_t n) { swiglu_k{}(Arch{}, gate, up, n); }
  static void Add(float* y, const float* x, size_t n) { add_k{}(Arch{}, y, x, n); }

  // f32 weights: the fp32 products over the rows' bytes.
  static void MatvecF32(const uint8_t* w, size_t row_bytes, const float* x, float* y, size_t rows, size_t cols) {
    matvec_k{}(Arch{}, reinterpret_cast<const float*>(w), row_bytes / sizeof(float), x, y, rows, cols);
  }
  static void MatmulF32(const uint8_t* w, size_t row_bytes, const float* x, size_t ldx, float* y, size_t ldy,
                        size_t rows, size_t cols, size_t n) {
    matmul_k{}(Arch{}, reinterpret_cast<const float*>(w), row_bytes / sizeof(float), x, ldx, y, ldy, rows, cols, n);
  }
  static void DequantizeRowF32(const uint8_t* row, float* out, size_t cols) {
    memcpy(out, row, cols * sizeof(float));
  }
  static void MatvecF16(const uint8_t* w, size_t row_bytes, const float* x, float* y, size_t rows, size_t cols) {
    matvec_f16_k{}(Arch{}, w, row_bytes, x, y, rows, cols);
  }
  static void MatmulF16(const uint8_t* w, size_t row_bytes, const float* x, size_t ldx, float* y, size_t ldy,
                        size_t rows, size_t cols, size_t n) {
    matmul_f16_k{}(Arch{}, w, row_bytes, x, ldx, y, ldy, rows, cols, n);
  }
  static void DequantizeRowF16(const uint8_t* row, float* out, size_t cols) {
    dequantize_f16_k{}(Arch{}, row, out, cols);
  }

  // Block-sparse products of f32 (W = float) and f16 (W = uint16_t) weights
  // (WeightKernels::sparse_matmul). A band's rows hold their kept values
  // compactly, one after the other: the same rows a dense matrix of
  // kept_cols columns would have. So ForSparseBands (common/sparse.h)
  // gathers each input's values at a chunk of kept columns and this
  // table's dense matvec runs over the band's rows' chunk (a row's value
  // does not depend on n).
  static constexpr size_t kSparseChunk = 512;  // values: 2 KiB gathered, a multiple of every block

  template <class W>
  static void SparseMatmulFloat(const uint8_t* w, const SparseLayout& s, const void* x, size_t ldx, float* y,
                                size_t ldy, size_t bands, size_t n) {
    switch (s.block) {
      case 1: return SparseBands<W, 1>(w, s, static_cast<const float*>(x), ldx, y, ldy, bands, n);
      case 2: return SparseBands<W, 2>(w, s, static_cast<const float*>(x), ldx, y, ldy, bands, n);
      case 4: return SparseBands<W, 4>(w, s, static_cast<const float*>(x), ldx, y, ldy, bands, n);
      case 8: return SparseBands<W, 8>(w, s, static_cast<const float*>(x), ldx, y, ldy, bands, n);
      case 16: return SparseBands<W, 16>(w, s, static_cast<const float*>(x), ldx, y, ldy, bands, n);
      default: return SparseBands<W, 32>(w, s, static_cast<const float*>(x), ldx, y, ldy, bands, n);
    }
  }

  template <class W, size_t BS>
  static void SparseBands(const uint8_t* w, const SparseLayout& s, const float* x, size_t ldx, float* y, size_t ldy,
                          size_t bands, size_t n) {
    const size_t kept_cols = static_cast<size_t>(s.kept_cols);
    ForSparseBands<BS, kSparseChunk>(w, s, x, ldx, y, ldy, bands, n,
                                     [&](const uint8_t* rows, size_t nrows, size_t p0, size_t m, const float* g,
                                         float* part) {
                                       if constexpr (std::is_same<W, float>::value) {
                                         matvec_k{}(Arch{}, reinterpret_cast<const float*>(rows) + p0, kept_cols, g,
                                                    part, nrows, m);
                                       } else {
                                         matvec_f16_k{}(Arch{}, rows + p0 * sizeof(W), kept_cols * sizeof(W), g, part,
                                                        nrows, m);
                                       }
                                     });
  }

};

// Products for the grouped integer dtypes of an arch that has none of its
// own: the reference's.
struct RefGrouped {
  static constexpr void (*Quantizer())(const float*, size_t, InputGroup*) { return &ref::QuantizeInput; }
  static constexpr void (*Quantizer16())(const float*, size_t, InputGroup16*) { return &ref::QuantizeInput16; }
  template <int32_t DType>
  static constexpr WeightKernels Weights() {
    return ref::GroupedKernels<DType>();
  }
};

// The table for one arch; use in the per-arch file only, after
// TINYAI_KERNELS_INSTANTIATE(Arch). Grouped provides the grouped dtypes'
// products (as RefGrouped does).
template <class Arch, class Grouped = RefGrouped>
constexpr KernelTable MakeTable(const char* name) {
  return KernelTable{
      name,
      &TableFns<Arch>::Matvec,
      &TableFns<Arch>::Matmul,
      &TableFns<Arch>::Vecmat,
      &TableFns<Arch>::Dot,
      &TableFns<Arch>::Rmsnorm,
      &TableFns<Arch>::Softmax,
      &TableFns<Arch>::Swiglu,
      &TableFns<Arch>::Add,
      Grouped::Quantizer(),
      Grouped::Quantizer16(),
      {
          /* TINYAI_DTYPE_F32 */ {&TableFns<Arch>::MatvecF32, &TableFns<Arch>::MatmulF32,
                                  &TableFns<Arch>::DequantizeRowF32, nullptr, nullptr, kInputF32, nullptr, nullptr,
                                  &TableFns<Arch>::template SparseMatmulFloat<float>},
          /* TINYAI_DTYPE_F16 */ {&TableFns<Arch>::MatvecF16, &TableFns<Arch>::MatmulF16,
                                  &TableFns<Arch>::DequantizeRowF16, nullptr, nullptr, kInputF32, nullptr, nullptr,
                                  &TableFns<Arch>::template SparseMatmulFloat<uint16_t>},
          /* TINYAI_DTYPE_Q8_G32 */ Grouped::template Weights<TINYAI_DTYPE_Q8_G32>(),
          /* TINYAI_DTYPE_Q4_G32 */ Grouped::template Weights<TINYAI_DTYPE_Q4_G32>(),
          /* TINYAI_DTYPE_Q4NL_G32 */ Grouped::template Weights<TINYAI_DTYPE_Q4NL_G32>(),
          /* TINYAI_DTYPE_Q4_K */ Grouped::template Weights<TINYAI_DTYPE_Q4_K>(),
          /* TINYAI_DTYPE_Q5_K */ Grouped::template Weights<TINYAI_DTYPE_Q5_K>(),
          /* TINYAI_DTYPE_Q6_K */ Grouped::template Weights<TINYAI_DTYPE_Q6_K>(),
          /* TINYAI_DTYPE_Q5_G32 */ Grouped::template Weights<TINYAI_DTYPE_Q5_G32>(),
          /* TINYAI_DTYPE_Q5M_G32 */ Grouped::template Weights<TINYAI_DTYPE_Q5M_G32>(),
      },
  };
}

}  // namespace simd
}  // namespace kernels
}  // namespace tinyai

// Explicit instantiation of every functor for ARCH (a type name, e.g.
// xsimd::sse2). Use at namespace scope in exactly one per-arch file.
#define TINYAI_KERNELS_INSTANTIATE(ARCH)                                                         \
  template void tinyai::kernels::simd::matvec_k::operator()<ARCH>(                               \
      ARCH, const float*, size_t, const float*, float*, size_t, size_t) const;                   \
  template void tinyai::kernels::simd::matmul_k::operator()<ARCH>(                               \
      ARCH, const float*, size_t, const float*, size_t, float*, size_t, size_t, size_t, size_t)  \
      const;                                                                                     \
  template void tinyai::kernels::simd::vecmat_k::operator()<ARCH>(                               \
      ARCH, const float*, const float*, size_t, float*, size_t, size_t) const;                   \
  template float tinyai::kernels::simd::dot_k::operator()<ARCH>(ARCH, const float*, const float*, \
                                                                size_t) const;                   \
  template void tinyai::kernels::simd::rmsnorm_k::operator()<ARCH>(                              \
      ARCH, const float*, const float*, float*, size_t, float) const;                            \
  template void tinyai::kernels::simd::softmax_k::operator()<ARCH>(ARCH, float*, size_t) const;  \
  template void tinyai::kernels::simd::swiglu_k::operator()<ARCH>(ARCH, float*, const float*,    \
                                                                  size_t) const;                 \
  template void tinyai::kernels::simd::add_k::operator()<ARCH>(ARCH, float*, const float*, size_t) \
      const;                                                                                     \
  template void tinyai::kernels::simd::matvec_f16_k::operator()<ARCH>(                           \
      ARCH, const uint8_t*, size_t, const float*, float*, size_t, size_t) const;                 \
  template void tinyai::kernels::simd::matmul_f16_k::operator()<ARCH>(                           \
      ARCH, const uint8_t*, size_t, const float*, size_t, float*, size_t, size_t, size_t, size_t) \
      const;                                                                                     \
  template void tinyai::kernels::simd::dequantize_f16_k::operator()<ARCH>(ARCH, const uint8_t*,  \
                                                                         float*, size_t) const

#endif  // TINYAI_KERNELS_SIMD_KERNELS_SIMD_H_
