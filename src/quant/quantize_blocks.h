// Encoders of the GGUF block dtypes past the groups of 32 with one scale:
// the K-quants (q4_k, q5_k, q6_k; blocks of 256 with integer sub-block
// scales under f16 block factors) and the 5-bit groups (q5_g32, q5m_g32).
// quant::EncodeRows calls them; docs/format.md ("Choosing the scales")
// says how the factors are chosen.
#ifndef TINYAI_QUANT_QUANTIZE_BLOCKS_H_
#define TINYAI_QUANT_QUANTIZE_BLOCKS_H_

#include <cstddef>
#include <cstdint>

namespace tinyai {
namespace quant {

// Whether EncodeBlockRow encodes dtype.
bool IsBlockEncoded(int32_t dtype);

// One row of cols values (cols a multiple of 256 for a K-quant) as dtype
// into out (GroupedRowBytes(dtype, cols) bytes). w holds the row and may be
// changed: with factor (the upper Cholesky factor of H^-1, cols x cols; see
// ColumnStats) each block's factors are fitted to the values as updated so
// far and each value's rounding error is passed on to the columns after it.
// importance (cols values, may be null) weights each column's squared error
// in the fits.
void EncodeBlockRow(int32_t dtype, float* w, size_t cols, const float* importance, const float* factor,
                    uint8_t* out);

}  // namespace quant
}  // namespace tinyai

#endif  // TINYAI_QUANT_QUANTIZE_BLOCKS_H_
