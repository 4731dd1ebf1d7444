// Weights to a stored dtype, a row at a time (the offline tools and a model
// quantized as its weight cache reads it). The grouped dtypes' scales are
// chosen by a search that minimises each group's weighted squared error
// (docs/format.md, "Choosing the scales"), not taken from max|x| alone.
#ifndef TINYAI_QUANT_QUANTIZE_H_
#define TINYAI_QUANT_QUANTIZE_H_

#include <cstddef>
#include <cstdint>

#include "tinyai/status.h"

namespace tinyai {
namespace quant {

// Error of what was encoded against the values given, summed over calls.
struct EncodeError {
  double sum_sq_error = 0.0;  // sum of (decoded - x)^2
  double sum_sq = 0.0;        // sum of x^2
  double max_abs_error = 0.0;
  uint64_t values = 0;

  // sqrt(sum_sq_error / sum_sq): 0 for exact, 1 for all zeros.
  double RelativeRms() const;
  void Add(const EncodeError& other);
};

// Bytes one row of cols values takes in dtype (f32, f16 or a grouped
// dtype); 0 for any other dtype.
size_t EncodedRowBytes(int32_t dtype, size_t cols);

// What calibration measured of the inputs a matrix's columns meet
// (capi's calibration; quant/hessian.h), for the grouped dtypes.
struct ColumnStats {
  // cols values: how much each column's squared error counts in a group's
  // scale search (the mean square of its inputs); null for all alike.
  const float* importance = nullptr;
  // cols x cols, row-major: the upper Cholesky factor U of H^-1, H the
  // damped second moment of the inputs (quant::InverseFactor). With it a
  // row is encoded column by column and each column's rounding error is
  // passed on to the columns after it (GPTQ's error feedback), so that
  // the error of the row's products with those inputs is what is
  // minimised rather than the error of each weight. null for none.
  const float* factor = nullptr;
};

// Encodes rows x cols values (row r at x + r * cols) as dtype into out,
// EncodedRowBytes(dtype, cols) bytes per row: f32 copied, f16 rounded to
// nearest even, grouped dtypes by the scale search (with stats, if given,
// as ColumnStats says). err (may be null) accumulates the error against x.
// A non-finite value is TINYAI_ERR_INVALID_ARGUMENT naming its row and
// column, an unknown dtype TINYAI_ERR_UNSUPPORTED; nothing is written
// past out's rows either way.
TinyAIStatus EncodeRows(int32_t dtype, const float* x, size_t rows, size_t cols, uint8_t* out, EncodeError* err,
                        ColumnStats stats = ColumnStats());

}  // namespace quant
}  // namespace tinyai

#endif  // TINYAI_QUANT_QUANTIZE_H_
