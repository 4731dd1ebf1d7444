#include "text/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/checked_math.h"
#include "common/ledger.h"
#include "common/status.h"
#include "text/string_index.h"

// Encode reproduces llama2.c's encode() token for token:
//  1. a dummy-prefix token (the piece " ") when the text is not empty;
//  2. the text cut into chunks exactly as llama2.c does (a chunk starts at
//     every byte that is not a continuation byte 10xxxxxx and takes up to 3
//     following continuation bytes), each chunk found in the vocabulary
//     becoming its id and otherwise each of its bytes becoming the
//     byte-fallback id byte + 3. Invalid UTF-8 therefore never reads past the
//     terminating NUL and ends up as byte-fallback tokens;
//  3. repeatedly, the adjacent pair whose concatenation is a piece with the
//     highest score (strictly above llama2.c's starting best of -1e10; the
//     leftmost pair on ties) is replaced by that piece.
// llama2.c rescans all pairs after every merge (quadratic); here every pair
// is scored once when it forms and kept in a max-heap ordered by (score,
// leftmost position) with stale entries skipped, which picks the same pair at
// every step in O(n log n). Scratch: 12 bytes per text byte for the token
// list plus 16 bytes per heap slot, about 1.25 slots per text byte (stale
// entries are compacted away when the heap fills).
// Unlike llama2.c the BOS token is added after the merges (as SentencePiece
// does) and so never takes part in one; llama2.c's own vocabularies have no
// piece starting with the BOS piece, so the ids are the same.

namespace tinyai {
namespace {

// llama2.c's merge loop starts from best_score = -1e10 and only takes a
// strictly better score, so a piece scoring -1e10 or less never merges.
constexpr float kNoMergeScore = -1e10f;

// Heap order: the top is the highest score, then the leftmost pair.
struct CandidateLess {
  bool operator()(const EncodeScratch::Candidate& a, const EncodeScratch::Candidate& b) const {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  }
};

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

TinyAIStatus Tokenizer::Init(Span<const StringView> pieces, Span<const float> scores,
                             int32_t bosId, int32_t eosId, uint32_t maxPieceLength) {
  pieces_ = Span<const StringView>();
  scores_ = Span<const float>();
  sorted_ = Array<int32_t>();
  max_piece_length_ = 0;

  if (pieces.empty()) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "tokenizer: empty vocabulary");
  }
  if (pieces.data() == nullptr || scores.data() == nullptr) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "tokenizer: NULL %s for %zu tokens",
                    pieces.data() == nullptr ? "pieces" : "scores", pieces.size());
  }
  if (scores.size() != pieces.size()) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER,
                    "tokenizer: %zu pieces but %zu scores (token %zu has no %s)", pieces.size(),
                    scores.size(),
                    scores.size() < pieces.size() ? scores.size() : pieces.size(),
                    scores.size() < pieces.size() ? "score" : "piece");
  }
  if (pieces.size() > static_cast<size_t>(INT32_MAX)) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "tokenizer: %zu tokens exceed the int32 id range",
                    pieces.size());
  }
  const int32_t n = static_cast<int32_t>(pieces.size());
  size_t longest = 0;
  for (int32_t i = 0; i < n; ++i) {
    const StringView& p = pieces[static_cast<size_t>(i)];
    if (p.size == 0) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "tokenizer: token %d has an empty piece", i);
    }
    if (p.data == nullptr) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "tokenizer: token %d has a NULL piece of %zu bytes",
                      i, p.size);
    }
    if (maxPieceLength > 0 && p.size > maxPieceLength) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER,
                      "tokenizer: token %d: piece of %zu bytes exceeds the maximum length %u", i,
                      p.size, maxPieceLength);
    }
    if (p.size > UINT32_MAX / 2) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "tokenizer: token %d: piece of %zu bytes is too long",
                      i, p.size);
    }
    const float s = scores[static_cast<size_t>(i)];
    if (!std::isfinite(s)) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "tokenizer: token %d has a non-finite score %g", i,
                      static_cast<double>(s));
    }
    if (p.size > longest) longest = p.size;
  }
  if (bosId < 0 || bosId >= n) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER,
                    "tokenizer: BOS token %d is outside the vocabulary of %d tokens", bosId, n);
  }
  if (eosId < 0 || eosId >= n) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER,
                    "tokenizer: EOS token %d is outside the vocabulary of %d tokens", eosId, n);
  }

  Array<int32_t> sorted;
  TINYAI_RETURN_IF_ERROR(sorted.Allocate(static_cast<size_t>(n), "tokenizer sorted index"));
  for (int32_t i = 0; i < n; ++i) sorted[static_cast<size_t>(i)] = i;
  // Equal pieces (none in real vocabularies) sort by id, so Lookup returns
  // the lowest id deterministically.
  SortByBytes(pieces, sorted.data(), sorted.size());

  pieces_ = pieces;
  scores_ = scores;
  sorted_ = std::move(sorted);
  bos_ = bosId;
  eos_ = eosId;
  // From here on the length of the longest piece actually present (sizes the
  // merge buffer in Encode).
  max_piece_length_ = static_cast<uint32_t>(longest);
  return TINYAI_OK;
}

int32_t Tokenizer::Lookup(const char* bytes, size_t size) const {
  return FindBytes(pieces_, sorted_.data(), sorted_.size(), bytes, size);
}

namespace {

// Initial tokens: the dummy prefix plus at most one per byte; the heap holds
// the n - 1 initial pairs and then some (Encode compacts it when it fills:
// there are never more live pairs than nodes - 1).
size_t HeapSlots(size_t nodes) { return nodes + nodes / 4 + 2; }

}  // namespace

uint64_t EncodeScratch::BytesFor(size_t text_bytes, uint32_t max_piece_length) {
  const uint64_t nodes = uint64_t{text_bytes} + 1;
  return nodes * sizeof(Node) + HeapSlots(nodes) * sizeof(Candidate) + 2u * max_piece_length;
}

TinyAIStatus EncodeScratch::Reserve(size_t text_bytes, uint32_t max_piece_length) {
  if (text_bytes > static_cast<size_t>(INT32_MAX) / 4) {
    return SetError(TINYAI_ERR_OVERFLOW, "tokenizer: text of %zu bytes is too long to encode", text_bytes);
  }
  const size_t nodes = text_bytes + 1;
  MemScope scope(kMemText);
  if (nodes_.size() < nodes) {
    TINYAI_RETURN_IF_ERROR(nodes_.Allocate(nodes, "tokenizer: encode tokens"));
    TINYAI_RETURN_IF_ERROR(heap_.Allocate(HeapSlots(nodes), "tokenizer: encode merge heap"));
  }
  if (buffer_.size() < 2u * max_piece_length) {
    TINYAI_RETURN_IF_ERROR(buffer_.Allocate(2u * max_piece_length, "tokenizer: encode merge buffer"));
  }
  return TINYAI_OK;
}

TinyAIStatus Tokenizer::Encode(const char* text, bool addBos, bool addEos, int32_t* out,
                               size_t capacity, size_t* count, EncodeScratch* scratch) const {
  if (text == nullptr || count == nullptr || (out == nullptr && capacity > 0)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tokenizer: Encode: NULL %s",
                    text == nullptr ? "text" : count == nullptr ? "count" : "output");
  }
  *count = 0;
  if (pieces_.empty()) {
    return SetError(TINYAI_ERR_MISUSE, "tokenizer: Encode before a successful Init");
  }
  const int32_t vocab = vocab_size();
  const size_t length = std::strlen(text);
  EncodeScratch temporary;
  if (!scratch) scratch = &temporary;
  using Node = EncodeScratch::Node;
  using Candidate = EncodeScratch::Candidate;
  Array<Node>& nodes = scratch->nodes_;
  Array<Candidate>& heap = scratch->heap_;
  Array<char>& buffer = scratch->buffer_;
  size_t used = 0;
  if (length > 0) {
    TINYAI_RETURN_IF_ERROR(scratch->Reserve(length, max_piece_length_));

    auto push = [&](int32_t token) {
      nodes[used].token = token;
      nodes[used].prev = static_cast<int32_t>(used) - 1;
      nodes[used].next = -1;
      if (used > 0) nodes[used - 1].next = static_cast<int32_t>(used);
      ++used;
    };
    auto pushByte = [&](unsigned char byte) -> bool {
      const int32_t id = static_cast<int32_t>(byte) + 3;
      if (id >= vocab) return false;
      push(id);
      return true;
    };
    auto noByteToken = [&](unsigned char byte) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER,
                      "tokenizer: byte 0x%02X of the text is not in the vocabulary and its "
                      "byte-fallback token %d is outside the vocabulary of %d tokens",
                      byte, static_cast<int>(byte) + 3, vocab);
    };

    // 1. The dummy prefix.
    const int32_t space = Lookup(" ", 1);
    if (space >= 0) {
      push(space);
    } else if (!pushByte(' ')) {
      return noByteToken(' ');
    }

    // 2. Codepoint chunks, as llama2.c cuts them.
    size_t start = 0;
    while (start < length) {
      size_t end = start + 1;
      while (end - start < 4 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
      const int32_t id = Lookup(text + start, end - start);
      if (id >= 0) {
        push(id);
      } else {
        for (size_t i = start; i < end; ++i) {
          const unsigned char byte = static_cast<unsigned char>(text[i]);
          if (!pushByte(byte)) return noByteToken(byte);
        }
      }
      start = end;
    }

    // 3. Merges.
    size_t heapSize = 0;
    auto valid = [&](const Candidate& c) {
      const Node& left = nodes[static_cast<size_t>(c.left)];
      if (left.token < 0 || left.next != c.right) return false;
      const int32_t rightToken = nodes[static_cast<size_t>(c.right)].token;
      return pieces_[static_cast<size_t>(c.merged)].size ==
             pieces_[static_cast<size_t>(left.token)].size +
                 pieces_[static_cast<size_t>(rightToken)].size;
    };
    auto consider = [&](int32_t left, int32_t right) {
      if (left < 0 || right < 0) return;
      const StringView a = pieces_[static_cast<size_t>(nodes[static_cast<size_t>(left)].token)];
      const StringView b = pieces_[static_cast<size_t>(nodes[static_cast<size_t>(right)].token)];
      std::memcpy(buffer.data(), a.data, a.size);
      std::memcpy(buffer.data() + a.size, b.data, b.size);
      const int32_t merged = Lookup(buffer.data(), a.size + b.size);
      if (merged < 0) return;
      const float score = scores_[static_cast<size_t>(merged)];
      if (!(score > kNoMergeScore)) return;
      if (heapSize == heap.size()) {
        // Drop the stale entries. The valid ones are live pairs other than
        // this one, fewer than the nodes, so room remains.
        size_t kept = 0;
        for (size_t i = 0; i < heapSize; ++i) {
          if (valid(heap[i])) heap[kept++] = heap[i];
        }
        heapSize = kept;
        std::make_heap(heap.begin(), heap.begin() + heapSize, CandidateLess());
      }
      heap[heapSize++] = Candidate{score, left, right, merged};
      std::push_heap(heap.begin(), heap.begin() + heapSize, CandidateLess());
    };
    for (size_t i = 0; i + 1 < used; ++i) {
      consider(static_cast<int32_t>(i), static_cast<int32_t>(i + 1));
    }
    while (heapSize > 0) {
      std::pop_heap(heap.begin(), heap.begin() + heapSize, CandidateLess());
      const Candidate c = heap[--heapSize];
      if (!valid(c)) continue;
      Node& left = nodes[static_cast<size_t>(c.left)];
      Node& right = nodes[static_cast<size_t>(c.right)];
      left.token = c.merged;
      left.next = right.next;
      if (right.next >= 0) nodes[static_cast<size_t>(right.next)].prev = c.left;
      right.token = -1;  // dead
      consider(left.prev, c.left);
      consider(c.left, left.next);
    }
  }

  // Output: BOS, the surviving tokens in order, EOS.
  size_t total = 0;
  auto emit = [&](int32_t id) {
    if (total < capacity) out[total] = id;
    ++total;
  };
  if (addBos) emit(bos_);
  for (int32_t i = used > 0 ? 0 : -1; i >= 0; i = nodes[static_cast<size_t>(i)].next) {
    emit(nodes[static_cast<size_t>(i)].token);
  }
  if (addEos) emit(eos_);
  *count = total;
  if (total > capacity) {
    return SetError(TINYAI_ERR_BUFFER_TOO_SMALL, "tokenizer: the text needs %zu tokens but the output holds %zu",
                    total, capacity);
  }
  return TINYAI_OK;
}

StringView Tokenizer::Decode(int32_t prevToken, int32_t token, char* byteScratch) const {
  if (token < 0 || token >= vocab_size()) return StringView();
  StringView p = pieces_[static_cast<size_t>(token)];
  if (prevToken == bos_ && p.size > 0 && p.data[0] == ' ') {
    ++p.data;
    --p.size;
  }
  if (p.size == 6 && p.data[0] == '<' && p.data[1] == '0' && p.data[2] == 'x' && p.data[5] == '>') {
    const int hi = HexValue(p.data[3]);
    const int lo = HexValue(p.data[4]);
    if (hi >= 0 && lo >= 0) {
      if (byteScratch == nullptr) return StringView();
      byteScratch[0] = static_cast<char>(hi * 16 + lo);
      return StringView{byteScratch, 1};
    }
  }
  return p;
}

}  // namespace tinyai
