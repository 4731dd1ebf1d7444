// extern "C" shims of <tinyai/utils/mmap_loader.h>: argument checks, then the
// loader, with the models' row transform (model/weight_transform.h). Every
// failure is recorded as the thread's last error.
#include <cstring>

#include "capi/handles.h"
#include "common/status.h"
#include "common/struct_size.h"
#include "loader/mapped_model.h"
#include "model/weight_transform.h"
#include "tinyai/utils/mmap_loader.h"

using tinyai::SetError;
using tinyai::capi::CheckModel;

extern "C" {

TinyAIMmapConfig tinyaiCreateDefaultMmapConfig(void) { return tinyai::DefaultMmapConfig(); }

TinyAIMappedModel* tinyaiOpenMappedModel(const char* path, const TinyAIMmapConfig* config) {
  if (!path) {
    SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiOpenMappedModel: path is NULL");
    return nullptr;
  }
  if (path[0] == '\0') {
    SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiOpenMappedModel: path is empty");
    return nullptr;
  }
  tinyai::ModelOrigin origin;
  origin.path = path;
  TinyAIMappedModel* model = nullptr;
  TinyAIMappedModel::Open(origin, config, tinyai::ModelRowTransform(), &model);
  return model;
}

TinyAIMappedModel* tinyaiOpenMappedModelFromMemory(const void* data, size_t size,
                                                   const TinyAIMmapConfig* config) {
  if (!data) {
    SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiOpenMappedModelFromMemory: data is NULL");
    return nullptr;
  }
  tinyai::ModelOrigin origin;
  origin.data = data;
  origin.size = size;
  TinyAIMappedModel* model = nullptr;
  TinyAIMappedModel::Open(origin, config, tinyai::ModelRowTransform(), &model);
  return model;
}

TinyAIMappedModel* tinyaiOpenMappedModelFromReader(TinyAIReadCallback read, void* user, uint64_t size,
                                                   const TinyAIMmapConfig* config) {
  if (!read) {
    SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiOpenMappedModelFromReader: read is NULL");
    return nullptr;
  }
  tinyai::ModelOrigin origin;
  origin.read = read;
  origin.user = user;
  origin.size = size;
  TinyAIMappedModel* model = nullptr;
  TinyAIMappedModel::Open(origin, config, tinyai::ModelRowTransform(), &model);
  return model;
}

void tinyaiCloseMappedModel(TinyAIMappedModel* model) {
  if (model) TinyAIMappedModel::Close(model);
}

int tinyaiGetMappedLayerCount(const TinyAIMappedModel* model) {
  if (CheckModel(model, "tinyaiGetMappedLayerCount") != TINYAI_OK) return -1;
  return model->layer_count();
}

const TinyAILayerDescriptor* tinyaiGetLayerDescriptor(const TinyAIMappedModel* model, int layerIndex) {
  if (CheckModel(model, "tinyaiGetLayerDescriptor") != TINYAI_OK) return nullptr;
  if (model->CheckLayer(layerIndex, "tinyaiGetLayerDescriptor") != TINYAI_OK) return nullptr;
  return &model->descriptor(layerIndex);
}

void* tinyaiGetLayerWeights(TinyAIMappedModel* model, int layerIndex) {
  if (CheckModel(model, "tinyaiGetLayerWeights") != TINYAI_OK) return nullptr;
  const uint8_t* data = nullptr;
  if (model->Acquire(layerIndex, &data) != TINYAI_OK) return nullptr;
  // The guide's signature returns void*; the memory is read-only.
  return const_cast<uint8_t*>(data);
}

TinyAIStatus tinyaiPrefetchLayerWeights(TinyAIMappedModel* model, int layerIndex) {
  TINYAI_RETURN_IF_ERROR(CheckModel(model, "tinyaiPrefetchLayerWeights"));
  return model->Prefetch(layerIndex);
}

TinyAIStatus tinyaiReleaseLayerWeights(TinyAIMappedModel* model, int layerIndex) {
  TINYAI_RETURN_IF_ERROR(CheckModel(model, "tinyaiReleaseLayerWeights"));
  return model->Release(layerIndex);
}

size_t tinyaiGetMappedModelMemoryUsage(const TinyAIMappedModel* model) {
  if (CheckModel(model, "tinyaiGetMappedModelMemoryUsage") != TINYAI_OK) return 0;
  return model->MemoryUsage();
}

TinyAIStatus tinyaiSetLayerPriority(TinyAIMappedModel* model, int layerIndex, float priority) {
  TINYAI_RETURN_IF_ERROR(CheckModel(model, "tinyaiSetLayerPriority"));
  return model->SetPriority(layerIndex, priority);
}

int tinyaiGetMappedTensorCount(const TinyAIMappedModel* model) {
  if (CheckModel(model, "tinyaiGetMappedTensorCount") != TINYAI_OK) return -1;
  return static_cast<int>(model->reader().tensors().size());
}

TinyAIStatus tinyaiGetMappedTensorInfo(const TinyAIMappedModel* model, int tensorIndex, TinyAITensorInfo* out) {
  TINYAI_RETURN_IF_ERROR(CheckModel(model, "tinyaiGetMappedTensorInfo"));
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetMappedTensorInfo: out is NULL");
  TINYAI_RETURN_IF_ERROR(
      tinyai::CheckOutputSize(out, TINYAI_STRUCT_MIN(TinyAITensorInfo, name), "tinyaiGetMappedTensorInfo: out"));
  TinyAITensorInfo info;
  TINYAI_RETURN_IF_ERROR(model->TensorInfo(tensorIndex, &info));
  tinyai::WriteVersioned(info, out);
  return TINYAI_OK;
}

TinyAIStatus tinyaiFindMappedTensor(const TinyAIMappedModel* model, const char* name, int* tensorIndex) {
  TINYAI_RETURN_IF_ERROR(CheckModel(model, "tinyaiFindMappedTensor"));
  if (!name || !tensorIndex) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiFindMappedTensor: %s is NULL", name ? "tensorIndex" : "name");
  }
  int32_t index = -1;
  TINYAI_RETURN_IF_ERROR(model->FindTensor(name, &index));
  *tensorIndex = index;
  return TINYAI_OK;
}

TinyAIStatus tinyaiGetMetadataInt(const TinyAIMappedModel* model, const char* key, int64_t* out) {
  TINYAI_RETURN_IF_ERROR(CheckModel(model, "tinyaiGetMetadataInt"));
  if (!key || !out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetMetadataInt: %s is NULL", key ? "out" : "key");
  return model->reader().GetInt(key, out);
}

TinyAIStatus tinyaiGetMetadataFloat(const TinyAIMappedModel* model, const char* key, float* out) {
  TINYAI_RETURN_IF_ERROR(CheckModel(model, "tinyaiGetMetadataFloat"));
  if (!key || !out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetMetadataFloat: %s is NULL", key ? "out" : "key");
  return model->reader().GetFloat(key, out);
}

TinyAIStatus tinyaiGetMetadataString(const TinyAIMappedModel* model, const char* key, const char** str, size_t* len) {
  TINYAI_RETURN_IF_ERROR(CheckModel(model, "tinyaiGetMetadataString"));
  if (!key || !str || !len) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetMetadataString: %s is NULL", !key ? "key" : !str ? "str" : "len");
  }
  tinyai::StringView v;
  TINYAI_RETURN_IF_ERROR(model->reader().GetString(key, &v));
  *str = v.data;
  *len = v.size;
  return TINYAI_OK;
}

uint64_t tinyaiGetMappedModelFileSize(const TinyAIMappedModel* model) {
  if (CheckModel(model, "tinyaiGetMappedModelFileSize") != TINYAI_OK) return 0;
  return model->file_size();
}

TinyAIStatus tinyaiGetMappedModelCacheStats(const TinyAIMappedModel* model, TinyAICacheStats* out) {
  TINYAI_RETURN_IF_ERROR(CheckModel(model, "tinyaiGetMappedModelCacheStats"));
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetMappedModelCacheStats: out is NULL");
  TINYAI_RETURN_IF_ERROR(
      tinyai::CheckOutputSize(out, TINYAI_STRUCT_MIN(TinyAICacheStats, hits), "tinyaiGetMappedModelCacheStats: out"));
  const tinyai::CacheStats s = model->cache().stats();
  TinyAICacheStats full;
  std::memset(&full, 0, sizeof full);
  full.structSize = sizeof full;
  full.hits = s.hits;
  full.misses = s.misses;
  full.bytesRead = s.bytes_read;
  full.bytesReadDirect = s.bytes_read_direct;
  full.prefetchWorkers = s.prefetch_workers;
  full.bytesLoaded = s.bytes_loaded;
  full.evictions = s.evictions;
  full.prefetchRequests = s.prefetch_requests;
  full.prefetchLoads = s.prefetch_loads;
  full.prefetchDropped = s.prefetch_dropped;
  full.prefetchHits = s.prefetch_hits;
  full.stalls = s.stalls;
  full.heldBytes = s.held_bytes;
  full.peakHeldBytes = s.peak_held_bytes;
  full.residentBytes = s.resident_bytes;
  full.capacity = s.capacity;
  tinyai::WriteVersioned(full, out);
  return TINYAI_OK;
}

TinyAIStatus tinyaiResetMappedModelCacheStats(TinyAIMappedModel* model) {
  TINYAI_RETURN_IF_ERROR(CheckModel(model, "tinyaiResetMappedModelCacheStats"));
  model->cache().ResetStats();
  return TINYAI_OK;
}

}  // extern "C"
