// The GGUF block dtypes beyond the groups of 32 TinyAI started with: the
// K-quants (q4_k, q5_k, q6_k: blocks of 256) and llama.cpp's 5-bit
// fallbacks for rows that are not (q5_g32 = Q5_0, q5m_g32 = Q5_1).
//
// The reference's dequantization against a decoder written here from GGUF's
// definition, in its own traversal (a block at a time, as ggml's
// dequantize_row_* walk it), bit for bit; every table's products against
// the dequantized weights times the quantized input, and matmul against
// matvec, on rows of several blocks and odd row strides.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/groups.h"
#include "common/half.h"
#include "kernels/kernels.h"

namespace tinyai {
namespace kernels {
namespace {

const int32_t kNewDTypes[] = {TINYAI_DTYPE_Q4_K, TINYAI_DTYPE_Q5_K, TINYAI_DTYPE_Q6_K, TINYAI_DTYPE_Q5_G32,
                              TINYAI_DTYPE_Q5M_G32};

const char* Name(int32_t dtype) { return tinyaiDTypeName(static_cast<TinyAIDType>(dtype)); }

float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return HalfToFloat(h);
}

void PutHalf(uint8_t* p, float v) {
  const uint16_t h = FloatToHalf(v);
  std::memcpy(p, &h, 2);
}

// ---- GGUF's dequantizers, one block at a time ----

// 6-bit scale and min j of a Q4_K/Q5_K block's 12 bytes.
void ScaleMin(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

void GgufQ4K(const uint8_t* b, float* y) {
  const float d = Half(b), min = Half(b + 2);
  const uint8_t* q = b + 16;
  int is = 0;
  for (int j = 0; j < 256; j += 64) {
    uint8_t sc, m;
    ScaleMin(is + 0, b + 4, &sc, &m);
    const float d1 = d * sc, m1 = min * m;
    ScaleMin(is + 1, b + 4, &sc, &m);
    const float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    q += 32;
    is += 2;
  }
}

void GgufQ5K(const uint8_t* b, float* y) {
  const float d = Half(b), min = Half(b + 2);
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  int is = 0;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < 256; j += 64) {
    uint8_t sc, m;
    ScaleMin(is + 0, b + 4, &sc, &m);
    const float d1 = d * sc, m1 = min * m;
    ScaleMin(is + 1, b + 4, &sc, &m);
    const float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    ql += 32;
    is += 2;
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
  }
}

void GgufQ6K(const uint8_t* b, float* y) {
  const float d = Half(b + 208);
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = static_cast<int8_t>((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = static_cast<int8_t>((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l + 0] = d * sc[is + 0] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

void GgufQ5(const uint8_t* b, float* y, bool with_min) {
  const float d = Half(b), m = with_min ? Half(b + 2) : 0.0f;
  const uint8_t* p = b + (with_min ? 4 : 2);
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  const uint8_t* qs = p + 4;
  for (int j = 0; j < 16; ++j) {
    const uint8_t xh0 = static_cast<uint8_t>(((qh >> (j + 0)) << 4) & 0x10);
    const uint8_t xh1 = static_cast<uint8_t>(((qh >> (j + 12))) & 0x10);
    const int x0 = (qs[j] & 0x0F) | xh0, x1 = (qs[j] >> 4) | xh1;
    if (with_min) {
      y[j] = x0 * d + m;
      y[j + 16] = x1 * d + m;
    } else {
      y[j] = (x0 - 16) * d;
      y[j + 16] = (x1 - 16) * d;
    }
  }
}

void GgufBlock(int32_t dtype, const uint8_t* b, float* y) {
  switch (dtype) {
    case TINYAI_DTYPE_Q4_K: return GgufQ4K(b, y);
    case TINYAI_DTYPE_Q5_K: return GgufQ5K(b, y);
    case TINYAI_DTYPE_Q6_K: return GgufQ6K(b, y);
    case TINYAI_DTYPE_Q5_G32: return GgufQ5(b, y, false);
    default: return GgufQ5(b, y, true);
  }
}

// rows of random blocks (random bytes, then sensible f16 factors of either
// sign), row_bytes apart, 0xff between rows.
std::vector<uint8_t> RandomRows(std::mt19937& rng, int32_t dtype, size_t rows, size_t cols, size_t row_bytes) {
  std::vector<uint8_t> w(rows * row_bytes + 1, 0xff);
  const size_t bb = GroupBytes(dtype);
  std::uniform_real_distribution<float> factor(-0.002f, 0.002f);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t b = 0; b < BlocksPerRow(dtype, cols); ++b) {
      uint8_t* p = w.data() + r * row_bytes + b * bb;
      for (size_t j = 0; j < bb; ++j) p[j] = static_cast<uint8_t>(rng());
      switch (dtype) {
        case TINYAI_DTYPE_Q6_K: PutHalf(p + 208, std::fabs(factor(rng))); break;
        case TINYAI_DTYPE_Q4_K:
        case TINYAI_DTYPE_Q5_K:
        case TINYAI_DTYPE_Q5M_G32:
          PutHalf(p, factor(rng));
          PutHalf(p + 2, factor(rng));
          break;
        default: PutHalf(p, factor(rng) * 10.0f);
      }
    }
  }
  return w;
}

std::vector<const KernelTable*> AllTables() {
  const KernelTable* tables[16];
  const size_t n = AvailableTables(tables, 16);
  std::vector<const KernelTable*> all(tables, tables + (n > 16 ? 16 : n));
  all.push_back(&Ref());
  return all;
}

std::vector<size_t> ColsFor(int32_t dtype) {
  if (IsSuperBlockDType(dtype)) return {256, 512, 2048, 2816, 16640};  // 16640: past a matvec's chunk of 64 blocks
  return {32, 40, 172, 576, 896};
}

TEST(KQuant, LayoutConstants) {
  EXPECT_EQ(GroupBytes(TINYAI_DTYPE_Q4_K), 144u);
  EXPECT_EQ(GroupBytes(TINYAI_DTYPE_Q5_K), 176u);
  EXPECT_EQ(GroupBytes(TINYAI_DTYPE_Q6_K), 210u);
  EXPECT_EQ(GroupBytes(TINYAI_DTYPE_Q5_G32), 22u);
  EXPECT_EQ(GroupBytes(TINYAI_DTYPE_Q5M_G32), 24u);
  EXPECT_EQ(GroupedRowBytes(TINYAI_DTYPE_Q6_K, 2048), 8u * 210u);
  EXPECT_EQ(GroupedRowBytes(TINYAI_DTYPE_Q5_G32, 40), 44u);
  EXPECT_TRUE(RowFits(TINYAI_DTYPE_Q4_K, 512));
  EXPECT_FALSE(RowFits(TINYAI_DTYPE_Q4_K, 576));
  EXPECT_TRUE(RowFits(TINYAI_DTYPE_Q5_G32, 576));
  for (int32_t dtype : kNewDTypes) EXPECT_EQ(InputFormOf(dtype), kInputInt8) << Name(dtype);
}

// Every table's dequantization is GGUF's, bit for bit, whole rows and a
// prefix of one.
TEST(KQuant, DequantizeIsGGUFs) {
  std::mt19937 rng(47);
  for (const KernelTable* t : AllTables()) {
    for (int32_t dtype : kNewDTypes) {
      const WeightKernels* wk = WeightKernelsFor(*t, dtype);
      ASSERT_NE(wk, nullptr) << t->name << " " << Name(dtype);
      for (size_t cols : ColsFor(dtype)) {
        const size_t rows = 3, rb = GroupedRowBytes(dtype, cols);
        const std::vector<uint8_t> w = RandomRows(rng, dtype, rows, cols, rb);
        std::vector<float> want(BlocksPerRow(dtype, cols) * BlockValues(dtype)), got(cols + 1);
        for (size_t r = 0; r < rows; ++r) {
          for (size_t b = 0; b < BlocksPerRow(dtype, cols); ++b)
            GgufBlock(dtype, w.data() + r * rb + b * GroupBytes(dtype), want.data() + b * BlockValues(dtype));
          got[cols] = 12345.0f;
          wk->dequantize_row(w.data() + r * rb, got.data(), cols);
          ASSERT_EQ(got[cols], 12345.0f) << "wrote past cols";
          for (size_t c = 0; c < cols; ++c) {
            ASSERT_EQ(std::memcmp(&got[c], &want[c], 4), 0)
                << t->name << " " << Name(dtype) << " cols " << cols << " row " << r << " value " << c << ": "
                << got[c] << " against " << want[c];
          }
          const size_t prefix = cols - 5;
          std::vector<float> part(prefix + 1, 777.0f);
          wk->dequantize_row(w.data() + r * rb, part.data(), prefix);
          ASSERT_EQ(part[prefix], 777.0f);
          ASSERT_EQ(std::memcmp(part.data(), want.data(), prefix * 4), 0) << Name(dtype) << " prefix";
        }
      }
    }
  }
}

// matvec_q is the dequantized weights times the quantized input (computed
// here in double), and matmul_q each input's matvec_q within rounding.
TEST(KQuant, ProductsAreTheDequantizedProducts) {
  std::mt19937 rng(4747);
  for (const KernelTable* t : AllTables()) {
    for (int32_t dtype : kNewDTypes) {
      const WeightKernels* wk = WeightKernelsFor(*t, dtype);
      ASSERT_NE(wk, nullptr);
      for (size_t cols : ColsFor(dtype)) {
        for (size_t rows : {1u, 7u, 33u}) {
          const size_t rb = GroupedRowBytes(dtype, cols) + (rows == 7 ? 3 : 0);  // odd stride, unaligned rows
          const std::vector<uint8_t> w = RandomRows(rng, dtype, rows, cols, rb);
          const size_t n = 5, groups = GroupsPerRow(cols);
          std::vector<float> x(n * cols);
          for (float& v : x) v = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
          std::vector<InputGroup> q(n * groups);
          for (size_t j = 0; j < n; ++j) t->quantize_input(x.data() + j * cols, cols, q.data() + j * groups);
          std::vector<float> y(rows), batch(n * rows), row(cols);
          // Each product's sum of |terms|: the rounding its order of
          // summation may move it by (a sum that cancels to near 0 is no
          // more exact than its terms).
          std::vector<double> scales(n * rows);
          for (size_t j = 0; j < n; ++j) {
            wk->matvec_q(w.data(), rb, q.data() + j * groups, y.data(), rows, cols);
            for (size_t r = 0; r < rows; ++r) {
              Ref().weights[dtype].dequantize_row(w.data() + r * rb, row.data(), cols);
              double want = 0.0, scale = 0.0;
              for (size_t c = 0; c < cols; ++c) {
                const InputGroup& g = q[j * groups + c / kGroup];
                const double xv = static_cast<double>(g.d) * g.q[c % kGroup];
                want += static_cast<double>(row[c]) * xv;
                scale += std::fabs(static_cast<double>(row[c]) * xv);
              }
              scales[j * rows + r] = scale;
              ASSERT_NEAR(y[r], want, 2e-6 * scale + 1e-7)
                  << t->name << " " << Name(dtype) << " cols " << cols << " rows " << rows << " row " << r;
            }
          }
          wk->matmul_q(w.data(), rb, q.data(), groups, batch.data(), rows, rows, cols, n);
          for (size_t j = 0; j < n; ++j) {
            wk->matvec_q(w.data(), rb, q.data() + j * groups, y.data(), rows, cols);
            for (size_t r = 0; r < rows; ++r) {
              ASSERT_NEAR(batch[j * rows + r], y[r], 1e-5 * std::fabs(y[r]) + 2e-6 * scales[j * rows + r] + 1e-8)
                  << t->name << " " << Name(dtype) << " matmul input " << j << " row " << r;
            }
          }
        }
      }
    }
  }
}

// The SIMD tables that have the 4-bit products of their own (AVX2, AVX-512,
// NEON) have these too: not the reference's loops.
TEST(KQuant, SimdTablesHaveTheirOwnProducts) {
  for (const KernelTable* t : AllTables()) {
    const std::string name = t->name;
    if (WeightKernelsFor(*t, TINYAI_DTYPE_Q4_G32)->matvec_q == Ref().weights[TINYAI_DTYPE_Q4_G32].matvec_q) continue;
    for (int32_t dtype : kNewDTypes) {
      EXPECT_NE(WeightKernelsFor(*t, dtype)->matvec_q, Ref().weights[dtype].matvec_q) << name << " " << Name(dtype);
    }
  }
}

// The AVX-512 tables' rows in pairs of groups: a prompt's products (four
// rows side by side in row panels) equal a token's (one row after the other)
// bit for bit, with panels of many rows and rows past the 128 pairs the
// input is prepared in at once.
TEST(KQuant, Avx512PairRowsMatmulIsItsMatvecBitForBit) {
  std::mt19937 rng(4949);
  bool any = false;
  for (const KernelTable* t : AllTables()) {
    if (std::string(t->name).rfind("avx512", 0) != 0) continue;
    any = true;
    for (int32_t dtype : {TINYAI_DTYPE_Q4_G32, TINYAI_DTYPE_Q4NL_G32, TINYAI_DTYPE_Q5_G32, TINYAI_DTYPE_Q5M_G32}) {
      const WeightKernels* wk = WeightKernelsFor(*t, dtype);
      for (size_t cols : {32u, 40u, 896u, 8256u}) {
        for (size_t rows : {1u, 6u, 700u}) {
          const size_t rb = GroupedRowBytes(dtype, cols), groups = GroupsPerRow(cols), n = 3;
          const std::vector<uint8_t> w = RandomRows(rng, dtype, rows, cols, rb);
          std::vector<float> x(n * cols);
          for (float& v : x) v = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
          std::vector<InputGroup> q(n * groups);
          for (size_t j = 0; j < n; ++j) t->quantize_input(x.data() + j * cols, cols, q.data() + j * groups);
          std::vector<float> y(rows), batch(n * rows);
          wk->matmul_q(w.data(), rb, q.data(), groups, batch.data(), rows, rows, cols, n);
          for (size_t j = 0; j < n; ++j) {
            wk->matvec_q(w.data(), rb, q.data() + j * groups, y.data(), rows, cols);
            for (size_t r = 0; r < rows; ++r) {
              ASSERT_EQ(batch[j * rows + r], y[r]) << t->name << " " << Name(dtype) << " cols " << cols << " rows " << rows
                                                   << " input " << j << " row " << r;
            }
          }
        }
      }
    }
  }
  if (!any) GTEST_SKIP() << "no AVX-512 table on this CPU";
}

// The K-quants' integer sums are exact on every path, so the AVX-512 VNNI
// table's products (vpdpbusd; q6_k's halves scaled by vpmulld) equal the
// AVX-512 table's (vpmaddubsw and vpmaddwd) bit for bit.
TEST(KQuant, Avx512VnniKQuantsAreTheAvx512TablesBitForBit) {
  const KernelTable *plain = nullptr, *vnni = nullptr;
  for (const KernelTable* t : AllTables()) {
    if (std::string(t->name) == "avx512") plain = t;
    if (std::string(t->name) == "avx512vnni") vnni = t;
  }
  if (plain == nullptr || vnni == nullptr) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  std::mt19937 rng(5151);
  for (int32_t dtype : {TINYAI_DTYPE_Q4_K, TINYAI_DTYPE_Q5_K, TINYAI_DTYPE_Q6_K}) {
    EXPECT_NE(WeightKernelsFor(*vnni, dtype)->matvec_q, WeightKernelsFor(*plain, dtype)->matvec_q) << Name(dtype);
    for (size_t cols : ColsFor(dtype)) {
      const size_t rows = 9, rb = GroupedRowBytes(dtype, cols), groups = GroupsPerRow(cols);
      const std::vector<uint8_t> w = RandomRows(rng, dtype, rows, cols, rb);
      std::vector<float> x(cols);
      for (float& v : x) v = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
      std::vector<InputGroup> q(groups);
      plain->quantize_input(x.data(), cols, q.data());
      std::vector<float> a(rows), b(rows);
      WeightKernelsFor(*plain, dtype)->matvec_q(w.data(), rb, q.data(), a.data(), rows, cols);
      WeightKernelsFor(*vnni, dtype)->matvec_q(w.data(), rb, q.data(), b.data(), rows, cols);
      for (size_t r = 0; r < rows; ++r) ASSERT_EQ(a[r], b[r]) << Name(dtype) << " cols " << cols << " row " << r;
    }
  }
}

// The extremes of each code range meet the extremes of the input without
// overflow (q6_k's scales of -128 times 32 codes of -32 times -127 inputs).
TEST(KQuant, ExtremeCodesDoNotOverflow) {
  for (const KernelTable* t : AllTables()) {
    const size_t cols = 256, groups = cols / kGroup;
    std::vector<uint8_t> w(kQ6KBlockBytes, 0);  // codes 0 - 32 = -32
    for (size_t i = 192; i < 208; ++i) w[i] = 0x80;  // scales -128
    PutHalf(w.data() + 208, 1.0f);
    std::vector<float> x(cols, -1.0f);
    std::vector<InputGroup> q(groups);
    t->quantize_input(x.data(), cols, q.data());
    float y = 0.0f;
    WeightKernelsFor(*t, TINYAI_DTYPE_Q6_K)->matvec_q(w.data(), kQ6KBlockBytes, q.data(), &y, 1, cols);
    EXPECT_NEAR(y, -128.0f * -32.0f * -1.0f * cols, 1e-5 * 128 * 32 * cols) << t->name;
  }
}

}  // namespace
}  // namespace kernels
}  // namespace tinyai
