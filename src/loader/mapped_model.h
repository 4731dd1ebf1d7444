// The mapped model behind <tinyai/utils/mmap_loader.h>: a validated .tmai
// index over a mapped file (or an image in memory) and per-layer residency.
//
// Residency today: a layer becomes resident when first pinned (its pages are
// advised in and its checksums verified once) and stays resident; pins are
// counted so a layer in use is never given back. The capped LRU-priority cache
// and prefetch workers replace Acquire/Release/Prefetch behind this same
// interface (issue 3), so callers (the C API, the LLaMA runner) do not change.
#ifndef TINYAI_LOADER_MAPPED_MODEL_H_
#define TINYAI_LOADER_MAPPED_MODEL_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/sync.h"
#include "format/tmai_reader.h"
#include "port/port.h"
#include "tinyai/utils/mmap_loader.h"

struct TinyAIMappedModel {
 public:
  // Opens path, or the image (data, size) when path is NULL.
  static TinyAIStatus Open(const char* path, const void* data, size_t size,
                           const TinyAIMmapConfig* config, TinyAIMappedModel** out);
  ~TinyAIMappedModel();

  const tinyai::TmaiReader& reader() const { return reader_; }
  const TinyAIMmapConfig& config() const { return config_; }
  int32_t layer_count() const { return static_cast<int32_t>(descriptors_.size()); }
  const TinyAILayerDescriptor& descriptor(int32_t layer) const { return descriptors_[static_cast<size_t>(layer)]; }
  uint64_t file_size() const { return size_; }

  // Pins the layer, making it resident (and verified) first if needed, and
  // returns the start of its loaded data.
  TinyAIStatus Acquire(int32_t layer, const uint8_t** data);
  // Unpins; TINYAI_ERR_MISUSE if the layer is not pinned.
  TinyAIStatus Release(int32_t layer);
  TinyAIStatus Prefetch(int32_t layer);
  TinyAIStatus SetPriority(int32_t layer, float priority);
  size_t MemoryUsage() const;

  TinyAIStatus TensorInfo(int32_t tensor, TinyAITensorInfo* out) const;
  // Index of the tensor called name, or TINYAI_ERR_NOT_FOUND.
  TinyAIStatus FindTensor(const char* name, int32_t* index) const;

  // TINYAI_ERR_INVALID_ARGUMENT naming the call when layer is out of range.
  TinyAIStatus CheckLayer(int32_t layer, const char* call) const;

 private:
  struct LayerState {
    int32_t pins = 0;
    bool resident = false;
    bool verified = false;
    float priority = 1.0f;
  };

  TinyAIMappedModel() = default;
  TinyAIStatus Init(const char* path, const void* data, size_t size, const TinyAIMmapConfig& config);
  TinyAIStatus BuildDescriptors();
  TinyAIStatus VerifyLayer(int32_t layer);

  TinyAIMmapConfig config_{};
  tinyai::port::MappedFile file_;
  const uint8_t* data_ = nullptr;  // the whole file's bytes
  uint64_t size_ = 0;
  tinyai::Array<char> source_;  // path for messages
  tinyai::TmaiReader reader_;
  tinyai::Array<TinyAILayerDescriptor> descriptors_;
  tinyai::Array<char> layer_names_;
  tinyai::Array<LayerState> layers_;
  mutable tinyai::Mutex mutex_;
  size_t resident_bytes_ = 0;
};

#endif  // TINYAI_LOADER_MAPPED_MODEL_H_
