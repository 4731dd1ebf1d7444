// Compute kernels, as a table of function pointers chosen once at start-up:
// Ref() is the plain scalar oracle (src/kernels/ref/), Best() the fastest
// xsimd instantiation this CPU supports (src/kernels/simd/).
//
// Activations are fp32. Weights may be any dtype the table has products for
// (WeightKernels, one per TinyAIDType): they are read as bytes, a row
// `row_bytes` after the last as the format lays them out. Products with f32
// and f16 weights compute in fp32; products with grouped integer weights
// (q8_g32, q4_g32, q4nl_g32; src/common/groups.h) take the input quantized
// to int8 groups once (KernelTable::quantize_input), multiply integers and
// apply one float scale per group.
//
// Conventions: fp32 matrices are row-major with a row stride (ld*, in
// elements); pointers need no particular alignment; sizes may be any value
// >= 0 (tails are handled); outputs never alias inputs unless stated.
#ifndef TINYAI_KERNELS_KERNELS_H_
#define TINYAI_KERNELS_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "common/groups.h"
#include "common/sparse.h"
#include "tinyai/types.h"

namespace tinyai {
namespace kernels {

// Products with a weight matrix of one dtype. A float dtype has matvec and
// matmul, a grouped one matvec_q and matmul_q (the others null); a table
// that lacks a dtype has null functions for it (WeightKernelsFor() returns
// nullptr).
struct WeightKernels {
  // y[r] = dot(row r, x) over cols values, for r < rows; row r starts at
  // w + r * row_bytes.
  void (*matvec)(const uint8_t* w, size_t row_bytes, const float* x, float* y, size_t rows, size_t cols);
  // y[j*ldy + r] = dot(row r, x + j*ldx) for r < rows, j < n, each row read
  // from memory once.
  void (*matmul)(const uint8_t* w, size_t row_bytes, const float* x, size_t ldx, float* y, size_t ldy,
                 size_t rows, size_t cols, size_t n);
  // out[c] = value c of one row, in fp32, for c < cols (an embedding's row).
  void (*dequantize_row)(const uint8_t* row, float* out, size_t cols);
  // As matvec and matmul, with x quantized in the form `input` names
  // (InputGroup for kInputInt8, InputGroup16 for kInputInt16; src/common/groups.h):
  // GroupsPerRow(cols) groups per input vector, input j starting j*ldx groups
  // after x. Per group the integer dot product of the codes and x.q, times
  // the weights' scale and x.d, summed over the groups in fp32.
  void (*matvec_q)(const uint8_t* w, size_t row_bytes, const void* x, float* y, size_t rows, size_t cols);
  void (*matmul_q)(const uint8_t* w, size_t row_bytes, const void* x, size_t ldx, float* y, size_t ldy,
                   size_t rows, size_t cols, size_t n);
  InputForm input;  // kInputF32 for matvec/matmul
  // As matvec_q for rows held in panels (common/panels.h): `panels` panels
  // from w, kPanelRows * row_bytes bytes each, give y[0, panels * kPanelRows).
  // Null where the table has no faster product for panels than for rows
  // (the weight cache then keeps the row layout). Sums in another order
  // than matvec_q: equal to it within fp32 rounding, not bit for bit.
  void (*matvec_panels)(const uint8_t* w, size_t row_bytes, const void* x, float* y, size_t panels, size_t cols);
  // As matvec_panels for n inputs, input j starting j*ldx groups after x:
  // y[j*ldy + r], each panel read once for several inputs. Null where the
  // table has none (callers then take one input at a time); equal to
  // matvec_panels input by input within fp32 rounding.
  void (*matmul_panels)(const uint8_t* w, size_t row_bytes, const void* x, size_t ldx, float* y, size_t ldy,
                        size_t panels, size_t cols, size_t n);
  // Block-sparse products (common/sparse.h; the weights of s.dtype, this
  // entry's dtype): `bands` bands of s.band_bytes from w give
  // y[j*ldy + b*s.block + i] for b < bands, i < s.block (every row of a
  // band, a short last band's padding rows included: they are zero), j < n.
  // x is fp32 for every dtype (input j at x + j*ldx floats; read at columns
  // < s.cols only); the sums are those sparse.h writes out, in fp32, each
  // band read from memory once for all n inputs, and a row's value does not
  // depend on n. Every table has it for every dtype it has products for:
  // a band's kept inputs are gathered into a compact vector and the table's
  // own dense product runs over the band's rows (the grouped dtypes
  // quantize the gathered vector first, with the table's quantizer).
  void (*sparse_matmul)(const uint8_t* w, const SparseLayout& s, const void* x, size_t ldx, float* y, size_t ldy,
                        size_t bands, size_t n);

  bool quantized_input() const { return input != kInputF32; }
};

// TinyAIDType values a table can have weight products for.
constexpr int kWeightDtypes = 10;

// A WeightKernels::matvec call over at least this many bytes of rows may
// read them by another schedule than a smaller one (the AVX2 f16 kernel
// streams them one row after the other); tests cover both sides.
constexpr size_t kMatvecStreamBytes = 64 * 1024;

// Rows of at most this many bytes that follow each other in memory (ldw ==
// cols: a head's keys in the KV cache) are read one after the other by the
// SIMD matvec, as one sequential stream, instead of 8 rows side by side.
constexpr size_t kMatvecInOrderBytes = 256;

struct KernelTable {
  const char* name;  // "ref", "sse2", "avx2+fma", "neon64", "neon", ...

  // y[r] = dot(w + r*ldw, x, cols) for r < rows.
  void (*matvec)(const float* w, size_t ldw, const float* x, float* y, size_t rows, size_t cols);

  // y[j*ldy + r] = dot(w + r*ldw, x + j*ldx, cols) for r < rows, j < n:
  // n input vectors against the same rows, each row read from memory once.
  void (*matmul)(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy,
                 size_t rows, size_t cols, size_t n);

  // out[c] = sum over t < n of a[t] * v[t*ldv + c], for c < cols (out is overwritten).
  void (*vecmat)(const float* a, const float* v, size_t ldv, float* out, size_t n, size_t cols);

  float (*dot)(const float* a, const float* b, size_t n);

  // out[i] = w[i] * x[i] / sqrt(mean(x^2) + eps). out may alias x.
  void (*rmsnorm)(const float* x, const float* w, float* out, size_t n, float eps);

  // x = exp(x - max(x)) / sum, in place.
  void (*softmax)(float* x, size_t n);

  // gate[i] = silu(gate[i]) * up[i], silu(v) = v / (1 + exp(-v)).
  void (*swiglu)(float* gate, const float* up, size_t n);

  // y[i] += x[i].
  void (*add)(float* y, const float* x, size_t n);

  // The cols values of x as GroupsPerRow(cols) InputGroups for the int8
  // products: per group d = max|x| / 127 and q = x * (127 / max|x|) rounded
  // to nearest, ties to even (all zero when the group is; a group holding an
  // infinity or NaN gets d = NaN and zero codes, so products with it are
  // NaN). quantize_input16 likewise as InputGroup16s with 32767 for 127.
  // Every table writes the same bytes as Ref().
  void (*quantize_input)(const float* x, size_t cols, InputGroup* out);
  void (*quantize_input16)(const float* x, size_t cols, InputGroup16* out);

  // Weight products, indexed by TinyAIDType.
  WeightKernels weights[kWeightDtypes];
};

// The products for weights of dtype in table, or nullptr when the table has
// none (an unknown dtype, or one it has no products for).
const WeightKernels* WeightKernelsFor(const KernelTable& table, int32_t dtype);

const KernelTable& Ref();

// The best table for the running CPU (resolved once, thread-safe), or the
// one TINYAI_KERNELS names in the environment (dispatch.cc).
const KernelTable& Best();

// A table by name ("ref", "best", or a name above), or nullptr when that
// instantiation is not built or not supported by the running CPU.
const KernelTable* ByName(const char* name);

// Names of every table built into this library and runnable on this CPU,
// best first; returns how many (at most capacity are written).
size_t AvailableTables(const KernelTable** out, size_t capacity);

}  // namespace kernels
}  // namespace tinyai

#endif  // TINYAI_KERNELS_KERNELS_H_
