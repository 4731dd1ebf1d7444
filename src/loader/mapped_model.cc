#include "loader/mapped_model.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>

#include "common/status.h"

using tinyai::LockGuard;
using tinyai::SetError;

TinyAIStatus TinyAIMappedModel::Open(const char* path, const void* data, size_t size,
                                     const TinyAIMmapConfig* config, TinyAIMappedModel** out) {
  *out = nullptr;
  TinyAIMmapConfig cfg = tinyaiCreateDefaultMmapConfig();
  if (config) {
    if (config->structSize < offsetof(TinyAIMmapConfig, verifyChecksums) + sizeof(bool) ||
        config->structSize > sizeof(TinyAIMmapConfig)) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                      "config.structSize is %u; create the config with tinyaiCreateDefaultMmapConfig()",
                      config->structSize);
    }
    std::memcpy(&cfg, config, config->structSize);
  }
  if (cfg.prefetchThreads < 0 || cfg.prefetchThreads > 64) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "config.prefetchThreads is %d; allowed 0..64",
                    cfg.prefetchThreads);
  }
  TinyAIMappedModel* model = new (std::nothrow) TinyAIMappedModel();
  if (!model) return SetError(TINYAI_ERR_OUT_OF_MEMORY, "cannot allocate a mapped model");
  TinyAIStatus s = model->Init(path, data, size, cfg);
  if (s != TINYAI_OK) {
    delete model;
    return s;
  }
  *out = model;
  return TINYAI_OK;
}

TinyAIMappedModel::~TinyAIMappedModel() { tinyai::port::UnmapFile(&file_); }

TinyAIStatus TinyAIMappedModel::Init(const char* path, const void* data, size_t size,
                                     const TinyAIMmapConfig& config) {
  config_ = config;
  const char* name = path ? path : "<memory image>";
  size_t name_len = std::strlen(name);
  TINYAI_RETURN_IF_ERROR(source_.Allocate(name_len + 1, "model path"));
  std::memcpy(source_.data(), name, name_len + 1);
  if (path) {
    TINYAI_RETURN_IF_ERROR(tinyai::port::MapFile(path, &file_));
    data_ = file_.data;
    size_ = file_.size;
  } else {
    if (reinterpret_cast<uintptr_t>(data) % 64 != 0) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "model image at %p is not 64-byte aligned", data);
    }
    data_ = static_cast<const uint8_t*>(data);
    size_ = size;
  }
  TINYAI_RETURN_IF_ERROR(reader_.Parse(data_, size_, size_, source_.data()));
  TINYAI_RETURN_IF_ERROR(layers_.Allocate(reader_.layers().size(), "layer states"));
  return BuildDescriptors();
}

TinyAIStatus TinyAIMappedModel::BuildDescriptors() {
  const auto layers = reader_.layers();
  TINYAI_RETURN_IF_ERROR(descriptors_.Allocate(layers.size(), "layer descriptors"));
  constexpr size_t kNameCapacity = 24;  // "block.65535" fits
  TINYAI_RETURN_IF_ERROR(layer_names_.Allocate(layers.size() * kNameCapacity, "layer names"));
  for (size_t i = 0; i < layers.size(); ++i) {
    const tinyai::tmai::LayerEntry& l = layers[i];
    TinyAILayerDescriptor& d = descriptors_[i];
    char* name = layer_names_.data() + i * kNameCapacity;
    d.index = static_cast<int32_t>(i);
    d.kind = static_cast<TinyAILayerKind>(l.kind);
    d.blockIndex = l.kind == TINYAI_LAYER_TRANSFORMER ? l.block_index : -1;
    d.firstTensor = static_cast<int32_t>(l.first_tensor);
    d.tensorCount = static_cast<int32_t>(l.tensor_count);
    d.fileOffset = l.offset;
    d.storedSize = l.stored_size;
    d.decodedSize = l.decoded_size;
    if (l.kind == TINYAI_LAYER_TRANSFORMER) {
      std::snprintf(name, kNameCapacity, "block.%d", l.block_index);
    } else {
      std::snprintf(name, kNameCapacity, "%s", tinyaiLayerKindName(d.kind));
    }
    d.name = name;
  }
  return TINYAI_OK;
}

TinyAIStatus TinyAIMappedModel::CheckLayer(int32_t layer, const char* call) const {
  if (layer < 0 || layer >= layer_count()) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: layer %d is out of range (the model has %d)", call,
                    layer, layer_count());
  }
  return TINYAI_OK;
}

TinyAIStatus TinyAIMappedModel::VerifyLayer(int32_t layer) {
  const tinyai::tmai::LayerEntry& l = reader_.layers()[static_cast<size_t>(layer)];
  for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
    const tinyai::tmai::TensorEntry& e = reader_.tensors()[t];
    if (e.codec != TINYAI_CODEC_NONE) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' uses codec %s, which this build cannot load",
                      source_.data(), e.name, tinyaiCodecName(static_cast<TinyAICodec>(e.codec)));
    }
    TINYAI_RETURN_IF_ERROR(reader_.VerifyTensor(t, data_ + e.offset));
  }
  return TINYAI_OK;
}

TinyAIStatus TinyAIMappedModel::Acquire(int32_t layer, const uint8_t** data) {
  TINYAI_RETURN_IF_ERROR(CheckLayer(layer, "tinyaiGetLayerWeights"));
  LockGuard lock(mutex_);
  LayerState& st = layers_[static_cast<size_t>(layer)];
  const TinyAILayerDescriptor& d = descriptor(layer);
  if (!st.resident) {
    tinyai::port::AdviseRange(data_ + d.fileOffset, static_cast<size_t>(d.storedSize),
                              tinyai::port::Advice::kWillNeed);
    if (config_.verifyChecksums && !st.verified) {
      TINYAI_RETURN_IF_ERROR(VerifyLayer(layer));
      st.verified = true;
    } else {
      // Codec support is checked even when checksums are not.
      const tinyai::tmai::LayerEntry& l = reader_.layers()[static_cast<size_t>(layer)];
      for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
        if (reader_.tensors()[t].codec != TINYAI_CODEC_NONE) {
          return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' is compressed; this build cannot load it",
                          source_.data(), reader_.tensors()[t].name);
        }
      }
    }
    st.resident = true;
    resident_bytes_ += static_cast<size_t>(d.decodedSize);
  }
  ++st.pins;
  *data = data_ + d.fileOffset;
  return TINYAI_OK;
}

TinyAIStatus TinyAIMappedModel::Release(int32_t layer) {
  TINYAI_RETURN_IF_ERROR(CheckLayer(layer, "tinyaiReleaseLayerWeights"));
  LockGuard lock(mutex_);
  LayerState& st = layers_[static_cast<size_t>(layer)];
  if (st.pins == 0) {
    return SetError(TINYAI_ERR_MISUSE,
                    "tinyaiReleaseLayerWeights: layer %d is not held (no matching tinyaiGetLayerWeights)",
                    layer);
  }
  --st.pins;
  return TINYAI_OK;
}

TinyAIStatus TinyAIMappedModel::Prefetch(int32_t layer) {
  TINYAI_RETURN_IF_ERROR(CheckLayer(layer, "tinyaiPrefetchLayerWeights"));
  if (!config_.prefetchEnabled) return TINYAI_OK;
  {
    LockGuard lock(mutex_);
    if (layers_[static_cast<size_t>(layer)].resident) return TINYAI_OK;
  }
  const TinyAILayerDescriptor& d = descriptor(layer);
  tinyai::port::AdviseRange(data_ + d.fileOffset, static_cast<size_t>(d.storedSize),
                            tinyai::port::Advice::kWillNeed);
  return TINYAI_OK;
}

TinyAIStatus TinyAIMappedModel::SetPriority(int32_t layer, float priority) {
  TINYAI_RETURN_IF_ERROR(CheckLayer(layer, "tinyaiSetLayerPriority"));
  if (!std::isfinite(priority) || priority < 0.0f) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiSetLayerPriority: priority %g must be finite and >= 0",
                    static_cast<double>(priority));
  }
  LockGuard lock(mutex_);
  layers_[static_cast<size_t>(layer)].priority = priority;
  return TINYAI_OK;
}

size_t TinyAIMappedModel::MemoryUsage() const {
  LockGuard lock(mutex_);
  return resident_bytes_;
}

TinyAIStatus TinyAIMappedModel::TensorInfo(int32_t tensor, TinyAITensorInfo* out) const {
  const auto tensors = reader_.tensors();
  if (tensor < 0 || static_cast<size_t>(tensor) >= tensors.size()) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tensor %d is out of range (the model has %zu)", tensor,
                    tensors.size());
  }
  const tinyai::tmai::TensorEntry& t = tensors[static_cast<size_t>(tensor)];
  const tinyai::tmai::LayerEntry& l = reader_.layers()[t.layer];
  std::memset(out, 0, sizeof *out);
  out->name = t.name;
  out->role = static_cast<TinyAITensorRole>(t.role);
  out->dtype = static_cast<TinyAIDType>(t.dtype);
  out->codec = static_cast<TinyAICodec>(t.codec);
  out->layer = t.layer;
  out->blockIndex = l.kind == TINYAI_LAYER_TRANSFORMER ? l.block_index : -1;
  out->nDims = t.ndims;
  out->elementCount = 1;
  for (int d = 0; d < t.ndims; ++d) {
    out->shape[d] = t.shape[d];
    out->elementCount *= t.shape[d];
  }
  out->offsetInLayer = t.decoded_offset;
  out->decodedSize = t.decoded_size;
  out->storedSize = t.stored_size;
  out->checksum = t.checksum;
  return TINYAI_OK;
}

TinyAIStatus TinyAIMappedModel::FindTensor(const char* name, int32_t* index) const {
  int32_t i = reader_.FindTensor(name);
  if (i < 0) return SetError(TINYAI_ERR_NOT_FOUND, "'%s': no tensor named '%s'", source_.data(), name);
  *index = i;
  return TINYAI_OK;
}
