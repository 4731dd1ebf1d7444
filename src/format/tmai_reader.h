// The one validating reader of .tmai files. Parse() checks the header, the
// metadata, the layer table and the tensor directory against each other and
// the file size; nothing else in TinyAI interprets these bytes. Tensor data is
// checked (CRC-32C) when it is loaded, by VerifyTensor().
#ifndef TINYAI_FORMAT_TMAI_READER_H_
#define TINYAI_FORMAT_TMAI_READER_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/span.h"
#include "format/tmai_format.h"
#include "tinyai/status.h"

namespace tinyai {

struct MetaEntry {
  StringView key;
  uint8_t type = 0;               // tmai::MetaType
  int64_t int_value = 0;          // kMetaInt
  float float_value = 0.0f;       // kMetaFloat
  const uint8_t* payload = nullptr;  // string bytes or array elements (after the count)
  uint32_t count = 0;             // string length or array element count
};

class TmaiReader {
 public:
  // Validates the index of a file of fileSize bytes whose first indexSize
  // bytes (at least up to data_offset, or the whole file) are at index.
  // index must stay valid and unchanged while the reader is used, and be
  // 8-byte aligned. source names the file in error messages.
  // in_place: index is the one format/gguf_index.h built for a GGUF file of
  // fileSize bytes (not part of that file): its header says
  // kHeaderFlagInPlace, its layers lie anywhere in the file, its tensors
  // start at multiples of 32 and are laid out afresh once loaded, and they
  // have no checksums. A file's own index never has the flag.
  TinyAIStatus Parse(const uint8_t* index, uint64_t indexSize, uint64_t fileSize, const char* source,
                     bool in_place = false);
  // Whether the model is a GGUF file read in place (Parse's in_place).
  bool in_place() const { return in_place_; }

  const tmai::Header& header() const { return *header_; }
  // The directory the runtime uses: the file's, unless UseDirectory() set
  // another (a model with precisions applied: its matrices' dtypes and the
  // decoded layout differ, the stored bytes, offsets and checksums do not).
  Span<const tmai::LayerEntry> layers() const { return layers_; }
  Span<const tmai::TensorEntry> tensors() const { return tensors_; }
  // The directory as the file has it.
  Span<const tmai::LayerEntry> file_layers() const { return file_layers_; }
  Span<const tmai::TensorEntry> file_tensors() const { return file_tensors_; }
  // Replaces the runtime's directory (same counts and names, stored fields
  // unchanged; the caller keeps them alive); empty spans restore the file's.
  void UseDirectory(Span<const tmai::LayerEntry> layers, Span<const tmai::TensorEntry> tensors);
  Span<const MetaEntry> metadata() const { return Span<const MetaEntry>(meta_.data(), meta_.size()); }
  const char* source() const { return source_; }

  // nullptr when absent.
  const MetaEntry* FindMeta(const char* key) const;
  // TINYAI_ERR_NOT_FOUND if absent, TINYAI_ERR_BAD_FORMAT if of another type.
  TinyAIStatus GetInt(const char* key, int64_t* out) const;
  TinyAIStatus GetFloat(const char* key, float* out) const;
  TinyAIStatus GetString(const char* key, StringView* out) const;
  // Array accessors fill exactly entry->count elements of out.
  static void CopyFloatArray(const MetaEntry& entry, float* out);
  static void GetStringArray(const MetaEntry& entry, StringView* out);

  // Index of the tensor with this name, or -1.
  int32_t FindTensor(const char* name) const;

  // Checks a tensor's stored bytes (at data) against its CRC-32C.
  // TINYAI_ERR_CHECKSUM naming the tensor when crc (of its stored bytes,
  // computed by the caller, e.g. while streaming them) is not the recorded one.
  TinyAIStatus CheckTensorChecksum(uint32_t tensorIndex, uint32_t crc) const;
  TinyAIStatus VerifyTensor(uint32_t tensorIndex, const uint8_t* data) const;

 private:
  TinyAIStatus ParseHeader(const uint8_t* index, uint64_t indexSize, uint64_t fileSize);
  TinyAIStatus ParseMetadata(const uint8_t* index);
  TinyAIStatus ParseLayers();
  TinyAIStatus ParseTensors();
  TinyAIStatus CheckZstdTensor(const tmai::TensorEntry& t) const;
  TinyAIStatus CheckUniqueNames();

  const char* source_ = "";
  bool in_place_ = false;
  uint64_t file_size_ = 0;
  const tmai::Header* header_ = nullptr;
  Span<const tmai::LayerEntry> layers_;
  Span<const tmai::TensorEntry> tensors_;
  Span<const tmai::LayerEntry> file_layers_;
  Span<const tmai::TensorEntry> file_tensors_;
  Array<MetaEntry> meta_;
  Array<uint32_t> sorted_names_;  // tensor indices sorted by name
};

}  // namespace tinyai

#endif  // TINYAI_FORMAT_TMAI_READER_H_
