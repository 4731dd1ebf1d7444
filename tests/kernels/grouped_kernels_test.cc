// The grouped integer dtypes' products (q8_g32, q4_g32, q4nl_g32): the
// reference against what its definition says (dequantized weights times the
// quantized input, src/common/groups.h), and every table against the
// reference on odd shapes: rows not a multiple of the group, row strides that
// leave rows unaligned, a few rows and many.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/groups.h"
#include "common/panels.h"
#include "common/half.h"
#include "kernels/kernels.h"

namespace tinyai {
namespace kernels {
namespace {

const int32_t kGroupedDTypes[] = {TINYAI_DTYPE_Q8_G32, TINYAI_DTYPE_Q4_G32, TINYAI_DTYPE_Q4NL_G32};

std::vector<const KernelTable*> AllTables() {
  const KernelTable* tables[16];
  size_t n = AvailableTables(tables, 16);
  return std::vector<const KernelTable*>(tables, tables + (n > 16 ? 16 : n));
}

// rows of random groups (random codes, scales of every sign and a range of
// magnitudes), each row_bytes apart; the bytes between rows are 0xff.
std::vector<uint8_t> RandomRows(std::mt19937& rng, int32_t dtype, size_t rows, size_t cols, size_t row_bytes) {
  std::vector<uint8_t> w(rows * row_bytes + 1, 0xff);
  const size_t gb = GroupBytes(dtype);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t g = 0; g < GroupsPerRow(cols); ++g) {
      uint8_t* p = w.data() + r * row_bytes + g * gb;
      const float d = std::uniform_real_distribution<float>(-0.02f, 0.02f)(rng);
      const uint16_t h = FloatToHalf(d);
      std::memcpy(p, &h, 2);
      for (size_t j = 2; j < gb; ++j) {
        p[j] = static_cast<uint8_t>(rng());
        if (dtype == TINYAI_DTYPE_Q8_G32 && p[j] == 0x80) p[j] = 0x81;  // codes stay in [-127, 127]
      }
    }
  }
  return w;
}

std::vector<float> RandomVector(std::mt19937& rng, size_t n) {
  std::vector<float> x(n);
  for (float& v : x) v = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
  return x;
}

// An input vector quantized in one form (src/common/groups.h): n vectors
// of cols values, each GroupsPerRow(cols) groups.
struct Input {
  InputForm form;
  size_t cols, n;
  std::vector<uint8_t> bytes;

  Input(const KernelTable& t, InputForm f, const float* x, size_t cols_, size_t n_ = 1)
      : form(f), cols(cols_), n(n_), bytes(QuantizedInputBytes(f, cols_) * n_ + 1, 0xa5) {
    for (size_t j = 0; j < n; ++j) {
      if (form == kInputInt8) t.quantize_input(x + j * cols, cols, reinterpret_cast<InputGroup*>(vector(j)));
      else t.quantize_input16(x + j * cols, cols, reinterpret_cast<InputGroup16*>(vector(j)));
    }
  }
  uint8_t* vector(size_t j) { return bytes.data() + j * QuantizedInputBytes(form, cols); }
  const void* data() const { return bytes.data(); }
  size_t groups() const { return GroupsPerRow(cols); }
  // Group g of vector j: its scale, code k.
  float d(size_t j, size_t g) const { return form == kInputInt8 ? g8(j, g).d : g16(j, g).d; }
  int32_t q(size_t j, size_t g, size_t k) const { return form == kInputInt8 ? g8(j, g).q[k] : g16(j, g).q[k]; }
  // The value element c of vector j stands for.
  float value(size_t j, size_t c) const { return static_cast<float>(q(j, c / kGroup, c % kGroup)) * d(j, c / kGroup); }

 private:
  const InputGroup& g8(size_t j, size_t g) const {
    return reinterpret_cast<const InputGroup*>(bytes.data() + j * QuantizedInputBytes(form, cols))[g];
  }
  const InputGroup16& g16(size_t j, size_t g) const {
    return reinterpret_cast<const InputGroup16*>(bytes.data() + j * QuantizedInputBytes(form, cols))[g];
  }
};

// The reference quantizes an input as its contract says, in both forms.
TEST(GroupedRef, QuantizeInputFollowsItsDefinition) {
  std::mt19937 rng(7);
  for (InputForm form : {kInputInt8, kInputInt16}) {
    const float top = form == kInputInt8 ? 127.0f : 32767.0f;
    for (size_t cols : {1u, 5u, 31u, 32u, 33u, 64u, 100u, 172u}) {
      std::vector<float> x = RandomVector(rng, cols);
      if (cols > 40) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero group
      const Input in(Ref(), form, x.data(), cols);
      for (size_t g = 0; g < in.groups(); ++g) {
        float amax = 0.0f;
        for (size_t j = 0; j < kGroup && g * kGroup + j < cols; ++j) amax = std::max(amax, std::fabs(x[g * kGroup + j]));
        ASSERT_EQ(in.d(0, g), amax / top);
        int32_t sum = 0;
        for (size_t j = 0; j < kGroup; ++j) {
          const size_t c = g * kGroup + j;
          sum += in.q(0, g, j);
          ASSERT_GE(in.q(0, g, j), -top);
          ASSERT_LE(in.q(0, g, j), top);
          if (c >= cols) {
            ASSERT_EQ(in.q(0, g, j), 0) << "padding of group " << g;
          } else {
            ASSERT_LE(std::fabs(in.value(0, c) - x[c]), in.d(0, g) * 0.5001f) << "cols " << cols << " value " << c;
          }
        }
        if (form == kInputInt8) ASSERT_EQ(reinterpret_cast<const InputGroup*>(in.data())[g].sum, sum);
      }
    }
  }
}

// A group holding an infinity or a NaN gets a NaN scale and zero codes in
// every table, so a product with it is NaN, never a finite wrong value:
// every product of every table (rows, a batch, panels), for the input that
// holds it and no other of the batch.
TEST(GroupedRef, NonFiniteInputsMakeNaNProducts) {
  for (const KernelTable* t : AllTables()) {
    for (float bad : {NAN, INFINITY, -INFINITY}) {
      std::vector<float> x(40, 0.5f);
      x[35] = bad;
      for (InputForm form : {kInputInt8, kInputInt16}) {
        const Input in(*t, form, x.data(), x.size());
        EXPECT_EQ(in.d(0, 0), 0.5f / (form == kInputInt8 ? 127.0f : 32767.0f)) << t->name;
        EXPECT_TRUE(std::isnan(in.d(0, 1))) << t->name << " " << bad;
        for (size_t k = 0; k < kGroup; ++k) EXPECT_EQ(in.q(0, 1, k), 0) << t->name;
      }
      std::mt19937 rng(13);
      for (int32_t dtype : kGroupedDTypes) {
        const WeightKernels* wk = WeightKernelsFor(*t, dtype);
        ASSERT_NE(wk, nullptr) << t->name << " " << dtype;
        const char* name = tinyaiDTypeName(static_cast<TinyAIDType>(dtype));
        // 13 inputs (AVX-512 q8 takes 12 or more in its lanes), the third
        // with the value in its second group (of 2) or its 32nd (of 66).
        for (size_t cols : {40u, 2100u}) {
          const size_t rows = 2 * kPanelRows, n = 13, bad_input = 2, rb = GroupedRowBytes(dtype, cols),
                       groups = GroupsPerRow(cols);
          const std::vector<uint8_t> w = RandomRows(rng, dtype, rows, cols, rb);
          std::vector<float> values(n * cols);
          for (float& v : values) v = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
          values[bad_input * cols + (cols == 40 ? 35 : 1000)] = bad;
          const Input xs(*t, wk->input, values.data(), cols, n);
          auto expect = [&](const float* y, size_t j, const char* what) {
            for (size_t r = 0; r < rows; ++r) {
              if (j == bad_input) {
                EXPECT_TRUE(std::isnan(y[r])) << t->name << " " << name << " " << what << " cols " << cols << " bad "
                                              << bad << " row " << r << ": " << y[r];
              } else {
                EXPECT_TRUE(std::isfinite(y[r])) << t->name << " " << name << " " << what << " cols " << cols
                                                 << " input " << j << " row " << r << ": " << y[r];
              }
            }
          };
          std::vector<float> y(rows), batch(n * rows);
          for (size_t j = 0; j < n; ++j) {
            const void* xj = static_cast<const uint8_t*>(xs.data()) + j * QuantizedInputBytes(wk->input, cols);
            std::fill(y.begin(), y.end(), 0.0f);
            wk->matvec_q(w.data(), rb, xj, y.data(), rows, cols);
            expect(y.data(), j, "matvec_q");
          }
          std::fill(batch.begin(), batch.end(), 0.0f);
          wk->matmul_q(w.data(), rb, xs.data(), groups, batch.data(), rows, rows, cols, n);
          for (size_t j = 0; j < n; ++j) expect(batch.data() + j * rows, j, "matmul_q");
          if (wk->matvec_panels == nullptr) continue;
          std::vector<uint8_t> packed(rows * rb);
          for (size_t p = 0; p < rows / kPanelRows; ++p)
            PackPanel(w.data() + p * PanelBytes(rb), rb, packed.data() + p * PanelBytes(rb));
          for (size_t j = 0; j < n; ++j) {
            const void* xj = static_cast<const uint8_t*>(xs.data()) + j * QuantizedInputBytes(wk->input, cols);
            std::fill(y.begin(), y.end(), 0.0f);
            wk->matvec_panels(packed.data(), rb, xj, y.data(), rows / kPanelRows, cols);
            expect(y.data(), j, "matvec_panels");
          }
          if (wk->matmul_panels == nullptr) continue;
          std::fill(batch.begin(), batch.end(), 0.0f);
          wk->matmul_panels(packed.data(), rb, xs.data(), groups, batch.data(), rows, rows / kPanelRows, cols, n);
          for (size_t j = 0; j < n; ++j) expect(batch.data() + j * rows, j, "matmul_panels");
        }
      }
    }
  }
}

// Reference products are the dequantized weights times the dequantized
// input: for an input that quantizes exactly (x = d*q), to fp32 rounding.
TEST(GroupedRef, ProductsAreTheDequantizedProducts) {
  std::mt19937 rng(11);
  for (int32_t dtype : kGroupedDTypes) {
    const WeightKernels* wk = WeightKernelsFor(Ref(), dtype);
    ASSERT_NE(wk, nullptr) << dtype;
    for (size_t cols : {1u, 17u, 32u, 33u, 172u, 300u}) {
      const size_t rows = 9, rb = GroupedRowBytes(dtype, cols);
      std::vector<uint8_t> w = RandomRows(rng, dtype, rows, cols, rb);
      std::vector<float> x = RandomVector(rng, cols);
      const Input q(Ref(), InputFormOf(dtype), x.data(), cols);
      for (size_t c = 0; c < cols; ++c) x[c] = q.value(0, c);  // exact input
      std::vector<float> y(rows), row(cols);
      ASSERT_EQ(wk->input, InputFormOf(dtype));
      wk->matvec_q(w.data(), rb, q.data(), y.data(), rows, cols);
      for (size_t r = 0; r < rows; ++r) {
        wk->dequantize_row(w.data() + r * rb, row.data(), cols);
        double want = 0.0, scale = 0.0;
        for (size_t c = 0; c < cols; ++c) {
          want += static_cast<double>(row[c]) * x[c];
          scale += std::fabs(static_cast<double>(row[c]) * x[c]);
        }
        ASSERT_NEAR(y[r], want, 1e-5 * scale + 1e-7) << tinyaiDTypeName(static_cast<TinyAIDType>(dtype)) << " cols "
                                                     << cols << " row " << r;
      }
    }
  }
}

// Dequantizing follows the byte layout of src/common/groups.h.
TEST(GroupedRef, DequantizeFollowsTheLayout) {
  uint8_t g[34];
  const uint16_t half = FloatToHalf(0.5f);
  std::memcpy(g, &half, 2);
  for (int j = 0; j < 32; ++j) g[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
  float out[32];
  WeightKernelsFor(Ref(), TINYAI_DTYPE_Q8_G32)->dequantize_row(g, out, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.5f * (j - 16));
  for (int j = 0; j < 16; ++j) g[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  WeightKernelsFor(Ref(), TINYAI_DTYPE_Q4_G32)->dequantize_row(g, out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.5f * (j - 8));        // low nibble: element j
    EXPECT_EQ(out[j + 16], 0.5f * (7 - j));   // high nibble: element j + 16
  }
  WeightKernelsFor(Ref(), TINYAI_DTYPE_Q4NL_G32)->dequantize_row(g, out, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.5f * kQ4NLGrid[j]);
    EXPECT_EQ(out[j + 16], 0.5f * kQ4NLGrid[15 - j]);
  }
}

class GroupedParity : public ::testing::TestWithParam<const KernelTable*> {};

// GGUF's IQ4_NL grid (llama.cpp's kvalues_iq4nl), written out rather than
// read from kQ4NLGrid, the constant under test.
constexpr int32_t kIQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// q4nl_g32's codes stand for GGUF's IQ4_NL values in every table: rows of
// known codes at scale 1 dequantize to them exactly, and each product (rows,
// a batch, panels) of those rows with one-hot inputs gives them times the
// input exactly (the VNNI table multiplies through its own shifted copy of
// the grid). Row r's element c holds code (c + r) % 16, over two groups.
TEST_P(GroupedParity, Q4NLGridIsGGUFs) {
  const KernelTable& t = *GetParam();
  const WeightKernels* wk = WeightKernelsFor(t, TINYAI_DTYPE_Q4NL_G32);
  ASSERT_NE(wk, nullptr);
  const size_t rows = 2 * kPanelRows, cols = 64, rb = GroupedRowBytes(TINYAI_DTYPE_Q4NL_G32, cols),
               groups = GroupsPerRow(cols);
  auto code = [](size_t r, size_t c) { return (c + r) % 16; };
  std::vector<uint8_t> w(rows * rb);
  const uint16_t one = FloatToHalf(1.0f);
  for (size_t r = 0; r < rows; ++r)
    for (size_t g = 0; g < groups; ++g) {
      uint8_t* p = w.data() + r * rb + g * kQ4GroupBytes;
      std::memcpy(p, &one, 2);
      for (size_t j = 0; j < 16; ++j)
        p[2 + j] = static_cast<uint8_t>(code(r, g * kGroup + j) | (code(r, g * kGroup + j + 16) << 4));
    }
  std::vector<float> row(cols);
  for (size_t r = 0; r < rows; ++r) {
    wk->dequantize_row(w.data() + r * rb, row.data(), cols);
    for (size_t c = 0; c < cols; ++c)
      ASSERT_EQ(row[c], static_cast<float>(kIQ4NL[code(r, c)])) << t.name << " dequantize row " << r << " value " << c;
  }
  // Input j is top at column j, 0 elsewhere: its group's scale is 1 and its
  // code top, so output r of input j is kIQ4NL[code(r, j)] * top exactly.
  const float top = wk->input == kInputInt8 ? 127.0f : 32767.0f;
  const size_t n = cols;
  std::vector<float> values(n * cols, 0.0f);
  for (size_t j = 0; j < n; ++j) values[j * cols + j] = top;
  const Input xs(t, wk->input, values.data(), cols, n);
  auto want = [&](size_t r, size_t j) { return static_cast<float>(kIQ4NL[code(r, j)]) * top; };
  std::vector<float> y(rows), batch(n * rows, NAN);
  for (size_t j = 0; j < n; ++j) {
    const void* xj = static_cast<const uint8_t*>(xs.data()) + j * QuantizedInputBytes(wk->input, cols);
    std::fill(y.begin(), y.end(), NAN);
    wk->matvec_q(w.data(), rb, xj, y.data(), rows, cols);
    for (size_t r = 0; r < rows; ++r) ASSERT_EQ(y[r], want(r, j)) << t.name << " matvec_q input " << j << " row " << r;
  }
  wk->matmul_q(w.data(), rb, xs.data(), groups, batch.data(), rows, rows, cols, n);
  for (size_t j = 0; j < n; ++j)
    for (size_t r = 0; r < rows; ++r)
      ASSERT_EQ(batch[j * rows + r], want(r, j)) << t.name << " matmul_q input " << j << " row " << r;
  if (wk->matvec_panels == nullptr) return;
  std::vector<uint8_t> packed(rows * rb);
  for (size_t p = 0; p < rows / kPanelRows; ++p) PackPanel(w.data() + p * PanelBytes(rb), rb, packed.data() + p * PanelBytes(rb));
  for (size_t j = 0; j < n; ++j) {
    const void* xj = static_cast<const uint8_t*>(xs.data()) + j * QuantizedInputBytes(wk->input, cols);
    std::fill(y.begin(), y.end(), NAN);
    wk->matvec_panels(packed.data(), rb, xj, y.data(), rows / kPanelRows, cols);
    for (size_t r = 0; r < rows; ++r) ASSERT_EQ(y[r], want(r, j)) << t.name << " matvec_panels input " << j << " row " << r;
  }
  if (wk->matmul_panels == nullptr) return;
  std::fill(batch.begin(), batch.end(), NAN);
  wk->matmul_panels(packed.data(), rb, xs.data(), groups, batch.data(), rows, rows / kPanelRows, cols, n);
  for (size_t j = 0; j < n; ++j)
    for (size_t r = 0; r < rows; ++r)
      ASSERT_EQ(batch[j * rows + r], want(r, j)) << t.name << " matmul_panels input " << j << " row " << r;
}

std::string TableName(const ::testing::TestParamInfo<const KernelTable*>& info) {
  std::string s;
  for (const char* p = info.param->name; *p; ++p) s += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
  return s;
}

TEST_P(GroupedParity, QuantizeInputIsTheReferences) {
  const KernelTable& t = *GetParam();
  ASSERT_NE(t.quantize_input, nullptr);
  ASSERT_NE(t.quantize_input16, nullptr);
  std::mt19937 rng(3);
  for (InputForm form : {kInputInt8, kInputInt16}) {
    for (size_t cols : {0u, 1u, 7u, 31u, 32u, 33u, 95u, 172u, 768u, 1100u}) {
      std::vector<float> x = RandomVector(rng, cols);
      for (size_t c = 0; c < cols; c += 13) x[c] = std::ldexp(x[c], static_cast<int>(rng() % 40) - 20);
      const Input got(t, form, x.data(), cols), want(Ref(), form, x.data(), cols);
      ASSERT_EQ(got.bytes, want.bytes) << t.name << " form " << form << " cols " << cols;
    }
  }
}

// One dtype and shape: matvec_q, matmul_q over n inputs and dequantize_row
// of this table against the reference.
void CheckGrouped(const KernelTable& t, int32_t dtype, size_t rows, size_t cols, size_t pad, uint32_t seed,
                  size_t n = 5) {
  const WeightKernels* wk = WeightKernelsFor(t, dtype);
  const WeightKernels* ref = WeightKernelsFor(Ref(), dtype);
  ASSERT_NE(wk, nullptr) << t.name << " " << dtype;
  ASSERT_TRUE(wk->quantized_input());
  std::mt19937 rng(seed);
  const size_t rb = GroupedRowBytes(dtype, cols) + pad, groups = GroupsPerRow(cols);
  std::vector<uint8_t> w = RandomRows(rng, dtype, rows, cols, rb);
  std::vector<float> values(n * cols);
  for (size_t j = 0; j < n; ++j) {
    std::vector<float> v = RandomVector(rng, cols);
    std::copy(v.begin(), v.end(), values.begin() + j * cols);
  }
  const Input x(Ref(), wk->input, values.data(), cols, n);
  // Each output's scale: the sum of its groups' |integer dot * scales|.
  auto scale = [&](size_t r, size_t j) {
    std::vector<float> row(cols);
    ref->dequantize_row(w.data() + r * rb, row.data(), cols);
    double s = 0.0;
    for (size_t c = 0; c < cols; ++c) s += std::fabs(row[c] * x.value(j, c));
    return s;
  };
  std::vector<float> want(n * rows), got(n * rows, NAN);
  ref->matmul_q(w.data(), rb, x.data(), groups, want.data(), rows, rows, cols, n);
  wk->matvec_q(w.data(), rb, x.data(), got.data(), rows, cols);
  const char* name = tinyaiDTypeName(static_cast<TinyAIDType>(dtype));
  for (size_t r = 0; r < rows; ++r) {
    ASSERT_NEAR(got[r], want[r], 2e-6 * scale(r, 0) + 1e-12) << t.name << " " << name << " matvec " << rows << "x" << cols
                                                                << " pad " << pad << " row " << r;
  }
  std::fill(got.begin(), got.end(), NAN);
  wk->matmul_q(w.data(), rb, x.data(), groups, got.data(), rows, rows, cols, n);
  for (size_t j = 0; j < n; ++j)
    for (size_t r = 0; r < rows; ++r)
      ASSERT_NEAR(got[j * rows + r], want[j * rows + r], 2e-6 * scale(r, j) + 1e-12)
          << t.name << " " << name << " matmul " << rows << "x" << cols << " input " << j << " row " << r;
  std::vector<float> a(cols), b(cols);
  for (size_t r = 0; r < rows; r += 5) {
    wk->dequantize_row(w.data() + r * rb, a.data(), cols);
    ref->dequantize_row(w.data() + r * rb, b.data(), cols);
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), cols * sizeof(float))) << t.name << " " << name << " row " << r;
  }
}

TEST_P(GroupedParity, ProductsMatchTheReference) {
  uint32_t seed = 100;
  for (int32_t dtype : kGroupedDTypes)
    for (size_t rows : {1u, 3u, 4u, 7u, 8u, 9u, 17u, 33u})
      for (size_t cols : {1u, 17u, 31u, 32u, 33u, 64u, 100u, 172u, 768u, 1100u})
        for (size_t pad : {0u, 3u})
          ASSERT_NO_FATAL_FAILURE(CheckGrouped(*GetParam(), dtype, rows, cols, pad, seed++));
}

// Past kMatvecStreamBytes of rows a kernel may read them another way.
TEST_P(GroupedParity, ProductsMatchTheReferenceLarge) {
  uint32_t seed = 500;
  for (int32_t dtype : kGroupedDTypes)
    for (size_t cols : {172u, 2048u}) {
      const size_t at = kMatvecStreamBytes / GroupedRowBytes(dtype, cols) + 1;
      for (size_t rows : {at - 1, at, at + 9})
        ASSERT_NO_FATAL_FAILURE(CheckGrouped(*GetParam(), dtype, rows, cols, 0, seed++));
    }
}

// Many inputs against long rows: a batch product may take the inputs and
// the groups in chunks (AVX2: 32 inputs, 64 groups a chunk; AVX-512 q8: 16
// inputs in the lanes, 12 to 15 padded, 32 groups a chunk, tiles of 8 rows)
// and tiles of four inputs and two rows, with tails past each.
TEST_P(GroupedParity, ProductsMatchTheReferenceManyInputs) {
  uint32_t seed = 600;
  for (int32_t dtype : kGroupedDTypes)
    for (size_t n : {4u, 14u, 33u, 38u})
      for (size_t rows : {2u, 5u, 19u})
        ASSERT_NO_FATAL_FAILURE(CheckGrouped(*GetParam(), dtype, rows, 2100, 0, seed++, n));
}

// The indices where two float arrays differ in their bits, for a message.
std::string Differing(const float* a, const float* b, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(a + i, b + i, sizeof(float)) != 0) out += std::to_string(i) + " ";
  }
  return out;
}

// A batch's products equal each input's alone bit for bit (a prompt's
// logits are a token's), in the tables that promise it: the reference, NEON
// (4, 2, then 1 input a row, each input's sums those of a row alone) and
// AVX-512 (whose q8 product takes 4 inputs at a time below 12 inputs, or,
// with AMX, 16 rows by up to 16 inputs, 32 inputs a pass and 32 groups at a
// time: shapes past each). Without AMX, AVX-512's q8 product puts 12 inputs
// or more in the lanes and sums in another order (Matmul8Lanes): there only
// a batch of fewer is checked against each input alone. A slice of the
// rows (a thread's share) gives its rows' values bit for bit: alone in
// every table, in a batch in these.
TEST_P(GroupedParity, BatchEqualsEachInputAlone) {
  const KernelTable& t = *GetParam();
  const std::string table = t.name;
  const bool promises = table.rfind("avx512", 0) == 0 || table.rfind("neon", 0) == 0 || table == "ref";
  uint32_t seed = 700;
  for (int32_t dtype : kGroupedDTypes)
    for (size_t cols : {17u, 64u, 100u, 768u, 1100u})
      for (size_t shape : {0u, 1u, 2u}) {
        std::mt19937 rng(seed++);
        const WeightKernels* wk = WeightKernelsFor(t, dtype);
        const size_t rows = shape == 0 ? 13 : shape == 1 ? 37 : 19, n = shape == 0 ? 6 : shape == 1 ? 21 : 40,
                     rb = GroupedRowBytes(dtype, cols), groups = GroupsPerRow(cols);
        const bool lanes = dtype == TINYAI_DTYPE_Q8_G32 && (table == "avx512" || table == "avx512vnni") && n >= 12;
        std::vector<uint8_t> w = RandomRows(rng, dtype, rows, cols, rb);
        std::vector<float> values(n * cols);
        for (float& v : values) v = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
        const Input x(t, wk->input, values.data(), cols, n);
        std::vector<float> batch(n * rows), one(rows), batch_part(n * (rows - 5));
        wk->matmul_q(w.data(), rb, x.data(), groups, batch.data(), rows, rows, cols, n);
        wk->matmul_q(w.data() + 5 * rb, rb, x.data(), groups, batch_part.data(), rows - 5, rows - 5, cols, n);
        for (size_t j = 0; j < n; ++j) {
          if (promises) {
            ASSERT_EQ(0, std::memcmp(batch.data() + j * rows + 5, batch_part.data() + j * (rows - 5), (rows - 5) * sizeof(float)))
                << t.name << " " << tinyaiDTypeName(static_cast<TinyAIDType>(dtype)) << " cols " << cols << " input " << j
                << " batch slice, rows " << Differing(batch.data() + j * rows + 5, batch_part.data() + j * (rows - 5), rows - 5);
          }
          const void* xj = static_cast<const uint8_t*>(x.data()) + j * QuantizedInputBytes(wk->input, cols);
          wk->matvec_q(w.data(), rb, xj, one.data(), rows, cols);
          // A slice of the rows (a thread's share) gives its rows' values.
          std::vector<float> part(rows - 5);
          wk->matvec_q(w.data() + 5 * rb, rb, xj, part.data(), rows - 5, cols);
          ASSERT_EQ(0, std::memcmp(one.data() + 5, part.data(), part.size() * sizeof(float)))
              << t.name << " " << tinyaiDTypeName(static_cast<TinyAIDType>(dtype)) << " cols " << cols << " slice";
          if (!promises || lanes) continue;
          ASSERT_EQ(0, std::memcmp(one.data(), batch.data() + j * rows, rows * sizeof(float)))
              << t.name << " " << tinyaiDTypeName(static_cast<TinyAIDType>(dtype)) << " cols " << cols << " input " << j
              << " rows " << Differing(one.data(), batch.data() + j * rows, rows);
        }
      }
}

// Rows packed into panels and unpacked give the rows back; a table's panel
// product (where it has one) equals the reference's row product on the
// unpacked rows within fp32 rounding, for every input of a batch.
TEST_P(GroupedParity, PanelsMatchTheReference) {
  const KernelTable& t = *GetParam();
  uint32_t seed = 900;
  for (int32_t dtype : {TINYAI_DTYPE_Q4_G32, TINYAI_DTYPE_Q4NL_G32}) {
    const WeightKernels* wk = WeightKernelsFor(t, dtype);
    const WeightKernels* ref = WeightKernelsFor(Ref(), dtype);
    ASSERT_NE(wk, nullptr);
    if (wk->matvec_panels == nullptr) continue;
    for (size_t panels : {1u, 2u, 5u})
      for (size_t cols : {1u, 17u, 31u, 32u, 33u, 64u, 100u, 172u, 768u, 2048u}) {
        std::mt19937 rng(seed++);
        // 11 inputs: a batch product's tiles of 8, 2 and 1 inputs.
        const size_t rows = panels * kPanelRows, rb = GroupedRowBytes(dtype, cols), groups = GroupsPerRow(cols), n = 11;
        std::vector<uint8_t> w = RandomRows(rng, dtype, rows, cols, rb), packed(rows * rb), back(rows * rb);
        for (size_t p = 0; p < panels; ++p) PackPanel(w.data() + p * PanelBytes(rb), rb, packed.data() + p * PanelBytes(rb));
        for (size_t p = 0; p < panels; ++p) UnpackPanel(packed.data() + p * PanelBytes(rb), rb, back.data() + p * PanelBytes(rb));
        ASSERT_EQ(0, std::memcmp(back.data(), w.data(), rows * rb)) << "pack / unpack " << cols;
        std::vector<uint8_t> one(rb);
        UnpackPanelRow(packed.data() + PanelBytes(rb) * (panels - 1), rb, 5, one.data());
        ASSERT_EQ(0, std::memcmp(one.data(), w.data() + (rows - 3) * rb, rb)) << "row 5 of the last panel, " << cols;
        std::vector<float> values(n * cols);
        for (float& v : values) v = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
        const Input x(Ref(), wk->input, values.data(), cols, n);
        // The batch's outputs ldy = rows + 3 apart.
        const size_t ldy = rows + 3;
        std::vector<float> want(rows), got(rows, NAN), batch(n * ldy, NAN), row(cols);
        if (wk->matmul_panels != nullptr) wk->matmul_panels(packed.data(), rb, x.data(), groups, batch.data(), ldy, panels, cols, n);
        for (size_t j = 0; j < n; ++j) {
          const void* xj = static_cast<const InputGroup*>(x.data()) + j * groups;
          ref->matvec_q(w.data(), rb, xj, want.data(), rows, cols);
          wk->matvec_panels(packed.data(), rb, xj, got.data(), panels, cols);
          for (size_t r = 0; r < rows; ++r) {
            ref->dequantize_row(w.data() + r * rb, row.data(), cols);
            double scale = 0.0;
            for (size_t c = 0; c < cols; ++c) scale += std::fabs(row[c] * x.value(j, c));
            ASSERT_NEAR(got[r], want[r], 2e-6 * scale + 1e-12)
                << t.name << " " << tinyaiDTypeName(static_cast<TinyAIDType>(dtype)) << " " << panels << " panels x " << cols
                << " input " << j << " row " << r;
            if (wk->matmul_panels == nullptr) continue;
            ASSERT_NEAR(batch[j * ldy + r], want[r], 2e-6 * scale + 1e-12)
                << t.name << " " << tinyaiDTypeName(static_cast<TinyAIDType>(dtype)) << " matmul_panels " << panels
                << " panels x " << cols << " input " << j << " row " << r;
            // An input's arithmetic does not depend on how many share the panel.
            ASSERT_EQ(0, std::memcmp(&batch[j * ldy + r], &got[r], sizeof(float)))
                << t.name << " " << tinyaiDTypeName(static_cast<TinyAIDType>(dtype)) << " matmul_panels " << panels
                << " panels x " << cols << " input " << j << " row " << r << ": " << batch[j * ldy + r] << " against matvec_panels' "
                << got[r];
          }
        }
      }
  }
}

// The largest integer products each form can meet: every weight at the
// end of its range whose product with the input is largest (q4: code 15;
// q4nl: code 0, the grid's -127; q8: -127) against inputs at -127 or +127
// in every lane, so any partial sum a kernel keeps in int16 is at its
// largest. Rows and panels give the exact sum: 7, 127 or 127 x 127 / 127
// per column, times the scales.
TEST_P(GroupedParity, ExtremeCodesDoNotOverflow) {
  const KernelTable& t = *GetParam();
  for (int32_t dtype : {TINYAI_DTYPE_Q8_G32, TINYAI_DTYPE_Q4_G32, TINYAI_DTYPE_Q4NL_G32}) {
    const WeightKernels* wk = WeightKernelsFor(t, dtype);
    ASSERT_NE(wk, nullptr);
    for (size_t cols : {32u, 256u, 2048u}) {
      const size_t rows = 2 * kPanelRows, rb = GroupedRowBytes(dtype, cols), gb = GroupBytes(dtype);
      const uint8_t code = dtype == TINYAI_DTYPE_Q4_G32 ? 0xff : dtype == TINYAI_DTYPE_Q4NL_G32 ? 0x00 : 0x81;
      const float weight = dtype == TINYAI_DTYPE_Q4_G32 ? 7.0f : -127.0f;  // the value one code stands for, d = 1
      const float input = dtype == TINYAI_DTYPE_Q4_G32 ? 1.0f : -1.0f;   // codes +-127, d = 1 / 127
      std::vector<uint8_t> w(rows * rb);
      const uint16_t one = FloatToHalf(1.0f);
      for (size_t g = 0; g < rows * rb / gb; ++g) {
        std::memcpy(w.data() + g * gb, &one, 2);
        std::memset(w.data() + g * gb + 2, code, gb - 2);
      }
      const std::vector<float> x(cols, input);
      const Input in(t, wk->input, x.data(), cols);
      const double want = static_cast<double>(weight) * input * static_cast<double>(cols);
      std::vector<float> y(rows, NAN);
      wk->matvec_q(w.data(), rb, in.data(), y.data(), rows, cols);
      for (size_t r = 0; r < rows; ++r) {
        ASSERT_NEAR(y[r], want, 1e-5 * std::fabs(want))
            << t.name << " " << tinyaiDTypeName(static_cast<TinyAIDType>(dtype)) << " rows, cols " << cols << " row " << r;
      }
      // A batch of 9 inputs (tiles of 4 or 8 and their tails), all alike,
      // then 16 (AVX-512's q8 lanes: the int16 codes split into bytes).
      const size_t n = 9;
      const std::vector<float> xs(16 * cols, input);
      const Input batch_in(t, wk->input, xs.data(), cols, 16);
      std::vector<float> batch(16 * rows, NAN);
      for (size_t nb : {n, size_t{16}}) {
        std::fill(batch.begin(), batch.end(), NAN);
        wk->matmul_q(w.data(), rb, batch_in.data(), GroupsPerRow(cols), batch.data(), rows, rows, cols, nb);
        for (size_t i = 0; i < nb * rows; ++i) {
          ASSERT_NEAR(batch[i], want, 1e-5 * std::fabs(want)) << t.name << " " << tinyaiDTypeName(static_cast<TinyAIDType>(dtype))
                                                              << " matmul of " << nb << ", cols " << cols << " output " << i;
        }
      }
      if (wk->matvec_panels == nullptr) continue;
      std::vector<uint8_t> packed(rows * rb);
      for (size_t p = 0; p < rows / kPanelRows; ++p) PackPanel(w.data() + p * PanelBytes(rb), rb, packed.data() + p * PanelBytes(rb));
      std::fill(y.begin(), y.end(), NAN);
      wk->matvec_panels(packed.data(), rb, in.data(), y.data(), rows / kPanelRows, cols);
      for (size_t r = 0; r < rows; ++r) {
        ASSERT_NEAR(y[r], want, 1e-5 * std::fabs(want))
            << t.name << " " << tinyaiDTypeName(static_cast<TinyAIDType>(dtype)) << " panels, cols " << cols << " row " << r;
      }
      if (wk->matmul_panels == nullptr) continue;
      std::fill(batch.begin(), batch.end(), NAN);
      wk->matmul_panels(packed.data(), rb, batch_in.data(), GroupsPerRow(cols), batch.data(), rows, rows / kPanelRows, cols, n);
      for (size_t i = 0; i < n * rows; ++i) {
        ASSERT_NEAR(batch[i], want, 1e-5 * std::fabs(want))
            << t.name << " " << tinyaiDTypeName(static_cast<TinyAIDType>(dtype)) << " matmul_panels, cols " << cols
            << " output " << i;
      }
    }
  }
}

// AVX-512 VNNI's q8 product in the lanes splits each int16 input code into
// its high and low bytes for vpdpbusd; AVX-512's widens the weights to int16
// for vpmaddwd. The integers are the same, so are the outputs, bit for bit:
// random codes, the extremes (+-127 weights against +-32767 and the codes
// around a byte's edges), 12 to 16 inputs and past (two blocks), rows in
// tiles of 8 and the tail, groups past a chunk of 32.
TEST(GroupedAvx512, VnniQ8LanesEqualTheInt16LanesBitForBit) {
  const KernelTable *plain = nullptr, *vnni = nullptr;
  for (const KernelTable* t : AllTables()) {
    if (std::string(t->name) == "avx512") plain = t;
    if (std::string(t->name) == "avx512vnni") vnni = t;
  }
  if (plain == nullptr || vnni == nullptr) GTEST_SKIP() << "needs a CPU with AVX-512 VNNI";
  const WeightKernels* a = WeightKernelsFor(*plain, TINYAI_DTYPE_Q8_G32);
  const WeightKernels* b = WeightKernelsFor(*vnni, TINYAI_DTYPE_Q8_G32);
  std::mt19937 rng(4242);
  for (size_t cols : {32u, 100u, 1056u, 2100u}) {
    for (size_t rows : {1u, 8u, 13u}) {
      const size_t rb = GroupedRowBytes(TINYAI_DTYPE_Q8_G32, cols);
      std::vector<uint8_t> w = RandomRows(rng, TINYAI_DTYPE_Q8_G32, rows, cols, rb);
      for (size_t n : {12u, 16u, 29u}) {
        std::vector<float> x = RandomVector(rng, n * cols);
        // Codes at the byte edges: +-32767 (the group's largest), 255, 256, -256, -1, 128.
        const float edges[] = {2.0f, -2.0f, 2.0f * 255 / 32767, 2.0f * 256 / 32767, -2.0f * 256 / 32767,
                               -2.0f / 32767, 2.0f * 128 / 32767};
        for (size_t i = 0; i < x.size(); i += 3) x[i] = (i / 3) % 2 == 0 ? edges[(i / 6) % 7] : x[i];
        for (size_t i = 0; i < x.size(); i += 32) x[i] = (i / 32) % 2 == 0 ? 2.0f : -2.0f;  // each group's scale 2 / 32767
        if (rows == 13) {  // one row of extreme codes
          for (size_t g = 0; g < GroupsPerRow(cols); ++g) std::memset(w.data() + 5 * rb + g * kQ8GroupBytes + 2, g % 2 ? 0x81 : 0x7f, 32);
        }
        const Input in(*plain, kInputInt16, x.data(), cols, n);
        std::vector<float> ya(n * rows, NAN), yb(n * rows, NAN);
        a->matmul_q(w.data(), rb, in.data(), GroupsPerRow(cols), ya.data(), rows, rows, cols, n);
        b->matmul_q(w.data(), rb, in.data(), GroupsPerRow(cols), yb.data(), rows, rows, cols, n);
        ASSERT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)), 0)
            << "cols " << cols << " rows " << rows << " n " << n << ": " << Differing(ya.data(), yb.data(), ya.size());
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tables, GroupedParity, ::testing::ValuesIn(AllTables()), TableName);

}  // namespace
}  // namespace kernels
}  // namespace tinyai
