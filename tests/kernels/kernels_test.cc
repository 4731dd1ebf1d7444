// Parity tests: every kernel table this CPU runs against Ref(), and Ref()
// against double precision.
//
// Two kinds of checks:
//  - exact: small-integer data, where every product and partial sum is exact
//    in fp32, so any correct summation order (and FMA) must give the same
//    bits as Ref(). These catch dropped, doubled or misplaced terms at any
//    size, which a tolerance could hide.
//  - random: uniform data, compared with a bound for fp32 reassociation,
//    |got - want| <= kRelTol * sum|terms| + kAbsTol.
// Buffers are sized exactly (so ASan sees any over-read), padding between
// rows is NaN (so reading it poisons the result), and pointers are offset by
// one float to test unaligned access.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "common/half.h"
#include "kernels/kernels.h"

namespace tinyai {
namespace kernels {
namespace {

constexpr float kRelTol = 1e-5f;
constexpr float kAbsTol = 1e-6f;
const float kNaN = std::numeric_limits<float>::quiet_NaN();

const size_t kSizes[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 255, 256, 257, 768, 2048};
const size_t kRows[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 15, 16, 17, 24, 33};

std::vector<const KernelTable*> AllTables() {
  const KernelTable* tables[16];
  size_t n = AvailableTables(tables, 16);
  if (n > 16) n = 16;
  return std::vector<const KernelTable*>(tables, tables + n);
}

// A buffer of exactly offset + count floats, viewed from `offset` on.
struct Buf {
  Buf(size_t count, size_t offset) : storage(offset + count, kNaN), off(offset) {}
  float* data() { return storage.data() + off; }
  float& operator[](size_t i) { return storage[off + i]; }
  std::vector<float> storage;
  size_t off;
};

class Filler {
 public:
  explicit Filler(uint32_t seed) : rng_(seed) {}
  float Uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng_); }
  // Small integers: products and sums stay exact in fp32 for our sizes.
  float SmallInt() { return static_cast<float>(static_cast<int>(rng_() % 7) - 3); }
  float Next(bool exact) { return exact ? SmallInt() : Uniform(-1.0f, 1.0f); }

 private:
  std::mt19937 rng_;
};

// A rows x cols matrix with row stride ld; only the used elements are filled,
// the padding stays NaN. Size is exact: (rows-1)*ld + cols.
Buf MakeMatrix(Filler& f, size_t rows, size_t cols, size_t ld, size_t offset, bool exact) {
  Buf m(rows == 0 ? 0 : (rows - 1) * ld + cols, offset);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) m[r * ld + c] = f.Next(exact);
  return m;
}

float SumAbsProducts(const float* a, size_t stride_a, const float* b, size_t stride_b, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; ++i) s += std::fabs(static_cast<double>(a[i * stride_a]) * b[i * stride_b]);
  return static_cast<float>(s);
}

::testing::AssertionResult Close(float got, float want, float scale, bool exact) {
  if (exact) {
    if (std::memcmp(&got, &want, sizeof(float)) == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << got << ", want exactly " << want;
  }
  const float tol = kRelTol * scale + kAbsTol;
  if (std::fabs(got - want) <= tol) return ::testing::AssertionSuccess();  // false for NaN
  return ::testing::AssertionFailure() << "got " << got << ", want " << want << " (tolerance "
                                       << tol << ")";
}

// Element-wise relative comparison for rmsnorm/softmax/swiglu outputs.
::testing::AssertionResult CloseRel(float got, float want, float rel, float abs_tol) {
  if (std::fabs(got - want) <= rel * std::fabs(want) + abs_tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", want " << want;
}

class KernelParity : public ::testing::TestWithParam<const KernelTable*> {
 protected:
  const KernelTable& T() const { return *GetParam(); }
  const KernelTable& R() const { return Ref(); }
};

std::string TableTestName(const ::testing::TestParamInfo<const KernelTable*>& info) {
  std::string s;
  for (const char* p = info.param->name; *p; ++p) {
    const char c = *p;
    s += ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) ? c : '_';
  }
  return s;
}

// ---- matvec ---------------------------------------------------------------------

void CheckMatvec(const KernelTable& t, size_t rows, size_t cols, size_t ld_pad, size_t off, bool exact,
                 uint32_t seed) {
  Filler f(seed);
  const size_t ldw = cols + ld_pad;
  Buf w = MakeMatrix(f, rows, cols, ldw, off, exact);
  Buf x(cols, off);
  for (size_t c = 0; c < cols; ++c) x[c] = f.Next(exact);
  Buf y(rows, off), y_ref(rows, off);
  t.matvec(w.data(), ldw, x.data(), y.data(), rows, cols);
  Ref().matvec(w.data(), ldw, x.data(), y_ref.data(), rows, cols);
  for (size_t r = 0; r < rows; ++r) {
    const float scale = SumAbsProducts(w.data() + r * ldw, 1, x.data(), 1, cols);
    ASSERT_TRUE(Close(y[r], y_ref[r], scale, exact))
        << t.name << " matvec rows=" << rows << " cols=" << cols << " ldw=" << ldw << " off=" << off
        << " row " << r;
  }
}

TEST_P(KernelParity, Matvec) {
  uint32_t seed = 1;
  for (bool exact : {true, false})
    for (size_t rows : kRows)
      for (size_t cols : kSizes)
        for (size_t ld_pad : {0, 1, 7})
          for (size_t off : {0, 1}) {
            CheckMatvec(T(), rows, cols, ld_pad, off, exact, seed++);
            if (HasFatalFailure()) return;
          }
}

TEST_P(KernelParity, MatvecLarge) {
  CheckMatvec(T(), 256, 768, 0, 0, false, 11);
  CheckMatvec(T(), 67, 2048, 3, 1, false, 12);
  CheckMatvec(T(), 129, 2048, 0, 1, true, 13);
}

// A prompt's logits are a matmul's, the same tokens one by one a matvec's
// (and a head's scores are a matvec over its contiguous key rows): each row's
// sum must be the same bits either way, for short contiguous rows (read one
// after the other) as for long ones (read side by side).
TEST_P(KernelParity, MatvecRowIsTheMatmulRowBitForBit) {
  Filler f(150);
  for (size_t cols : {1u, 7u, 8u, 17u, 63u, 64u, 65u, 300u, 768u})
    for (size_t rows : {1u, 7u, 8u, 13u, 16u, 33u, 256u}) {
      Buf w = MakeMatrix(f, rows, cols, cols, 0, false);
      Buf x = MakeMatrix(f, 4, cols, cols, 0, false);
      Buf by_matvec(rows * 4, 0), by_matmul(rows * 4, 0);
      for (size_t j = 0; j < 4; ++j) T().matvec(w.data(), cols, x.data() + j * cols, by_matvec.data() + j * rows, rows, cols);
      T().matmul(w.data(), cols, x.data(), cols, by_matmul.data(), rows, rows, cols, 4);
      ASSERT_EQ(0, std::memcmp(by_matvec.data(), by_matmul.data(), rows * 4 * sizeof(float)))
          << T().name << " " << rows << "x" << cols;
    }
}

// ---- matmul ---------------------------------------------------------------------

void CheckMatmul(const KernelTable& t, size_t rows, size_t cols, size_t n, size_t pad, size_t off,
                 bool exact, uint32_t seed) {
  Filler f(seed);
  const size_t ldw = cols + pad, ldx = cols + 2 * pad, ldy = rows + pad;
  Buf w = MakeMatrix(f, rows, cols, ldw, off, exact);
  Buf x = MakeMatrix(f, n, cols, ldx, off, exact);
  const size_t ysize = n == 0 ? 0 : (n - 1) * ldy + rows;
  Buf y(ysize, off), y_ref(ysize, off);
  t.matmul(w.data(), ldw, x.data(), ldx, y.data(), ldy, rows, cols, n);
  Ref().matmul(w.data(), ldw, x.data(), ldx, y_ref.data(), ldy, rows, cols, n);
  for (size_t j = 0; j < n; ++j) {
    for (size_t r = 0; r < rows; ++r) {
      const float scale = SumAbsProducts(w.data() + r * ldw, 1, x.data() + j * ldx, 1, cols);
      ASSERT_TRUE(Close(y[j * ldy + r], y_ref[j * ldy + r], scale, exact))
          << t.name << " matmul rows=" << rows << " cols=" << cols << " n=" << n << " pad=" << pad
          << " off=" << off << " at j=" << j << " r=" << r;
    }
    // Padding between output vectors must be left alone.
    if (j + 1 < n) {
      for (size_t r = rows; r < ldy; ++r) ASSERT_TRUE(std::isnan(y[j * ldy + r])) << "matmul wrote padding";
    }
  }
}

TEST_P(KernelParity, Matmul) {
  uint32_t seed = 100;
  const size_t cols_list[] = {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 100, 257, 768};
  for (bool exact : {true, false})
    for (size_t rows : {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 17})
      for (size_t cols : cols_list)
        for (size_t n = 0; n <= 9; ++n)
          for (size_t pad : {0, 3})
            for (size_t off : {0, 1}) {
              CheckMatmul(T(), rows, cols, n, pad, off, exact, seed++);
              if (HasFatalFailure()) return;
            }
}

TEST_P(KernelParity, MatmulLarge) {
  CheckMatmul(T(), 64, 2048, 8, 0, 0, false, 201);
  CheckMatmul(T(), 33, 768, 16, 1, 1, false, 202);
  CheckMatmul(T(), 31, 2048, 11, 1, 1, true, 203);
}

// A prompt pass multiplies 16 inputs at once; the AVX-512 table puts 12 or
// more in the lanes of its registers (matmul_avx512.h): odd shapes around
// its tiles of 16 rows, 16 inputs and 256 columns.
TEST_P(KernelParity, MatmulManyInputs) {
  uint32_t seed = 300;
  for (size_t rows : {1u, 15u, 16u, 17u, 33u})
    for (size_t cols : {1u, 15u, 17u, 255u, 256u, 257u, 600u})
      for (size_t n : {12u, 16u, 17u, 33u}) {
        CheckMatmul(T(), rows, cols, n, 3, 1, seed % 2 == 0, seed);
        ++seed;
        if (HasFatalFailure()) return;
      }
  // Rows 4 KiB apart (no padding) crowd the L1: 8 rows a tile, then the rest.
  // 2,045 columns padded to 2,048 crowd it too, in two blocks of columns
  // (the second adds to y) with a tail of 13, and check y's padding.
  for (size_t rows : {7u, 8u, 9u, 16u, 23u, 40u})
    for (size_t n : {12u, 16u, 32u}) {
      CheckMatmul(T(), rows, 1024, n, 0, 0, seed % 2 == 0, seed);
      ++seed;
      if (HasFatalFailure()) return;
      CheckMatmul(T(), rows, 2045, n, 3, 1, seed % 2 == 0, seed);
      ++seed;
      if (HasFatalFailure()) return;
    }
}

// The weight stream multiplies a tensor's rows in pieces of any size (slices
// under a cap, ranges per thread): a row's product must not depend on the
// piece it falls in, so that capped and uncapped runs agree bit for bit.
// mul(a, b, y) multiplies rows [a, b) into y (output stride rows): the
// rows in pieces of 1 to 19 give the bits of one call over all of them,
// which *whole (rows x n) receives.
template <class Mul>
void ExpectPiecesAsWhole(size_t rows, size_t n, Mul mul, Buf* whole, const std::string& what) {
  Buf piece(rows * n, 0);
  mul(size_t{0}, rows, whole->data());
  for (size_t a = 0; a < rows;) {
    const size_t b = a + 1 + (a * 7) % 19 < rows ? a + 1 + (a * 7) % 19 : rows;
    mul(a, b, piece.data() + a);
    a = b;
  }
  ASSERT_EQ(0, std::memcmp(whole->data(), piece.data(), rows * n * sizeof(float))) << what;
}

// On the AVX-512 tables, nor an input's on the batch around it: a batch of
// more than 16 takes two blocks of 16 a tile of 8 rows (LaneTilePair; the
// rows past a multiple of 8 in a short tile), a lone block one block at a
// time; the sums are the same.
TEST_P(KernelParity, MatmulOfARowDoesNotDependOnItsPiece) {
  Filler f(310);
  for (size_t n : {3u, 16u, 17u, 32u, 45u})
    for (size_t cols : {300u, 1024u, 1100u}) {  // 1,024 columns: tiles of 8 rows on AVX-512 (RowsCrowdL1)
      const size_t rows = 53;
      Buf w = MakeMatrix(f, rows, cols, cols, 0, false);
      Buf x = MakeMatrix(f, n, cols, cols, 0, false);
      Buf whole(rows * n, 0);
      auto mul = [&](size_t a, size_t b, float* y) {
        T().matmul(w.data() + a * cols, cols, x.data(), cols, y, rows, b - a, cols, n);
      };
      const std::string what = std::string(T().name) + " n=" + std::to_string(n) + " cols=" + std::to_string(cols);
      ASSERT_NO_FATAL_FAILURE(ExpectPiecesAsWhole(rows, n, mul, &whole, what));
      if (n < 32 || std::strncmp(T().name, "avx512", 6) != 0) continue;
      // Inputs 10..22 alone (one block of 13), and 14..45 (two blocks, where
      // the batch had 14..31 in its first pair and the rest in a lone block).
      for (size_t from : {size_t{10}, size_t{14}}) {
        const size_t m = from == 10 ? 13 : n - from;
        Buf some(rows * m, 0);
        T().matmul(w.data(), cols, x.data() + from * cols, cols, some.data(), rows, rows, cols, m);
        ASSERT_EQ(0, std::memcmp(whole.data() + from * rows, some.data(), rows * m * sizeof(float))) << what << " from " << from;
      }
    }
}

// ---- vecmat ---------------------------------------------------------------------

void CheckVecmat(const KernelTable& t, size_t n, size_t cols, size_t pad, size_t off, bool exact,
                 uint32_t seed) {
  Filler f(seed);
  const size_t ldv = cols + pad;
  Buf a(n, off);
  for (size_t i = 0; i < n; ++i) a[i] = f.Next(exact);
  Buf v = MakeMatrix(f, n, cols, ldv, off, exact);
  Buf out(cols, off), out_ref(cols, off);  // NaN-filled: vecmat must overwrite
  t.vecmat(a.data(), v.data(), ldv, out.data(), n, cols);
  Ref().vecmat(a.data(), v.data(), ldv, out_ref.data(), n, cols);
  for (size_t c = 0; c < cols; ++c) {
    const float scale = SumAbsProducts(a.data(), 1, v.data() + c, ldv, n);
    ASSERT_TRUE(Close(out[c], out_ref[c], scale, exact))
        << t.name << " vecmat n=" << n << " cols=" << cols << " ldv=" << ldv << " off=" << off
        << " col " << c;
  }
}

TEST_P(KernelParity, Vecmat) {
  uint32_t seed = 300;
  for (bool exact : {true, false})
    for (size_t n : {0, 1, 2, 3, 5, 17, 100, 257})
      for (size_t cols : kSizes)
        for (size_t pad : {0, 5})
          for (size_t off : {0, 1}) {
            CheckVecmat(T(), n, cols, pad, off, exact, seed++);
            if (HasFatalFailure()) return;
          }
}

// ---- dot, add ---------------------------------------------------------------------

TEST_P(KernelParity, Dot) {
  uint32_t seed = 400;
  for (bool exact : {true, false})
    for (size_t n : kSizes)
      for (size_t off_a : {0, 1})
        for (size_t off_b : {0, 1}) {
          Filler f(seed++);
          Buf a(n, off_a), b(n, off_b);
          for (size_t i = 0; i < n; ++i) {
            a[i] = f.Next(exact);
            b[i] = f.Next(exact);
          }
          const float got = T().dot(a.data(), b.data(), n);
          const float want = R().dot(a.data(), b.data(), n);
          ASSERT_TRUE(Close(got, want, SumAbsProducts(a.data(), 1, b.data(), 1, n), exact))
              << T().name << " dot n=" << n << " offsets " << off_a << "," << off_b;
        }
}

TEST_P(KernelParity, Add) {
  uint32_t seed = 500;
  for (size_t n : kSizes)
    for (size_t off : {0, 1}) {
      Filler f(seed++);
      Buf x(n, off), y(n, 1 - off), y_ref(n, 1 - off);
      for (size_t i = 0; i < n; ++i) {
        x[i] = f.Uniform(-1, 1);
        y[i] = y_ref[i] = f.Uniform(-1, 1);
      }
      T().add(y.data(), x.data(), n);
      R().add(y_ref.data(), x.data(), n);
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(y[i], y_ref[i]) << T().name << " add n=" << n << " at " << i;  // exact: one rounding
    }
}

// ---- rmsnorm, softmax, swiglu -------------------------------------------------------

TEST_P(KernelParity, Rmsnorm) {
  uint32_t seed = 600;
  for (size_t n : kSizes)
    for (size_t off : {0, 1})
      for (bool in_place : {false, true}) {
        Filler f(seed++);
        Buf x(n, off), w(n, 1 - off), out(n, off), out_ref(n, off);
        for (size_t i = 0; i < n; ++i) {
          x[i] = f.Uniform(-3, 3);
          w[i] = f.Uniform(-2, 2);
        }
        Buf x_copy = x;
        float* dst = in_place ? x.data() : out.data();
        T().rmsnorm(x.data(), w.data(), dst, n, 1e-5f);
        R().rmsnorm(x_copy.data(), w.data(), out_ref.data(), n, 1e-5f);
        for (size_t i = 0; i < n; ++i)
          ASSERT_TRUE(CloseRel(dst[i], out_ref[i], 1e-5f, 1e-6f))
              << T().name << " rmsnorm n=" << n << " off=" << off << " in_place=" << in_place << " at " << i;
      }
}

TEST_P(KernelParity, Softmax) {
  uint32_t seed = 700;
  for (size_t n : kSizes)
    for (size_t off : {0, 1})
      for (float range : {1.0f, 10.0f, 100.0f}) {
        Filler f(seed++);
        Buf x(n, off), x_ref(n, off);
        for (size_t i = 0; i < n; ++i) x[i] = x_ref[i] = f.Uniform(-range, range);
        T().softmax(x.data(), n);
        R().softmax(x_ref.data(), n);
        double total = 0.0;
        for (size_t i = 0; i < n; ++i) {
          ASSERT_TRUE(CloseRel(x[i], x_ref[i], 1e-5f, 1e-30f))
              << T().name << " softmax n=" << n << " off=" << off << " range=" << range << " at " << i;
          total += x[i];
        }
        if (n > 0) {
          EXPECT_NEAR(total, 1.0, 1e-5) << T().name << " softmax n=" << n;
        }
      }
}

TEST_P(KernelParity, SoftmaxLargeAndMaskedInputs) {
  // Values far beyond expf's range must not overflow (max is subtracted), and
  // -inf entries (masked positions) must come out as exactly 0.
  for (size_t n : {1, 5, 8, 9, 17, 33, 100}) {
    Buf x(n, 1), x_ref(n, 1);
    for (size_t i = 0; i < n; ++i) {
      float v = 500.0f + static_cast<float>(i % 5);
      if (i % 3 == 1) v = -std::numeric_limits<float>::infinity();
      x[i] = x_ref[i] = v;
    }
    T().softmax(x.data(), n);
    R().softmax(x_ref.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(CloseRel(x[i], x_ref[i], 1e-5f, 1e-30f)) << T().name << " n=" << n << " at " << i;
      if (i % 3 == 1) {
        ASSERT_EQ(x[i], 0.0f);
      }
    }
  }
}

TEST_P(KernelParity, Swiglu) {
  uint32_t seed = 800;
  for (size_t n : kSizes)
    for (size_t off : {0, 1})
      for (float range : {1.0f, 10.0f, 120.0f}) {
        Filler f(seed++);
        Buf gate(n, off), gate_ref(n, off), up(n, 1 - off);
        for (size_t i = 0; i < n; ++i) {
          gate[i] = gate_ref[i] = f.Uniform(-range, range);
          up[i] = f.Uniform(-2, 2);
        }
        T().swiglu(gate.data(), up.data(), n);
        R().swiglu(gate_ref.data(), up.data(), n);
        for (size_t i = 0; i < n; ++i)
          ASSERT_TRUE(CloseRel(gate[i], gate_ref[i], 1e-5f, 1e-30f))
              << T().name << " swiglu n=" << n << " range=" << range << " at " << i;
      }
}

TEST_P(KernelParity, SoftmaxMaxAnywhere) {
  // One value far above the rest, at every position: if the max pass missed
  // it, exp would overflow to inf and the result would be NaN.
  for (size_t n : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33}) {
    for (size_t k = 0; k < n; ++k) {
      Buf x(n, 1);
      for (size_t i = 0; i < n; ++i) x[i] = 0.0f;
      x[k] = 200.0f;
      T().softmax(x.data(), n);
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(x[i], i == k ? 1.0f : 0.0f) << T().name << " softmax n=" << n << " k=" << k << " at " << i;
    }
  }
}

// ---- weights by dtype ------------------------------------------------------------

// f32 weights read as bytes, a row `row_bytes` apart, are the table's own
// fp32 products bit for bit, and a row dequantizes to itself.
TEST_P(KernelParity, F32WeightsAreTheFp32Products) {
  const WeightKernels* wk = WeightKernelsFor(T(), TINYAI_DTYPE_F32);
  ASSERT_NE(wk, nullptr) << T().name;
  uint32_t seed = 100;
  for (size_t rows : {1u, 5u, 33u})
    for (size_t cols : {1u, 8u, 31u, 260u})
      for (size_t ld_pad : {0u, 3u}) {
        Filler f(seed++);
        const size_t ldw = cols + ld_pad, n = 3;
        Buf w = MakeMatrix(f, rows, cols, ldw, 1, false);
        Buf x = MakeMatrix(f, n, cols, cols, 0, false);
        Buf y(rows * n, 0), want(rows * n, 0);
        const uint8_t* wb = reinterpret_cast<const uint8_t*>(w.data());
        wk->matvec(wb, ldw * sizeof(float), x.data(), y.data(), rows, cols);
        T().matvec(w.data(), ldw, x.data(), want.data(), rows, cols);
        ASSERT_EQ(0, std::memcmp(y.data(), want.data(), rows * sizeof(float))) << rows << "x" << cols;
        wk->matmul(wb, ldw * sizeof(float), x.data(), cols, y.data(), rows, rows, cols, n);
        T().matmul(w.data(), ldw, x.data(), cols, want.data(), rows, rows, cols, n);
        ASSERT_EQ(0, std::memcmp(y.data(), want.data(), rows * n * sizeof(float))) << rows << "x" << cols;
        std::vector<float> row(cols);
        wk->dequantize_row(wb + (rows - 1) * ldw * sizeof(float), row.data(), cols);
        ASSERT_EQ(0, std::memcmp(row.data(), w.data() + (rows - 1) * ldw, cols * sizeof(float)));
      }
}

// f16 weights: the table's products match the reference's, which are the
// fp32 products of the dequantized rows bit for bit; halves are random finite
// values of every magnitude the weights have (and exact small integers).
std::vector<uint16_t> HalfMatrix(Filler& f, size_t rows, size_t ld, bool exact) {
  std::vector<uint16_t> h(rows * ld + 1, 0x7e00);  // padding (and one past) NaN
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < ld; ++c) h[r * ld + c] = FloatToHalf(f.Next(exact));
  return h;
}

// One f16 shape: the reference's products are the dequantized rows' fp32
// products bit for bit, and the table's are close to them. off: rows start
// at an odd half (2-byte aligned only).
void CheckF16Weights(const KernelTable& t, size_t rows, size_t cols, size_t ld_pad, size_t off, bool exact,
                     uint32_t seed, size_t n = 5) {
  const WeightKernels* wk = WeightKernelsFor(t, TINYAI_DTYPE_F16);
  const WeightKernels* ref = WeightKernelsFor(Ref(), TINYAI_DTYPE_F16);
  ASSERT_NE(wk, nullptr) << t.name;
  ASSERT_NE(ref, nullptr);
  Filler f(seed);
  const size_t ld = cols + ld_pad;
  std::vector<uint16_t> h = HalfMatrix(f, rows + 1, ld, exact);
  const uint8_t* w = reinterpret_cast<const uint8_t*>(h.data() + off);
  Buf x = MakeMatrix(f, n, cols, cols, 0, exact);
  // The reference is the dequantized rows' fp32 product.
  std::vector<float> dq(rows * cols);
  for (size_t r = 0; r < rows; ++r) ref->dequantize_row(w + r * ld * 2, dq.data() + r * cols, cols);
  for (size_t i = 0; i < rows * cols; ++i) ASSERT_EQ(dq[i], HalfToFloat(h[off + (i / cols) * ld + i % cols]));
  Buf want(rows * n, 0), got(rows * n, 0), y(rows * n, 0);
  Ref().matmul(dq.data(), cols, x.data(), cols, want.data(), rows, rows, cols, n);
  ref->matmul(w, ld * 2, x.data(), cols, y.data(), rows, rows, cols, n);
  ASSERT_EQ(0, std::memcmp(y.data(), want.data(), rows * n * sizeof(float)));
  // This table, against the reference.
  wk->matvec(w, ld * 2, x.data(), got.data(), rows, cols);
  for (size_t r = 0; r < rows; ++r) {
    const float scale = SumAbsProducts(dq.data() + r * cols, 1, x.data(), 1, cols);
    ASSERT_TRUE(Close(got[r], want[r], scale, exact))
        << t.name << " f16 matvec " << rows << "x" << cols << " pad " << ld_pad << " row " << r;
  }
  wk->matmul(w, ld * 2, x.data(), cols, got.data(), rows, rows, cols, n);
  for (size_t j = 0; j < n; ++j)
    for (size_t r = 0; r < rows; ++r) {
      const float scale = SumAbsProducts(dq.data() + r * cols, 1, x.data() + j * cols, 1, cols);
      ASSERT_TRUE(Close(got[j * rows + r], want[j * rows + r], scale, exact))
          << t.name << " f16 matmul " << rows << "x" << cols << " vector " << j << " row " << r;
    }
  std::vector<float> row(cols);
  wk->dequantize_row(w + (rows - 1) * ld * 2, row.data(), cols);
  ASSERT_EQ(0, std::memcmp(row.data(), dq.data() + (rows - 1) * cols, cols * sizeof(float)));
}

TEST_P(KernelParity, F16WeightsMatchTheReference) {
  uint32_t seed = 200;
  for (bool exact : {true, false})
    for (size_t rows : {1u, 3u, 4u, 9u, 17u})
      for (size_t cols : {1u, 7u, 8u, 16u, 33u, 64u, 288u, 1100u})
        for (size_t ld_pad : {0u, 5u})
          for (size_t off : {0u, 1u}) ASSERT_NO_FATAL_FAILURE(CheckF16Weights(T(), rows, cols, ld_pad, off, exact, seed++));
}

// A prompt pass's 16 inputs (the AVX-512 table's lanes, matmul_avx512.h),
// and the AVX2 outer products' panels (16 rows; 35 ends in a part of one),
// chunks (128 columns; 1,100 is 8 and a tail past a multiple of 8) and
// tiles (6 inputs; 8 is one and a part, 32 a prompt pass).
TEST_P(KernelParity, F16WeightsMatchTheReferenceManyInputs) {
  uint32_t seed = 950;
  for (size_t rows : {1u, 16u, 21u, 35u})
    for (size_t cols : {7u, 256u, 300u, 1100u})
      for (size_t n : {8u, 12u, 16u, 19u, 32u, 45u}) {
        ASSERT_NO_FATAL_FAILURE(CheckF16Weights(T(), rows, cols, 3, 1, seed % 2 == 0, seed, n));
        ++seed;
      }
}

// f16 rows as the fp32 ones (MatmulOfARowDoesNotDependOnItsPiece): a row's
// products do not depend on the piece of rows it falls in; on the AVX-512
// tables, which take 12 inputs or more in the lanes (matmul_avx512.h,
// converted once per 32), nor an input's on the batch around it.
TEST_P(KernelParity, F16MatmulOfARowDoesNotDependOnItsPieceOrBatch) {
  const WeightKernels* wk = WeightKernelsFor(T(), TINYAI_DTYPE_F16);
  ASSERT_NE(wk, nullptr);
  Filler f(320);
  for (size_t n : {3u, 16u, 32u, 45u})
    for (size_t cols : {300u, 1024u}) {
      const size_t rows = 53;
      std::vector<uint16_t> h = HalfMatrix(f, rows, cols, false);
      const uint8_t* w = reinterpret_cast<const uint8_t*>(h.data());
      Buf x = MakeMatrix(f, n, cols, cols, 0, false);
      Buf whole(rows * n, 0);
      auto mul = [&](size_t a, size_t b, float* y) {
        wk->matmul(w + a * cols * 2, cols * 2, x.data(), cols, y, rows, b - a, cols, n);
      };
      const std::string what = std::string(T().name) + " n=" + std::to_string(n) + " cols=" + std::to_string(cols);
      ASSERT_NO_FATAL_FAILURE(ExpectPiecesAsWhole(rows, n, mul, &whole, what));
      if (n < 32 || std::strncmp(T().name, "avx512", 6) != 0) continue;
      // Inputs 10..22 alone (still in the lanes, now lanes 0..12 of one
      // block; in the batch lanes 10..15 of one and 0..6 of the next).
      Buf some(rows * 13, 0);
      wk->matmul(w, cols * 2, x.data() + 10 * cols, cols, some.data(), rows, rows, cols, 13);
      ASSERT_EQ(0, std::memcmp(whole.data() + 10 * rows, some.data(), rows * 13 * sizeof(float))) << what;
    }
}

// From kMatvecStreamBytes of rows up, matvec may read them another way (the
// AVX2 kernel streams one row after the other): the same checks there, on
// odd shapes, just below and above the threshold.
TEST_P(KernelParity, F16WeightsMatchTheReferenceLarge) {
  uint32_t seed = 900;
  for (size_t cols : {31u, 768u, 1100u})
    for (size_t ld_pad : {0u, 3u}) {
      const size_t ld_bytes = (cols + ld_pad) * 2;
      const size_t at = (kMatvecStreamBytes + ld_bytes - 1) / ld_bytes;  // the fewest rows that stream
      for (size_t rows : {at - 1, at, at + 7})
        for (bool exact : {true, false})
          ASSERT_NO_FATAL_FAILURE(CheckF16Weights(T(), rows, cols, ld_pad, ld_pad % 2, exact, seed++));
    }
}

// Zeros, subnormals, the extremes and infinities widen to exactly the float
// each half is, in the vector lanes and in the tails alike.
TEST_P(KernelParity, F16SpecialValuesWidenExactly) {
  const WeightKernels* wk = WeightKernelsFor(T(), TINYAI_DTYPE_F16);
  ASSERT_NE(wk, nullptr);
  const uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x7bff, 0xfbff,
                               0x7c00, 0xfc00, 0x3c00, 0xbc00, 0x3555, 0x0200, 0x83ff, 0x4000, 0xc400};
  const size_t n = sizeof specials / sizeof specials[0];
  for (size_t start = 0; start < n; ++start) {  // every value at every lane and in the tail
    std::vector<uint16_t> row(n);
    for (size_t i = 0; i < n; ++i) row[i] = specials[(start + i) % n];
    std::vector<float> out(n);
    wk->dequantize_row(reinterpret_cast<const uint8_t*>(row.data()), out.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const float want = HalfToFloat(row[i]);
      ASSERT_EQ(0, std::memcmp(&out[i], &want, sizeof want)) << T().name << " half 0x" << std::hex << row[i];
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tables, KernelParity, ::testing::ValuesIn(AllTables()), TableTestName);

// ---- Ref() against double precision --------------------------------------------------

TEST(RefVsDouble, DotAndMatvec) {
  Filler f(900);
  for (size_t n : kSizes) {
    std::vector<float> a(n), b(n);
    double want = 0.0, scale = 0.0;
    for (size_t i = 0; i < n; ++i) {
      a[i] = f.Uniform(-1, 1);
      b[i] = f.Uniform(-1, 1);
      want += static_cast<double>(a[i]) * b[i];
      scale += std::fabs(static_cast<double>(a[i]) * b[i]);
    }
    const float got = Ref().dot(a.data(), b.data(), n);
    EXPECT_LE(std::fabs(got - want), kRelTol * scale + kAbsTol) << "dot n=" << n;
    float y = kNaN;
    Ref().matvec(a.data(), n, b.data(), &y, 1, n);
    EXPECT_EQ(y, got) << "matvec of one row must equal dot, n=" << n;
  }
}

TEST(RefVsDouble, MatmulAndVecmat) {
  Filler f(901);
  const size_t rows = 5, cols = 257, n = 3;
  std::vector<float> w(rows * cols), x(n * cols), y(n * rows);
  for (float& v : w) v = f.Uniform(-1, 1);
  for (float& v : x) v = f.Uniform(-1, 1);
  Ref().matmul(w.data(), cols, x.data(), cols, y.data(), rows, rows, cols, n);
  for (size_t j = 0; j < n; ++j)
    for (size_t r = 0; r < rows; ++r) {
      double want = 0.0, scale = 0.0;
      for (size_t c = 0; c < cols; ++c) {
        want += static_cast<double>(w[r * cols + c]) * x[j * cols + c];
        scale += std::fabs(static_cast<double>(w[r * cols + c]) * x[j * cols + c]);
      }
      EXPECT_LE(std::fabs(y[j * rows + r] - want), kRelTol * scale + kAbsTol);
    }
  // vecmat: out = sum_t a[t] * w[t, :], with rows as t.
  std::vector<float> out(cols, kNaN);
  Ref().vecmat(x.data(), w.data(), cols, out.data(), rows, cols);
  for (size_t c = 0; c < cols; ++c) {
    double want = 0.0, scale = 0.0;
    for (size_t t = 0; t < rows; ++t) {
      want += static_cast<double>(x[t]) * w[t * cols + c];
      scale += std::fabs(static_cast<double>(x[t]) * w[t * cols + c]);
    }
    EXPECT_LE(std::fabs(out[c] - want), kRelTol * scale + kAbsTol) << "vecmat col " << c;
  }
}

TEST(RefVsDouble, RmsnormSoftmaxSwiglu) {
  Filler f(902);
  for (size_t n : {1, 7, 64, 768, 2048}) {
    std::vector<float> x(n), w(n), out(n);
    double ss = 0.0;
    for (size_t i = 0; i < n; ++i) {
      x[i] = f.Uniform(-3, 3);
      w[i] = f.Uniform(-2, 2);
      ss += static_cast<double>(x[i]) * x[i];
    }
    const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
    Ref().rmsnorm(x.data(), w.data(), out.data(), n, 1e-5f);
    for (size_t i = 0; i < n; ++i) {
      const double want = w[i] * inv * x[i];
      EXPECT_LE(std::fabs(out[i] - want), 1e-5 * std::fabs(want) + 1e-7) << "rmsnorm n=" << n << " at " << i;
    }

    std::vector<float> s(n);
    double mx = -1e300, sum = 0.0;
    for (size_t i = 0; i < n; ++i) {
      s[i] = f.Uniform(-20, 20);
      mx = s[i] > mx ? s[i] : mx;
    }
    for (size_t i = 0; i < n; ++i) sum += std::exp(s[i] - mx);
    std::vector<float> s_in = s;
    Ref().softmax(s.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const double want = std::exp(s_in[i] - mx) / sum;
      EXPECT_LE(std::fabs(s[i] - want), 1e-5 * want + 1e-30) << "softmax n=" << n << " at " << i;
    }

    std::vector<float> g(n), up(n);
    for (size_t i = 0; i < n; ++i) {
      g[i] = f.Uniform(-10, 10);
      up[i] = f.Uniform(-2, 2);
    }
    std::vector<float> g_in = g;
    Ref().swiglu(g.data(), up.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const double v = g_in[i];
      const double want = v / (1.0 + std::exp(-v)) * up[i];
      EXPECT_LE(std::fabs(g[i] - want), 1e-5 * std::fabs(want) + 1e-30) << "swiglu n=" << n << " at " << i;
    }
  }
}

TEST(RefVsDouble, AddIsExactSum) {
  std::vector<float> y = {1.0f, -2.5f, 3.25f}, x = {0.5f, 0.5f, -0.25f};
  Ref().add(y.data(), x.data(), 3);
  EXPECT_EQ(y, (std::vector<float>{1.5f, -2.0f, 3.0f}));
}

// ---- Ref() is the same arithmetic on every target -----------------------------------
//
// Ref() follows llama2.c's fp32 arithmetic: every product and every partial
// sum rounded to fp32, summed left to right. Compilers may otherwise contract
// a*b+c into one fused multiply-add (GCC does by default for C++ on AArch64 and
// wherever FMA is available), which rounds once and so changes the bits: the
// oracle, and the golden texts, would then depend on the target. The build
// turns contraction off (-ffp-contract=off); these tests check Ref() bit for
// bit against the same arithmetic spelled out one rounded fp32 operation at a
// time. Data have 21-bit significands, so products are not exact in fp32.
// softmax and swiglu are left out: they call the C library's expf.

// Portable data: integers from mt19937 (the same sequence everywhere) / 2^20.
class PortableFiller {
 public:
  explicit PortableFiller(uint32_t seed) : rng_(seed) {}
  float Next() { return static_cast<float>(static_cast<int32_t>(rng_() % 2097153u) - 1048576) / 1048576.0f; }
  std::vector<float> Vector(size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = Next();
    return v;
  }

 private:
  std::mt19937 rng_;
};

// One fp32 operation each, its result stored: a volatile float cannot be
// fused into the next operation, whatever the compiler's contraction setting
// (GCC would narrow a double round trip back to fp32 and contract that).
float RoundedMul(float a, float b) {
  volatile float p = a * b;
  return p;
}
float RoundedAdd(float a, float b) {
  volatile float s = a + b;
  return s;
}

float RoundedDot(const float* a, size_t stride_a, const float* b, size_t stride_b, size_t n) {
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) sum = RoundedAdd(sum, RoundedMul(a[i * stride_a], b[i * stride_b]));
  return sum;
}

bool SameBitsAs(float got, float want) { return std::memcmp(&got, &want, sizeof(float)) == 0; }

TEST(RefIsPortable, DotMatvecMatmul) {
  // Short rows, where a fused multiply-add changes the result often, and long
  // ones, where a vectorized main loop and its tail both run.
  PortableFiller f(1000);
  const size_t rows = 300, n = 3;
  for (size_t cols : {2, 3, 5, 8, 13, 771}) {
    const std::vector<float> w = f.Vector(rows * cols), x = f.Vector(n * cols);
    std::vector<float> yv(rows, kNaN), ym(n * rows, kNaN);
    Ref().matvec(w.data(), cols, x.data(), yv.data(), rows, cols);
    Ref().matmul(w.data(), cols, x.data(), cols, ym.data(), rows, rows, cols, n);
    size_t differ = 0;
    for (size_t r = 0; r < rows; ++r) {
      const float* wr = w.data() + r * cols;
      const float want = RoundedDot(wr, 1, x.data(), 1, cols);
      differ += !SameBitsAs(Ref().dot(wr, x.data(), cols), want);
      differ += !SameBitsAs(yv[r], want);
      for (size_t j = 0; j < n; ++j)
        differ += !SameBitsAs(ym[j * rows + r], RoundedDot(wr, 1, x.data() + j * cols, 1, cols));
    }
    EXPECT_EQ(differ, 0u) << "cols=" << cols << ": " << differ << " of " << rows * (n + 2)
                          << " dot/matvec/matmul results are not the fp32 sum of fp32 products "
                             "(contracted into fused multiply-adds?)";
  }
}

TEST(RefIsPortable, Vecmat) {
  PortableFiller f(1001);
  const size_t cols = 1000;
  for (size_t n : {2, 3, 300}) {
    const std::vector<float> a = f.Vector(n), v = f.Vector(n * cols);
    std::vector<float> out(cols, kNaN);
    Ref().vecmat(a.data(), v.data(), cols, out.data(), n, cols);
    size_t differ = 0;
    for (size_t c = 0; c < cols; ++c) differ += !SameBitsAs(out[c], RoundedDot(a.data(), 1, v.data() + c, cols, n));
    EXPECT_EQ(differ, 0u) << "n=" << n << ": " << differ << " of " << cols
                          << " vecmat results are not the fp32 sum of fp32 products (contracted into fused "
                             "multiply-adds?)";
  }
}

TEST(RefIsPortable, Rmsnorm) {
  PortableFiller f(1002);
  const float eps = 1e-5f;
  for (size_t n : {2, 3, 5, 64, 768}) {
    size_t differ = 0;
    for (int trial = 0; trial < 40; ++trial) {
      const std::vector<float> x = f.Vector(n), w = f.Vector(n);
      std::vector<float> out(n, kNaN);
      Ref().rmsnorm(x.data(), w.data(), out.data(), n, eps);
      float ss = RoundedDot(x.data(), 1, x.data(), 1, n);
      ss = static_cast<float>(static_cast<double>(ss) / static_cast<double>(static_cast<float>(n)));
      ss = RoundedAdd(ss, eps);
      ss = static_cast<float>(1.0 / static_cast<double>(static_cast<float>(std::sqrt(static_cast<double>(ss)))));
      for (size_t i = 0; i < n; ++i) differ += !SameBitsAs(out[i], RoundedMul(w[i], RoundedMul(ss, x[i])));
    }
    EXPECT_EQ(differ, 0u) << "n=" << n << ": " << differ << " of " << 40 * n
                          << " rmsnorm outputs differ from fp32 arithmetic";
  }
}

// The tolerance must be tight enough to notice a single missing term.
TEST(Tolerance, DetectsDroppedTerm) {
  Filler f(903);
  for (size_t n : {17, 257, 2048}) {
    std::vector<float> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = f.Uniform(-1, 1);
      b[i] = f.Uniform(-1, 1);
    }
    a[n - 1] = 0.5f;
    b[n - 1] = 0.5f;
    const float full = Ref().dot(a.data(), b.data(), n);
    const float dropped = Ref().dot(a.data(), b.data(), n - 1);
    const float scale = SumAbsProducts(a.data(), 1, b.data(), 1, n);
    EXPECT_FALSE(Close(dropped, full, scale, false)) << "n=" << n;
    EXPECT_FALSE(Close(full + 1.0f, full, 0.0f, true));
  }
}

// ---- dispatch ------------------------------------------------------------------------

TEST(Dispatch, BestIsAvailableAndNamed) {
  const std::vector<const KernelTable*> tables = AllTables();
  ASSERT_FALSE(tables.empty());
  EXPECT_EQ(tables.front(), &Best());
  bool found_best = false, found_ref = false;
  for (const KernelTable* t : tables) {
    found_best |= (t == &Best());
    found_ref |= (t == &Ref());
    ASSERT_NE(t->name, nullptr);
    EXPECT_EQ(ByName(t->name), t) << t->name;
    EXPECT_NE(t->matvec, nullptr);
    EXPECT_NE(t->matmul, nullptr);
    EXPECT_NE(t->vecmat, nullptr);
    EXPECT_NE(t->dot, nullptr);
    EXPECT_NE(t->rmsnorm, nullptr);
    EXPECT_NE(t->softmax, nullptr);
    EXPECT_NE(t->swiglu, nullptr);
    EXPECT_NE(t->add, nullptr);
  }
  EXPECT_TRUE(found_best);
  EXPECT_TRUE(found_ref);
  EXPECT_EQ(&Best(), &Best());  // resolved once
}

TEST(Dispatch, WeightKernelsByDtype) {
  for (const KernelTable* t : AllTables()) {
    EXPECT_NE(WeightKernelsFor(*t, TINYAI_DTYPE_F32), nullptr) << t->name;
    EXPECT_EQ(WeightKernelsFor(*t, -1), nullptr) << t->name;
    EXPECT_EQ(WeightKernelsFor(*t, kWeightDtypes), nullptr) << t->name;
  }
  // A dtype whose entry a table leaves empty has no products.
  KernelTable partial = Ref();
  partial.weights[TINYAI_DTYPE_F32].matmul = nullptr;
  EXPECT_EQ(WeightKernelsFor(partial, TINYAI_DTYPE_F32), nullptr);
}

TEST(Dispatch, ByName) {
  EXPECT_EQ(ByName("ref"), &Ref());
  EXPECT_EQ(ByName("best"), &Best());
  EXPECT_STREQ(Ref().name, "ref");
  EXPECT_EQ(ByName("nonexistent"), nullptr);
  EXPECT_EQ(ByName(""), nullptr);
  EXPECT_EQ(ByName(nullptr), nullptr);
}

// The kernel set this build targets, which Best() must report: NEON on AArch64
// (with sdot first where the CPU has it) and on 32-bit ARM built for NEON (-mfpu=neon), the reference kernels alone
// on 32-bit ARM without NEON, AVX-512 (with VNNI and AMX, VNNI, or neither), AVX2+FMA and SSE2
// on x86-64 by what the CPU offers. Asked of the compiler (the test's own predefined macros), not of the
// build's choice of sources: a build that lost its SIMD kernels would still
// pass every parity test, which would then compare Ref() with itself.
std::vector<std::string> ExpectedTables() {
#if defined(__aarch64__) && defined(__linux__)
  // The dot-product table where the kernel reports ARMv8.2's sdot
  // (HWCAP_ASIMDDP; qemu-user's default CPU has it).
  if ((getauxval(AT_HWCAP) & (1ul << 20)) != 0) return {"neon64dot", "neon64", "ref"};
  return {"neon64", "ref"};
#elif defined(__aarch64__)
  return {"neon64", "ref"};
#elif defined(__arm__) && (defined(__ARM_NEON) || defined(__ARM_NEON__))
  return {"neon", "ref"};
#elif defined(__arm__)
  return {"ref"};
#elif defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  std::vector<std::string> tables;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd")) {
    if (__builtin_cpu_supports("avx512vnni")) {
#if defined(__linux__) && defined(SYS_arch_prctl)
      // AMX also needs the kernel to grant this process the tile data.
      if (__builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-int8") &&
          syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0) {
        tables.push_back("avx512amx");
      }
#endif
      tables.push_back("avx512vnni");
    }
    tables.push_back("avx512");
  }
  if (avx2) tables.push_back("avx2+fma");
  tables.push_back("sse2");
  tables.push_back("ref");
  return tables;
#else
  return {};  // a target this test does not know: not checked
#endif
}

// TINYAI_KERNELS=NAME caps the set at NAME (dispatch.cc), so this test also
// holds when a run is pinned to a table.
std::vector<std::string> CappedByEnvironment(std::vector<std::string> tables) {
  const char* name = std::getenv("TINYAI_KERNELS");
  const auto at = name == nullptr ? tables.end() : std::find(tables.begin(), tables.end(), std::string(name));
  if (at != tables.end()) tables.erase(tables.begin(), at);
  return tables;
}

TEST(Dispatch, TargetKernelSet) {
  const std::vector<std::string> target = ExpectedTables();
  const std::vector<std::string> expected = CappedByEnvironment(target);
  if (expected.empty()) GTEST_SKIP() << "no expected kernel set for this target";
  // Pinned to the reference on a target with SIMD tables, every parity test
  // would compare Ref() with itself and pass.
  ASSERT_FALSE(target.size() > 1 && expected.size() == 1)
      << "TINYAI_KERNELS=" << std::getenv("TINYAI_KERNELS")
      << " leaves the reference kernels alone, so no SIMD table is checked against them: unset it for the tests";
  // scripts/test.sh names the table each emulated CPU must run (qemu's
  // default AArch64 CPU: neon64dot; a Cortex-A53: neon64), so a CPU model
  // changed under it cannot pass as the other.
  if (const char* want = std::getenv("TINYAI_EXPECT_KERNELS")) {
    EXPECT_STREQ(Best().name, want) << "TINYAI_EXPECT_KERNELS: this CPU does not run the table the test run expects";
  }
  std::vector<std::string> names;
  for (const KernelTable* t : AllTables()) names.push_back(t->name);
  EXPECT_EQ(names, expected);
  EXPECT_STREQ(Best().name, expected.front().c_str());
  if (expected.front() != "ref") {
    EXPECT_NE(&Best(), &Ref()) << "the SIMD kernels must be what the model runs";
  } else {
    EXPECT_EQ(&Best(), &Ref());
  }
  std::printf("[          ] kernels: best %s, %zu table(s)\n", Best().name, names.size());
}

TEST(Dispatch, AvailableTablesCapacity) {
  const size_t total = AvailableTables(nullptr, 0);
  EXPECT_GE(total, 1u);
  const KernelTable* one[1] = {nullptr};
  EXPECT_EQ(AvailableTables(one, 1), total);
  EXPECT_EQ(one[0], &Best());
}

}  // namespace

// Print tables by name in gtest messages (found by argument-dependent lookup).
void PrintTo(const KernelTable* t, std::ostream* os) { *os << (t ? t->name : "null"); }

}  // namespace kernels
}  // namespace tinyai
