#include "text/bpe_tokenizer.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include "common/ledger.h"
#include "common/printable.h"
#include "common/status.h"
#include "text/string_index.h"
#include "text/unicode.h"

// How the pieces fit (the order is Hugging Face's and llama.cpp's):
//   text -> special tokens cut out (MatchSpecial) -> each piece between them
//   -> NFC when asked (unicode::Nfc) -> PreTokenizer -> each pre-token
//   -> EncodeWord (ignore_merges lookup, else byte symbols and merges).
// The merges run on token ids: the initial symbols are the tokens of the
// single bytes, a pair's merge is found by (left id, right id) in a table
// sorted once at Init, and the merged symbol is the merge's token (Init
// checks it exists). That equals merging byte-level strings as llama.cpp
// and the Hugging Face tokenizers do, since a string has one id.
// Order of merges: a min-heap on (rank, left node); stale pairs are skipped
// (BpeScratch::Candidate), so the lowest rank is merged first and, on equal
// ranks, the leftmost pair: llama.cpp's comparator and transformers.js's
// rank + position/length score agree on it.

namespace tinyai {
namespace {

// ---- GPT-2's bytes_to_unicode -----------------------------------------------
// Bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for the code point of the
// same value; the other 68 (0x00-0x20, 0x7F-0xA0, 0xAD), in increasing
// order, for U+0100, U+0101, ...
bool SelfMapped(uint32_t b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

uint32_t ByteToCodePoint(uint32_t b) {
  if (SelfMapped(b)) return b;
  if (b <= 0x20) return 0x100 + b;                // 33 of them
  if (b >= 0x7F && b <= 0xA0) return 0x121 + (b - 0x7F);  // 34
  return 0x143;                                   // 0xAD
}

// The byte a byte-level code point stands for, or -1.
int CodePointToByte(uint32_t cp) {
  if (cp < 0x100) return SelfMapped(cp) ? static_cast<int>(cp) : -1;
  if (cp <= 0x120) return static_cast<int>(cp - 0x100);
  if (cp <= 0x142) return static_cast<int>(cp - 0x121 + 0x7F);
  if (cp == 0x143) return 0xAD;
  return -1;
}

// Writes the byte-level form of bytes (1 or 2 bytes each) to out; returns
// its length.
size_t ByteLevel(const char* bytes, size_t size, char* out) {
  size_t n = 0;
  for (size_t i = 0; i < size; ++i) {
    n += unicode::Encode(ByteToCodePoint(static_cast<unsigned char>(bytes[i])), out + n);
  }
  return n;
}

bool IsSpecialType(int32_t type) {
  return type == kBpeTokenControl || type == kBpeTokenUserDefined || type == kBpeTokenUnknown;
}

// Heap order: std::push_heap keeps the largest on top, so "less" means a
// higher rank, then a later position.
struct CandidateAfter {
  bool operator()(const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) const {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.left > b.left;
  }
};

// Candidate slots for a pre-token of n bytes: the n - 1 first pairs and
// room to spare; Encode compacts away stale entries when it fills (the
// valid ones are live pairs, fewer than n).
size_t HeapSlots(size_t nodes) { return nodes + nodes / 4 + 2; }

}  // namespace


// ---- Pre-tokenizers ----------------------------------------------------------

namespace {

// Classes as the regexes see them. An invalid byte is "other".
struct Cp {
  uint32_t cp;
  uint32_t size;
  uint8_t flags;
  bool letter() const { return (flags & 7) == unicode::kClassLetter; }
  bool number() const { return (flags & 7) == unicode::kClassNumber; }
  bool space() const { return (flags & unicode::kWhiteSpaceBit) != 0; }
  // [^\s\p{L}\p{N}]
  bool other() const { return !space() && !letter() && !number(); }
  bool newline() const { return cp == '\r' || cp == '\n'; }
};

Cp At(const char* text, size_t limit, size_t pos) {
  const unsigned char b = static_cast<unsigned char>(text[pos]);
  if (b < 0x80) {
    uint8_t flags;
    if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')) {
      flags = unicode::kClassLetter;
    } else if (b >= '0' && b <= '9') {
      flags = unicode::kClassNumber;
    } else {
      flags = unicode::Flags(b);
    }
    return Cp{b, 1, flags};
  }
  const unicode::CodePoint c = unicode::Decode(text, limit, pos);
  return Cp{c.cp, c.size, unicode::Flags(c.cp)};
}

bool AsciiIs(const char* text, size_t limit, size_t pos, char lower) {
  return pos < limit && (text[pos] == lower || text[pos] == lower - 'a' + 'A');
}

}  // namespace

// The LLAMA3 and QWEN2 regexes, alternative by alternative.
size_t PreTokenizer::MatchLlama3(size_t pos, size_t limit) const {
  const char* t = text_;
  const Cp c = At(t, limit, pos);
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
  if (c.cp == '\'') {
    if (AsciiIs(t, limit, pos + 1, 's') || AsciiIs(t, limit, pos + 1, 't') || AsciiIs(t, limit, pos + 1, 'm') ||
        AsciiIs(t, limit, pos + 1, 'd')) {
      return pos + 2;
    }
    if ((AsciiIs(t, limit, pos + 1, 'r') && AsciiIs(t, limit, pos + 2, 'e')) ||
        (AsciiIs(t, limit, pos + 1, 'v') && AsciiIs(t, limit, pos + 2, 'e')) ||
        (AsciiIs(t, limit, pos + 1, 'l') && AsciiIs(t, limit, pos + 2, 'l'))) {
      return pos + 3;
    }
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  {
    size_t q = pos;
    if (c.letter()) {
      q = pos + c.size;
    } else if (!c.newline() && !c.number() && pos + c.size < limit && At(t, limit, pos + c.size).letter()) {
      q = pos + c.size + At(t, limit, pos + c.size).size;
    }
    if (q > pos) {
      while (q < limit) {
        const Cp n = At(t, limit, q);
        if (!n.letter()) break;
        q += n.size;
      }
      return q;
    }
  }
  // \p{N}{1,3} (QWEN2: \p{N})
  if (c.number()) {
    size_t q = pos + c.size;
    const int most = pre_ == BpePre::kQwen2 ? 1 : 3;
    for (int i = 1; i < most && q < limit; ++i) {
      const Cp n = At(t, limit, q);
      if (!n.number()) break;
      q += n.size;
    }
    return q;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  {
    size_t q = pos;
    if (c.cp == ' ' && pos + 1 < limit && At(t, limit, pos + 1).other()) {
      q = pos + 1;
    }
    if (At(t, limit, q).other()) {
      while (q < limit) {
        const Cp n = At(t, limit, q);
        if (!n.other()) break;
        q += n.size;
      }
      while (q < limit && (t[q] == '\r' || t[q] == '\n')) ++q;
      return q;
    }
  }
  // Here c is whitespace (every other code point matched above).
  // \s*[\r\n]+ : the whitespace run up to and including its last \r or \n.
  size_t end = pos;
  size_t after_newline = 0;  // 0: none in the run
  size_t last_start = pos;   // where the run's last code point starts
  while (end < limit) {
    const Cp n = At(t, limit, end);
    if (!n.space()) break;
    last_start = end;
    end += n.size;
    if (n.newline()) after_newline = end;
  }
  if (after_newline != 0) return after_newline;
  // \s+(?!\S) : the run, less its last code point when something follows.
  if (end == limit) return end;
  if (last_start > pos) return last_start;
  // \s+
  return end;
}

// GPT-2's regex (case-sensitive contractions, an optional space before
// letters, numbers or other).
size_t PreTokenizer::MatchGpt2(size_t pos, size_t limit) const {
  const char* t = text_;
  const Cp c = At(t, limit, pos);
  if (c.cp == '\'' && pos + 1 < limit) {
    const char n1 = t[pos + 1];
    if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') return pos + 2;
    if (pos + 2 < limit) {
      const char n2 = t[pos + 2];
      if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) return pos + 3;
    }
  }
  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: the class of the code
  // point after the optional space decides.
  size_t q = pos;
  Cp first = c;
  if (c.cp == ' ' && pos + 1 < limit) {
    const Cp n = At(t, limit, pos + 1);
    if (!n.space()) {
      q = pos + 1;
      first = n;
    }
  }
  if (!first.space()) {
    const int kind = first.letter() ? 1 : first.number() ? 2 : 3;
    while (q < limit) {
      const Cp n = At(t, limit, q);
      const int k = n.letter() ? 1 : n.number() ? 2 : n.space() ? 0 : 3;
      if (k != kind) break;
      q += n.size;
    }
    return q;
  }
  // \s+(?!\S), then \s+.
  size_t end = pos;
  size_t last_start = pos;
  while (end < limit) {
    const Cp n = At(t, limit, end);
    if (!n.space()) break;
    last_start = end;
    end += n.size;
  }
  if (end == limit) return end;
  if (last_start > pos) return last_start;
  return end;
}

bool PreTokenizer::Next(size_t* start, size_t* end) {
  if (pos_ >= size_) return false;
  size_t limit = size_;
  if (pre_ == BpePre::kSmollm) {
    // \p{N} alone first; GPT-2's regex runs within the runs between.
    if (pos_ >= gap_end_) {
      const Cp c = At(text_, size_, pos_);
      if (c.number()) {
        *start = pos_;
        *end = pos_ + c.size;
        pos_ = *end;
        gap_end_ = pos_;
        return true;
      }
      size_t q = pos_;
      while (q < size_) {
        const Cp n = At(text_, size_, q);
        if (n.number()) break;
        q += n.size;
      }
      gap_end_ = q;
    }
    limit = gap_end_;
  }
  const size_t e = (pre_ == BpePre::kLlama3 || pre_ == BpePre::kQwen2) ? MatchLlama3(pos_, limit)
                                                                     : MatchGpt2(pos_, limit);
  *start = pos_;
  *end = e;
  pos_ = e;
  return true;
}

// ---- Scratch -------------------------------------------------------------------

// The merge buffers hold the longest pre-token: the text, or its NFC form,
// which can be up to unicode::NfcBytesFor(n) bytes long.
uint64_t BpeScratch::BytesFor(size_t text_bytes, bool nfc) {
  const uint64_t work = nfc ? unicode::NfcBytesFor(text_bytes) : text_bytes;
  uint64_t bytes = work * sizeof(Node) + HeapSlots(work) * sizeof(Candidate) + 2 * work;
  if (nfc) bytes += unicode::NfcCodePointsFor(text_bytes) * sizeof(uint32_t) + unicode::NfcBytesFor(text_bytes);
  return bytes;
}

TinyAIStatus BpeScratch::Reserve(size_t text_bytes, bool nfc) {
  if (text_bytes <= reserved_ && (!nfc || reserved_nfc_)) return TINYAI_OK;
  if (text_bytes > static_cast<size_t>(INT32_MAX) / 8) {
    return SetError(TINYAI_ERR_OVERFLOW, "BPE tokenizer: text of %zu bytes is too long to encode", text_bytes);
  }
  MemScope scope(kMemText);
  reserved_ = 0;
  const size_t work = nfc ? unicode::NfcBytesFor(text_bytes) : text_bytes;
  if (nodes_.size() < work) {
    TINYAI_RETURN_IF_ERROR(nodes_.Allocate(work, "BPE tokenizer: encode symbols"));
    TINYAI_RETURN_IF_ERROR(heap_.Allocate(HeapSlots(work), "BPE tokenizer: encode merge heap"));
    TINYAI_RETURN_IF_ERROR(encoded_.Allocate(2 * work, "BPE tokenizer: encode byte-level buffer"));
  }
  if (nfc && nfc_.size() < unicode::NfcBytesFor(text_bytes)) {
    TINYAI_RETURN_IF_ERROR(cps_.Allocate(unicode::NfcCodePointsFor(text_bytes), "BPE tokenizer: NFC code points"));
    TINYAI_RETURN_IF_ERROR(nfc_.Allocate(unicode::NfcBytesFor(text_bytes), "BPE tokenizer: NFC text"));
  }
  reserved_ = text_bytes;
  reserved_nfc_ = nfc;
  return TINYAI_OK;
}

// ---- Init ------------------------------------------------------------------------

int32_t BpeTokenizer::TokenId(const char* text, size_t size) const {
  return FindBytes(tokens_, sorted_.data(), sorted_.size(), text, size);
}

int32_t BpeTokenizer::token_type(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return 0;
  return types_.size() == 0 ? static_cast<int32_t>(kBpeTokenNormal) : types_[static_cast<size_t>(id)];
}

const BpeTokenizer::Merge* BpeTokenizer::FindMerge(int32_t left, int32_t right) const {
  size_t lo = 0, hi = merges_.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    const Merge& m = merges_[mid];
    if (m.left < left || (m.left == left && m.right < right)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo < merges_.size() && merges_[lo].left == left && merges_[lo].right == right) return &merges_[lo];
  return nullptr;
}

TinyAIStatus BpeTokenizer::Init(const BpeVocab& v) {
  *this = BpeTokenizer();
  BpePre pre = BpePre::kGpt2;  // set by BpePreFromName below
  TINYAI_RETURN_IF_ERROR(BpePreFromName(v.pre, &pre));
  const size_t n = v.tokens.size();
  if (n == 0 || v.tokens.data() == nullptr) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "BPE tokenizer: empty vocabulary (tokenizer.ggml.tokens)");
  }
  if (n > static_cast<size_t>(INT32_MAX)) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "BPE tokenizer: %zu tokens exceed the int32 id range", n);
  }
  if (v.types.size() != 0 && v.types.size() != n) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "BPE tokenizer: %zu token types for %zu tokens "
                    "(tokenizer.ggml.token_type needs one per token)", v.types.size(), n);
  }
  MemScope scope(kMemText);
  size_t longest = 0;
  for (size_t i = 0; i < n; ++i) {
    const StringView t = v.tokens[i];
    if (t.size == 0 || t.data == nullptr) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "BPE tokenizer: token %zu is empty", i);
    }
    if (t.size > longest) longest = t.size;
    if (v.types.size() != 0 && (v.types[i] < kBpeTokenNormal || v.types[i] > kBpeTokenByte)) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "BPE tokenizer: token %zu ('%s') has type %d; "
                      "tokenizer.ggml.token_type values are 1 (normal) to 6 (byte)", i,
                      Printable(t).c_str(), static_cast<int>(v.types[i]));
    }
  }
  const int32_t count = static_cast<int32_t>(n);
  for (const int32_t id : {v.bos, v.eos}) {
    if (id < -1 || id >= count) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "BPE tokenizer: %s token %d is outside the vocabulary of %d "
                      "tokens", id == v.bos ? "BOS" : "EOS", static_cast<int>(id), static_cast<int>(count));
    }
  }
  if ((v.add_bos && v.bos < 0) || (v.add_eos && v.eos < 0)) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "BPE tokenizer: the model adds %s but names no such token "
                    "(tokenizer.ggml.%s_token_id)", v.add_bos && v.bos < 0 ? "BOS" : "EOS",
                    v.add_bos && v.bos < 0 ? "bos" : "eos");
  }

  tokens_ = v.tokens;
  if (v.types.size() != 0) {
    TINYAI_RETURN_IF_ERROR(types_.Allocate(n, "BPE tokenizer: token types"));
    for (size_t i = 0; i < n; ++i) types_[i] = static_cast<uint8_t>(v.types[i]);
  }
  TINYAI_RETURN_IF_ERROR(sorted_.Allocate(n, "BPE tokenizer: sorted token index"));
  for (int32_t i = 0; i < count; ++i) sorted_[static_cast<size_t>(i)] = i;
  // Equal texts sort by id, so TokenId gives the lowest id.
  SortByBytes(v.tokens, sorted_.data(), sorted_.size());
  max_token_length_ = longest;
  TINYAI_RETURN_IF_ERROR(byte_token_.Allocate(256, "BPE byte tokens"));
  for (uint32_t b = 0; b < 256; ++b) {
    char form[4];
    const size_t len = unicode::Encode(ByteToCodePoint(b), form);
    byte_token_[b] = TokenId(form, len);
  }

  // The merges, validated, sorted by pair (the first of a repeated pair
  // keeps its rank, as in llama.cpp).
  if (v.merges.size() > static_cast<size_t>(INT32_MAX)) {
    *this = BpeTokenizer();
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "BPE tokenizer: %zu merges exceed the int32 range", v.merges.size());
  }
  TinyAIStatus status = merges_.Allocate(v.merges.size(), "BPE tokenizer: merges");
  Array<char> joined;
  if (status == TINYAI_OK) status = joined.Allocate(2 * longest + 1, "BPE tokenizer: merge check buffer");
  for (size_t i = 0; status == TINYAI_OK && i < v.merges.size(); ++i) {
    const StringView line = v.merges[i];
    size_t space = 1;
    while (line.data != nullptr && space < line.size && line.data[space] != ' ') ++space;
    if (line.data == nullptr || line.size < 3 || space + 1 >= line.size) {
      status = SetError(TINYAI_ERR_BAD_TOKENIZER, "BPE tokenizer: merges line %zu '%s' is not two tokens "
                        "separated by a space (tokenizer.ggml.merges holds \"left right\")", i,
                        Printable(line).c_str());
      break;
    }
    const int32_t left = TokenId(line.data, space);
    const int32_t right = TokenId(line.data + space + 1, line.size - space - 1);
    if (left < 0 || right < 0) {
      const StringView missing = left < 0 ? StringView{line.data, space}
                                          : StringView{line.data + space + 1, line.size - space - 1};
      status = SetError(TINYAI_ERR_BAD_TOKENIZER, "BPE tokenizer: merges line %zu '%s': '%s' is not a token "
                        "of the vocabulary", i, Printable(line).c_str(), Printable(missing).c_str());
      break;
    }
    const size_t joined_size = space + (line.size - space - 1);
    int32_t merged = -1;
    if (joined_size <= longest) {
      std::memcpy(joined.data(), line.data, space);
      std::memcpy(joined.data() + space, line.data + space + 1, line.size - space - 1);
      merged = TokenId(joined.data(), joined_size);
    }
    if (merged < 0) {
      status = SetError(TINYAI_ERR_BAD_TOKENIZER, "BPE tokenizer: merges line %zu '%s': the merged token is "
                        "not in the vocabulary", i, Printable(line).c_str());
      break;
    }
    merges_[i] = Merge{left, right, static_cast<int32_t>(i), merged};
  }
  if (status != TINYAI_OK) {
    *this = BpeTokenizer();
    return status;
  }
  std::sort(merges_.begin(), merges_.end(), [](const Merge& a, const Merge& b) {
    if (a.left != b.left) return a.left < b.left;
    if (a.right != b.right) return a.right < b.right;
    return a.rank < b.rank;
  });
  // Repeated pairs: keep the first (lowest rank) in place of the others.
  size_t kept = 0;
  for (size_t i = 0; i < merges_.size(); ++i) {
    if (kept > 0 && merges_[kept - 1].left == merges_[i].left && merges_[kept - 1].right == merges_[i].right) {
      continue;
    }
    merges_[kept++] = merges_[i];
  }
  if (kept < merges_.size()) {
    Array<Merge> unique;
    status = unique.Allocate(kept, "BPE tokenizer: merges");
    if (status != TINYAI_OK) {
      *this = BpeTokenizer();
      return status;
    }
    std::copy(merges_.begin(), merges_.begin() + kept, unique.begin());
    merges_ = std::move(unique);
  }

  // Special tokens: by first byte, then longest first, then id.
  size_t special_count = 0;
  for (int32_t i = 0; i < count; ++i) special_count += IsSpecialType(token_type(i)) ? 1 : 0;
  status = specials_.Allocate(special_count, "BPE tokenizer: special tokens");
  if (status != TINYAI_OK) {
    *this = BpeTokenizer();
    return status;
  }
  special_count = 0;
  for (int32_t i = 0; i < count; ++i) {
    if (IsSpecialType(token_type(i))) specials_[special_count++] = i;
  }
  const Span<const StringView> tokens = v.tokens;
  std::sort(specials_.begin(), specials_.end(), [&tokens](int32_t a, int32_t b) {
    const StringView ta = tokens[static_cast<size_t>(a)], tb = tokens[static_cast<size_t>(b)];
    const unsigned char fa = static_cast<unsigned char>(ta.data[0]), fb = static_cast<unsigned char>(tb.data[0]);
    if (fa != fb) return fa < fb;
    if (ta.size != tb.size) return ta.size > tb.size;
    return a < b;
  });
  TINYAI_RETURN_IF_ERROR(special_start_.Allocate(257, "BPE special token index"));
  size_t s = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    special_start_[b] = static_cast<uint32_t>(s);
    while (s < specials_.size() && static_cast<unsigned char>(tokens_[static_cast<size_t>(specials_[s])].data[0]) == b) {
      ++s;
    }
  }
  special_start_[256] = static_cast<uint32_t>(s);

  pre_ = pre;
  ignore_merges_ = pre == BpePre::kLlama3;
  nfc_ = v.nfc;
  bos_ = v.bos;
  eos_ = v.eos;
  add_bos_ = v.add_bos;
  add_eos_ = v.add_eos;
  return TINYAI_OK;
}

// ---- Encode ----------------------------------------------------------------------

int32_t BpeTokenizer::MatchSpecial(const char* text, size_t size, size_t pos, bool parseSpecial) const {
  const unsigned char b = static_cast<unsigned char>(text[pos]);
  for (uint32_t i = special_start_[b]; i < special_start_[b + 1]; ++i) {
    const int32_t id = specials_[i];
    const StringView t = tokens_[static_cast<size_t>(id)];
    if (t.size > size - pos || std::memcmp(t.data, text + pos, t.size) != 0) continue;
    if (!parseSpecial && token_type(id) != kBpeTokenUserDefined) continue;
    return id;
  }
  return -1;
}

template <class Emit>
TinyAIStatus BpeTokenizer::EncodeWord(const char* word, size_t size, BpeScratch* scratch, Emit& emit) const {
  using Node = BpeScratch::Node;
  using Candidate = BpeScratch::Candidate;
  if (ignore_merges_ && size <= max_token_length_) {
    const size_t len = ByteLevel(word, size, scratch->encoded_.data());
    const int32_t id = TokenId(scratch->encoded_.data(), len);
    if (id >= 0) {
      emit(id);
      return TINYAI_OK;
    }
  }
  Array<Node>& nodes = scratch->nodes_;
  for (size_t i = 0; i < size; ++i) {
    const unsigned char b = static_cast<unsigned char>(word[i]);
    const int32_t id = byte_token_[b];
    if (id < 0) {
      char form[4];
      const size_t len = unicode::Encode(ByteToCodePoint(b), form);
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "BPE tokenizer: byte 0x%02X of the text has no token (its "
                      "byte-level form '%s' is not in the vocabulary)", b, Printable(form, len).c_str());
    }
    nodes[i] = Node{id, static_cast<int32_t>(i) - 1, i + 1 < size ? static_cast<int32_t>(i + 1) : -1};
  }
  Array<Candidate>& heap = scratch->heap_;
  size_t heap_size = 0;
  auto valid = [&](const Candidate& c) {
    const Node& left = nodes[static_cast<size_t>(c.left)];
    return left.token >= 0 && left.next == c.right && nodes[static_cast<size_t>(c.right)].next == c.right_next;
  };
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Merge* m = FindMerge(nodes[static_cast<size_t>(left)].token, nodes[static_cast<size_t>(right)].token);
    if (m == nullptr) return;
    if (heap_size == heap.size()) {
      size_t kept = 0;
      for (size_t i = 0; i < heap_size; ++i) {
        if (valid(heap[i])) heap[kept++] = heap[i];
      }
      heap_size = kept;
      std::make_heap(heap.begin(), heap.begin() + heap_size, CandidateAfter());
    }
    heap[heap_size++] = Candidate{m->rank, left, right, nodes[static_cast<size_t>(right)].next, m->merged};
    std::push_heap(heap.begin(), heap.begin() + heap_size, CandidateAfter());
  };
  for (size_t i = 0; i + 1 < size; ++i) consider(static_cast<int32_t>(i), static_cast<int32_t>(i + 1));
  while (heap_size > 0) {
    std::pop_heap(heap.begin(), heap.begin() + heap_size, CandidateAfter());
    const Candidate c = heap[--heap_size];
    if (!valid(c)) continue;
    Node& left = nodes[static_cast<size_t>(c.left)];
    Node& right = nodes[static_cast<size_t>(c.right)];
    left.token = c.merged;
    left.next = right.next;
    if (right.next >= 0) nodes[static_cast<size_t>(right.next)].prev = c.left;
    right.token = -1;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }
  for (int32_t i = size > 0 ? 0 : -1; i >= 0; i = nodes[static_cast<size_t>(i)].next) {
    emit(nodes[static_cast<size_t>(i)].token);
  }
  return TINYAI_OK;
}

template <class Emit>
TinyAIStatus BpeTokenizer::EncodePiece(const char* text, size_t size, BpeScratch* scratch, Emit& emit) const {
  StringView piece{text, size};
  if (nfc_) piece = unicode::Nfc(text, size, scratch->cps_.data(), scratch->nfc_.data());
  PreTokenizer pre(pre_, piece.data, piece.size);
  size_t start = 0, end = 0;
  while (pre.Next(&start, &end)) {
    TINYAI_RETURN_IF_ERROR(EncodeWord(piece.data + start, end - start, scratch, emit));
  }
  return TINYAI_OK;
}

TinyAIStatus BpeTokenizer::Encode(const char* text, size_t size, bool parseSpecial, bool addBos, bool addEos,
                                  int32_t* out, size_t capacity, size_t* count, BpeScratch* scratch) const {
  if ((text == nullptr && size > 0) || count == nullptr || (out == nullptr && capacity > 0)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "BPE tokenizer: Encode: NULL %s",
                    count == nullptr ? "count" : out == nullptr && capacity > 0 ? "output" : "text");
  }
  *count = 0;
  if (sorted_.size() == 0) return SetError(TINYAI_ERR_MISUSE, "BPE tokenizer: Encode before a successful Init");
  if ((addBos && bos_ < 0) || (addEos && eos_ < 0)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "BPE tokenizer: Encode asked to add %s but the vocabulary has "
                    "none", addBos && bos_ < 0 ? "BOS" : "EOS");
  }
  BpeScratch temporary;
  if (scratch == nullptr) scratch = &temporary;
  TINYAI_RETURN_IF_ERROR(scratch->Reserve(size, nfc_));
  size_t total = 0;
  auto emit = [&](int32_t id) {
    if (total < capacity) out[total] = id;
    ++total;
  };
  if (addBos) emit(bos_);
  size_t piece_start = 0;
  for (size_t pos = 0; pos < size;) {
    const int32_t special = specials_.size() > 0 ? MatchSpecial(text, size, pos, parseSpecial) : -1;
    if (special < 0) {
      ++pos;
      continue;
    }
    if (pos > piece_start) TINYAI_RETURN_IF_ERROR(EncodePiece(text + piece_start, pos - piece_start, scratch, emit));
    emit(special);
    pos += tokens_[static_cast<size_t>(special)].size;
    piece_start = pos;
  }
  if (size > piece_start) TINYAI_RETURN_IF_ERROR(EncodePiece(text + piece_start, size - piece_start, scratch, emit));
  if (addEos) emit(eos_);
  *count = total;
  if (total > capacity) {
    return SetError(TINYAI_ERR_BUFFER_TOO_SMALL, "BPE tokenizer: the text needs %zu tokens but the output holds %zu",
                    total, capacity);
  }
  return TINYAI_OK;
}

// ---- Decode ----------------------------------------------------------------------

StringView BpeTokenizer::Decode(int32_t token, char* byteScratch) const {
  if (token < 0 || token >= vocab_size()) return StringView();
  const int32_t type = token_type(token);
  if (type == kBpeTokenControl || type == kBpeTokenUserDefined) return tokens_[static_cast<size_t>(token)];
  if (byteScratch == nullptr) return StringView();
  // A token's raw bytes are never more than its byte-level form's.
  return StringView{byteScratch, DecodeTo(token, byteScratch, max_token_length_)};
}

size_t BpeTokenizer::DecodeTo(int32_t token, char* out, size_t capacity) const {
  if (token < 0 || token >= vocab_size()) return 0;
  const StringView t = tokens_[static_cast<size_t>(token)];
  const int32_t type = token_type(token);
  if (type == kBpeTokenControl || type == kBpeTokenUserDefined) {
    if (t.size > 0 && capacity > 0) std::memcpy(out, t.data, t.size < capacity ? t.size : capacity);
    return t.size;
  }
  size_t n = 0;
  for (size_t pos = 0; pos < t.size;) {
    const unicode::CodePoint c = unicode::Decode(t.data, t.size, pos);
    const int b = c.cp < unicode::kInvalidByte ? CodePointToByte(c.cp) : -1;
    if (b >= 0) {
      if (n < capacity) out[n] = static_cast<char>(b);
      ++n;
    } else {
      for (size_t i = 0; i < c.size; ++i, ++n) {
        if (n < capacity) out[n] = t.data[pos + i];
      }
    }
    pos += c.size;
  }
  return n;
}

}  // namespace tinyai
