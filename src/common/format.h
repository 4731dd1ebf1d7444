// snprintf for the core, the same on every C library: integers (with the
// hh/h/l/ll/z/j/t modifiers), strings, characters and pointers are
// formatted here, so a message reads the same from newlib (whose Debian
// build knows neither %zu nor %llu: an error message on a Cortex-M read
// past its arguments) as from glibc; a floating-point conversion is handed
// to the C library's vsnprintf alone, one value at a time. C99 semantics:
// the result is NUL-terminated within size (when size > 0) and the return
// value is the length the whole text would have, or -1 for a conversion it
// does not know (%n is refused).
#ifndef TINYAI_COMMON_FORMAT_H_
#define TINYAI_COMMON_FORMAT_H_

#include <cstdarg>
#include <cstddef>

namespace tinyai {

int VFormat(char* out, size_t size, const char* format, va_list args);
int Format(char* out, size_t size, const char* format, ...) __attribute__((format(printf, 3, 4)));

}  // namespace tinyai

#endif  // TINYAI_COMMON_FORMAT_H_
