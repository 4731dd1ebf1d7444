// IEEE 754 binary16 ("half", TINYAI_DTYPE_F16) to and from binary32, in
// portable integer code: no F16C or NEON conversion instructions needed, so
// the reference kernels, the converters and the bare-metal port share it.
// FloatToHalf rounds to nearest, ties to even; values from 65520 up become
// infinity, NaN stays a (quiet) NaN; HalfToFloat is exact.
//
// The functions have internal linkage (static): the SIMD kernels are built
// with different -m flags per file, and one merged inline copy compiled for
// AVX2 must not end up called on a CPU without it (see
// src/kernels/simd/kernels_simd.h).
#ifndef TINYAI_COMMON_HALF_H_
#define TINYAI_COMMON_HALF_H_

#include <cstdint>
#include <cstring>

namespace tinyai {

static inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in binary32.
    float v = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    std::memcpy(&bits, &v, sizeof bits);
    bits |= sign;
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // infinity or NaN
  } else {
    bits = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

static inline uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 (and infinity)
  if (a >= 0x38800000u) {
    // A normal half (2^-14 and up): rebias the exponent, keep 10 mantissa
    // bits and round on the 13 dropped ones (a carry moves into the
    // exponent, which is still the right value).
    uint32_t h = (a - ((127u - 15u) << 23)) >> 13;
    const uint32_t rest = a & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  if (a < 0x33000000u) return sign;  // at most 2^-25, half the smallest subnormal: zero
  // A subnormal half: the count of 2^-24 steps, rounded.
  const uint32_t exponent = a >> 23;  // 102..112
  const uint32_t mantissa = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - exponent;  // 14..24
  uint32_t m = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
  if (rest > halfway || (rest == halfway && (m & 1u))) ++m;
  return static_cast<uint16_t>(sign | m);
}

}  // namespace tinyai

#endif  // TINYAI_COMMON_HALF_H_
