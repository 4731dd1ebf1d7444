#include "model/weight_transform.h"

#include "common/panels.h"
#include "common/status.h"
#include "kernels/kernels.h"
#include "quant/prune.h"
#include "quant/quantize.h"

namespace tinyai {
namespace {

TinyAIStatus EncodeRows(int32_t dtype, const float* x, size_t rows, size_t cols, uint8_t* out,
                        TensorCalibration calibration) {
  quant::ColumnStats stats;
  stats.importance = calibration.importance;
  stats.factor = calibration.factor;
  return quant::EncodeRows(dtype, x, rows, cols, out, nullptr, stats);
}

TinyAIStatus EncodeBands(const SparseLayout& s, const float* x, size_t rows, uint8_t* out,
                         TensorCalibration calibration) {
  quant::ColumnStats stats;
  stats.importance = calibration.importance;
  stats.factor = calibration.factor;
  return quant::EncodeBands(s, x, rows, out, static_cast<quant::PruneScore>(calibration.prune_score), stats, nullptr);
}

TinyAIStatus TranscodeBands(const SparseLayout& from, const SparseLayout& to, const uint8_t* in, size_t bands,
                            uint8_t* out, TensorCalibration calibration) {
  const RowDecoder decode = ReferenceRowDecoder(from.dtype);
  if (!decode) return SetError(TINYAI_ERR_UNSUPPORTED, "no decoder for %s", tinyaiDTypeName(static_cast<TinyAIDType>(from.dtype)));
  quant::ColumnStats stats;
  stats.importance = calibration.importance;
  return quant::TranscodeBands(from, to, in, bands, out, decode, stats);
}

}  // namespace

uint32_t ModelPanelDTypes() {
  uint32_t mask = 0;
  for (int32_t d = 0; d < kernels::kWeightDtypes; ++d) {
    if (!PanelDType(d)) continue;
    const kernels::WeightKernels* k = kernels::WeightKernelsFor(kernels::Best(), d);
    if (k && k->matvec_panels) mask |= 1u << d;
  }
  return mask;
}

RowDecoder ReferenceRowDecoder(int32_t dtype) {
  const kernels::WeightKernels* k = kernels::WeightKernelsFor(kernels::Ref(), dtype);
  return k ? k->dequantize_row : nullptr;
}

RowTransform ModelRowTransform() {
  RowTransform t;
  t.panel_dtypes = ModelPanelDTypes();
  t.decoder = &ReferenceRowDecoder;
  t.encode_rows = &EncodeRows;
  t.encode_bands = &EncodeBands;
  t.transcode_bands = &TranscodeBands;
  return t;
}

}  // namespace tinyai
