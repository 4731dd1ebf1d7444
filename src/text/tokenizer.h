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

class Tokenizer;

// Encode's working memory, kept between calls so that encoding a text no
// longer than textBytes allocates nothing (the text session reserves it when
// it is prepared). About 32 bytes per text byte.
class EncodeScratch {
 public:
  // Room for texts of up to text_bytes bytes with pieces up to
  // max_piece_length bytes; keeps what it has when that is enough.
  TinyAIStatus Reserve(size_t text_bytes, uint32_t max_piece_length);
  size_t text_bytes() const { return nodes_.size() > 0 ? nodes_.size() - 1 : 0; }
  // What Reserve(text_bytes, max_piece_length) holds.
  static uint64_t BytesFor(size_t text_bytes, uint32_t max_piece_length);

  struct Node {
    int32_t token;
    int32_t prev;  // index of the previous live node or -1
    int32_t next;  // index of the next live node or -1
  };
  // A mergeable pair. It is stale once the left node died, its next node is
  // no longer right, or either token changed; a node's piece only ever
  // grows, so the tokens are unchanged exactly when the merged piece is
  // still as long as the two current pieces together.
  struct Candidate {
    float score;
    int32_t left;    // node index of the left token
    int32_t right;   // node index of the right token
    int32_t merged;  // id of the concatenated piece
  };

 private:
  friend class Tokenizer;
  Array<Node> nodes_;
  Array<Candidate> heap_;
  Array<char> buffer_;
};

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
  // TINYAI_ERR_BUFFER_TOO_SMALL when capacity < *count (out then holds the
  // first capacity ids). Works in scratch, growing it when the text is
  // longer than it holds (scratch may be NULL: a temporary one).
  TinyAIStatus Encode(const char* text, bool addBos, bool addEos, int32_t* out, size_t capacity,
                      size_t* count, EncodeScratch* scratch = nullptr) const;
  uint32_t max_piece_length() const { return max_piece_length_; }

  // Bytes printed for token following prevToken: the first piece after BOS
  // loses its leading space; a "<0xXX>" piece is that single byte. The view
  // points into the vocabulary or into byteScratch[0]. Empty for an id
  // outside the vocabulary.
  StringView Decode(int32_t prevToken, int32_t token, char* byteScratch) const;

  int32_t vocab_size() const { return static_cast<int32_t>(pieces_.size()); }
  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }

  // Whether a prompt starts with BOS and ends with EOS, as the model says
  // (tokenizer.add_bos, default yes; tokenizer.add_eos, default no: GGUF's
  // tokenizer.ggml.add_bos_token / add_eos_token, Hugging Face's
  // add_bos_token / add_eos_token). The generation path and the C API's
  // tokenize follow them.
  void SetSpecialTokens(bool addBos, bool addEos) {
    add_bos_ = addBos;
    add_eos_ = addEos;
  }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  StringView piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }

 private:
  // Id of the piece equal to bytes, or -1.
  int32_t Lookup(const char* bytes, size_t size) const;

  Span<const StringView> pieces_;
  Span<const float> scores_;
  Array<int32_t> sorted_;  // ids sorted by piece bytes, for Lookup
  int32_t bos_ = 1;
  int32_t eos_ = 2;
  bool add_bos_ = true;
  bool add_eos_ = false;
  uint32_t max_piece_length_ = 0;
};

}  // namespace tinyai

#endif  // TINYAI_TEXT_TOKENIZER_H_
