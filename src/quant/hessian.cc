#include "quant/hessian.h"

#include <cmath>

#include "common/array.h"
#include "common/status.h"

namespace tinyai {
namespace quant {
namespace {

// h (upper triangle) = R R^T, R upper, in place; false when h is not
// positive definite.
bool ReverseCholesky(double* h, size_t n) {
  for (size_t j = n; j-- > 0;) {
    double* rj = h + j * n;
    double d = rj[j];
    for (size_t k = j + 1; k < n; ++k) d -= rj[k] * rj[k];
    if (!(d > 0.0)) return false;
    rj[j] = std::sqrt(d);
    for (size_t i = 0; i < j; ++i) {
      double* ri = h + i * n;
      double s = ri[j];
      for (size_t k = j + 1; k < n; ++k) s -= ri[k] * rj[k];
      ri[j] = s / rj[j];
    }
  }
  return true;
}

// r (upper) = r^-1 in place, a row at a time from the last: row i of the
// inverse is (e_i - sum_{k>i} r[i][k] row k of the inverse) / r[i][i], rows
// below i being the inverse's already. acc: n doubles.
void InvertUpper(double* r, size_t n, double* acc) {
  for (size_t i = n; i-- > 0;) {
    double* ri = r + i * n;
    for (size_t j = i; j < n; ++j) acc[j] = 0.0;
    for (size_t k = i + 1; k < n; ++k) {
      const double f = ri[k];
      const double* uk = r + k * n;
      for (size_t j = k; j < n; ++j) acc[j] += f * uk[j];
    }
    const double d = 1.0 / ri[i];
    ri[i] = d;
    for (size_t j = i + 1; j < n; ++j) ri[j] = -acc[j] * d;
  }
}

}  // namespace

void AccumulateGram(const float* x, size_t ldx, size_t cols, size_t n, float* gram) {
  for (size_t t = 0; t < n; ++t) {
    const float* row = x + t * ldx;
    for (size_t i = 0; i < cols; ++i) {
      const float xi = row[i];
      if (xi == 0.0f) continue;
      float* g = gram + i * cols;
      for (size_t j = i; j < cols; ++j) g[j] += xi * row[j];
    }
  }
}

TinyAIStatus InverseFactor(const float* gram, uint64_t count, size_t cols, double* scratch, float* factor) {
  if (count == 0) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "no inputs to form a second moment from");
  double mean = 0.0;
  for (size_t i = 0; i < cols; ++i) {
    const double d = static_cast<double>(gram[i * cols + i]) / static_cast<double>(count);
    if (!std::isfinite(d)) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "the inputs of column %zu have a non-finite second moment", i);
    }
    mean += d;
  }
  mean = cols > 0 ? mean / static_cast<double>(cols) : 0.0;
  if (!(mean > 0.0)) mean = 1.0;
  double damp = 0.01 * mean;
  for (int attempt = 0;; ++attempt) {
    for (size_t i = 0; i < cols; ++i) {
      for (size_t j = i; j < cols; ++j) scratch[i * cols + j] = static_cast<double>(gram[i * cols + j]) / static_cast<double>(count);
      if (scratch[i * cols + i] == 0.0) scratch[i * cols + i] = 1.0;
      scratch[i * cols + i] += damp;
    }
    if (ReverseCholesky(scratch, cols)) break;
    if (attempt == 6) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "the inputs' second moment does not factorise even damped by %g",
                      damp);
    }
    damp *= 10.0;
  }
  Array<double> acc;
  TINYAI_RETURN_IF_ERROR(acc.Allocate(cols, "a row of the inverse"));
  InvertUpper(scratch, cols, acc.data());
  for (size_t i = 0; i < cols; ++i) {
    for (size_t j = 0; j < cols; ++j) factor[i * cols + j] = j < i ? 0.0f : static_cast<float>(scratch[i * cols + j]);
  }
  return TINYAI_OK;
}

}  // namespace quant
}  // namespace tinyai
