// Encoding weights to each stored dtype: the round-trip error bounds, the
// pinned byte layouts, the scale search against plain max-abs scales, and
// the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <random>
#include <vector>

#include "common/groups.h"
#include "common/half.h"
#include "format/test_models.h"
#include "format/tmai_writer.h"
#include "import/builder.h"
#include "kernels/kernels.h"
#include "quant/quantize.h"
#include "tinyai/tinyai.h"

namespace tinyai {
namespace quant {
namespace {

// Weights as trained matrices have them: mostly Gaussian, a few outliers.
std::vector<float> Weights(size_t rows, size_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(rows * cols);
  for (float& v : w) v = normal(rng);
  for (size_t i = 0; i < w.size(); i += 97) w[i] *= 6.0f;
  return w;
}

EncodeError Encode(int32_t dtype, const std::vector<float>& w, size_t rows, size_t cols, std::vector<uint8_t>* out) {
  out->assign(rows * EncodedRowBytes(dtype, cols), 0);
  EncodeError e;
  EXPECT_EQ(EncodeRows(dtype, w.data(), rows, cols, out->data(), &e), TINYAI_OK) << tinyaiGetLastErrorMessage();
  return e;
}

// The error EncodeRows reports is that of what it wrote, decoded.
TEST(Encode, ReportedErrorIsTheDecodedError) {
  for (int32_t dtype : {TINYAI_DTYPE_F32, TINYAI_DTYPE_F16, TINYAI_DTYPE_Q8_G32, TINYAI_DTYPE_Q4_G32, TINYAI_DTYPE_Q4NL_G32}) {
    const size_t rows = 7, cols = 172;
    std::vector<float> w = Weights(rows, cols, 1);
    std::vector<uint8_t> out;
    EncodeError e = Encode(dtype, w, rows, cols, &out);
    ASSERT_EQ(e.values, rows * cols);
    const kernels::WeightKernels* k = kernels::WeightKernelsFor(kernels::Ref(), dtype);
    std::vector<float> row(cols);
    double sse = 0.0;
    for (size_t r = 0; r < rows; ++r) {
      k->dequantize_row(out.data() + r * EncodedRowBytes(dtype, cols), row.data(), cols);
      for (size_t c = 0; c < cols; ++c) sse += (row[c] - w[r * cols + c]) * static_cast<double>(row[c] - w[r * cols + c]);
    }
    EXPECT_NEAR(e.sum_sq_error, sse, 1e-9 * (1.0 + sse)) << tinyaiDTypeName(static_cast<TinyAIDType>(dtype));
    if (dtype == TINYAI_DTYPE_F32) EXPECT_EQ(e.sum_sq_error, 0.0);
  }
}

// Relative RMS error of each format on Gaussian weights with outliers, for
// row lengths on and off the group (measured: f16 0.02%, q8 0.7%, q4 11.4-12.8%,
// q4nl 8.9-10.4%): the non-uniform grid below the uniform one.
TEST(Encode, RoundTripErrorBounds) {
  for (size_t cols : {1u, 31u, 32u, 33u, 172u, 768u}) {
    const size_t rows = 64;
    std::vector<float> w = Weights(rows, cols, 2 + static_cast<uint32_t>(cols));
    std::vector<uint8_t> out;
    const double f16 = Encode(TINYAI_DTYPE_F16, w, rows, cols, &out).RelativeRms();
    const double q8 = Encode(TINYAI_DTYPE_Q8_G32, w, rows, cols, &out).RelativeRms();
    const double q4 = Encode(TINYAI_DTYPE_Q4_G32, w, rows, cols, &out).RelativeRms();
    const double nl = Encode(TINYAI_DTYPE_Q4NL_G32, w, rows, cols, &out).RelativeRms();
    EXPECT_LT(f16, 5e-4) << cols;
    EXPECT_LT(q8, 0.0085) << cols;
    EXPECT_LT(q4, 0.14) << cols;
    EXPECT_LT(nl, 0.115) << cols;
    if (cols >= 32) EXPECT_LT(nl, q4) << cols;
    if (cols == 1) EXPECT_LT(q4, 1e-3);  // one value per group: its scale is exact to f16
  }
}

// The GGUF block dtypes past the groups of 32: more bits, less error, and
// each within what its bits allow (measured: q4_k 0.085, q5_k 0.043, q6_k
// 0.023, q5_g32 0.060, q5m_g32 0.040 on these weights, q4_g32 0.119); a K-quant beats the
// 4-bit groups of 32 it costs about as much as; a row that is not whole
// blocks of 256 is refused by name, with the dtypes to use instead.
TEST(Encode, BlockDtypesRoundTrip) {
  const size_t rows = 32;
  for (size_t cols : {256u, 768u}) {
    std::vector<float> w = Weights(rows, cols, 9 + static_cast<uint32_t>(cols));
    std::vector<uint8_t> out;
    const double q4 = Encode(TINYAI_DTYPE_Q4_G32, w, rows, cols, &out).RelativeRms();
    const double q4k = Encode(TINYAI_DTYPE_Q4_K, w, rows, cols, &out).RelativeRms();
    const double q5k = Encode(TINYAI_DTYPE_Q5_K, w, rows, cols, &out).RelativeRms();
    const double q6k = Encode(TINYAI_DTYPE_Q6_K, w, rows, cols, &out).RelativeRms();
    const double q5 = Encode(TINYAI_DTYPE_Q5_G32, w, rows, cols, &out).RelativeRms();
    const double q5m = Encode(TINYAI_DTYPE_Q5M_G32, w, rows, cols, &out).RelativeRms();
    EXPECT_LT(q4k, q4) << cols;
    EXPECT_LT(q4k, 0.12) << cols;
    EXPECT_LT(q5k, 0.6 * q4k) << cols;
    EXPECT_LT(q6k, 0.6 * q5k) << cols;
    EXPECT_LT(q5, 0.6 * q4) << cols;
    EXPECT_LT(q5m, 0.6 * q4) << cols;
    RecordProperty("q4k_" + std::to_string(cols), std::to_string(q4k));
    std::printf("cols %zu: q4_g32 %.4f q4_k %.4f q5_k %.4f q6_k %.4f q5_g32 %.4f q5m_g32 %.4f\n", cols, q4, q4k, q5k,
                q6k, q5, q5m);
  }
  for (size_t cols : {40u, 576u}) {  // the 5-bit groups take any row
    std::vector<float> w = Weights(rows, cols, 3);
    std::vector<uint8_t> out;
    EXPECT_LT(Encode(TINYAI_DTYPE_Q5_G32, w, rows, cols, &out).RelativeRms(), 0.07) << cols;
    EXPECT_LT(Encode(TINYAI_DTYPE_Q5M_G32, w, rows, cols, &out).RelativeRms(), 0.07) << cols;
  }
  std::vector<float> w = Weights(2, 576, 4);
  std::vector<uint8_t> out(2 * 1024);
  for (int32_t dtype : {TINYAI_DTYPE_Q4_K, TINYAI_DTYPE_Q5_K, TINYAI_DTYPE_Q6_K}) {
    EXPECT_EQ(EncodeRows(dtype, w.data(), 2, 576, out.data(), nullptr), TINYAI_ERR_INVALID_ARGUMENT);
    const std::string m = tinyaiGetLastErrorMessage();
    EXPECT_NE(m.find("rows of 576 values cannot be"), std::string::npos) << m;
    EXPECT_NE(m.find("q5_g32"), std::string::npos) << m;
  }
}

// All-zero and constant blocks decode exactly; K-quant codes land on the
// extremes of their ranges without wrapping.
TEST(Encode, BlockDtypesEdgeValues) {
  const size_t cols = 256;
  for (int32_t dtype : {TINYAI_DTYPE_Q4_K, TINYAI_DTYPE_Q5_K, TINYAI_DTYPE_Q6_K, TINYAI_DTYPE_Q5_G32,
                        TINYAI_DTYPE_Q5M_G32}) {
    SCOPED_TRACE(tinyaiDTypeName(static_cast<TinyAIDType>(dtype)));
    std::vector<uint8_t> out;
    std::vector<float> zeros(cols, 0.0f);
    EXPECT_EQ(Encode(dtype, zeros, 1, cols, &out).sum_sq_error, 0.0);
    std::vector<float> ramp(cols);
    for (size_t i = 0; i < cols; ++i) ramp[i] = (static_cast<float>(i % 64) - 31.5f) * 0.01f;
    EXPECT_LT(Encode(dtype, ramp, 1, cols, &out).RelativeRms(), 0.06);
    std::vector<float> positive(cols);
    for (size_t i = 0; i < cols; ++i) positive[i] = 1.0f + 0.001f * static_cast<float>(i % 32);
    EXPECT_LT(Encode(dtype, positive, 1, cols, &out).RelativeRms(), 0.02);
  }
}

// GGUF's IQ4_NL grid (llama.cpp's kvalues_iq4nl), written out here rather
// than taken from the code under test.
const int kIQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Plain max-abs scales (d = max|x| / 127 for q8, the signed extreme / -8 for
// q4 and / -127 for q4nl), each code the nearest: the search must do better
// on every format.
double MaxAbsError(int32_t dtype, const std::vector<float>& w) {
  double sse = 0.0, ss = 0.0;
  for (size_t first = 0; first < w.size(); first += 32) {
    float amax = 0.0f, extreme = 0.0f;
    for (size_t j = 0; j < 32; ++j)
      if (std::fabs(w[first + j]) > amax) amax = std::fabs(w[first + j]), extreme = w[first + j];
    const float d = HalfToFloat(FloatToHalf(dtype == TINYAI_DTYPE_Q8_G32  ? amax / 127.0f
                                            : dtype == TINYAI_DTYPE_Q4_G32 ? extreme / -8.0f
                                                                           : extreme / -127.0f));
    for (size_t j = 0; j < 32; ++j) {
      float q = d != 0.0f ? std::nearbyint(w[first + j] / d) : 0.0f;
      if (dtype == TINYAI_DTYPE_Q4NL_G32) {  // the grid value nearest w / d
        const float v = d != 0.0f ? w[first + j] / d : 0.0f;
        q = static_cast<float>(kIQ4NL[0]);
        for (int k : kIQ4NL)
          if (std::fabs(static_cast<float>(k) - v) < std::fabs(q - v)) q = static_cast<float>(k);
      } else {
        q = dtype == TINYAI_DTYPE_Q8_G32 ? std::fmax(-127.0f, std::fmin(127.0f, q)) : std::fmax(-8.0f, std::fmin(7.0f, q));
      }
      sse += (q * d - w[first + j]) * static_cast<double>(q * d - w[first + j]);
      ss += static_cast<double>(w[first + j]) * w[first + j];
    }
  }
  return std::sqrt(sse / ss);
}

TEST(Encode, ScaleSearchBeatsMaxAbs) {
  const size_t rows = 256, cols = 256;
  std::vector<float> w = Weights(rows, cols, 5);
  std::vector<uint8_t> out;
  for (int32_t dtype : {TINYAI_DTYPE_Q8_G32, TINYAI_DTYPE_Q4_G32, TINYAI_DTYPE_Q4NL_G32}) {
    const double searched = Encode(dtype, w, rows, cols, &out).RelativeRms();
    const double plain = MaxAbsError(dtype, w);
    EXPECT_LT(searched, plain) << tinyaiDTypeName(static_cast<TinyAIDType>(dtype));
  }
}

// Values a format represents exactly come back exactly, in the pinned
// layout: q4_g32 is GGUF's Q4_0 (element j in byte j's low nibble, j+16 in
// its high nibble, code = value + 8), q4nl_g32 its IQ4_NL (the same nibbles,
// code = the grid index), q8_g32 its Q8_0. Element j + 16 holds another
// code than element j (15 - j against j), so the nibbles cannot swap.
TEST(Encode, ExactValuesInThePinnedLayout) {
  // Written out: f16 0.5 (0x3800) and 1/64 (0x2400), little-endian, then
  // byte j = j | (15 - j) << 4.
  const std::vector<uint8_t> q4 = {0x00, 0x38, 0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96,
                                   0x87, 0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d, 0x1e, 0x0f};
  std::vector<uint8_t> nl = q4;
  nl[1] = 0x24;
  std::vector<float> w(32);
  for (int j = 0; j < 16; ++j) {
    w[j] = 0.5f * static_cast<float>(j - 8);
    w[j + 16] = 0.5f * static_cast<float>(7 - j);
  }
  std::vector<uint8_t> out;
  EXPECT_EQ(Encode(TINYAI_DTYPE_Q4_G32, w, 1, 32, &out).sum_sq_error, 0.0);
  EXPECT_EQ(out, q4);
  for (int j = 0; j < 16; ++j) {
    w[j] = static_cast<float>(kIQ4NL[j]) / 64.0f;
    w[j + 16] = static_cast<float>(kIQ4NL[15 - j]) / 64.0f;
  }
  EXPECT_EQ(Encode(TINYAI_DTYPE_Q4NL_G32, w, 1, 32, &out).sum_sq_error, 0.0);
  EXPECT_EQ(out, nl);

  for (int j = 0; j < 32; ++j) w[j] = 0.25f * static_cast<float>(j * 8 - 127);  // -127..121 in steps of 8
  w[31] = 0.25f * 127.0f;
  EXPECT_EQ(Encode(TINYAI_DTYPE_Q8_G32, w, 1, 32, &out).sum_sq_error, 0.0);
  uint16_t d;
  std::memcpy(&d, out.data(), 2);
  EXPECT_EQ(HalfToFloat(d), 0.25f);
  for (int j = 0; j < 31; ++j) EXPECT_EQ(static_cast<int8_t>(out[2 + j]), j * 8 - 127) << j;
}

// A row shorter than a group, and the padding of a partial last group:
// the code of zero, so a reader that ignores the row length still sums zero.
TEST(Encode, PartialGroupsArePaddedWithZero) {
  std::vector<float> w = {0.1f, -0.2f, 0.3f};
  std::vector<uint8_t> out;
  Encode(TINYAI_DTYPE_Q8_G32, w, 1, 3, &out);
  ASSERT_EQ(out.size(), 34u);
  for (int j = 3; j < 32; ++j) EXPECT_EQ(out[2 + j], 0) << j;
  // q4_g32 and q4nl_g32 alike: code 8, q4's 0 and q4nl's grid value 1
  // (the one nearest zero: a whole group read decodes its padding to d).
  for (int32_t dtype : {TINYAI_DTYPE_Q4_G32, TINYAI_DTYPE_Q4NL_G32}) {
    const char* name = tinyaiDTypeName(static_cast<TinyAIDType>(dtype));
    Encode(dtype, w, 1, 3, &out);
    ASSERT_EQ(out.size(), 18u);
    for (int j = 3; j < 16; ++j) EXPECT_EQ(out[2 + j] & 15, 8) << name << " " << j;
    for (int j = 0; j < 16; ++j) EXPECT_EQ(out[2 + j] >> 4, 8) << name << " " << j;
    uint16_t h;
    std::memcpy(&h, out.data(), 2);
    const float d = HalfToFloat(h), pad = dtype == TINYAI_DTYPE_Q4_G32 ? 0.0f : d;
    float all[32];
    kernels::WeightKernelsFor(kernels::Ref(), dtype)->dequantize_row(out.data(), all, 32);
    for (int j = 3; j < 32; ++j) EXPECT_EQ(all[j], pad) << name << " " << j;
  }
}

// A group of zeros stores d = 0 and the code of zero throughout, padding
// included (40 values: a whole group and 8 of the next).
TEST(Encode, AllZeroGroupsDecodeToZero) {
  std::vector<float> w(40, 0.0f);
  std::vector<uint8_t> out;
  for (int32_t dtype : {TINYAI_DTYPE_Q8_G32, TINYAI_DTYPE_Q4_G32, TINYAI_DTYPE_Q4NL_G32}) {
    const char* name = tinyaiDTypeName(static_cast<TinyAIDType>(dtype));
    EXPECT_EQ(Encode(dtype, w, 1, 40, &out).sum_sq_error, 0.0) << name;
    const size_t gb = dtype == TINYAI_DTYPE_Q8_G32 ? 34 : 18;
    ASSERT_EQ(out.size(), 2 * gb) << name;
    for (size_t g = 0; g < 2; ++g) {
      EXPECT_EQ(out[g * gb], 0) << name << " group " << g;
      EXPECT_EQ(out[g * gb + 1], 0) << name << " group " << g;
      for (size_t j = 2; j < gb; ++j)
        EXPECT_EQ(out[g * gb + j], dtype == TINYAI_DTYPE_Q8_G32 ? 0x00 : 0x88) << name << " group " << g << " byte " << j;
    }
  }
}

TEST(Encode, RefusesNonFiniteValuesAndUnknownDtypes) {
  std::vector<float> w(64, 0.5f);
  std::vector<uint8_t> out(2 * 34, 0);
  w[40] = NAN;
  EXPECT_EQ(EncodeRows(TINYAI_DTYPE_Q8_G32, w.data(), 2, 32, out.data(), nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(tinyaiGetLastErrorMessage(), "row 1, column 8"), nullptr) << tinyaiGetLastErrorMessage();
  w[40] = INFINITY;
  EXPECT_EQ(EncodeRows(TINYAI_DTYPE_F16, w.data(), 2, 32, out.data(), nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(EncodeRows(99, w.data(), 2, 32, out.data(), nullptr), TINYAI_ERR_UNSUPPORTED);
  EXPECT_EQ(EncodedRowBytes(99, 32), 0u);
  EXPECT_EQ(EncodedRowBytes(TINYAI_DTYPE_Q4NL_G32, 33), 36u);
}

}  // namespace
}  // namespace quant
}  // namespace tinyai

namespace tinyai {
namespace quant {
namespace {

// The writer stores grouped tensors a batch of rows at a time on several
// threads: the file is the same whatever the threads and however the values
// arrive, an encoding error names the tensor and the row, and a grouped
// tensor without an encoder is refused.
std::string WriteGrouped(const std::string& path, size_t threads, size_t chunk, float poison_at = -1.0f) {
  TmaiWriter w;
  WriteOptions o;
  UseRowEncoder(&w, o);
  w.SetEncodeThreads(threads);
  w.AddLayer(TINYAI_LAYER_DENSE, -1);
  w.AddTensor("a", TINYAI_ROLE_DENSE_WEIGHT, TINYAI_DTYPE_Q4NL_G32, {301, 172});
  w.AddTensor("b", TINYAI_ROLE_DENSE_WEIGHT, TINYAI_DTYPE_Q8_G32, {7, 40});
  EXPECT_EQ(w.Open(path.c_str()), TINYAI_OK) << tinyaiGetLastErrorMessage();
  std::vector<float> v = Weights(1, 301 * 172 + 7 * 40, 9);
  if (poison_at >= 0.0f) v[static_cast<size_t>(poison_at)] = NAN;
  for (size_t at = 0; at < v.size(); at += chunk) {
    const TinyAIStatus s = w.WriteValues(v.data() + at, std::min(chunk, v.size() - at));
    if (s != TINYAI_OK) return std::string("error: ") + tinyaiGetLastErrorMessage();
  }
  EXPECT_EQ(w.Finish(), TINYAI_OK) << tinyaiGetLastErrorMessage();
  std::FILE* f = std::fopen(path.c_str(), "rb");
  std::string bytes;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
  std::fclose(f);
  return bytes;
}

TEST(Writer, GroupedRowsAreTheSameOnAnyThreadsAndChunks) {
  testing::TempDir dir;
  const std::string one = WriteGrouped(dir.File("1.tmai"), 1, 1 << 20);
  EXPECT_EQ(WriteGrouped(dir.File("4.tmai"), 4, 1 << 20), one);
  EXPECT_EQ(WriteGrouped(dir.File("odd.tmai"), 3, 97), one);
  EXPECT_GT(one.size(), static_cast<size_t>(301 * 6 * 18 + 7 * 2 * 34));
}

TEST(Writer, GroupedEncodingErrorNamesTensorAndRow) {
  testing::TempDir dir;
  const std::string r = WriteGrouped(dir.File("nan.tmai"), 2, 1000, 17 * 172 + 5);
  EXPECT_NE(r.find("error: "), std::string::npos);
  EXPECT_NE(r.find("tensor 'a', row 17: column 5 holds nan"), std::string::npos) << r;
}

TEST(Writer, GroupedTensorNeedsAnEncoder) {
  testing::TempDir dir;
  TmaiWriter w;
  w.AddLayer(TINYAI_LAYER_DENSE, -1);
  w.AddTensor("a", TINYAI_ROLE_DENSE_WEIGHT, TINYAI_DTYPE_Q4_G32, {2, 32});
  ASSERT_EQ(w.Open(dir.File("x.tmai").c_str()), TINYAI_OK);
  std::vector<float> v(64, 0.5f);
  EXPECT_EQ(w.WriteValues(v.data(), v.size()), TINYAI_ERR_MISUSE);
  EXPECT_NE(std::strstr(tinyaiGetLastErrorMessage(), "no row encoder"), nullptr) << tinyaiGetLastErrorMessage();
}

}  // namespace
}  // namespace quant
}  // namespace tinyai
