// Random-weight LLaMA models for speed and memory tests (tinyai-convert
// --synthetic): seeded, so the same description gives the same bytes.
#ifndef TINYAI_IMPORT_SYNTHETIC_H_
#define TINYAI_IMPORT_SYNTHETIC_H_

#include <cstdint>
#include <string>

#include "format/llama_params.h"
#include "import/builder.h"
#include "tinyai/status.h"

namespace tinyai {

// A synthetic model: the hyper-parameters and the seed of its random weights.
struct LlamaShape : LlamaHyperParams {
  uint64_t seed = 1;
};

// Parses "dim=768,hidden=2048,layers=12,heads=12,kv_heads=12,vocab=32000,
// seq_len=1024,seed=1[,shared=0]" (kv_heads defaults to heads, seed to 1,
// shared to 1). TINYAI_ERR_INVALID_ARGUMENT names the bad key or value (an
// unknown or repeated key, a value that is not digits, shared not 0 or 1);
// then CheckShape(out, true).
TinyAIStatus ParseSyntheticSpec(const std::string& spec, LlamaShape* out);

// Writes a random-weight model with a synthetic tokenizer (byte fallback plus
// generated pieces); weights are uniform with variance 1/fan_in, norms 1.
// stats, when not null, receives what was written.
TinyAIStatus WriteSyntheticModel(const LlamaShape& shape, const char* outPath,
                                 const WriteOptions& options = WriteOptions(), TmaiWriteStats* stats = nullptr);

}  // namespace tinyai

#endif  // TINYAI_IMPORT_SYNTHETIC_H_
