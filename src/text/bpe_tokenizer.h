// Byte-level BPE tokenizer (GPT-2 style; GGUF's tokenizer.ggml.model "gpt2"),
// as Llama 3, Qwen2/2.5/3 and SmolLM use it:
//  1. special tokens found in the text are cut out first (at each position
//     the longest one that starts there; control tokens only when the caller
//     asks for special parsing, user-defined ones always, as llama.cpp does);
//  2. each piece between them is optionally normalized to NFC (Hugging
//     Face's Qwen tokenizers have an NFC normalizer; llama.cpp has none);
//  3. the pre-tokenizer splits it with the model's regex, matched by hand
//     (PreTokenizer below), never by std::regex;
//  4. each pre-token's UTF-8 bytes become byte-level symbols (GPT-2's
//     bytes_to_unicode: every byte is one printable code point, space ->
//     U+0120 'Ġ', newline -> U+010A 'Ċ'); with ignore_merges (Llama 3) a
//     pre-token that is a token as a whole is that token; otherwise the
//     adjacent pair with the lowest merge rank (the leftmost on ties) is
//     merged until no pair has a rank.
// Decode maps a token back to raw bytes. Memory: the tokenizer borrows the
// token strings and keeps a sorted index (4 bytes a token) and the merges
// (16 bytes each); Encode works in a BpeScratch that, once reserved for the
// longest text, makes every call allocation-free.
#ifndef TINYAI_TEXT_BPE_TOKENIZER_H_
#define TINYAI_TEXT_BPE_TOKENIZER_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/bpe_names.h"  // BpePre, BpeTokenType
#include "common/span.h"
#include "tinyai/status.h"

namespace tinyai {

// ---- Pre-tokenizers (BpePre: common/bpe_names.h) ------------------------------

// Walks the pre-tokens of text (any bytes: a byte that is no valid UTF-8
// counts as a code point of class other). Allocation-free:
//   PreTokenizer p(BpePre::kLlama3, text, size);
//   size_t start, end;
//   while (p.Next(&start, &end)) { ... text[start, end) ... }
class PreTokenizer {
 public:
  PreTokenizer(BpePre pre, const char* text, size_t size) : pre_(pre), text_(text), size_(size) {}
  // The next pre-token [*start, *end), never empty; false after the last.
  bool Next(size_t* start, size_t* end);

 private:
  size_t MatchLlama3(size_t pos, size_t limit) const;
  size_t MatchGpt2(size_t pos, size_t limit) const;

  BpePre pre_;
  const char* text_;
  size_t size_;
  size_t pos_ = 0;
  size_t gap_end_ = 0;  // kSmollm: where the current run without \p{N} ends
};

// ---- The vocabulary ----------------------------------------------------------
struct BpeVocab {
  // Token i's text: normal tokens in GPT-2's byte-to-unicode form
  // (tokenizer.ggml.tokens, tokenizer.json's model.vocab), control and
  // user-defined ones as the literal text they stand for. Borrowed: must
  // outlive the tokenizer.
  Span<const StringView> tokens;
  // tokenizer.ggml.token_type, one per token (1-6); empty: all normal.
  Span<const int32_t> types;
  // tokenizer.ggml.merges: "left right", split at the first space after the
  // first byte; the rank is the index. Read by Init only.
  Span<const StringView> merges;
  const char* pre = nullptr;  // tokenizer.ggml.pre, see BpePreFromName
  int32_t bos = -1;           // tokenizer.ggml.bos_token_id; -1: none
  int32_t eos = -1;           // tokenizer.ggml.eos_token_id; -1: none
  bool add_bos = false;       // tokenizer.ggml.add_bos_token (Llama 3: true)
  bool add_eos = false;       // tokenizer.ggml.add_eos_token
  // Normalize each piece to NFC before pre-tokenizing (Hugging Face's Qwen2
  // and Qwen3 tokenizer.json; llama.cpp does not).
  bool nfc = false;
};

class BpeTokenizer;

// Encode's working memory; after Reserve(n, nfc), encoding a text of at
// most n bytes allocates nothing. BytesFor: 39 bytes a text byte; with NFC
// (whose form of a text can be 3 times as long) 126.
class BpeScratch {
 public:
  TinyAIStatus Reserve(size_t text_bytes, bool nfc);
  static uint64_t BytesFor(size_t text_bytes, bool nfc);
  // The longest text Encode handles without allocating.
  size_t text_bytes() const { return reserved_; }

  struct Node {
    int32_t token;  // -1: merged into the node before it
    int32_t prev;   // live neighbours (-1: none)
    int32_t next;
  };
  // A pair to merge. A node only ever absorbs the node after it, so the pair
  // is still the same two tokens exactly when left is alive, left.next is
  // right and right.next is still right_next.
  struct Candidate {
    int32_t rank;
    int32_t left;
    int32_t right;
    int32_t right_next;
    int32_t merged;
  };

 private:
  friend class BpeTokenizer;
  Array<Node> nodes_;
  Array<Candidate> heap_;
  Array<char> encoded_;  // a pre-token in byte-level form (ignore_merges)
  Array<uint32_t> cps_;  // NFC's code points
  Array<char> nfc_;      // NFC's output
  size_t reserved_ = 0;
  bool reserved_nfc_ = false;
};

class BpeTokenizer {
 public:
  // Fails with TINYAI_ERR_BAD_TOKENIZER naming the token or merges line for:
  // an empty vocabulary or token, a token type outside 1-6 or a types list
  // of another length, a merges line without a space between two non-empty
  // parts, a part or the merged pair that is not a token, BOS/EOS outside
  // the vocabulary (or add_bos/add_eos without one); TINYAI_ERR_UNSUPPORTED
  // for an unknown pre-tokenizer.
  TinyAIStatus Init(const BpeVocab& vocab);

  // Encodes size bytes of text: BOS when addBos, the tokens, EOS when
  // addEos (the model's choice is add_bos()/add_eos()). parseSpecial: the
  // control tokens' texts in the text become those tokens (user-defined ones
  // always do). Writes at most capacity ids to out and the number needed to
  // *count; TINYAI_ERR_BUFFER_TOO_SMALL when capacity < *count. Works in
  // scratch, growing it when the text is longer than it holds (NULL: a
  // temporary one). TINYAI_ERR_BAD_TOKENIZER when a byte the text needs has
  // no token.
  TinyAIStatus Encode(const char* text, size_t size, bool parseSpecial, bool addBos, bool addEos,
                      int32_t* out, size_t capacity, size_t* count,
                      BpeScratch* scratch = nullptr) const;

  // The bytes token stands for: a normal (or byte, unused, unknown) token's
  // byte-level form mapped back to raw bytes, in byteScratch (at least
  // max_token_length() bytes); a control or user-defined token's text as it
  // is. Empty for an id outside the vocabulary. Code points outside the
  // byte-level alphabet pass through as their UTF-8.
  StringView Decode(int32_t token, char* byteScratch) const;
  // Decode's bytes, at most capacity of them written to out; returns how
  // many there are (capacity may be 0 to ask).
  size_t DecodeTo(int32_t token, char* out, size_t capacity) const;

  // The id of the token whose text (byte-level form) is text[0, size), or -1.
  int32_t TokenId(const char* text, size_t size) const;
  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t token_type(int32_t id) const;
  StringView token(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  size_t max_token_length() const { return max_token_length_; }
  size_t merge_count() const { return merges_.size(); }
  // What Init allocated (the token strings are borrowed).
  uint64_t table_bytes() const {
    return types_.size() + sorted_.size() * sizeof(int32_t) + merges_.size() * sizeof(Merge) +
           specials_.size() * sizeof(int32_t) + special_start_.size() * sizeof(uint32_t) +
           byte_token_.size() * sizeof(int32_t);
  }
  BpePre pre() const { return pre_; }
  bool nfc() const { return nfc_; }
  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }

  struct Merge {
    int32_t left;
    int32_t right;
    int32_t rank;
    int32_t merged;
  };

 private:
  // The merge of the pair (left, right), or nullptr.
  const Merge* FindMerge(int32_t left, int32_t right) const;
  // Appends the tokens of one pre-token through emit.
  template <class Emit>
  TinyAIStatus EncodeWord(const char* word, size_t size, BpeScratch* scratch, Emit& emit) const;
  template <class Emit>
  TinyAIStatus EncodePiece(const char* text, size_t size, BpeScratch* scratch, Emit& emit) const;
  // The special token matching at text[pos], longest first, or -1.
  int32_t MatchSpecial(const char* text, size_t size, size_t pos, bool parseSpecial) const;

  Span<const StringView> tokens_;
  Array<uint8_t> types_;       // empty: all normal
  Array<int32_t> sorted_;      // ids by token bytes, for TokenId
  Array<Merge> merges_;        // sorted by (left, right)
  Array<int32_t> specials_;    // control/user-defined/unknown ids by (first byte, longest first)
  Array<uint32_t> special_start_;  // 257: specials_ index range per first byte
  Array<int32_t> byte_token_;      // 256: the token of each byte's byte-level form, or -1
  size_t max_token_length_ = 0;
  BpePre pre_ = BpePre::kLlama3;
  bool ignore_merges_ = false;
  bool nfc_ = false;
  int32_t bos_ = -1;
  int32_t eos_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
};

}  // namespace tinyai

#endif  // TINYAI_TEXT_BPE_TOKENIZER_H_
