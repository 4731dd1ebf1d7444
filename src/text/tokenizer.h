// SentencePiece-style BPE tokenizer of llama2.c models: a dummy-prefix space,
// byte-fallback tokens "<0xXX>", then greedy merges of the adjacent pair whose
// merged piece has the highest score.
#ifndef TINYAI_TEXT_TOKENIZER_H_
#define TINYAI_TEXT_TOKENIZER_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/span.h"
#include "tinyai/status.h"

namespace tinyai {

class Tokenizer {
 public:
  // pieces[i] and scores[i] describe token i; the piece bytes are borrowed and
  // must outlive the tokenizer. Fails with TINYAI_ERR_BAD_TOKENIZER (message
  // naming the token) for an empty vocabulary, an empty or over-long piece
  // (longer than maxPieceLength when that is > 0), a non-finite score, or
  // bos/eos outside the vocabulary.
  TinyAIStatus Init(Span<const StringView> pieces, Span<const float> scores, int32_t bosId,
                    int32_t eosId, uint32_t maxPieceLength);

  // Encodes text (NUL-terminated) after an optional BOS, writing at most
  // capacity ids to out and the number needed to *count. Returns
  // TINYAI_ERR_RESOURCE_EXHAUSTED when capacity < *count (out then holds the
  // first capacity ids). Allocates scratch proportional to strlen(text).
  TinyAIStatus Encode(const char* text, bool addBos, bool addEos, int32_t* out, size_t capacity,
                      size_t* count) const;

  // Bytes printed for token following prevToken: the first piece after BOS
  // loses its leading space; a "<0xXX>" piece is that single byte. The view
  // points into the vocabulary or into byteScratch[0]. Empty for an id
  // outside the vocabulary.
  StringView Decode(int32_t prevToken, int32_t token, char* byteScratch) const;

  int32_t vocab_size() const { return static_cast<int32_t>(pieces_.size()); }
  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  StringView piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }

 private:
  // Id of the piece equal to bytes, or -1.
  int32_t Lookup(const char* bytes, size_t size) const;

  Span<const StringView> pieces_;
  Span<const float> scores_;
  Array<int32_t> sorted_;  // ids sorted by piece bytes, for Lookup
  int32_t bos_ = 1;
  int32_t eos_ = 2;
  uint32_t max_piece_length_ = 0;
};

}  // namespace tinyai

#endif  // TINYAI_TEXT_TOKENIZER_H_
