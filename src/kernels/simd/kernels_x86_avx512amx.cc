// The AVX-512 VNNI table with q8_g32 products on AMX (Advanced Matrix
// Extensions, AMX-TILE and AMX-INT8): X86Avx512VnniTable() with its q8_g32
// entries replaced. Compiled with the VNNI file's flags plus -mamx-tile
// -mamx-int8; dispatch.cc calls it only when the CPU has AMX-INT8 and the OS
// lets this process use the tile registers (Linux: arch_prctl
// ARCH_REQ_XCOMP_PERM).
//
// One tile product multiplies 16 rows' codes of one group (A: 16 rows of 32
// int8, read in place with the row stride) with up to 16 inputs' codes of
// that group (B) into 16 x 16 exact int32 dot products. The input's codes
// are int16 (InputGroup16), which AMX does not multiply: each is split as
// q = 256 * hi + lo, hi a signed byte and lo an unsigned one, and the two
// halves go through TDPBSSD (signed x signed) and TDPBSUD (signed x
// unsigned); 256 * hi_dot + lo_dot is the group's dot product exactly (at
// most 32 * 127 * 32767 in magnitude).
//
// Every output (row r, input j) is then summed in one order whatever the
// number of inputs, the rows around it or the slice a thread takes:
// acc = fma(float(dot_g), d_w(r, g) * d_x(j, g), acc) for g = 0, 1, ... from
// acc = 0. So a prompt's products equal a token's bit for bit, as in the
// other AVX-512 tables (whose order is another: this table's q8 results
// differ from theirs within fp32 rounding).
//
// One input goes through vector instructions instead (OneInput, rows in
// lanes), which compute the same integers and the same float steps.
#include <immintrin.h>

#include <cstring>

#include "kernels/simd/grouped_avx512.h"
#include "kernels/simd/kernels_simd.h"

// GCC spells the macros __AMX_TILE__ and __AMX_INT8__, clang __AMXTILE__ and __AMXINT8__.
#if !(defined(__AMX_TILE__) || defined(__AMXTILE__)) || !(defined(__AMX_INT8__) || defined(__AMXINT8__)) || \
    !defined(__AVX512VNNI__)
#error "kernels_x86_avx512amx.cc must be compiled with -mavx512vnni -mamx-tile -mamx-int8"
#endif

namespace tinyai {
namespace kernels {

const KernelTable& X86Avx512VnniTable();

namespace {

constexpr size_t kTileRows = 16;     // rows of weights per tile product
constexpr size_t kTileInputs = 16;   // inputs per tile product (fewer: zero columns)
constexpr size_t kChunkGroups = 32;  // groups of the inputs prepared at a time (34 KiB for 16 inputs)
constexpr size_t kNear = 6;          // groups ahead prefetched into L1 (Prefetch; 4, 6 and 8 measured alike)
constexpr size_t kPassInputs = 32;   // inputs per pass over the rows (a prompt pass: LlamaModel::kMaxChunk)

// Tile registers (the intrinsics below spell the numbers out: GCC's take
// them as literals): tmm0 the codes, tmm1 and tmm2 the inputs' high and low
// bytes, tmm3 and tmm4 their dot products; tmm5, tmm6, tmm7 a second set of
// codes and products (Block's pipeline).
enum : int { kCodes = 0, kHigh = 1, kLow = 2, kDotHigh = 3, kDotLow = 4, kCodes2 = 5, kDotHigh2 = 6, kDotLow2 = 7 };

// LDTILECFG's 64-byte operand (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64, "LDTILECFG takes 64 bytes");

// Tiles for m rows (1..16) against 16 inputs (fewer are zero columns: the
// configuration depends on the rows only).
void Configure(size_t m) {
  TileConfig c;
  std::memset(&c, 0, sizeof c);
  c.palette = 1;
  for (int t : {kCodes, kCodes2}) {
    c.rows[t] = static_cast<uint8_t>(m);
    c.colsb[t] = kGroup;
  }
  for (int t : {kHigh, kLow}) {
    c.rows[t] = kGroup / 4;
    c.colsb[t] = 4 * kTileInputs;
  }
  for (int t : {kDotHigh, kDotLow, kDotHigh2, kDotLow2}) {
    c.rows[t] = static_cast<uint8_t>(m);
    c.colsb[t] = 4 * kTileInputs;
  }
  // GCC 12's _tile_loadconfig names only the first 8 bytes as its operand,
  // so the compiler may drop the stores to the rest: the whole struct here.
  __asm__ volatile("ldtilecfg %0" : : "m"(c));
}

// Up to kChunkGroups groups of up to 16 inputs as tile operands: per
// group, B tiles of 8 rows of 64 bytes (row k: input j's codes 4k..4k+3 at
// 4j, zero past the inputs), the high and the low byte of each code; and
// the inputs' scales, 16 a group.
struct Prepared {
  alignas(64) int8_t high[kChunkGroups][kGroup * kTileInputs];
  alignas(64) uint8_t low[kChunkGroups][kGroup * kTileInputs];
  alignas(64) float d[kChunkGroups][kTileInputs];
};

void Prepare(const InputGroup16* x, size_t ldx, size_t n, size_t g0, size_t g1, Prepared* p) {
  std::memset(p, 0, sizeof *p);
  for (size_t j = 0; j < n; ++j) {
    for (size_t g = g0; g < g1; ++g) {
      const InputGroup16& in = x[j * ldx + g];
      const __m512i q = _mm512_loadu_si512(in.q);
      alignas(32) uint8_t high[kGroup], low[kGroup];
      _mm256_store_si256(reinterpret_cast<__m256i*>(high), _mm512_cvtepi16_epi8(_mm512_srai_epi16(q, 8)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(low), _mm512_cvtepi16_epi8(q));
      for (size_t k = 0; k < kGroup / 4; ++k) {
        std::memcpy(&p->high[g - g0][k * 4 * kTileInputs + 4 * j], high + 4 * k, 4);
        std::memcpy(&p->low[g - g0][k * 4 * kTileInputs + 4 * j], low + 4 * k, 4);
      }
      p->d[g - g0][j] = in.d;
    }
  }
}

// The scales of group g of m rows (16 lanes, zero past m).
inline __m512 RowScales(const uint8_t* group, size_t row_bytes, size_t m) {
  const __mmask16 mask = m >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << m) - 1);
  const __m512i index = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(static_cast<int>(row_bytes)));
  const __m512i bits = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, index, group, 1);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(bits));  // each lane's low 16 bits: the half
}

// 16 dot products, 256 * high + low (exact in int32), as floats.
inline __m512 Combine(const int32_t* high, const int32_t* low) {
  const __m512i h = _mm512_load_si512(high), l = _mm512_load_si512(low);
  return _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(h, 8), l));
}

// The sums of 16 vectors' int32 lanes: lane i = the sum of v[i]'s lanes.
inline __m512i SumEach(const __m512i v[16]) {
  __m512i pairs[8], quads[4];
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3]
    const __m512i a = v[2 * i], b = v[2 * i + 1];
    pairs[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
  }
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: one partial sum of each of four vectors
    const __m512i a = pairs[2 * i], b = pairs[2 * i + 1];
    quads[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
  }
  auto fold = [](__m512i a, __m512i b) {  // [a.0+a.1, a.2+a.3, b.0+b.1, b.2+b.3] in 128-bit lanes
    return _mm512_add_epi32(_mm512_shuffle_i32x4(a, b, 0x88), _mm512_shuffle_i32x4(a, b, 0xdd));
  };
  return fold(fold(quads[0], quads[1]), fold(quads[2], quads[3]));
}

// Rows [0, rows) against one input, 16 rows side by side: per group, each
// row's int16 products by vpdpwssd, the 16 rows' lanes summed into one
// vector (exact integers, the tile product's values), then the same float
// step as Block: acc = fma(float(dot), d_w * d_x, acc). Vector loads
// rather than tile products: with one input a tile product fills one of its
// 16 columns, and measured slower (tinyai-bench-kernels matvec_q, 768x768
// from DRAM: 6.0 G values/s with tiles, 9.5 with two blocks of tiles in
// flight, 10.4 for the VNNI table's row-by-row kernel).
void OneInput(const uint8_t* w, size_t row_bytes, const InputGroup16* x, float* y, size_t rows, size_t cols) {
  const size_t groups = GroupsPerRow(cols);
  for (size_t r0 = 0; r0 < rows; r0 += kTileRows) {
    const size_t m = rows - r0 < kTileRows ? rows - r0 : kTileRows;
    const __mmask16 mask = m >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << m) - 1);
    const uint8_t* block = w + r0 * row_bytes;
    const uint8_t* next = rows - r0 > kTileRows ? block + kTileRows * row_bytes : nullptr;
    const size_t next_rows = rows - r0 > 2 * kTileRows ? kTileRows : rows - r0 - m;
    __m512 acc = _mm512_setzero_ps();
    for (size_t g = 0; g < groups; ++g) {
      const uint8_t* group = block + g * kQ8GroupBytes;
      // The next block's group into L2 (see grouped_avx512.h, kAheadRows). A
      // sweep of the next block's bytes, in step with the groups, measured
      // better in tinyai-bench-kernels matvec_q_cold (12.0 against 11.6 GB/s)
      // and worse in the ~1B model's decode (19.2 against 21.6 tokens/s).
      if (next != nullptr) {
        for (size_t r = 0; r < next_rows; ++r) __builtin_prefetch(next + r * row_bytes + g * kQ8GroupBytes, 0, 1);
      }
      const __m512i in = _mm512_loadu_si512(x[g].q);
      __m512i dots[kTileRows];
      for (size_t i = 0; i < kTileRows; ++i) {
        dots[i] = i < m ? _mm512_dpwssd_epi32(_mm512_setzero_si512(),
                                              _mm512_cvtepi8_epi16(_mm256_loadu_si256(
                                                  reinterpret_cast<const __m256i*>(group + i * row_bytes + 2))),
                                              in)
                        : _mm512_setzero_si512();
      }
      const __m512 scale = _mm512_mul_ps(RowScales(group, row_bytes, m), _mm512_set1_ps(x[g].d));
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(SumEach(dots)), scale, acc);
    }
    _mm512_mask_storeu_ps(y + r0, mask, acc);
  }
}

// r[i] lane j becomes r[j] lane i: a 16 x 16 block of floats transposed.
inline void Transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    auto pd = [](__m512 v) { return _mm512_castps_pd(v); };
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[4 * i]), pd(t[4 * i + 2])));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[4 * i]), pd(t[4 * i + 2])));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[4 * i + 1]), pd(t[4 * i + 3])));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[4 * i + 1]), pd(t[4 * i + 3])));
  }
  // u[4i + c] holds, per 128-bit lane L, rows 4i..4i+3's column 4L + c.
  for (int c = 0; c < 4; ++c) {
    const __m512 a = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), b = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xdd);
    const __m512 e = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88), f = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xdd);
    r[c] = _mm512_shuffle_f32x4(a, e, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(a, e, 0xdd);
    r[4 + c] = _mm512_shuffle_f32x4(b, f, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(b, f, 0xdd);
  }
}

// Prefetches for a block of rows while it multiplies groups [g0, g1): the
// rows after it into L2, their bytes of those groups, one row at a time
// spread over the groups; and its own rows' group g + kNear (and the one
// after, the next line) into L1. The tile loads read 16 rows side by side,
// 16 short streams the hardware prefetcher does not follow: without these,
// the 110M q8_g32 model's 128-token prompt ran at 1,330 tokens/s, waiting
// mostly on the tile loads of the codes (perf annotate); with both 1,555,
// with the L2 ones only 1,470 (tinyai-bench -t 2).
class Prefetch {
 public:
  Prefetch() = default;  // none: a second pass over a block, whose rows are in cache
  Prefetch(const uint8_t* block, size_t m, size_t next_rows, size_t row_bytes, size_t g0, size_t g1)
      : block_(block), next_(block + m * row_bytes), m_(m), next_rows_(next_rows), row_bytes_(row_bytes), g0_(g0),
        g1_(g1) {}
  // Before groups g and g + 1.
  void Step(size_t g) const {
    if (block_ == nullptr) return;
    if (g + kNear < g1_) {
      const uint8_t* near = block_ + (g + kNear) * kQ8GroupBytes;
      for (size_t i = 0; i < m_; ++i) __builtin_prefetch(near + i * row_bytes_, 0, 3);
      for (size_t i = 0; i < m_; ++i) __builtin_prefetch(near + i * row_bytes_ + 63, 0, 3);
    }
    const size_t groups = g1_ - g0_, i = g - g0_, end = i + 2 < groups ? i + 2 : groups;
    for (size_t r = i * next_rows_ / groups; r < end * next_rows_ / groups; ++r) {
      const uint8_t* a = next_ + r * row_bytes_ + g0_ * kQ8GroupBytes;
      for (size_t off = 0; off < groups * kQ8GroupBytes; off += 64) __builtin_prefetch(a + off, 0, 2);
    }
  }

 private:
  const uint8_t *block_ = nullptr, *next_ = nullptr;
  size_t m_ = 0, next_rows_ = 0, row_bytes_ = 0, g0_ = 0, g1_ = 0;
};

// One group's tile products into a set of tiles: the input's halves into
// tmm1 and tmm2, the m rows' codes into `codes`, their dot products with the
// halves into `high` and `low`. A macro: GCC's tile intrinsics take the
// register number as a literal.
#define TINYAI_AMX_ISSUE(codes, high, low, group, stride, in_high, in_low, in_stride) \
  do {                                                                               \
    _tile_loadd(1, (in_high), (in_stride));                                          \
    _tile_loadd(2, (in_low), (in_stride));                                           \
    _tile_loadd(codes, (group) + 2, (stride));                                       \
    _tile_zero(high);                                                                \
    _tile_zero(low);                                                                 \
    _tile_dpbssd(high, codes, 1);                                                    \
    _tile_dpbsud(low, codes, 2);                                                     \
  } while (0)

// Rows [0, m) (m <= 16) against n inputs (1..16): y[j * ldy + r] continued
// over groups [g0, g1) (from zero when `first`). Software-pipelined over
// two sets of tiles (tmm0, tmm3, tmm4 and tmm5, tmm6, tmm7): group g + 1's
// products are issued before group g's are stored and scaled, so the tile
// unit works while the vector unit scales (tinyai-bench-kernels matmul_q
// 768x768 n:32, one thread: 102 us unpipelined, 90 pipelined).
void Block(const uint8_t* w, size_t row_bytes, const Prepared& p, float* y, size_t ldy, size_t m, size_t n,
           size_t g0, size_t g1, bool first, const Prefetch& prefetch) {
  alignas(64) int32_t high[2][kTileRows][kTileInputs] = {}, low[2][kTileRows][kTileInputs] = {};  // past m, n: 0
  const __mmask16 rows = m >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << m) - 1);
  __m512 acc[kTileRows];  // acc[i] lane j: row i, input j
  for (size_t j = 0; j < kTileRows; ++j) {
    acc[j] = first || j >= n ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(rows, y + j * ldy);
  }
  if (!first) Transpose16(acc);
  const long stride = static_cast<long>(row_bytes), in_stride = 4 * kTileInputs;
  auto scale = [&](size_t g, size_t set) {
    const uint8_t* group = w + g * kQ8GroupBytes;
    const __m512 dx = _mm512_load_ps(p.d[g - g0]);
    alignas(64) float dw[kTileRows];
    _mm512_store_ps(dw, RowScales(group, row_bytes, m));
#pragma GCC unroll 16
    for (size_t i = 0; i < kTileRows; ++i) {  // a broadcast from memory: one instruction with the multiply
      acc[i] = _mm512_fmadd_ps(Combine(high[set][i], low[set][i]), _mm512_mul_ps(_mm512_set1_ps(dw[i]), dx), acc[i]);
    }
  };
  TINYAI_AMX_ISSUE(0, 3, 4, w + g0 * kQ8GroupBytes, stride, p.high[0], p.low[0], in_stride);
  for (size_t g = g0; g < g1; g += 2) {
    prefetch.Step(g);
    const bool second = g + 1 < g1;
    if (second) {
      TINYAI_AMX_ISSUE(5, 6, 7, w + (g + 1) * kQ8GroupBytes, stride, p.high[g + 1 - g0], p.low[g + 1 - g0], in_stride);
    }
    _tile_stored(3, high[0], sizeof high[0][0]);
    _tile_stored(4, low[0], sizeof low[0][0]);
    scale(g, 0);
    if (!second) break;
    if (g + 2 < g1) {
      TINYAI_AMX_ISSUE(0, 3, 4, w + (g + 2) * kQ8GroupBytes, stride, p.high[g + 2 - g0], p.low[g + 2 - g0], in_stride);
    }
    _tile_stored(6, high[1], sizeof high[1][0]);
    _tile_stored(7, low[1], sizeof low[1][0]);
    scale(g + 1, 1);
  }
  Transpose16(acc);  // acc[j] lane i: row i, input j
  for (size_t j = 0; j < n; ++j) _mm512_mask_storeu_ps(y + j * ldy, rows, acc[j]);
}

#undef TINYAI_AMX_ISSUE

// y[j * ldy + r] for r < rows, j < n. One input: OneInput. Several: 32
// inputs a pass over the rows; within a pass, groups kChunkGroups at a time
// (y holds the sums between chunks: an exact store and load), and 16 rows at a time against each 16
// of the pass's inputs, so a block of rows is read from memory once a pass.
void Products(const uint8_t* w, size_t row_bytes, const InputGroup16* x, size_t ldx, float* y, size_t ldy,
              size_t rows, size_t cols, size_t n) {
  if (rows == 0 || n == 0) return;
  if (n == 1) return OneInput(w, row_bytes, x, y, rows, cols);
  const size_t groups = GroupsPerRow(cols);
  Prepared p[kPassInputs / kTileInputs];
  size_t configured = 0;  // rows the tiles are configured for (0: not yet)
  for (size_t j0 = 0; j0 < n; j0 += kPassInputs) {
    const size_t pass = n - j0 < kPassInputs ? n - j0 : kPassInputs, parts = (pass + kTileInputs - 1) / kTileInputs;
    for (size_t g0 = 0; g0 < groups; g0 += kChunkGroups) {
      const size_t g1 = groups - g0 < kChunkGroups ? groups : g0 + kChunkGroups;
      for (size_t k = 0; k < parts; ++k) {
        const size_t count = pass - k * kTileInputs < kTileInputs ? pass - k * kTileInputs : kTileInputs;
        Prepare(x + (j0 + k * kTileInputs) * ldx, ldx, count, g0, g1, &p[k]);
      }
      for (size_t r0 = 0; r0 < rows; r0 += kTileRows) {
        const size_t m = rows - r0 < kTileRows ? rows - r0 : kTileRows;
        if (configured != m) {
          Configure(m);
          configured = m;
        }
        const size_t next = rows - r0 - m < kTileRows ? rows - r0 - m : kTileRows;
        const Prefetch prefetch(w + r0 * row_bytes, m, next, row_bytes, g0, g1);
        for (size_t k = 0; k < parts; ++k) {
          const size_t first = j0 + k * kTileInputs;
          const size_t count = pass - k * kTileInputs < kTileInputs ? pass - k * kTileInputs : kTileInputs;
          Block(w + r0 * row_bytes, row_bytes, p[k], y + first * ldy + r0, ldy, m, count, g0, g1, g0 == 0,
                k == 0 ? prefetch : Prefetch());
        }
      }
    }
  }
  _tile_release();
}

void MatvecQ8(const uint8_t* w, size_t row_bytes, const void* x, float* y, size_t rows, size_t cols) {
  Products(w, row_bytes, static_cast<const InputGroup16*>(x), 0, y, 0, rows, cols, 1);
}

void MatmulQ8(const uint8_t* w, size_t row_bytes, const void* x, size_t ldx, float* y, size_t ldy, size_t rows,
              size_t cols, size_t n) {
  Products(w, row_bytes, static_cast<const InputGroup16*>(x), ldx, y, ldy, rows, cols, n);
}

}  // namespace

const KernelTable& X86Avx512AmxTable() {
  static const KernelTable kTable = [] {
    KernelTable t = X86Avx512VnniTable();
    t.name = "avx512amx";
    t.weights[TINYAI_DTYPE_Q8_G32].matvec_q = &MatvecQ8;
    t.weights[TINYAI_DTYPE_Q8_G32].matmul_q = &MatmulQ8;
    return t;
  }();
  return kTable;
}

}  // namespace kernels
}  // namespace tinyai
