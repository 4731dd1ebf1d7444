// Plain scalar kernels: the oracle every SIMD table is tested against.
// Keep these obviously correct; they follow llama2.c's fp32 arithmetic
// (dot products accumulated left to right in float).
#include <cmath>
#include <cstring>

#include "common/half.h"
#include "kernels/kernels.h"

namespace tinyai {
namespace kernels {
namespace {

float RefDot(const float* a, const float* b, size_t n) {
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void RefMatvec(const float* w, size_t ldw, const float* x, float* y, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; ++r) y[r] = RefDot(w + r * ldw, x, cols);
}

void RefMatmul(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy,
               size_t rows, size_t cols, size_t n) {
  for (size_t j = 0; j < n; ++j) {
    for (size_t r = 0; r < rows; ++r) y[j * ldy + r] = RefDot(w + r * ldw, x + j * ldx, cols);
  }
}

void RefVecmat(const float* a, const float* v, size_t ldv, float* out, size_t n, size_t cols) {
  for (size_t c = 0; c < cols; ++c) out[c] = 0.0f;
  for (size_t t = 0; t < n; ++t) {
    const float at = a[t];
    const float* vt = v + t * ldv;
    for (size_t c = 0; c < cols; ++c) out[c] += at * vt[c];
  }
}

void RefRmsnorm(const float* x, const float* w, float* out, size_t n, float eps) {
  if (n == 0) return;
  float ss = 0.0f;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  ss /= static_cast<float>(n);
  ss += eps;
  ss = 1.0f / std::sqrt(ss);
  for (size_t i = 0; i < n; ++i) out[i] = w[i] * (ss * x[i]);
}

void RefSoftmax(float* x, size_t n) {
  if (n == 0) return;
  float max_val = x[0];
  for (size_t i = 1; i < n; ++i) {
    if (x[i] > max_val) max_val = x[i];
  }
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_val);
    sum += x[i];
  }
  for (size_t i = 0; i < n; ++i) x[i] /= sum;
}

void RefSwiglu(float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float v = gate[i];
    v *= 1.0f / (1.0f + std::exp(-v));
    gate[i] = v * up[i];
  }
}

void RefAdd(float* y, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += x[i];
}

// ---- f32 weights: the fp32 kernels over the rows' bytes ----

void RefMatvecF32(const uint8_t* w, size_t row_bytes, const float* x, float* y, size_t rows, size_t cols) {
  RefMatvec(reinterpret_cast<const float*>(w), row_bytes / sizeof(float), x, y, rows, cols);
}

void RefMatmulF32(const uint8_t* w, size_t row_bytes, const float* x, size_t ldx, float* y, size_t ldy,
                  size_t rows, size_t cols, size_t n) {
  RefMatmul(reinterpret_cast<const float*>(w), row_bytes / sizeof(float), x, ldx, y, ldy, rows, cols, n);
}

void RefDequantizeRowF32(const uint8_t* row, float* out, size_t cols) { std::memcpy(out, row, cols * sizeof(float)); }

// ---- f16 weights: each value widened to fp32, then llama2.c's arithmetic ----

float RefHalfAt(const uint8_t* p, size_t i) {
  uint16_t h;
  std::memcpy(&h, p + 2 * i, sizeof h);
  return HalfToFloat(h);
}

float RefDotF16(const uint8_t* w, const float* x, size_t n) {
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) sum += RefHalfAt(w, i) * x[i];
  return sum;
}

void RefMatvecF16(const uint8_t* w, size_t row_bytes, const float* x, float* y, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; ++r) y[r] = RefDotF16(w + r * row_bytes, x, cols);
}

void RefMatmulF16(const uint8_t* w, size_t row_bytes, const float* x, size_t ldx, float* y, size_t ldy,
                  size_t rows, size_t cols, size_t n) {
  for (size_t j = 0; j < n; ++j) {
    for (size_t r = 0; r < rows; ++r) y[j * ldy + r] = RefDotF16(w + r * row_bytes, x + j * ldx, cols);
  }
}

void RefDequantizeRowF16(const uint8_t* row, float* out, size_t cols) {
  for (size_t c = 0; c < cols; ++c) out[c] = RefHalfAt(row, c);
}

constexpr KernelTable kRefTable = {
    "ref",
    &RefMatvec,
    &RefMatmul,
    &RefVecmat,
    &RefDot,
    &RefRmsnorm,
    &RefSoftmax,
    &RefSwiglu,
    &RefAdd,
    {
        /* TINYAI_DTYPE_F32 */ {&RefMatvecF32, &RefMatmulF32, &RefDequantizeRowF32},
        /* TINYAI_DTYPE_F16 */ {&RefMatvecF16, &RefMatmulF16, &RefDequantizeRowF16},
    },
};

}  // namespace

const KernelTable& Ref() { return kRefTable; }

}  // namespace kernels
}  // namespace tinyai
