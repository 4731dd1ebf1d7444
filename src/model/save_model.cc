#include "model/save_model.h"

#include <cmath>
#include <cstring>

#include "common/array.h"
#include "common/checked_math.h"
#include "common/crc32c.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "model/weight_transform.h"
#include "quant/prune.h"
#include "quant/quantize.h"

namespace tinyai {
namespace {

// Stored bytes read per step (and, encoded, written).
constexpr uint64_t kChunkBytes = 1u << 20;

// The output's layer table and tensor directory: the model's runtime
// directory with every tensor uncompressed and laid out from data_offset.
struct Layout {
  tmai::IndexLayout index;
  Array<tmai::LayerEntry> layers;
  Array<tmai::TensorEntry> tensors;
  uint64_t file_size = 0;
};

// The output's index: the input's metadata (verbatim) and tables, laid out
// as the writer lays out a new file (tmai::LayOutIndex).
tmai::IndexLayout IndexOf(const TmaiReader& r) {
  // A GGUF read in place (format/gguf_index.h) is saved as a new file is
  // written: its layers on pages.
  return tmai::LayOutIndex(r.header().metadata_size, r.layers().size(), r.tensors().size(),
                           r.in_place() ? tmai::kGroupAlignment : r.header().group_alignment);
}

TinyAIStatus Plan(const TmaiReader& r, Layout* out) {
  const auto layers = r.layers();
  const auto tensors = r.tensors();
  out->index = IndexOf(r);
  TINYAI_RETURN_IF_ERROR(out->layers.Allocate(layers.size(), "saved layer table"));
  TINYAI_RETURN_IF_ERROR(out->tensors.Allocate(tensors.size(), "saved tensor directory"));
  std::memcpy(out->layers.data(), layers.data(), layers.size() * sizeof(tmai::LayerEntry));
  std::memcpy(out->tensors.data(), tensors.data(), tensors.size() * sizeof(tmai::TensorEntry));
  uint64_t cursor = out->index.data_offset;
  for (tmai::LayerEntry& l : out->layers) {
    l.offset = AlignUp(cursor, out->index.group_alignment);
    for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
      tmai::TensorEntry& e = out->tensors[t];
      e.codec = TINYAI_CODEC_NONE;
      e.codec_param = 0;
      e.stored_size = e.decoded_size;
      e.offset = l.offset + e.decoded_offset;
    }
    l.stored_size = l.decoded_size;
    cursor = l.offset + l.stored_size;
  }
  out->file_size = cursor;
  return TINYAI_OK;
}

class Sink {
 public:
  Sink(TinyAIWriteCallback write, void* user, const char* name) : write_(write), user_(user), name_(name) {}

  TinyAIStatus Write(uint64_t offset, const void* data, size_t size) {
    if (size == 0) return TINYAI_OK;
    const int rc = write_(user_, offset, data, size);
    if (rc != 0) {
      return SetError(TINYAI_ERR_IO, "'%s': writing %zu bytes at offset %llu failed (the write callback returned %d)",
                      name_, size, static_cast<unsigned long long>(offset), rc);
    }
    return TINYAI_OK;
  }
  // Zeros over [from, to) (alignment padding).
  TinyAIStatus Zeros(uint64_t from, uint64_t to) {
    static const uint8_t kZeros[4096] = {};
    while (from < to) {
      const size_t n = to - from < sizeof kZeros ? static_cast<size_t>(to - from) : sizeof kZeros;
      TINYAI_RETURN_IF_ERROR(Write(from, kZeros, n));
      from += n;
    }
    return TINYAI_OK;
  }

 private:
  TinyAIWriteCallback write_;
  void* user_;
  const char* name_;
};

// Buffers for one tensor's runs of rows, grown as needed.
struct Buffers {
  Array<uint8_t> stored, encoded;
  Array<float> values;

  template <class T>
  static TinyAIStatus Fit(Array<T>* a, uint64_t n, const char* what) {
    if (a->size() >= n) return TINYAI_OK;
    return a->Allocate(static_cast<size_t>(n), what);
  }
};

// What the model's calibration gives tensor t, as the quantizer takes it.
quant::ColumnStats ColumnStatsOf(const TinyAIMappedModel& m, int32_t t) {
  const TensorCalibration c = m.CalibrationOf(t);
  quant::ColumnStats s;
  s.importance = c.importance;
  s.factor = c.factor;
  return s;
}

// Copies (raw) or converts (dtype changed) tensor t's stored rows into the
// output at out.offset; the stored bytes' CRC is checked on the way.
// Encodes rows x rows of cols values into out on the pool's threads (the
// same bytes as on one); err gets their error summed. A failure is found
// again on the caller, whose thread records the message.
TinyAIStatus EncodeParallel(ThreadPool* pool, int32_t dtype, const float* x, size_t rows, size_t cols, uint8_t* out,
                            quant::EncodeError* err, quant::ColumnStats stats) {
  const size_t row_bytes = quant::EncodedRowBytes(dtype, cols);
  TinyAIStatus first = TINYAI_OK;
  Array<quant::EncodeError> per_thread;
  Array<TinyAIStatus> status;
  TINYAI_RETURN_IF_ERROR(per_thread.Allocate(static_cast<size_t>(pool->size()), "encoding errors"));
  TINYAI_RETURN_IF_ERROR(status.Allocate(static_cast<size_t>(pool->size()), "encoding status"));
  pool->ParallelFor(rows, 1, static_cast<uint64_t>(rows) * cols * 40, [&](size_t begin, size_t end, int thread) {
    quant::EncodeError e;
    const TinyAIStatus s = quant::EncodeRows(dtype, x + begin * cols, end - begin, cols, out + begin * row_bytes,
                                             &e, stats);
    per_thread[static_cast<size_t>(thread)].Add(e);
    if (s != TINYAI_OK && status[static_cast<size_t>(thread)] == TINYAI_OK) status[static_cast<size_t>(thread)] = s;
  });
  for (size_t i = 0; i < per_thread.size(); ++i) {
    err->Add(per_thread[i]);
    if (status[i] != TINYAI_OK) first = status[i];
  }
  if (first != TINYAI_OK) return quant::EncodeRows(dtype, x, rows, cols, out, nullptr, stats);
  return TINYAI_OK;
}

// As EncodeParallel for a matrix pruned as it is written: rows stored rows
// of s.cols values into ceil(rows / s.block) bands, bands split across the
// pool's threads.
TinyAIStatus EncodeBandsParallel(ThreadPool* pool, const SparseLayout& sp, const float* x, size_t rows, uint8_t* out,
                                 quant::EncodeError* err, quant::PruneScore score, quant::ColumnStats stats) {
  const size_t block = static_cast<size_t>(sp.block), cols = static_cast<size_t>(sp.cols);
  const size_t bands = (rows + block - 1) / block;
  Array<quant::EncodeError> per_thread;
  Array<TinyAIStatus> status;
  TINYAI_RETURN_IF_ERROR(per_thread.Allocate(static_cast<size_t>(pool->size()), "encoding errors"));
  TINYAI_RETURN_IF_ERROR(status.Allocate(static_cast<size_t>(pool->size()), "encoding status"));
  pool->ParallelFor(bands, 1, static_cast<uint64_t>(rows) * cols * 40, [&](size_t begin, size_t end, int thread) {
    quant::EncodeError e;
    const size_t r0 = begin * block, r1 = end * block < rows ? end * block : rows;
    const TinyAIStatus s = quant::EncodeBands(sp, x + r0 * cols, r1 - r0, out + begin * sp.band_bytes, score, stats, &e);
    per_thread[static_cast<size_t>(thread)].Add(e);
    if (s != TINYAI_OK && status[static_cast<size_t>(thread)] == TINYAI_OK) status[static_cast<size_t>(thread)] = s;
  });
  TinyAIStatus first = TINYAI_OK;
  for (size_t i = 0; i < per_thread.size(); ++i) {
    err->Add(per_thread[i]);
    if (status[i] != TINYAI_OK) first = status[i];
  }
  if (first != TINYAI_OK) return quant::EncodeBands(sp, x, rows, out, score, stats, nullptr);
  return TINYAI_OK;
}

TinyAIStatus WriteTensor(TinyAIMappedModel* m, ThreadPool* pool, int32_t t, const tmai::TensorEntry& out, Sink* sink,
                         Buffers* b, uint32_t* crc_out, quant::EncodeError* err) {
  const TmaiReader& r = m->reader();
  const tmai::TensorEntry& stored = r.file_tensors()[static_cast<size_t>(t)];
  const RowSliceTable& table = m->slices();
  const uint64_t rows = table.rows(t), rb = table.row_bytes(t), srb = table.stored_row_bytes(t);
  uint32_t crc = 0, stored_crc = 0;
  if (stored.codec != TINYAI_CODEC_NONE) {  // decoded (and checked) by the weight cache
    // Copied out in the row layout (the cache may hold rows in panels).
    const uint64_t most = kChunkBytes / rb > 0 ? kChunkBytes / rb : 1;
    TINYAI_RETURN_IF_ERROR(Buffers::Fit(&b->stored, most * rb, "a save buffer"));
    for (uint64_t row = 0; row < rows;) {
      uint64_t got = 0;
      TINYAI_RETURN_IF_ERROR(m->CopyRows(t, row, most, b->stored.data(), &got));
      const size_t bytes = static_cast<size_t>(got * rb);
      TINYAI_RETURN_IF_ERROR(sink->Write(out.offset + row * rb, b->stored.data(), bytes));
      crc = Crc32c(crc, b->stored.data(), bytes);
      row += got;
    }
    *crc_out = crc;
    return TINYAI_OK;
  }
  const bool convert = table.transformed(t);
  const size_t cols = static_cast<size_t>(stored.shape[stored.ndims - 1]);
  // A row written is `per` stored rows: a band's when the matrix is pruned
  // as it is written (the last may be short), else one.
  const uint64_t per = table.stored_rows_per_row(t), stored_rows = table.stored_rows(t);
  SparseLayout from, to;
  const bool transcode = convert && tmai::SparseLayoutOf(stored, &from) && tmai::SparseLayoutOf(out, &to);
  const bool prune = convert && !transcode && tmai::SparseLayoutOf(out, &to);
  uint64_t chunk = kChunkBytes / (per * srb);
  if (chunk == 0) chunk = 1;
  if (chunk > rows) chunk = rows;
  RowDecoder decode = nullptr;
  if (convert) {
    if (stored.dtype != TINYAI_DTYPE_F32 || transcode) decode = ReferenceRowDecoder(stored.dtype);
    if (stored.dtype != TINYAI_DTYPE_F32 && !decode) {
      return SetError(TINYAI_ERR_INTERNAL, "'%s': tensor '%s' is %s, which cannot be converted", r.source(),
                      stored.name, tinyaiDTypeName(static_cast<TinyAIDType>(stored.dtype)));
    }
    if (!transcode) TINYAI_RETURN_IF_ERROR(Buffers::Fit(&b->values, chunk * per * cols, "rows as fp32"));
    TINYAI_RETURN_IF_ERROR(Buffers::Fit(&b->encoded, chunk * rb, "encoded rows"));
  }
  if (!m->source().InPlace(0)) TINYAI_RETURN_IF_ERROR(Buffers::Fit(&b->stored, chunk * per * srb, "stored rows"));
  for (uint64_t row = 0; row < rows;) {
    const uint64_t n = rows - row < chunk ? rows - row : chunk;
    const uint64_t s0 = row * per, s1 = (row + n) * per < stored_rows ? (row + n) * per : stored_rows;
    const uint64_t at = stored.offset + s0 * srb;
    const uint8_t* p = m->source().InPlace(at);
    if (!p) {
      TINYAI_RETURN_IF_ERROR(m->source().Read(at, static_cast<size_t>((s1 - s0) * srb), b->stored.data(), r.source()));
      p = b->stored.data();
    }
    stored_crc = Crc32c(stored_crc, p, static_cast<size_t>((s1 - s0) * srb));
    const uint8_t* w = p;
    if (convert) {
      const quant::ColumnStats stats = ColumnStatsOf(*m, t);
      TinyAIStatus s = TINYAI_OK;
      if (transcode) {
        s = quant::TranscodeBands(from, to, p, static_cast<size_t>(n), b->encoded.data(), decode, stats);
      } else {
        const float* x = reinterpret_cast<const float*>(p);
        if (decode) {
          for (uint64_t i = 0; i < s1 - s0; ++i) decode(p + i * srb, b->values.data() + i * cols, cols);
          x = b->values.data();
        }
        s = prune ? EncodeBandsParallel(pool, to, x, static_cast<size_t>(s1 - s0), b->encoded.data(), err,
                                        static_cast<quant::PruneScore>(m->PruneScoreOf(t)), stats)
                  : EncodeParallel(pool, out.dtype, x, static_cast<size_t>(n), cols, b->encoded.data(), err, stats);
      }
      if (s != TINYAI_OK) {
        return AddErrorContext(s, "'%s': %s tensor '%s' to %s: ", r.source(), prune ? "pruning" : "converting",
                               stored.name, tinyaiDTypeName(static_cast<TinyAIDType>(out.dtype)));
      }
      w = b->encoded.data();
    }
    const size_t bytes = static_cast<size_t>(n * rb);
    TINYAI_RETURN_IF_ERROR(sink->Write(out.offset + row * rb, w, bytes));
    crc = Crc32c(crc, w, bytes);
    row += n;
  }
  if (m->config().verifyChecksums) TINYAI_RETURN_IF_ERROR(r.CheckTensorChecksum(static_cast<uint32_t>(t), stored_crc));
  *crc_out = crc;
  return TINYAI_OK;
}

}  // namespace

uint64_t SavedModelSize(const TinyAIMappedModel& model) {
  const tmai::IndexLayout index = IndexOf(model.reader());
  uint64_t cursor = index.data_offset;
  for (const tmai::LayerEntry& l : model.reader().layers()) cursor = AlignUp(cursor, index.group_alignment) + l.decoded_size;
  return cursor;
}

TinyAIStatus SaveModel(TinyAIMappedModel* model, TinyAIWriteCallback write, void* user, const char* out_name,
                       const TinyAISaveOptions& options) {
  const TmaiReader& r = model->reader();
  Layout layout;
  TINYAI_RETURN_IF_ERROR(Plan(r, &layout));
  Sink sink(write, user, out_name);
  Buffers buffers;
  ThreadPool pool;
  TINYAI_RETURN_IF_ERROR(pool.Start(options.threads > 0 ? options.threads : port::CpuCount()));
  uint64_t cursor = layout.index.data_offset;
  const int tensor_count = static_cast<int>(layout.tensors.size());
  for (const tmai::LayerEntry& l : layout.layers) {
    for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
      tmai::TensorEntry& e = layout.tensors[t];
      TINYAI_RETURN_IF_ERROR(sink.Zeros(cursor, e.offset));
      quant::EncodeError err;
      TINYAI_RETURN_IF_ERROR(WriteTensor(model, &pool, static_cast<int32_t>(t), e, &sink, &buffers, &e.checksum, &err));
      cursor = e.offset + e.stored_size;
      if (options.progress) {
        const tmai::TensorEntry& stored = r.file_tensors()[t];
        TinyAISaveProgress p;
        std::memset(&p, 0, sizeof p);
        p.structSize = sizeof p;
        p.tensorIndex = static_cast<int>(t);
        p.tensorCount = tensor_count;
        p.tensorName = e.name;
        p.storedDType = static_cast<TinyAIDType>(stored.dtype);
        p.savedDType = static_cast<TinyAIDType>(e.dtype);
        p.bytesBefore = stored.decoded_size;
        p.bytesAfter = e.decoded_size;
        p.relativeRmsError = err.values > 0 ? err.RelativeRms() : 0.0;
        p.maxAbsError = err.max_abs_error;
        p.bytesDone = cursor;
        p.bytesTotal = layout.file_size;
        if (options.progress(options.progressUser, &p) != 0) return TINYAI_STOPPED;
      }
    }
    TINYAI_RETURN_IF_ERROR(sink.Zeros(cursor, l.offset + l.stored_size));
    cursor = l.offset + l.stored_size;
  }
  // The index last: the input's metadata, the new layer table and directory.
  Array<uint8_t> metadata, index;
  TINYAI_RETURN_IF_ERROR(metadata.Allocate(static_cast<size_t>(r.header().metadata_size), "saved metadata"));
  TINYAI_RETURN_IF_ERROR(index.Allocate(static_cast<size_t>(layout.index.data_offset), "saved index"));
  if (metadata.size() > 0 && r.in_place()) {  // the index built in memory holds it
    std::memcpy(metadata.data(), reinterpret_cast<const uint8_t*>(&r.header()) + r.header().metadata_offset,
                metadata.size());
  } else if (metadata.size() > 0) {
    TINYAI_RETURN_IF_ERROR(model->source().Read(r.header().metadata_offset, metadata.size(), metadata.data(), r.source()));
  }
  tmai::SealIndex(layout.index, metadata.data(), layout.layers.data(), static_cast<uint32_t>(layout.layers.size()),
                  layout.tensors.data(), static_cast<uint32_t>(layout.tensors.size()), layout.file_size,
                  tmai::kVersionMajor, tmai::kVersionMinor, index.data());
  return sink.Write(0, index.data(), index.size());
}

}  // namespace tinyai
