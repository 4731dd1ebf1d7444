// Cortex-M products: see kernels_cm.h.
//
// Per group of 32 the integer dot product of the weights' values with the
// input's codes is exact (int32), whatever the order: only its float part,
// sum += float(isum) * (d_w * d_x) group after group, must be the
// reference's, and it is written here as there (DotQ in ref/kernels_ref.cc).
//
// DSP (per 4 values, two SMLADs: a pair of int16 products added to the
// accumulator each):
//   q8_g32 (int8 weights, int16 input): SXTB16 takes weights 0 and 2, and
//   with ROR #8 1 and 3, as int16 pairs; PKHBT / PKHTB pair the input's
//   int16 values the same way.
//   q4_g32, q4nl_g32 (int8 input): byte j of the packed codes holds values
//   j (low nibble) and j + 16 (high nibble); a 256-entry table gives both
//   values of a byte as one int16 pair (code - 8, or the IQ4_NL grid), and
//   the input's int8 codes j and j + 16 are paired to meet it (SXTB16,
//   PKHBT / PKHTB).
// MVE (per 8 or 16 values, one VMLADAVA):
//   q8_g32: VLDRB.S16 widens 8 weights, VLDRH 8 input values.
//   q4_g32, q4nl_g32: 16 codes of one nibble, their values by VSUB (q4) or
//   a gathered byte load from the grid (q4nl), against 16 input codes.
#include "kernels/mcu/kernels_cm.h"

#include <cstring>

#include "common/groups.h"
#include "common/half.h"
#include "kernels/ref/kernels_ref.h"

#if defined(__ARM_FEATURE_DSP) && defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M'
#define TINYAI_CM_DSP 1
#include <arm_acle.h>
#endif
#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#define TINYAI_CM_MVE 1
#include <arm_mve.h>
#endif

namespace tinyai {
namespace kernels {
namespace {

// ---- The DSP instructions, or their meaning in C ----------------------------------------

#if TINYAI_CM_DSP
// The instructions themselves: GCC 12's <arm_acle.h> has SXTB16 and SMLAD
// but neither the rotated operand nor PKHBT / PKHTB, and builds those of
// two or three instructions each.
inline uint32_t Sxtb16(uint32_t v) { return static_cast<uint32_t>(__sxtb16(static_cast<int32_t>(v))); }
inline uint32_t Sxtb16Ror8(uint32_t v) {
  uint32_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
  return r;
}
inline int32_t Smlad(uint32_t a, uint32_t b, int32_t acc) {
  return __smlad(static_cast<int32_t>(a), static_cast<int32_t>(b), acc);
}
// PKHBT a, b, LSL #16: a's low half, b's low half on top.
inline uint32_t PkhBT(uint32_t a, uint32_t b) {
  uint32_t r;
  __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
// PKHTB a, b, ASR #16: a's high half on top, b's high half below.
inline uint32_t PkhTB(uint32_t a, uint32_t b) {
  uint32_t r;
  __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
#else
inline uint32_t Lane(int32_t v) { return static_cast<uint32_t>(v) & 0xffffu; }
inline uint32_t Sxtb16(uint32_t v) {
  return Lane(static_cast<int8_t>(v & 0xff)) | (Lane(static_cast<int8_t>((v >> 16) & 0xff)) << 16);
}
inline uint32_t Sxtb16Ror8(uint32_t v) { return Sxtb16((v >> 8) | (v << 24)); }
inline int32_t Smlad(uint32_t a, uint32_t b, int32_t acc) {
  const int32_t lo = static_cast<int16_t>(a & 0xffff) * static_cast<int16_t>(b & 0xffff);
  const int32_t hi = static_cast<int16_t>(a >> 16) * static_cast<int16_t>(b >> 16);
  return static_cast<int32_t>(static_cast<uint32_t>(acc) + static_cast<uint32_t>(lo) + static_cast<uint32_t>(hi));
}
inline uint32_t PkhBT(uint32_t a, uint32_t b) { return (a & 0xffffu) | (b << 16); }
inline uint32_t PkhTB(uint32_t a, uint32_t b) { return (a & 0xffff0000u) | (b >> 16); }
#endif

inline uint32_t Load32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);  // LDR: unaligned access is allowed on Armv7-M and Armv8-M
  return v;
}

// A group's half-precision scale: one VCVTB where the FPU converts halves
// (FPv4 and FPv5; exact, as HalfToFloat is), else in software.
float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
#if TINYAI_CM_DSP && defined(__ARM_FP) && (__ARM_FP & 2)
  float f;
  __asm__("vmov %0, %1\n\tvcvtb.f32.f16 %0, %0" : "=t"(f) : "r"(static_cast<uint32_t>(h)));
  return f;
#else
  return HalfToFloat(h);
#endif
}

// Both values of a packed byte (low nibble: value j, high: j + 16) as an
// int16 pair, for every byte.
struct PairTable {
  uint32_t pair[256];
};
constexpr PairTable MakePairTable(bool grid) {
  PairTable t{};
  for (int b = 0; b < 256; ++b) {
    const int lo = grid ? kQ4NLGrid[b & 15] : (b & 15) - 8;
    const int hi = grid ? kQ4NLGrid[b >> 4] : (b >> 4) - 8;
    t.pair[b] = (static_cast<uint32_t>(lo) & 0xffffu) | (static_cast<uint32_t>(hi) << 16);
  }
  return t;
}
constexpr PairTable kQ4Pairs = MakePairTable(false);
constexpr PairTable kQ4NLPairs = MakePairTable(true);

// ---- DSP group products -----------------------------------------------------------------
//
// The input is paired for SMLAD once per call, not once per row: a group's
// 32 values become 16 int16 pairs, in the order its weights meet them.

// One group of the input, paired; d is its scale.
struct PairedGroup {
  uint32_t pair[16];
  float d;
};

// q8_g32's int16 input: (x0, x2), (x1, x3), (x4, x6), (x5, x7), ...
void PairGroup(const InputGroup16& x, PairedGroup* out) {
  for (size_t j = 0; j < kGroup; j += 4) {
    const uint32_t x01 = Load32(x.q + j), x23 = Load32(x.q + j + 2);
    out->pair[j / 2] = PkhBT(x01, x23);
    out->pair[j / 2 + 1] = PkhTB(x23, x01);
  }
  out->d = x.d;
}

// The 4-bit dtypes' int8 input: (x[j], x[j + 16]) for j < 16, as byte j of
// the packed codes holds values j and j + 16.
void PairGroup(const InputGroup& x, PairedGroup* out) {
  for (size_t j = 0; j < 16; j += 4) {
    const uint32_t lo = Load32(x.q + j), hi = Load32(x.q + 16 + j);
    const uint32_t lo02 = Sxtb16(lo), hi02 = Sxtb16(hi);          // x[j], x[j+2]; x[j+16], x[j+18]
    const uint32_t lo13 = Sxtb16Ror8(lo), hi13 = Sxtb16Ror8(hi);  // x[j+1], x[j+3]; x[j+17], x[j+19]
    out->pair[j] = PkhBT(lo02, hi02);
    out->pair[j + 1] = PkhBT(lo13, hi13);
    out->pair[j + 2] = PkhTB(hi02, lo02);
    out->pair[j + 3] = PkhTB(hi13, lo13);
  }
  out->d = x.d;
}

// Per 4 weights: SXTB16 twice (weights 0, 2 and 1, 3), two SMLADs.
int32_t DspGroupQ8(const uint8_t* codes, const uint32_t* pair) {
  int32_t acc = 0;
#pragma GCC unroll 8
  for (size_t j = 0; j < kGroup; j += 4) {
    const uint32_t w = Load32(codes + j);
    acc = Smlad(Sxtb16(w), pair[j / 2], acc);           // w0 x0 + w2 x2
    acc = Smlad(Sxtb16Ror8(w), pair[j / 2 + 1], acc);   // w1 x1 + w3 x3
  }
  return acc;
}

// Per packed byte: its two values from the table, one SMLAD.
int32_t DspGroupQ4(const uint8_t* packed, const uint32_t* pair, const PairTable& t) {
  int32_t acc = 0;
#pragma GCC unroll 16
  for (size_t j = 0; j < 16; ++j) acc = Smlad(t.pair[packed[j]], pair[j], acc);
  return acc;
}

template <int32_t DType>
int32_t DspGroup(const uint8_t* group, const PairedGroup& x) {
  if constexpr (DType == TINYAI_DTYPE_Q8_G32) return DspGroupQ8(group + 2, x.pair);
  else return DspGroupQ4(group + 2, x.pair, DType == TINYAI_DTYPE_Q4NL_G32 ? kQ4NLPairs : kQ4Pairs);
}

// Groups paired at a time: 16 (1,088 bytes of stack). Each row's float sum
// is carried from one chunk to the next in y, group after group as the
// reference adds them.
constexpr size_t kChunkGroups = 16;

// y[j * ldy + r] for n inputs (input j at x + j * ldx groups), row r read
// once per chunk for all of them.
template <int32_t DType>
void DspProducts(const uint8_t* w, size_t row_bytes, const void* x, size_t ldx, float* y, size_t ldy, size_t rows,
                 size_t cols, size_t n) {
  constexpr size_t kBytes = GroupBytes(DType);
  const InputGroupOf<DType>* in = static_cast<const InputGroupOf<DType>*>(x);
  const size_t groups = GroupsPerRow(cols);
  PairedGroup paired[kChunkGroups];
  for (size_t j = 0; j < n; ++j) {
    for (size_t g0 = 0; g0 < groups; g0 += kChunkGroups) {
      const size_t count = groups - g0 < kChunkGroups ? groups - g0 : kChunkGroups;
      for (size_t g = 0; g < count; ++g) PairGroup(in[j * ldx + g0 + g], &paired[g]);
      for (size_t r = 0; r < rows; ++r) {
        const uint8_t* group = w + r * row_bytes + g0 * kBytes;
        float sum = g0 == 0 ? 0.0f : y[j * ldy + r];
        for (size_t g = 0; g < count; ++g, group += kBytes) {
          const int32_t isum = DspGroup<DType>(group, paired[g]);
          sum += static_cast<float>(isum) * (HalfAt(group) * paired[g].d);
        }
        y[j * ldy + r] = sum;
      }
    }
  }
}

// ---- MVE group products (or their meaning in C) -------------------------------------------

#if TINYAI_CM_MVE
int32_t MveGroupQ8(const uint8_t* codes, const int16_t* x) {
  int32_t acc = 0;
  const int8_t* w = reinterpret_cast<const int8_t*>(codes);
  for (size_t j = 0; j < kGroup; j += 8) acc = vmladavaq_s16(acc, vldrbq_s16(w + j), vld1q_s16(x + j));
  return acc;
}

template <bool Grid>
int32_t MveGroupQ4(const uint8_t* packed, const int8_t* x) {
  const uint8x16_t p = vld1q_u8(packed);
  const uint8x16_t lo = vandq_u8(p, vdupq_n_u8(15)), hi = vshrq_n_u8(p, 4);
  int8x16_t a, b;
  if (Grid) {
    a = vldrbq_gather_offset_s8(kQ4NLGrid, lo);
    b = vldrbq_gather_offset_s8(kQ4NLGrid, hi);
  } else {
    a = vsubq_s8(vreinterpretq_s8_u8(lo), vdupq_n_s8(8));
    b = vsubq_s8(vreinterpretq_s8_u8(hi), vdupq_n_s8(8));
  }
  return vmladavaq_s8(vmladavq_s8(a, vld1q_s8(x)), b, vld1q_s8(x + 16));
}
#else
int32_t MveGroupQ8(const uint8_t* codes, const int16_t* x) {
  int32_t acc = 0;
  for (size_t j = 0; j < kGroup; j += 8) {
    int32_t lanes = 0;  // VMLADAVA: the lanes' products summed, then added
    for (int k = 0; k < 8; ++k) lanes += static_cast<int8_t>(codes[j + k]) * x[j + k];
    acc += lanes;
  }
  return acc;
}

template <bool Grid>
int32_t MveGroupQ4(const uint8_t* packed, const int8_t* x) {
  int32_t a = 0, b = 0;
  for (int k = 0; k < 16; ++k) {
    const int lo = packed[k] & 15, hi = packed[k] >> 4;
    a += (Grid ? kQ4NLGrid[lo] : lo - 8) * x[k];
    b += (Grid ? kQ4NLGrid[hi] : hi - 8) * x[16 + k];
  }
  return a + b;
}
#endif

// ---- Helium rows (the reference's float sums over the groups), and the tables -------------

enum class Isa { kDsp, kMve };

template <int32_t DType>
int32_t MveGroup(const uint8_t* group, const InputGroupOf<DType>& x) {
  if constexpr (DType == TINYAI_DTYPE_Q8_G32) return MveGroupQ8(group + 2, x.q);
  else return MveGroupQ4<DType == TINYAI_DTYPE_Q4NL_G32>(group + 2, x.q);
}

template <int32_t DType>
float MveDot(const uint8_t* row, const InputGroupOf<DType>* x, size_t cols) {
  constexpr size_t kBytes = GroupBytes(DType);
  float sum = 0.0f;
  const size_t groups = GroupsPerRow(cols);
  for (size_t g = 0; g < groups; ++g) {
    const uint8_t* group = row + g * kBytes;
    const int32_t isum = MveGroup<DType>(group, x[g]);
    sum += static_cast<float>(isum) * (HalfAt(group) * x[g].d);
  }
  return sum;
}

template <Isa I, int32_t DType>
void MatmulQ(const uint8_t* w, size_t row_bytes, const void* x, size_t ldx, float* y, size_t ldy, size_t rows,
             size_t cols, size_t n) {
  if constexpr (I == Isa::kDsp) {
    DspProducts<DType>(w, row_bytes, x, ldx, y, ldy, rows, cols, n);
  } else {
    const InputGroupOf<DType>* in = static_cast<const InputGroupOf<DType>*>(x);
    for (size_t r = 0; r < rows; ++r) {
      const uint8_t* row = w + r * row_bytes;
      for (size_t j = 0; j < n; ++j) y[j * ldy + r] = MveDot<DType>(row, in + j * ldx, cols);
    }
  }
}

template <Isa I, int32_t DType>
void MatvecQ(const uint8_t* w, size_t row_bytes, const void* x, float* y, size_t rows, size_t cols) {
  MatmulQ<I, DType>(w, row_bytes, x, 0, y, 0, rows, cols, 1);
}

template <Isa I>
KernelTable MakeTable(const char* name) {
  KernelTable t = Ref();
  t.name = name;
  t.weights[TINYAI_DTYPE_Q8_G32].matvec_q = &MatvecQ<I, TINYAI_DTYPE_Q8_G32>;
  t.weights[TINYAI_DTYPE_Q8_G32].matmul_q = &MatmulQ<I, TINYAI_DTYPE_Q8_G32>;
  t.weights[TINYAI_DTYPE_Q4_G32].matvec_q = &MatvecQ<I, TINYAI_DTYPE_Q4_G32>;
  t.weights[TINYAI_DTYPE_Q4_G32].matmul_q = &MatmulQ<I, TINYAI_DTYPE_Q4_G32>;
  t.weights[TINYAI_DTYPE_Q4NL_G32].matvec_q = &MatvecQ<I, TINYAI_DTYPE_Q4NL_G32>;
  t.weights[TINYAI_DTYPE_Q4NL_G32].matmul_q = &MatmulQ<I, TINYAI_DTYPE_Q4NL_G32>;
  return t;
}

}  // namespace

const KernelTable& CortexMDspTable() {
  static const KernelTable table = MakeTable<Isa::kDsp>("cm-dsp");
  return table;
}

const KernelTable& CortexMMveTable() {
  static const KernelTable table = MakeTable<Isa::kMve>("cm-mve");
  return table;
}

bool CortexMDspNative() {
#if TINYAI_CM_DSP
  return true;
#else
  return false;
#endif
}

bool CortexMMveNative() {
#if TINYAI_CM_MVE
  return true;
#else
  return false;
#endif
}

}  // namespace kernels
}  // namespace tinyai
