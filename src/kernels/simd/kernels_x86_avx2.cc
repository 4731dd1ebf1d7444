// AVX2 + FMA instantiation of the xsimd kernels. CMake compiles this file on
// x86-64 only, with -mavx2 -mfma; dispatch.cc calls it only when the CPU
// reports both (xsimd::available_architectures().fma3_avx2).
#include "kernels/simd/kernels_simd.h"

#if !defined(__AVX2__) || !defined(__FMA__)
#error "kernels_x86_avx2.cc must be compiled with -mavx2 -mfma"
#endif

TINYAI_KERNELS_INSTANTIATE(xsimd::fma3<xsimd::avx2>);

namespace tinyai {
namespace kernels {

const KernelTable& X86Avx2FmaTable() {
  static constexpr KernelTable kTable = simd::MakeTable<xsimd::fma3<xsimd::avx2>>("avx2+fma");
  return kTable;
}

}  // namespace kernels
}  // namespace tinyai
