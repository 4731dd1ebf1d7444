// SSE2 instantiation of the xsimd kernels (x86-64 baseline; default flags).
// CMake compiles this file on x86-64 only.
#include "kernels/simd/kernels_simd.h"

TINYAI_KERNELS_INSTANTIATE(xsimd::sse2);

namespace tinyai {
namespace kernels {

const KernelTable& X86Sse2Table() {
  static constexpr KernelTable kTable = simd::MakeTable<xsimd::sse2>("sse2");
  return kTable;
}

}  // namespace kernels
}  // namespace tinyai
