// The vocabulary of a GGUF file (tokenizer.ggml.*), read and checked for
// the .tmai's tokenizer.* metadata (docs/format.md):
//   model "llama": SentencePiece pieces and scores with byte fallback (the
//     byte pieces at ids 3..258, as TinyAI's SentencePiece tokenizer finds
//     them), tokenizer.model "llama2c-bpe";
//   model "gpt2": byte-level BPE - tokens, token types, merges and the
//     pre-tokenizer (tokenizer.ggml.pre, refused by name when TinyAI does not
//     know it and when absent), tokenizer.model "gpt2".
// BOS/EOS and whether a text starts and ends with them follow llama.cpp's
// rules: its defaults for the vocabulary type and pre-tokenizer (SentencePiece:
// BOS yes; Llama 3's pre-tokenizers: BOS yes; other BPE: no), overridden by
// tokenizer.ggml.add_bos_token / add_eos_token. The end-of-generation set is
// EOS, tokenizer.ggml.eot_token_id and eom_token_id (the runtime adds the
// tokens with known end-of-turn texts). As llama.cpp does, tokens whose
// texts are end-of-turn or fill-in-the-middle markers are made control
// tokens even when the file says user-defined, so that text containing them
// encodes the same with special parsing off. The Qwen2 pre-tokenizers
// normalize text to NFC first, as Hugging Face's tokenizer.json for Qwen2
// and Qwen3 says (llama.cpp does not: on NFC text the ids are the same).
#ifndef TINYAI_IMPORT_GGUF_VOCAB_H_
#define TINYAI_IMPORT_GGUF_VOCAB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "format/tmai_writer.h"
#include "import/gguf.h"
#include "tinyai/status.h"

namespace tinyai {

struct GgufVocab {
  bool byte_pairs = false;          // "gpt2"; else SentencePiece
  std::vector<std::string> tokens;  // SentencePiece: spaces as ' ', not U+2581
  std::vector<float> scores;        // SentencePiece
  std::vector<int32_t> types;       // byte-level BPE: one per token (1-6), or empty
  std::vector<std::string> merges;  // byte-level BPE
  std::string pre;                  // byte-level BPE
  bool nfc = false;
  std::vector<int32_t> eog;  // eot and eom ids (byte-level BPE)
  int64_t bos = -1, eos = -1;
  bool add_bos = false, add_eos = false;
  std::string chat_template;  // tokenizer.chat_template (Jinja), or empty
};

// Reads f's vocabulary. TINYAI_ERR_BAD_TOKENIZER for missing or
// inconsistent keys (naming them), TINYAI_ERR_UNSUPPORTED for a tokenizer
// model or pre-tokenizer TinyAI does not run. The byte-level BPE vocabulary
// is checked by initializing the runtime's tokenizer with it.
TinyAIStatus ReadGgufVocab(const gguf::File& f, GgufVocab* out);

// A byte-level BPE vocabulary read from any source (GGUF, Hugging Face's
// tokenizer.json), finished: tokens whose texts are end-of-turn or
// fill-in-the-middle markers made control tokens (as llama.cpp does), then
// checked by initializing the runtime's tokenizer with it (its status,
// prefixed with path).
TinyAIStatus CheckByteLevelVocab(const char* path, GgufVocab* v);

// Records v as the .tmai's tokenizer.* metadata.
void AddVocabMetadata(TmaiWriter* w, const GgufVocab& v);

}  // namespace tinyai

#endif  // TINYAI_IMPORT_GGUF_VOCAB_H_
