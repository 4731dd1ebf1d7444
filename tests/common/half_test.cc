#include "common/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tinyai {
namespace {

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

bool IsNanHalf(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

// Every half survives the round trip; its float is what the bits say.
TEST(Half, EveryHalfRoundTrips) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = HalfToFloat(h);
    if (IsNanHalf(h)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << i;
      EXPECT_TRUE(IsNanHalf(FloatToHalf(f))) << std::hex << i;
      EXPECT_EQ(FloatToHalf(f) & 0x8000u, h & 0x8000u) << std::hex << i;
      continue;
    }
    ASSERT_EQ(FloatToHalf(f), h) << std::hex << i << " -> " << f;
  }
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(Bits(HalfToFloat(0x8000)), 0x80000000u);
  EXPECT_TRUE(std::isinf(HalfToFloat(0x7c00)));
}

// Between two neighbouring halves, floats round to the nearer one, and the
// midpoint to the one with an even mantissa; for every pair of neighbours.
TEST(Half, RoundsToNearestEven) {
  for (uint32_t i = 0; i < 0x7bff; ++i) {  // positive finite halves and the next one up
    for (uint32_t sign : {0u, 0x8000u}) {
      const uint16_t lo = static_cast<uint16_t>(i | sign), hi = static_cast<uint16_t>((i + 1) | sign);
      const double a = HalfToFloat(lo), b = HalfToFloat(hi);
      const float mid = static_cast<float>((a + b) / 2);  // exact: 11 bits plus one
      ASSERT_EQ(static_cast<double>(mid), (a + b) / 2);
      const uint16_t even = (i & 1u) ? hi : lo;
      ASSERT_EQ(FloatToHalf(mid), even) << std::hex << i;
      ASSERT_EQ(FloatToHalf(std::nextafter(mid, static_cast<float>(a))), lo) << std::hex << i;
      ASSERT_EQ(FloatToHalf(std::nextafter(mid, static_cast<float>(b))), hi) << std::hex << i;
    }
  }
}

TEST(Half, OutOfRangeAndSpecials) {
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65519.99f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // the midpoint to 65536 ties to even: infinity
  EXPECT_EQ(FloatToHalf(1e9f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-1e9f), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(IsNanHalf(FloatToHalf(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // half the smallest subnormal: ties to zero
  EXPECT_EQ(FloatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(FloatToHalf(-std::ldexp(1.0f, -30)), 0x8000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
}

}  // namespace
}  // namespace tinyai
