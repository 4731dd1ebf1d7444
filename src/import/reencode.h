// Re-encoding an existing .tmai (tinyai-convert --from tmai): another
// matrix dtype, another codec, another name.
#ifndef TINYAI_IMPORT_REENCODE_H_
#define TINYAI_IMPORT_REENCODE_H_

#include "import/builder.h"
#include "tinyai/status.h"
#include "tinyai/utils/mmap_loader.h"

namespace tinyai {

// Writes an existing .tmai again: the same metadata, layers and tensors, its
// matrices (2-D tensors) in options.matrix_dtype when
// keep_dtypes is false (else as they are), compressed per options.codec;
// compressed input is decoded. The input is read through the loader (a
// capped weight cache), so a model larger than memory converts.
// TINYAI_ERR_INVALID_ARGUMENT when outPath is the input; the reader's errors
// for a bad input.
TinyAIStatus ReencodeModel(const char* inPath, const char* outPath, const WriteOptions& options, bool keep_dtypes,
                           TmaiWriteStats* stats = nullptr);
// The same from a model open already (read through its weight cache as
// it was opened: tests choose its row transform); messages name its source.
TinyAIStatus ReencodeModel(TinyAIMappedModel* model, const char* outPath, const WriteOptions& options,
                           bool keep_dtypes, TmaiWriteStats* stats = nullptr);

}  // namespace tinyai

#endif  // TINYAI_IMPORT_REENCODE_H_
