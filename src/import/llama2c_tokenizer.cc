#include "import/llama2c_tokenizer.h"

#include <cmath>
#include <cstring>

#include "common/status.h"

namespace tinyai {
namespace {

uint32_t LoadU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

int32_t LoadI32(const uint8_t* p) {
  const uint32_t u = LoadU32(p);
  int32_t v;
  std::memcpy(&v, &u, sizeof(v));
  return v;
}

float LoadF32(const uint8_t* p) {
  const uint32_t u = LoadU32(p);
  float v;
  std::memcpy(&v, &u, sizeof(v));
  return v;
}

// Walks the records once. With out == nullptr it only validates and returns
// the total piece bytes in *totalBytes; otherwise it fills out (already
// allocated) as well.
TinyAIStatus Walk(const uint8_t* data, size_t size, int32_t vocabSize, uint32_t maxLength,
                  Llama2cVocab* out, size_t* totalBytes) {
  size_t offset = 4;
  size_t total = 0;
  for (int32_t i = 0; i < vocabSize; ++i) {
    const size_t remaining = size - offset;
    if (remaining < 8) {
      if (remaining == 0) {
        return SetError(TINYAI_ERR_BAD_TOKENIZER,
                        "llama2.c tokenizer: the file ends after %d tokens but the model has %d "
                        "(token %d missing, file size %zu bytes)",
                        i, vocabSize, i, size);
      }
      return SetError(TINYAI_ERR_BAD_TOKENIZER,
                      "llama2.c tokenizer: token %d: record cut short: %zu bytes left at offset "
                      "%zu, need 8 for score and length (model has %d tokens)",
                      i, remaining, offset, vocabSize);
    }
    const float score = LoadF32(data + offset);
    const int32_t length = LoadI32(data + offset + 4);
    if (!std::isfinite(score)) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER,
                      "llama2.c tokenizer: token %d: non-finite score %g at offset %zu", i,
                      static_cast<double>(score), offset);
    }
    if (length < 0) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER,
                      "llama2.c tokenizer: token %d: negative length %d at offset %zu", i, length,
                      offset + 4);
    }
    if (static_cast<uint32_t>(length) > maxLength) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER,
                      "llama2.c tokenizer: token %d: length %d exceeds max_token_length %u", i,
                      length, maxLength);
    }
    offset += 8;
    if (static_cast<size_t>(length) > size - offset) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER,
                      "llama2.c tokenizer: token %d: length %d exceeds the %zu bytes left in the "
                      "file at offset %zu",
                      i, length, size - offset, offset);
    }
    if (out != nullptr) {
      char* dst = out->bytes.data() + total;
      if (length > 0) std::memcpy(dst, data + offset, static_cast<size_t>(length));
      out->scores[static_cast<size_t>(i)] = score;
      out->pieces[static_cast<size_t>(i)].data = dst;
      out->pieces[static_cast<size_t>(i)].size = static_cast<size_t>(length);
    }
    offset += static_cast<size_t>(length);
    total += static_cast<size_t>(length);
  }
  if (offset != size) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER,
                    "llama2.c tokenizer: %zu bytes of trailing garbage after the last token "
                    "(token %d) at offset %zu; the model has %d tokens",
                    size - offset, vocabSize - 1, offset, vocabSize);
  }
  *totalBytes = total;
  return TINYAI_OK;
}

}  // namespace

TinyAIStatus ParseLlama2cTokenizer(const uint8_t* data, size_t size, int32_t vocabSize,
                                   Llama2cVocab* out) {
  if (out == nullptr || (data == nullptr && size > 0)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "llama2.c tokenizer: NULL %s",
                    out == nullptr ? "output" : "data");
  }
  if (vocabSize <= 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "llama2.c tokenizer: vocabulary size %d must be positive", vocabSize);
  }
  *out = Llama2cVocab();
  if (size < 4) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER,
                    "llama2.c tokenizer: file of %zu bytes is shorter than the 4-byte "
                    "max_token_length header (token 0 missing)",
                    size);
  }
  const int32_t maxLength = LoadI32(data);
  if (maxLength <= 0) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER,
                    "llama2.c tokenizer: max_token_length %d must be positive (before token 0)",
                    maxLength);
  }
  size_t totalBytes = 0;
  TINYAI_RETURN_IF_ERROR(
      Walk(data, size, vocabSize, static_cast<uint32_t>(maxLength), nullptr, &totalBytes));

  Llama2cVocab vocab;
  vocab.max_token_length = static_cast<uint32_t>(maxLength);
  TINYAI_RETURN_IF_ERROR(vocab.scores.Allocate(static_cast<size_t>(vocabSize), "tokenizer scores"));
  TINYAI_RETURN_IF_ERROR(vocab.pieces.Allocate(static_cast<size_t>(vocabSize), "tokenizer pieces"));
  // At least one byte so that every piece (empty ones included) has a
  // non-NULL data pointer.
  TINYAI_RETURN_IF_ERROR(
      vocab.bytes.Allocate(totalBytes > 0 ? totalBytes : 1, "tokenizer piece bytes"));
  TINYAI_RETURN_IF_ERROR(
      Walk(data, size, vocabSize, static_cast<uint32_t>(maxLength), &vocab, &totalBytes));
  *out = std::move(vocab);
  return TINYAI_OK;
}

}  // namespace tinyai
