// Parser of llama2.c tokenizer files ("tokenizer.bin", "tok512.bin"):
//   int32 max_token_length
//   then for each of vocab_size tokens: float32 score, int32 length, length
//   bytes (no terminator)
// all little-endian. The token count is not stored: it comes from the model
// header (the absolute value of its vocab_size).
#ifndef TINYAI_IMPORT_LLAMA2C_TOKENIZER_H_
#define TINYAI_IMPORT_LLAMA2C_TOKENIZER_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/span.h"
#include "tinyai/status.h"

namespace tinyai {

struct Llama2cVocab {
  uint32_t max_token_length = 0;
  Array<float> scores;      // one per token
  Array<StringView> pieces; // one per token; each points into bytes
  Array<char> bytes;        // all piece bytes, concatenated (owned copy)
};

// Parses size bytes at data as a tokenizer of exactly vocabSize tokens into
// *out (which owns copies of the pieces, so data may be released afterwards;
// moving *out keeps the pieces valid).
// Errors: TINYAI_ERR_INVALID_ARGUMENT for a NULL pointer or vocabSize <= 0;
// TINYAI_ERR_OUT_OF_MEMORY; TINYAI_ERR_BAD_TOKENIZER for any impossible input
// (shorter than 4 bytes, max_token_length <= 0, a token record cut short, a
// negative length, a length above max_token_length or the remaining bytes,
// a non-finite score, fewer tokens than vocabSize, bytes after the last
// token), with a message naming the token index and the numbers involved.
// Zero-length pieces are accepted here; Tokenizer::Init rejects them.
// Never reads outside [data, data + size).
TinyAIStatus ParseLlama2cTokenizer(const uint8_t* data, size_t size, int32_t vocabSize,
                                   Llama2cVocab* out);

}  // namespace tinyai

#endif  // TINYAI_IMPORT_LLAMA2C_TOKENIZER_H_
