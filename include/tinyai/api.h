/*
 * tinyai/api.h - TINYAI_API, the mark of every public function.
 *
 * The library is built with every other symbol hidden
 * (-fvisibility=hidden): a shared libtinyai exports exactly the tinyai*
 * functions of these headers (tests/exported_symbols.cmake checks), so its
 * internals can change without breaking a program linked against it.
 */
#ifndef TINYAI_API_H
#define TINYAI_API_H

#ifndef TINYAI_API
#if defined(__GNUC__) || defined(__clang__)
#define TINYAI_API __attribute__((visibility("default")))
#else
#define TINYAI_API
#endif
#endif

#endif /* TINYAI_API_H */
