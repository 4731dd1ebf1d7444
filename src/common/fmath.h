// The transcendental functions whose results reach the text, computed the
// same on every target: a model's greedy text on a Cortex-M (newlib's libm,
// with or without a double-precision FPU) equals the host's reference
// kernels' byte for byte only if exp, sin, cos and pow round alike there.
//
// ExpF uses float arithmetic alone (+, -, *, and exact scaling by powers of
// two; CMakeLists.txt compiles everything with -ffp-contract=off), so it is
// fast on single-precision FPUs and bit-identical wherever floats are IEEE
// binary32: error below 1 ulp against the exact value (tests/common/
// fmath_test.cc). RoPE's angles (RopeAngle) go through double (a software
// double on a Cortex-M4 or M33, once per position and pair): within 1e-15
// of the exact value before rounding to float, the result is the correctly
// rounded float wherever the double library is accurate to a few ulp.
#ifndef TINYAI_COMMON_FMATH_H_
#define TINYAI_COMMON_FMATH_H_

namespace tinyai {
namespace fmath {

// e^x: +inf above 88.72, 0 below -103.98, NaN for NaN.
float ExpF(float x);

// cos(angle) and sin(angle), each the float nearest the exact value.
void CosSinF(float angle, float* c, float* s);

// base^exponent for base > 0, the float nearest the exact value.
float PowF(float base, float exponent);

}  // namespace fmath
}  // namespace tinyai

#endif  // TINYAI_COMMON_FMATH_H_
