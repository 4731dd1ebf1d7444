// The persistent store's storage records, shared by its parts (store.cc:
// storage and access; store_io.cc: saving and loading).
#ifndef TINYAI_KV_STORE_INTERNAL_H_
#define TINYAI_KV_STORE_INTERNAL_H_

#include "common/checked_math.h"
#include "kv/store.h"

namespace tinyai {

// An auto-dim matrix: rows x cols values in blocks of kAutoBlock x
// kAutoBlock under a grid that doubles as the matrix grows.
struct PersistentStore::Matrix {
  int64_t rows = 0, cols = 0;
  int64_t grid_rows = 0, grid_cols = 0;  // the grid's capacity in blocks
  uint8_t** grid = nullptr;               // [block row][block col], nullptr until written
};

struct PersistentStore::Entry {
  PDecl d;
  uint64_t elem_bytes = 0;   // one element (a table's row)
  uint8_t* single = nullptr; // a scalar's or a tensor's element
  // A table: written extents, the directory's capacities, rows per chunk.
  int64_t extent[kMaxPIndices] = {0, 0, 0, 0};
  int64_t cap[kMaxPIndices] = {0, 0, 0, 0};  // prefix indices: capacity; the last: chunks
  int64_t chunk = 0;
  uint8_t** dir = nullptr;
  uint64_t dir_entries = 0;
  uint8_t* block = nullptr;  // an all-fixed table's one block
  // Auto-dim: one matrix per table tuple, over cap[] of the table indices.
  Matrix* mats = nullptr;
  uint64_t mat_entries = 0;
};

// An auto-dim reference's cells in one matrix: rows [r0, r1) x columns
// [c0, c1) (a vector's one column: 0..1).
struct PersistentStore::Cells {
  int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 1;
  // At most 2^40 x 2^40; false when the product passes 64 bits.
  bool Count(uint64_t* n) const {
    return CheckedMul(static_cast<uint64_t>(r1 - r0), static_cast<uint64_t>(c1 - c0), n);
  }
};

// An auto-dim reference over its matrices: the table tuples [from, to),
// each matrix's cells resolved against its own shape.
struct PersistentStore::AutoSlice {
  int64_t from[kMaxPIndices] = {0, 0, 0, 0};
  int64_t to[kMaxPIndices] = {0, 0, 0, 0};
  uint64_t cells = 0;  // in all the matrices
  // Every tuple of the range has cells (a matrix at its declared shape
  // does): a walk takes them all, as many as the data's values at most.
  // Otherwise only the matrices held can have any, and a walk takes those.
  bool dense = false;
};

}  // namespace tinyai

#endif  // TINYAI_KV_STORE_INTERNAL_H_
