// A Hugging Face checkpoint's byte-level BPE vocabulary (Llama 3, Qwen2,
// SmolLM): tokenizer.json (model type BPE: vocab, merges as "a b" strings
// or [a, b] pairs, added_tokens; the normalizer, NFC or none; the
// pre-tokenizer, recognized as one TinyAI runs: Llama 3's or Qwen2's Split
// regex before a ByteLevel without its own regex, SmolLM's individual digits
// before GPT-2's ByteLevel, or GPT-2's ByteLevel alone) and
// tokenizer_config.json (bos_token, eos_token, add_bos_token, add_eos_token,
// chat_template). Ids the files leave unnamed up to config.json's
// vocab_size are unused padding, as llama.cpp's converter writes them.
#ifndef TINYAI_IMPORT_HF_VOCAB_H_
#define TINYAI_IMPORT_HF_VOCAB_H_

#include <cstdint>
#include <string>

#include "import/gguf_vocab.h"
#include "tinyai/status.h"

namespace tinyai {

// Reads the vocabulary of vocab_size tokens (config.json's; the embedding's
// rows) from tokenizer_json and, when it exists, tokenizer_config. BOS and
// EOS: tokenizer_config.json's tokens, else config_bos / config_eos (-1:
// none). TINYAI_ERR_BAD_TOKENIZER for inconsistent files (naming the entry),
// TINYAI_ERR_UNSUPPORTED for a model, normalizer or pre-tokenizer TinyAI does
// not run (naming it).
TinyAIStatus ReadHfByteLevelVocab(const std::string& tokenizer_json, const std::string& tokenizer_config,
                                  int32_t vocab_size, int64_t config_bos, int64_t config_eos, GgufVocab* out);

}  // namespace tinyai

#endif  // TINYAI_IMPORT_HF_VOCAB_H_
