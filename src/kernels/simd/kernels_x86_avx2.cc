// AVX2 + FMA instantiation of the xsimd kernels (with F16C for f16 weights),
// and the integer products of the grouped dtypes (grouped_avx2.h).
// CMake compiles this file on x86-64 only, with -mavx2 -mfma -mf16c;
// dispatch.cc calls it only when the CPU reports all three.
#include "kernels/simd/grouped_avx2.h"
#include "kernels/simd/kernels_simd.h"

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "kernels_x86_avx2.cc must be compiled with -mavx2 -mfma -mf16c"
#endif

TINYAI_KERNELS_INSTANTIATE(xsimd::fma3<xsimd::avx2>);

namespace tinyai {
namespace kernels {

const KernelTable& X86Avx2FmaTable() {
  static constexpr KernelTable kTable = simd::MakeTable<xsimd::fma3<xsimd::avx2>, avx2::Grouped>("avx2+fma");
  return kTable;
}

}  // namespace kernels
}  // namespace tinyai
