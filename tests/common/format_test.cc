// tinyai::Format (common/format.h) against the C library's snprintf on the
// host: every conversion the core's messages use, with flags, widths,
// precisions and lengths; truncation and the returned length; and what it
// refuses. On a Cortex-M (newlib without %zu and %llu) the same code runs:
// this test is portable.
#include "common/format.h"

#include <gtest/gtest.h>

#include <cinttypes>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tinyai {
namespace {

#define EXPECT_SAME(...)                                                    \
  do {                                                                      \
    char want[512], got[512];                                               \
    const int nw = std::snprintf(want, sizeof want, __VA_ARGS__);           \
    const int ng = tinyai::Format(got, sizeof got, __VA_ARGS__);            \
    EXPECT_EQ(ng, nw) << #__VA_ARGS__;                                      \
    EXPECT_STREQ(got, want) << #__VA_ARGS__;                                \
  } while (0)

TEST(Format, IntegersAsTheCLibraryFormatsThem) {
  for (long long v : {0LL, 1LL, -1LL, 42LL, -42LL, 123456789LL, LLONG_MAX, LLONG_MIN}) {
    EXPECT_SAME("%lld|%5lld|%-7lld|%+lld|% lld|%08lld|%.3lld|%8.3lld", v, v, v, v, v, v, v, v);
    EXPECT_SAME("%llu|%llx|%016llx|%#llx|%llX|%llo", static_cast<unsigned long long>(v),
                static_cast<unsigned long long>(v), static_cast<unsigned long long>(v),
                static_cast<unsigned long long>(v), static_cast<unsigned long long>(v),
                static_cast<unsigned long long>(v));
  }
  for (int v : {0, 7, -7, 255, INT_MAX, INT_MIN}) {
    EXPECT_SAME("%d %i %u %x %X %o %#o %08x %02x %04o %.0d|%-4d|%hhd %hd %hu", v, v, static_cast<unsigned>(v),
                static_cast<unsigned>(v), static_cast<unsigned>(v), static_cast<unsigned>(v),
                static_cast<unsigned>(v), static_cast<unsigned>(v), static_cast<unsigned>(v),
                static_cast<unsigned>(v), v, v, v, v, v);
  }
  for (size_t v : {size_t{0}, size_t{4096}, SIZE_MAX}) EXPECT_SAME("%zu %zx %5zu %-5zu|", v, v, v, v);
  EXPECT_SAME("%ld %lu %jd %ju %td", -5L, 5UL, static_cast<intmax_t>(-9), static_cast<uintmax_t>(9),
              static_cast<ptrdiff_t>(-3));
  EXPECT_SAME("%" PRId32 " %" PRIu32 " %" PRIx64 " %" PRIu64, static_cast<int32_t>(-12), static_cast<uint32_t>(12),
              static_cast<uint64_t>(0xdeadbeefcafe), static_cast<uint64_t>(UINT64_MAX));
}

TEST(Format, TextCharactersPointersAndPercent) {
  EXPECT_SAME("'%s' '%10s' '%-10s' '%.3s' '%.*s' '%*s' '%-*s'", "abc", "abc", "abc", "abcdef", 2, "xyz", 6, "ab", 6,
              "cd");
  EXPECT_SAME("%c%c %3c %-3c| 100%%", 'o', 'k', 'x', 'y');
  int x = 0;
  EXPECT_SAME("%p", static_cast<void*>(&x));
  EXPECT_SAME("%s", "");
}

TEST(Format, FloatsThroughTheCLibrary) {
  for (double v : {0.0, -0.0, 1.5, -2.25, 3.14159265358979, 1e-7, 6.02e23, 1.0 / 3.0}) {
    EXPECT_SAME("%f %.2f %.3f %8.1f %-8.1f| %g %.17g %e %+.3e %G %08.2f", v, v, v, v, v, v, v, v, v, v, v);
  }
  EXPECT_SAME("%.1f MiB (%d%%)", 12.345, 50);
}

TEST(Format, TruncatesAndCountsLikeSnprintf) {
  char small[8];
  EXPECT_EQ(tinyai::Format(small, sizeof small, "%s-%zu", "abcdef", size_t{12345}), 12);
  EXPECT_STREQ(small, "abcdef-");
  EXPECT_EQ(tinyai::Format(nullptr, 0, "%llu", 1234567890123ULL), 13);
  char one[1] = {'x'};
  EXPECT_EQ(tinyai::Format(one, 1, "abc"), 3);
  EXPECT_EQ(one[0], '\0');
}

TEST(Format, RefusesWhatItDoesNotKnow) {
  char out[32];
  // Built at run time so that the compiler's format check does not see it.
  std::string n = "%";
  n += "n";
  EXPECT_EQ(tinyai::Format(out, sizeof out, n.c_str(), static_cast<int*>(nullptr)), -1);
  std::string dangling = "50";
  dangling += "%";
  EXPECT_EQ(tinyai::Format(out, sizeof out, dangling.c_str()), -1);
}

}  // namespace
}  // namespace tinyai
