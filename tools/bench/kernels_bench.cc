// Kernel microbenchmarks (Google Benchmark), single thread; every _cold
// benchmark and the AVX probe also run on two threads (".../threads:2", each
// thread its own buffers: both cores reading DRAM, as a 2-thread decode).
//
//   matvec/<table>/<rows>x<cols>        one matrix, read again each iteration
//                                       (stays in cache when it fits)
//   matvec_cold/<table>/<rows>x<cols>   rotates through copies totalling
//                                       >= 256 MiB, so every read comes from
//                                       DRAM, as in decoding a real model
//   matmul/<table>/<rows>x<cols>/n:N    N (8, 16, 32) vectors against the same rows
//   matvec_f16/..., matvec_f16_cold/..., matmul_f16/.../n:N
//                                       the same over IEEE half weights (the
//                                       table's f16 weight kernels)
//   matvec_q/<table>/<dtype>/..., matvec_q_cold/..., matmul_q/.../n:N (8, 32)
//                                       the grouped dtypes (q8_g32, q4_g32,
//                                       q4nl_g32): the input quantized once
//                                       per call, then the integer products
//   matvec_panels/..., matmul_panels/.../n:N, matmul_q_cold/..., matmul_panels_cold/...
//                                       the same over rows packed in panels
//                                       (common/panels.h), where the table
//                                       has a panel product
//   matvec_q8_apart/avx2+fma/q8_g32/..., matvec_q8_apart_cold/...
//                                       q8_g32 with each row's scales apart
//                                       from its codes: a layout the library
//                                       does not use, against matvec_q's
//                                       (whether repacking q8 rows would pay)
//   vecmat/<table>/..., vecmat_cold/... attention-shaped weighted row sum
//   scores/<table>/..., scores_cold/... attention scores: q against a head's
//                                       key rows (fp32 matvec, 64 columns);
//                                       _cold: a head's rows from DRAM
//   memory_read_probe/...               streams a 256 MiB buffer with wide
//                                       loads: the machine's read bandwidth
//
// Shapes: the 110M model's (768 and 2,048 wide, the 32,000-row classifier)
// and the ~1B model's feed-forward (5,632 x 2,048 and 2,048 x 5,632).
//
// bytes_per_second counts weight (matrix) bytes read once per call (4 per
// f32 weight, 2 per f16, 34/32 and 18/32 for the grouped dtypes), so matvec
// figures compare directly with the probe; items_per_second counts weights.
#include <benchmark/benchmark.h>

#include <stdlib.h>
#include <string.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <xsimd/xsimd.hpp>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "common/groups.h"
#include "common/half.h"
#include "quant/quantize.h"
#include "kernels/kernels.h"
#include "tinyai/types.h"

namespace {

using tinyai::kernels::AvailableTables;
using tinyai::kernels::KernelTable;

constexpr size_t kProbeBytes = size_t{256} << 20;

// 64-byte aligned, zero-initialized buffer of n values (pages touched up
// front; one spare line so vector loads past the last f16 value stay inside).
template <class T>
struct AlignedArray {
  explicit AlignedArray(size_t n) : count(n) {
    const size_t bytes = (n * sizeof(T) + 63) / 64 * 64 + 64;
    data = static_cast<T*>(aligned_alloc(64, bytes));
    memset(data, 0, bytes);
  }
  ~AlignedArray() { free(data); }
  AlignedArray(const AlignedArray&) = delete;
  AlignedArray& operator=(const AlignedArray&) = delete;
  T* data;
  size_t count;
};
using AlignedFloats = AlignedArray<float>;
using AlignedHalves = AlignedArray<uint16_t>;

void FillRandom(float* p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) p[i] = dist(rng);
}

std::vector<const KernelTable*> Tables() {
  const KernelTable* t[16];
  size_t n = AvailableTables(t, 16);
  if (n > 16) n = 16;
  return std::vector<const KernelTable*>(t, t + n);
}

void BM_Matvec(benchmark::State& state, const KernelTable* t, size_t rows, size_t cols, bool cold) {
  const size_t mat = rows * cols;
  size_t copies = 1;
  if (cold) copies = (kProbeBytes + mat * sizeof(float) - 1) / (mat * sizeof(float));
  AlignedFloats w(mat * copies), x(cols), y(rows);
  FillRandom(w.data, mat * copies, 1);
  FillRandom(x.data, cols, 2);
  size_t k = 0;
  for (auto _ : state) {
    t->matvec(w.data + k * mat, cols, x.data, y.data, rows, cols);
    benchmark::DoNotOptimize(y.data);
    benchmark::ClobberMemory();
    if (++k == copies) k = 0;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * mat * sizeof(float));
}

// The same products over f16 weights, through the table's weight kernels.
void FillRandomHalves(uint16_t* p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t i = 0; i < n; ++i) p[i] = tinyai::FloatToHalf(dist(rng));
}

void BM_MatvecF16(benchmark::State& state, const KernelTable* t, size_t rows, size_t cols, bool cold) {
  const tinyai::kernels::WeightKernels& f16 = t->weights[TINYAI_DTYPE_F16];
  if (!f16.matvec) {
    state.SkipWithError("no f16 kernels in this table");
    return;
  }
  const size_t mat = rows * cols;
  size_t copies = 1;
  if (cold) copies = (kProbeBytes + mat * sizeof(uint16_t) - 1) / (mat * sizeof(uint16_t));
  AlignedHalves w(mat * copies);
  AlignedFloats x(cols), y(rows);
  FillRandomHalves(w.data, mat * copies, 1);
  FillRandom(x.data, cols, 2);
  const uint8_t* base = reinterpret_cast<const uint8_t*>(w.data);
  const size_t row_bytes = cols * sizeof(uint16_t);
  size_t k = 0;
  for (auto _ : state) {
    f16.matvec(base + k * mat * sizeof(uint16_t), row_bytes, x.data, y.data, rows, cols);
    benchmark::DoNotOptimize(y.data);
    benchmark::ClobberMemory();
    if (++k == copies) k = 0;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * mat * sizeof(uint16_t));
}

// Rows of a grouped dtype (random weights, encoded by the library's
// encoder) against n inputs quantized as the dtype's products take them.
struct GroupedMatrix {
  GroupedMatrix(int32_t dtype, size_t rows, size_t cols, size_t copies)
      : row_bytes(tinyai::GroupedRowBytes(dtype, cols)), bytes(rows * row_bytes), data(bytes * copies) {
    std::vector<float> values(rows * cols);
    FillRandom(values.data(), values.size(), 5);
    tinyai::quant::EncodeRows(dtype, values.data(), rows, cols, reinterpret_cast<uint8_t*>(data.data), nullptr);
    for (size_t k = 1; k < copies; ++k) memcpy(data.data + k * bytes, data.data, bytes);
  }
  size_t row_bytes, bytes;
  AlignedArray<uint8_t> data;
};

struct GroupedInput {
  GroupedInput(const KernelTable* t, tinyai::InputForm form, size_t cols, size_t n)
      : bytes(tinyai::QuantizedInputBytes(form, cols)), data(bytes * n) {
    std::vector<float> x(cols);
    for (size_t j = 0; j < n; ++j) {
      FillRandom(x.data(), cols, 6 + static_cast<uint32_t>(j));
      uint8_t* at = data.data + j * bytes;
      if (form == tinyai::kInputInt8) t->quantize_input(x.data(), cols, reinterpret_cast<tinyai::InputGroup*>(at));
      else t->quantize_input16(x.data(), cols, reinterpret_cast<tinyai::InputGroup16*>(at));
    }
  }
  size_t bytes;
  AlignedArray<uint8_t> data;
};

// panels: the rows as the weight cache holds them for a table with a panel
// product (common/panels.h; random bytes either way, rows a multiple of 8).
void BM_MatvecQ(benchmark::State& state, const KernelTable* t, int32_t dtype, size_t rows, size_t cols, bool cold,
                bool panels) {
  const tinyai::kernels::WeightKernels& k = t->weights[dtype];
  const size_t bytes = rows * tinyai::GroupedRowBytes(dtype, cols);
  const size_t copies = cold ? (kProbeBytes + bytes - 1) / bytes : 1;
  GroupedMatrix w(dtype, rows, cols, copies);
  GroupedInput x(t, k.input, cols, 1);
  AlignedFloats y(rows);
  std::vector<float> values(cols);
  FillRandom(values.data(), cols, 7);
  size_t c = 0;
  for (auto _ : state) {
    // The input is quantized in every call, as a product does.
    if (k.input == tinyai::kInputInt8) t->quantize_input(values.data(), cols, reinterpret_cast<tinyai::InputGroup*>(x.data.data));
    else t->quantize_input16(values.data(), cols, reinterpret_cast<tinyai::InputGroup16*>(x.data.data));
    if (panels) k.matvec_panels(w.data.data + c * w.bytes, w.row_bytes, x.data.data, y.data, rows / 8, cols);
    else k.matvec_q(w.data.data + c * w.bytes, w.row_bytes, x.data.data, y.data, rows, cols);
    benchmark::DoNotOptimize(y.data);
    benchmark::ClobberMemory();
    if (++c == copies) c = 0;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(rows * cols));
}

// panels: matmul_panels over the rows as panels (matvec_panels input by
// input where the table has no matmul_panels). cold: the rows from DRAM,
// as a prompt pass reads them.
void BM_MatmulQ(benchmark::State& state, const KernelTable* t, int32_t dtype, size_t rows, size_t cols, size_t n,
                bool panels, bool cold) {
  const tinyai::kernels::WeightKernels& k = t->weights[dtype];
  const size_t bytes = rows * tinyai::GroupedRowBytes(dtype, cols);
  const size_t copies = cold ? (kProbeBytes + bytes - 1) / bytes : 1;
  GroupedMatrix w(dtype, rows, cols, copies);
  GroupedInput x(t, k.input, cols, n);
  AlignedFloats y(n * rows);
  const size_t groups = tinyai::GroupsPerRow(cols);
  size_t c = 0;
  for (auto _ : state) {
    const uint8_t* m = w.data.data + c * w.bytes;
    if (!panels) {
      k.matmul_q(m, w.row_bytes, x.data.data, groups, y.data, rows, rows, cols, n);
    } else if (k.matmul_panels != nullptr) {
      k.matmul_panels(m, w.row_bytes, x.data.data, groups, y.data, rows, rows / 8, cols, n);
    } else {
      for (size_t j = 0; j < n; ++j) {
        k.matvec_panels(m, w.row_bytes, x.data.data + j * x.bytes, y.data + j * rows, rows / 8, cols);
      }
    }
    benchmark::DoNotOptimize(y.data);
    benchmark::ClobberMemory();
    if (++c == copies) c = 0;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(rows * cols * n));
}

void BM_MatmulF16(benchmark::State& state, const KernelTable* t, size_t rows, size_t cols, size_t n) {
  const tinyai::kernels::WeightKernels& f16 = t->weights[TINYAI_DTYPE_F16];
  if (!f16.matmul) {
    state.SkipWithError("no f16 kernels in this table");
    return;
  }
  AlignedHalves w(rows * cols);
  AlignedFloats x(n * cols), y(n * rows);
  FillRandomHalves(w.data, rows * cols, 3);
  FillRandom(x.data, n * cols, 4);
  for (auto _ : state) {
    f16.matmul(reinterpret_cast<const uint8_t*>(w.data), cols * sizeof(uint16_t), x.data, cols, y.data, rows, rows,
               cols, n);
    benchmark::DoNotOptimize(y.data);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * rows * cols * sizeof(uint16_t));
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * rows * cols * n * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_Matmul(benchmark::State& state, const KernelTable* t, size_t rows, size_t cols, size_t n) {
  AlignedFloats w(rows * cols), x(n * cols), y(n * rows);
  FillRandom(w.data, rows * cols, 3);
  FillRandom(x.data, n * cols, 4);
  for (auto _ : state) {
    t->matmul(w.data, cols, x.data, cols, y.data, rows, rows, cols, n);
    benchmark::DoNotOptimize(y.data);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * rows * cols * sizeof(float));
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * rows * cols * n * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// Attention shape: softmax weights over `seq` positions times V rows of one
// head (head_size columns, row stride ldv: the KV cache holds a head's rows
// one after the other, ldv = head_size). cold: rotates through copies
// totalling kProbeBytes, so every call reads its rows from DRAM, as a decode
// token's attention does once the weights have passed through the caches.
void BM_Vecmat(benchmark::State& state, const KernelTable* t, size_t seq, size_t cols, size_t ldv, bool cold) {
  const size_t mat = seq * ldv;
  const size_t copies = cold ? (kProbeBytes + mat * sizeof(float) - 1) / (mat * sizeof(float)) : 1;
  AlignedFloats a(seq), v(copies * mat), out(cols);
  FillRandom(a.data, seq, 5);
  FillRandom(v.data, copies * mat, 6);
  size_t i = 0;
  for (auto _ : state) {
    t->vecmat(a.data, v.data + i * mat, ldv, out.data, seq, cols);
    i = i + 1 == copies ? 0 : i + 1;
    benchmark::DoNotOptimize(out.data);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * seq * cols * sizeof(float));
}

// Attention scores: q against seq key rows of cols values (a head's keys
// one after the other, as the KV cache holds them), with the table's fp32
// matvec. cold: as BM_Vecmat.
void BM_Scores(benchmark::State& state, const KernelTable* t, size_t seq, size_t cols, bool cold) {
  const size_t mat = seq * cols;
  const size_t copies = cold ? (kProbeBytes + mat * sizeof(float) - 1) / (mat * sizeof(float)) : 1;
  AlignedFloats q(cols), k(copies * mat), att(seq);
  FillRandom(q.data, cols, 5);
  FillRandom(k.data, copies * mat, 6);
  size_t i = 0;
  for (auto _ : state) {
    t->matvec(k.data + i * mat, cols, q.data, att.data, seq, cols);
    i = i + 1 == copies ? 0 : i + 1;
    benchmark::DoNotOptimize(att.data);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * seq * cols * sizeof(float));
}

// Read bandwidth with the widest loads the default build has (xsimd's default
// arch: SSE2 on x86-64, NEON on ARM), eight independent accumulators.
void BM_MemoryReadProbe(benchmark::State& state) {
  using B = xsimd::batch<float>;
  constexpr size_t S = B::size;
  AlignedFloats buf(kProbeBytes / sizeof(float));
  const size_t n = buf.count;
  for (auto _ : state) {
    B a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f), a4(0.0f), a5(0.0f), a6(0.0f), a7(0.0f);
    for (size_t i = 0; i + 8 * S <= n; i += 8 * S) {
      const float* p = buf.data + i;
      a0 += B::load_aligned(p);
      a1 += B::load_aligned(p + S);
      a2 += B::load_aligned(p + 2 * S);
      a3 += B::load_aligned(p + 3 * S);
      a4 += B::load_aligned(p + 4 * S);
      a5 += B::load_aligned(p + 5 * S);
      a6 += B::load_aligned(p + 6 * S);
      a7 += B::load_aligned(p + 7 * S);
    }
    benchmark::DoNotOptimize(xsimd::hadd(((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kProbeBytes);
}

#if defined(__x86_64__) || defined(__i386__)
// The same with 256-bit AVX loads, when the CPU has AVX.
__attribute__((target("avx"))) float SumAvx(const float* p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  for (size_t i = 0; i + 64 <= n; i += 64) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
    a4 = _mm256_add_ps(a4, _mm256_load_ps(p + i + 32));
    a5 = _mm256_add_ps(a5, _mm256_load_ps(p + i + 40));
    a6 = _mm256_add_ps(a6, _mm256_load_ps(p + i + 48));
    a7 = _mm256_add_ps(a7, _mm256_load_ps(p + i + 56));
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, s);
  return tmp[0] + tmp[1] + tmp[2] + tmp[3] + tmp[4] + tmp[5] + tmp[6] + tmp[7];
}

void BM_MemoryReadProbeAvx(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx")) {
    state.SkipWithError("CPU has no AVX");
    return;
  }
  AlignedFloats buf(kProbeBytes / sizeof(float));
  for (auto _ : state) benchmark::DoNotOptimize(SumAvx(buf.data, buf.count));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kProbeBytes);
}
#endif

#if defined(__x86_64__)
// q8_g32 with each row's scales apart from its codes: a layout the library
// does not use (the weight cache holds q8_g32 rows as stored, 34-byte Q8_0
// groups), measured to decide whether having the cache repack q8 rows would
// pay. Row: the G halves (2G bytes), then the G groups' 32 codes (the same
// bytes in all). The library's AVX2 kernel (grouped_avx2.h, MatvecQ8) gathers
// eight groups' scales from a 34-byte stride with vpinsrw and sums the eight
// groups' int32 lanes with vphaddd; here a 16-byte load gives eight scales,
// multiplied by the input's into a buffer before the row, and each group is
// one conversion and one multiply-add (four chains). Everything else is
// MatvecQ8's: the input's scales copied once per call, its codes read where
// they lie (unaligned, 68 bytes apart), the rows 4 ahead prefetched into L2.
// Groups a multiple of 8, at most 256.
constexpr size_t kApartMaxGroups = 256;

__attribute__((target("avx2,fma,f16c"))) void MatvecQ8ScalesApart(const uint8_t* w, size_t row_bytes,
                                                                   const tinyai::InputGroup16* x, float* y,
                                                                   size_t rows, size_t groups) {
  alignas(32) float dx[kApartMaxGroups], scale[kApartMaxGroups];
  for (size_t g = 0; g < groups; ++g) dx[g] = x[g].d;
  for (size_t r = 0; r < rows; ++r) {
    const uint8_t* row = w + r * row_bytes;
    const uint8_t* ahead = r + 4 < rows ? row + 4 * row_bytes : nullptr;
    for (size_t g = 0; g < groups; g += 8) {
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * g)));
      _mm256_store_ps(scale + g, _mm256_mul_ps(dw, _mm256_load_ps(dx + g)));
    }
    const uint8_t* codes = row + 2 * groups;
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (size_t g = 0; g < groups; g += 8) {
      if (ahead != nullptr) {
        for (size_t line = 0; line < 8 * tinyai::kQ8GroupBytes; line += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(ahead + g * tinyai::kQ8GroupBytes + line), _MM_HINT_T1);
        }
      }
      for (size_t k = 0; k < 8; ++k) {
        const uint8_t* c = codes + (g + k) * tinyai::kGroup;
        const __m256i* q = reinterpret_cast<const __m256i*>(x[g + k].q);
        const __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c)));
        const __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + 16)));
        const __m256i dot = _mm256_add_epi32(_mm256_madd_epi16(w0, _mm256_loadu_si256(q)),
                                             _mm256_madd_epi16(w1, _mm256_loadu_si256(q + 1)));
        a[k % 4] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_broadcast_ss(scale + g + k), a[k % 4]);
      }
    }
    const __m256 v = _mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3]));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    y[r] = _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
  }
}

// t: the avx2+fma table (its q8_g32 input quantization, as matvec_q's).
void BM_MatvecQ8ScalesApart(benchmark::State& state, const KernelTable* t, size_t rows, size_t cols, bool cold) {
  const size_t groups = tinyai::GroupsPerRow(cols);
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !__builtin_cpu_supports("f16c") ||
      groups % 8 != 0 || groups > kApartMaxGroups) {
    state.SkipWithError("needs AVX2, FMA and F16C, and a multiple of 256 columns up to 8,192");
    return;
  }
  const size_t bytes = rows * tinyai::GroupedRowBytes(TINYAI_DTYPE_Q8_G32, cols);
  const size_t copies = cold ? (kProbeBytes + bytes - 1) / bytes : 1;
  GroupedMatrix w(TINYAI_DTYPE_Q8_G32, rows, cols, copies);
  AlignedArray<tinyai::InputGroup16> x(groups);
  AlignedFloats y(rows), expected(rows);
  std::vector<float> values(cols);
  FillRandom(values.data(), cols, 7);
  t->quantize_input16(values.data(), cols, x.data);
  t->weights[TINYAI_DTYPE_Q8_G32].matvec_q(w.data.data, w.row_bytes, x.data, expected.data, rows, cols);
  std::vector<uint8_t> row(w.row_bytes);
  for (size_t r = 0; r < rows * copies; ++r) {  // each row's scales first, then its codes
    uint8_t* at = w.data.data + r * w.row_bytes;
    memcpy(row.data(), at, w.row_bytes);
    for (size_t g = 0; g < groups; ++g) {
      memcpy(at + 2 * g, row.data() + g * tinyai::kQ8GroupBytes, 2);
      memcpy(at + 2 * groups + g * tinyai::kGroup, row.data() + g * tinyai::kQ8GroupBytes + 2, tinyai::kGroup);
    }
  }
  // The same products as the library's kernel, within fp32 rounding.
  MatvecQ8ScalesApart(w.data.data, w.row_bytes, x.data, y.data, rows, groups);
  for (size_t r = 0; r < rows; ++r) {
    if (!(std::fabs(y.data[r] - expected.data[r]) <= 1e-4f * (1.0f + std::fabs(expected.data[r])))) {
      state.SkipWithError("the scales-apart kernel disagrees with matvec_q");
      return;
    }
  }
  size_t c = 0;
  for (auto _ : state) {
    t->quantize_input16(values.data(), cols, x.data);
    MatvecQ8ScalesApart(w.data.data + c * w.bytes, w.row_bytes, x.data, y.data, rows, groups);
    benchmark::DoNotOptimize(y.data);
    benchmark::ClobberMemory();
    if (++c == copies) c = 0;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(rows * cols));
}
#endif

// Registers b as it is and, when cold (from DRAM), once more on two threads
// ("/threads:2": each thread its own copies, bytes_per_second summed), as a
// 2-thread decode reads DRAM; a kernel that keeps up with one core's share of
// the bandwidth alone may not when both cores stream.
template <class... Args>
void Register(const std::string& name, bool cold, Args... args) {
  for (int threads = 1; threads <= (cold ? 2 : 1); ++threads) {
    benchmark::internal::Benchmark* b =
        benchmark::RegisterBenchmark(name.c_str(), args...)->Unit(benchmark::kMicrosecond)->UseRealTime();
    if (threads == 2) b->Threads(2);
  }
}

void RegisterAll() {
  struct Shape {
    size_t rows, cols;
  };
  const Shape shapes[] = {{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}, {5632, 2048}, {2048, 5632}};
  const std::vector<const KernelTable*> tables = Tables();

  benchmark::RegisterBenchmark("memory_read_probe/xsimd_default_arch", BM_MemoryReadProbe)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
#if defined(__x86_64__) || defined(__i386__)
  benchmark::RegisterBenchmark("memory_read_probe/avx256", BM_MemoryReadProbeAvx)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("memory_read_probe/avx256", BM_MemoryReadProbeAvx)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->Threads(2);
#endif
  for (bool cold : {false, true}) {
    for (const Shape& s : shapes) {
      if (cold && s.rows == 32000) continue;  // 98 MB already misses every cache
      for (const KernelTable* t : tables) {
        std::string name = std::string(cold ? "matvec_cold/" : "matvec/") + t->name + "/" +
                           std::to_string(s.rows) + "x" + std::to_string(s.cols);
        Register(name, cold, BM_Matvec, t, s.rows, s.cols, cold);
      }
    }
  }
  for (const Shape& s : shapes) {
    for (size_t n : {size_t{8}, size_t{16}, size_t{32}}) {  // 16: one AVX-512 block of inputs; 32: a prompt pass
      for (const KernelTable* t : tables) {
        std::string name = std::string("matmul/") + t->name + "/" + std::to_string(s.rows) + "x" +
                           std::to_string(s.cols) + "/n:" + std::to_string(n);
        benchmark::RegisterBenchmark(name.c_str(), BM_Matmul, t, s.rows, s.cols, n)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
  for (bool cold : {false, true}) {
    for (const Shape& s : shapes) {
      if (cold && s.rows == 32000) continue;  // 49 MB already misses every cache
      for (const KernelTable* t : tables) {
        if (!t->weights[TINYAI_DTYPE_F16].matvec) continue;
        std::string name = std::string(cold ? "matvec_f16_cold/" : "matvec_f16/") + t->name + "/" +
                           std::to_string(s.rows) + "x" + std::to_string(s.cols);
        Register(name, cold, BM_MatvecF16, t, s.rows, s.cols, cold);
      }
    }
  }
  for (const Shape& s : shapes) {
    for (size_t n : {size_t{8}, size_t{16}, size_t{32}}) {
      for (const KernelTable* t : tables) {
        if (!t->weights[TINYAI_DTYPE_F16].matmul) continue;
        std::string name = std::string("matmul_f16/") + t->name + "/" + std::to_string(s.rows) + "x" +
                           std::to_string(s.cols) + "/n:" + std::to_string(n);
        benchmark::RegisterBenchmark(name.c_str(), BM_MatmulF16, t, s.rows, s.cols, n)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
  for (int32_t dtype : {TINYAI_DTYPE_Q8_G32, TINYAI_DTYPE_Q4_G32, TINYAI_DTYPE_Q4NL_G32, TINYAI_DTYPE_Q4_K,
                        TINYAI_DTYPE_Q5_K, TINYAI_DTYPE_Q6_K, TINYAI_DTYPE_Q5_G32, TINYAI_DTYPE_Q5M_G32}) {
    const std::string d = tinyaiDTypeName(static_cast<TinyAIDType>(dtype));
    for (bool cold : {false, true}) {
      for (const Shape& s : shapes) {
        if (cold && s.rows == 32000) continue;
        for (const KernelTable* t : tables) {
          for (bool panels : {false, true}) {
            if (panels ? !t->weights[dtype].matvec_panels : !t->weights[dtype].matvec_q) continue;
            std::string name = std::string(panels ? "matvec_panels" : "matvec_q") + (cold ? "_cold/" : "/") + t->name +
                               "/" + d + "/" + std::to_string(s.rows) + "x" + std::to_string(s.cols);
            Register(name, cold, BM_MatvecQ, t, dtype, s.rows, s.cols, cold, panels);
          }
        }
      }
    }
    for (bool cold : {false, true}) {
      for (const Shape& s : shapes) {
        if (cold && s.rows == 32000) continue;
        for (size_t n : {size_t{8}, size_t{32}}) {  // 32: a prompt pass
          if (cold && n != 32) continue;
          for (const KernelTable* t : tables) {
            for (bool panels : {false, true}) {
              if (panels ? !t->weights[dtype].matvec_panels : !t->weights[dtype].matmul_q) continue;
              std::string name = std::string(panels ? "matmul_panels" : "matmul_q") + (cold ? "_cold/" : "/") + t->name +
                                 "/" + d + "/" + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                                 "/n:" + std::to_string(n);
              benchmark::RegisterBenchmark(name.c_str(), BM_MatmulQ, t, dtype, s.rows, s.cols, n, panels, cold)
                  ->Unit(benchmark::kMicrosecond)
                  ->UseRealTime();
            }
          }
        }
      }
    }
  }
#if defined(__x86_64__)
  if (const KernelTable* t = tinyai::kernels::ByName("avx2+fma")) {  // null where the CPU lacks AVX2
    for (bool cold : {false, true}) {
      for (const Shape& s : shapes) {
        if (cold && s.rows == 32000) continue;
        std::string name = std::string(cold ? "matvec_q8_apart_cold/" : "matvec_q8_apart/") + t->name + "/q8_g32/" +
                           std::to_string(s.rows) + "x" + std::to_string(s.cols);
        Register(name, cold, BM_MatvecQ8ScalesApart, t, s.rows, s.cols, cold);
      }
    }
  }
#endif
  for (const KernelTable* t : tables) {
    std::string name = std::string("vecmat/") + t->name + "/seq:1024,head:64,ld:768";
    benchmark::RegisterBenchmark(name.c_str(), BM_Vecmat, t, size_t{1024}, size_t{64}, size_t{768}, false)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    for (bool cold : {false, true}) {
      name = std::string(cold ? "vecmat_cold/" : "vecmat/") + t->name + "/seq:256,head:64,ld:64";
      benchmark::RegisterBenchmark(name.c_str(), BM_Vecmat, t, size_t{256}, size_t{64}, size_t{64}, cold)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
      name = std::string(cold ? "scores_cold/" : "scores/") + t->name + "/seq:256,head:64";
      benchmark::RegisterBenchmark(name.c_str(), BM_Scores, t, size_t{256}, size_t{64}, cold)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
