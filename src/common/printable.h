// Names read from a file, shown whole in a message. A name a file gives (a
// GGUF key or tensor name, a JSON string, a metadata key, a dense layer's
// activation) may hold any byte: printed with "%s" it would end at its first
// NUL, and a control byte would garble the terminal. Printable() copies it
// into a fixed buffer with every byte that is not printable written as \xNN
// (a backslash as \\), so "bad\0name" is shown as bad\x00name; well-formed
// UTF-8 is kept as it is. Nothing is allocated: the runtime's readers use it
// as the importers do.
//
//   return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' ...", src, Printable(key).c_str());
#ifndef TINYAI_COMMON_PRINTABLE_H_
#define TINYAI_COMMON_PRINTABLE_H_

#include <cstddef>
#include <cstdint>

#include "common/span.h"

namespace tinyai {

// The escaped text: at most kCapacity - 1 characters; a longer name ends
// with "..." (a message holds 512 bytes in all).
struct PrintableText {
  static constexpr size_t kCapacity = 200;
  char text[kCapacity];
  const char* c_str() const { return text; }
};

namespace printable_detail {

// Bytes of the well-formed UTF-8 sequence of a multi-byte character at p
// (n bytes left), or 0. Overlong forms, surrogates, code points above
// U+10FFFF and the C1 controls (U+0080..U+009F) are not kept.
inline size_t Utf8Length(const unsigned char* p, size_t n) {
  const unsigned char c = p[0];
  size_t len = 0;
  uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    cp = c & 0x1Fu;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    cp = c & 0x0Fu;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07u;
  } else {
    return 0;
  }
  if (len > n) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((p[i] & 0xC0u) != 0x80u) return 0;
    cp = (cp << 6) | (p[i] & 0x3Fu);
  }
  const uint32_t least = len == 2 ? 0xA0u : len == 3 ? 0x800u : 0x10000u;  // C1 controls are not shown raw
  if (cp < least || cp > 0x10FFFFu || (cp >= 0xD800u && cp <= 0xDFFFu)) return 0;
  return len;
}

}  // namespace printable_detail

// size bytes at data (data may be NULL when size is 0), escaped.
inline PrintableText Printable(const char* data, size_t size) {
  static const char kHex[] = "0123456789abcdef";
  PrintableText out;
  const size_t room = PrintableText::kCapacity - 4;  // "..." and the NUL
  size_t used = 0, i = 0;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(data);
  while (i < size) {
    const unsigned char c = p[i];
    const size_t utf8 = c >= 0x80 ? printable_detail::Utf8Length(p + i, size - i) : 0;
    const bool plain = c >= 0x20 && c < 0x7F && c != '\\';
    // Bytes written for this character: itself, a UTF-8 sequence, \\ or \xNN.
    const size_t n = plain ? 1 : utf8 > 0 ? utf8 : c == '\\' ? 2 : 4;
    if (used + n > room) break;
    if (plain) {
      out.text[used++] = static_cast<char>(c);
      i += 1;
    } else if (utf8 > 0) {
      for (size_t k = 0; k < utf8 && k < 4; ++k) out.text[used++] = static_cast<char>(p[i + k]);
      i += utf8;
    } else if (c == '\\') {
      out.text[used++] = '\\';
      out.text[used++] = '\\';
      i += 1;
    } else {
      out.text[used++] = '\\';
      out.text[used++] = 'x';
      out.text[used++] = kHex[c >> 4];
      out.text[used++] = kHex[c & 15];
      i += 1;
    }
  }
  if (i < size) {
    out.text[used++] = '.';
    out.text[used++] = '.';
    out.text[used++] = '.';
  }
  out.text[used] = '\0';
  return out;
}

inline PrintableText Printable(StringView v) { return Printable(v.data, v.size); }

// A string-like value with data() and size() (std::string).
template <class S>
inline PrintableText Printable(const S& s) {
  return Printable(s.data(), s.size());
}

}  // namespace tinyai

#endif  // TINYAI_COMMON_PRINTABLE_H_
