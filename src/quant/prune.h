// Pruning: dense fp32 rows to the block-sparse bands of common/sparse.h
// (which blocks a band keeps, chosen by a score, then the kept values
// encoded in the layout's dtype), and bands back to dense rows or to
// another dtype (a pruned model quantized). The offline tools and a model
// pruned as its weight cache reads it use these; the products are
// kernels::WeightKernels::sparse_matmul.
#ifndef TINYAI_QUANT_PRUNE_H_
#define TINYAI_QUANT_PRUNE_H_

#include <cstddef>
#include <cstdint>

#include "common/sparse.h"
#include "quant/quantize.h"
#include "tinyai/status.h"

namespace tinyai {
namespace quant {

// How a band's blocks are ranked (the K of highest score are kept; ties go
// to the lower block index). A block's score is summed over its values
// (the band's rows, the block's columns):
enum class PruneScore : int32_t {
  // |w|: the guide's magnitude pruning.
  kMagnitude = 0,
  // |w| * sqrt(importance[col]), importance the mean square of the inputs
  // the column meets (Wanda, Sun et al., 2023: |w| times the norm of its
  // input). Needs ColumnStats::importance.
  kActivation = 1,
  // w^2 / U[col][col]^2, U the factor of ColumnStats (the optimal brain
  // surgeon's saliency as SparseGPT, Frantar and Alistarh, 2023, ranks it),
  // then every row of the band corrected column by column as GPTQ corrects
  // rounding errors: a pruned weight's whole value is its error, passed on
  // through U to the columns after it, where the kept weights absorb it
  // (pruned ones stay zero). The mask is chosen on the weights as given,
  // before any correction. Needs ColumnStats::factor.
  kSparseGpt = 2,
};

// Prunes and encodes `rows` dense fp32 rows (row r at x + r * s.cols) into
// ceil(rows / s.block) bands of s.band_bytes at out, in s's dtype. rows is a
// multiple of s.block except where the matrix ends: the last band's missing
// rows are then zero. Per band it keeps the s.kept column blocks of highest
// score (PruneScore), sets their bits, and encodes each of the band's rows'
// kept values, block after block, with EncodeRows(s.dtype, ...) and
// stats.importance gathered for the kept columns (the values past s.cols
// of a narrow last block are zero and count for nothing in a group's scale
// search); the rounding error feedback of ColumnStats::factor is not used
// (it runs in the dense column order, not the compacted one). Bytes past a
// band's rows are zero.
//
// err (may be null) accumulates the error of the decoded bands against x
// over the rows given, pruned values included (so it measures pruning and
// quantization together).
//
// TINYAI_ERR_INVALID_ARGUMENT: s is not a layout MakeSparseLayout makes; a
// non-finite value (naming its row and column, counted from x); a score that
// needs stats it was not given; importance negative or not finite (naming
// the column); a factor whose diagonal is not finite and positive, or whose
// correction makes a weight non-finite. Bands before the failing one may have
// been written; nothing past the rows' bands is.
TinyAIStatus EncodeBands(const SparseLayout& s, const float* x, size_t rows, uint8_t* out, PruneScore score,
                         ColumnStats stats, EncodeError* err);

// One band back to dense fp32: s.block rows of s.cols values at out, zero
// where a block was pruned (and where a short last band has no row).
// decode is the layout dtype's row decoder (kernels::Ref()'s
// dequantize_row for s.dtype). Needs no scratch; the band is not checked
// (it is read as s says).
void DecodeBand(const SparseLayout& s, const uint8_t* band, void (*decode)(const uint8_t*, float*, size_t),
                float* out);

// Re-encodes `bands` bands of layout `from` at in as layout `to` at out (a
// pruned model quantized): the same rows, cols, block and kept, each band's
// bitmap copied and each of its rows' kept values decoded (decode: from's
// row decoder; null for kernels::Ref()'s) and encoded in to.dtype with
// EncodeRows, stats.importance gathered for the band's kept columns.
// stats.factor is not used (see EncodeBands). TINYAI_ERR_INVALID_ARGUMENT
// when from or to is not a layout MakeSparseLayout makes or their shapes
// differ, or when a decoded value is not finite (naming the band).
TinyAIStatus TranscodeBands(const SparseLayout& from, const SparseLayout& to, const uint8_t* in, size_t bands,
                            uint8_t* out, void (*decode)(const uint8_t*, float*, size_t), ColumnStats stats);

}  // namespace quant
}  // namespace tinyai

#endif  // TINYAI_QUANT_PRUNE_H_
