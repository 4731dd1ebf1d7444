// The AVX-512 table with AVX512-VNNI integer products for the grouped dtypes
// (vpdpbusd, vpdpwssd; grouped_avx512.h): X86Avx512Table()'s float kernels,
// its grouped entries replaced, q5_g32's and q5m_g32's (vpdpbusd for their
// pairs of groups), and the K-quants' (grouped_blocks_x86.h: their sub-block
// dots by vpdpbusd; q6_k's halves scaled by one vpmulld). Compiled with the
// AVX-512 file's flags plus -mavx512vnni; dispatch.cc calls it only when the
// CPU has VNNI.
#include "kernels/simd/grouped_avx512.h"

#if !defined(__AVX512VNNI__)
#error "kernels_x86_avx512vnni.cc must be compiled with -mavx512vnni"
#endif

namespace tinyai {
namespace kernels {

const KernelTable& X86Avx512Table();

const KernelTable& X86Avx512VnniTable() {
  static const KernelTable kTable =
      grouped::DeriveTable<avx512::Grouped<true>, TINYAI_DTYPE_Q8_G32, TINYAI_DTYPE_Q4_G32, TINYAI_DTYPE_Q4NL_G32,
                           TINYAI_DTYPE_Q4_K, TINYAI_DTYPE_Q5_K, TINYAI_DTYPE_Q6_K, TINYAI_DTYPE_Q5_G32,
                           TINYAI_DTYPE_Q5M_G32>(X86Avx512Table(), "avx512vnni");
  return kTable;
}

}  // namespace kernels
}  // namespace tinyai
