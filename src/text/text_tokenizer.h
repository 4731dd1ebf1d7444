// The model's tokenizer, whichever kind its file names (tokenizer.model):
//   "llama2c-bpe" (or no key): SentencePiece-style BPE with byte fallback,
//     text/tokenizer.h (llama2.c's models, GGUF's tokenizer.ggml.model
//     "llama": Llama 1/2, TinyLlama, Mistral);
//   "gpt2": byte-level BPE, text/bpe_tokenizer.h (GGUF's "gpt2": Llama 3,
//     Qwen2/2.5/3, SmolLM).
// The generation path, the C API's tokenize and decode, and calibration go
// through this one interface, so none of them knows which kind it runs.
#ifndef TINYAI_TEXT_TEXT_TOKENIZER_H_
#define TINYAI_TEXT_TEXT_TOKENIZER_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/span.h"
#include "text/bpe_tokenizer.h"
#include "text/tokenizer.h"
#include "tinyai/status.h"

namespace tinyai {

class TextTokenizer;

// Encode's working memory for either kind: after Reserve(tok, n), encoding
// a text of at most n bytes allocates nothing.
class TextScratch {
 public:
  TinyAIStatus Reserve(const TextTokenizer& tok, size_t text_bytes);
  static uint64_t BytesFor(const TextTokenizer& tok, size_t text_bytes);

 private:
  friend class TextTokenizer;
  EncodeScratch sentencepiece_;
  BpeScratch bpe_;
};

class TextTokenizer {
 public:
  enum Kind : uint8_t { kSentencePiece, kBytePairs };

  // SentencePiece: Tokenizer::Init's arguments.
  TinyAIStatus InitSentencePiece(Span<const StringView> pieces, Span<const float> scores, int32_t bosId,
                                 int32_t eosId, uint32_t maxPieceLength, bool addBos, bool addEos);
  // Byte-level BPE: BpeTokenizer::Init's vocabulary. eog lists the ids that
  // end a generation besides EOS (GGUF's eot and eom tokens); tokens whose
  // text is one of the known end-of-turn markers (<|eot_id|>, <|im_end|>,
  // <|endoftext|>, ...) are added, as llama.cpp does.
  TinyAIStatus InitBytePairs(const BpeVocab& vocab, Span<const int32_t> eog);

  // Encodes text (NUL-terminated) after BOS when addBos and before EOS when
  // addEos; the texts of the vocabulary's special tokens become those tokens
  // (llama.cpp's parse_special, which chat templates need). Capacity
  // protocol: at most capacity ids to out, the number needed to *count,
  // TINYAI_ERR_BUFFER_TOO_SMALL when capacity < *count. scratch: NULL for a
  // temporary one.
  TinyAIStatus Encode(const char* text, bool addBos, bool addEos, int32_t* out, size_t capacity, size_t* count,
                      TextScratch* scratch = nullptr) const;

  // The bytes printed for token after prevToken (SentencePiece drops the
  // first piece's dummy-prefix space after BOS; byte-level BPE ignores
  // prevToken): writes at most capacity of them to out and returns how many
  // there are. Control tokens (BOS, EOS, <|eot_id|>, ...) print nothing; an
  // id outside the vocabulary is empty. At most max_piece_length() bytes.
  size_t Decode(int32_t prevToken, int32_t token, char* out, size_t capacity) const;

  // Whether sampling token ends the text: EOS and the end-of-turn tokens of
  // a byte-level BPE vocabulary. A SentencePiece vocabulary ends at BOS
  // only, as llama2.c does (the generation path checks BOS itself).
  bool EndsGeneration(int32_t token) const;

  Kind kind() const { return kind_; }
  int32_t vocab_size() const;
  int32_t bos_id() const;
  int32_t eos_id() const;
  bool add_bos() const;
  bool add_eos() const;
  // The longest piece in bytes: a bound on Decode's output and on the bytes
  // one position of a prompt can hold.
  uint32_t max_piece_length() const;
  // What the tokenizer allocated itself (its tables; the token strings are
  // the file's).
  uint64_t table_bytes() const;

  const Tokenizer& sentencepiece() const { return sentencepiece_; }
  const BpeTokenizer& bpe() const { return bpe_; }

 private:
  Kind kind_ = kSentencePiece;
  Tokenizer sentencepiece_;
  BpeTokenizer bpe_;
  Array<int32_t> eog_;  // sorted; the first eog_count_ unique, EOS among them
  size_t eog_count_ = 0;
};

}  // namespace tinyai

#endif  // TINYAI_TEXT_TEXT_TOKENIZER_H_
