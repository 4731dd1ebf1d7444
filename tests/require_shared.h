// Tests that read the shared data folder (../shared: the stories260K model and
// its golden outputs, and what the convert_stories260K fixture makes of them)
// skip when it is absent, so that a developer without it can run the rest, or
// fail naming what is missing when the environment sets TINYAI_REQUIRE_SHARED
// (to anything but 0): scripts/test.sh and scripts/cross-test.sh set it, so CI
// never passes without the data.
#ifndef TINYAI_TESTS_REQUIRE_SHARED_H_
#define TINYAI_TESTS_REQUIRE_SHARED_H_

#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

namespace tinyai {
namespace testing {

// True when TINYAI_REQUIRE_SHARED is set to anything but "" or "0".
inline bool SharedRequired() {
  const char* v = std::getenv("TINYAI_REQUIRE_SHARED");
  return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

}  // namespace testing
}  // namespace tinyai

// Skips the test (a GTEST_SKIP) saying why, or fails it (a FAIL) when the
// shared data is required. `what` is streamed: "x not found under " << dir.
// Like GTEST_SKIP and FAIL, it returns from the current (void) function.
#define TINYAI_SKIP_WITHOUT_SHARED(what)                                      \
  do {                                                                        \
    if (::tinyai::testing::SharedRequired()) {                                \
      FAIL() << "TINYAI_REQUIRE_SHARED is set and " << what;                  \
    } else {                                                                  \
      GTEST_SKIP() << what << " (TINYAI_REQUIRE_SHARED=1 fails instead)";     \
    }                                                                         \
  } while (0)

#endif  // TINYAI_TESTS_REQUIRE_SHARED_H_
