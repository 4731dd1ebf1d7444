// Pruning to block-sparse bands (quant/prune.h, common/sparse.h): which
// blocks each score keeps, the bands decoded back, shapes that do not fill
// a band or a block, SparseGPT's correction against the activation score,
// transcoding bands to another dtype, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/sparse.h"
#include "kernels/kernels.h"
#include "quant/hessian.h"
#include "quant/prune.h"
#include "quant/quantize.h"
#include "tinyai/tinyai.h"

namespace tinyai {
namespace quant {
namespace {

const int32_t kDTypes[] = {TINYAI_DTYPE_F32, TINYAI_DTYPE_F16, TINYAI_DTYPE_Q8_G32, TINYAI_DTYPE_Q4_G32,
                           TINYAI_DTYPE_Q4NL_G32};

std::string Name(int32_t dtype) { return tinyaiDTypeName(static_cast<TinyAIDType>(dtype)); }

SparseLayout Layout(int32_t dtype, size_t rows, size_t cols, size_t block, size_t kept) {
  SparseLayout s;
  EXPECT_TRUE(MakeSparseLayout(dtype, rows, cols, block, kept, &s)) << rows << "x" << cols << " B" << block;
  return s;
}

std::vector<float> Random(size_t n, uint32_t seed, float sigma = 0.02f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> w(n);
  for (float& v : w) v = normal(rng);
  return w;
}

// The bands of rows x s.cols values (all of s's rows), checked to encode.
std::vector<uint8_t> Prune(const SparseLayout& s, const std::vector<float>& x, PruneScore score = PruneScore::kMagnitude,
                           ColumnStats stats = ColumnStats(), EncodeError* err = nullptr) {
  std::vector<uint8_t> out(s.bytes() + 1, 0xa5);
  EXPECT_EQ(EncodeBands(s, x.data(), s.rows, out.data(), score, stats, err), TINYAI_OK) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(out[s.bytes()], 0xa5) << "written past the bands";
  return out;
}

// The bands back to s.rows x s.cols values.
std::vector<float> Unprune(const SparseLayout& s, const uint8_t* bands) {
  const auto decode = kernels::WeightKernelsFor(kernels::Ref(), s.dtype)->dequantize_row;
  std::vector<float> band(s.block * s.cols), out(s.rows * s.cols);
  for (size_t b = 0; b < s.bands; ++b) {
    DecodeBand(s, bands + b * s.band_bytes, decode, band.data());
    for (size_t i = 0; i < s.block; ++i) {
      const size_t r = b * s.block + i;
      for (size_t c = 0; c < s.cols; ++c) {
        if (r < s.rows) {
          out[r * s.cols + c] = band[i * s.cols + c];
        } else {
          EXPECT_EQ(band[i * s.cols + c], 0.0f) << "a short last band's row " << i << " decodes to nonzero";
        }
      }
    }
  }
  return out;
}

// The kept blocks of band b, as a list; checks the bitmap keeps exactly
// s.kept and nothing past the blocks.
std::vector<size_t> Kept(const SparseLayout& s, const uint8_t* bands, size_t b) {
  const uint8_t* band = bands + b * s.band_bytes;
  std::vector<size_t> kept;
  for (size_t j = 0; j < s.bitmap_bytes * 8; ++j) {
    if ((band[j / 8] >> (j % 8)) & 1) {
      EXPECT_LT(j, s.blocks) << "a bit past the blocks";
      kept.push_back(j);
    }
  }
  EXPECT_EQ(kept.size(), s.kept) << "band " << b;
  return kept;
}

// x with the blocks band b does not keep set to zero.
std::vector<float> Masked(const SparseLayout& s, const uint8_t* bands, const std::vector<float>& x) {
  std::vector<float> m(x.size(), 0.0f);
  for (size_t b = 0; b < s.bands; ++b) {
    for (size_t j : Kept(s, bands, b)) {
      for (size_t r = b * s.block; r < (b + 1) * s.block && r < s.rows; ++r) {
        for (size_t c = j * s.block; c < (j + 1) * s.block && c < s.cols; ++c) m[r * s.cols + c] = x[r * s.cols + c];
      }
    }
  }
  return m;
}

// Magnitude keeps the blocks whose |w| sums are largest, per band.
TEST(Prune, MagnitudeKeepsTheLargestBlocksOfEachBand) {
  const SparseLayout s = Layout(TINYAI_DTYPE_F32, 8, 32, 4, 3);  // 2 bands of 8 blocks
  std::vector<float> x = Random(8 * 32, 1, 0.01f);
  const std::vector<std::vector<size_t>> big = {{1, 5, 6}, {0, 2, 7}};
  for (size_t b = 0; b < 2; ++b) {
    for (size_t j : big[b]) {
      // One large value per block is enough; its sign does not matter.
      x[(b * 4 + j % 4) * 32 + j * 4 + 1] = (j % 2 ? -1.0f : 1.0f) * (0.5f + 0.1f * j);
    }
  }
  const std::vector<uint8_t> bands = Prune(s, x);
  EXPECT_EQ(Kept(s, bands.data(), 0), big[0]);
  EXPECT_EQ(Kept(s, bands.data(), 1), big[1]);
}

// The activation score weighs |w| by its column's input RMS: a column that
// meets large inputs keeps its block against a block of larger weights.
TEST(Prune, ActivationWeighsTheInputsEachColumnMeets) {
  const SparseLayout s = Layout(TINYAI_DTYPE_F32, 2, 4, 2, 1);  // 1 band, 2 blocks
  const std::vector<float> x = {2.0f, 2.0f, 1.0f, 1.0f, 2.0f, 2.0f, 1.0f, 1.0f};
  EXPECT_EQ(Kept(s, Prune(s, x).data(), 0), std::vector<size_t>{0});
  const float importance[4] = {1.0f, 1.0f, 9.0f, 9.0f};  // RMS 1 and 3: 2 * 1 < 1 * 3
  const std::vector<uint8_t> bands = Prune(s, x, PruneScore::kActivation, ColumnStats{importance, nullptr});
  EXPECT_EQ(Kept(s, bands.data(), 0), std::vector<size_t>{1});
  // Equal inputs: the magnitude's choice.
  const float flat[4] = {4.0f, 4.0f, 4.0f, 4.0f};
  EXPECT_EQ(Kept(s, Prune(s, x, PruneScore::kActivation, ColumnStats{flat, nullptr}).data(), 0), std::vector<size_t>{0});
}

// Equal scores: the lower block indices are kept.
TEST(Prune, TiesKeepTheLowerBlocks) {
  const SparseLayout s = Layout(TINYAI_DTYPE_F32, 4, 70, 1, 3);  // 70 blocks: two bitmap words
  std::vector<float> x(4 * 70, 0.5f);
  for (size_t i = 0; i < x.size(); i += 2) x[i] = -0.5f;
  const std::vector<uint8_t> bands = Prune(s, x);
  for (size_t b = 0; b < 4; ++b) EXPECT_EQ(Kept(s, bands.data(), b), (std::vector<size_t>{0, 1, 2})) << b;
  // A tie beyond the first word: only blocks 65 and 69 are large, 66 and 68 tie below them.
  std::vector<float> y(4 * 70, 0.0f);
  for (size_t r = 0; r < 4; ++r) {
    y[r * 70 + 65] = y[r * 70 + 69] = 1.0f;
    y[r * 70 + 66] = y[r * 70 + 68] = -0.25f;
  }
  const std::vector<uint8_t> more = Prune(s, y);
  for (size_t b = 0; b < 4; ++b) EXPECT_EQ(Kept(s, more.data(), b), (std::vector<size_t>{65, 66, 69})) << b;
}

// Decoded bands are x with the pruned blocks zero: exactly for f32, within
// the dtype's rounding otherwise; on shapes that leave a narrow last block
// (172 columns in blocks of 8: 21.5) and a short last band (10 rows in
// bands of 4), for every count kept from none to all. The error EncodeBands
// reports is that of the decoded bands against x.
TEST(Prune, DecodedBandsAreTheKeptBlocks) {
  struct Shape {
    size_t rows, cols, block;
  };
  for (const Shape& shape : {Shape{10, 172, 4}, Shape{16, 172, 8}, Shape{10, 172, 8}, Shape{7, 33, 1}, Shape{33, 64, 32},
                             Shape{5, 3, 2}}) {
    const size_t nb = (shape.cols + shape.block - 1) / shape.block;
    for (size_t kept : {size_t{0}, size_t{1}, nb / 2, nb - 1, nb}) {
      for (int32_t dtype : kDTypes) {
        SCOPED_TRACE(Name(dtype) + " " + std::to_string(shape.rows) + "x" + std::to_string(shape.cols) + " B" +
                     std::to_string(shape.block) + " K" + std::to_string(kept));
        const SparseLayout s = Layout(dtype, shape.rows, shape.cols, shape.block, kept);
        std::vector<float> x = Random(shape.rows * shape.cols, 7 + static_cast<uint32_t>(kept));
        for (size_t i = 0; i < x.size(); i += 41) x[i] *= 8.0f;  // outliers
        EncodeError err;
        const std::vector<uint8_t> bands = Prune(s, x, PruneScore::kMagnitude, ColumnStats(), &err);
        const std::vector<float> want = Masked(s, bands.data(), x), got = Unprune(s, bands.data());
        double sse = 0.0, kept_sq = 0.0, kept_sse = 0.0;
        for (size_t i = 0; i < x.size(); ++i) {
          sse += (static_cast<double>(got[i]) - x[i]) * (static_cast<double>(got[i]) - x[i]);
          if (want[i] == 0.0f) {
            ASSERT_EQ(got[i], 0.0f) << "a pruned value at " << i;
            continue;
          }
          kept_sq += static_cast<double>(want[i]) * want[i];
          kept_sse += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
          if (dtype == TINYAI_DTYPE_F32) ASSERT_EQ(got[i], want[i]) << i;
          if (dtype == TINYAI_DTYPE_F16) ASSERT_NEAR(got[i], want[i], std::fmax(std::fabs(want[i]) * 0x1p-11f, 0x1p-25f)) << i;
        }
        const double rel = kept_sq > 0.0 ? std::sqrt(kept_sse / kept_sq) : 0.0;
        if (dtype == TINYAI_DTYPE_Q8_G32) EXPECT_LT(rel, 0.015);
        if (dtype == TINYAI_DTYPE_Q4_G32 || dtype == TINYAI_DTYPE_Q4NL_G32) EXPECT_LT(rel, 0.2);  // small rows with outliers
        EXPECT_EQ(err.values, shape.rows * shape.cols);
        EXPECT_NEAR(err.sum_sq_error, sse, 1e-9 * (1.0 + sse));
        if (kept == 0) EXPECT_NEAR(err.RelativeRms(), 1.0, 1e-12);
        if (kept == nb && dtype == TINYAI_DTYPE_F32) EXPECT_EQ(err.sum_sq_error, 0.0);
        // Bytes past a band's rows and values past the matrix are zero.
        for (size_t b = 0; b < s.bands; ++b) {
          const uint8_t* band = bands.data() + b * s.band_bytes;
          for (size_t k = s.row_offset(s.block); k < s.band_bytes; ++k) ASSERT_EQ(band[k], 0) << "padding byte " << k;
        }
      }
    }
  }
}

// Pruning a slice of bands gives the bytes of those bands of the whole.
TEST(Prune, BandsDoNotDependOnTheSlice) {
  const SparseLayout s = Layout(TINYAI_DTYPE_Q4NL_G32, 10, 172, 4, 20);
  const std::vector<float> x = Random(10 * 172, 3);
  const std::vector<uint8_t> whole = Prune(s, x);
  std::vector<uint8_t> tail(2 * s.band_bytes);
  ASSERT_EQ(EncodeBands(s, x.data() + 4 * 172, 6, tail.data(), PruneScore::kMagnitude, ColumnStats(), nullptr), TINYAI_OK);
  EXPECT_EQ(0, std::memcmp(tail.data(), whole.data() + s.band_bytes, tail.size()));
}

// n inputs of cols values with correlated columns (four shared directions
// plus noise), as activations have them.
std::vector<float> Inputs(size_t n, size_t cols, uint32_t distribution, uint32_t sample) {
  std::mt19937 rng(distribution);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> dirs(4 * cols), scale(cols);
  for (float& v : dirs) v = normal(rng);
  for (float& v : scale) v = 0.5f + std::fabs(normal(rng));  // columns of unequal size, as Wanda expects
  rng.seed(sample);
  std::vector<float> x(n * cols);
  for (size_t t = 0; t < n; ++t) {
    float a[4];
    for (float& v : a) v = normal(rng);
    for (size_t c = 0; c < cols; ++c) {
      float v = 0.3f * normal(rng);
      for (int k = 0; k < 4; ++k) v += a[k] * dirs[k * cols + c];
      x[t * cols + c] = scale[c] * v;
    }
  }
  return x;
}

// sum over inputs of ||(W - What) x||^2.
double OutputError(const std::vector<float>& w, const std::vector<float>& what, size_t rows, size_t cols,
                   const std::vector<float>& x, size_t n) {
  double sum = 0.0;
  for (size_t t = 0; t < n; ++t) {
    for (size_t r = 0; r < rows; ++r) {
      double y = 0.0;
      for (size_t c = 0; c < cols; ++c) y += (static_cast<double>(w[r * cols + c]) - what[r * cols + c]) * x[t * cols + c];
      sum += y * y;
    }
  }
  return sum;
}

// SparseGPT's correction leaves less error in the products with the inputs
// it was calibrated on (and with others of their distribution) than the
// activation score alone, at the same bitmaps' sparsity, unstructured and
// in blocks, for fp32 and int8 survivors.
TEST(Prune, SparseGptLowersTheOutputErrorBelowActivation) {
  const size_t rows = 32, cols = 64, n = 512;
  const std::vector<float> w = Random(rows * cols, 5, 0.05f);
  const std::vector<float> x = Inputs(n, cols, 11, 1), held_out = Inputs(n, cols, 11, 2);
  std::vector<float> gram(cols * cols, 0.0f), factor(cols * cols), importance(cols);
  AccumulateGram(x.data(), cols, cols, n, gram.data());
  for (size_t c = 0; c < cols; ++c) importance[c] = gram[c * cols + c] / static_cast<float>(n);
  std::vector<double> scratch(cols * cols);
  ASSERT_EQ(InverseFactor(gram.data(), n, cols, scratch.data(), factor.data()), TINYAI_OK) << tinyaiGetLastErrorMessage();
  for (size_t block : {1u, 4u}) {
    for (int32_t dtype : {TINYAI_DTYPE_F32, TINYAI_DTYPE_Q8_G32}) {
      const size_t nb = cols / block;
      const SparseLayout s = Layout(dtype, rows, cols, block, nb / 2);
      const std::vector<uint8_t> wanda = Prune(s, w, PruneScore::kActivation, ColumnStats{importance.data(), nullptr});
      const std::vector<uint8_t> gpt = Prune(s, w, PruneScore::kSparseGpt, ColumnStats{importance.data(), factor.data()});
      const std::vector<float> a = Unprune(s, wanda.data()), g = Unprune(s, gpt.data());
      const double ea = OutputError(w, a, rows, cols, x, n), eg = OutputError(w, g, rows, cols, x, n);
      const double ha = OutputError(w, a, rows, cols, held_out, n), hg = OutputError(w, g, rows, cols, held_out, n);
      std::printf("B%zu %s: output error activation %.4g, SparseGPT %.4g (held out %.4g, %.4g)\n", block,
                  Name(dtype).c_str(), ea, eg, ha, hg);
      EXPECT_LT(eg, 0.7 * ea) << "B" << block << " " << Name(dtype);
      EXPECT_LT(hg, 0.8 * ha) << "B" << block << " " << Name(dtype);
      // Every band still keeps exactly K blocks, and its pruned weights are zero.
      for (size_t b = 0; b < s.bands; ++b) Kept(s, gpt.data(), b);
      const std::vector<float> masked = Masked(s, gpt.data(), g);
      for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], masked[i]) << i;
    }
  }
}

// Transcoding keeps every bitmap and re-encodes the kept values: f32 bands
// to each dtype decode as the f32 ones would encode, and back to f32 exactly
// what the other dtype held.
TEST(Prune, TranscodeKeepsTheBitmaps) {
  const size_t rows = 10, cols = 172, block = 4, kept = 20;
  const SparseLayout f32 = Layout(TINYAI_DTYPE_F32, rows, cols, block, kept);
  const std::vector<float> x = Random(rows * cols, 9);
  const std::vector<uint8_t> bands = Prune(f32, x);
  const std::vector<float> dense = Unprune(f32, bands.data());
  std::vector<float> importance(cols);
  for (size_t c = 0; c < cols; ++c) importance[c] = 0.5f + static_cast<float>(c % 7);
  for (int32_t dtype : kDTypes) {
    for (const float* imp : {static_cast<const float*>(nullptr), static_cast<const float*>(importance.data())}) {
      SCOPED_TRACE(Name(dtype) + (imp ? " with importance" : ""));
      const SparseLayout to = Layout(dtype, rows, cols, block, kept);
      std::vector<uint8_t> out(to.bytes() + 1, 0xa5);
      ASSERT_EQ(TranscodeBands(f32, to, bands.data(), f32.bands, out.data(), nullptr, ColumnStats{imp, nullptr}), TINYAI_OK)
          << tinyaiGetLastErrorMessage();
      EXPECT_EQ(out[to.bytes()], 0xa5);
      for (size_t b = 0; b < to.bands; ++b) {
        ASSERT_EQ(0, std::memcmp(out.data() + b * to.band_bytes, bands.data() + b * f32.band_bytes, f32.bitmap_bytes));
      }
      // The same as pruning x to dtype with the same bitmaps: here, pruning the masked values.
      const std::vector<uint8_t> direct = Prune(to, dense, PruneScore::kMagnitude, ColumnStats{imp, nullptr});
      EXPECT_EQ(0, std::memcmp(direct.data(), out.data(), to.bytes()));
      const std::vector<float> got = Unprune(to, out.data());
      std::vector<uint8_t> back(f32.bytes());
      ASSERT_EQ(TranscodeBands(to, f32, out.data(), to.bands, back.data(), nullptr, ColumnStats()), TINYAI_OK);
      EXPECT_EQ(Unprune(f32, back.data()), got);
      double sq = 0.0, sse = 0.0;
      for (size_t i = 0; i < got.size(); ++i) {
        if (dense[i] == 0.0f) ASSERT_EQ(got[i], 0.0f) << i;
        sq += static_cast<double>(dense[i]) * dense[i];
        sse += (static_cast<double>(got[i]) - dense[i]) * (static_cast<double>(got[i]) - dense[i]);
      }
      EXPECT_LT(std::sqrt(sse / sq), 0.15);
    }
  }
}

bool Says(const char* what) { return std::string(tinyaiGetLastErrorMessage()).find(what) != std::string::npos; }

TEST(Prune, BadInputIsNamed) {
  const SparseLayout s = Layout(TINYAI_DTYPE_Q8_G32, 8, 40, 4, 5);
  std::vector<float> x = Random(8 * 40, 4);
  std::vector<uint8_t> out(s.bytes());
  x[5 * 40 + 7] = NAN;
  EXPECT_EQ(EncodeBands(s, x.data(), 8, out.data(), PruneScore::kMagnitude, ColumnStats(), nullptr),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Says("row 5, column 7")) << tinyaiGetLastErrorMessage();
  x[5 * 40 + 7] = 0.0f;

  EXPECT_EQ(EncodeBands(s, x.data(), 8, out.data(), PruneScore::kActivation, ColumnStats(), nullptr),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Says("activation")) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(EncodeBands(s, x.data(), 8, out.data(), PruneScore::kSparseGpt, ColumnStats(), nullptr),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Says("SparseGPT")) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(EncodeBands(s, x.data(), 8, out.data(), static_cast<PruneScore>(7), ColumnStats(), nullptr),
            TINYAI_ERR_INVALID_ARGUMENT);

  std::vector<float> importance(40, 1.0f);
  importance[13] = -1.0f;
  EXPECT_EQ(EncodeBands(s, x.data(), 8, out.data(), PruneScore::kActivation, ColumnStats{importance.data(), nullptr}, nullptr),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Says("column 13")) << tinyaiGetLastErrorMessage();

  std::vector<float> factor(40 * 40, 0.0f);
  for (size_t c = 0; c < 40; ++c) factor[c * 40 + c] = c == 21 ? 0.0f : 1.0f;
  EXPECT_EQ(EncodeBands(s, x.data(), 8, out.data(), PruneScore::kSparseGpt, ColumnStats{nullptr, factor.data()}, nullptr),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Says("column 21")) << tinyaiGetLastErrorMessage();

  SparseLayout bad = s;
  bad.band_bytes += 8;
  EXPECT_EQ(EncodeBands(bad, x.data(), 8, out.data(), PruneScore::kMagnitude, ColumnStats(), nullptr),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Says("not a block-sparse layout")) << tinyaiGetLastErrorMessage();
  bad = s;
  bad.block = 3;
  EXPECT_EQ(EncodeBands(bad, x.data(), 8, out.data(), PruneScore::kMagnitude, ColumnStats(), nullptr),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(EncodeBands(s, x.data(), 9, out.data(), PruneScore::kMagnitude, ColumnStats(), nullptr),
            TINYAI_ERR_INVALID_ARGUMENT);

  // Transcoding: another shape, or values that do not decode to finite ones.
  const std::vector<uint8_t> bands = Prune(s, x);
  const SparseLayout other = Layout(TINYAI_DTYPE_Q4_G32, 8, 40, 4, 4);
  std::vector<uint8_t> out2(other.bytes() + s.bytes());
  EXPECT_EQ(TranscodeBands(s, other, bands.data(), s.bands, out2.data(), nullptr, ColumnStats()), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Says("dtype only")) << tinyaiGetLastErrorMessage();
  const SparseLayout f32 = Layout(TINYAI_DTYPE_F32, 8, 40, 4, 5);
  std::vector<uint8_t> f32_bands = Prune(f32, x);
  const float inf = INFINITY;
  std::memcpy(f32_bands.data() + f32.band_bytes + f32.row_offset(2) + 4 * 3, &inf, 4);
  EXPECT_EQ(TranscodeBands(f32, s, f32_bands.data(), f32.bands, out2.data(), nullptr, ColumnStats()),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Says("band 1, row 2: kept value 3")) << tinyaiGetLastErrorMessage();
}

}  // namespace
}  // namespace quant
}  // namespace tinyai
