// The inline namespace of the instruction-set flags a translation unit is
// compiled with. Every helper of a header compiled under more than one set of
// flags (grouped_avx512.h: the AVX-512, VNNI and AMX files; any header a
// per-ISA file includes) sits in it:
//
//   namespace avx512 {
//   inline namespace TINYAI_ISA_NAMESPACE {
//   ...
//   }  // namespace TINYAI_ISA_NAMESPACE
//   }  // namespace avx512
//
// so that its symbols are named for the flags and no two translation units
// define the same one: the linker keeps one copy of an inline function for
// the whole program, and without the namespace it may keep the copy compiled
// for VNNI where the plain AVX-512 table calls it (an illegal instruction on
// a CPU without VNNI). tests/kernels/odr_symbols.cmake checks the library.
#ifndef TINYAI_KERNELS_SIMD_ISA_H_
#define TINYAI_KERNELS_SIMD_ISA_H_

#if (defined(__AMX_INT8__) || defined(__AMXINT8__))
#define TINYAI_ISA_NAMESPACE isa_avx512amx
#elif defined(__AVX512VNNI__)
#define TINYAI_ISA_NAMESPACE isa_avx512vnni
#elif defined(__AVX512F__)
#define TINYAI_ISA_NAMESPACE isa_avx512
#elif defined(__AVX2__)
#define TINYAI_ISA_NAMESPACE isa_avx2
#elif defined(__ARM_FEATURE_DOTPROD)
#define TINYAI_ISA_NAMESPACE isa_dotprod
#elif defined(__aarch64__)
#define TINYAI_ISA_NAMESPACE isa_neon64
#elif defined(__ARM_NEON) || defined(__ARM_NEON__)
#define TINYAI_ISA_NAMESPACE isa_neon
#else
#define TINYAI_ISA_NAMESPACE isa_base
#endif

#endif  // TINYAI_KERNELS_SIMD_ISA_H_
