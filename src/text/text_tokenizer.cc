#include "text/text_tokenizer.h"

#include <algorithm>
#include <cstring>

namespace tinyai {

namespace {

// Texts of tokens that end a turn whatever the file's eos says (llama.cpp
// src/llama-vocab.cpp adds them to its end-of-generation set the same way):
// an instruct model ends its answer with one of them.
const char* const kEndOfTurnTexts[] = {"<|eot_id|>", "<|im_end|>",    "<|end|>", "<end_of_turn>",
                                       "<|endoftext|>", "<|eom_id|>", "<EOT>",   "<|end_of_text|>"};

}  // namespace

TinyAIStatus TextScratch::Reserve(const TextTokenizer& tok, size_t text_bytes) {
  if (tok.kind() == TextTokenizer::kBytePairs) return bpe_.Reserve(text_bytes, tok.bpe().nfc());
  return sentencepiece_.Reserve(text_bytes, tok.max_piece_length());
}

uint64_t TextScratch::BytesFor(const TextTokenizer& tok, size_t text_bytes) {
  if (tok.kind() == TextTokenizer::kBytePairs) return BpeScratch::BytesFor(text_bytes, tok.bpe().nfc());
  return EncodeScratch::BytesFor(text_bytes, tok.max_piece_length());
}

TinyAIStatus TextTokenizer::InitSentencePiece(Span<const StringView> pieces, Span<const float> scores,
                                              int32_t bosId, int32_t eosId, uint32_t maxPieceLength, bool addBos,
                                              bool addEos) {
  kind_ = kSentencePiece;
  TINYAI_RETURN_IF_ERROR(sentencepiece_.Init(pieces, scores, bosId, eosId, maxPieceLength));
  sentencepiece_.SetSpecialTokens(addBos, addEos);
  return TINYAI_OK;
}

TinyAIStatus TextTokenizer::InitBytePairs(const BpeVocab& vocab, Span<const int32_t> eog) {
  kind_ = kBytePairs;
  TINYAI_RETURN_IF_ERROR(bpe_.Init(vocab));
  const int32_t n = bpe_.vocab_size();
  size_t count = eog.size() + (bpe_.eos_id() >= 0 ? 1 : 0);
  int32_t marked[sizeof kEndOfTurnTexts / sizeof kEndOfTurnTexts[0]];
  size_t marks = 0;
  for (const char* text : kEndOfTurnTexts) {
    const int32_t id = bpe_.TokenId(text, std::strlen(text));
    if (id >= 0) marked[marks++] = id;
  }
  count += marks;
  TINYAI_RETURN_IF_ERROR(eog_.Allocate(count, "end-of-generation tokens"));
  size_t at = 0;
  for (size_t i = 0; i < eog.size(); ++i) {
    if (eog[i] < 0 || eog[i] >= n) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "end-of-generation token %d is outside the vocabulary (0..%d)",
                      static_cast<int>(eog[i]), n - 1);
    }
    eog_[at++] = eog[i];
  }
  if (bpe_.eos_id() >= 0) eog_[at++] = bpe_.eos_id();
  for (size_t i = 0; i < marks; ++i) eog_[at++] = marked[i];
  std::sort(eog_.data(), eog_.data() + at);
  // Duplicates stay in the array's tail, unused: count_ is what is searched.
  eog_count_ = static_cast<size_t>(std::unique(eog_.data(), eog_.data() + at) - eog_.data());
  return TINYAI_OK;
}

TinyAIStatus TextTokenizer::Encode(const char* text, bool addBos, bool addEos, int32_t* out, size_t capacity,
                                   size_t* count, TextScratch* scratch) const {
  if (kind_ == kBytePairs) {
    if (text == nullptr) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "the text to encode is NULL");
    return bpe_.Encode(text, std::strlen(text), /*parseSpecial=*/true, addBos, addEos, out, capacity, count,
                       scratch ? &scratch->bpe_ : nullptr);
  }
  return sentencepiece_.Encode(text, addBos, addEos, out, capacity, count,
                               scratch ? &scratch->sentencepiece_ : nullptr);
}

size_t TextTokenizer::Decode(int32_t prevToken, int32_t token, char* out, size_t capacity) const {
  if (kind_ == kBytePairs) {
    const int32_t type = bpe_.token_type(token);
    if (token < 0 || token >= bpe_.vocab_size() || type == kBpeTokenControl) return 0;
    return bpe_.DecodeTo(token, out, capacity);
  }
  char byte[1];
  const StringView piece = sentencepiece_.Decode(prevToken, token, byte);
  if (piece.size > 0 && capacity > 0) std::memcpy(out, piece.data, piece.size < capacity ? piece.size : capacity);
  return piece.size;
}

bool TextTokenizer::EndsGeneration(int32_t token) const {
  if (kind_ != kBytePairs) return false;
  return std::binary_search(eog_.data(), eog_.data() + eog_count_, token);
}

int32_t TextTokenizer::vocab_size() const {
  return kind_ == kBytePairs ? bpe_.vocab_size() : sentencepiece_.vocab_size();
}
int32_t TextTokenizer::bos_id() const { return kind_ == kBytePairs ? bpe_.bos_id() : sentencepiece_.bos_id(); }
int32_t TextTokenizer::eos_id() const { return kind_ == kBytePairs ? bpe_.eos_id() : sentencepiece_.eos_id(); }
bool TextTokenizer::add_bos() const { return kind_ == kBytePairs ? bpe_.add_bos() : sentencepiece_.add_bos(); }
bool TextTokenizer::add_eos() const { return kind_ == kBytePairs ? bpe_.add_eos() : sentencepiece_.add_eos(); }

uint32_t TextTokenizer::max_piece_length() const {
  return kind_ == kBytePairs ? static_cast<uint32_t>(bpe_.max_token_length()) : sentencepiece_.max_piece_length();
}

uint64_t TextTokenizer::table_bytes() const {
  if (kind_ == kBytePairs) return bpe_.table_bytes() + eog_.size() * sizeof(int32_t);
  return static_cast<uint64_t>(sentencepiece_.vocab_size()) * sizeof(int32_t);
}

}  // namespace tinyai
