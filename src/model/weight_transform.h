// What the weight cache does to the rows it loads for the runners here
// (loader/row_transform.h), decided by what will multiply them: rows of a
// dtype the runners' kernels (kernels::Best(), as model/llama.cc and
// model/dense.cc take them) have a panel product for are held in panels;
// rows of a model whose precisions were applied are decoded by the
// reference kernels (the definition of each dtype's values) and encoded by
// the quantizer (quant/quantize.h) with the tensor's calibration. The C API
// opens every model with it (capi/mmap_loader_capi.cc); saving a model at
// its precisions (model/save_model.h) converts with the same two.
#ifndef TINYAI_MODEL_WEIGHT_TRANSFORM_H_
#define TINYAI_MODEL_WEIGHT_TRANSFORM_H_

#include <cstdint>

#include "loader/row_transform.h"

namespace tinyai {

RowTransform ModelRowTransform();

// The dtypes ModelRowTransform() holds in panels (bit 1 << dtype).
uint32_t ModelPanelDTypes();
// The reference kernels' decoder of rows stored as dtype; nullptr for a
// dtype they have none for.
RowDecoder ReferenceRowDecoder(int32_t dtype);

}  // namespace tinyai

#endif  // TINYAI_MODEL_WEIGHT_TRANSFORM_H_
