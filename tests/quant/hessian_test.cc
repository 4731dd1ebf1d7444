// Error feedback (quant/hessian.h, ColumnStats::factor): the factor is the
// upper Cholesky factor of the damped second moment's inverse, and rounding
// with it leaves less error in the products with the inputs it was measured
// on than rounding each weight to its nearest code.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "quant/hessian.h"
#include "quant/quantize.h"
#include "tinyai/tinyai.h"

namespace tinyai {
namespace quant {
namespace {

// n inputs of cols values with correlated columns, as activations have them
// (four directions of the distribution's seed plus noise of the sample's),
// and one column always zero.
std::vector<float> Inputs(size_t n, size_t cols, uint32_t distribution, uint32_t sample) {
  std::mt19937 rng(distribution);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> dirs(4 * cols);
  for (float& v : dirs) v = normal(rng);
  rng.seed(sample);
  std::vector<float> x(n * cols);
  for (size_t t = 0; t < n; ++t) {
    float a[4];
    for (float& v : a) v = normal(rng);
    for (size_t c = 0; c < cols; ++c) {
      float v = 0.3f * normal(rng);
      for (int k = 0; k < 4; ++k) v += a[k] * dirs[k * cols + c];
      x[t * cols + c] = c == 5 ? 0.0f : v;
    }
  }
  return x;
}

std::vector<float> Gram(const std::vector<float>& x, size_t n, size_t cols) {
  std::vector<float> g(cols * cols, 0.0f);
  AccumulateGram(x.data(), cols, cols, n, g.data());
  return g;
}

// U^T U H = I for H the damped moment InverseFactor says it factors.
TEST(InverseFactor, IsTheCholeskyFactorOfTheDampedInverse) {
  for (size_t cols : {1u, 7u, 64u, 172u}) {
    const size_t n = 300;
    const std::vector<float> x = Inputs(n, cols, 3, 1);
    const std::vector<float> g = Gram(x, n, cols);
    std::vector<double> scratch(cols * cols);
    std::vector<float> u(cols * cols, -1.0f);
    ASSERT_EQ(InverseFactor(g.data(), n, cols, scratch.data(), u.data()), TINYAI_OK) << tinyaiGetLastErrorMessage();
    // The H it should have used: moments, a zero column's diagonal 1, 1% of the mean diagonal added.
    std::vector<double> h(cols * cols);
    double mean = 0.0;
    for (size_t i = 0; i < cols; ++i) mean += g[i * cols + i] / static_cast<double>(n);
    mean /= static_cast<double>(cols);
    if (!(mean > 0.0)) mean = 1.0;
    for (size_t i = 0; i < cols; ++i) {
      for (size_t j = 0; j < cols; ++j) h[i * cols + j] = g[(i < j ? i : j) * cols + (i < j ? j : i)] / static_cast<double>(n);
      if (h[i * cols + i] == 0.0) h[i * cols + i] = 1.0;
      h[i * cols + i] += 0.01 * mean;
    }
    std::vector<double> utu(cols * cols, 0.0);
    for (size_t i = 0; i < cols; ++i) {
      for (size_t j = 0; j < i; ++j) EXPECT_EQ(u[i * cols + j], 0.0f);
      EXPECT_GT(u[i * cols + i], 0.0f);
      for (size_t m = 0; m < cols; ++m) {
        for (size_t k = 0; k < cols; ++k) utu[i * cols + k] += static_cast<double>(u[m * cols + i]) * u[m * cols + k];
      }
    }
    double worst = 0.0;
    for (size_t i = 0; i < cols; ++i) {
      for (size_t j = 0; j < cols; ++j) {
        double v = 0.0;  // (U^T U H)[i][j]
        for (size_t k = 0; k < cols; ++k) v += utu[i * cols + k] * h[k * cols + j];
        const double off = std::fabs(v - (i == j ? 1.0 : 0.0));
        if (off > worst) worst = off;
      }
    }
    EXPECT_LT(worst, 1e-3) << cols << " columns";
  }
}

TEST(InverseFactor, RefusesNoInputsAndNonFiniteMoments) {
  std::vector<float> g(4, 0.0f);
  std::vector<double> scratch(4);
  std::vector<float> u(4);
  EXPECT_EQ(InverseFactor(g.data(), 0, 2, scratch.data(), u.data()), TINYAI_ERR_INVALID_ARGUMENT);
  g[3] = INFINITY;
  EXPECT_EQ(InverseFactor(g.data(), 10, 2, scratch.data(), u.data()), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tinyaiGetLastErrorMessage()).find("column 1"), std::string::npos) << tinyaiGetLastErrorMessage();
  // All-zero inputs: H is the identity (damped), which factors.
  g[3] = 0.0f;
  EXPECT_EQ(InverseFactor(g.data(), 10, 2, scratch.data(), u.data()), TINYAI_OK);
}

// Sum over the inputs of (x . (decoded - w))^2 for every row.
double ProductError(int32_t dtype, const std::vector<uint8_t>& q, const std::vector<float>& w, size_t rows,
                    size_t cols, const std::vector<float>& x, size_t n) {
  const kernels::WeightKernels* k = kernels::WeightKernelsFor(kernels::Ref(), dtype);
  std::vector<float> d(cols);
  double e = 0.0;
  for (size_t r = 0; r < rows; ++r) {
    k->dequantize_row(q.data() + r * EncodedRowBytes(dtype, cols), d.data(), cols);
    for (size_t t = 0; t < n; ++t) {
      double dot = 0.0;
      for (size_t c = 0; c < cols; ++c) dot += static_cast<double>(x[t * cols + c]) * (d[c] - w[r * cols + c]);
      e += dot * dot;
    }
  }
  return e;
}

// On inputs like those measured (fresh ones from the same distribution),
// feedback leaves less error in the products for every grouped dtype,
// also with rows whose last group is partial; f32 and f16 ignore it.
TEST(ErrorFeedback, LeavesLessErrorInTheProducts) {
  const size_t rows = 24, cols = 172, n = 400;
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(rows * cols);
  for (float& v : w) v = normal(rng);
  const std::vector<float> x = Inputs(n, cols, 4, 1), fresh = Inputs(n, cols, 4, 2);
  const std::vector<float> g = Gram(x, n, cols);
  std::vector<double> scratch(cols * cols);
  std::vector<float> u(cols * cols);
  ASSERT_EQ(InverseFactor(g.data(), n, cols, scratch.data(), u.data()), TINYAI_OK);
  ColumnStats stats;
  stats.factor = u.data();
  for (int32_t dtype : {TINYAI_DTYPE_Q8_G32, TINYAI_DTYPE_Q4_G32, TINYAI_DTYPE_Q4NL_G32}) {
    std::vector<uint8_t> plain(rows * EncodedRowBytes(dtype, cols)), fed(plain.size()), again(plain.size());
    ASSERT_EQ(EncodeRows(dtype, w.data(), rows, cols, plain.data(), nullptr), TINYAI_OK);
    EncodeError e;
    ASSERT_EQ(EncodeRows(dtype, w.data(), rows, cols, fed.data(), &e, stats), TINYAI_OK);
    ASSERT_EQ(EncodeRows(dtype, w.data(), rows, cols, again.data(), nullptr, stats), TINYAI_OK);
    EXPECT_EQ(fed, again);  // deterministic
    EXPECT_EQ(e.values, rows * cols);
    const double before = ProductError(dtype, plain, w, rows, cols, fresh, n);
    const double after = ProductError(dtype, fed, w, rows, cols, fresh, n);
    std::printf("%s: product error with feedback %.3g of without\n", tinyaiDTypeName(static_cast<TinyAIDType>(dtype)),
                after / before);
    EXPECT_LT(after, 0.7 * before) << tinyaiDTypeName(static_cast<TinyAIDType>(dtype));
  }
  for (int32_t dtype : {TINYAI_DTYPE_F32, TINYAI_DTYPE_F16}) {
    std::vector<uint8_t> plain(rows * EncodedRowBytes(dtype, cols)), fed(plain.size());
    ASSERT_EQ(EncodeRows(dtype, w.data(), rows, cols, plain.data(), nullptr), TINYAI_OK);
    ASSERT_EQ(EncodeRows(dtype, w.data(), rows, cols, fed.data(), nullptr, stats), TINYAI_OK);
    EXPECT_EQ(plain, fed);
  }
}

}  // namespace
}  // namespace quant
}  // namespace tinyai
