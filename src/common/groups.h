// Byte layouts of the grouped integer weight dtypes (docs/format.md,
// "Grouped dtypes") and of the int8 inputs their products take.
//
// A row of `cols` weights is stored as BlocksPerRow(dtype, cols) blocks of
// BlockValues(dtype) values, GroupBytes(dtype) bytes each. For the dtypes of
// groups of 32 (kGroup) a block is a group: a half-precision scale d then the
// codes of its 32 values; the last group of a row whose length is not a
// multiple of 32 is padded with the code of zero (or, for q4nl_g32, of the
// grid value nearest zero), which readers ignore. Every row starts on a
// block:
//
//   q8_g32   (34 bytes)  f16 d, int8 q[32]             x[j] = d * q[j], q in [-127, 127]
//   q4_g32   (18 bytes)  f16 d, uint8 p[16]            x[j] = d * (code[j] - 8),
//                        code[j] = p[j] & 15, code[j + 16] = p[j] >> 4 (j < 16)
//   q4nl_g32 (18 bytes)  as q4_g32, x[j] = d * kQ4NLGrid[code[j]]
//   q5_g32   (22 bytes)  f16 d, uint32 h, uint8 p[16]  x[j] = d * (code[j] - 16), code[j] as
//                        q4_g32's with bit j of h as its fifth bit
//   q5m_g32  (24 bytes)  f16 d, f16 m, uint32 h, p[16] x[j] = d * code[j] + m
//
// The K-quants take blocks of 256 values (kSuperBlock) in eight sub-blocks of
// 32, and rows of whole blocks only (cols a multiple of 256):
//
//   q4_k (144 bytes)  f16 d, f16 dmin, uint8 scales[12], uint8 p[128]
//                     sub-block s: x = d * sc[s] * code - dmin * mn[s], sc and mn
//                     6-bit (KScaleMin), codes of sub-blocks 2c and 2c+1 in the
//                     low and high nibbles of p[32c .. 32c + 31]
//   q5_k (176 bytes)  f16 d, f16 dmin, scales[12], uint8 h[32], p[128]: as q4_k,
//                     bit 2c (2c+1) of h[l] the fifth bit of value l of sub-block
//                     2c (2c+1)
//   q6_k (210 bytes)  uint8 lo[128], uint8 hi[64], int8 sc[16], f16 d:
//                     x = d * sc[i / 16] * (code - 32), code 6 bits (K6Code)
//
// All of them are byte for byte the blocks of GGUF files of the same names
// (Q8_0, Q4_0, IQ4_NL, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K), so importing those is a
// copy.
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

constexpr size_t kQ5GroupBytes = 22;
constexpr size_t kQ5MGroupBytes = 24;
constexpr size_t kSuperBlock = 256;
constexpr size_t kQ4KBlockBytes = 144;
constexpr size_t kQ5KBlockBytes = 176;
constexpr size_t kQ6KBlockBytes = 210;

// A K-quant: blocks of 256 values.
constexpr bool IsSuperBlockDType(int32_t dtype) {
  return dtype == TINYAI_DTYPE_Q4_K || dtype == TINYAI_DTYPE_Q5_K || dtype == TINYAI_DTYPE_Q6_K;
}

constexpr bool IsGroupedDType(int32_t dtype) {
  return dtype == TINYAI_DTYPE_Q8_G32 || dtype == TINYAI_DTYPE_Q4_G32 || dtype == TINYAI_DTYPE_Q4NL_G32 ||
         dtype == TINYAI_DTYPE_Q5_G32 || dtype == TINYAI_DTYPE_Q5M_G32 || IsSuperBlockDType(dtype);
}

// Bytes of one block (a group of 32, or a K-quant's 256 values) of dtype, 0
// for a dtype that is not grouped.
constexpr size_t GroupBytes(int32_t dtype) {
  switch (dtype) {
    case TINYAI_DTYPE_Q8_G32: return kQ8GroupBytes;
    case TINYAI_DTYPE_Q4_G32:
    case TINYAI_DTYPE_Q4NL_G32: return kQ4GroupBytes;
    case TINYAI_DTYPE_Q5_G32: return kQ5GroupBytes;
    case TINYAI_DTYPE_Q5M_G32: return kQ5MGroupBytes;
    case TINYAI_DTYPE_Q4_K: return kQ4KBlockBytes;
    case TINYAI_DTYPE_Q5_K: return kQ5KBlockBytes;
    case TINYAI_DTYPE_Q6_K: return kQ6KBlockBytes;
    default: return 0;
  }
}

// Values of one block of dtype.
constexpr size_t BlockValues(int32_t dtype) { return IsSuperBlockDType(dtype) ? kSuperBlock : kGroup; }

constexpr size_t GroupsPerRow(size_t cols) { return (cols + kGroup - 1) / kGroup; }

constexpr size_t BlocksPerRow(int32_t dtype, size_t cols) { return (cols + BlockValues(dtype) - 1) / BlockValues(dtype); }

// Whether a row of cols values can be stored in dtype: any length for the
// groups of 32, whole blocks of 256 for a K-quant (GGUF's rule).
constexpr bool RowFits(int32_t dtype, size_t cols) { return !IsSuperBlockDType(dtype) || cols % kSuperBlock == 0; }

// Bytes of one row of cols values of a grouped dtype (0 if not grouped).
constexpr size_t GroupedRowBytes(int32_t dtype, size_t cols) { return BlocksPerRow(dtype, cols) * GroupBytes(dtype); }

// Sub-block s (0..7) of a q4_k/q5_k block's 12 scale bytes: its 6-bit scale
// and minimum.
inline void KScaleMin(const uint8_t* q, size_t s, int32_t* sc, int32_t* mn) {
  if (s < 4) {
    *sc = q[s] & 63;
    *mn = q[s + 4] & 63;
  } else {
    *sc = (q[s + 4] & 0x0F) | ((q[s - 4] >> 6) << 4);
    *mn = (q[s + 4] >> 4) | ((q[s] >> 6) << 4);
  }
}

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
    default: return IsGroupedDType(dtype) ? kInputInt8 : kInputF32;
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
