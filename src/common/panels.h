// Row panels: how the weight cache may hold the 4-bit grouped dtypes
// (q4_g32, q4nl_g32) for kernels that multiply several rows per load of the
// input. Never a file layout: the file, and every row handed to a caller
// that is not a product, stays in the row-by-row layout of groups.h.
//
// A panel is kPanelRows consecutive rows of a tensor, starting at a tensor
// row that is a multiple of kPanelRows, stored group by group: for group g,
// 144 bytes at g * 144 - the eight rows' scales (row r's half at 2r), then
// bytes 0..7 of each row's 16 code bytes (row r's at 16 + 8r), then bytes
// 8..15 (row r's at 80 + 8r). A panel takes exactly the bytes of its eight
// rows, so the rows after it start where they would without panels.
//
// Why: a product of eight rows then loads each 8-byte run of the input once
// for all eight (a broadcast), adds its integer products without a
// horizontal reduction per row, and converts eight rows' scales with one
// instruction. Measured in cache against the rows-one-after-another kernel
// (docs/benchmarks.md): 2.0-2.4x on this project's AVX-512 VNNI host; with
// AVX2 (eight rows in two 4-row halves) 2.2-3.0x for q4_g32, 1.8-2.2x for q4nl_g32.
#ifndef TINYAI_COMMON_PANELS_H_
#define TINYAI_COMMON_PANELS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/groups.h"

namespace tinyai {

constexpr size_t kPanelRows = 8;
constexpr size_t kPanelGroupBytes = kPanelRows * kQ4GroupBytes;  // 144
constexpr size_t kPanelScaleBytes = 2 * kPanelRows;             // 16
constexpr size_t kPanelHalfCodeBytes = 8;                       // a row's bytes 0..7, or 8..15

// Dtypes whose rows can be held in panels.
constexpr bool PanelDType(int32_t dtype) { return dtype == TINYAI_DTYPE_Q4_G32 || dtype == TINYAI_DTYPE_Q4NL_G32; }

// Bytes of one panel of rows of `row_bytes` (a whole number of groups).
inline size_t PanelBytes(size_t row_bytes) { return kPanelRows * row_bytes; }

// The rows [first, end) of a run of tensor rows that lie in whole panels:
// from the first multiple of kPanelRows at or after first to the last at or
// before end (an empty range, first == end, when there is none).
inline void PanelRange(uint64_t first, uint64_t end, uint64_t* panels_first, uint64_t* panels_end) {
  const uint64_t a = (first + kPanelRows - 1) / kPanelRows * kPanelRows, b = end / kPanelRows * kPanelRows;
  *panels_first = a < b ? a : first;
  *panels_end = a < b ? b : first;
}

// One panel from kPanelRows rows, `row_bytes` apart in rows (row_bytes a
// multiple of 18); panel must not overlap rows.
inline void PackPanel(const uint8_t* rows, size_t row_bytes, uint8_t* panel) {
  const size_t groups = row_bytes / kQ4GroupBytes;
  for (size_t g = 0; g < groups; ++g) {
    uint8_t* out = panel + g * kPanelGroupBytes;
    for (size_t r = 0; r < kPanelRows; ++r) {
      const uint8_t* in = rows + r * row_bytes + g * kQ4GroupBytes;
      std::memcpy(out + 2 * r, in, 2);
      std::memcpy(out + kPanelScaleBytes + kPanelHalfCodeBytes * r, in + 2, kPanelHalfCodeBytes);
      std::memcpy(out + kPanelScaleBytes + kPanelRows * kPanelHalfCodeBytes + kPanelHalfCodeBytes * r,
                  in + 2 + kPanelHalfCodeBytes, kPanelHalfCodeBytes);
    }
  }
}

// Row r (< kPanelRows) of a panel, as row_bytes bytes in the row layout.
inline void UnpackPanelRow(const uint8_t* panel, size_t row_bytes, size_t r, uint8_t* row) {
  const size_t groups = row_bytes / kQ4GroupBytes;
  for (size_t g = 0; g < groups; ++g) {
    const uint8_t* in = panel + g * kPanelGroupBytes;
    uint8_t* out = row + g * kQ4GroupBytes;
    std::memcpy(out, in + 2 * r, 2);
    std::memcpy(out + 2, in + kPanelScaleBytes + kPanelHalfCodeBytes * r, kPanelHalfCodeBytes);
    std::memcpy(out + 2 + kPanelHalfCodeBytes, in + kPanelScaleBytes + kPanelRows * kPanelHalfCodeBytes + kPanelHalfCodeBytes * r,
                kPanelHalfCodeBytes);
  }
}

// Every row of a panel, kPanelRows * row_bytes bytes in the row layout.
inline void UnpackPanel(const uint8_t* panel, size_t row_bytes, uint8_t* rows) {
  for (size_t r = 0; r < kPanelRows; ++r) UnpackPanelRow(panel, row_bytes, r, rows + r * row_bytes);
}

// A panel product's inputs in tiles: kInputs at a time, then two, then one.
// tile(J, j) multiplies inputs j..j+J-1 with every panel; J is a
// std::integral_constant, so a kernel's tile takes it as a template argument.
template <size_t kInputs, class Tile>
inline void ForPanelInputs(size_t n, const Tile& tile) {
  size_t j = 0;
  for (; j + kInputs <= n; j += kInputs) tile(std::integral_constant<size_t, kInputs>(), j);
  for (; j + 2 <= n; j += 2) tile(std::integral_constant<size_t, 2>(), j);
  if (j < n) tile(std::integral_constant<size_t, 1>(), j);
}

}  // namespace tinyai

#endif  // TINYAI_COMMON_PANELS_H_
