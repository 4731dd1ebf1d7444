#include "text/unicode.h"

#include "text/unicode_tables.h"

namespace tinyai {
namespace unicode {
namespace {

using namespace unicode_data;

// Hangul syllables (The Unicode Standard, 3.12): composed and decomposed
// by arithmetic.
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount;
constexpr uint32_t kSCount = kLCount * kNCount;

bool IsHangulSyllable(uint32_t cp) { return cp >= kSBase && cp < kSBase + kSCount; }

// The last run whose start is <= cp, in runs packed start << shift | value.
uint32_t RunValue(const uint32_t* runs, size_t count, unsigned shift, uint32_t cp) {
  size_t lo = 0, hi = count;  // runs[0] starts at 0, so the answer exists
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    if ((runs[mid] >> shift) <= cp) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return runs[lo] & ((1u << shift) - 1);
}

// The one-level canonical decomposition of cp (not Hangul): false if none.
bool Decomposition(uint32_t cp, uint32_t* first, uint32_t* second) {
  size_t lo = 0, hi = kUnicodeDecompSize;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    const uint32_t key = static_cast<uint32_t>(kUnicodeDecomp[mid] >> 42);
    if (key == cp) {
      *first = static_cast<uint32_t>(kUnicodeDecomp[mid] >> 21) & 0x1FFFFF;
      *second = static_cast<uint32_t>(kUnicodeDecomp[mid]) & 0x1FFFFF;
      return true;
    }
    if (key < cp) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return false;
}

bool IsComposeSecond(uint32_t cp) {
  if (cp >= kVBase && cp < kVBase + kVCount) return true;
  if (cp > kTBase && cp < kTBase + kTCount) return true;
  size_t lo = 0, hi = kUnicodeComposeSecondSize;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (kUnicodeComposeSecond[mid] == cp) return true;
    if (kUnicodeComposeSecond[mid] < cp) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return false;
}

// The primary composite of first + second, or 0.
uint32_t Compose(uint32_t first, uint32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (IsHangulSyllable(first) && (first - kSBase) % kTCount == 0 && second > kTBase &&
      second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  if (first >= kInvalidByte || second >= kInvalidByte) return 0;
  const uint64_t key = static_cast<uint64_t>(first) << 42 | static_cast<uint64_t>(second) << 21;
  size_t lo = 0, hi = kUnicodeComposeSize;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    const uint64_t k = kUnicodeCompose[mid] & ~uint64_t{0x1FFFFF};
    if (k == key) return static_cast<uint32_t>(kUnicodeCompose[mid] & 0x1FFFFF);
    if (k < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return 0;
}

// Appends the full canonical decomposition of cp at cps[*n], keeping the
// marks in canonical order (a stable insertion by combining class).
void AppendDecomposed(uint32_t cp, uint32_t* cps, size_t* n) {
  if (IsHangulSyllable(cp)) {
    const uint32_t s = cp - kSBase;
    cps[(*n)++] = kLBase + s / kNCount;
    cps[(*n)++] = kVBase + (s % kNCount) / kTCount;
    if (s % kTCount != 0) cps[(*n)++] = kTBase + s % kTCount;
    return;
  }
  uint32_t first = 0, second = 0;
  if (cp < kInvalidByte && Decomposition(cp, &first, &second)) {
    AppendDecomposed(first, cps, n);
    if (second != 0) AppendDecomposed(second, cps, n);
    return;
  }
  const uint8_t ccc = cp < kInvalidByte ? CombiningClass(cp) : 0;
  size_t i = (*n)++;
  if (ccc != 0) {
    while (i > 0) {
      const uint32_t prev = cps[i - 1];
      const uint8_t prev_ccc = prev < kInvalidByte ? CombiningClass(prev) : 0;
      if (prev_ccc <= ccc) break;
      cps[i] = prev;
      --i;
    }
  }
  cps[i] = cp;
}

bool QuickStable(uint32_t cp) {
  if (cp < 0x300 || cp >= kInvalidByte || IsHangulSyllable(cp)) return true;
  uint32_t first, second;
  return CombiningClass(cp) == 0 && !Decomposition(cp, &first, &second) && !IsComposeSecond(cp);
}

}  // namespace

CodePoint Decode(const char* text, size_t size, size_t pos) {
  const unsigned char* s = reinterpret_cast<const unsigned char*>(text) + pos;
  const size_t left = size - pos;
  const uint32_t b0 = s[0];
  const CodePoint invalid{kInvalidByte + b0, 1};
  if (b0 < 0x80) return CodePoint{b0, 1};
  uint32_t need, cp, min;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1, cp = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2, cp = b0 & 0x0F, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3, cp = b0 & 0x07, min = 0x10000;
  } else {
    return invalid;
  }
  if (left <= need) return invalid;
  for (uint32_t i = 1; i <= need; ++i) {
    if ((s[i] & 0xC0) != 0x80) return invalid;
    cp = cp << 6 | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return invalid;
  return CodePoint{cp, need + 1};
}

size_t Encode(uint32_t cp, char* out) {
  unsigned char* o = reinterpret_cast<unsigned char*>(out);
  if (cp >= kInvalidByte) {
    o[0] = static_cast<unsigned char>(cp - kInvalidByte);
    return 1;
  }
  if (cp < 0x80) {
    o[0] = static_cast<unsigned char>(cp);
    return 1;
  }
  if (cp < 0x800) {
    o[0] = static_cast<unsigned char>(0xC0 | cp >> 6);
    o[1] = static_cast<unsigned char>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = static_cast<unsigned char>(0xE0 | cp >> 12);
    o[1] = static_cast<unsigned char>(0x80 | (cp >> 6 & 0x3F));
    o[2] = static_cast<unsigned char>(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = static_cast<unsigned char>(0xF0 | cp >> 18);
  o[1] = static_cast<unsigned char>(0x80 | (cp >> 12 & 0x3F));
  o[2] = static_cast<unsigned char>(0x80 | (cp >> 6 & 0x3F));
  o[3] = static_cast<unsigned char>(0x80 | (cp & 0x3F));
  return 4;
}

uint8_t Flags(uint32_t cp) {
  if (cp >= kInvalidByte) return kClassOther;
  return static_cast<uint8_t>(RunValue(kUnicodeClassRuns, kUnicodeClassRunsSize, 4, cp));
}

uint8_t CombiningClass(uint32_t cp) {
  if (cp < 0x300 || cp >= kInvalidByte) return 0;
  return static_cast<uint8_t>(RunValue(kUnicodeCccRuns, kUnicodeCccRunsSize, 8, cp));
}

const char* Version() { return kUnicodeVersion; }

size_t NfcCodePointsFor(size_t text_bytes) {
  return (text_bytes * kMaxDecompCodePointsPerByteTimes2 + 1) / 2;
}

size_t NfcBytesFor(size_t text_bytes) { return text_bytes * kMaxNfcBytesPerByte; }

bool IsNfcQuick(const char* text, size_t size) {
  for (size_t pos = 0; pos < size;) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const CodePoint c = Decode(text, size, pos);
    if (!QuickStable(c.cp)) return false;
    pos += c.size;
  }
  return true;
}

StringView Nfc(const char* text, size_t size, uint32_t* cps, char* out) {
  if (IsNfcQuick(text, size)) return StringView{text, size};
  // Decompose fully, in canonical order.
  size_t n = 0;
  for (size_t pos = 0; pos < size;) {
    const CodePoint c = Decode(text, size, pos);
    AppendDecomposed(c.cp, cps, &n);
    pos += c.size;
  }
  // Compose (UAX #15's canonical composition): a mark joins the last
  // starter unless a mark of the same or a higher class, or a starter,
  // stands between them.
  size_t kept = n > 0 ? 1 : 0;
  if (n > 0) {
    size_t starter = 0;
    uint32_t starter_cp = cps[0];
    uint32_t last_ccc = CombiningClass(starter_cp) != 0 ? 256 : 0;
    for (size_t i = 1; i < n; ++i) {
      const uint32_t cp = cps[i];
      const uint32_t ccc = CombiningClass(cp);
      const uint32_t composite = last_ccc < 256 ? Compose(starter_cp, cp) : 0;
      if (composite != 0 && (last_ccc < ccc || last_ccc == 0)) {
        cps[starter] = composite;
        starter_cp = composite;
        continue;
      }
      if (ccc == 0) {
        starter = kept;
        starter_cp = cp;
      }
      last_ccc = ccc;
      cps[kept++] = cp;
    }
  }
  size_t bytes = 0;
  for (size_t i = 0; i < kept; ++i) bytes += Encode(cps[i], out + bytes);
  return StringView{out, bytes};
}

}  // namespace unicode
}  // namespace tinyai
