// The names byte-level BPE vocabularies go by, shared by the tokenizer
// (text/bpe_tokenizer.h) and the readers of the files that give them (GGUF's
// tokenizer.ggml.pre and token_type, read in place by format/gguf_index.h).
#ifndef TINYAI_COMMON_BPE_NAMES_H_
#define TINYAI_COMMON_BPE_NAMES_H_

#include <cstdint>

#include "tinyai/status.h"

namespace tinyai {

// ---- Pre-tokenizers ---------------------------------------------------------
// Each follows its regex exactly (leftmost match, alternatives in order,
// greedy with backtracking), with \p{L}, \p{N} and \s from text/unicode.h.
enum class BpePre : uint8_t {
  // "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+", with ignore_merges.
  kLlama3,
  // As kLlama3 with \p{N} (one digit a pre-token) and no ignore_merges.
  kQwen2,
  // Every \p{N} alone, then the GPT-2 regex on the rest.
  kSmollm,
  // GPT-2's "'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+".
  kGpt2,
};

// The pre-tokenizer of GGUF's tokenizer.ggml.pre name (llama.cpp's names):
// "llama3", "llama-v3", "llama-bpe", "falcon3" -> kLlama3; "qwen2",
// "deepseek-r1-qwen", "stablelm2" -> kQwen2; "smollm", "starcoder",
// "refact" -> kSmollm; "gpt-2", "gpt2", "phi-2" -> kGpt2. Anything else
// (llama.cpp's "default" among them) is TINYAI_ERR_UNSUPPORTED naming it.
TinyAIStatus BpePreFromName(const char* name, BpePre* out);
const char* BpePreName(BpePre pre);

// GGUF's tokenizer.ggml.token_type values.
enum BpeTokenType : int32_t {
  kBpeTokenNormal = 1,
  kBpeTokenUnknown = 2,
  kBpeTokenControl = 3,
  kBpeTokenUserDefined = 4,
  kBpeTokenUnused = 5,
  kBpeTokenByte = 6,
};

}  // namespace tinyai

#endif  // TINYAI_COMMON_BPE_NAMES_H_
