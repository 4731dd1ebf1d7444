// NEON instantiation of the xsimd kernels: neon64 on AArch64, neon on 32-bit
// ARM (built with -mfpu=neon), and the grouped dtypes' integer products
// (grouped_neon.h). CMake compiles this file on ARM only.
#include "kernels/simd/grouped_neon.h"
#include "kernels/simd/kernels_simd.h"

#if defined(__aarch64__)

TINYAI_KERNELS_INSTANTIATE(xsimd::neon64);

namespace tinyai {
namespace kernels {

const KernelTable& ArmNeon64Table() {
  static constexpr KernelTable kTable = simd::MakeTable<xsimd::neon64, neon::Grouped<false>>("neon64");
  return kTable;
}

}  // namespace kernels
}  // namespace tinyai

#else  // 32-bit ARM

#if !defined(__ARM_NEON) && !defined(__ARM_NEON__)
#error "kernels_arm_neon.cc must be compiled with NEON enabled (e.g. -mfpu=neon)"
#endif

TINYAI_KERNELS_INSTANTIATE(xsimd::neon);

namespace tinyai {
namespace kernels {

const KernelTable& ArmNeonTable() {
  static constexpr KernelTable kTable = simd::MakeTable<xsimd::neon, neon::Grouped<false>>("neon");
  return kTable;
}

}  // namespace kernels
}  // namespace tinyai

#endif
