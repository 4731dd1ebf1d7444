// The second moment of the inputs a matrix meets, and the factor of its
// inverse that error feedback needs (quant/quantize.h's ColumnStats), as
// GPTQ (Frantar et al., 2022) computes them.
#ifndef TINYAI_QUANT_HESSIAN_H_
#define TINYAI_QUANT_HESSIAN_H_

#include <cstddef>
#include <cstdint>

#include "tinyai/status.h"

namespace tinyai {
namespace quant {

// Adds the outer products of n inputs (rows of x, ldx floats apart, cols
// each) to the upper triangle of gram (cols x cols, row-major; float: the
// 1% damping below dwarfs its rounding).
void AccumulateGram(const float* x, size_t ldx, size_t cols, size_t n, float* gram);

// factor (cols x cols floats, row-major, zero below the diagonal) = the
// upper Cholesky factor U of H^-1 (U^T U = H^-1), H = gram / count (its
// upper triangle read) with 1% of its mean diagonal added to the diagonal
// (raised tenfold while H will not factorise) and a column whose inputs
// were all zero given 1. Computed as R^-1 for H = R R^T, R upper: no
// inverse is formed. scratch: cols x cols doubles; factor may be gram.
// TINYAI_ERR_INVALID_ARGUMENT for count 0 or a non-finite moment.
TinyAIStatus InverseFactor(const float* gram, uint64_t count, size_t cols, double* scratch, float* factor);

}  // namespace quant
}  // namespace tinyai

#endif  // TINYAI_QUANT_HESSIAN_H_
