// snprintf the same on every C library: see format.h.
#include "common/format.h"

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace tinyai {
namespace {

// Appends to out (room size, NUL kept in it) and counts every byte.
struct Sink {
  char* out;
  size_t size;
  size_t length = 0;
  void Put(char c) {
    if (length + 1 < size) out[length] = c;
    ++length;
  }
  void Put(const char* s, size_t n) {
    for (size_t i = 0; i < n; ++i) Put(s[i]);
  }
  void Pad(char c, int n) {
    for (int i = 0; i < n; ++i) Put(c);
  }
};

struct Spec {
  bool left = false, plus = false, space = false, alt = false, zero = false;
  int width = 0;
  int precision = -1;  // -1: none
};

// An unsigned magnitude in base (8, 10 or 16) with the spec's sign, prefix,
// precision and width.
void PutInteger(Sink* sink, const Spec& spec, uint64_t magnitude, bool negative, unsigned base, bool upper) {
  char digits[24];
  int n = 0;
  const char* alphabet = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  for (uint64_t v = magnitude; v != 0; v /= base) digits[n++] = alphabet[v % base];
  // Precision: the least digits (0 with a value of 0 prints none).
  int zeros = spec.precision > n ? spec.precision - n : 0;
  if (spec.precision < 0 && magnitude == 0) zeros = 1;
  if (spec.alt && base == 8 && zeros == 0 && (n == 0 || digits[n - 1] != '0')) zeros = 1;
  char sign[3] = {0, 0, 0};
  int sign_len = 0;
  if (negative) sign[sign_len++] = '-';
  else if (spec.plus && base == 10) sign[sign_len++] = '+';
  else if (spec.space && base == 10) sign[sign_len++] = ' ';
  if (spec.alt && base == 16 && magnitude != 0) {
    sign[sign_len++] = '0';
    sign[sign_len++] = upper ? 'X' : 'x';
  }
  const int body = sign_len + zeros + n;
  int pad = spec.width > body ? spec.width - body : 0;
  if (spec.zero && !spec.left && spec.precision < 0) {
    zeros += pad;
    pad = 0;
  }
  if (!spec.left) sink->Pad(' ', pad);
  sink->Put(sign, static_cast<size_t>(sign_len));
  sink->Pad('0', zeros);
  while (n > 0) sink->Put(digits[--n]);
  if (spec.left) sink->Pad(' ', pad);
}

void PutText(Sink* sink, const Spec& spec, const char* s, size_t n) {
  const int pad = spec.width > static_cast<int>(n) ? spec.width - static_cast<int>(n) : 0;
  if (!spec.left) sink->Pad(' ', pad);
  sink->Put(s, n);
  if (spec.left) sink->Pad(' ', pad);
}

}  // namespace

int VFormat(char* out, size_t size, const char* format, va_list args) {
  Sink sink{out, size};
  for (const char* p = format; *p;) {
    if (*p != '%') {
      sink.Put(*p++);
      continue;
    }
    ++p;
    Spec spec;
    for (;; ++p) {
      if (*p == '-') spec.left = true;
      else if (*p == '+') spec.plus = true;
      else if (*p == ' ') spec.space = true;
      else if (*p == '#') spec.alt = true;
      else if (*p == '0') spec.zero = true;
      else break;
    }
    if (*p == '*') {
      spec.width = va_arg(args, int);
      if (spec.width < 0) {
        spec.left = true;
        spec.width = -spec.width;
      }
      ++p;
    } else {
      while (*p >= '0' && *p <= '9') spec.width = spec.width * 10 + (*p++ - '0');
    }
    if (*p == '.') {
      ++p;
      spec.precision = 0;
      if (*p == '*') {
        spec.precision = va_arg(args, int);
        if (spec.precision < 0) spec.precision = -1;
        ++p;
      } else {
        while (*p >= '0' && *p <= '9') spec.precision = spec.precision * 10 + (*p++ - '0');
      }
    }
    // Length: 'H' hh, 'h', 'l', 'L' ll, 'z', 'j', 't', 'D' long double.
    char length = 0;
    if (p[0] == 'h' && p[1] == 'h') { length = 'H'; p += 2; }
    else if (p[0] == 'l' && p[1] == 'l') { length = 'L'; p += 2; }
    else if (*p == 'h' || *p == 'l' || *p == 'z' || *p == 'j' || *p == 't') length = *p++;
    else if (*p == 'L') { length = 'D'; ++p; }
    const char conversion = *p;
    if (conversion == 0) return -1;
    ++p;
    switch (conversion) {
      case 'd':
      case 'i': {
        int64_t v;
        switch (length) {
          case 'H': v = static_cast<signed char>(va_arg(args, int)); break;
          case 'h': v = static_cast<short>(va_arg(args, int)); break;
          case 'l': v = va_arg(args, long); break;
          case 'L': v = va_arg(args, long long); break;
          case 'z': v = static_cast<int64_t>(va_arg(args, ptrdiff_t)); break;  // ssize_t's size
          case 'j': v = va_arg(args, intmax_t); break;
          case 't': v = va_arg(args, ptrdiff_t); break;
          default: v = va_arg(args, int); break;
        }
        const uint64_t magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
        PutInteger(&sink, spec, magnitude, v < 0, 10, false);
        break;
      }
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        uint64_t v;
        switch (length) {
          case 'H': v = static_cast<unsigned char>(va_arg(args, unsigned)); break;
          case 'h': v = static_cast<unsigned short>(va_arg(args, unsigned)); break;
          case 'l': v = va_arg(args, unsigned long); break;
          case 'L': v = va_arg(args, unsigned long long); break;
          case 'z': v = va_arg(args, size_t); break;
          case 'j': v = va_arg(args, uintmax_t); break;
          case 't': v = static_cast<uint64_t>(va_arg(args, ptrdiff_t)); break;
          default: v = va_arg(args, unsigned); break;
        }
        const unsigned base = conversion == 'u' ? 10 : conversion == 'o' ? 8 : 16;
        PutInteger(&sink, spec, v, false, base, conversion == 'X');
        break;
      }
      case 'c': {
        const char c = static_cast<char>(va_arg(args, int));
        PutText(&sink, spec, &c, 1);
        break;
      }
      case 's': {
        const char* s = va_arg(args, const char*);
        if (!s) s = "(null)";
        size_t n = 0;
        while ((spec.precision < 0 || n < static_cast<size_t>(spec.precision)) && s[n]) ++n;
        PutText(&sink, spec, s, n);
        break;
      }
      case 'p': {
        Spec hex = spec;
        hex.alt = true;
        PutInteger(&sink, hex, reinterpret_cast<uintptr_t>(va_arg(args, void*)), false, 16, false);
        break;
      }
      case '%':
        sink.Put('%');
        break;
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
      case 'a':
      case 'A': {
        // One value through the C library, its spec rebuilt without the
        // length (a long double is narrowed to double).
        const double v = length == 'D' ? static_cast<double>(va_arg(args, long double)) : va_arg(args, double);
        char one[16];
        size_t n = 0;
        one[n++] = '%';
        if (spec.left) one[n++] = '-';
        if (spec.plus) one[n++] = '+';
        if (spec.space) one[n++] = ' ';
        if (spec.alt) one[n++] = '#';
        if (spec.zero) one[n++] = '0';
        one[n++] = '*';
        if (spec.precision >= 0) {
          one[n++] = '.';
          one[n++] = '*';
        }
        one[n++] = conversion;
        one[n] = 0;
        char text[352];  // DBL_MAX in %f: 309 digits
        const int len = spec.precision >= 0 ? std::snprintf(text, sizeof text, one, spec.width, spec.precision, v)
                                            : std::snprintf(text, sizeof text, one, spec.width, v);
        if (len < 0) return -1;
        sink.Put(text, static_cast<size_t>(len) < sizeof text ? static_cast<size_t>(len) : sizeof text - 1);
        break;
      }
      default:
        return -1;  // %n and unknown conversions
    }
  }
  if (size > 0) out[sink.length < size ? sink.length : size - 1] = 0;
  return static_cast<int>(sink.length);
}

int Format(char* out, size_t size, const char* format, ...) {
  va_list args;
  va_start(args, format);
  const int n = VFormat(out, size, format, args);
  va_end(args);
  return n;
}

}  // namespace tinyai
