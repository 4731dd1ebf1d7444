// Block-sparse products (WeightKernels::sparse_matmul, common/sparse.h) on
// every table and every weight dtype, bands pruned by quant::EncodeBands on
// odd shapes (narrow last blocks, short last bands, none and all blocks
// kept, one input and several):
//  - the reference against what sparse.h defines, evaluated exactly (in
//    double) from the decoded kept weights and the input as the product
//    takes it (fp32; for the grouped dtypes gathered at the kept columns,
//    quantized in groups of 32 over the kept values and dequantized);
//  - the reference bit for bit against its own dense product: for f32 and
//    f16 of the weights with zeros in the pruned blocks, for the grouped
//    dtypes of the band's stored rows (dense rows of K*B values) with the
//    gathered input quantized;
//  - every table against the reference, and against its own dense product
//    of the same rows; a row's value the same for one input as among
//    several; nothing written outside y's rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/groups.h"
#include "common/half.h"
#include "common/sparse.h"
#include "kernels/kernels.h"
#include "quant/prune.h"
#include "tinyai/tinyai.h"

namespace tinyai {
namespace kernels {
namespace {

const int32_t kDTypes[] = {TINYAI_DTYPE_F32, TINYAI_DTYPE_F16, TINYAI_DTYPE_Q8_G32, TINYAI_DTYPE_Q4_G32,
                           TINYAI_DTYPE_Q4NL_G32};

std::vector<const KernelTable*> AllTables() {
  const KernelTable* tables[16];
  size_t n = AvailableTables(tables, 16);
  return std::vector<const KernelTable*>(tables, tables + (n > 16 ? 16 : n));
}

std::string Name(int32_t dtype) { return tinyaiDTypeName(static_cast<TinyAIDType>(dtype)); }

// A pruned matrix: its bands, and its rows decoded (s.bands * s.block rows
// of s.cols values, zero where pruned and in a short last band's padding).
struct Pruned {
  SparseLayout s;
  std::vector<uint8_t> bands;
  std::vector<float> dense;
};

Pruned MakePruned(int32_t dtype, size_t rows, size_t cols, size_t block, size_t kept, uint32_t seed) {
  Pruned p;
  EXPECT_TRUE(MakeSparseLayout(dtype, rows, cols, block, kept, &p.s));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(rows * cols);
  for (float& v : w) v = normal(rng);
  p.bands.assign(p.s.bytes(), 0);
  EXPECT_EQ(quant::EncodeBands(p.s, w.data(), rows, p.bands.data(), quant::PruneScore::kMagnitude, quant::ColumnStats(),
                               nullptr),
            TINYAI_OK)
      << tinyaiGetLastErrorMessage();
  p.dense.assign(p.s.bands * block * cols, 0.0f);
  for (size_t b = 0; b < p.s.bands; ++b) {
    quant::DecodeBand(p.s, p.bands.data() + b * p.s.band_bytes, WeightKernelsFor(Ref(), dtype)->dequantize_row,
                      p.dense.data() + b * block * cols);
  }
  return p;
}

// n fp32 inputs (every dtype's sparse product takes them), ldx floats
// apart, NaN between them.
struct Inputs {
  size_t ldx;
  std::vector<float> fp32;

  const void* data() const { return fp32.data(); }
  const float* at(size_t j) const { return fp32.data() + j * ldx; }
};

Inputs MakeInputs(size_t cols, size_t n, uint32_t seed) {
  Inputs in;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  in.ldx = cols + 3;
  in.fp32.assign(n * in.ldx, NAN);  // a product that reads past cols fails
  for (size_t j = 0; j < n; ++j)
    for (size_t c = 0; c < cols; ++c) in.fp32[j * in.ldx + c] = uniform(rng);
  return in;
}

// The columns of band b's kept values, in the order its rows store them
// (s.kept_cols of them; s.cols and past for values past the matrix).
std::vector<size_t> KeptColumnsOf(const Pruned& p, size_t b) {
  const SparseLayout& s = p.s;
  const uint8_t* band = p.bands.data() + b * s.band_bytes;
  std::vector<size_t> cols;
  for (size_t j = 0; j < s.blocks; ++j) {
    if (!BlockKept(band, j)) continue;
    for (size_t i = 0; i < s.block; ++i) cols.push_back(j * s.block + i);
  }
  cols.resize(s.kept_cols, SIZE_MAX);  // a short bitmap: zero columns past the matrix
  return cols;
}

// The input a band's rows multiply: x at its kept columns (zero past the
// matrix), for the grouped dtypes quantized in groups of 32 by table t
// (into *groups, when not null) and dequantized.
std::vector<double> BandInput(const KernelTable& t, const Pruned& p, size_t b, const float* x,
                              std::vector<uint8_t>* groups) {
  const std::vector<size_t> cols = KeptColumnsOf(p, b);
  std::vector<float> g(cols.size());
  for (size_t i = 0; i < cols.size(); ++i) g[i] = cols[i] < p.s.cols ? x[cols[i]] : 0.0f;
  std::vector<double> v(g.begin(), g.end());
  const InputForm form = InputFormOf(p.s.dtype);
  if (form == kInputF32 || g.empty()) return v;
  std::vector<uint8_t> q(QuantizedInputBytes(form, g.size()));
  if (form == kInputInt8) {
    const InputGroup* in = reinterpret_cast<const InputGroup*>(q.data());
    t.quantize_input(g.data(), g.size(), reinterpret_cast<InputGroup*>(q.data()));
    for (size_t i = 0; i < g.size(); ++i) v[i] = static_cast<double>(in[i / kGroup].d) * in[i / kGroup].q[i % kGroup];
  } else {
    const InputGroup16* in = reinterpret_cast<const InputGroup16*>(q.data());
    t.quantize_input16(g.data(), g.size(), reinterpret_cast<InputGroup16*>(q.data()));
    for (size_t i = 0; i < g.size(); ++i) v[i] = static_cast<double>(in[i / kGroup].d) * in[i / kGroup].q[i % kGroup];
  }
  if (groups != nullptr) *groups = q;
  return v;
}

// y of the table's sparse product: rows() x n, ldy = rows() + 2, the two
// values after each input's rows and everything past them left at a sentinel.
constexpr float kSentinel = -12345.0f;

std::vector<float> Sparse(const WeightKernels& k, const Pruned& p, const Inputs& in, size_t n, size_t* ldy) {
  const size_t rows = p.s.bands * p.s.block;
  *ldy = rows + 2;
  std::vector<float> y(n * *ldy + 1, kSentinel);
  k.sparse_matmul(p.bands.data(), p.s, in.data(), in.ldx, y.data(), *ldy, p.s.bands, n);
  for (size_t j = 0; j < n; ++j) {
    EXPECT_EQ(y[j * *ldy + rows], kSentinel) << "written past the rows";
    EXPECT_EQ(y[j * *ldy + rows + 1], kSentinel) << "written past the rows";
  }
  EXPECT_EQ(y[n * *ldy], kSentinel);
  return y;
}

// The table's dense product that the sparse one stands for, input j: f32
// and f16, of p's decoded weights (zero where pruned) re-encoded exactly,
// against x; grouped, of each band's stored rows (dense rows of kept_cols
// values) against the band's gathered input quantized by the table.
std::vector<float> Dense(const KernelTable& t, const WeightKernels& k, const Pruned& p, const Inputs& in, size_t j) {
  const SparseLayout& s = p.s;
  const size_t rows = s.bands * s.block, cols = s.cols;
  std::vector<float> y(rows, 0.0f);
  if (s.dtype == TINYAI_DTYPE_F32 || s.dtype == TINYAI_DTYPE_F16) {
    const size_t row_bytes = WeightRowBytes(s.dtype, cols);
    std::vector<uint8_t> w(rows * row_bytes + 1, 0);
    if (s.dtype == TINYAI_DTYPE_F32) {
      std::memcpy(w.data(), p.dense.data(), rows * cols * sizeof(float));
    } else {
      for (size_t i = 0; i < rows * cols; ++i) {
        const uint16_t h = FloatToHalf(p.dense[i]);
        std::memcpy(w.data() + 2 * i, &h, 2);
      }
    }
    k.matvec(w.data(), row_bytes, in.at(j), y.data(), rows, cols);
    return y;
  }
  if (s.kept_cols == 0) return y;
  for (size_t b = 0; b < s.bands; ++b) {
    std::vector<uint8_t> q;
    BandInput(t, p, b, in.at(j), &q);
    k.matvec_q(p.bands.data() + b * s.band_bytes + s.bitmap_bytes, s.kept_row_bytes, q.data(), y.data() + b * s.block,
               s.block, s.kept_cols);
  }
  return y;
}

// Every table, every dtype, blocks 1 to 32, columns 1 to 1000, rows not a
// multiple of the block, 0, 1, half and all blocks kept, 1, 2 and 5 inputs.
TEST(SparseMatmul, EveryTableOnOddShapes) {
  size_t checked = 0;
  for (int32_t dtype : kDTypes) {
    for (size_t block : {1u, 2u, 4u, 8u, 16u, 32u}) {
      for (size_t cols : {1u, 3u, 31u, 33u, 172u, 1000u}) {
        const size_t nb = (cols + block - 1) / block;
        const size_t rows = block == 1 ? 3 : 2 * block + block / 2 + 1;
        std::vector<size_t> counts = {0, 1, nb / 2, nb};
        for (size_t ci = 0; ci < counts.size(); ++ci) {
          const size_t kept = counts[ci];
          if (ci > 0 && kept == counts[ci - 1]) continue;
          const std::string what = Name(dtype) + " " + std::to_string(rows) + "x" + std::to_string(cols) + " B" +
                                   std::to_string(block) + " K" + std::to_string(kept);
          SCOPED_TRACE(what);
          const Pruned p = MakePruned(dtype, rows, cols, block, kept, static_cast<uint32_t>(cols * 31 + block + kept));
          const size_t out_rows = p.s.bands * block;
          for (const KernelTable* t : AllTables()) {
            const WeightKernels* k = WeightKernelsFor(*t, dtype);
            ASSERT_NE(k, nullptr) << t->name;
            ASSERT_NE(k->sparse_matmul, nullptr) << t->name;
            const WeightKernels& ref = *WeightKernelsFor(Ref(), dtype);
            for (size_t n : {1u, 2u, 5u}) {
              const Inputs in = MakeInputs(cols, n, static_cast<uint32_t>(n + cols));
              size_t ldy = 0;
              const std::vector<float> got = Sparse(*k, p, in, n, &ldy);
              const std::vector<float> want = Sparse(ref, p, in, n, &ldy);
              for (size_t j = 0; j < n; ++j) {
                const std::vector<float> dense_ref = Dense(Ref(), ref, p, in, j);
                const std::vector<float> dense_table = Dense(*t, *k, p, in, j);
                for (size_t b = 0; b < p.s.bands; ++b) {
                  const std::vector<size_t> columns = KeptColumnsOf(p, b);
                  const std::vector<double> x = BandInput(Ref(), p, b, in.at(j), nullptr);
                  for (size_t r = b * block; r < (b + 1) * block; ++r) {
                    // What sparse.h defines, exactly, and the scale of its rounding.
                    double exact = 0.0, scale = 0.0;
                    for (size_t i = 0; i < columns.size(); ++i) {
                      if (columns[i] >= cols) continue;
                      const double term = static_cast<double>(p.dense[r * cols + columns[i]]) * x[i];
                      exact += term;
                      scale += std::fabs(term);
                    }
                    const float g = got[j * ldy + r], w = want[j * ldy + r];
                    ASSERT_NEAR(w, exact, 2e-6 * scale + 1e-12) << "ref, row " << r << " input " << j;
                    ASSERT_NEAR(g, w, 2e-6 * scale + 1e-12) << t->name << " row " << r << " input " << j << " of " << n;
                    if (r >= rows || kept == 0) ASSERT_EQ(g, 0.0f) << t->name << " a row without weights";
                    ASSERT_EQ(w, dense_ref[r]) << "ref against its dense product, row " << r;
                    ASSERT_NEAR(g, dense_table[r], 2e-6 * scale + 1e-12) << t->name << " dense, row " << r;
                  }
                }
              }
              // Each input alone gives the same bits as among n.
              if (n > 1) {
                for (size_t j = 0; j < n; ++j) {
                  Inputs one = in;
                  one.fp32.erase(one.fp32.begin(), one.fp32.begin() + j * in.ldx);
                  size_t ld1 = 0;
                  const std::vector<float> alone = Sparse(*k, p, one, 1, &ld1);
                  for (size_t r = 0; r < out_rows; ++r) {
                    ASSERT_EQ(alone[r], got[j * ldy + r]) << t->name << " input " << j << " alone, row " << r;
                  }
                }
              }
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0u);
}

// The bands a product reads: from a slice's first band on, the rows of the
// whole matrix's product (a thread's slice of the bands, a cached range).
TEST(SparseMatmul, ASliceOfTheBands) {
  for (int32_t dtype : kDTypes) {
    const Pruned p = MakePruned(dtype, 37, 172, 4, 20, 5);
    for (const KernelTable* t : AllTables()) {
      const WeightKernels& k = *WeightKernelsFor(*t, dtype);
      const Inputs in = MakeInputs(172, 3, 8);
      size_t ldy = 0;
      const std::vector<float> whole = Sparse(k, p, in, 3, &ldy);
      const size_t first = 3, count = 5;
      std::vector<float> part(3 * ldy, kSentinel);
      k.sparse_matmul(p.bands.data() + first * p.s.band_bytes, p.s, in.data(), in.ldx, part.data(), ldy, count, 3);
      for (size_t j = 0; j < 3; ++j) {
        for (size_t r = 0; r < ldy; ++r) {
          if (r < count * 4) {
            ASSERT_EQ(part[j * ldy + r], whole[j * ldy + first * 4 + r]) << t->name << " " << Name(dtype) << " row " << r;
          } else {
            ASSERT_EQ(part[j * ldy + r], kSentinel) << t->name << " " << Name(dtype) << " past the slice, row " << r;
          }
        }
      }
    }
  }
}

// A band whose bitmap keeps fewer blocks than its layout says (a file the
// loader should have refused) is read within its bytes and the input's: the
// missing blocks' values meet zero. Under ASan the exact-size buffers below
// catch a read past them.
TEST(SparseMatmul, AShortBitmapReadsNothingPastTheInput) {
  for (int32_t dtype : kDTypes) {
    Pruned p = MakePruned(dtype, 32, 64, 32, 2, 3);  // every block kept
    p.bands[0] = 1;  // block 1 dropped from the bitmap
    for (const KernelTable* t : AllTables()) {
      const WeightKernels& k = *WeightKernelsFor(*t, dtype);
      std::vector<float> x(64, 0.5f), y(32, kSentinel), want(32, kSentinel);
      const float* in = x.data();
      k.sparse_matmul(p.bands.data(), p.s, in, 0, y.data(), 0, 1, 1);
      WeightKernelsFor(Ref(), dtype)->sparse_matmul(p.bands.data(), p.s, in, 0, want.data(), 0, 1, 1);
      for (size_t r = 0; r < 32; ++r) {
        ASSERT_TRUE(std::isfinite(y[r])) << t->name << " " << Name(dtype) << " row " << r;
        ASSERT_NEAR(y[r], want[r], 1e-4f * (1.0f + std::fabs(want[r]))) << t->name << " " << Name(dtype) << " row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace kernels
}  // namespace tinyai
