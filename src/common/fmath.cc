// Portable transcendental functions: see fmath.h.
#include "common/fmath.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tinyai {
namespace fmath {
namespace {

// 2^k as a float, k in [-126, 127].
float Pow2(int k) {
  const uint32_t bits = static_cast<uint32_t>(k + 127) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

float ExpF(float x) {
  if (x != x) return x;
  if (x > 88.7228394f) return INFINITY;
  if (x < -103.972076f) return 0.0f;
  // x = k ln2 + r, |r| <= ln2 / 2: k from x log2(e) rounded (floor of x + 0.5
  // is exact); ln2 in two parts, the first with few enough bits that k times
  // it is exact.
  const float t = x * 1.44269504f + 0.5f;
  int k = static_cast<int>(t);
  if (static_cast<float>(k) > t) --k;  // floor for negative t
  const float kf = static_cast<float>(k);
  float r = x - kf * 0.693359375f;
  r = r - kf * -2.12194440e-4f;
  // e^r by its minimax polynomial on [-ln2/2, ln2/2] (Cephes' expf).
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * (r * r) + r + 1.0f;
  // Times 2^k, in two exact steps where 2^k alone is subnormal or too large.
  if (k > 127) return e * Pow2(127) * Pow2(k - 127);
  if (k < -126) return e * Pow2(k + 64) * Pow2(-64);
  return e * Pow2(k);
}

void CosSinF(float angle, float* c, float* s) {
  const double a = static_cast<double>(angle);
  *c = static_cast<float>(std::cos(a));
  *s = static_cast<float>(std::sin(a));
}

float PowF(float base, float exponent) {
  return static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
}

}  // namespace fmath
}  // namespace tinyai
