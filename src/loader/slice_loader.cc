#include "loader/slice_loader.h"

#include <cstdio>
#include <cstring>
#include <new>

#include "common/checked_math.h"
#include "common/crc32c.h"
#include "common/format.h"
#include "common/ledger.h"
#include "common/memory.h"
#include "common/panels.h"
#include "common/status.h"
#include "format/zstd_frames.h"
#include "loader/prefetch_workers.h"
#include "port/port.h"

namespace tinyai {
namespace {

// The least a staging buffer holds: it also streams a compressed tensor's
// stored bytes through for their checksum, this much per read.
constexpr uint64_t kStagingMinBytes = 16u * 1024u;
// What a staging buffer holds when tensors are converted as they load: a
// run of stored rows and the same rows as fp32 (at least one row of each).
constexpr uint64_t kConvertStagingBytes = 16u * 1024u;
constexpr uint64_t kDataAlignmentSlack = 64;  // the fp32 rows start 64-aligned after the stored ones

uint64_t PageRound(uint64_t n) {
  const uint64_t page = port::PageSize();
  return (n + page - 1) / page * page;
}

}  // namespace

TinyAIStatus SliceLoader::Init(const TmaiReader* reader, const WeightSource* source, const RowSliceTable* table,
                               const TinyAIMmapConfig& config, const RowTransform& transform) {
  reader_ = reader;
  source_ = source;
  table_ = table;
  transform_ = transform;
  const size_t tensor_count = reader->tensors().size();
  TINYAI_RETURN_IF_ERROR(verified_.Allocate(tensor_count, "checksum states"));
  has_zstd_ = false;
  for (size_t t = 0; t < tensor_count; ++t) {
    // A GGUF read in place has no checksums to check.
    if (!config.verifyChecksums || reader->in_place()) verified_[t].store(1, std::memory_order_relaxed);
    if (reader->tensors()[t].codec == TINYAI_CODEC_ZSTD) has_zstd_ = true;
  }
  const bool converts = table->any_transformed();
  if (has_zstd_ || converts || table->any_panels()) {
    // What zstd costs: a decoding context (96 KiB) and a buffer of one
    // compressed slice (a frame is read and decoded a slice at a time; 16
    // KiB for the frames TinyAI writes) per thread that can decode at once:
    // one per prefetch worker, at least one; the thread that uses the model
    // shares them (a miss waits for one, at most a slice's decode). Tensors
    // converted as they load (ConvertRows) use the same buffers.
    size_t decoders = 1;
#if TINYAI_WITH_THREADS
    if (config.prefetchEnabled && config.prefetchThreads > 1) decoders = static_cast<size_t>(config.prefetchThreads);
    // The automatic count's workers pack panels side by side: a panel's
    // rows a set (about 10-30 KiB). Decoding and converting share one.
    if (config.prefetchEnabled && config.prefetchThreads == TINYAI_PREFETCH_THREADS_AUTO && !has_zstd_ && !converts) {
      decoders = static_cast<size_t>(kAutoPrefetchMax);
    }
#endif
    TINYAI_RETURN_IF_ERROR(staging_.Allocate(decoders, "staging buffers"));
    uint64_t bytes = 0;
    if (has_zstd_ && !source->InPlace(0)) {
      bytes = kStagingMinBytes;
      // Every frame of a tensor has its first frame's window (checked as it decodes).
      for (size_t t = 0; t < tensor_count; ++t) {
        const tmai::TensorEntry& e = reader->tensors()[t];
        if (e.codec != TINYAI_CODEC_ZSTD || table->spans(static_cast<int32_t>(t)).size() == 0) continue;
        const uint64_t* off = table->frame_offsets(static_cast<int32_t>(t));
        uint8_t head[18] = {};
        const uint64_t frame = off[1] - off[0];
        const size_t n = frame < sizeof head ? static_cast<size_t>(frame) : sizeof head;
        TINYAI_RETURN_IF_ERROR(source->Read(e.offset + off[0], n, head, reader->source()));
        const uint64_t bound = ZstdFrameBlockBound(head, n);
        if (bound > bytes) bytes = bound;
      }
    }
    if (converts) {
      if (bytes < kConvertStagingBytes) bytes = kConvertStagingBytes;
      for (size_t t = 0; t < tensor_count; ++t) {
        const int32_t ti = static_cast<int32_t>(t);
        if (!table->transformed(ti)) continue;
        const tmai::TensorEntry& e = reader->tensors()[t];
        // A run's unit: a stored row (a band's rows for a matrix pruned as
        // it loads) and its values in fp32.
        const uint64_t row = kDataAlignmentSlack + table->stored_rows_per_row(ti) *
                                                       (table->stored_row_bytes(ti) + 4 * e.shape[e.ndims - 1]);
        if (row > bytes) bytes = row;
      }
    }
    // Packing rows into panels copies one panel's rows aside first.
    for (size_t t = 0; t < tensor_count; ++t) {
      if (!table->panels(static_cast<int32_t>(t))) continue;
      const uint64_t panel = PanelBytes(static_cast<size_t>(table->row_bytes(static_cast<int32_t>(t))));
      if (panel > bytes) bytes = panel;
    }
    staging_bytes_ = static_cast<size_t>(PageRound(bytes));
    active_sets_ = staging_.size();
    for (Staging& s : staging_) {
      // zstd's context (its own malloc) and the buffer (pages) are taken
      // outside the recording allocator: told to it by hand.
      if (has_zstd_) {
        s.decoder = New<ZstdDecoder>();
        if (!s.decoder) return SetError(TINYAI_ERR_OUT_OF_MEMORY, "cannot allocate a zstd decoder");
        TINYAI_RETURN_IF_ERROR(s.decoder->Init());
        s.recorded += s.decoder->bytes();
        LedgerPages(kMemModel, s.decoder->bytes(), true);
      }
      if (staging_bytes_ > 0) {
        s.buffer = static_cast<uint8_t*>(port::PageAlloc(staging_bytes_));
        if (!s.buffer) {
          return SetError(TINYAI_ERR_OUT_OF_MEMORY, "cannot allocate a %zu-byte staging buffer", staging_bytes_);
        }
        s.recorded += staging_bytes_;
        LedgerPages(kMemModel, staging_bytes_, true);
      }
    }
  }
  return TINYAI_OK;
}

void SliceLoader::Shutdown() {
  for (Staging& s : staging_) {
    port::PageFree(s.buffer, staging_bytes_);
    Delete(s.decoder);
    if (s.recorded) LedgerPages(kMemModel, s.recorded, false);
    s = Staging();
  }
  staging_ = Array<Staging>();
  active_sets_ = 0;
  staging_bytes_ = 0;
}

uint64_t SliceLoader::overhead_bytes(size_t sets) const {
  const size_t kept = sets == 0 || sets > active_sets_ ? active_sets_ : sets;
  uint64_t b = verified_.size();
  for (size_t i = 0; i < kept; ++i) b += staging_bytes_ + (staging_[i].decoder ? staging_[i].decoder->bytes() : 0);
  return b;
}

void SliceLoader::KeepStaging(size_t sets) {
  if (sets < 1) sets = 1;
  UniqueLock lock(mutex_);
  while (active_sets_ > sets) {
    Staging& s = staging_[active_sets_ - 1];
#if TINYAI_WITH_THREADS
    while (s.busy) released_.wait(lock);
#endif
    port::PageFree(s.buffer, staging_bytes_);
    Delete(s.decoder);
    if (s.recorded) LedgerPages(kMemModel, s.recorded, false);
    s = Staging();
    --active_sets_;
  }
}

// ---- loading (outside the cache's lock) ----

bool SliceLoader::NeedsVerify(int32_t tensor) const {
  return verified_[static_cast<size_t>(tensor)].load(std::memory_order_acquire) == 0;
}

TinyAIStatus SliceLoader::VerifyInMemory(int32_t tensor, const uint8_t* stored) {
  const tmai::TensorEntry& e = reader_->tensors()[static_cast<size_t>(tensor)];
  TINYAI_RETURN_IF_ERROR(reader_->CheckTensorChecksum(static_cast<uint32_t>(tensor),
                                                      Crc32c(0, stored, static_cast<size_t>(e.stored_size))));
  // A block-sparse tensor's bitmaps keep what its entry says (the products
  // read safely past a bad one, but would compute with the wrong blocks).
  SparseLayout sparse;
  uint64_t band = 0, bits = 0;
  if (tmai::SparseLayoutOf(reader_->file_tensors()[static_cast<size_t>(tensor)], &sparse) &&
      FindBadBand(sparse, stored, sparse.bands, &band, &bits)) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': block-sparse tensor '%s': band %llu's bitmap sets %llu bits; its "
                    "entry keeps %llu of %llu blocks a band", reader_->source(), e.name,
                    static_cast<unsigned long long>(band), static_cast<unsigned long long>(bits),
                    static_cast<unsigned long long>(sparse.kept), static_cast<unsigned long long>(sparse.blocks));
  }
  verified_[static_cast<size_t>(tensor)].store(1, std::memory_order_release);
  return TINYAI_OK;
}

TinyAIStatus SliceLoader::GrabStaging(Staging** out) {
  UniqueLock lock(mutex_);
  for (;;) {
    for (size_t i = 0; i < active_sets_; ++i) {
      Staging& s = staging_[i];
      if (!s.busy) {
        s.busy = true;
        *out = &s;
        return TINYAI_OK;
      }
    }
#if TINYAI_WITH_THREADS
    released_.wait(lock);
#else
    return SetError(TINYAI_ERR_INTERNAL, "no staging buffer free");
#endif
  }
}

void SliceLoader::ReleaseStaging(Staging* st) {
  UniqueLock lock(mutex_);
  st->busy = false;
  released_.notify_all();
}

TinyAIStatus SliceLoader::VerifyStreaming(int32_t tensor, uint8_t* bounce, size_t bounce_size, uint64_t* bytes_read) {
  if (!NeedsVerify(tensor)) return TINYAI_OK;
  const tmai::TensorEntry& e = reader_->tensors()[static_cast<size_t>(tensor)];
  if (const uint8_t* p = source_->InPlace(e.offset)) {
    *bytes_read += e.stored_size;
    return VerifyInMemory(tensor, p);
  }
  Staging* st = nullptr;
  if (!bounce) {
    TINYAI_RETURN_IF_ERROR(GrabStaging(&st));
    bounce = st->buffer;
    bounce_size = staging_bytes_;
  }
  uint32_t crc = 0;
  const TinyAIStatus s = source_->Stream(
      e.offset, e.stored_size, bounce, bounce_size,
      [](void* ctx, const uint8_t* bytes, size_t n) {
        *static_cast<uint32_t*>(ctx) = Crc32c(*static_cast<uint32_t*>(ctx), bytes, n);
        return TINYAI_OK;
      },
      &crc, reader_->source());
  *bytes_read += e.stored_size;
  if (st) ReleaseStaging(st);
  TINYAI_RETURN_IF_ERROR(s);
  TINYAI_RETURN_IF_ERROR(reader_->CheckTensorChecksum(static_cast<uint32_t>(tensor), crc));
  verified_[static_cast<size_t>(tensor)].store(1, std::memory_order_release);
  return TINYAI_OK;
}

TinyAIStatus SliceLoader::DecodeFrame(int32_t tensor, int32_t frame, uint8_t* dst, uint64_t* bytes_read) {
  const tmai::TensorEntry& e = reader_->tensors()[static_cast<size_t>(tensor)];
  const uint64_t* off = table_->frame_offsets(tensor);
  const uint64_t at = e.offset + off[frame];
  const size_t size = static_cast<size_t>(off[frame + 1] - off[frame]);
  uint64_t first_row = 0, row_count = 0;
  TINYAI_RETURN_IF_ERROR(ZstdFrameRows(e, static_cast<uint32_t>(frame), &first_row, &row_count));
  Staging* st = nullptr;
  TINYAI_RETURN_IF_ERROR(GrabStaging(&st));
  const uint8_t* src = source_->InPlace(at);
  const size_t capacity = static_cast<size_t>(row_count * table_->row_bytes(tensor));
  TinyAIStatus s = TINYAI_OK;
  if (src) {  // in memory: decoded in one call
    s = st->decoder->DecodeFrame(e, static_cast<uint32_t>(frame), src, size, dst, capacity, reader_->source());
  } else {  // read a zstd slice at a time through the staging buffer
    s = st->decoder->DecodeFrameStreaming(e, static_cast<uint32_t>(frame), &SliceLoader::ReadSource, this, at, size,
                                          st->buffer, staging_bytes_, dst, capacity, reader_->source());
  }
  *bytes_read += size;
  ReleaseStaging(st);
  return s;
}

TinyAIStatus SliceLoader::ReadSource(void* self, uint64_t offset, size_t size, uint8_t* dst) {
  const SliceLoader* c = static_cast<const SliceLoader*>(self);
  return c->source_->Read(offset, size, dst, c->reader_->source());
}

TinyAIStatus SliceLoader::Load(int32_t entry, uint8_t* dst, size_t dst_bytes, const uint8_t** data,
                                uint64_t* bytes_read) {
  if (entry < table_->slice_count()) return LoadSlice(entry, dst, dst_bytes, data, bytes_read);
  return LoadLayer(entry - table_->slice_count(), dst, data, bytes_read);
}

TinyAIStatus SliceLoader::LoadSlice(int32_t slice, uint8_t* dst, size_t dst_bytes, const uint8_t** data,
                                     uint64_t* bytes_read) {
  TINYAI_RETURN_IF_ERROR(LoadSliceRows(slice, dst, dst_bytes, data, bytes_read));
  // Bytes used in place stay as they are; loaded ones start at dst or, read
  // directly, a little past it.
  if (!table_->any_panels() || !dst || *data < dst || *data >= dst + dst_bytes) return TINYAI_OK;
  return PackPanels(slice, const_cast<uint8_t*>(*data));
}

TinyAIStatus SliceLoader::PackPanels(int32_t slice, uint8_t* dst) {
  const RowSlice& b = table_->slice(slice);
  const tmai::LayerEntry& layer = reader_->layers()[static_cast<size_t>(b.layer)];
  Staging* st = nullptr;
  for (uint32_t t = static_cast<uint32_t>(b.tensor); t < layer.first_tensor + layer.tensor_count; ++t) {
    const int32_t ti = static_cast<int32_t>(t);
    const Span<const TensorSpan> spans = table_->spans(ti);
    if (spans.size() > 0 && spans[0].slice > slice) break;  // this tensor and the rest start after the slice
    if (!table_->panels(ti)) continue;
    const size_t rb = static_cast<size_t>(table_->row_bytes(ti)), panel = PanelBytes(rb);
    for (const TensorSpan& span : spans) {
      if (span.slice != slice) continue;
      uint64_t first = 0, end = 0;
      table_->SpanPanels(ti, span, &first, &end);
      if (first == end) continue;
      if (!st) TINYAI_RETURN_IF_ERROR(GrabStaging(&st));
      uint8_t* at = dst + span.offset + (first - span.row_begin) * rb;
      for (uint64_t r = first; r < end; r += kPanelRows, at += panel) {
        std::memcpy(st->buffer, at, panel);
        PackPanel(st->buffer, rb, at);
      }
    }
  }
  if (st) ReleaseStaging(st);
  return TINYAI_OK;
}

TinyAIStatus SliceLoader::LoadSliceRows(int32_t slice, uint8_t* dst, size_t dst_bytes, const uint8_t** data,
                                         uint64_t* bytes_read) {
  const RowSlice& b = table_->slice(slice);
  if (b.transform) {
    const tmai::TensorEntry& e = reader_->tensors()[static_cast<size_t>(b.tensor)];
    const uint64_t srb = table_->stored_row_bytes(b.tensor);
    TINYAI_RETURN_IF_ERROR(VerifyStreaming(b.tensor, nullptr, 0, bytes_read));
    // Its stored rows, as runtime rows (a band's rows each for a matrix
    // pruned as it loads; the matrix's last band may be short).
    const uint64_t per = table_->stored_rows_per_row(b.tensor), stored_rows = b.stored_size / srb;
    TINYAI_RETURN_IF_ERROR(ConvertRows(b.tensor, (b.stored_offset - e.offset) / srb / per,
                                       (stored_rows + per - 1) / per, dst, bytes_read));
    *data = dst;
    return TINYAI_OK;
  }
  if (b.frame >= 0) {
    TINYAI_RETURN_IF_ERROR(VerifyStreaming(b.tensor, nullptr, 0, bytes_read));
    TINYAI_RETURN_IF_ERROR(DecodeFrame(b.tensor, b.frame, dst, bytes_read));
    *data = dst;
    return TINYAI_OK;
  }
  const uint64_t begin = b.stored_offset, end = b.stored_offset + b.stored_size;
  const tmai::LayerEntry& layer = reader_->layers()[static_cast<size_t>(b.layer)];
  const uint32_t last = layer.first_tensor + layer.tensor_count;
  // Tensors only partly in this slice are checked by streaming them once
  // through the slice's own buffer, before it is filled.
  const size_t bounce = dst_bytes;
  for (uint32_t t = static_cast<uint32_t>(b.tensor); t < last; ++t) {
    const tmai::TensorEntry& e = reader_->tensors()[t];
    if (e.offset >= end) break;
    if (e.codec != TINYAI_CODEC_NONE || !NeedsVerify(static_cast<int32_t>(t))) continue;
    if (e.offset < begin || e.offset + e.stored_size > end) {
      TINYAI_RETURN_IF_ERROR(VerifyStreaming(static_cast<int32_t>(t), dst, bounce, bytes_read));
    }
  }
  const uint8_t* p = source_->InPlace(begin);
  if (!p) {
    TINYAI_RETURN_IF_ERROR(source_->ReadAligned(begin, static_cast<size_t>(b.stored_size), dst, dst_bytes, &p,
                                                reader_->source()));
  }
  *bytes_read += b.stored_size;
  for (uint32_t t = static_cast<uint32_t>(b.tensor); t < last; ++t) {
    const tmai::TensorEntry& e = reader_->tensors()[t];
    if (e.offset >= end) break;
    if (e.codec != TINYAI_CODEC_NONE || !NeedsVerify(static_cast<int32_t>(t))) continue;
    if (e.offset >= begin && e.offset + e.stored_size <= end) {
      TINYAI_RETURN_IF_ERROR(VerifyInMemory(static_cast<int32_t>(t), p + (e.offset - begin)));
    }
  }
  *data = p;
  return TINYAI_OK;
}

TinyAIStatus SliceLoader::LoadLayer(int32_t layer, uint8_t* dst, const uint8_t** data, uint64_t* bytes_read) {
  const tmai::LayerEntry& l = reader_->layers()[static_cast<size_t>(layer)];
  if (UsedInPlace(*table_, *reader_, *source_, table_->slice_count() + layer)) {
    const uint8_t* p = source_->InPlace(l.offset);
    for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
      const tmai::TensorEntry& e = reader_->tensors()[t];
      if (NeedsVerify(static_cast<int32_t>(t))) TINYAI_RETURN_IF_ERROR(VerifyInMemory(static_cast<int32_t>(t), p + (e.offset - l.offset)));
    }
    *bytes_read += l.stored_size;
    *data = p;
    return TINYAI_OK;
  }
  for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
    const tmai::TensorEntry& e = reader_->tensors()[t];
    uint8_t* out = dst + e.decoded_offset;
    if (table_->transformed(static_cast<int32_t>(t))) {
      TINYAI_RETURN_IF_ERROR(VerifyStreaming(static_cast<int32_t>(t), nullptr, 0, bytes_read));
      TINYAI_RETURN_IF_ERROR(ConvertRows(static_cast<int32_t>(t), 0, table_->rows(static_cast<int32_t>(t)), out, bytes_read));
    } else if (e.codec == TINYAI_CODEC_NONE) {
      TINYAI_RETURN_IF_ERROR(source_->Read(e.offset, static_cast<size_t>(e.stored_size), out, reader_->source()));
      *bytes_read += e.stored_size;
      if (NeedsVerify(static_cast<int32_t>(t))) TINYAI_RETURN_IF_ERROR(VerifyInMemory(static_cast<int32_t>(t), out));
    } else if (e.codec == TINYAI_CODEC_ZSTD) {
      TINYAI_RETURN_IF_ERROR(VerifyStreaming(static_cast<int32_t>(t), nullptr, 0, bytes_read));
      const uint32_t frames = ZstdFrameCount(e);
      const uint64_t row_bytes = table_->row_bytes(static_cast<int32_t>(t));
      for (uint32_t f = 0; f < frames; ++f) {
        uint64_t first_row = 0, rows = 0;
        TINYAI_RETURN_IF_ERROR(ZstdFrameRows(e, f, &first_row, &rows));
        TINYAI_RETURN_IF_ERROR(DecodeFrame(static_cast<int32_t>(t), static_cast<int32_t>(f), out + first_row * row_bytes,
                                           bytes_read));
      }
    } else {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' uses codec %s, which this build cannot load",
                      reader_->source(), e.name, tinyaiCodecName(static_cast<TinyAICodec>(e.codec)));
    }
  }
  *data = dst;
  return TINYAI_OK;
}

TinyAIStatus SliceLoader::ConvertRows(int32_t tensor, uint64_t first_row, uint64_t rows, uint8_t* dst,
                                      uint64_t* bytes_read) {
  const tmai::TensorEntry& stored = reader_->file_tensors()[static_cast<size_t>(tensor)];
  const tmai::TensorEntry& e = reader_->tensors()[static_cast<size_t>(tensor)];
  const size_t cols = static_cast<size_t>(e.shape[e.ndims - 1]);
  const uint64_t srb = table_->stored_row_bytes(tensor), rb = table_->row_bytes(tensor);
  // A runtime row is `per` stored rows: a band's when the matrix is pruned
  // as it loads (then the last may be short), else one.
  const uint64_t per = table_->stored_rows_per_row(tensor), stored_rows = table_->stored_rows(tensor);
  SparseLayout from, to;
  const bool transcode = tmai::SparseLayoutOf(stored, &from);  // stored pruned: bands to bands
  const bool prune = !transcode && tmai::SparseLayoutOf(e, &to);
  if (transcode && !tmai::SparseLayoutOf(e, &to)) {
    return SetError(TINYAI_ERR_INTERNAL, "'%s': tensor '%s' is stored block-sparse but runs dense", reader_->source(),
                    stored.name);
  }
  const RowDecoder decode =
      transcode || stored.dtype == TINYAI_DTYPE_F32 || !transform_.decoder ? nullptr : transform_.decoder(stored.dtype);
  const bool can = transcode ? transform_.transcode_bands != nullptr
                             : (stored.dtype == TINYAI_DTYPE_F32 || decode != nullptr) &&
                                   (prune ? transform_.encode_bands != nullptr : transform_.encode_rows != nullptr);
  if (!can) {
    return SetError(TINYAI_ERR_INTERNAL, "'%s': tensor '%s' is %s, which cannot be converted", reader_->source(),
                    stored.name, tinyaiDTypeName(static_cast<TinyAIDType>(stored.dtype)));
  }
  const TensorCalibration calibration = calibration_ ? calibration_(calibration_owner_, tensor) : TensorCalibration();
  Staging* st = nullptr;
  TINYAI_RETURN_IF_ERROR(GrabStaging(&st));
  // A run of stored rows, then the same rows as fp32, 64-aligned.
  uint64_t chunk = (staging_bytes_ - kDataAlignmentSlack) / (per * (srb + 4 * cols));
  if (chunk == 0) chunk = 1;  // Init sized the buffer for one row
  TinyAIStatus s = TINYAI_OK;
  for (uint64_t r = 0; r < rows && s == TINYAI_OK;) {
    const uint64_t n = rows - r < chunk ? rows - r : chunk;
    const uint64_t s0 = (first_row + r) * per;
    const uint64_t s1 = (first_row + r + n) * per < stored_rows ? (first_row + r + n) * per : stored_rows;
    const uint64_t at = stored.offset + s0 * srb;
    const uint8_t* p = source_->InPlace(at);
    if (!p) {
      s = source_->Read(at, static_cast<size_t>((s1 - s0) * srb), st->buffer, reader_->source());
      if (s != TINYAI_OK) break;
      p = st->buffer;
    }
    *bytes_read += (s1 - s0) * srb;
    if (transcode) {
      s = transform_.transcode_bands(from, to, p, static_cast<size_t>(n), dst + r * rb, calibration);
    } else {
      const float* x = reinterpret_cast<const float*>(p);
      if (decode) {
        float* f = reinterpret_cast<float*>(st->buffer + AlignUp(chunk * per * srb, kDataAlignmentSlack));
        for (uint64_t i = 0; i < s1 - s0; ++i) decode(p + i * srb, f + i * cols, cols);
        x = f;
      }
      s = prune ? transform_.encode_bands(to, x, static_cast<size_t>(s1 - s0), dst + r * rb, calibration)
                : transform_.encode_rows(e.dtype, x, static_cast<size_t>(n), cols, dst + r * rb, calibration);
    }
    if (s != TINYAI_OK) {
      char what[200];
      if (prune) {
        tinyai::Format(what, sizeof what, "'%s': pruning tensor '%s' (%s, blocks of %llu): ", reader_->source(), e.name,
                      tinyaiDTypeName(static_cast<TinyAIDType>(e.dtype)), static_cast<unsigned long long>(to.block));
      } else {
        tinyai::Format(what, sizeof what, "'%s': converting tensor '%s' to %s: ", reader_->source(), e.name,
                      tinyaiDTypeName(static_cast<TinyAIDType>(e.dtype)));
      }
      s = AddErrorContext(s, "%s", what);
    }
    r += n;
  }
  ReleaseStaging(st);
  return s;
}

}  // namespace tinyai
