// The KV cache on its own (kv/kv_cache.h): sizes per storage type and
// policy, the slots a position takes and the spans a query reads (the
// sinks and the window, whatever the ring's wrap), rows stored and read back
// within each type's rounding, and the score and value products of every
// type against a float64 evaluation of the stored rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/half.h"
#include "format/test_models.h"
#include "kv/kv_cache.h"

namespace tt = tinyai::testing;
using tinyai::KvCache;
using tinyai::KvShape;
using tinyai::KvSpan;

namespace {

KvShape Shape(int32_t head_size, int32_t type, int32_t context = 64, int32_t window = 0, int32_t sinks = 0,
              int32_t pass_rows = 1) {
  KvShape s;
  s.layers = 2;
  s.kv_heads = 3;
  s.head_size = head_size;
  s.context = context;
  s.window = window;
  s.sinks = sinks;
  s.pass_rows = pass_rows;
  s.type = type;
  return s;
}

// Keys in int8 are rotated over the largest power of two dividing the head
// size, up to 128; f32 and f16 keys are not.
TEST(KvCache, HadamardBlocks) {
  const int32_t cases[][2] = {{8, 8}, {32, 32}, {64, 64}, {128, 128}, {256, 128}, {96, 32}, {40, 8}, {6, 2}, {5, 1}};
  for (const auto& c : cases) {
    KvCache kv;
    ASSERT_EQ(kv.Init(Shape(c[0], TINYAI_KV_INT8)), TINYAI_OK);
    EXPECT_EQ(kv.hadamard(), static_cast<size_t>(c[1])) << c[0];
    ASSERT_EQ(kv.Init(Shape(c[0], TINYAI_KV_F16)), TINYAI_OK);
    EXPECT_EQ(kv.hadamard(), 1u);
  }
}

TEST(KvCache, BytesPerTypeAndPolicy) {
  struct Case {
    int32_t hs, type;
    uint64_t row;
  };
  // f32 4 bytes a value, f16 2; int8 an f16 scale per 32 values, or per
  // row for heads whose size is not a multiple of 32 (stories260K's 8).
  const Case cases[] = {{8, TINYAI_KV_F32, 32},  {8, TINYAI_KV_F16, 16},  {8, TINYAI_KV_INT8, 10},
                        {64, TINYAI_KV_F32, 256}, {64, TINYAI_KV_F16, 128}, {64, TINYAI_KV_INT8, 68},
                        {96, TINYAI_KV_INT8, 102}, {48, TINYAI_KV_INT8, 50}};
  for (const Case& c : cases) {
    KvCache kv;
    ASSERT_EQ(kv.Init(Shape(c.hs, c.type)), TINYAI_OK) << tt::LastMessage();
    EXPECT_EQ(kv.row_bytes(), c.row) << c.hs << " " << KvCache::TypeName(c.type);
    // The rows, a token per slot, and the store's records (a few hundred bytes).
    const uint64_t rows = 2u * 2u * 3u * 64u * c.row + (kv.hadamard() > 1 ? c.hs * 4u : 0u) + 64u * 4u;
    EXPECT_GE(kv.bytes(), rows);
    EXPECT_LE(kv.bytes(), rows + 4096u);
    // What it says it holds is what the store holds once allocated.
    ASSERT_EQ(kv.Allocate(), TINYAI_OK);
    EXPECT_EQ(kv.bytes(), kv.store().used() + (kv.hadamard() > 1 ? c.hs * 4u : 0u));
    EXPECT_EQ(kv.slots(), 64);
    EXPECT_EQ(kv.max_positions(), 64);
  }
  // A window: the sinks, the window and room for a pass; positions without end.
  KvCache kv;
  ASSERT_EQ(kv.Init(Shape(8, TINYAI_KV_F32, 512, 64, 4, 32)), TINYAI_OK);
  EXPECT_EQ(kv.slots(), 4 + 64 + 31);
  EXPECT_GE(kv.bytes(), 2u * 2u * 3u * 99u * 32u + 99u * 4u);
  EXPECT_LE(kv.bytes(), 2u * 2u * 3u * 99u * 32u + 99u * 4u + 4096u);
  EXPECT_EQ(kv.max_positions(), INT32_MAX);
}

TEST(KvCache, BadShapesAreRefused) {
  uint64_t bytes = 0;
  tinyaiClearLastError();
  EXPECT_EQ(KvCache::Bytes(Shape(8, 7), &bytes), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tt::LastMessage()).find("kvType 7"), std::string::npos) << tt::LastMessage();
  EXPECT_EQ(KvCache::Bytes(Shape(8, TINYAI_KV_F32, 64, 0, 4), &bytes), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tt::LastMessage()).find("sinks go with a window"), std::string::npos) << tt::LastMessage();
  EXPECT_EQ(KvCache::Bytes(Shape(8, TINYAI_KV_F32, 64, -1), &bytes), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(KvCache::Bytes(Shape(0, TINYAI_KV_F32), &bytes), TINYAI_ERR_INVALID_ARGUMENT);
  KvShape huge = Shape(1 << 20, TINYAI_KV_F32, 1 << 20);
  huge.layers = 4096;
  huge.kv_heads = 4096;
  EXPECT_EQ(KvCache::Bytes(huge, &bytes), TINYAI_ERR_OVERFLOW);
}

// Each position's keys hold its number: the spans a query reads give back
// exactly the positions it attends to, in order, for every position of a
// long text, whatever the ring's size.
TEST(KvCache, SpansAreTheSinksAndTheWindow) {
  for (int32_t sinks : {0, 1, 4}) {
    for (int32_t window : {1, 5, 16}) {
      for (int32_t pass_rows : {1, 3, 32}) {
        KvCache kv;
        ASSERT_EQ(kv.Init(Shape(4, TINYAI_KV_F32, 1000, window, sinks, pass_rows)), TINYAI_OK);
        ASSERT_EQ(kv.Allocate(), TINYAI_OK);
        const size_t kv_dim = 3 * 4;
        for (int32_t p = 0; p < 300; ++p) {
          std::vector<float> k(kv_dim, static_cast<float>(p)), v(kv_dim, static_cast<float>(-p));
          kv.Store(1, p, k.data(), v.data());
          // Every position of the pass this one would end (pass_rows at a
          // time) is stored before its queries read: check the first
          // query of each pass after storing all of it, and every query.
          if ((p + 1) % pass_rows != 0) continue;
          for (int32_t q = p + 1 - pass_rows; q <= p; ++q) {
            if (q < 0) continue;
            KvSpan spans[3];
            const int32_t n = kv.Visible(q, spans);
            std::vector<int32_t> seen;
            bool slid = false;
            for (int32_t s = 0; s < n; ++s) {
              slid |= spans[s].sink;
              for (int32_t j = 0; j < spans[s].count; ++j) {
                const float* row = reinterpret_cast<const float*>(kv.Keys(1, 2) + (spans[s].slot + j) * kv.row_bytes());
                seen.push_back(static_cast<int32_t>(row[0]));
              }
            }
            std::vector<int32_t> want;
            if (q < sinks + window) {
              for (int32_t x = 0; x <= q; ++x) want.push_back(x);
            } else {
              for (int32_t x = 0; x < sinks; ++x) want.push_back(x);
              for (int32_t x = q - window + 1; x <= q; ++x) want.push_back(x);
            }
            ASSERT_EQ(seen, want) << "sinks " << sinks << " window " << window << " pass " << pass_rows << " query " << q;
            EXPECT_EQ(slid, sinks > 0 && q >= sinks + window);
          }
        }
      }
    }
  }
}

std::vector<float> Random(std::mt19937* rng, size_t n, float scale = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = std::uniform_real_distribution<float>(-scale, scale)(*rng);
  return v;
}

// Stored and read back: f32 exactly, f16 rounded to nearest even, int8
// within half a step of its group's scale (max|x| / 127 as an f16).
TEST(KvCache, RowsRoundTripWithinTheirType) {
  std::mt19937 rng(3);
  for (int32_t hs : {8, 32, 40, 64}) {
    for (int32_t type : {TINYAI_KV_F32, TINYAI_KV_F16, TINYAI_KV_INT8}) {
      KvCache kv;
      ASSERT_EQ(kv.Init(Shape(hs, type)), TINYAI_OK);
      ASSERT_EQ(kv.Allocate(), TINYAI_OK);
      const size_t kv_dim = 3 * static_cast<size_t>(hs);
      std::vector<float> k = Random(&rng, kv_dim, 3.0f), v = Random(&rng, kv_dim);
      k[1] = 0.0f;
      std::fill(v.begin(), v.begin() + hs, 0.0f);  // a zero row: scale 0, codes 0
      kv.Store(0, 5, k.data(), v.data());
      std::vector<float> back(static_cast<size_t>(hs));
      for (int32_t h = 0; h < 3; ++h) {
        // Keys (int8: stored in the Hadamard basis, read back in the
        // model's), then values (as they are), against the same rules.
        for (bool key : {true, false}) {
          kv.ReadRow((key ? kv.Keys(0, h) : kv.Values(0, h)) + 5 * kv.row_bytes(), back.data(), key);
          const float* x = (key ? k.data() : v.data()) + h * hs;
          const size_t group = hs % 32 == 0 ? 32 : static_cast<size_t>(hs);
          double error = 0, norm = 0;
          for (int32_t c = 0; c < hs; ++c) {
            error += (back[c] - x[c]) * static_cast<double>(back[c] - x[c]);
            norm += x[c] * static_cast<double>(x[c]);
            if (type == TINYAI_KV_F32) {
              EXPECT_EQ(back[c], x[c]);
            } else if (type == TINYAI_KV_F16) {
              EXPECT_EQ(back[c], tinyai::HalfToFloat(tinyai::FloatToHalf(x[c])));
            } else if (!key || kv.hadamard() == 1) {
              float amax = 0;
              const size_t g0 = c / group * group;
              for (size_t j = g0; j < g0 + group; ++j) amax = std::max(amax, std::fabs(x[j]));
              const float d = tinyai::HalfToFloat(tinyai::FloatToHalf(amax / 127.0f));
              EXPECT_LE(std::fabs(back[c] - x[c]), d * 0.5f + 1e-7f) << hs << " " << c;
            }
          }
          // A rotated key: half a step of each rotated value at most, whose
          // scale is at most |x| / 127 (a rotated value is at most |x|).
          if (type == TINYAI_KV_INT8 && key && kv.hadamard() > 1) {
            EXPECT_LE(std::sqrt(error), 0.5 * std::sqrt(static_cast<double>(hs)) * std::sqrt(norm) / 127.0 * 1.002 + 1e-6)
                << hs;
          }
          if (!key && h == 0) {
            for (float b : back) EXPECT_EQ(b, 0.0f);
          }
        }
      }
    }
  }
}

// Scores and the weighted sum of values over n rows, against float64 over
// the rows as stored (read back), for every type and head size, over span
// lengths that cross the kernels' tiles and value blocks.
TEST(KvCache, ProductsMatchFloat64OverTheStoredRows) {
  std::mt19937 rng(11);
  for (int32_t hs : {8, 32, 40, 64, 128}) {
    for (int32_t type : {TINYAI_KV_F32, TINYAI_KV_F16, TINYAI_KV_INT8}) {
      KvCache kv;
      ASSERT_EQ(kv.Init(Shape(hs, type, 200)), TINYAI_OK);
      ASSERT_EQ(kv.Allocate(), TINYAI_OK);
      const size_t kv_dim = 3 * static_cast<size_t>(hs);
      for (int32_t p = 0; p < 200; ++p) {
        const std::vector<float> k = Random(&rng, kv_dim), v = Random(&rng, kv_dim);
        kv.Store(1, p, k.data(), v.data());
      }
      const std::vector<float> q = Random(&rng, static_cast<size_t>(hs));
      std::vector<uint8_t> scratch(kv.ScratchBytes() + 64);
      for (int32_t n : {1, 3, 17, 33, 150}) {
        const int32_t first = 7;
        std::vector<float> att(static_cast<size_t>(n));
        kv.Scores(kv.Keys(1, 1) + first * kv.row_bytes(), n, q.data(), att.data(), scratch.data());
        std::vector<float> row(static_cast<size_t>(hs));
        for (int32_t j = 0; j < n; ++j) {
          kv.ReadRow(kv.Keys(1, 1) + (first + j) * kv.row_bytes(), row.data(), true);
          double want = 0;
          for (int32_t c = 0; c < hs; ++c) want += static_cast<double>(q[c]) * row[c];
          // int8 scores come from the integer products with the query
          // quantized to int16 where the rows are q8_g32 blocks.
          const double tol = type == TINYAI_KV_INT8 ? 2e-3 * (1.0 + std::fabs(want)) : 1e-5 * (1.0 + std::fabs(want));
          ASSERT_NEAR(att[j], want, tol) << KvCache::TypeName(type) << " hs " << hs << " n " << n << " j " << j;
        }
        // Values: a first span, then a second one added to it.
        for (float& a : att) a = std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
        std::vector<float> out(static_cast<size_t>(hs), 123.0f);
        const int32_t split = n / 2;
        kv.Accumulate(kv.Values(1, 1) + first * kv.row_bytes(), split, att.data(), out.data(), true, scratch.data());
        kv.Accumulate(kv.Values(1, 1) + (first + split) * kv.row_bytes(), n - split, att.data() + split, out.data(),
                      false, scratch.data());
        for (int32_t c = 0; c < hs; ++c) {
          double want = 0;
          for (int32_t j = 0; j < n; ++j) {
            kv.ReadRow(kv.Values(1, 1) + (first + j) * kv.row_bytes(), row.data());
            want += static_cast<double>(att[j]) * row[c];
          }
          ASSERT_NEAR(out[c], want, 1e-4 * (1.0 + std::fabs(want))) << KvCache::TypeName(type) << " hs " << hs;
        }
      }
    }
  }
}

}  // namespace
