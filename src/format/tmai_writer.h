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
// held in memory until its last byte arrives (unless one Write() brings it
// whole), split into row blocks of about tmai::kDefaultRowBlockBytes, and
// stored as zstd frames behind a frame table (docs/format.md, "codec zstd")
// when that is smaller than its raw bytes, else uncompressed. Peak memory is
// then about twice the largest tensor (its raw bytes and its compressed
// copy) plus the zstd context (about 0.6 MiB at level 3, 18 MiB at 19).
#ifndef TINYAI_FORMAT_TMAI_WRITER_H_
#define TINYAI_FORMAT_TMAI_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "format/tmai_format.h"
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
  // Before Open: TINYAI_CODEC_ZSTD stores each tensor that gets smaller as
  // zstd frames (level 1..19); TINYAI_CODEC_NONE (the default) stores every
  // tensor as loaded. A bad codec or level is recorded and reported by Open.
  void SetCompression(TinyAICodec codec, int level = kDefaultZstdLevel);

  // Creates path and writes a zero-filled index; data follows with Write().
  TinyAIStatus Open(const char* path);
  // Appends tensor data (decoded bytes) in directory order; a chunk may span
  // tensors.
  TinyAIStatus Write(const void* data, size_t bytes);
  // Decoded bytes the tensor still expects (the current one when index < 0).
  uint64_t TensorBytes(int32_t index) const;
  // Writes the index with every checksum and closes the file. Fails if any
  // tensor is incomplete.
  TinyAIStatus Finish();
  // Totals of the finished file (zero before Finish succeeds).
  const TmaiWriteStats& stats() const { return stats_; }

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
  TinyAIStatus BeginTensor();             // starts the current tensor
  TinyAIStatus PlaceTensor(size_t index);  // pads to where its stored bytes start
  // Compressing writers: stores the current tensor, whose decoded bytes are
  // data, as zstd frames or, when that is not smaller, as they are.
  TinyAIStatus StoreTensor(const uint8_t* data);
  // Fills packed_ with the frame table and frames of tensor t; *smaller tells
  // whether they beat its raw size (packing stops as soon as they cannot).
  TinyAIStatus PackZstd(const tmai::TensorEntry& t, const uint8_t* data, uint32_t* rows_per_frame, bool* smaller);
  std::vector<uint8_t> SerializeMetadata() const;

  // Records a misuse (first one wins; reported by Open/Finish).
  void Fail(TinyAIStatus code, const std::string& why);

  std::vector<Meta> meta_;
  std::vector<tmai::LayerEntry> layers_;
  std::vector<tmai::TensorEntry> tensors_;
  std::string first_error_;
  TinyAIStatus first_status_ = TINYAI_OK;

  std::string path_;
  FILE* file_ = nullptr;
  uint64_t cursor_ = 0;        // bytes written so far
  uint64_t data_offset_ = 0;
  size_t current_ = 0;         // tensor being written
  uint64_t written_in_current_ = 0;
  uint32_t crc_ = 0;
  uint16_t version_major_ = tmai::kVersionMajor;
  uint16_t version_minor_ = tmai::kVersionMinor;
  TmaiWriteStats stats_;

  TinyAICodec codec_ = TINYAI_CODEC_NONE;
  int level_ = kDefaultZstdLevel;
  ZSTD_CCtx* cctx_ = nullptr;
  std::vector<uint8_t> pending_;  // the current tensor's decoded bytes so far (compressing only)
  std::vector<uint8_t> packed_;   // its frame table and frames
};

}  // namespace tinyai

#endif  // TINYAI_FORMAT_TMAI_WRITER_H_
