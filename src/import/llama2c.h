// Import of llama2.c checkpoints and tokenizers (tinyai-convert --from
// llama2c). The tokenizer file's parser is import/llama2c_tokenizer.h.
#ifndef TINYAI_IMPORT_LLAMA2C_H_
#define TINYAI_IMPORT_LLAMA2C_H_

#include "format/llama_params.h"
#include "import/builder.h"
#include "tinyai/status.h"

namespace tinyai {

// Converts a llama2.c checkpoint (version-0 header) and its tokenizer.
// TINYAI_ERR_INVALID_ARGUMENT, before anything is written, when outPath is
// one of the inputs (the same file: device and inode); TINYAI_ERR_BAD_FORMAT
// for a header that is no llama2.c shape; TINYAI_ERR_UNSUPPORTED for a shape
// beyond format/limits.h; TINYAI_ERR_BAD_TOKENIZER for a tokenizer file or a
// piece the runtime refuses (an empty one).
TinyAIStatus ConvertLlama2c(const char* checkpointPath, const char* tokenizerPath, const char* outPath,
                            LlamaHyperParams* paramsOut, const WriteOptions& options = WriteOptions(),
                            TmaiWriteStats* stats = nullptr);

}  // namespace tinyai

#endif  // TINYAI_IMPORT_LLAMA2C_H_
