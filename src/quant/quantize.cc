#include "quant/quantize.h"

#include <cmath>
#include <cstring>

#include "common/array.h"
#include "common/groups.h"
#include "common/half.h"
#include "common/status.h"
#include "kernels/kernels.h"
#include "quant/quantize_blocks.h"

namespace tinyai {
namespace quant {
namespace {

// The integer values a group's codes stand for, in increasing order, and
// the code of each.
struct Grid {
  const int8_t* values;  // ascending; nullptr: the integers lo..hi
  int32_t count;
  int32_t lo, hi;        // the extremes a group's largest value may map to
  const uint8_t* below;  // with values: below[k - values[0]] = the last index whose value is <= k
};

// Grid::below for q4nl_g32's grid: its values are integers, so for v
// between two of them the last value <= v is the last <= floor(v) - one
// load instead of a binary search (the same answers, 2x faster encoding).
struct Q4NLBelow {
  uint8_t at[256] = {};
  constexpr Q4NLBelow() {
    int32_t idx = 0;
    for (int32_t k = kQ4NLGrid[0]; k < kQ4NLGrid[15]; ++k) {
      while (idx + 1 < 16 && kQ4NLGrid[idx + 1] <= k) ++idx;
      at[k - kQ4NLGrid[0]] = static_cast<uint8_t>(idx);
    }
  }
};
constexpr Q4NLBelow kQ4NLBelow;

// Index of the grid value nearest v (ties: to even for the integer grids, to
// the lower value for a table).
int32_t NearestIndex(const Grid& g, float v) {
  if (g.values == nullptr) {  // q8, q4: the integers lo..hi, rounded to nearest even
    float r = std::nearbyint(v);
    r = r > static_cast<float>(g.hi) ? static_cast<float>(g.hi) : (r < static_cast<float>(g.lo) ? static_cast<float>(g.lo) : r);
    return static_cast<int32_t>(r) - g.lo;
  }
  int32_t lo = 0, hi = g.count - 1;
  if (v <= g.values[lo]) return lo;
  if (v >= g.values[hi]) return hi;
  if (g.below) {
    lo = g.below[static_cast<int32_t>(std::floor(v)) - g.values[0]];
    hi = lo + 1;
  }
  while (hi - lo > 1) {
    const int32_t mid = (lo + hi) / 2;
    if (g.values[mid] <= v) lo = mid; else hi = mid;
  }
  return v - static_cast<float>(g.values[lo]) <= static_cast<float>(g.values[hi]) - v ? lo : hi;
}

int32_t ValueAt(const Grid& g, int32_t index) { return g.values == nullptr ? index + g.lo : g.values[index]; }

// Least squares for one group: for each candidate inverse scale, round
// every value to the nearest grid point, then take the scale that minimises
// sum w (x - d q)^2 for those points (d = sum wxq / sum wqq); keep the best,
// refine once, and return d (0 for an all-zero group). The weights w are 1:
// on stories260K that measured closer to f32 (mean KL of q4nl 0.086, q8
// 3.4e-4 for the weights alone) than weighting by x^2 + mean x^2 (0.100,
// 4.0e-4) or |x|; importance from calibration activations is the next step.
float SearchScale(const Grid& g, const float* x, const float* importance, size_t n) {
  float amax = 0.0f, extreme = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      extreme = x[i];
    }
  }
  if (amax == 0.0f) return 0.0f;
  double w[kGroup];
  for (size_t i = 0; i < n; ++i) w[i] = importance ? static_cast<double>(importance[i]) : 1.0;
  auto fit = [&](double inverse, double* d) {
    double sxq = 0.0, sqq = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double q = ValueAt(g, NearestIndex(g, static_cast<float>(x[i] * inverse)));
      sxq += w[i] * x[i] * q;
      sqq += w[i] * q * q;
    }
    if (sqq <= 0.0) return -1.0;
    *d = sxq / sqq;
    return sxq * sxq / sqq;  // the error is sum w x^2 minus this
  };
  double best_d = 0.0, best = -1.0;
  const int32_t extremes[2] = {g.hi, g.lo};
  // A symmetric grid maps the largest magnitude to its top: d > 0.
  if (g.lo == -g.hi) extreme = amax;
  for (int32_t e : extremes) {
    const double step = std::fabs(static_cast<double>(e)) * 0.0125;
    for (int32_t k = -9; k <= 9; ++k) {
      double d = 0.0;
      const double score = fit((e + k * step) / extreme, &d);
      if (score > best) {
        best = score;
        best_d = d;
      }
    }
    if (g.lo == -g.hi) break;  // symmetric: the other extreme is the same search
  }
  double d = 0.0;
  if (best_d != 0.0 && fit(1.0 / best_d, &d) > best) best_d = d;
  return static_cast<float>(best_d);
}

const Grid& GridOf(int32_t dtype) {
  static const Grid kQ8 = {nullptr, 255, -127, 127, nullptr};
  static const Grid kQ4 = {nullptr, 16, -8, 7, nullptr};
  static const Grid kQ4NL = {kQ4NLGrid, 16, -127, 113, kQ4NLBelow.at};
  return dtype == TINYAI_DTYPE_Q8_G32 ? kQ8 : (dtype == TINYAI_DTYPE_Q4_G32 ? kQ4 : kQ4NL);
}

// The group's scale, searched and stored (half precision) at out.
float StoreScale(const Grid& g, const float* x, const float* importance, size_t n, uint8_t* out) {
  const uint16_t half = FloatToHalf(SearchScale(g, x, importance, n));
  std::memcpy(out, &half, sizeof half);
  return HalfToFloat(half);
}

// The group's codes after its scale: codes[0..n) (grid indices), and past
// them, to kGroup, the code of 0 (the padding docs/format.md pins).
void StoreCodes(int32_t dtype, const Grid& g, int32_t* codes, size_t n, uint8_t* out) {
  for (size_t j = n; j < kGroup; ++j) codes[j] = NearestIndex(g, 0.0f);
  if (dtype == TINYAI_DTYPE_Q8_G32) {
    for (size_t j = 0; j < kGroup; ++j) out[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(codes[j] - 127));
  } else {
    for (size_t j = 0; j < 16; ++j) out[2 + j] = static_cast<uint8_t>(codes[j] | (codes[j + 16] << 4));
  }
}

void EncodeGroup(int32_t dtype, const float* x, const float* importance, size_t n, uint8_t* out) {
  const Grid& g = GridOf(dtype);
  // The codes for the scale as stored.
  const float d = StoreScale(g, x, importance, n, out), inverse = d != 0.0f ? 1.0f / d : 0.0f;
  int32_t codes[kGroup];
  for (size_t j = 0; j < n; ++j) codes[j] = NearestIndex(g, x[j] * inverse);
  StoreCodes(dtype, g, codes, n, out);
}

// One row with error feedback (ColumnStats::factor): w holds the row and
// is updated as its columns are rounded in order; each group's scale is
// searched on the values as updated when the group starts.
void EncodeRowWithFeedback(int32_t dtype, float* w, size_t cols, const ColumnStats& stats, uint8_t* out) {
  const Grid& g = GridOf(dtype);
  for (size_t first = 0; first < cols; first += kGroup) {
    const size_t n = cols - first < kGroup ? cols - first : kGroup;
    uint8_t* group = out + (first / kGroup) * GroupBytes(dtype);
    const float d = StoreScale(g, w + first, stats.importance ? stats.importance + first : nullptr, n, group);
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    int32_t codes[kGroup];
    for (size_t j = 0; j < n; ++j) {
      const size_t c = first + j;
      codes[j] = NearestIndex(g, w[c] * inverse);
      const float* u = stats.factor + c * cols;
      const float e = (w[c] - d * static_cast<float>(ValueAt(g, codes[j]))) / u[c];
      for (size_t k = c + 1; k < cols; ++k) w[k] -= e * u[k];
    }
    StoreCodes(dtype, g, codes, n, group);
  }
}

}  // namespace

double EncodeError::RelativeRms() const { return sum_sq > 0.0 ? std::sqrt(sum_sq_error / sum_sq) : (sum_sq_error > 0.0 ? 1.0 : 0.0); }

void EncodeError::Add(const EncodeError& o) {
  sum_sq_error += o.sum_sq_error;
  sum_sq += o.sum_sq;
  if (o.max_abs_error > max_abs_error) max_abs_error = o.max_abs_error;
  values += o.values;
}

size_t EncodedRowBytes(int32_t dtype, size_t cols) {
  switch (dtype) {
    case TINYAI_DTYPE_F32: return cols * 4;
    case TINYAI_DTYPE_F16: return cols * 2;
    default: return GroupedRowBytes(dtype, cols);
  }
}

TinyAIStatus EncodeRows(int32_t dtype, const float* x, size_t rows, size_t cols, uint8_t* out, EncodeError* err,
                        ColumnStats stats) {
  const size_t row_bytes = EncodedRowBytes(dtype, cols);
  if (row_bytes == 0 && cols > 0) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "cannot encode values as dtype %d (%s)", dtype,
                    tinyaiDTypeName(static_cast<TinyAIDType>(dtype)));
  }
  if (!RowFits(dtype, cols)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "rows of %zu values cannot be %s, whose blocks hold %zu values; "
                    "choose a dtype of groups of 32 for them (q5_g32, q5m_g32 or q8_g32, as llama.cpp falls back)",
                    cols, tinyaiDTypeName(static_cast<TinyAIDType>(dtype)), BlockValues(dtype));
  }
  const kernels::WeightKernels* decode = kernels::WeightKernelsFor(kernels::Ref(), dtype);
  const bool feedback = stats.factor != nullptr && dtype != TINYAI_DTYPE_F32 && dtype != TINYAI_DTYPE_F16;
  Array<float> work, decoded;
  if (feedback || IsBlockEncoded(dtype)) TINYAI_RETURN_IF_ERROR(work.Allocate(cols, "the row being encoded"));
  if (err != nullptr) TINYAI_RETURN_IF_ERROR(decoded.Allocate(cols, "the row encoded, decoded"));
  for (size_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    uint8_t* dst = out + r * row_bytes;
    for (size_t c = 0; c < cols; ++c) {
      if (!std::isfinite(row[c])) {
        if (rows == 1) {
          return SetError(TINYAI_ERR_INVALID_ARGUMENT, "column %zu holds %f, which %s cannot encode", c,
                          static_cast<double>(row[c]), tinyaiDTypeName(static_cast<TinyAIDType>(dtype)));
        }
        return SetError(TINYAI_ERR_INVALID_ARGUMENT, "row %zu, column %zu holds %f, which %s cannot encode", r, c,
                        static_cast<double>(row[c]), tinyaiDTypeName(static_cast<TinyAIDType>(dtype)));
      }
    }
    if (dtype == TINYAI_DTYPE_F32) {
      std::memcpy(dst, row, cols * sizeof(float));
    } else if (dtype == TINYAI_DTYPE_F16) {
      for (size_t c = 0; c < cols; ++c) {
        const uint16_t h = FloatToHalf(row[c]);
        std::memcpy(dst + 2 * c, &h, sizeof h);
      }
    } else if (IsBlockEncoded(dtype)) {
      std::memcpy(work.data(), row, cols * sizeof(float));
      EncodeBlockRow(dtype, work.data(), cols, stats.importance, feedback ? stats.factor : nullptr, dst);
    } else if (feedback) {
      std::memcpy(work.data(), row, cols * sizeof(float));
      EncodeRowWithFeedback(dtype, work.data(), cols, stats, dst);
    } else {
      for (size_t g = 0; g < GroupsPerRow(cols); ++g) {
        const size_t first = g * kGroup;
        EncodeGroup(dtype, row + first, stats.importance ? stats.importance + first : nullptr,
                    cols - first < kGroup ? cols - first : kGroup, dst + g * GroupBytes(dtype));
      }
    }
    if (err == nullptr) continue;
    decode->dequantize_row(dst, decoded.data(), cols);
    for (size_t c = 0; c < cols; ++c) {
      const double e = static_cast<double>(decoded.data()[c]) - row[c];
      err->sum_sq_error += e * e;
      err->sum_sq += static_cast<double>(row[c]) * row[c];
      if (std::fabs(e) > err->max_abs_error) err->max_abs_error = std::fabs(e);
    }
    err->values += cols;
  }
  return TINYAI_OK;
}

}  // namespace quant
}  // namespace tinyai
