// Plain scalar kernels: the oracle every SIMD table is tested against.
// Keep these obviously correct; they follow llama2.c's fp32 arithmetic
// (dot products accumulated left to right in float).
#include <cmath>
#include <cstring>
#include <type_traits>

#include "common/fmath.h"
#include "common/half.h"
#include "kernels/kernels.h"
#include "kernels/ref/kernels_ref.h"

namespace tinyai {
namespace kernels {
namespace {

float RefDot(const float* a, const float* b, size_t n) {
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void RefMatvec(const float* w, size_t ldw, const float* x, float* y, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; ++r) y[r] = RefDot(w + r * ldw, x, cols);
}

void RefMatmul(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy,
               size_t rows, size_t cols, size_t n) {
  for (size_t j = 0; j < n; ++j) {
    for (size_t r = 0; r < rows; ++r) y[j * ldy + r] = RefDot(w + r * ldw, x + j * ldx, cols);
  }
}

void RefVecmat(const float* a, const float* v, size_t ldv, float* out, size_t n, size_t cols) {
  for (size_t c = 0; c < cols; ++c) out[c] = 0.0f;
  for (size_t t = 0; t < n; ++t) {
    const float at = a[t];
    const float* vt = v + t * ldv;
    for (size_t c = 0; c < cols; ++c) out[c] += at * vt[c];
  }
}

void RefRmsnorm(const float* x, const float* w, float* out, size_t n, float eps) {
  if (n == 0) return;
  float ss = 0.0f;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  ss /= static_cast<float>(n);
  ss += eps;
  ss = 1.0f / std::sqrt(ss);
  for (size_t i = 0; i < n; ++i) out[i] = w[i] * (ss * x[i]);
}

void RefSoftmax(float* x, size_t n) {
  if (n == 0) return;
  float max_val = x[0];
  for (size_t i = 1; i < n; ++i) {
    if (x[i] > max_val) max_val = x[i];
  }
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    x[i] = fmath::ExpF(x[i] - max_val);
    sum += x[i];
  }
  for (size_t i = 0; i < n; ++i) x[i] /= sum;
}

void RefSwiglu(float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float v = gate[i];
    v *= 1.0f / (1.0f + fmath::ExpF(-v));
    gate[i] = v * up[i];
  }
}

void RefAdd(float* y, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += x[i];
}

// ---- f32 weights: the fp32 kernels over the rows' bytes ----

void RefMatvecF32(const uint8_t* w, size_t row_bytes, const float* x, float* y, size_t rows, size_t cols) {
  RefMatvec(reinterpret_cast<const float*>(w), row_bytes / sizeof(float), x, y, rows, cols);
}

void RefMatmulF32(const uint8_t* w, size_t row_bytes, const float* x, size_t ldx, float* y, size_t ldy,
                  size_t rows, size_t cols, size_t n) {
  RefMatmul(reinterpret_cast<const float*>(w), row_bytes / sizeof(float), x, ldx, y, ldy, rows, cols, n);
}

void RefDequantizeRowF32(const uint8_t* row, float* out, size_t cols) { std::memcpy(out, row, cols * sizeof(float)); }

// ---- f16 weights: each value widened to fp32, then llama2.c's arithmetic ----

float RefHalfAt(const uint8_t* p, size_t i) {
  uint16_t h;
  std::memcpy(&h, p + 2 * i, sizeof h);
  return HalfToFloat(h);
}

float RefDotF16(const uint8_t* w, const float* x, size_t n) {
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) sum += RefHalfAt(w, i) * x[i];
  return sum;
}

void RefMatvecF16(const uint8_t* w, size_t row_bytes, const float* x, float* y, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; ++r) y[r] = RefDotF16(w + r * row_bytes, x, cols);
}

void RefMatmulF16(const uint8_t* w, size_t row_bytes, const float* x, size_t ldx, float* y, size_t ldy,
                  size_t rows, size_t cols, size_t n) {
  for (size_t j = 0; j < n; ++j) {
    for (size_t r = 0; r < rows; ++r) y[j * ldy + r] = RefDotF16(w + r * row_bytes, x + j * ldx, cols);
  }
}

void RefDequantizeRowF16(const uint8_t* row, float* out, size_t cols) {
  for (size_t c = 0; c < cols; ++c) out[c] = RefHalfAt(row, c);
}

}  // namespace

// ---- grouped integer weights: int8 inputs, integer dots, one scale per group ----

namespace ref {
namespace {

float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return HalfToFloat(h);
}

// The integer value of code j of a group of 32 (q4 and q5 codes carry their
// offset here; the SIMD kernels take it out through InputGroup::sum instead).
template <int32_t DType>
int32_t Value(const uint8_t* group, size_t j) {
  if (DType == TINYAI_DTYPE_Q8_G32) return static_cast<int8_t>(group[2 + j]);
  if (DType == TINYAI_DTYPE_Q5_G32 || DType == TINYAI_DTYPE_Q5M_G32) {
    const uint8_t* at = group + (DType == TINYAI_DTYPE_Q5_G32 ? 2 : 4);
    uint32_t high;
    std::memcpy(&high, at, sizeof high);
    const uint8_t packed = at[4 + (j % 16)];
    const int32_t code = (j < 16 ? (packed & 15) : (packed >> 4)) | static_cast<int32_t>((high >> j & 1u) << 4);
    return DType == TINYAI_DTYPE_Q5_G32 ? code - 16 : code;
  }
  const uint8_t packed = group[2 + (j % 16)];
  const int32_t code = j < 16 ? (packed & 15) : (packed >> 4);
  return DType == TINYAI_DTYPE_Q4_G32 ? code - 8 : kQ4NLGrid[code];
}

// ---- K-quants: a block of 256 values as eight sub-blocks of 32 ----

// Sub-block s of a K-quant block: its 32 integer codes (q4_k, q5_k: 0..15,
// 0..31; q6_k: -32..31), and how they scale: value j is
// scale[j / 16] * codes[j] - min (q6_k: min 0, two scales; the others: one
// scale, scale[1] == scale[0]). scale and min are exact products of the
// block's f16 factors and the sub-block's integer ones; iscale holds q6_k's
// int8 scales (for the integer product).
struct SubBlock {
  int32_t codes[kGroup];
  float scale[2], min;
  int32_t iscale[2];
};

template <int32_t DType>
void DecodeSubBlock(const uint8_t* b, size_t s, SubBlock* out) {
  if constexpr (DType == TINYAI_DTYPE_Q6_K) {
    const uint8_t* lo = b + 64 * (s / 4);           // 128 values a half: 64 low bytes
    const uint8_t* hi = b + 128 + 32 * (s / 4);     // and 32 high bytes
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    const size_t k = s % 4;                         // which 32 of the half
    for (size_t l = 0; l < kGroup; ++l) {
      // k = 0: lo[l]'s low nibble, 1: lo[l + 32]'s, 2: lo[l]'s high, 3: lo[l + 32]'s high;
      // bits 2k and 2k + 1 of hi[l] on top.
      const uint8_t byte = lo[l + 32 * (k % 2)];
      const int32_t nibble = k < 2 ? (byte & 15) : (byte >> 4);
      out->codes[l] = (nibble | static_cast<int32_t>(((hi[l] >> (2 * k)) & 3) << 4)) - 32;
    }
    const float d = HalfAt(b + 208);
    out->iscale[0] = sc[2 * s];
    out->iscale[1] = sc[2 * s + 1];
    out->scale[0] = d * static_cast<float>(sc[2 * s]);
    out->scale[1] = d * static_cast<float>(sc[2 * s + 1]);
    out->min = 0.0f;
  } else {
    int32_t sc, mn;
    KScaleMin(b + 4, s, &sc, &mn);
    const uint8_t* p = b + (DType == TINYAI_DTYPE_Q5_K ? 48 : 16) + 32 * (s / 2);
    for (size_t l = 0; l < kGroup; ++l) {
      int32_t code = s % 2 == 0 ? (p[l] & 15) : (p[l] >> 4);
      if (DType == TINYAI_DTYPE_Q5_K) code |= ((b[16 + l] >> s) & 1) << 4;
      out->codes[l] = code;
    }
    out->iscale[0] = out->iscale[1] = sc;
    out->scale[0] = out->scale[1] = HalfAt(b) * static_cast<float>(sc);
    out->min = HalfAt(b + 2) * static_cast<float>(mn);
  }
}

// A K-quant row's product with an int8 input, per sub-block s (input group
// g): q4_k, q5_k: isum * (d sc[s] * x.d) - x.sum * (dmin mn[s] * x.d);
// q6_k: (sc[2s] * dot(first 16) + sc[2s+1] * dot(last 16)) * (d * x.d);
// the sub-blocks' values summed left to right.
template <int32_t DType>
float DotK(const uint8_t* row, const InputGroup* x, size_t cols) {
  float sum = 0.0f;
  for (size_t g = 0; g < cols / kGroup; ++g) {
    const uint8_t* b = row + (g / 8) * GroupBytes(DType);
    SubBlock sb;
    DecodeSubBlock<DType>(b, g % 8, &sb);
    if constexpr (DType == TINYAI_DTYPE_Q6_K) {
      int32_t half[2] = {0, 0};
      for (size_t j = 0; j < kGroup; ++j) half[j / 16] += sb.codes[j] * x[g].q[j];
      const int32_t isum = sb.iscale[0] * half[0] + sb.iscale[1] * half[1];
      sum += static_cast<float>(isum) * (HalfAt(b + 208) * x[g].d);
    } else {
      int32_t isum = 0;
      for (size_t j = 0; j < kGroup; ++j) isum += sb.codes[j] * x[g].q[j];
      sum += static_cast<float>(isum) * (sb.scale[0] * x[g].d) - static_cast<float>(x[g].sum) * (sb.min * x[g].d);
    }
  }
  return sum;
}

template <int32_t DType>
float DotQ(const uint8_t* row, const InputGroupOf<DType>* x, size_t cols) {
  if constexpr (IsSuperBlockDType(DType)) {
    return DotK<DType>(row, x, cols);
  } else {
    const size_t bytes = GroupBytes(DType);
    float sum = 0.0f;
    for (size_t g = 0; g < GroupsPerRow(cols); ++g) {
      const uint8_t* group = row + g * bytes;
      int32_t isum = 0;
      for (size_t j = 0; j < kGroup; ++j) isum += Value<DType>(group, j) * x[g].q[j];
      sum += static_cast<float>(isum) * (HalfAt(group) * x[g].d);
      if constexpr (DType == TINYAI_DTYPE_Q5M_G32) sum += static_cast<float>(x[g].sum) * (HalfAt(group + 2) * x[g].d);
    }
    return sum;
  }
}

// Groups of cols values of x as codes in [-top, top]: d = max|x| / top,
// q = x * (top / max|x|) rounded to nearest even; a group holding an
// infinity or a NaN has a NaN scale (its products are NaN, as fp32 ones
// would be) and zero codes.
template <class Group>
void Quantize(const float* x, size_t cols, float top, Group* out) {
  for (size_t g = 0; g < GroupsPerRow(cols); ++g) {
    const size_t first = g * kGroup, n = cols - first < kGroup ? cols - first : kGroup;
    float amax = 0.0f;
    bool finite = true;
    for (size_t j = 0; j < n; ++j) {
      amax = std::fabs(x[first + j]) > amax ? std::fabs(x[first + j]) : amax;
      finite = finite && std::isfinite(x[first + j]);
    }
    const float inverse = finite && amax > 0.0f ? top / amax : 0.0f;
    for (size_t j = 0; j < kGroup; ++j) {
      const float v = j < n && finite ? std::nearbyint(x[first + j] * inverse) : 0.0f;
      out[g].q[j] = static_cast<typename std::remove_reference<decltype(out[g].q[0])>::type>(v);  // |v| <= top: |x| <= amax
    }
    out[g].d = finite ? amax / top : NAN;
  }
}

}  // namespace

void QuantizeInput(const float* x, size_t cols, InputGroup* out) {
  Quantize(x, cols, 127.0f, out);
  for (size_t g = 0; g < GroupsPerRow(cols); ++g) {
    int32_t sum = 0;
    for (size_t j = 0; j < kGroup; ++j) sum += out[g].q[j];
    out[g].sum = sum;
  }
}

void QuantizeInput16(const float* x, size_t cols, InputGroup16* out) { Quantize(x, cols, 32767.0f, out); }

template <int32_t DType>
void MatvecQ(const uint8_t* w, size_t row_bytes, const void* x, float* y, size_t rows, size_t cols) {
  const InputGroupOf<DType>* in = static_cast<const InputGroupOf<DType>*>(x);
  for (size_t r = 0; r < rows; ++r) y[r] = DotQ<DType>(w + r * row_bytes, in, cols);
}

template <int32_t DType>
void MatmulQ(const uint8_t* w, size_t row_bytes, const void* x, size_t ldx, float* y, size_t ldy, size_t rows,
             size_t cols, size_t n) {
  const InputGroupOf<DType>* in = static_cast<const InputGroupOf<DType>*>(x);
  for (size_t j = 0; j < n; ++j) {
    for (size_t r = 0; r < rows; ++r) y[j * ldy + r] = DotQ<DType>(w + r * row_bytes, in + j * ldx, cols);
  }
}

template <int32_t DType>
void DequantizeRowQ(const uint8_t* row, float* out, size_t cols) {
  if constexpr (IsSuperBlockDType(DType)) {
    // GGUF's dequantizers' arithmetic: each value is one rounding of exact
    // products (scale * code - min), so these are their values bit for bit.
    for (size_t c0 = 0; c0 < cols; c0 += kGroup) {
      SubBlock sb;
      DecodeSubBlock<DType>(row + (c0 / kSuperBlock) * GroupBytes(DType), (c0 / kGroup) % 8, &sb);
      const size_t n = cols - c0 < kGroup ? cols - c0 : kGroup;
      for (size_t j = 0; j < n; ++j) out[c0 + j] = sb.scale[j / 16] * static_cast<float>(sb.codes[j]) - sb.min;
    }
    return;
  }
  // A group's scale widened once, not once a value: an int8 KV cache
  // dequantizes every value row it attends to, and the half conversion per
  // value made that 27% of a 110M q4_g32 decode token.
  const size_t bytes = GroupBytes(DType);
  for (size_t c0 = 0; c0 < cols; c0 += kGroup) {
    const uint8_t* group = row + (c0 / kGroup) * bytes;
    const float d = HalfAt(group);
    const size_t n = cols - c0 < kGroup ? cols - c0 : kGroup;
    if constexpr (DType == TINYAI_DTYPE_Q5M_G32) {
      const float m = HalfAt(group + 2);
      for (size_t j = 0; j < n; ++j) out[c0 + j] = d * static_cast<float>(Value<DType>(group, j)) + m;
    } else {
      for (size_t j = 0; j < n; ++j) out[c0 + j] = d * static_cast<float>(Value<DType>(group, j));
    }
  }
}

#define TINYAI_REF_GROUPED(DT)                                                                                   \
  template void MatvecQ<DT>(const uint8_t*, size_t, const void*, float*, size_t, size_t);                      \
  template void MatmulQ<DT>(const uint8_t*, size_t, const void*, size_t, float*, size_t, size_t, size_t, size_t); \
  template void DequantizeRowQ<DT>(const uint8_t*, float*, size_t)
TINYAI_REF_GROUPED(TINYAI_DTYPE_Q8_G32);
TINYAI_REF_GROUPED(TINYAI_DTYPE_Q4_G32);
TINYAI_REF_GROUPED(TINYAI_DTYPE_Q4NL_G32);
TINYAI_REF_GROUPED(TINYAI_DTYPE_Q5_G32);
TINYAI_REF_GROUPED(TINYAI_DTYPE_Q5M_G32);
TINYAI_REF_GROUPED(TINYAI_DTYPE_Q4_K);
TINYAI_REF_GROUPED(TINYAI_DTYPE_Q5_K);
TINYAI_REF_GROUPED(TINYAI_DTYPE_Q6_K);
#undef TINYAI_REF_GROUPED

}  // namespace ref

// ---- block-sparse weights (common/sparse.h), as its definition reads ----

namespace ref {
namespace {

// The first block from `from` on that the band keeps, or s.blocks.
size_t NextKeptBlock(const SparseLayout& s, const uint8_t* band, size_t from) {
  while (from < s.blocks && !BlockKept(band, from)) ++from;
  return from;
}

// The columns of a band's kept values, in the order the rows store them:
// Next() gives the column of value 0, 1, 2, ... (s.cols and past for the
// values past the matrix).
class KeptColumns {
 public:
  KeptColumns(const SparseLayout& s, const uint8_t* band) : s_(s), band_(band), block_(NextKeptBlock(s, band, 0)) {}
  size_t Next() {
    if (p_ > 0 && p_ % s_.block == 0) block_ = NextKeptBlock(s_, band_, block_ + 1);
    return block_ * s_.block + p_++ % s_.block;
  }

 private:
  const SparseLayout& s_;
  const uint8_t* band_;
  size_t block_, p_ = 0;
};

float WeightF(int32_t dtype, const uint8_t* row, size_t p) {
  if (dtype == TINYAI_DTYPE_F16) return RefHalfAt(row, p);
  float v;
  std::memcpy(&v, row + 4 * p, sizeof v);
  return v;
}

}  // namespace

// f32 and f16: row r's value is the sum over its kept values of w * x[col],
// left to right, the columns past the matrix left out.
template <int32_t DType>
void SparseMatmulF(const uint8_t* w, const SparseLayout& s, const void* x, size_t ldx, float* y, size_t ldy,
                   size_t bands, size_t n) {
  const float* in = static_cast<const float*>(x);
  for (size_t b = 0; b < bands; ++b) {
    const uint8_t* band = w + b * s.band_bytes;
    for (size_t j = 0; j < n; ++j) {
      for (size_t i = 0; i < s.block; ++i) {
        const uint8_t* row = band + s.row_offset(i);
        KeptColumns columns(s, band);
        float sum = 0.0f;
        for (size_t p = 0; p < s.kept_cols; ++p) {
          const size_t col = columns.Next();
          if (col < s.cols) sum += WeightF(DType, row, p) * in[j * ldx + col];
        }
        y[j * ldy + b * s.block + i] = sum;
      }
    }
  }
}

// Grouped dtypes: a stored row is a dense row of kept_cols values of the
// dtype, and the input the product takes is fp32: per stored group, the
// input's values at its columns (zero past the matrix) are quantized as one
// input group (the reference's quantizer) and meet it as in the dense
// product; the groups' values summed left to right. So a row's value is,
// bit for bit, the reference's dense product of the stored row with the
// gathered input.
template <int32_t DType>
void SparseMatmulQ(const uint8_t* w, const SparseLayout& s, const void* x, size_t ldx, float* y, size_t ldy,
                   size_t bands, size_t n) {
  const float* in = static_cast<const float*>(x);
  const size_t bytes = GroupBytes(DType);
  for (size_t b = 0; b < bands; ++b) {
    const uint8_t* band = w + b * s.band_bytes;
    for (size_t j = 0; j < n; ++j) {
      const float* xj = in + j * ldx;
      float sum[kMaxSparseBlock] = {};
      KeptColumns columns(s, band);
      for (size_t p0 = 0; p0 < s.kept_cols; p0 += kGroup) {
        const size_t m = s.kept_cols - p0 < kGroup ? static_cast<size_t>(s.kept_cols - p0) : kGroup;
        float gathered[kGroup];
        for (size_t t = 0; t < m; ++t) {
          const size_t col = columns.Next();
          gathered[t] = col < s.cols ? xj[col] : 0.0f;
        }
        InputGroupOf<DType> q;
        if constexpr (InputFormOf(DType) == kInputInt16) {
          QuantizeInput16(gathered, m, &q);
        } else {
          QuantizeInput(gathered, m, &q);
        }
        for (size_t i = 0; i < s.block; ++i) {
          float part = 0.0f;
          MatvecQ<DType>(band + s.row_offset(i) + (p0 / kGroup) * bytes, bytes, &q, &part, 1, m);
          sum[i] += part;
        }
      }
      for (size_t i = 0; i < s.block; ++i) y[j * ldy + b * s.block + i] = sum[i];
    }
  }
}

template void SparseMatmulQ<TINYAI_DTYPE_Q8_G32>(const uint8_t*, const SparseLayout&, const void*, size_t, float*,
                                                 size_t, size_t, size_t);
template void SparseMatmulQ<TINYAI_DTYPE_Q4_G32>(const uint8_t*, const SparseLayout&, const void*, size_t, float*,
                                                 size_t, size_t, size_t);
template void SparseMatmulQ<TINYAI_DTYPE_Q4NL_G32>(const uint8_t*, const SparseLayout&, const void*, size_t, float*,
                                                   size_t, size_t, size_t);
template void SparseMatmulQ<TINYAI_DTYPE_Q5_G32>(const uint8_t*, const SparseLayout&, const void*, size_t, float*,
                                                 size_t, size_t, size_t);
template void SparseMatmulQ<TINYAI_DTYPE_Q5M_G32>(const uint8_t*, const SparseLayout&, const void*, size_t, float*,
                                                  size_t, size_t, size_t);

}  // namespace ref

namespace {

constexpr KernelTable kRefTable = {
    "ref",
    &RefMatvec,
    &RefMatmul,
    &RefVecmat,
    &RefDot,
    &RefRmsnorm,
    &RefSoftmax,
    &RefSwiglu,
    &RefAdd,
    &ref::QuantizeInput,
    &ref::QuantizeInput16,
    {
        /* TINYAI_DTYPE_F32 */ {&RefMatvecF32, &RefMatmulF32, &RefDequantizeRowF32, nullptr, nullptr, kInputF32, nullptr, nullptr,
                               &ref::SparseMatmulF<TINYAI_DTYPE_F32>},
        /* TINYAI_DTYPE_F16 */ {&RefMatvecF16, &RefMatmulF16, &RefDequantizeRowF16, nullptr, nullptr, kInputF32, nullptr, nullptr,
                               &ref::SparseMatmulF<TINYAI_DTYPE_F16>},
        /* TINYAI_DTYPE_Q8_G32 */ ref::GroupedKernels<TINYAI_DTYPE_Q8_G32>(),
        /* TINYAI_DTYPE_Q4_G32 */ ref::GroupedKernels<TINYAI_DTYPE_Q4_G32>(),
        /* TINYAI_DTYPE_Q4NL_G32 */ ref::GroupedKernels<TINYAI_DTYPE_Q4NL_G32>(),
        /* TINYAI_DTYPE_Q4_K */ ref::GroupedKernels<TINYAI_DTYPE_Q4_K>(),
        /* TINYAI_DTYPE_Q5_K */ ref::GroupedKernels<TINYAI_DTYPE_Q5_K>(),
        /* TINYAI_DTYPE_Q6_K */ ref::GroupedKernels<TINYAI_DTYPE_Q6_K>(),
        /* TINYAI_DTYPE_Q5_G32 */ ref::GroupedKernels<TINYAI_DTYPE_Q5_G32>(),
        /* TINYAI_DTYPE_Q5M_G32 */ ref::GroupedKernels<TINYAI_DTYPE_Q5M_G32>(),
    },
};

}  // namespace

const KernelTable& Ref() { return kRefTable; }

}  // namespace kernels
}  // namespace tinyai
