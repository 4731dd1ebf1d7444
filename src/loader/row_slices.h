// The unit the weight cache moves: a row slice, a run of whole rows of one or
// more tensors of one layer that is loaded, kept and evicted as one piece.
//
// Uncompressed tensors are packed greedily in file order: a slice takes rows
// (of the tensor at hand, then of the next tensor of the layer) until another
// row would push it past the target size, so small tensors (norms) ride along
// with their neighbours and a big matrix is cut into slices of about the
// target, a tensor's rows in a slice a multiple of 8 (the products' row
// tiles) where a slice holds at least 64 of them. A row larger than the
// target is a slice of its own. A zstd tensor's slices are its frames
// (docs/format.md), each decoded alone. A tensor the
// runtime directory gives another dtype than the file (a model with
// precisions applied, loader/precision_plan.h) has slices of its own too,
// about the target once encoded, each converted from the stored rows as it
// loads. Slices never span layers.
//
// Tensors whose rows the weight cache holds in panels (common/panels.h; the
// dtypes Build is given) are cut only at multiples of kPanelRows rows, so a
// row is in a panel or not whatever the target, and products give the same
// values however a model streams.
//
// The smallest cache that can run a model holds its largest slice, so the
// target, not the largest layer or tensor, sets the floor of a memory limit.
#ifndef TINYAI_LOADER_ROW_BLOCKS_H_
#define TINYAI_LOADER_ROW_BLOCKS_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/span.h"
#include "format/tmai_reader.h"
#include "loader/weight_source.h"

namespace tinyai {

struct RowSlice {
  uint64_t stored_offset = 0;  // file offset of the bytes to read
  uint64_t stored_size = 0;
  uint64_t decoded_size = 0;   // bytes in memory once loaded
  int32_t layer = -1;
  int32_t tensor = -1;         // zstd: the tensor this frame belongs to; raw: the first tensor in it
  int32_t frame = -1;          // zstd frame index; -1 for uncompressed bytes
  bool transform = false;      // stored rows of tensor converted to its runtime dtype as they load
};

// Rows [row_begin, row_end) of a tensor live in `slice`, row_begin's first
// byte `offset` bytes from the slice's start.
struct TensorSpan {
  int32_t slice = -1;
  uint64_t row_begin = 0;
  uint64_t row_end = 0;
  uint64_t offset = 0;
};

class RowSliceTable {
 public:
  // Splits every layer of reader's model into slices of about target_bytes.
  // Frame tables of zstd tensors are read from source and validated.
  // Tensors of the dtypes in panel_dtypes (bit 1 << dtype; PanelDType()
  // ones only) are held in panels.
  TinyAIStatus Build(const TmaiReader& reader, const WeightSource& source, uint64_t target_bytes,
                     uint32_t panel_dtypes = 0);

  Span<const RowSlice> slices() const { return Span<const RowSlice>(slices_.data(), slice_count_); }
  const RowSlice& slice(int32_t b) const { return slices_[static_cast<size_t>(b)]; }
  int32_t slice_count() const { return static_cast<int32_t>(slice_count_); }
  // The tensor's spans in row order; empty for a tensor no slice can hold
  // (a codec this build cannot load).
  Span<const TensorSpan> spans(int32_t tensor) const;
  // The span holding row of tensor; nullptr when row is out of range.
  const TensorSpan* Find(int32_t tensor, uint64_t row) const;
  uint64_t rows(int32_t tensor) const { return rows_[static_cast<size_t>(tensor)]; }
  uint64_t row_bytes(int32_t tensor) const { return row_bytes_[static_cast<size_t>(tensor)]; }
  // Bytes of one row as the file stores it (row_bytes() unless transformed).
  uint64_t stored_row_bytes(int32_t tensor) const { return stored_row_bytes_[static_cast<size_t>(tensor)]; }
  // Stored rows one row holds: a band's rows (its block) for a matrix
  // pruned as it loads, else 1. Row r of such a tensor is read from stored
  // rows [r * n, min((r + 1) * n, stored_rows())).
  uint64_t stored_rows_per_row(int32_t tensor) const { return stored_per_row_[static_cast<size_t>(tensor)]; }
  uint64_t stored_rows(int32_t tensor) const { return stored_rows_[static_cast<size_t>(tensor)]; }
  // The tensor's runtime dtype or layout differs from the file's.
  bool transformed(int32_t tensor) const { return transformed_[static_cast<size_t>(tensor)] != 0; }
  bool any_transformed() const { return any_transformed_; }
  // The tensor's rows are held in panels where whole panels fit a span.
  bool panels(int32_t tensor) const { return panels_[static_cast<size_t>(tensor)] != 0; }
  bool any_panels() const { return any_panels_; }
  // The rows of span s (of tensor) that lie in panels: [*first, *end), empty
  // (both s.row_begin) when none do.
  void SpanPanels(int32_t tensor, const TensorSpan& s, uint64_t* first, uint64_t* end) const;
  // Offsets of a zstd tensor's frames from its stored start (F+1 entries).
  const uint64_t* frame_offsets(int32_t tensor) const;
  // The first slice of a layer and the one past its last.
  int32_t layer_first_slice(int32_t layer) const { return layer_first_slice_[static_cast<size_t>(layer)]; }
  int32_t layer_end_slice(int32_t layer) const { return layer_first_slice_[static_cast<size_t>(layer) + 1]; }

  uint64_t max_decoded_bytes() const { return max_decoded_; }
  uint64_t max_stored_frame_bytes() const { return max_stored_frame_; }
  int32_t largest_slice() const { return largest_slice_; }
  // Bytes this table holds (for memory accounting).
  uint64_t bytes() const;

 private:
  TinyAIStatus AddSlice(const RowSlice& b);
  TinyAIStatus AddSpan(int32_t tensor, const TensorSpan& s);

  Array<RowSlice> slices_;
  size_t slice_count_ = 0;
  Array<TensorSpan> spans_;
  size_t span_count_ = 0;
  Array<uint32_t> first_span_;  // per tensor, +1 sentinel
  Array<uint64_t> rows_, row_bytes_, stored_row_bytes_, stored_per_row_, stored_rows_;
  Array<uint8_t> transformed_, panels_;
  bool any_transformed_ = false, any_panels_ = false;
  Array<uint64_t> frames_;          // zstd frame tables, concatenated
  Array<uint64_t> first_frame_;     // per tensor: index into frames_ (UINT64_MAX when raw)
  Array<int32_t> layer_first_slice_;  // per layer, +1 sentinel
  uint64_t max_decoded_ = 0;
  uint64_t max_stored_frame_ = 0;
  int32_t largest_slice_ = -1;
};

// The weight cache's entries are the table's slices (0 .. slice_count()-1),
// then one per layer (whole layers: tinyaiGetLayerWeights). True when the
// entry's bytes are used where source holds them (an image in memory): a
// slice, or every tensor of a layer, uncompressed and not converted. Such an
// entry takes no memory of the cache's own.
inline bool UsedInPlace(const RowSliceTable& table, const TmaiReader& reader, const WeightSource& source,
                        int32_t entry) {
  if (!source.InPlace(0)) return false;
  if (entry < table.slice_count()) return table.slice(entry).frame < 0 && !table.slice(entry).transform;
  // A GGUF read in place lays its layers out afresh once loaded.
  if (reader.in_place()) return false;
  const tmai::LayerEntry& l = reader.layers()[static_cast<size_t>(entry - table.slice_count())];
  for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
    if (reader.tensors()[t].codec != TINYAI_CODEC_NONE || table.transformed(static_cast<int32_t>(t))) return false;
  }
  return true;
}

}  // namespace tinyai

#endif  // TINYAI_LOADER_ROW_BLOCKS_H_
