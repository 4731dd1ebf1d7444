// The reference's products for grouped integer weights, for tables of
// architectures that have no faster ones (SSE2, 32-bit NEON without them).
#ifndef TINYAI_KERNELS_REF_KERNELS_REF_H_
#define TINYAI_KERNELS_REF_KERNELS_REF_H_

#include "kernels/kernels.h"

namespace tinyai {
namespace kernels {
namespace ref {

void QuantizeInput(const float* x, size_t cols, InputGroup* out);
void QuantizeInput16(const float* x, size_t cols, InputGroup16* out);
// Per grouped dtype: the WeightKernels entries.
template <int32_t DType>
void MatvecQ(const uint8_t* w, size_t row_bytes, const void* x, float* y, size_t rows, size_t cols);
template <int32_t DType>
void MatmulQ(const uint8_t* w, size_t row_bytes, const void* x, size_t ldx, float* y, size_t ldy, size_t rows,
             size_t cols, size_t n);
template <int32_t DType>
void DequantizeRowQ(const uint8_t* row, float* out, size_t cols);

// Block-sparse products (WeightKernels::sparse_matmul) of a grouped dtype:
// the fp32 input gathered and quantized one stored group at a time.
template <int32_t DType>
void SparseMatmulQ(const uint8_t* w, const SparseLayout& s, const void* x, size_t ldx, float* y, size_t ldy,
                   size_t bands, size_t n);

// The grouped dtypes' entries of the reference, as a WeightKernels (the
// K-quants' products need rows of whole blocks of 256: cols % 256 == 0).
template <int32_t DType>
constexpr WeightKernels GroupedKernels() {
  WeightKernels w{nullptr, nullptr, &DequantizeRowQ<DType>, &MatvecQ<DType>, &MatmulQ<DType>, InputFormOf(DType), nullptr,
                  nullptr, nullptr};
  // Block-sparse rows are groups of 32 (common/sparse.h): no K-quant.
  if constexpr (!IsSuperBlockDType(DType)) w.sparse_matmul = &SparseMatmulQ<DType>;
  return w;
}

}  // namespace ref
}  // namespace kernels
}  // namespace tinyai

#endif  // TINYAI_KERNELS_REF_KERNELS_REF_H_
