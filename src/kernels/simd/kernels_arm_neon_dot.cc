// The AArch64 NEON table with ARMv8.2 dot products (sdot) for the 4-bit
// grouped dtypes (grouped_neon.h, Grouped<true>): ArmNeon64Table()'s kernels,
// its q4_g32 and q4nl_g32 entries replaced (q8_g32 keeps its int16 inputs).
// Compiled with dotprod (the build's -mcpu/-march + dotprod, or
// -march=armv8.2-a+dotprod: CMakeLists.txt); dispatch.cc calls it only when
// the kernel reports the CPU's dot product (HWCAP_ASIMDDP).
#include "kernels/simd/grouped_neon.h"

#if !defined(__aarch64__) || !defined(__ARM_FEATURE_DOTPROD)
#error "kernels_arm_neon_dot.cc must be compiled for AArch64 with dotprod (e.g. -march=armv8.2-a+dotprod)"
#endif

namespace tinyai {
namespace kernels {

const KernelTable& ArmNeon64Table();

const KernelTable& ArmNeon64DotTable() {
  static const KernelTable kTable =
      grouped::DeriveTable<neon::Grouped<true>, TINYAI_DTYPE_Q4_G32, TINYAI_DTYPE_Q4NL_G32, TINYAI_DTYPE_Q4_K, TINYAI_DTYPE_Q5_K,
                            TINYAI_DTYPE_Q6_K, TINYAI_DTYPE_Q5_G32, TINYAI_DTYPE_Q5M_G32>(ArmNeon64Table(), "neon64dot");
  return kTable;
}

}  // namespace kernels
}  // namespace tinyai
