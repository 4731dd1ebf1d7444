// Block-sparse weight matrices: the byte layout of a pruned tensor
// (docs/format.md, "Block-sparse tensors") and the arithmetic of its
// products (kernels::WeightKernels::sparse_matmul).
//
// A matrix of rows x cols is cut into bands of B rows (B the block size,
// 1 = unstructured) and each band's columns into blocks of B (B x B
// squares; the last block of a row whose length is not a multiple of B is
// narrower, the last band of a matrix whose row count is not one has fewer
// rows). Every band keeps the same number K of its NB = ceil(cols / B)
// blocks, so every band takes the same bytes and a band is the row unit of
// the file, the row slices and the weight cache (a row stride in bytes):
//
//   band = uint64 bitmap[ceil(NB / 64)]          bit j of word j/64 (LSB first) set
//                                                = column block j kept; exactly K set
//          row[B] of the dtype, K*B values each  the band's rows in order, each row's
//                                                kept values, block after block
//                                                (ascending), B values a block
//          zero padding to a multiple of 8 bytes
//
// A row holds K*B values stored as a dense row of the dtype would be
// (f32, f16, or groups of 32 with their scale for q8_g32, q4_g32,
// q4nl_g32: the groups run over the kept values, not the dense columns).
// Values past the matrix (the columns of a narrow last block, the rows of a
// short last band) are stored as zero.
//
// Products take an fp32 input. With f32 and f16 weights row r's value is
// sum over kept blocks k and i < B of w[r][k*B + i] * x[col], col = the
// block's first column + i, x = 0 past cols. With grouped weights a stored
// row is a dense row of K*B values of the dtype, and the product is the
// dense product of that row with the input gathered at its kept columns
// (x = 0 past cols): the gathered vector quantized in groups of 32 as a
// dense product quantizes its input (kernels::KernelTable::quantize_input),
// so each weight group of 32 kept values meets one input group with one
// scale - the arithmetic, and the rounding, of a dense matrix of K*B
// columns.
#ifndef TINYAI_COMMON_SPARSE_H_
#define TINYAI_COMMON_SPARSE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/checked_math.h"
#include "common/groups.h"
#include "tinyai/types.h"

namespace tinyai {

// tmai::TensorEntry::flags bit: the tensor is block-sparse; its entry then
// has ndims 2, shape[2] = B and shape[3] = K (docs/format.md).
constexpr uint8_t kTensorFlagBlockSparse = 1;

constexpr uint64_t kMaxSparseBlock = 32;

// Block sizes the format and the kernels take: 1 (unstructured) and the
// powers of two up to 32 (divisors of an input group).
constexpr bool IsSparseBlock(uint64_t block) {
  return block == 1 || block == 2 || block == 4 || block == 8 || block == 16 || block == 32;
}

// Bytes of one dense row of cols values of a weight dtype; 0 for a dtype
// that is not one, a K-quant (a band's rows are groups of 32), or on
// overflow.
inline uint64_t WeightRowBytes(int32_t dtype, uint64_t cols) {
  uint64_t bytes = 0;
  switch (dtype) {
    case TINYAI_DTYPE_F32: return CheckedMul(cols, 4, &bytes) ? bytes : 0;
    case TINYAI_DTYPE_F16: return CheckedMul(cols, 2, &bytes) ? bytes : 0;
    default:
      if (!IsGroupedDType(dtype) || IsSuperBlockDType(dtype)) return 0;
      return CheckedMul(cols / kGroup + (cols % kGroup != 0), GroupBytes(dtype), &bytes) ? bytes : 0;
  }
}

struct SparseLayout {
  int32_t dtype = 0;
  uint64_t rows = 0, cols = 0;   // the dense shape
  uint64_t block = 0;            // B
  uint64_t kept = 0;             // K: blocks each band keeps
  uint64_t blocks = 0;           // NB = ceil(cols / B): blocks in a band
  uint64_t bands = 0;            // ceil(rows / B)
  uint64_t bitmap_bytes = 0;     // 8 * ceil(NB / 64)
  uint64_t kept_cols = 0;        // K * B: values a stored row holds
  uint64_t kept_row_bytes = 0;   // WeightRowBytes(dtype, K * B)
  uint64_t band_bytes = 0;       // bitmap + B rows, rounded up to 8

  // Offset of row i (< B) of a band from the band's start.
  uint64_t row_offset(uint64_t i) const { return bitmap_bytes + i * kept_row_bytes; }
  // Bytes of the whole matrix: bands * band_bytes.
  uint64_t bytes() const { return bands * band_bytes; }
};

// Fills *out for a rows x cols matrix of dtype in blocks of `block` keeping
// `kept` blocks a band. False (and *out unspecified) when dtype is not a
// weight dtype, block is not IsSparseBlock, rows or cols is 0, kept > NB,
// or a size overflows 64 bits.
inline bool MakeSparseLayout(int32_t dtype, uint64_t rows, uint64_t cols, uint64_t block, uint64_t kept,
                             SparseLayout* out) {
  if (!IsSparseBlock(block) || rows == 0 || cols == 0 || WeightRowBytes(dtype, 1) == 0) return false;
  SparseLayout s;
  s.dtype = dtype;
  s.rows = rows;
  s.cols = cols;
  s.block = block;
  s.blocks = cols / block + (cols % block != 0);
  s.bands = rows / block + (rows % block != 0);
  if (kept > s.blocks) return false;
  s.kept = kept;
  s.bitmap_bytes = (s.blocks / 64 + (s.blocks % 64 != 0)) * 8;
  s.kept_cols = kept * block;
  s.kept_row_bytes = kept == 0 ? 0 : WeightRowBytes(dtype, s.kept_cols);
  if (kept != 0 && s.kept_row_bytes == 0) return false;
  uint64_t rows_bytes = 0, band = 0, total = 0;
  if (!CheckedMul(block, s.kept_row_bytes, &rows_bytes) || !CheckedAdd(rows_bytes, s.bitmap_bytes, &band) ||
      !CheckedAdd(band, 7, &band)) {
    return false;
  }
  s.band_bytes = band / 8 * 8;
  if (!CheckedMul(s.bands, s.band_bytes, &total)) return false;
  *out = s;
  return true;
}

// Whether column block j is kept in a band's bitmap.
inline bool BlockKept(const uint8_t* band, uint64_t j) { return (band[j / 8] >> (j % 8)) & 1u; }

// A band's kept blocks in ascending order, a bitmap word at a time (the
// bytes of a word least significant first: one load on a little-endian
// machine). Next() gives the next kept block, then s.blocks
// for ever - also when the bitmap sets fewer than s.kept bits, which a
// product then meets as zero columns past the matrix.
class KeptBlocks {
 public:
  KeptBlocks(const uint8_t* band, uint64_t blocks)
      : band_(band), words_(blocks / 64 + (blocks % 64 != 0)), blocks_(blocks), bits_(words_ > 0 ? Word(0) : 0) {}
  uint64_t Next() {
    while (bits_ == 0) {
      if (++word_ >= words_) return blocks_;
      bits_ = Word(word_);
    }
    const uint64_t j = word_ * 64 + static_cast<uint64_t>(__builtin_ctzll(bits_));
    bits_ &= bits_ - 1;
    return j < blocks_ ? j : blocks_;
  }

 private:
  uint64_t Word(uint64_t w) const {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    std::memcpy(&v, band_ + w * 8, sizeof v);  // GCC 12 did not fuse the byte loop below into one load
    return v;
#else
    uint64_t v = 0;
    for (int k = 7; k >= 0; --k) v = v << 8 | band_[w * 8 + static_cast<uint64_t>(k)];
    return v;
#endif
  }
  const uint8_t* band_;
  uint64_t words_, blocks_, word_ = 0, bits_;
};

// Products over bands prefetch the band this many bytes ahead (at least the
// next) while they work on one: bands of 1-6 KB are streams too short for
// the hardware prefetcher to reach full speed. SparseAhead(s) is the
// distance in bands; PrefetchBand(p, bytes) asks for every line of one.
constexpr uint64_t kSparseAheadBytes = 8192;
inline uint64_t SparseAhead(const SparseLayout& s) {
  return s.band_bytes == 0 ? 1 : (kSparseAheadBytes + s.band_bytes - 1) / s.band_bytes;
}
inline void PrefetchBand(const uint8_t* p, uint64_t bytes) {
  for (uint64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off);
}

// The products' gather: out[k*BS + t] = x[first[k] + t] for k < blocks,
// t < BS (first: the kept blocks' first columns), zero at columns >= cols
// (a narrow last block, or a bitmap short of kept blocks).
template <size_t BS>
inline void GatherBlocks(const float* x, size_t cols, const size_t* first, size_t blocks, float* out) {
  for (size_t k = 0; k < blocks; ++k) {
    float* g = out + k * BS;
    const size_t c0 = first[k];
    if (c0 + BS <= cols) {
      std::memcpy(g, x + c0, BS * sizeof(float));
    } else {
      for (size_t t = 0; t < BS; ++t) g[t] = c0 + t < cols ? x[c0 + t] : 0.0f;
    }
  }
}

// The loop of a SIMD table's block-sparse product (the reference walks its
// own): per band, its kept values kChunk at a time (the chunk's columns
// found once for all inputs), per input the values at those columns
// gathered into a compact vector (GatherBlocks) and
// product(rows, nrows, p0, m, gathered, part) - the table's dense product of
// the band's nrows = BS rows (rows: the first's bytes) over kept values
// [p0, p0 + m) against it, into part[0, BS); nrows is read from s, as a
// constant it let GCC 12 warn of the dense products' row tails, which it
// could not see are empty - the chunks' sums added in order into
// y[j*ldy + b*BS + i]. The chunk loop is outside the inputs': a band's chunk
// comes from memory once and stays in cache while every input meets it, each
// as a single input would, so a row's value depends only on its band and its
// input. Bands are prefetched SparseAhead(s) ahead.
template <size_t BS, size_t kChunk, class Product>
inline void ForSparseBands(const uint8_t* w, const SparseLayout& s, const float* x, size_t ldx, float* y, size_t ldy,
                           size_t bands, size_t n, Product&& product) {
  static_assert(kChunk % BS == 0 && kChunk % 32 == 0, "a chunk holds whole blocks and whole groups");
  const size_t cols = static_cast<size_t>(s.cols), nb = static_cast<size_t>(s.blocks);
  const size_t kept_cols = static_cast<size_t>(s.kept_cols), band_bytes = static_cast<size_t>(s.band_bytes);
  const size_t ahead = static_cast<size_t>(SparseAhead(s)), nrows = static_cast<size_t>(s.block);
  alignas(64) float gathered[kChunk];
  size_t first[kChunk / BS];  // the chunk's kept blocks' first columns
  float part[BS];
  for (size_t b = 0; b < bands; ++b) {
    const uint8_t* band = w + b * band_bytes;
    float* yb = y + b * BS;
    if (kept_cols == 0) {
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < BS; ++i) yb[j * ldy + i] = 0.0f;
      continue;
    }
    if (b + ahead < bands) PrefetchBand(band + ahead * band_bytes, band_bytes);
    KeptBlocks kept(band, nb);
    for (size_t p0 = 0; p0 < kept_cols; p0 += kChunk) {
      const size_t m = kept_cols - p0 < kChunk ? kept_cols - p0 : kChunk, blocks = m / BS;
      for (size_t k = 0; k < blocks; ++k) first[k] = static_cast<size_t>(kept.Next()) * BS;
      for (size_t j = 0; j < n; ++j) {
        GatherBlocks<BS>(x + j * ldx, cols, first, blocks, gathered);
        product(band + s.bitmap_bytes, nrows, p0, m, static_cast<const float*>(gathered), part);
        float* yj = yb + j * ldy;
        if (p0 == 0) {
          for (size_t i = 0; i < BS; ++i) yj[i] = part[i];
        } else {
          for (size_t i = 0; i < BS; ++i) yj[i] += part[i];
        }
      }
    }
  }
}

// The first band of `bands` at data whose bitmap does not keep exactly
// s.kept blocks, all below s.blocks: true with *band and its *count of set
// bits (those past NB included), false when every band is well formed.
inline bool FindBadBand(const SparseLayout& s, const uint8_t* data, uint64_t bands, uint64_t* band, uint64_t* count) {
  const uint64_t words = s.bitmap_bytes / 8;
  for (uint64_t b = 0; b < bands; ++b) {
    const uint8_t* p = data + b * s.band_bytes;
    uint64_t n = 0, past = 0;
    for (uint64_t w = 0; w < words; ++w) {
      uint64_t v = 0;
      for (int k = 7; k >= 0; --k) v = v << 8 | p[w * 8 + static_cast<uint64_t>(k)];
      n += static_cast<uint64_t>(__builtin_popcountll(v));
      const uint64_t first = w * 64;  // bits at or past NB in this word
      if (first + 64 > s.blocks) past += static_cast<uint64_t>(__builtin_popcountll(first >= s.blocks ? v : v >> (s.blocks - first)));
    }
    if (n != s.kept || past != 0) {
      *band = b;
      *count = n;
      return true;
    }
  }
  return false;
}

}  // namespace tinyai

#endif  // TINYAI_COMMON_SPARSE_H_
