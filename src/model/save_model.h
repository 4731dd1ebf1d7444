// tinyaiSaveMappedModel: a model written out as it runs (its applied
// precisions), as a new .tmai. The index is the input's with the layer
// table and tensor directory laid out again (every tensor uncompressed);
// matrices that change dtype are read as stored and converted here, a run
// of rows at a time, so the output streams whatever the model's size. Here,
// not in the loader: it converts as the models' transform does
// (model/weight_transform.h: the reference decoders, the quantizer, whose
// error it reports), so the file holds the bytes the model runs.
#ifndef TINYAI_MODEL_SAVE_MODEL_H_
#define TINYAI_MODEL_SAVE_MODEL_H_

#include <cstdint>

#include "loader/mapped_model.h"
#include "tinyai/utils/quantize_mixed.h"

namespace tinyai {

// Bytes of the file SaveModel writes for model now.
uint64_t SavedModelSize(const TinyAIMappedModel& model);

// Writes it through write (positional; every byte of [0, size) once).
// out_name names the output in messages. TINYAI_STOPPED when the progress
// callback asked to stop.
TinyAIStatus SaveModel(TinyAIMappedModel* model, TinyAIWriteCallback write, void* user, const char* out_name,
                       const TinyAISaveOptions& options);

}  // namespace tinyai

#endif  // TINYAI_MODEL_SAVE_MODEL_H_
