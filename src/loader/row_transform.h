// What becomes of a tensor's rows between the file and the weight cache,
// beyond reading, checking and decompressing them: decided above the loader
// (model/weight_transform.h gives the models' one) and handed to the model
// when it is opened (TinyAIMappedModel::Open). The loader applies it and
// chooses no layout and no encoding of its own:
//  - panels: the dtypes whose rows the cache holds in panels
//    (common/panels.h), where the kernels that will multiply them have a
//    panel product. The cache lays out only bytes it owns: a source used in
//    place (an image in flash) is never rewritten.
//  - conversion: a model whose precisions were applied (ApplyDTypes) runs
//    tensors at another dtype than the file stores; the cache reads a run of
//    stored rows, decodes them to fp32 with the decoder of the stored dtype
//    and encodes them in the runtime dtype.
#ifndef TINYAI_LOADER_ROW_TRANSFORM_H_
#define TINYAI_LOADER_ROW_TRANSFORM_H_

#include <cstddef>
#include <cstdint>

#include "common/sparse.h"
#include "tinyai/status.h"

namespace tinyai {

// What calibration measured of the inputs a matrix's columns meet
// (TinyAIMappedModel::Calibration), handed to the encoder with its rows.
// With it, how a matrix pruned as it loads chooses its blocks.
struct TensorCalibration {
  const float* importance = nullptr;  // cols values, or null
  const float* factor = nullptr;      // cols x cols, or null
  int32_t prune_score = 0;            // quant::PruneScore
};

// out[c] = value c of one row, in fp32, for c < cols.
using RowDecoder = void (*)(const uint8_t* row, float* out, size_t cols);

struct RowTransform {
  // Bit 1 << dtype: rows of these dtypes (PanelDType() ones only) are held
  // in panels. 0: every row in the row layout.
  uint32_t panel_dtypes = 0;
  // The decoder of rows stored as dtype; nullptr for a dtype it has none
  // for. Looked up once per run of rows.
  RowDecoder (*decoder)(int32_t dtype) = nullptr;
  // Encodes rows x cols values (row r at x + r * cols) as dtype into out,
  // one encoded row after the other; deterministic (the same values give the
  // same bytes, however they are split into runs). Errors name the row and
  // column.
  TinyAIStatus (*encode_rows)(int32_t dtype, const float* x, size_t rows, size_t cols, uint8_t* out,
                              TensorCalibration calibration) = nullptr;
  // Prunes `rows` stored rows (as fp32, row r at x + r * s.cols) into
  // ceil(rows / s.block) bands of s at out (common/sparse.h): rows is a
  // multiple of s.block except at the matrix's end. Deterministic.
  TinyAIStatus (*encode_bands)(const SparseLayout& s, const float* x, size_t rows, uint8_t* out,
                               TensorCalibration calibration) = nullptr;
  // Bands of a matrix the file stores block-sparse, re-encoded in to.dtype
  // (the same blocks kept).
  TinyAIStatus (*transcode_bands)(const SparseLayout& from, const SparseLayout& to, const uint8_t* in, size_t bands,
                                  uint8_t* out, TensorCalibration calibration) = nullptr;
  // Without a decoder and an encoder the model's precisions cannot change.
  bool converts() const { return decoder != nullptr && encode_rows != nullptr; }
};

}  // namespace tinyai

#endif  // TINYAI_LOADER_ROW_TRANSFORM_H_
