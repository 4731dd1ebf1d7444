// Streaming writer of .tmai files (offline; used by tools and tests).
//
//   TmaiWriter w;
//   w.AddMetaString("general.architecture", "llama");
//   w.AddLayer(TINYAI_LAYER_EMBEDDING, -1);
//   w.AddTensor("token_embd", TINYAI_ROLE_TOKEN_EMBEDDING, TINYAI_DTYPE_F32, {vocab, dim});
//   ...
//   w.Open("out.tmai");
//   w.Write(bytes, n);   // tensor data in directory order, in chunks of any size
//   w.Finish();
//
// Only the descriptive part (metadata and directory) is held in memory; the
// data streams to disk, so a multi-GiB model needs little memory to write.
//
// With w.SetCompression(TINYAI_CODEC_ZSTD, level) before Open, each tensor is
// split into row slices of about tmai::kDefaultRowSliceBytes and stored as
// zstd frames behind a frame table (docs/format.md, "codec zstd") when that
// is smaller than its raw bytes, else uncompressed. Nothing but one frame is
// held: the raw bytes stream to their place in the file while each frame,
// compressed as its last row arrives, goes to the file just after them; when
// the tensor is complete and its frames won, they move down to where a
// compressed tensor goes (the raw copy is overwritten). Peak memory is about
// two frames (2 MiB) plus the zstd context (about 0.3 MiB at level 3, a few
// MiB at 19), whatever the model's size. Frames use a 16 KiB window
// (kZstdWindowLog), so that a reader decodes them a 16 KiB zstd block at a time.
#ifndef TINYAI_FORMAT_TMAI_WRITER_H_
#define TINYAI_FORMAT_TMAI_WRITER_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "format/tmai_format.h"
#include "port/port.h"
#include "tinyai/status.h"
#include "tinyai/types.h"

typedef struct ZSTD_CCtx_s ZSTD_CCtx;

namespace tinyai {

// What a finished file holds (TmaiWriter::stats() after Finish).
struct TmaiWriteStats {
  uint64_t tensors = 0;
  uint64_t compressed_tensors = 0;  // stored with codec zstd
  uint64_t decoded_bytes = 0;       // sum of the tensors' decoded sizes
  uint64_t stored_bytes = 0;        // sum of the tensors' stored sizes
  uint64_t file_size = 0;           // header, index, data and alignment padding
};

class TmaiWriter {
 public:
  TmaiWriter() = default;
  TmaiWriter(const TmaiWriter&) = delete;
  TmaiWriter& operator=(const TmaiWriter&) = delete;
  ~TmaiWriter();

  void AddMetaInt(const std::string& key, int64_t value);
  void AddMetaFloat(const std::string& key, float value);
  void AddMetaString(const std::string& key, const std::string& value);
  void AddMetaFloatArray(const std::string& key, const std::vector<float>& values);
  void AddMetaStringArray(const std::string& key, const std::vector<std::string>& values);

  // Starts a new layer; tensors added next belong to it. Returns its index.
  int32_t AddLayer(TinyAILayerKind kind, int32_t blockIndex);
  // Adds a tensor to the current layer. Returns its index, or -1 (and records
  // the error, reported again by Open) for a bad name or shape.
  int32_t AddTensor(const std::string& name, TinyAITensorRole role, TinyAIDType dtype,
                    std::initializer_list<uint64_t> shape);
  int32_t AddTensor(const std::string& name, TinyAITensorRole role, TinyAIDType dtype,
                    const std::vector<uint64_t>& shape);

  static constexpr int kDefaultZstdLevel = 3;
  // The zstd window of the frames written: their zstd blocks are at most 16 KiB, which
  // is all the compressed input a decoder must hold at once. On float
  // weights a larger window gains nothing (under 0.05% at 1 MiB).
  static constexpr int kZstdWindowLog = 14;
  // Before Open: TINYAI_CODEC_ZSTD stores each tensor that gets smaller as
  // zstd frames (level 1..19); TINYAI_CODEC_NONE (the default) stores every
  // tensor as loaded. A bad codec or level is recorded and reported by Open.
  void SetCompression(TinyAICodec codec, int level = kDefaultZstdLevel);

  // Creates the file and writes a zero-filled index; data follows with
  // Write(). The data goes to a temporary only this writer reaches, in
  // path's directory (port::BeginOutput: its rules say what is refused),
  // put in place by a successful Finish: a write that fails, or a writer
  // destroyed before Finish, removes it and leaves whatever path held.
  TinyAIStatus Open(const char* path);
  // Appends tensor data (decoded bytes) in directory order; a chunk may span
  // tensors.
  TinyAIStatus Write(const void* data, size_t bytes);
  // Encodes one row of a grouped tensor (src/common/groups.h): cols values
  // into the row's bytes. tensor is the directory index (for a report of
  // each tensor's error). quant::EncodeRows is the one TinyAI uses; the
  // writer itself knows no quantizer. Rows are encoded in batches on the
  // writer's thread pool (common/thread_pool.h; SetEncodeThreads), so the
  // encoder must be thread-safe and deterministic; the bytes are written in
  // order either way.
  using RowEncoder = std::function<TinyAIStatus(int32_t tensor, int32_t dtype, const float* row, size_t cols,
                                                uint8_t* out)>;
  void SetRowEncoder(RowEncoder encoder) { encoder_ = std::move(encoder); }
  // Threads that encode grouped rows, the caller's included (0, the
  // default: one per core); the pool starts at the first batch.
  void SetEncodeThreads(size_t threads) {
    encode_threads_ = threads;
    pool_started_ = false;
  }
  // Values of grouped rows collected before they are encoded together.
  static constexpr size_t kEncodeBatchBytes = size_t{8} << 20;
  // The most encoding threads (the pool's threads are an int).
  static constexpr int kMaxEncodeThreads = 1024;
  // Appends values in directory order, each stored in its tensor's dtype:
  // f32 as given, f16 rounded to nearest even (common/half.h), a grouped
  // dtype a row at a time by the row encoder; a chunk may span tensors and
  // rows. TINYAI_ERR_MISUSE for a grouped dtype without a row encoder, or
  // after a Write that ended inside a value or a grouped row.
  TinyAIStatus WriteValues(const float* values, size_t count);
  // Decoded bytes the tensor still expects (the current one when index < 0).
  uint64_t TensorBytes(int32_t index) const;
  // Writes the index with every checksum and puts the file in place at the
  // path Open was given (port::CommitOutput). Fails if any tensor is
  // incomplete.
  TinyAIStatus Finish();
  // Totals of the finished file (zero before Finish succeeds).
  const TmaiWriteStats& stats() const { return stats_; }
  // The most bytes the writer's data buffers have held (a compressing
  // writer's frame and compressed frame; 0 uncompressed): what writing needs
  // besides the directory and the zstd context, whatever the tensors' sizes.
  uint64_t peak_buffer_bytes() const { return peak_buffers_; }

  // Test hook: the file-format version written into the header.
  void set_version_for_testing(uint16_t major, uint16_t minor) {
    version_major_ = major;
    version_minor_ = minor;
  }

 private:
  struct Meta {
    std::string key;
    uint8_t type;
    std::vector<uint8_t> value;
  };
  TinyAIStatus WriteZeros(uint64_t bytes);
  TinyAIStatus WriteRaw(const void* data, size_t bytes);
  // Writes (WriteAt) or reads (ReadAt) at a file position, wherever the
  // cursor is (compressing writers move between the raw bytes and frames).
  // Writes that follow each other gather in out_buf_ (a model of tens of
  // thousands of small tensors is otherwise a write call per tensor and per
  // pad); Flush writes it out.
  TinyAIStatus WriteAt(uint64_t pos, const void* data, size_t bytes);
  TinyAIStatus ReadAt(uint64_t pos, void* data, size_t bytes);
  TinyAIStatus Flush();
  TinyAIStatus BeginTensor();             // starts the current tensor
  TinyAIStatus PlaceTensor(size_t index);  // pads to where its stored bytes start
  // Compressing writers: collects n more bytes of the current tensor into
  // frames, compressing each as it completes.
  TinyAIStatus FeedFrames(const uint8_t* p, size_t n);
  TinyAIStatus CompressFrame(const uint8_t* data, size_t bytes);
  // Compressing writers: the current tensor is complete; keeps its frames
  // when they beat the raw bytes (moving them into place), else the raw bytes.
  TinyAIStatus EndTensor();
  std::vector<uint8_t> SerializeMetadata() const;

  // Records a misuse (first one wins; reported by Open/Finish).
  void Fail(TinyAIStatus code, const std::string& why);

  std::vector<Meta> meta_;
  std::vector<tmai::LayerEntry> layers_;
  std::vector<tmai::TensorEntry> tensors_;
  std::string first_error_;
  TinyAIStatus first_status_ = TINYAI_OK;

  std::string path_;  // where the file goes (and what messages name)
  port::OutputFile out_;
  bool open_ = false;  // between Open and Finish
  static constexpr size_t kOutBufferBytes = size_t{1} << 20;
  std::vector<uint8_t> out_buf_;
  uint64_t out_buf_pos_ = 0;  // file offset of out_buf_[0]
  uint64_t cursor_ = 0;        // bytes written so far
  uint64_t data_offset_ = 0;
  size_t current_ = 0;         // tensor being written
  uint64_t written_in_current_ = 0;
  RowEncoder encoder_;
  std::vector<float> row_values_;  // a grouped tensor's rows collected so far
  std::vector<uint8_t> row_bytes_buf_;
  size_t encode_threads_ = 0;
  ThreadPool pool_;  // encodes batches of grouped rows
  bool pool_started_ = false;
  // Encodes the rows collected in row_values_ into row_bytes_buf_.
  TinyAIStatus EncodeBatch(int32_t tensor, int32_t dtype, size_t cols, size_t row_bytes, size_t rows);
  uint32_t crc_ = 0;
  uint16_t version_major_ = tmai::kVersionMajor;
  uint16_t version_minor_ = tmai::kVersionMinor;
  TmaiWriteStats stats_;

  TinyAICodec codec_ = TINYAI_CODEC_NONE;
  int level_ = kDefaultZstdLevel;
  ZSTD_CCtx* cctx_ = nullptr;
  uint64_t high_water_ = 0;   // the furthest byte written (frames beyond the raw copy)
  // The tensor being compressed.
  bool compressing_ = false;  // its frames may still beat its raw bytes
  uint64_t raw_offset_ = 0;   // where its raw bytes go
  uint64_t zstd_offset_ = 0;  // where it goes compressed (its frame table)
  uint64_t rows_per_frame_ = 0, row_bytes_ = 0, rows_ = 0, frames_ = 0;
  uint64_t frame_index_ = 0;
  uint64_t packed_total_ = 0;  // bytes of frames so far, after raw_offset_ + decoded size
  std::vector<uint64_t> frame_offsets_;
  uint64_t peak_buffers_ = 0;
  void NoteBuffers() {
    const uint64_t b = pending_.capacity() + packed_.capacity();
    if (b > peak_buffers_) peak_buffers_ = b;
  }
  std::vector<uint8_t> pending_;  // the current frame's decoded bytes so far (compressing only)
  std::vector<uint8_t> packed_;   // one compressed frame; the frames' copy buffer
};

}  // namespace tinyai

#endif  // TINYAI_FORMAT_TMAI_WRITER_H_
