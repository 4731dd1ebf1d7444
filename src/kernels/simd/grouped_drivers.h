// The grouped dtypes' products (q8_g32, q4_g32, q4nl_g32; src/common/groups.h),
// driven once for every instruction set: each driver here is a template on a
// micro-kernel type MK that a per-ISA header supplies (grouped_avx2.h,
// grouped_avx512.h, grouped_neon.h) and that does the arithmetic of one step
// - a group decoded, a group's product with an input added, a panel group
// against J inputs, a group of the input quantized. The drivers hold the
// loops, the tails, the order of the sums, the prefetches and the tables;
// they use no intrinsic. src/kernels/README.md says what a micro-kernel
// provides and where a new dtype or ISA goes.
//
// Include only from a per-ISA header (after it has defined its MK): a driver
// instantiated with an MK compiled under some -m flags is code for those
// flags, and MK lives in the inline namespace of its flag set (simd/isa.h),
// so the instantiations of two ISAs never share a symbol.
#ifndef TINYAI_KERNELS_SIMD_GROUPED_DRIVERS_H_
#define TINYAI_KERNELS_SIMD_GROUPED_DRIVERS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/groups.h"
#include "common/panels.h"
#include "common/sparse.h"
#include "kernels/kernels.h"
#include "kernels/ref/kernels_ref.h"

namespace tinyai {
namespace kernels {
namespace grouped {

using MatvecFn = void (*)(const uint8_t*, size_t, const void*, float*, size_t, size_t);
using MatmulFn = void (*)(const uint8_t*, size_t, const void*, size_t, float*, size_t, size_t, size_t, size_t);
using DequantizeFn = void (*)(const uint8_t*, float*, size_t);
template <int32_t DType>
using MatmulFirstFn = size_t (*)(const uint8_t*, size_t, const InputGroupOf<DType>*, size_t, float*, size_t, size_t,
                                 size_t, size_t);

// Whether a micro-kernel names a product of its own: its Own...() returns a
// function pointer, not std::nullptr_t. Told by the type, not by comparing
// the pointer with null, which GCC does not take as a constant expression
// under -fsanitize=undefined.
template <class OwnFn>
constexpr bool Has() {
  return !std::is_null_pointer<OwnFn>::value;
}

// What a micro-kernel does not say, a micro-kernel MK derives from
// Defaults<MK> (a template on MK, so that each ISA's copy is its own): no
// row prefetch, row tiles of four and two inputs, every row at once in a
// matmul, the drivers' matvec and matmul, no panels, the reference's
// quantizer and q8 widening.
template <class MK>
struct Defaults {
  static void Prefetch(const uint8_t*) {}
  template <int32_t DType>
  static constexpr size_t AheadRows() {
    return 0;
  }
  template <int32_t DType>
  static constexpr unsigned RowTiles() {
    return 4u | 2u;
  }
  static constexpr size_t kMatmulPanelBytes = 0;
  template <int32_t DType>
  static constexpr std::nullptr_t OwnMatvec() {
    return nullptr;
  }
  template <int32_t DType>
  static constexpr std::nullptr_t OwnMatmul() {
    return nullptr;
  }
  template <int32_t DType>
  static constexpr std::nullptr_t OwnMatmulFirst() {
    return nullptr;
  }
  // A matvec for a matmul's row panels, one input at a time, where it is not
  // the table's (rows in cache may want another blocking than rows from
  // DRAM).
  template <int32_t DType>
  static constexpr std::nullptr_t OwnPanelMatvec() {
    return nullptr;
  }
  template <int32_t DType>
  static constexpr bool Panels() {
    return false;
  }
  static constexpr bool kQuantizer = false;
  static constexpr bool kDequantizeQ8 = false;
  // Whether MK has a WeightGroup<DType> (else the table takes the
  // reference's products for DType).
  template <int32_t DType>
  static constexpr bool HasDType() {
    return DType == TINYAI_DTYPE_Q8_G32 || DType == TINYAI_DTYPE_Q4_G32 || DType == TINYAI_DTYPE_Q4NL_G32;
  }
};

// ---- Rows, one after the other ------------------------------------------------------------
//
// MK::Acc, MK::Zero(), MK::Sum(Acc, Acc) -> float; MK::WeightGroup<DType>
// (constructed from a block's bytes - a group of 32, or a K-quant's 256
// values: its codes decoded once for every input it meets, or where they
// are too many to hold, its factors); MK::template AddGroup<DType>(Acc, const
// WeightGroup<DType>&, const InputGroupOf<DType>&) -> Acc: the block's
// integer products with the input (a K-quant: the 8 input groups from the
// one given on), converted and scaled by d_w * d_x, added; MK::Prefetch(p)
// for a row ahead.

// One row against J inputs (input j at x + j * ldx groups), y[j * ldy]. Two
// accumulator chains a input, even and odd groups, summed at the end: the
// arithmetic, and its order, of an input does not depend on J, so a row of a
// matmul equals its matvec bit for bit. When ahead is not null the bytes of
// the row there (AheadRows() on) are prefetched group by group. Always
// inlined: a call a row (GCC kept AVX-512's four-input tile apart) cost
// matmul_q q8_g32 n:8 8% on 2048x768 in cache against the row loop it
// replaced.
template <class MK, int32_t DType, size_t J>
__attribute__((always_inline)) inline void RowTile(const uint8_t* row, const uint8_t* ahead, const InputGroupOf<DType>* x, size_t ldx, float* y,
                    size_t ldy, size_t groups) {
  using Acc = typename MK::Acc;
  using Weights = typename MK::template WeightGroup<DType>;
  constexpr size_t kBytes = GroupBytes(DType);
  // Input groups of 32 a block meets (a K-quant's 256 values: 8; AddGroup
  // then reads the 8 from the one it is given on).
  constexpr size_t kPer = BlockValues(DType) / kGroup;
  Acc acc0[J], acc1[J];
  for (size_t j = 0; j < J; ++j) acc0[j] = acc1[j] = MK::Zero();
  size_t g = 0;
  for (; g + 2 <= groups; g += 2) {
    if (ahead != nullptr) {
      MK::Prefetch(ahead + g * kBytes);
      MK::Prefetch(ahead + (g + 1) * kBytes);
    }
    const Weights w0(row + g * kBytes), w1(row + (g + 1) * kBytes);
    for (size_t j = 0; j < J; ++j) {
      acc0[j] = MK::template AddGroup<DType>(acc0[j], w0, x[j * ldx + g * kPer]);
      acc1[j] = MK::template AddGroup<DType>(acc1[j], w1, x[j * ldx + (g + 1) * kPer]);
    }
  }
  if (g < groups) {
    if (ahead != nullptr) MK::Prefetch(ahead + g * kBytes);
    const Weights w0(row + g * kBytes);
    for (size_t j = 0; j < J; ++j) acc0[j] = MK::template AddGroup<DType>(acc0[j], w0, x[j * ldx + g * kPer]);
  }
  for (size_t j = 0; j < J; ++j) y[j * ldy] = MK::Sum(acc0[j], acc1[j]);
}

// matvec_q: one row after the other, each thread's rows one sequential stream
// (several rows side by side ran at a third of the bandwidth from DRAM on
// AVX2). MK::AheadRows<DType>() rows on are prefetched (0: none; rows of a
// few KB are streams too short for the hardware prefetcher).
template <class MK, int32_t DType>
void MatvecQ(const uint8_t* w, size_t row_bytes, const void* input, float* y, size_t rows, size_t cols) {
  const InputGroupOf<DType>* x = static_cast<const InputGroupOf<DType>*>(input);
  constexpr size_t kAhead = MK::template AheadRows<DType>();
  const size_t groups = BlocksPerRow(DType, cols);
  for (size_t r = 0; r < rows; ++r) {
    const uint8_t* row = w + r * row_bytes;
    const uint8_t* ahead = kAhead > 0 && r + kAhead < rows ? row + kAhead * row_bytes : nullptr;
    RowTile<MK, DType, 1>(row, ahead, x, 0, y + r, 0, groups);
  }
}

// The matvec of the table: MK's own for dtypes where another blocking pays
// (MK::OwnMatvec<DType>() a function, not nullptr), else the driver's.
template <class MK, int32_t DType>
constexpr MatvecFn Matvec() {
  if constexpr (Has<decltype(MK::template OwnMatvec<DType>())>()) {
    return MK::template OwnMatvec<DType>();
  } else {
    return &MatvecQ<MK, DType>;
  }
}

// The matvec of a matmul's row panels: MK::OwnPanelMatvec<DType>() where it
// names one, else the table's.
template <class MK, int32_t DType>
constexpr MatvecFn PanelMatvec() {
  if constexpr (Has<decltype(MK::template OwnPanelMatvec<DType>())>()) {
    return MK::template OwnPanelMatvec<DType>();
  } else {
    return Matvec<MK, DType>();
  }
}

// matmul_q: several inputs against the rows. MK::OwnMatmulFirst<DType>()
// (when not null) takes the inputs it wants first and returns how many
// (AVX-512: q8_g32 inputs in the lanes, 12 or more); the rest go through the
// rows in panels of MK::kMatmulPanelBytes (0: all the rows at once), which
// stay in cache while every input meets them: RowTile of four inputs, then
// of two, where MK::RowTiles<DType>() has bit 4 or 2 set, then the matvec
// (PanelMatvec), one input at a time.
template <class MK, int32_t DType>
void MatmulQ(const uint8_t* w, size_t row_bytes, const void* input, size_t ldx, float* y, size_t ldy, size_t rows,
             size_t cols, size_t n) {
  using In = InputGroupOf<DType>;
  const In* x = static_cast<const In*>(input);
  size_t first = 0;
  if constexpr (Has<decltype(MK::template OwnMatmulFirst<DType>())>()) {
    first = MK::template OwnMatmulFirst<DType>()(w, row_bytes, x, ldx, y, ldy, rows, cols, n);
    if (first >= n) return;
  }
  constexpr unsigned kTiles = MK::template RowTiles<DType>();
  const size_t groups = BlocksPerRow(DType, cols);
  size_t panel = rows;
  if (MK::kMatmulPanelBytes > 0) {
    panel = MK::kMatmulPanelBytes / (row_bytes == 0 ? 1 : row_bytes);
    if (panel == 0) panel = 1;
  }
  for (size_t r0 = 0; r0 < rows; r0 += panel) {
    const size_t count = rows - r0 < panel ? rows - r0 : panel;
    const uint8_t* wp = w + r0 * row_bytes;
    size_t j = first;
    if constexpr ((kTiles & 4u) != 0) {
      for (; j + 4 <= n; j += 4) {
        for (size_t r = 0; r < count; ++r)
          RowTile<MK, DType, 4>(wp + r * row_bytes, nullptr, x + j * ldx, ldx, y + j * ldy + r0 + r, ldy, groups);
      }
    }
    if constexpr ((kTiles & 2u) != 0) {
      for (; j + 2 <= n; j += 2) {
        for (size_t r = 0; r < count; ++r)
          RowTile<MK, DType, 2>(wp + r * row_bytes, nullptr, x + j * ldx, ldx, y + j * ldy + r0 + r, ldy, groups);
      }
    }
    for (; j < n; ++j) PanelMatvec<MK, DType>()(wp, row_bytes, x + j * ldx, y + j * ldy + r0, count, cols);
  }
}

template <class MK, int32_t DType>
constexpr MatmulFn Matmul() {
  if constexpr (Has<decltype(MK::template OwnMatmul<DType>())>()) {
    return MK::template OwnMatmul<DType>();
  } else {
    return &MatmulQ<MK, DType>;
  }
}

// ---- Panels of a 4-bit dtype (common/panels.h) ------------------------------------------
//
// MK::PanelTile<DType, J>: the constants of a panel product (built once a
// call), Begin() (an empty sum for the panel's eight rows and J inputs),
// Group(b, g, x, ldx) (panel group g at b: its codes and scales decoded once
// and met by the J inputs' group g), End(y, ldy) (y[j * ldy + r], rows in
// order); MK::kPanelPrefetchBytes and MK::PrefetchPanel(p) (into L2).

// Panels against J inputs (input j at x + j * ldx groups): y[j*ldy + r].
template <class MK, int32_t DType, size_t J>
void PanelsTile(const uint8_t* w, size_t row_bytes, const InputGroup* x, size_t ldx, float* y, size_t ldy,
                size_t panels, size_t cols) {
  const size_t groups = GroupsPerRow(cols);
  typename MK::template PanelTile<DType, J> tile;
  const uint8_t* end = w + panels * PanelBytes(row_bytes);
  for (size_t p = 0; p < panels; ++p) {
    const uint8_t* b = w + p * PanelBytes(row_bytes);
    tile.Begin();
    for (size_t g = 0; g < groups; ++g, b += kPanelGroupBytes) {
      if (b + MK::kPanelPrefetchBytes + kPanelGroupBytes <= end) MK::PrefetchPanel(b + MK::kPanelPrefetchBytes);
      tile.Group(b, g, x, ldx);
    }
    tile.End(y + p * kPanelRows, ldy);
  }
}

template <class MK, int32_t DType>
void MatvecPanels(const uint8_t* w, size_t row_bytes, const void* x, float* y, size_t panels, size_t cols) {
  PanelsTile<MK, DType, 1>(w, row_bytes, static_cast<const InputGroup*>(x), 0, y, 0, panels, cols);
}

// Panels against n inputs, MK::kPanelInputs at a time (each panel read from
// cache once for them, its codes decoded once), then fewer (ForPanelInputs).
template <class MK, int32_t DType>
void MatmulPanels(const uint8_t* w, size_t row_bytes, const void* input, size_t ldx, float* y, size_t ldy,
                  size_t panels, size_t cols, size_t n) {
  const InputGroup* x = static_cast<const InputGroup*>(input);
  ForPanelInputs<MK::kPanelInputs>(n, [&](auto inputs, size_t j) {
    PanelsTile<MK, DType, decltype(inputs)::value>(w, row_bytes, x + j * ldx, ldx, y + j * ldy, ldy, panels, cols);
  });
}

// ---- The input quantizer ---------------------------------------------------------------
//
// MK::Codes; MK::QuantizeGroup(src, n, top, Codes*, float* d): n <= 32 values
// (zero past n) as the reference quantizes them - the same max, the same
// top / max, the product rounded to nearest even - false (out untouched) for
// a group holding an infinity or NaN; MK::StoreCodes(const Codes&,
// InputGroup*) (int8 codes and their sum) and (..., InputGroup16*).

// The groups of x in Group's form; a group holding an infinity or NaN goes to
// the reference (NaN scale, zero codes).
template <class MK, class Group>
inline void QuantizeGroups(const float* x, size_t cols, float top, Group* out,
                           void (*reference)(const float*, size_t, Group*)) {
  const size_t groups = GroupsPerRow(cols);
  for (size_t g = 0; g < groups; ++g) {
    const size_t first = g * kGroup, n = cols - first < kGroup ? cols - first : kGroup;
    typename MK::Codes q;
    if (MK::QuantizeGroup(x + first, n, top, &q, &out[g].d)) {
      MK::StoreCodes(q, out + g);
    } else {
      reference(x + first, n, out + g);
    }
  }
}

template <class MK>
void QuantizeInput(const float* x, size_t cols, InputGroup* out) {
  QuantizeGroups<MK>(x, cols, 127.0f, out, &ref::QuantizeInput);
}

template <class MK>
void QuantizeInput16(const float* x, size_t cols, InputGroup16* out) {
  QuantizeGroups<MK>(x, cols, 32767.0f, out, &ref::QuantizeInput16);
}

// ---- Rows widened to fp32 ----------------------------------------------------------------
//
// MK::DequantizeGroupQ8(group, out): a whole q8_g32 group's 32 values, d *
// code exactly as the reference computes them.

// A row of q8_g32 groups widened to fp32 (an int8 KV cache's value rows, a q8
// embedding row): the reference's values bit for bit.
template <class MK>
void DequantizeRowQ8(const uint8_t* row, float* out, size_t cols) {
  const size_t whole = cols / kGroup;
  for (size_t g = 0; g < whole; ++g) MK::DequantizeGroupQ8(row + g * kQ8GroupBytes, out + g * kGroup);
  if (whole * kGroup < cols) {
    ref::DequantizeRowQ<TINYAI_DTYPE_Q8_G32>(row + whole * kQ8GroupBytes, out + whole * kGroup, cols - whole * kGroup);
  }
}

// ---- Block-sparse bands (common/sparse.h) ----------------------------------------------
//
// A band's rows hold their kept values as dense rows of kept_cols values
// would, in groups of 32: ForSparseBands (common/sparse.h) gathers each
// input's values at a chunk of kept columns (fp32), they are quantized in
// groups of 32 over the kept values (the table's quantizer, as for a dense
// product), and the table's matvec runs the band's rows against them - the
// dense product of the stored rows. One input at a time, so a row's value
// does not depend on n (a table's matmul may sum in another order than its
// matvec: AVX2's q8).

constexpr size_t kSparseChunk = 1024;  // kept values: 32 groups

template <class MK, int32_t DType>
inline void QuantizeKept(const float* x, size_t m, InputGroupOf<DType>* out) {
  if constexpr (InputFormOf(DType) == kInputInt16) {
    if constexpr (MK::kQuantizer) {
      QuantizeInput16<MK>(x, m, out);
    } else {
      ref::QuantizeInput16(x, m, out);
    }
  } else {
    if constexpr (MK::kQuantizer) {
      QuantizeInput<MK>(x, m, out);
    } else {
      ref::QuantizeInput(x, m, out);
    }
  }
}

template <class MK, int32_t DType, size_t BS>
void SparseBandsQ(const uint8_t* w, const SparseLayout& s, const float* x, size_t ldx, float* y, size_t ldy,
                  size_t bands, size_t n) {
  constexpr size_t kBytes = GroupBytes(DType);
  const size_t row_bytes = static_cast<size_t>(s.kept_row_bytes);
  alignas(64) InputGroupOf<DType> q[kSparseChunk / kGroup];
  ForSparseBands<BS, kSparseChunk>(w, s, x, ldx, y, ldy, bands, n,
                                   [&](const uint8_t* rows, size_t nrows, size_t p0, size_t m, const float* g,
                                       float* part) {
                                     QuantizeKept<MK, DType>(g, m, q);
                                     Matvec<MK, DType>()(rows + (p0 / kGroup) * kBytes, row_bytes, q, part, nrows, m);
                                   });
}

template <class MK, int32_t DType>
void SparseMatmulQ(const uint8_t* w, const SparseLayout& s, const void* input, size_t ldx, float* y, size_t ldy,
                   size_t bands, size_t n) {
  const float* x = static_cast<const float*>(input);
  switch (s.block) {
    case 1: return SparseBandsQ<MK, DType, 1>(w, s, x, ldx, y, ldy, bands, n);
    case 2: return SparseBandsQ<MK, DType, 2>(w, s, x, ldx, y, ldy, bands, n);
    case 4: return SparseBandsQ<MK, DType, 4>(w, s, x, ldx, y, ldy, bands, n);
    case 8: return SparseBandsQ<MK, DType, 8>(w, s, x, ldx, y, ldy, bands, n);
    case 16: return SparseBandsQ<MK, DType, 16>(w, s, x, ldx, y, ldy, bands, n);
    default: return SparseBandsQ<MK, DType, 32>(w, s, x, ldx, y, ldy, bands, n);
  }
}

// ---- The table's entries -------------------------------------------------------------------
//
// MK::kQuantizer (the micro-kernel quantizes inputs; else the reference's),
// MK::kDequantizeQ8 (it widens q8 rows; else the reference's),
// MK::Panels<DType>() (it has panel products for DType).
template <class MK>
struct Table {
  using QuantizeFn = void (*)(const float*, size_t, InputGroup*);
  using Quantize16Fn = void (*)(const float*, size_t, InputGroup16*);
  static constexpr QuantizeFn Quantizer() {
    if constexpr (MK::kQuantizer) {
      return &QuantizeInput<MK>;
    } else {
      return &ref::QuantizeInput;
    }
  }
  static constexpr Quantize16Fn Quantizer16() {
    if constexpr (MK::kQuantizer) {
      return &QuantizeInput16<MK>;
    } else {
      return &ref::QuantizeInput16;
    }
  }

  template <int32_t DType>
  static constexpr DequantizeFn Dequantize() {
    if constexpr (DType == TINYAI_DTYPE_Q8_G32 && MK::kDequantizeQ8) {
      return &DequantizeRowQ8<MK>;
    } else {
      return &ref::DequantizeRowQ<DType>;
    }
  }
  template <int32_t DType>
  static constexpr MatvecFn Panels() {
    if constexpr (PanelDType(DType) && MK::template Panels<DType>()) {
      return &MatvecPanels<MK, DType>;
    } else {
      return nullptr;
    }
  }
  template <int32_t DType>
  static constexpr MatmulFn PanelsMatmul() {
    if constexpr (PanelDType(DType) && MK::template Panels<DType>()) {
      return &MatmulPanels<MK, DType>;
    } else {
      return nullptr;
    }
  }
  template <int32_t DType>
  static constexpr WeightKernels Weights() {
    if constexpr (IsSuperBlockDType(DType) && MK::template HasDType<DType>()) {  // no block-sparse K-quant
      return WeightKernels{nullptr, nullptr, Dequantize<DType>(), Matvec<MK, DType>(), Matmul<MK, DType>(),
                           InputFormOf(DType), nullptr, nullptr, nullptr};
    } else if constexpr (MK::template HasDType<DType>()) {
      return WeightKernels{nullptr, nullptr, Dequantize<DType>(), Matvec<MK, DType>(), Matmul<MK, DType>(),
                           InputFormOf(DType), Panels<DType>(), PanelsMatmul<DType>(), &SparseMatmulQ<MK, DType>};
    } else {
      return ref::GroupedKernels<DType>();  // no micro-kernel step for DType yet
    }
  }
};

// A table derived from another (VNNI from AVX-512, sdot from NEON): base's
// kernels under name, with Grouped's weight products for DTypes.
template <class Grouped, int32_t... DTypes>
KernelTable DeriveTable(const KernelTable& base, const char* name) {
  KernelTable t = base;
  t.name = name;
  ((t.weights[DTypes] = Grouped::template Weights<DTypes>()), ...);
  return t;
}

}  // namespace grouped
}  // namespace kernels
}  // namespace tinyai

#endif  // TINYAI_KERNELS_SIMD_GROUPED_DRIVERS_H_
