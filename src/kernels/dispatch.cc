// Run-time choice of a kernel table. CMake defines one of TINYAI_KERNELS_X86,
// TINYAI_KERNELS_NEON64 or TINYAI_KERNELS_NEON when it compiles the matching
// per-arch files (src/kernels/simd/); with none, only Ref() exists.
// This file is compiled with default flags: it only asks the CPU what it
// supports (xsimd::available_architectures) and never runs SIMD code itself.
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/mcu/kernels_cm.h"

#if defined(TINYAI_KERNELS_X86) || defined(TINYAI_KERNELS_NEON64) || defined(TINYAI_KERNELS_NEON)
#define TINYAI_KERNELS_HAVE_SIMD 1
#include "kernels/simd/kernels_simd.h"
#endif
#if defined(TINYAI_KERNELS_X86)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif
#if defined(TINYAI_KERNELS_NEON64) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace tinyai {
namespace kernels {
namespace {

constexpr size_t kMaxTables = 6;

#if defined(TINYAI_KERNELS_X86)
// F16C (half <-> float conversion), which the AVX2 table's f16 products use:
// CPUID leaf 1, ECX bit 29 (xsimd 8 does not report it).
bool CpuHasF16C() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & (1u << 29)) != 0;
}

// AVX-512 as the AVX-512 table uses it: F, CD, DQ, BW (xsimd's avx512bw), VL
// (CPUID leaf 7, EBX bit 31) and the OS saving the ZMM and mask registers
// (XCR0 bits 1, 2, 5, 6, 7; xsimd 8 checks none of these two).
bool CpuHasAvx512Table() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0 || (c & (1u << 27)) == 0) return false;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 0xe6u) != 0xe6u) return false;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  return (b & (1u << 31)) != 0;
}

// AVX512-VNNI: CPUID leaf 7, ECX bit 11.
bool CpuHasAvx512Vnni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && (c & (1u << 11)) != 0;
}

// AMX-TILE and AMX-INT8 (CPUID leaf 7, EDX bits 24 and 25), the OS saving
// the tile state (XCR0 bits 17 and 18), and, on Linux, this process granted
// the tile data (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA,
// Linux 5.16 and later; the grant is the whole process's, asked once here).
// Elsewhere: false.
bool CpuHasAmxInt8() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0 || (d & (3u << 24)) != (3u << 24)) return false;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXFeatureXTileData = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXFeatureXTileData) == 0;
#else
  return false;
#endif
}
#endif

#if defined(TINYAI_KERNELS_NEON64)
// ARMv8.2's dot product (sdot, udot), as the kernel reports it: AT_HWCAP's
// HWCAP_ASIMDDP (bit 20) on Linux; elsewhere not asked, so false.
bool CpuHasDotProd() {
#if defined(__linux__)
  constexpr unsigned long kHwcapAsimdDp = 1ul << 20;
  return (getauxval(AT_HWCAP) & kHwcapAsimdDp) != 0;
#else
  return false;
#endif
}
#endif

struct TableList {
  const KernelTable* tables[kMaxTables];
  size_t count;
};

// TINYAI_KERNELS=NAME in the environment (a table's name, as
// tinyai-bench's "kernels" reports it) caps the list at that table: it and
// those after it stay, so Best() is NAME (an AVX2 path measured on an
// AVX-512 host, the reference kernels run as a model's oracle). A name
// that is not in the list (unknown, or not runnable on this CPU) changes
// nothing; the tools report the table they ran.
TableList CapByEnvironment(const TableList& list) {
  const char* name = getenv("TINYAI_KERNELS");
  if (name == nullptr) return list;
  for (size_t i = 0; i < list.count; ++i) {
    if (strcmp(list.tables[i]->name, name) != 0) continue;
    TableList capped = {};
    for (size_t k = i; k < list.count; ++k) capped.tables[capped.count++] = list.tables[k];
    return capped;
  }
  return list;
}

// Every built table the running CPU supports, best first, Ref() last.
TableList Detect() {
  TableList list = {};
#if defined(TINYAI_KERNELS_HAVE_SIMD)
  const auto cpu = xsimd::available_architectures();
#if defined(TINYAI_KERNELS_X86)
  const bool avx512 = cpu.avx512bw && cpu.fma3_avx2 && CpuHasF16C() && CpuHasAvx512Table();
  const bool vnni = avx512 && CpuHasAvx512Vnni();
  if (vnni && CpuHasAmxInt8()) list.tables[list.count++] = &X86Avx512AmxTable();
  if (vnni) list.tables[list.count++] = &X86Avx512VnniTable();
  if (avx512) list.tables[list.count++] = &X86Avx512Table();
  if (cpu.avx2 && cpu.fma3_avx2 && CpuHasF16C()) list.tables[list.count++] = &X86Avx2FmaTable();
  if (cpu.sse2) list.tables[list.count++] = &X86Sse2Table();
#elif defined(TINYAI_KERNELS_NEON64)
  if (cpu.neon64 && CpuHasDotProd()) list.tables[list.count++] = &ArmNeon64DotTable();
  if (cpu.neon64) list.tables[list.count++] = &ArmNeon64Table();
#elif defined(TINYAI_KERNELS_NEON)
  if (cpu.neon) list.tables[list.count++] = &ArmNeonTable();
#endif
#else
  // A Cortex-M: Helium (M55), the DSP extension (M4, M7, M33, M55).
  if (CortexMMveNative()) list.tables[list.count++] = &CortexMMveTable();
  if (CortexMDspNative()) list.tables[list.count++] = &CortexMDspTable();
#endif
  list.tables[list.count++] = &Ref();
  return CapByEnvironment(list);
}

const TableList& Tables() {
  static const TableList list = Detect();  // resolved once; thread-safe init
  return list;
}

}  // namespace

const KernelTable& Best() { return *Tables().tables[0]; }

const KernelTable* ByName(const char* name) {
  if (name == nullptr) return nullptr;
  if (strcmp(name, "best") == 0) return &Best();
  if (strcmp(name, "ref") == 0) return &Ref();
  const TableList& list = Tables();
  for (size_t i = 0; i < list.count; ++i) {
    if (strcmp(list.tables[i]->name, name) == 0) return list.tables[i];
  }
  return nullptr;
}

const WeightKernels* WeightKernelsFor(const KernelTable& table, int32_t dtype) {
  if (dtype < 0 || dtype >= kWeightDtypes) return nullptr;
  const WeightKernels& w = table.weights[dtype];
  const bool quantizer = w.input == kInputInt8 ? table.quantize_input != nullptr
                         : w.input == kInputInt16 ? table.quantize_input16 != nullptr : false;
  const bool products = w.input == kInputF32 ? w.matvec != nullptr && w.matmul != nullptr
                                             : w.matvec_q != nullptr && w.matmul_q != nullptr && quantizer;
  return products && w.dequantize_row != nullptr ? &w : nullptr;
}

size_t AvailableTables(const KernelTable** out, size_t capacity) {
  const TableList& list = Tables();
  for (size_t i = 0; i < list.count && i < capacity; ++i) out[i] = list.tables[i];
  return list.count;
}

}  // namespace kernels
}  // namespace tinyai
