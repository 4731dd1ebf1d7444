// AVX-512 (F, BW, DQ, VL, with F16C and FMA) instantiation of the xsimd
// kernels: 16 floats a register and 32 registers; and the grouped dtypes'
// integer products without VNNI (grouped_avx512.h). CMake compiles this file
// on x86-64 only, with -mavx512f -mavx512bw -mavx512dq -mavx512vl -mf16c
// -mfma; dispatch.cc calls it only when the CPU and the OS support them.
#include "kernels/simd/grouped_avx512.h"
#include "kernels/simd/kernels_simd.h"

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512DQ__) || !defined(__AVX512VL__) || \
    !defined(__F16C__) || !defined(__FMA__)
#error "kernels_x86_avx512.cc must be compiled with -mavx512f -mavx512bw -mavx512dq -mavx512vl -mf16c -mfma"
#endif

TINYAI_KERNELS_INSTANTIATE(xsimd::avx512bw);

namespace tinyai {
namespace kernels {

const KernelTable& X86Avx512Table() {
  static constexpr KernelTable kTable = simd::MakeTable<xsimd::avx512bw, avx512::Grouped<false>>("avx512");
  return kTable;
}

}  // namespace kernels
}  // namespace tinyai
