#include "loader/row_slices.h"

#include <cstring>

#include "common/panels.h"
#include "common/status.h"
#include "format/zstd_frames.h"
#include "tinyai/types.h"

namespace tinyai {
namespace {

constexpr uint64_t kNoFrames = UINT64_MAX;

// Walks every layer's tensors and reports slices and spans to emit (called
// twice: once to count, once to fill). frames(t) gives a zstd tensor's frame
// offsets.
// A slice's rows of a tensor held in panels: a multiple of kPanelRows (at
// least one panel), unless they are the tensor's last.
uint64_t PanelTake(uint64_t fit, uint64_t left) {
  fit = fit < kPanelRows ? kPanelRows : fit / kPanelRows * kPanelRows;
  return left < fit ? left : fit;
}

// Whether a tensor's slices take its rows in multiples of kTileRows: where
// a slice holds at least kTiledRows of them (so at most 7 rows of 64 are
// given up). The products run rows in tiles of 8 (fp32 prompts' pair tiles,
// the grouped dtypes' four and eight rows), a slice's last rows % 8 in a
// short tile or on a slower path: 1 MiB of 768 fp32 columns is 341 rows, 5
// of them left over in every slice, and two threads' ranges cut slices into
// more such pieces.
// Fewer rows a slice are not cut so: 46 rows of 5,632 fp32 columns cut to
// 40 give up 13% of each slice, and the ~1B f32 model under a cap then
// decoded at a median 1.34 against 1.47 tokens/s (within its noise, 0.96-
// 1.61; docs/benchmarks.md, "Zen 5 host: slices of whole row tiles").
constexpr uint64_t kTileRows = 8, kTiledRows = 64;
static_assert(kPanelRows == kTileRows, "Pack closes a slice without a panel's or a tile's room by one rule");
bool Tiled(uint64_t target, uint64_t row_bytes) { return row_bytes != 0 && target / row_bytes >= kTiledRows; }

// A slice's rows of a tensor, of the left that are still to place and the
// fit that the slice has room for (at least 1): a panel tensor's by
// PanelTake; a tiled one's all that are left if they fit, else the rows that
// fit in whole tiles (Pack starts a new slice where not one fits); any
// other's as many as fit.
uint64_t Take(bool panels, bool tiled, uint64_t fit, uint64_t left) {
  if (panels) return PanelTake(fit, left);
  if (left <= fit) return left;
  return tiled ? fit / kTileRows * kTileRows : fit;
}

// The per-tensor tables Pack reads.
struct PackTables {
  const uint64_t* rows;
  const uint64_t* row_bytes;
  const uint64_t* stored_row_bytes;
  const uint64_t* stored_per_row;
  const uint64_t* stored_rows;
  const uint8_t* transformed;
  const uint8_t* panels;
};

template <class EmitSlice, class EmitSpan, class Frames>
void Pack(const TmaiReader& reader, uint64_t target, const PackTables& tables, Frames&& frames,
          EmitSlice&& emit_slice, EmitSpan&& emit_span) {
  const uint64_t* rows = tables.rows;
  const uint64_t* row_bytes = tables.row_bytes;
  const uint64_t* stored_row_bytes = tables.stored_row_bytes;
  const uint8_t* transformed = tables.transformed;
  const uint8_t* panels = tables.panels;
  const auto layers = reader.layers();
  const auto tensors = reader.tensors();
  int32_t next_slice = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    bool open = false;
    RowSlice cur;
    auto close = [&]() {
      if (open) {
        emit_slice(cur);
        ++next_slice;
      }
      open = false;
    };
    for (uint32_t t = layers[l].first_tensor; t < layers[l].first_tensor + layers[l].tensor_count; ++t) {
      const tmai::TensorEntry& e = tensors[t];
      const int32_t ti = static_cast<int32_t>(t);
      if (e.codec == TINYAI_CODEC_ZSTD) {
        close();
        const uint64_t* off = frames(ti);
        const uint64_t rpf = e.codec_param;
        const uint32_t f_count = ZstdFrameCount(e);
        for (uint32_t f = 0; f < f_count; ++f) {
          RowSlice b;
          b.stored_offset = e.offset + off[f];
          b.stored_size = off[f + 1] - off[f];
          uint64_t r0 = f * rpf, r1 = r0 + rpf < rows[t] ? r0 + rpf : rows[t];
          b.decoded_size = (r1 - r0) * row_bytes[t];
          b.layer = static_cast<int32_t>(l);
          b.tensor = ti;
          b.frame = static_cast<int32_t>(f);
          emit_span(ti, TensorSpan{next_slice, r0, r1, 0});
          emit_slice(b);
          ++next_slice;
        }
        continue;
      }
      if (e.codec != TINYAI_CODEC_NONE) continue;  // not loadable; no spans
      const uint64_t rb = row_bytes[t];
      if (transformed[t]) {  // slices of its own, about the target once converted
        close();
        const uint64_t srb = stored_row_bytes[t], per = tables.stored_per_row[t], srows = tables.stored_rows[t];
        uint64_t fit = target / rb;
        if (fit == 0) fit = 1;
        for (uint64_t r = 0; r < rows[t];) {
          const uint64_t take = Take(panels[t] != 0, Tiled(target, rb), fit, rows[t] - r);
          const uint64_t s0 = r * per, s1 = (r + take) * per < srows ? (r + take) * per : srows;
          RowSlice b;
          b.stored_offset = e.offset + s0 * srb;
          b.stored_size = (s1 - s0) * srb;
          b.decoded_size = take * rb;
          b.layer = static_cast<int32_t>(l);
          b.tensor = ti;
          b.transform = true;
          emit_span(ti, TensorSpan{next_slice, r, r + take, 0});
          emit_slice(b);
          ++next_slice;
          r += take;
        }
        continue;
      }
      uint64_t r = 0;
      while (r < rows[t]) {
        const uint64_t row_start = e.offset + r * rb;
        // A slice is one read: it ends where the next tensor does not follow
        // on (a GGUF read in place; a .tmai's tensors are 64-byte aligned,
        // never further apart).
        if (open && (row_start + rb - cur.stored_offset > target ||
                     row_start >= cur.stored_offset + cur.stored_size + tmai::kDataAlignment)) {
          close();
        }
        if (!open) {
          open = true;
          cur = RowSlice();
          cur.stored_offset = row_start;
          cur.layer = static_cast<int32_t>(l);
          cur.tensor = ti;
        }
        // As many rows as fit the target; at least one (a row larger than
        // the target is a slice of its own). The slice's end saturates: a
        // target near 2^64 (rowSliceSize SIZE_MAX) means the whole layer.
        const uint64_t end = target > UINT64_MAX - cur.stored_offset ? UINT64_MAX : cur.stored_offset + target;
        uint64_t room = end > row_start ? end - row_start : 0;
        uint64_t fit = room / rb;
        const bool tiled = !panels[t] && Tiled(target, rb);
        if ((panels[t] || tiled) && fit < kTileRows && row_start > cur.stored_offset && rows[t] - r > fit) {
          close();  // not a panel's (a tile's) room left: it starts the next slice
          continue;
        }
        if (fit == 0) fit = 1;
        const uint64_t take = Take(panels[t] != 0, tiled, fit, rows[t] - r);
        emit_span(ti, TensorSpan{next_slice, r, r + take, row_start - cur.stored_offset});
        r += take;
        cur.stored_size = row_start + take * rb - cur.stored_offset;
        cur.decoded_size = cur.stored_size;
      }
    }
    close();
  }
}

}  // namespace

TinyAIStatus RowSliceTable::Build(const TmaiReader& reader, const WeightSource& source, uint64_t target,
                                  uint32_t panel_dtypes) {
  const auto tensors = reader.tensors();
  const size_t n = tensors.size();
  TINYAI_RETURN_IF_ERROR(rows_.Allocate(n, "row counts"));
  TINYAI_RETURN_IF_ERROR(row_bytes_.Allocate(n, "row sizes"));
  TINYAI_RETURN_IF_ERROR(stored_row_bytes_.Allocate(n, "stored row sizes"));
  TINYAI_RETURN_IF_ERROR(stored_per_row_.Allocate(n, "stored rows per row"));
  TINYAI_RETURN_IF_ERROR(stored_rows_.Allocate(n, "stored row counts"));
  TINYAI_RETURN_IF_ERROR(transformed_.Allocate(n, "converted tensors"));
  TINYAI_RETURN_IF_ERROR(panels_.Allocate(n, "tensors in panels"));
  TINYAI_RETURN_IF_ERROR(first_frame_.Allocate(n, "frame table index"));
  uint64_t frame_entries = 0;
  any_transformed_ = false;
  any_panels_ = false;
  for (size_t t = 0; t < n; ++t) {
    TINYAI_RETURN_IF_ERROR(TensorRowLayout(tensors[t], &rows_[t], &row_bytes_[t]));
    const int32_t dtype = tensors[t].dtype;
    panels_[t] = PanelDType(dtype) && (panel_dtypes >> dtype & 1u) != 0 && row_bytes_[t] % kQ4GroupBytes == 0 &&
                 rows_[t] >= kPanelRows && !tmai::IsBlockSparse(tensors[t]);
    any_panels_ = any_panels_ || panels_[t] != 0;
    stored_row_bytes_[t] = row_bytes_[t];
    stored_per_row_[t] = 1;
    stored_rows_[t] = rows_[t];
    const tmai::TensorEntry& f = reader.file_tensors()[t];
    const bool pruned_here = tmai::IsBlockSparse(tensors[t]) && !tmai::IsBlockSparse(f);
    transformed_[t] = tensors[t].dtype != f.dtype || pruned_here;
    if (transformed_[t]) {
      TINYAI_RETURN_IF_ERROR(TensorRowLayout(f, &stored_rows_[t], &stored_row_bytes_[t]));
      if (pruned_here) stored_per_row_[t] = tensors[t].shape[2];
      any_transformed_ = true;
    }
    first_frame_[t] = kNoFrames;
    if (tensors[t].codec == TINYAI_CODEC_ZSTD) {
      first_frame_[t] = frame_entries;
      frame_entries += ZstdFrameCount(tensors[t]) + 1u;
    }
  }
  if (frame_entries > 0) {
    TINYAI_RETURN_IF_ERROR(frames_.Allocate(static_cast<size_t>(frame_entries), "zstd frame tables"));
    Array<uint8_t> raw;
    for (size_t t = 0; t < n; ++t) {
      if (first_frame_[t] == kNoFrames) continue;
      const tmai::TensorEntry& e = tensors[t];
      const size_t table_bytes = (ZstdFrameCount(e) + 1u) * sizeof(uint64_t);
      TINYAI_RETURN_IF_ERROR(raw.Allocate(table_bytes, "zstd frame table"));
      TINYAI_RETURN_IF_ERROR(source.Read(e.offset, table_bytes, raw.data(), reader.source()));
      TINYAI_RETURN_IF_ERROR(
          ParseZstdFrameTable(e, raw.data(), table_bytes, frames_.data() + first_frame_[t], reader.source()));
    }
  }
  if (target == 0) target = 1;
  auto frames = [this](int32_t t) { return frames_.data() + first_frame_[static_cast<size_t>(t)]; };

  const PackTables tables{rows_.data(), row_bytes_.data(), stored_row_bytes_.data(), stored_per_row_.data(),
                          stored_rows_.data(), transformed_.data(), panels_.data()};
  // Count, then fill.
  size_t slices = 0, spans = 0;
  Pack(reader, target, tables, frames,
       [&](const RowSlice&) { ++slices; },
       [&](int32_t, const TensorSpan&) { ++spans; });
  TINYAI_RETURN_IF_ERROR(slices_.Allocate(slices, "row slices"));
  TINYAI_RETURN_IF_ERROR(spans_.Allocate(spans, "tensor spans"));
  TINYAI_RETURN_IF_ERROR(first_span_.Allocate(n + 1, "tensor span index"));
  TINYAI_RETURN_IF_ERROR(layer_first_slice_.Allocate(reader.layers().size() + 1, "layer slice index"));
  // Spans arrive grouped by tensor in directory order (a tensor's rows are
  // walked in one go), so a running count gives each tensor's first span.
  slice_count_ = 0;
  span_count_ = 0;
  int32_t last_tensor = -1;
  for (size_t t = 0; t <= n; ++t) first_span_[t] = 0;
  Pack(reader, target, tables, frames,
       [&](const RowSlice& b) {
         slices_[slice_count_++] = b;
       },
       [&](int32_t t, const TensorSpan& s) {
         while (last_tensor < t) first_span_[static_cast<size_t>(++last_tensor)] = static_cast<uint32_t>(span_count_);
         spans_[span_count_++] = s;
       });
  while (last_tensor < static_cast<int32_t>(n)) first_span_[static_cast<size_t>(++last_tensor)] = static_cast<uint32_t>(span_count_);
  // Layers: slices are emitted in layer order.
  const size_t layer_count = reader.layers().size();
  size_t b = 0;
  for (size_t l = 0; l <= layer_count; ++l) {
    while (b < slice_count_ && static_cast<size_t>(slices_[b].layer) < l) ++b;
    layer_first_slice_[l] = static_cast<int32_t>(b);
  }
  max_decoded_ = 0;
  max_stored_frame_ = 0;
  largest_slice_ = -1;
  for (size_t i = 0; i < slice_count_; ++i) {
    if (slices_[i].decoded_size > max_decoded_) {
      max_decoded_ = slices_[i].decoded_size;
      largest_slice_ = static_cast<int32_t>(i);
    }
    if (slices_[i].frame >= 0 && slices_[i].stored_size > max_stored_frame_) max_stored_frame_ = slices_[i].stored_size;
  }
  return TINYAI_OK;
}

Span<const TensorSpan> RowSliceTable::spans(int32_t tensor) const {
  const uint32_t a = first_span_[static_cast<size_t>(tensor)], b = first_span_[static_cast<size_t>(tensor) + 1];
  return Span<const TensorSpan>(spans_.data() + a, b - a);
}

void RowSliceTable::SpanPanels(int32_t tensor, const TensorSpan& s, uint64_t* first, uint64_t* end) const {
  if (!panels(tensor)) {
    *first = *end = s.row_begin;
    return;
  }
  PanelRange(s.row_begin, s.row_end, first, end);
}

const TensorSpan* RowSliceTable::Find(int32_t tensor, uint64_t row) const {
  Span<const TensorSpan> s = spans(tensor);
  size_t lo = 0, hi = s.size();
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (s[mid].row_end <= row) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == s.size() || row < s[lo].row_begin) return nullptr;
  return &s[lo];
}

const uint64_t* RowSliceTable::frame_offsets(int32_t tensor) const {
  uint64_t first = first_frame_[static_cast<size_t>(tensor)];
  return first == kNoFrames ? nullptr : frames_.data() + first;
}

uint64_t RowSliceTable::bytes() const {
  return slices_.size() * sizeof(RowSlice) + spans_.size() * sizeof(TensorSpan) + first_span_.size() * 4 +
         (rows_.size() + row_bytes_.size() + stored_row_bytes_.size() + stored_per_row_.size() + stored_rows_.size() +
          frames_.size() + first_frame_.size()) * 8 +
         transformed_.size() + panels_.size() +
         layer_first_slice_.size() * 4;
}

}  // namespace tinyai
