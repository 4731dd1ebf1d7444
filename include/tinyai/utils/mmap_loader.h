/*
 * tinyai/utils/mmap_loader.h - memory-mapped .tmai models.
 *
 * A .tmai file (docs/format.md) is mapped, validated once at open, and its
 * weights are reached layer by layer: a layer is the page-aligned group of
 * tensors one block of the network needs (the embedding table, one
 * transformer block, the output head), so it can be paged in, advised and
 * released on its own.
 *
 *     TinyAIMmapConfig config = tinyaiCreateDefaultMmapConfig();
 *     config.maxCacheSize = 100 * 1024 * 1024;
 *     TinyAIMappedModel* model = tinyaiOpenMappedModel("model.tmai", &config);
 *     if (!model) {
 *         fprintf(stderr, "%s\n", tinyaiGetLastErrorMessage());
 *         return 1;
 *     }
 *     const void* w = tinyaiGetLayerWeights(model, 1);   // pins layer 1
 *     ...                                                 // read its tensors
 *     tinyaiReleaseLayerWeights(model, 1);                // unpins it
 *     tinyaiCloseMappedModel(model);
 *
 * Ownership: the model owns everything it returns (descriptors, names,
 * weight pointers); they stay valid until tinyaiCloseMappedModel(). Weight
 * memory is read-only. A model may be used from several threads; calls that
 * pin and unpin layers are internally synchronised.
 */
#ifndef TINYAI_UTILS_MMAP_LOADER_H
#define TINYAI_UTILS_MMAP_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../status.h"
#include "../types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TinyAIMappedModel TinyAIMappedModel;

typedef struct TinyAIMmapConfig {
    uint32_t structSize;       /* sizeof(TinyAIMmapConfig); set by tinyaiCreateDefaultMmapConfig() */
    size_t maxCacheSize;       /* bytes of weights kept resident; default 256 MB; 0 = no cap */
    size_t minLayerCacheSize;  /* bytes; layers smaller than this are never evicted; default 4 KB */
    int prefetchThreads;       /* background prefetch workers; default 1; 0 = prefetch inline */
    bool prefetchEnabled;      /* honour tinyaiPrefetchLayerWeights(); default true */
    bool adaptiveCaching;      /* learn the access cycle to choose what stays; default true */
    bool verifyChecksums;      /* check every tensor's CRC-32C the first time its layer is
                                  loaded; default true */
} TinyAIMmapConfig;

typedef struct TinyAILayerDescriptor {
    int32_t index;             /* 0 .. tinyaiGetMappedLayerCount()-1 */
    TinyAILayerKind kind;
    int32_t blockIndex;        /* transformer block number; -1 when kind is not a block */
    int32_t firstTensor;       /* index of the layer's first tensor (tinyaiGetMappedTensorInfo) */
    int32_t tensorCount;       /* tensors firstTensor .. firstTensor+tensorCount-1 */
    uint64_t fileOffset;       /* bytes from the start of the file; page-aligned */
    uint64_t storedSize;       /* bytes the layer occupies in the file */
    uint64_t decodedSize;      /* bytes of the layer's weights once loaded */
    const char* name;          /* "embedding", "block.3", "output"; owned by the model */
} TinyAILayerDescriptor;

typedef struct TinyAITensorInfo {
    const char* name;          /* e.g. "blk.3.attn_q"; owned by the model */
    TinyAITensorRole role;
    TinyAIDType dtype;
    TinyAICodec codec;
    int32_t layer;             /* index of the layer holding the tensor */
    int32_t blockIndex;        /* transformer block number; -1 for non-block tensors */
    int32_t nDims;             /* 1..4 */
    uint64_t shape[4];         /* outermost first: a [rows, cols] matrix is shape[0]=rows */
    uint64_t elementCount;
    uint64_t offsetInLayer;    /* bytes from tinyaiGetLayerWeights() to the tensor's data */
    uint64_t decodedSize;      /* bytes of the data in memory */
    uint64_t storedSize;       /* bytes of the data in the file */
    uint32_t checksum;         /* CRC-32C of the stored bytes */
} TinyAITensorInfo;

/* Defaults as documented on each field. Returned by value; nothing to free. */
TinyAIMmapConfig tinyaiCreateDefaultMmapConfig(void);

/* Opens and validates a .tmai file (header, metadata, tensor directory and
 * bounds; checksums are checked when layers load). config may be NULL for the
 * defaults. Returns NULL on failure: tinyaiGetLastError() gives the status
 * (TINYAI_ERR_FILE_NOT_FOUND, _BAD_MAGIC, _UNSUPPORTED_VERSION, _TRUNCATED,
 * _OUT_OF_BOUNDS, _OVERFLOW, _BAD_FORMAT, ...) and the message the cause. */
TinyAIMappedModel* tinyaiOpenMappedModel(const char* path, const TinyAIMmapConfig* config);

/* As tinyaiOpenMappedModel() over an image already in memory (flash, a test
 * buffer). The caller keeps data alive and unchanged until the model is
 * closed; data must be 64-byte aligned. */
TinyAIMappedModel* tinyaiOpenMappedModelFromMemory(const void* data, size_t size,
                                                   const TinyAIMmapConfig* config);

/* Unmaps and frees everything. NULL is ok. Weight pointers die with it. */
void tinyaiCloseMappedModel(TinyAIMappedModel* model);

/* Number of layers, or -1 (and the last error set) if model is NULL. */
int tinyaiGetMappedLayerCount(const TinyAIMappedModel* model);

/* The layer's descriptor, or NULL (last error set) for a bad model or index. */
const TinyAILayerDescriptor* tinyaiGetLayerDescriptor(const TinyAIMappedModel* model,
                                                      int layerIndex);

/* Makes the layer's weights resident, verifies its checksums on first load,
 * pins it, and returns the address of its data (tensor t lives at
 * weights + info.offsetInLayer). Each successful call must be balanced by one
 * tinyaiReleaseLayerWeights(). Returns NULL (last error set) on failure,
 * e.g. TINYAI_ERR_CHECKSUM for corrupt data. */
void* tinyaiGetLayerWeights(TinyAIMappedModel* model, int layerIndex);

/* Asks for the layer to be paged in ahead of use. Never blocks on I/O when
 * prefetch threads run; a no-op when prefetch is disabled. */
TinyAIStatus tinyaiPrefetchLayerWeights(TinyAIMappedModel* model, int layerIndex);

/* Unpins a layer got with tinyaiGetLayerWeights(). Releasing a layer that is
 * not pinned is TINYAI_ERR_MISUSE. */
TinyAIStatus tinyaiReleaseLayerWeights(TinyAIMappedModel* model, int layerIndex);

/* Bytes of weights the model holds resident right now: pages of pinned or
 * cached layers (mapped files) or owned decoded copies. 0 for NULL. */
size_t tinyaiGetMappedModelMemoryUsage(const TinyAIMappedModel* model);

/* Priority of a layer in the cache: higher values stay longer. Default 1.0;
 * must be finite and >= 0. */
TinyAIStatus tinyaiSetLayerPriority(TinyAIMappedModel* model, int layerIndex, float priority);

/* ---- Tensors and metadata (TinyAI extensions to the guide's API) ---- */

/* Number of tensors, or -1 (last error set) if model is NULL. */
int tinyaiGetMappedTensorCount(const TinyAIMappedModel* model);

TinyAIStatus tinyaiGetMappedTensorInfo(const TinyAIMappedModel* model, int tensorIndex,
                                       TinyAITensorInfo* out);

/* Index of the tensor called name, or TINYAI_ERR_NOT_FOUND. */
TinyAIStatus tinyaiFindMappedTensor(const TinyAIMappedModel* model, const char* name,
                                    int* tensorIndex);

/* Metadata values by key (see docs/format.md for the keys a model carries,
 * e.g. "general.architecture", "llama.dim"). TINYAI_ERR_NOT_FOUND if the key
 * is missing, TINYAI_ERR_BAD_FORMAT if it holds another type. Strings are
 * owned by the model and not NUL-terminated: *len gives their length. */
TinyAIStatus tinyaiGetMetadataInt(const TinyAIMappedModel* model, const char* key, int64_t* out);
TinyAIStatus tinyaiGetMetadataFloat(const TinyAIMappedModel* model, const char* key, float* out);
TinyAIStatus tinyaiGetMetadataString(const TinyAIMappedModel* model, const char* key,
                                     const char** str, size_t* len);

/* Size in bytes of the mapped file. 0 for NULL. */
uint64_t tinyaiGetMappedModelFileSize(const TinyAIMappedModel* model);

#ifdef __cplusplus
}
#endif

#endif /* TINYAI_UTILS_MMAP_LOADER_H */
