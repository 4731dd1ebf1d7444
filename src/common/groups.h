// Byte layouts of the grouped integer weight dtypes (docs/format.md,
// "Grouped dtypes") and of the int8 inputs their products take.
//
// A row of `cols` weights is stored as GroupsPerRow(cols) groups of kGroup
// values, each group a half-precision scale d then the codes of its 32
// values; the last group of a row whose length is not a multiple of 32 is
// padded with the code of zero (or, for q4nl_g32, of the grid value nearest
// zero), which readers ignore. A row therefore takes RowBytes(dtype, cols)
// bytes and every row starts on a group:
//
//   q8_g32   (34 bytes)  f16 d, int8 q[32]             x[j] = d * q[j], q in [-127, 127]
//   q4_g32   (18 bytes)  f16 d, uint8 p[16]            x[j] = d * (code[j] - 8),
//                        code[j] = p[j] & 15, code[j + 16] = p[j] >> 4 (j < 16)
//   q4nl_g32 (18 bytes)  as q4_g32, x[j] = d * kQ4NLGrid[code[j]]
//
// q8_g32 and q4_g32 are byte for byte the Q8_0 and Q4_0 blocks of GGUF
// files, and q4nl_g32 its IQ4_NL block, so importing those is a copy.
#ifndef TINYAI_COMMON_GROUPS_H_
#define TINYAI_COMMON_GROUPS_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "tinyai/types.h"

namespace tinyai {

constexpr size_t kGroup = 32;
constexpr size_t kQ8GroupBytes = 34;
constexpr size_t kQ4GroupBytes = 18;

// The 16 values of q4nl_g32's non-uniform grid (denser near zero, where
// most weights are).
constexpr int8_t kQ4NLGrid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

constexpr bool IsGroupedDType(int32_t dtype) {
  return dtype == TINYAI_DTYPE_Q8_G32 || dtype == TINYAI_DTYPE_Q4_G32 || dtype == TINYAI_DTYPE_Q4NL_G32;
}

// Bytes of one group of dtype, 0 for a dtype that is not grouped.
constexpr size_t GroupBytes(int32_t dtype) {
  switch (dtype) {
    case TINYAI_DTYPE_Q8_G32: return kQ8GroupBytes;
    case TINYAI_DTYPE_Q4_G32:
    case TINYAI_DTYPE_Q4NL_G32: return kQ4GroupBytes;
    default: return 0;
  }
}

constexpr size_t GroupsPerRow(size_t cols) { return (cols + kGroup - 1) / kGroup; }

// Bytes of one row of cols values of a grouped dtype (0 if not grouped).
constexpr size_t GroupedRowBytes(int32_t dtype, size_t cols) { return GroupsPerRow(cols) * GroupBytes(dtype); }

// How a product takes its input vector: as fp32 (f32 and f16 weights), or
// quantized once per product into groups of 32 matching the weights' groups
// (kernels::KernelTable::quantize_input): int8 for the 4-bit dtypes, whose
// own error dwarfs the input's, int16 for q8_g32 (int8 inputs doubled its
// mean KL on stories260K, 9e-4 against 3.7e-4 for its weights alone).
enum InputForm : int32_t { kInputF32 = 0, kInputInt8 = 1, kInputInt16 = 2 };

// One group of an int8 input: x[j] ~= d * q[j] with d = max|x| / 127, q in
// [-127, 127] (zero past the end of the vector) and sum = the sum of the 32
// q, which the q4 products use to undo their codes' offset of 8.
struct InputGroup {
  float d;
  int32_t sum;
  int8_t q[kGroup];
};
static_assert(sizeof(InputGroup) == 40, "InputGroup is 40 bytes, no padding");

// One group of an int16 input: x[j] ~= d * q[j] with d = max|x| / 32767.
struct InputGroup16 {
  float d;
  int16_t q[kGroup];
};
static_assert(sizeof(InputGroup16) == 68, "InputGroup16 is 68 bytes, no padding");

// The input form of a dtype's products.
constexpr InputForm InputFormOf(int32_t dtype) {
  switch (dtype) {
    case TINYAI_DTYPE_Q8_G32: return kInputInt16;
    case TINYAI_DTYPE_Q4_G32:
    case TINYAI_DTYPE_Q4NL_G32: return kInputInt8;
    default: return kInputF32;
  }
}

// The input group type of a grouped dtype's products.
template <int32_t DType>
using InputGroupOf = typename std::conditional<InputFormOf(DType) == kInputInt16, InputGroup16, InputGroup>::type;

// Bytes an input vector of cols values takes in form (0 for fp32, which is
// used as it is).
inline size_t QuantizedInputBytes(InputForm form, size_t cols) {
  return GroupsPerRow(cols) * (form == kInputInt8 ? sizeof(InputGroup) : form == kInputInt16 ? sizeof(InputGroup16) : 0);
}
}  // namespace tinyai

#endif  // TINYAI_COMMON_GROUPS_H_
