// Ids of a vocabulary's strings sorted by their bytes (equal strings by id),
// and the lookup of a string's lowest id: what both tokenizers (text/
// tokenizer.h, text/bpe_tokenizer.h) find tokens by.
#ifndef TINYAI_TEXT_STRING_INDEX_H_
#define TINYAI_TEXT_STRING_INDEX_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/span.h"

namespace tinyai {

// Byte order, a prefix first.
inline bool BytesLess(StringView a, StringView b) {
  const size_t n = a.size < b.size ? a.size : b.size;
  if (n > 0) {
    const int c = std::memcmp(a.data, b.data, n);
    if (c != 0) return c < 0;
  }
  return a.size < b.size;
}

// Sorts ids[0, count) by strings[id], equal strings by id.
inline void SortByBytes(Span<const StringView> strings, int32_t* ids, size_t count) {
  std::sort(ids, ids + count, [&strings](int32_t a, int32_t b) {
    const StringView sa = strings[static_cast<size_t>(a)], sb = strings[static_cast<size_t>(b)];
    if (BytesLess(sa, sb)) return true;
    if (BytesLess(sb, sa)) return false;
    return a < b;
  });
}

// The lowest id whose string is bytes[0, size), or -1; ids as SortByBytes left them.
inline int32_t FindBytes(Span<const StringView> strings, const int32_t* ids, size_t count, const char* bytes,
                         size_t size) {
  const StringView key{bytes, size};
  size_t lo = 0, hi = count;
  while (lo < hi) {  // the first id whose string is not less than key
    const size_t mid = lo + (hi - lo) / 2;
    if (BytesLess(strings[static_cast<size_t>(ids[mid])], key)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == count) return -1;
  const StringView s = strings[static_cast<size_t>(ids[lo])];
  if (s.size != size || (size > 0 && std::memcmp(s.data, bytes, size) != 0)) return -1;
  return ids[lo];
}

}  // namespace tinyai

#endif  // TINYAI_TEXT_STRING_INDEX_H_
