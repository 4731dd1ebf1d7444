// TinyAI's own exp, cos/sin and pow (common/fmath.h): accurate, and the same
// bits on every target (the hashes below hold on x86-64, AArch64, ARMv7 with
// and without NEON and in the Cortex-M firmware's build alike: this test is
// portable).
#include "common/fmath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tinyai {
namespace {

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Distance in units in the last place between two finite floats of one sign.
int64_t Ulps(float a, float b) {
  return std::llabs(static_cast<int64_t>(Bits(a)) - static_cast<int64_t>(Bits(b)));
}

// FNV-1a over the bits of each result.
struct Hash {
  uint64_t h = 1469598103934665603ull;
  void Add(float f) {
    const uint32_t b = Bits(f);
    for (int i = 0; i < 4; ++i) h = (h ^ ((b >> (8 * i)) & 0xff)) * 1099511628211ull;
  }
};

TEST(Fmath, ExpWithinOneUlpOverItsRange) {
  int64_t worst = 0;
  for (float x = -103.0f; x < 88.7f; x += 0.000731f) {
    const float want = static_cast<float>(std::exp(static_cast<double>(x)));
    const float got = fmath::ExpF(x);
    if (want < 1.2e-38f) continue;  // subnormal results: checked below
    const int64_t u = Ulps(got, want);
    ASSERT_LE(u, 1) << "ExpF(" << x << ") = " << got << ", exact " << want;
    worst = u > worst ? u : worst;
  }
  EXPECT_LE(worst, 1);
}

TEST(Fmath, ExpEdges) {
  EXPECT_EQ(fmath::ExpF(0.0f), 1.0f);
  EXPECT_EQ(fmath::ExpF(-0.0f), 1.0f);
  EXPECT_TRUE(std::isinf(fmath::ExpF(89.0f)));
  EXPECT_TRUE(std::isinf(fmath::ExpF(INFINITY)));
  EXPECT_EQ(fmath::ExpF(-INFINITY), 0.0f);
  EXPECT_EQ(fmath::ExpF(-200.0f), 0.0f);
  EXPECT_TRUE(std::isnan(fmath::ExpF(NAN)));
  // Subnormal results: near the exact value, never above the smallest normal.
  const float tiny = fmath::ExpF(-100.0f);
  EXPECT_GT(tiny, 0.0f);
  EXPECT_NEAR(tiny, static_cast<float>(std::exp(-100.0)), 2e-45f);
  EXPECT_LE(fmath::ExpF(88.72f), 3.4028235e38f);
}

TEST(Fmath, CosSinAndPowAreTheNearestFloat) {
  for (float a = 0.0f; a < 2048.0f; a += 0.37f) {
    float c, s;
    fmath::CosSinF(a, &c, &s);
    EXPECT_EQ(c, static_cast<float>(std::cos(static_cast<double>(a))));
    EXPECT_EQ(s, static_cast<float>(std::sin(static_cast<double>(a))));
  }
  EXPECT_EQ(fmath::PowF(10000.0f, 0.5f), 100.0f);
  EXPECT_EQ(fmath::PowF(10000.0f, 0.0f), 1.0f);
  EXPECT_EQ(fmath::PowF(2.0f, 10.0f), 1024.0f);
}

// The same bits on every target: the hash of ExpF over 200,000 arguments,
// and of the RoPE table of a 64-wide head at 512 positions, theta 10000.
TEST(Fmath, SameBitsOnEveryTarget) {
  Hash e;
  for (int i = 0; i < 200000; ++i) e.Add(fmath::ExpF(-100.0f + static_cast<float>(i) * 0.00094f));
  EXPECT_EQ(e.h, 16255984446507198540ull) << "ExpF's hash";
  Hash r;
  for (int pos = 0; pos < 512; ++pos) {
    for (int pair = 0; pair < 32; ++pair) {
      const float freq = 1.0f / fmath::PowF(10000.0f, static_cast<float>(2 * pair) / 64.0f);
      float c, s;
      fmath::CosSinF(static_cast<float>(pos) * freq, &c, &s);
      r.Add(c);
      r.Add(s);
    }
  }
  EXPECT_EQ(r.h, 14847561755253588270ull) << "the RoPE table's hash";
}

}  // namespace
}  // namespace tinyai
