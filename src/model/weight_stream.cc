#include "model/weight_stream.h"

#include <cstdio>

#include "common/format.h"
#include "common/groups.h"
#include "common/panels.h"
#include "common/status.h"

namespace tinyai {
namespace {

// Rows per parallel share of a matrix product: keeps shares cache-line sized.
constexpr size_t kRowGrain = 16;

}  // namespace

TinyAIStatus WeightStream::Init(TinyAIMappedModel* model) {
  model_ = model;
  const size_t slices = static_cast<size_t>(model->slices().slice_count());
  TINYAI_RETURN_IF_ERROR(sequence_.Allocate(slices, "slice sequence"));
  TINYAI_RETURN_IF_ERROR(sequence_index_.Allocate(slices, "slice sequence index"));
  TINYAI_RETURN_IF_ERROR(counted_.Allocate(slices, "slice sequence index"));
  TINYAI_RETURN_IF_ERROR(segments_.Allocate(slices, "matmul window"));
  TINYAI_RETURN_IF_ERROR(pinned_.Allocate(slices, "pinned slices"));
  for (int32_t& i : sequence_index_) i = -1;
  sequence_length_ = 0;
  pass_ = prefetched_until_ = 0;
  UpdateStreaming();
  return TINYAI_OK;
}

WeightTotals WeightStream::Sum(const uint8_t* layers) const {
  WeightTotals t;
  const RowSliceTable& table = model_->slices();
  for (size_t b = 0; b < counted_.size(); ++b) {
    if (!counted_[b]) continue;
    const int32_t slice = static_cast<int32_t>(b);
    if (layers && !layers[table.slice(slice).layer]) continue;
    const uint64_t bytes = model_->cache().EntryBytes(slice);
    t.resident += bytes;
    t.decoded += SliceBytes(slice);
    if (t.slice < 0 || bytes > t.largest_slice) {
      t.largest_slice = bytes;
      t.slice = slice;
    }
  }
  return t;
}

int32_t WeightStream::MainTensor(int32_t slice) const {
  if (slice < 0) return -1;
  const RowSlice& b = model_->slices().slice(slice);
  if (b.frame >= 0) return b.tensor;
  const tmai::LayerEntry& l = model_->reader().layers()[static_cast<size_t>(b.layer)];
  int32_t best = -1;
  uint64_t best_bytes = 0;
  for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
    uint64_t bytes = 0;
    for (const TensorSpan& sp : model_->slices().spans(static_cast<int32_t>(t))) {
      if (sp.slice == slice) bytes += (sp.row_end - sp.row_begin) * model_->slices().row_bytes(static_cast<int32_t>(t));
    }
    if (bytes > best_bytes) {
      best = static_cast<int32_t>(t);
      best_bytes = bytes;
    }
  }
  return best;
}

void WeightStream::DescribeSlice(int32_t slice, char* out, size_t capacity) const {
  const int32_t main = MainTensor(slice);
  if (main < 0) {
    tinyai::Format(out, capacity, "-");
    return;
  }
  const RowSlice& b = model_->slices().slice(slice);
  const tmai::LayerEntry& l = model_->reader().layers()[static_cast<size_t>(b.layer)];
  int32_t others = 0;
  for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count && b.frame < 0; ++t) {
    if (static_cast<int32_t>(t) == main) continue;
    for (const TensorSpan& sp : model_->slices().spans(static_cast<int32_t>(t))) {
      if (sp.slice == slice) {
        ++others;
        break;
      }
    }
  }
  const char* name = model_->reader().tensors()[static_cast<size_t>(main)].name;
  if (others == 0) {
    tinyai::Format(out, capacity, "tensor '%s'", name);
  } else {
    tinyai::Format(out, capacity, "tensor '%s' and %d smaller one%s of layer '%s'", name, others,
                  others == 1 ? "" : "s", model_->descriptor(b.layer).name);
  }
}

void WeightStream::AddTensor(int32_t tensor) {
  for (const TensorSpan& sp : model_->slices().spans(tensor)) {
    Count(sp.slice);
    if (sequence_index_[static_cast<size_t>(sp.slice)] >= 0) continue;
    sequence_index_[static_cast<size_t>(sp.slice)] = static_cast<int32_t>(sequence_length_);
    sequence_[sequence_length_++] = sp.slice;
  }
}

void WeightStream::AddSideTensor(int32_t tensor) {
  for (const TensorSpan& sp : model_->slices().spans(tensor)) Count(sp.slice);
}

void WeightStream::UpdateStreaming() {
  cap_epoch_ = model_->cache().capacity_epoch();
  const uint64_t cap = model_->cache().stats().capacity;
  // With a cap, a window pins at most a quarter of it and prefetch reads up
  // to another quarter ahead, leaving half for what the policy keeps.
  window_bytes_ = cap / 4;
  lookahead_bytes_ = cap == 0 ? (32u << 20) : cap / 4;
  prefetched_until_ = 0;
}

TinyAIStatus WeightStream::Preload(const uint8_t* layers) {
  for (size_t b = 0; b < counted_.size(); ++b) {
    if (!counted_[b] || (layers && !layers[model_->slices().slice(static_cast<int32_t>(b)).layer])) continue;
    const uint8_t* data = nullptr;
    TINYAI_RETURN_IF_ERROR(model_->cache().Acquire(static_cast<int32_t>(b), &data));
    TINYAI_RETURN_IF_ERROR(model_->ReleaseSlice(static_cast<int32_t>(b)));
  }
  return TINYAI_OK;
}

uint64_t WeightStream::bytes() const {
  return sequence_.size() * 2 * sizeof(int32_t) + counted_.size() + segments_.size() * sizeof(Segment) +
         pinned_.size() * sizeof(int32_t);
}

void WeightStream::ReleasePinned(size_t count) {
  for (size_t i = 0; i < count; ++i) model_->ReleaseSlice(pinned_[i]);
}

void WeightStream::PrefetchAfter(int32_t slice) {
  const int32_t idx = sequence_index_[static_cast<size_t>(slice)];
  if (idx < 0 || sequence_length_ == 0) return;
  const uint64_t len = sequence_length_;
  const uint64_t at = pass_ * len + static_cast<uint64_t>(idx);
  if (prefetched_until_ < at + 1) prefetched_until_ = at + 1;
  uint64_t ahead = 0;
  for (uint64_t j = at + 1; j < prefetched_until_; ++j) ahead += SliceBytes(sequence_[j % len]);
  // The sequence is a cycle: after the last slice come the next pass's.
  while (ahead < lookahead_bytes_ && prefetched_until_ < at + len) {
    const int32_t b = sequence_[prefetched_until_ % len];
    model_->PrefetchSlice(b);
    ahead += SliceBytes(b);
    ++prefetched_until_;
  }
}

TinyAIStatus WeightStream::AcquireVector(int32_t tensor, const float** data, int32_t* slice) {
  const uint8_t* p = nullptr;
  uint64_t rows = 0;
  TINYAI_RETURN_IF_ERROR(model_->AcquireRows(tensor, 0, &p, &rows, slice));
  PrefetchAfter(*slice);
  *data = reinterpret_cast<const float*>(p);
  return TINYAI_OK;
}

TinyAIStatus WeightStream::OpsFor(int32_t tensor, const kernels::WeightKernels** ops) const {
  const tmai::TensorEntry& e = model_->reader().tensors()[static_cast<size_t>(tensor)];
  *ops = kernels::WeightKernelsFor(*k_, e.dtype);
  if (*ops != nullptr && tmai::IsBlockSparse(e) && (*ops)->sparse_matmul == nullptr) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "tensor '%s' is block-sparse %s, which the '%s' kernels cannot multiply",
                    e.name, tinyaiDTypeName(static_cast<TinyAIDType>(e.dtype)), k_->name);
  }
  if (*ops == nullptr) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "tensor '%s' is %s, which the '%s' kernels cannot multiply", e.name,
                    tinyaiDTypeName(static_cast<TinyAIDType>(e.dtype)), k_->name);
  }
  return TINYAI_OK;
}

TinyAIStatus WeightStream::ReadRow(int32_t tensor, uint64_t row, float* out, size_t cols) {
  const kernels::WeightKernels* ops = nullptr;
  TINYAI_RETURN_IF_ERROR(OpsFor(tensor, &ops));
  SparseLayout sparse;
  if (tmai::SparseLayoutOf(model_->reader().tensors()[static_cast<size_t>(tensor)], &sparse)) {
    // The row's kept values decoded at the front of out, then moved to
    // their columns from the last block back (each moves right or stays),
    // the pruned ones zero.
    TinyAIMappedModel::RowRun run;
    const uint64_t band = row / sparse.block;
    TINYAI_RETURN_IF_ERROR(model_->AcquireRun(tensor, band, &run));
    const uint8_t* b = run.data + (band - run.first) * sparse.band_bytes;
    const size_t block = static_cast<size_t>(sparse.block);
    // A kept narrow last block holds more values than the row has room
    // for: the row is then decoded aside.
    Array<float> wide;
    float* kept = out;
    if (sparse.kept_cols > cols) {
      TinyAIStatus s = wide.Allocate(static_cast<size_t>(sparse.kept_cols), "a block-sparse row");
      if (s != TINYAI_OK) {
        model_->ReleaseSlice(run.slice);
        return s;
      }
      kept = wide.data();
    }
    if (sparse.kept > 0) ops->dequantize_row(b + sparse.row_offset(row % block), kept, static_cast<size_t>(sparse.kept_cols));
    size_t k = static_cast<size_t>(sparse.kept);
    for (size_t j = static_cast<size_t>(sparse.blocks); j-- > 0;) {
      const size_t c0 = j * block, c1 = c0 + block < cols ? c0 + block : cols;
      if (k > 0 && BlockKept(b, j)) {
        --k;
        for (size_t c = c1; c-- > c0;) out[c] = kept[k * block + (c - c0)];
      } else {
        for (size_t c = c0; c < c1; ++c) out[c] = 0.0f;
      }
    }
    return model_->ReleaseSlice(run.slice);
  }
  TinyAIMappedModel::RowRun run;
  TINYAI_RETURN_IF_ERROR(model_->AcquireRun(tensor, row, &run));
  const size_t rb = static_cast<size_t>(model_->slices().row_bytes(tensor));
  if (row >= run.panels_first && row < run.panels_end) {
    // One group at a time out of its panel (a row of 8,192 values in 4.6 KB
    // would not belong on a stack).
    const uint8_t* panel = run.data + (row - row % kPanelRows - run.first) * rb;
    const size_t r = static_cast<size_t>(row % kPanelRows);
    uint8_t group[kQ4GroupBytes];
    for (size_t g = 0; g < GroupsPerRow(cols); ++g) {
      UnpackPanelRow(panel + g * kPanelGroupBytes, kQ4GroupBytes, r, group);
      ops->dequantize_row(group, out + g * kGroup, cols - g * kGroup < kGroup ? cols - g * kGroup : kGroup);
    }
  } else {
    ops->dequantize_row(run.data + (row - run.first) * rb, out, cols);
  }
  return model_->ReleaseSlice(run.slice);
}

// The input forms (bit 1 << InputForm) the products with these tensors take.
uint32_t WeightStream::InputForms(const int32_t* tensors, int count) const {
  uint32_t forms = 0;
  for (int i = 0; i < count; ++i) forms |= 1u << InputFormOf(model_->reader().tensors()[static_cast<size_t>(tensors[i])].dtype);
  return forms & ~(1u << kInputF32);
}

uint64_t WeightStream::InputScratchBytes(const int32_t* tensors, int count, int32_t cols) const {
  return FormsBytes(InputForms(tensors, count), cols);
}

uint64_t WeightStream::FormsBytes(uint32_t forms, int32_t cols) {
  uint64_t bytes = 0;
  for (InputForm f : {kInputInt8, kInputInt16}) {
    if (forms & (1u << f)) bytes += QuantizedInputBytes(f, static_cast<size_t>(cols));
  }
  return bytes;
}

void WeightStream::QuantizeInput(const float* x, size_t ldx, InputForm form, void* out, size_t cols, int32_t n) {
  const size_t row_bytes = QuantizedInputBytes(form, cols);
  auto one = [&](size_t j) {
    uint8_t* dst = static_cast<uint8_t*>(out) + j * row_bytes;
    if (form == kInputInt8) k_->quantize_input(x + j * ldx, cols, reinterpret_cast<InputGroup*>(dst));
    else k_->quantize_input16(x + j * ldx, cols, reinterpret_cast<InputGroup16*>(dst));
  };
  if (n == 1) {
    one(0);
    return;
  }
  pool_->ParallelFor(static_cast<size_t>(n), 1, static_cast<uint64_t>(n) * cols * 4, [&](size_t begin, size_t end, int) {
    for (size_t j = begin; j < end; ++j) one(j);
  });
}

TinyAIStatus WeightStream::MatMul(const int32_t* tensors, int count, const float* x, size_t ldx, float* y, size_t ldy,
                                  int32_t cols, int32_t n, void* scratch, uint64_t scratch_bytes) {
  if (model_->cache().capacity_epoch() != cap_epoch_) UpdateStreaming();
  if (observer_) observer_(observer_user_, tensors, count, x, ldx, cols, n);
  // Tensors of grouped dtypes multiply x quantized once per input form, the
  // forms one after the other in scratch.
  const void* inputs[3] = {x, nullptr, nullptr};
  const uint32_t forms = InputForms(tensors, count);
  const uint64_t need = FormsBytes(forms, cols) * static_cast<uint64_t>(n);
  if (need > 0) {
    if (scratch == nullptr || scratch_bytes < need) {
      return SetError(TINYAI_ERR_INTERNAL, "a product with grouped weights has %llu bytes of scratch for %llu",
                      static_cast<unsigned long long>(scratch_bytes), static_cast<unsigned long long>(need));
    }
    uint8_t* at = static_cast<uint8_t*>(scratch);
    for (InputForm f : {kInputInt8, kInputInt16}) {
      if (!(forms & (1u << f))) continue;
      QuantizeInput(x, ldx, f, at, static_cast<size_t>(cols), n);
      inputs[f] = at;
      at += QuantizedInputBytes(f, static_cast<size_t>(cols)) * static_cast<size_t>(n);
    }
  }
  const RowSliceTable& table = model_->slices();
  size_t out_row = 0;  // output row of the cursor's row
  int k = 0;
  uint64_t row = 0;
  const kernels::WeightKernels* ops = nullptr;
  if (count > 0) TINYAI_RETURN_IF_ERROR(OpsFor(tensors[0], &ops));
  while (k < count) {
    // Pin a window: at least one slice, then more while under the budget.
    size_t segs = 0;
    uint64_t bytes = 0;
    while (k < count && (segs == 0 || window_bytes_ == 0 || bytes < window_bytes_)) {
      TinyAIMappedModel::RowRun run;
      TinyAIStatus s = model_->AcquireRun(tensors[k], row, &run);
      if (s == TINYAI_OK && run.first != row) {  // windows start at a slice's first row of a tensor
        model_->ReleaseSlice(run.slice);
        s = SetError(TINYAI_ERR_INTERNAL, "a product's window starts at row %llu inside a slice",
                     static_cast<unsigned long long>(row));
      }
      if (s != TINYAI_OK) {
        ReleasePinned(segs);
        return s;
      }
      const int32_t slice = run.slice;
      const uint64_t avail = run.end - row;
      PrefetchAfter(slice);
      pinned_[segs] = slice;
      // A block-sparse matrix's rows in the table are its bands: each gives
      // a block of output rows (the last band what is left).
      SparseLayout sparse;
      uint64_t outputs = avail;
      if (tmai::SparseLayoutOf(model_->reader().tensors()[static_cast<size_t>(tensors[k])], &sparse)) {
        outputs = (row + avail) * sparse.block < sparse.rows ? avail * sparse.block : sparse.rows - row * sparse.block;
      } else {
        sparse = SparseLayout();
      }
      segments_[segs] = Segment{run.data, static_cast<size_t>(table.row_bytes(tensors[k])), ops, out_row,
                                static_cast<size_t>(outputs), static_cast<size_t>(run.panels_first - row),
                                static_cast<size_t>(run.panels_end - row), sparse};
      ++segs;
      // What the cache holds for it: on a static arena every slice takes a
      // whole slot, however small (a 2 KB int4 slice a 34 KB slot).
      bytes += model_->cache().EntryBytes(slice);
      row += avail;
      out_row += static_cast<size_t>(outputs);
      if (row == table.rows(tensors[k])) {
        ++k;
        row = 0;
        if (k < count && (s = OpsFor(tensors[k], &ops)) != TINYAI_OK) {
          ReleasePinned(segs);
          return s;
        }
      }
    }
    MultiplyWindow(segs, inputs, ldx, y, ldy, static_cast<size_t>(cols), n);
    ReleasePinned(segs);
  }
  return TINYAI_OK;
}

void WeightStream::MultiplyWindow(size_t segs, const void* const* inputs, size_t ldx, float* y, size_t ldy,
                                  size_t cols, int32_t n) {
  const Segment* seg = segments_.data();
  const size_t first = seg[0].first;
  const size_t total = seg[segs - 1].first + seg[segs - 1].rows - first;
  const uint64_t work = static_cast<uint64_t>(total) * cols * static_cast<uint64_t>(n);
  pool_->ParallelFor(total, kRowGrain, work, [&](size_t begin, size_t end, int) {
    size_t i = 0;
    for (size_t r = first + begin; r < first + end;) {
      while (r >= seg[i].first + seg[i].rows) ++i;
      const size_t in_seg = r - seg[i].first;
      size_t count = seg[i].first + seg[i].rows - r;
      if (count > first + end - r) count = first + end - r;
      MultiplyRows(seg[i], in_seg, in_seg + count, inputs, ldx, y + r, ldy, cols, n);
      r += count;
    }
  });
}

void WeightStream::MultiplyRows(const Segment& sg, size_t a, size_t b, const void* const* inputs, size_t ldx, float* y,
                                size_t ldy, size_t cols, int32_t n) {
  if (sg.sparse.block != 0) {
    MultiplySparse(sg, a, b, inputs, ldx, y, ldy, cols, n);
    return;
  }
  auto plain = [&](size_t from, size_t to) {
    if (from >= to) return;
    const uint8_t* w = sg.w + from * sg.row_bytes;
    float* out = y + (from - a);
    const size_t count = to - from;
    if (sg.ops->quantized_input()) {
      const void* xq = inputs[sg.ops->input];
      if (n == 1) {
        sg.ops->matvec_q(w, sg.row_bytes, xq, out, count, cols);
      } else {
        sg.ops->matmul_q(w, sg.row_bytes, xq, GroupsPerRow(cols), out, ldy, count, cols, static_cast<size_t>(n));
      }
    } else if (n == 1) {
      sg.ops->matvec(w, sg.row_bytes, static_cast<const float*>(inputs[kInputF32]), out, count, cols);
    } else {
      sg.ops->matmul(w, sg.row_bytes, static_cast<const float*>(inputs[kInputF32]), ldx, out, ldy, count, cols,
                     static_cast<size_t>(n));
    }
  };
  if (sg.panels_first == sg.panels_end) {
    plain(a, b);
    return;
  }
  const size_t lo = a > sg.panels_first ? a : sg.panels_first, hi = b < sg.panels_end ? b : sg.panels_end;
  plain(a, b < sg.panels_first ? b : sg.panels_first);
  if (lo < hi) MultiplyPanels(sg, lo, hi, inputs[sg.ops->input], y + (lo - a), ldy, cols, n);
  plain(a > sg.panels_end ? a : sg.panels_end, b);
}

void WeightStream::MultiplySparse(const Segment& sg, size_t a, size_t b, const void* const* inputs, size_t ldx,
                                  float* y, size_t ldy, size_t cols, int32_t n) {
  const size_t block = static_cast<size_t>(sg.sparse.block);
  // Every dtype's block-sparse product takes the fp32 input (the grouped
  // ones quantize what each band gathers).
  const void* x = inputs[kInputF32];
  const size_t lx = ldx, x_bytes = ldx * sizeof(float);
  // Bands [w0, w1) lie whole in [a, b) (b never passes the segment's rows,
  // so a short last band is never among them).
  const size_t w0 = (a + block - 1) / block, w1 = b / block;
  if (w0 < w1) {
    sg.ops->sparse_matmul(sg.w + w0 * sg.row_bytes, sg.sparse, x, lx, y + (w0 * block - a), ldy, w1 - w0,
                          static_cast<size_t>(n));
  }
  // The bands the range cuts (at most one at each end): computed whole
  // aside, eight inputs at a time, and the range's rows copied.
  float whole[kMaxSparseBlock * 8];
  for (size_t band = a / block; band * block < b; ++band) {
    if (band >= w0 && band < w1) continue;
    const size_t r0 = band * block;
    const size_t from = r0 < a ? a : r0, to = r0 + block < b ? r0 + block : b;
    for (int32_t j = 0; j < n;) {
      const size_t m = static_cast<size_t>(n - j) < 8 ? static_cast<size_t>(n - j) : 8;
      sg.ops->sparse_matmul(sg.w + band * sg.row_bytes, sg.sparse,
                            static_cast<const uint8_t*>(x) + static_cast<size_t>(j) * x_bytes, lx, whole, block, 1, m);
      for (size_t i = 0; i < m; ++i) {
        for (size_t r = from; r < to; ++r) y[(static_cast<size_t>(j) + i) * ldy + (r - a)] = whole[i * block + (r - r0)];
      }
      j += static_cast<int32_t>(m);
    }
  }
}

// Rows [a, b) of the segment's panels, y at row a's output. Whole panels go
// straight to y, a few at a time (16 KiB of them, kept in cache for all n
// inputs; matmul_panels where the table has it, else input by input); a
// panel the range cuts (two threads' ranges meeting inside it) is computed
// whole aside and the range's rows copied.
void WeightStream::MultiplyPanels(const Segment& sg, size_t a, size_t b, const void* x, float* y, size_t ldy,
                                  size_t cols, int32_t n) {
  const size_t panel_bytes = PanelBytes(sg.row_bytes), input_bytes = QuantizedInputBytes(kInputInt8, cols);
  size_t block = (16u << 10) / (panel_bytes == 0 ? 1 : panel_bytes);
  if (block == 0) block = 1;
  const size_t p0 = (a - sg.panels_first) / kPanelRows, p1 = (b - sg.panels_first + kPanelRows - 1) / kPanelRows;
  for (size_t p = p0; p < p1;) {
    const size_t row0 = sg.panels_first + p * kPanelRows;  // the panel's first row
    const bool cut = row0 < a || row0 + kPanelRows > b;
    size_t count = 1;  // panels in this step
    if (!cut) {
      while (p + count < p1 && count < block && row0 + (count + 1) * kPanelRows <= b) ++count;
    }
    const uint8_t* w = sg.w + row0 * sg.row_bytes;
    if (!cut && n > 1 && sg.ops->matmul_panels != nullptr) {
      sg.ops->matmul_panels(w, sg.row_bytes, x, GroupsPerRow(cols), y + (row0 - a), ldy, count, cols,
                            static_cast<size_t>(n));
      p += count;
      continue;
    }
    for (int32_t j = 0; j < n; ++j) {
      const void* xj = static_cast<const uint8_t*>(x) + static_cast<size_t>(j) * input_bytes;
      float* yj = y + static_cast<size_t>(j) * ldy;
      if (!cut) {
        sg.ops->matvec_panels(w, sg.row_bytes, xj, yj + (row0 - a), count, cols);
        continue;
      }
      float whole[kPanelRows];
      sg.ops->matvec_panels(w, sg.row_bytes, xj, whole, 1, cols);
      for (size_t r = row0 < a ? a : row0; r < row0 + kPanelRows && r < b; ++r) yj[r - a] = whole[r - row0];
    }
    p += count;
  }
}

}  // namespace tinyai
