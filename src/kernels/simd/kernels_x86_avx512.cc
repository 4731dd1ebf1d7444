// AVX-512 (F, BW, DQ, VL, with F16C and FMA) instantiation of the xsimd
// kernels: 16 floats a register and 32 registers; and the grouped dtypes'
// integer products without VNNI (grouped_avx512.h). CMake compiles this file
// on x86-64 only, with -mavx512f -mavx512bw -mavx512dq -mavx512vl -mf16c
// -mfma; dispatch.cc calls it only when the CPU and the OS support them.
#include "kernels/simd/grouped_avx512.h"
#include "kernels/simd/kernels_simd.h"
#include "kernels/simd/matmul_avx512.h"

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512DQ__) || !defined(__AVX512VL__) || \
    !defined(__F16C__) || !defined(__FMA__)
#error "kernels_x86_avx512.cc must be compiled with -mavx512f -mavx512bw -mavx512dq -mavx512vl -mf16c -mfma"
#endif

TINYAI_KERNELS_INSTANTIATE(xsimd::avx512bw);

namespace tinyai {
namespace kernels {

namespace {

using Fns = simd::TableFns<xsimd::avx512bw>;

// Fewer inputs than this leave too many lanes of MatmulLanes idle: the
// xsimd tiles (dot products along the rows) take them.
constexpr size_t kMinLaneInputs = 12;

void Matmul(const float* w, size_t ldw, const float* x, size_t ldx, float* y, size_t ldy, size_t rows, size_t cols,
            size_t n) {
  if (n < kMinLaneInputs) return Fns::Matmul(w, ldw, x, ldx, y, ldy, rows, cols, n);
  avx512::MatmulLanes(w, ldw, x, ldx, y, ldy, rows, cols, n);
}

void MatmulF32(const uint8_t* w, size_t row_bytes, const float* x, size_t ldx, float* y, size_t ldy, size_t rows,
               size_t cols, size_t n) {
  Matmul(reinterpret_cast<const float*>(w), row_bytes / sizeof(float), x, ldx, y, ldy, rows, cols, n);
}

void MatmulF16(const uint8_t* w, size_t row_bytes, const float* x, size_t ldx, float* y, size_t ldy, size_t rows,
               size_t cols, size_t n) {
  if (n < kMinLaneInputs) return Fns::MatmulF16(w, row_bytes, x, ldx, y, ldy, rows, cols, n);
  avx512::MatmulLanesHalves(reinterpret_cast<const uint16_t*>(w), row_bytes / sizeof(uint16_t), x, ldx, y, ldy, rows,
                            cols, n);
}

}  // namespace

const KernelTable& X86Avx2FmaTable();

const KernelTable& X86Avx512Table() {
  static const KernelTable kTable = [] {
    KernelTable t = simd::MakeTable<xsimd::avx512bw, avx512::Grouped<false>>("avx512");
    t.matmul = &Matmul;
    t.weights[TINYAI_DTYPE_F32].matmul = &MatmulF32;
    t.weights[TINYAI_DTYPE_F16].matmul = &MatmulF16;
    // The f16 matvec at 8 lanes: on a Zen 4 host (512-bit operations as
    // two halves) the AVX2 kernel widened halves 1.2x faster in cache, and
    // the 110M f16 decode ran 1.10x faster with it (4 rounds, 4 of 4
    // faster; docs/benchmarks.md).
    t.weights[TINYAI_DTYPE_F16].matvec = X86Avx2FmaTable().weights[TINYAI_DTYPE_F16].matvec;
    return t;
  }();
  return kTable;
}

}  // namespace kernels
}  // namespace tinyai
