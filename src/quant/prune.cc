#include "quant/prune.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/array.h"
#include "common/checked_math.h"
#include "common/groups.h"
#include "common/status.h"
#include "kernels/kernels.h"

namespace tinyai {
namespace quant {
namespace {

using DecodeFn = void (*)(const uint8_t*, float*, size_t);
using ull = unsigned long long;

const char* DTypeName(int32_t dtype) { return tinyaiDTypeName(static_cast<TinyAIDType>(dtype)); }

// TINYAI_OK when s is what MakeSparseLayout makes of its own dtype, shape,
// block and kept, and a band's values and bytes fit a size_t.
TinyAIStatus CheckLayout(const SparseLayout& s, const char* what) {
  SparseLayout m;
  if (!MakeSparseLayout(s.dtype, s.rows, s.cols, s.block, s.kept, &m) || m.blocks != s.blocks ||
      m.bands != s.bands || m.bitmap_bytes != s.bitmap_bytes || m.kept_cols != s.kept_cols ||
      m.kept_row_bytes != s.kept_row_bytes || m.band_bytes != s.band_bytes) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "%s is not a block-sparse layout: %llu x %llu of %s in blocks of %llu keeping %llu a band (the "
                    "block is 1, 2, 4, 8, 16 or 32 and at most ceil(cols / block) blocks are kept; "
                    "MakeSparseLayout makes one)",
                    what, static_cast<ull>(s.rows), static_cast<ull>(s.cols), DTypeName(s.dtype),
                    static_cast<ull>(s.block), static_cast<ull>(s.kept));
  }
  uint64_t values = 0;
  size_t unused = 0;
  if (!CheckedMul(s.block, s.cols, &values) || !CheckedSize(values, &unused) || !CheckedSize(s.band_bytes, &unused)) {
    return SetError(TINYAI_ERR_OVERFLOW, "%s: a band of %llu x %llu values does not fit this machine's address space",
                    what, static_cast<ull>(s.block), static_cast<ull>(s.cols));
  }
  return TINYAI_OK;
}

// The first block from `from` on whose bit is set in band's bitmap, or nb.
uint64_t NextKept(const uint8_t* band, uint64_t from, uint64_t nb) {
  while (from < nb && !BlockKept(band, from)) {
    from = (from % 8 == 0 && band[from / 8] == 0) ? from + 8 : from + 1;
  }
  return from < nb ? from : nb;
}

// The column of each kept value of a band's rows (kept_cols of them, block
// after block) at cols_of; a value past the matrix (a narrow last block, or
// a bitmap with fewer bits than the layout keeps) gets s.cols.
void KeptColumns(const SparseLayout& s, const uint8_t* band, size_t* cols_of) {
  uint64_t block = NextKept(band, 0, s.blocks);
  for (uint64_t p = 0; p < s.kept_cols; ++p) {
    if (p > 0 && p % s.block == 0) block = NextKept(band, block + 1, s.blocks);
    const uint64_t col = block * s.block + p % s.block;
    cols_of[p] = static_cast<size_t>(col < s.cols ? col : s.cols);
  }
}

// The weight of each kept value in a group's scale search: the importance
// of its column (1 without one), 0 past the matrix.
void KeptImportance(const SparseLayout& s, const size_t* cols_of, const float* importance, float* out) {
  for (uint64_t p = 0; p < s.kept_cols; ++p) {
    const size_t col = cols_of[p];
    out[p] = col < s.cols ? (importance ? importance[col] : 1.0f) : 0.0f;
  }
}

TinyAIStatus CheckImportance(const float* importance, size_t cols) {
  if (importance == nullptr) return TINYAI_OK;
  for (size_t c = 0; c < cols; ++c) {
    if (!std::isfinite(importance[c]) || importance[c] < 0.0f) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                      "the importance of column %zu is %f: it is the mean square of the column's inputs, finite and "
                      ">= 0",
                      c, static_cast<double>(importance[c]));
    }
  }
  return TINYAI_OK;
}

// SparseGPT's correction of n rows of a band (row i at w + i * cols, the
// band's bitmap chosen): column by column, each pruned weight's value is
// its error, passed on through the factor's row to the columns after it
// (GPTQ's loop, src/quant/quantize.cc, with zero for the rounded value),
// then set to zero.
void Correct(const SparseLayout& s, const uint8_t* band, const float* factor, float* w, size_t n) {
  const size_t cols = static_cast<size_t>(s.cols), block = static_cast<size_t>(s.block);
  for (size_t c = 0; c < cols; ++c) {
    if (BlockKept(band, c / block)) continue;
    const float* u = factor + c * cols;
    for (size_t i = 0; i < n; ++i) {
      float* row = w + i * cols;
      const float e = row[c] / u[c];
      for (size_t k = c + 1; k < cols; ++k) row[k] -= e * u[k];
      row[c] = 0.0f;
    }
  }
}

}  // namespace

void DecodeBand(const SparseLayout& s, const uint8_t* band, DecodeFn decode, float* out) {
  const size_t cols = static_cast<size_t>(s.cols), block = static_cast<size_t>(s.block);
  std::fill(out, out + block * cols, 0.0f);
  for (size_t i = 0; i < block; ++i) {
    const uint8_t* row = band + s.row_offset(i);
    float* dst = out + i * cols;
    uint64_t kept = NextKept(band, 0, s.blocks);
    // 32 values at a time (a group of the grouped dtypes: every 32nd value
    // starts one), so that no scratch is needed.
    for (uint64_t p0 = 0; p0 < s.kept_cols; p0 += kGroup) {
      const size_t n = s.kept_cols - p0 < kGroup ? static_cast<size_t>(s.kept_cols - p0) : kGroup;
      float values[kGroup];
      decode(row + WeightRowBytes(s.dtype, p0), values, n);
      for (size_t t = 0; t < n; ++t) {
        const uint64_t p = p0 + t;
        if (p > 0 && p % block == 0) kept = NextKept(band, kept + 1, s.blocks);
        const uint64_t col = kept * block + p % block;
        if (col < cols) dst[col] = values[t];
      }
    }
  }
}

TinyAIStatus EncodeBands(const SparseLayout& s, const float* x, size_t rows, uint8_t* out, PruneScore score,
                         ColumnStats stats, EncodeError* err) {
  TINYAI_RETURN_IF_ERROR(CheckLayout(s, "the layout to prune into"));
  if (rows > s.rows) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%zu rows to prune into a layout of %llu rows", rows,
                    static_cast<ull>(s.rows));
  }
  const size_t block = static_cast<size_t>(s.block), cols = static_cast<size_t>(s.cols);
  const size_t nb = static_cast<size_t>(s.blocks), kept = static_cast<size_t>(s.kept);
  const size_t kept_cols = static_cast<size_t>(s.kept_cols), band_bytes = static_cast<size_t>(s.band_bytes);
  switch (score) {
    case PruneScore::kMagnitude: break;
    case PruneScore::kActivation:
      if (stats.importance == nullptr) {
        return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                        "activation-aware pruning scores |w| by the mean square of each column's inputs, and none "
                        "was given: calibrate first, or prune by magnitude");
      }
      break;
    case PruneScore::kSparseGpt:
      if (stats.factor == nullptr) {
        return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                        "SparseGPT pruning needs the factor of the inverse second moment of the inputs "
                        "(quant::InverseFactor over calibration inputs), and none was given");
      }
      for (size_t c = 0; c < cols; ++c) {
        const float u = stats.factor[c * cols + c];
        if (!std::isfinite(u) || !(u > 0.0f)) {
          return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                          "the factor's diagonal holds %f at column %zu: an upper Cholesky factor of an inverse "
                          "second moment has a finite, positive diagonal (quant::InverseFactor)",
                          static_cast<double>(u), c);
        }
      }
      break;
    default:
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "unknown pruning score %d (magnitude, activation or SparseGPT)",
                      static_cast<int>(score));
  }
  TINYAI_RETURN_IF_ERROR(CheckImportance(stats.importance, cols));
  const kernels::WeightKernels* kernel = kernels::WeightKernelsFor(kernels::Ref(), s.dtype);
  if (kernel == nullptr) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "no kernels decode %s", DTypeName(s.dtype));
  }
  Array<float> work, compact, importance, decoded;
  Array<double> scores;
  Array<size_t> order, cols_of;
  TINYAI_RETURN_IF_ERROR(work.Allocate(block * cols, "the band being pruned"));
  TINYAI_RETURN_IF_ERROR(scores.Allocate(nb, "the scores of a band's blocks"));
  TINYAI_RETURN_IF_ERROR(order.Allocate(nb, "the order of a band's blocks"));
  TINYAI_RETURN_IF_ERROR(compact.Allocate(block * kept_cols, "a band's kept values"));
  TINYAI_RETURN_IF_ERROR(importance.Allocate(kept_cols, "the importance of a band's kept values"));
  TINYAI_RETURN_IF_ERROR(cols_of.Allocate(kept_cols, "the columns of a band's kept values"));
  if (err) TINYAI_RETURN_IF_ERROR(decoded.Allocate(block * cols, "the band decoded"));

  for (size_t first = 0; first < rows; first += block) {
    const size_t n = rows - first < block ? rows - first : block;
    uint8_t* band = out + (first / block) * band_bytes;
    const float* src = x + first * cols;
    for (size_t i = 0; i < n * cols; ++i) {
      if (!std::isfinite(src[i])) {
        return SetError(TINYAI_ERR_INVALID_ARGUMENT, "row %zu, column %zu holds %f: weights to prune must be finite",
                        first + i / cols, i % cols, static_cast<double>(src[i]));
      }
    }
    std::copy(src, src + n * cols, work.data());
    std::fill(work.data() + n * cols, work.data() + block * cols, 0.0f);

    // Each block's score, summed over the band's rows.
    for (size_t j = 0; j < nb; ++j) {
      const size_t c1 = (j + 1) * block < cols ? (j + 1) * block : cols;
      double sum = 0.0;
      for (size_t i = 0; i < n; ++i) {
        for (size_t c = j * block; c < c1; ++c) {
          const double w = src[i * cols + c];
          switch (score) {
            case PruneScore::kMagnitude: sum += std::fabs(w); break;
            case PruneScore::kActivation: sum += std::fabs(w) * std::sqrt(static_cast<double>(stats.importance[c])); break;
            default: {
              const double u = stats.factor[c * cols + c];
              sum += w * w / (u * u);
            }
          }
        }
      }
      scores[j] = sum;
      order[j] = j;
    }
    // The kept highest scores first, ties to the lower index: a strict
    // total order, so the set is the same whatever the algorithm.
    if (kept < nb) {
      std::nth_element(order.begin(), order.begin() + kept, order.end(), [&](size_t a, size_t b) {
        return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
      });
    }
    std::memset(band, 0, band_bytes);
    for (size_t k = 0; k < kept; ++k) band[order[k] / 8] = static_cast<uint8_t>(band[order[k] / 8] | (1u << (order[k] % 8)));

    if (score == PruneScore::kSparseGpt) Correct(s, band, stats.factor, work.data(), n);
    KeptColumns(s, band, cols_of.data());
    for (size_t i = 0; i < block; ++i) {
      for (size_t p = 0; p < kept_cols; ++p) {
        const size_t col = cols_of[p];
        const float v = col < cols ? work[i * cols + col] : 0.0f;
        if (!std::isfinite(v)) {
          return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                          "SparseGPT's correction made row %zu, column %zu %f: the factor is not that of finite "
                          "inputs (quant::InverseFactor)",
                          first + i, col, static_cast<double>(v));
        }
        compact[i * kept_cols + p] = v;
      }
    }
    KeptImportance(s, cols_of.data(), stats.importance, importance.data());
    if (kept > 0) {
      TINYAI_RETURN_IF_ERROR(EncodeRows(s.dtype, compact.data(), block, kept_cols, band + s.bitmap_bytes, nullptr,
                                        ColumnStats{importance.data(), nullptr}));
    }
    if (err == nullptr) continue;
    DecodeBand(s, band, kernel->dequantize_row, decoded.data());
    for (size_t i = 0; i < n * cols; ++i) {
      const double e = static_cast<double>(decoded[i]) - src[i];
      err->sum_sq_error += e * e;
      err->sum_sq += static_cast<double>(src[i]) * src[i];
      if (std::fabs(e) > err->max_abs_error) err->max_abs_error = std::fabs(e);
    }
    err->values += n * cols;
  }
  return TINYAI_OK;
}

TinyAIStatus TranscodeBands(const SparseLayout& from, const SparseLayout& to, const uint8_t* in, size_t bands,
                            uint8_t* out, DecodeFn decode, ColumnStats stats) {
  TINYAI_RETURN_IF_ERROR(CheckLayout(from, "the layout to transcode from"));
  TINYAI_RETURN_IF_ERROR(CheckLayout(to, "the layout to transcode to"));
  if (from.rows != to.rows || from.cols != to.cols || from.block != to.block || from.kept != to.kept) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "bands of %llu x %llu in blocks of %llu keeping %llu cannot become %llu x %llu in blocks of %llu "
                    "keeping %llu: transcoding changes the dtype only",
                    static_cast<ull>(from.rows), static_cast<ull>(from.cols), static_cast<ull>(from.block),
                    static_cast<ull>(from.kept), static_cast<ull>(to.rows), static_cast<ull>(to.cols),
                    static_cast<ull>(to.block), static_cast<ull>(to.kept));
  }
  if (bands > from.bands) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%zu bands to transcode of a layout of %llu", bands,
                    static_cast<ull>(from.bands));
  }
  if (decode == nullptr) {
    const kernels::WeightKernels* kernel = kernels::WeightKernelsFor(kernels::Ref(), from.dtype);
    if (kernel == nullptr) return SetError(TINYAI_ERR_UNSUPPORTED, "no kernels decode %s", DTypeName(from.dtype));
    decode = kernel->dequantize_row;
  }
  const size_t cols = static_cast<size_t>(from.cols);
  TINYAI_RETURN_IF_ERROR(CheckImportance(stats.importance, cols));
  const size_t block = static_cast<size_t>(from.block), kept_cols = static_cast<size_t>(from.kept_cols);
  Array<float> values, importance;
  Array<size_t> cols_of;
  TINYAI_RETURN_IF_ERROR(values.Allocate(block * kept_cols, "a band's kept values"));
  TINYAI_RETURN_IF_ERROR(importance.Allocate(kept_cols, "the importance of a band's kept values"));
  TINYAI_RETURN_IF_ERROR(cols_of.Allocate(kept_cols, "the columns of a band's kept values"));
  for (size_t b = 0; b < bands; ++b) {
    const uint8_t* src = in + b * from.band_bytes;
    uint8_t* dst = out + b * to.band_bytes;
    std::memset(dst, 0, static_cast<size_t>(to.band_bytes));
    std::memcpy(dst, src, static_cast<size_t>(from.bitmap_bytes));
    if (kept_cols == 0) continue;
    for (size_t i = 0; i < block; ++i) decode(src + from.row_offset(i), values.data() + i * kept_cols, kept_cols);
    for (size_t v = 0; v < block * kept_cols; ++v) {
      if (!std::isfinite(values[v])) {
        return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                        "band %zu, row %zu: kept value %zu decodes to %f, which %s cannot encode", b, v / kept_cols,
                        v % kept_cols, static_cast<double>(values[v]), DTypeName(to.dtype));
      }
    }
    KeptColumns(from, src, cols_of.data());
    KeptImportance(from, cols_of.data(), stats.importance, importance.data());
    // Past the matrix a value is zero in every dtype's bytes (a q4nl_g32
    // zero decodes to its scale times 1).
    for (size_t i = 0; i < block; ++i) {
      for (size_t p = 0; p < kept_cols; ++p) {
        if (cols_of[p] >= cols) values[i * kept_cols + p] = 0.0f;
      }
    }
    TINYAI_RETURN_IF_ERROR(EncodeRows(to.dtype, values.data(), block, kept_cols, dst + to.bitmap_bytes, nullptr,
                                      ColumnStats{importance.data(), nullptr}));
  }
  return TINYAI_OK;
}

}  // namespace quant
}  // namespace tinyai
