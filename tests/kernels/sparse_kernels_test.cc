// Block-sparse products (WeightKernels::sparse_matmul, common/sparse.h) on
// every table and every weight dtype, bands pruned by quant::EncodeBands on
// odd shapes (narrow last blocks, short last bands, none and all blocks
// kept, one input and several):
//  - the reference against what sparse.h defines, evaluated exactly (in
//    double) from the decoded kept weights and the input as the product
//    takes it (fp32, or quantized and dequantized);
//  - for f32 and f16, the reference bit for bit against the reference's
//    dense product of the same weights with zeros in the pruned blocks;
//    for the grouped dtypes that statement holds where the weight groups
//    are the dense ones (blocks of 32): the sparse product equals, within
//    fp32 rounding, the dense product of rows whose groups are the kept
//    blocks' and zero elsewhere. With smaller blocks a kept group gathers
//    columns of several input groups, which a dense row of the same dtype
//    cannot hold: the exact evaluation above is the statement then;
//  - every table against the reference, and against its own dense product
//    of the weights with zeros; a row's value the same for one input as
//    among several; nothing written outside y's rows.
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

// n inputs as a product of dtype takes them: fp32 (ldx floats apart), or
// quantized by the table (ldx groups apart); and the values they stand for.
struct Inputs {
  InputForm form;
  size_t ldx;  // floats or groups
  std::vector<float> fp32;
  std::vector<uint8_t> groups;
  std::vector<double> values;  // n x cols: what the product multiplies

  const void* data() const { return form == kInputF32 ? static_cast<const void*>(fp32.data()) : groups.data(); }
};

Inputs MakeInputs(const KernelTable& t, int32_t dtype, size_t cols, size_t n, uint32_t seed) {
  Inputs in;
  in.form = InputFormOf(dtype);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  const size_t ld = cols + 3;
  std::vector<float> x(n * ld, NAN);  // NaN between the inputs: a product that reads past cols fails
  for (size_t j = 0; j < n; ++j)
    for (size_t c = 0; c < cols; ++c) x[j * ld + c] = uniform(rng);
  in.values.assign(n * cols, 0.0);
  if (in.form == kInputF32) {
    in.fp32 = x;
    in.ldx = ld;
    for (size_t j = 0; j < n; ++j)
      for (size_t c = 0; c < cols; ++c) in.values[j * cols + c] = x[j * ld + c];
    return in;
  }
  const size_t groups = GroupsPerRow(cols), bytes = QuantizedInputBytes(in.form, cols) / groups;
  in.ldx = groups + 1;
  in.groups.assign(n * in.ldx * bytes, 0xa5);
  for (size_t j = 0; j < n; ++j) {
    uint8_t* dst = in.groups.data() + j * in.ldx * bytes;
    if (in.form == kInputInt8) {
      InputGroup* g = reinterpret_cast<InputGroup*>(dst);
      t.quantize_input(x.data() + j * ld, cols, g);
      for (size_t c = 0; c < cols; ++c) in.values[j * cols + c] = static_cast<double>(g[c / kGroup].d) * g[c / kGroup].q[c % kGroup];
    } else {
      InputGroup16* g = reinterpret_cast<InputGroup16*>(dst);
      t.quantize_input16(x.data() + j * ld, cols, g);
      for (size_t c = 0; c < cols; ++c) in.values[j * cols + c] = static_cast<double>(g[c / kGroup].d) * g[c / kGroup].q[c % kGroup];
    }
  }
  return in;
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

// The table's dense product of rows whose values are p's decoded weights
// (zero where pruned), in p's dtype: f32 and f16 rows re-encoded exactly;
// grouped rows, for blocks of 32 only, with each kept block's group copied
// to its dense place and zero groups elsewhere. Returns false when no such
// rows exist.
bool Dense(const WeightKernels& k, const Pruned& p, const Inputs& in, size_t n, std::vector<float>* y) {
  const SparseLayout& s = p.s;
  const size_t rows = s.bands * s.block, cols = s.cols;
  const size_t row_bytes = WeightRowBytes(s.dtype, cols);
  std::vector<uint8_t> w(rows * row_bytes + 1, 0);
  if (s.dtype == TINYAI_DTYPE_F32) {
    std::memcpy(w.data(), p.dense.data(), rows * cols * sizeof(float));
  } else if (s.dtype == TINYAI_DTYPE_F16) {
    for (size_t i = 0; i < rows * cols; ++i) {
      const uint16_t h = FloatToHalf(p.dense[i]);
      std::memcpy(w.data() + 2 * i, &h, 2);
    }
  } else {
    if (s.block != kGroup) return false;
    const size_t gb = GroupBytes(s.dtype);
    for (size_t b = 0; b < s.bands; ++b) {
      const uint8_t* band = p.bands.data() + b * s.band_bytes;
      size_t k_index = 0;
      for (size_t j = 0; j < s.blocks; ++j) {
        if (!BlockKept(band, j)) continue;
        for (size_t i = 0; i < s.block; ++i) {
          std::memcpy(w.data() + (b * s.block + i) * row_bytes + j * gb, band + s.row_offset(i) + k_index * gb, gb);
        }
        ++k_index;
      }
    }
  }
  y->assign(n * rows, 0.0f);
  if (s.dtype == TINYAI_DTYPE_F32 || s.dtype == TINYAI_DTYPE_F16) {
    k.matmul(w.data(), row_bytes, static_cast<const float*>(in.data()), in.ldx, y->data(), rows, rows, cols, n);
  } else {
    k.matmul_q(w.data(), row_bytes, in.data(), in.ldx, y->data(), rows, rows, cols, n);
  }
  return true;
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
              const Inputs in = MakeInputs(*t, dtype, cols, n, static_cast<uint32_t>(n + cols));
              size_t ldy = 0;
              const std::vector<float> got = Sparse(*k, p, in, n, &ldy);
              const std::vector<float> want = Sparse(ref, p, in, n, &ldy);
              std::vector<float> dense_ref, dense_table;
              const bool has_dense = Dense(ref, p, in, n, &dense_ref) && Dense(*k, p, in, n, &dense_table);
              for (size_t j = 0; j < n; ++j) {
                for (size_t r = 0; r < out_rows; ++r) {
                  // What sparse.h defines, exactly, and the scale of its rounding.
                  double exact = 0.0, scale = 0.0;
                  for (size_t c = 0; c < cols; ++c) {
                    const double term = static_cast<double>(p.dense[r * cols + c]) * in.values[j * cols + c];
                    exact += term;
                    scale += std::fabs(term);
                  }
                  const float g = got[j * ldy + r], w = want[j * ldy + r];
                  ASSERT_NEAR(w, exact, 2e-6 * scale + 1e-12) << "ref, row " << r << " input " << j;
                  ASSERT_NEAR(g, w, 2e-6 * scale + 1e-12) << t->name << " row " << r << " input " << j << " of " << n;
                  if (r >= rows || kept == 0) ASSERT_EQ(g, 0.0f) << t->name << " a row without weights";
                  if (dtype == TINYAI_DTYPE_F32 || dtype == TINYAI_DTYPE_F16) {
                    ASSERT_EQ(w, dense_ref[j * out_rows + r]) << "ref against its dense product, row " << r;
                  }
                  if (has_dense) {
                    ASSERT_NEAR(w, dense_ref[j * out_rows + r], 2e-6 * scale + 1e-12) << "ref dense, row " << r;
                    ASSERT_NEAR(g, dense_table[j * out_rows + r], 2e-6 * scale + 1e-12) << t->name << " dense, row " << r;
                  }
                }
              }
              // Each input alone gives the same bits as among n.
              if (n > 1) {
                for (size_t j = 0; j < n; ++j) {
                  Inputs one = in;
                  if (in.form == kInputF32) {
                    one.fp32.erase(one.fp32.begin(), one.fp32.begin() + j * in.ldx);
                  } else {
                    const size_t bytes = QuantizedInputBytes(in.form, cols) / GroupsPerRow(cols);
                    one.groups.erase(one.groups.begin(), one.groups.begin() + j * in.ldx * bytes);
                  }
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
      const Inputs in = MakeInputs(*t, dtype, 172, 3, 8);
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
      std::vector<uint8_t> q(QuantizedInputBytes(InputFormOf(dtype), 64));
      const void* in = x.data();
      if (InputFormOf(dtype) == kInputInt8) t->quantize_input(x.data(), 64, reinterpret_cast<InputGroup*>(q.data()));
      if (InputFormOf(dtype) == kInputInt16) t->quantize_input16(x.data(), 64, reinterpret_cast<InputGroup16*>(q.data()));
      if (InputFormOf(dtype) != kInputF32) in = q.data();
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
