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
 *
 * Handles that are not open: every call given a model pointer that is not
 * an open model (closed already, or never opened) reads nothing through it
 * and fails with TINYAI_ERR_MISUSE (functions returning a pointer, count or
 * size return their NULL, -1 or 0 with TINYAI_ERR_MISUSE as the last
 * error), the message naming the call. The call finds the pointer among the
 * open models; it does not hold the model, so a call on one thread racing
 * with tinyaiCloseMappedModel() of the same model on another is the
 * caller's race (as in SQLite), and an address a later open reuses is that
 * new model.
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

/* TinyAIMmapConfig.prefetchThreads: chosen by the cache (the default). */
#define TINYAI_PREFETCH_THREADS_AUTO (-1)

typedef struct TinyAIMmapConfig {
    uint32_t structSize;       /* sizeof(TinyAIMmapConfig); set by tinyaiCreateDefaultMmapConfig() */
    size_t maxCacheSize;       /* bytes of weights kept resident; default 256 MB; 0 = no cap */
    size_t minLayerCacheSize;  /* bytes; layers smaller than this are never evicted; default 4 KB */
    int prefetchThreads;       /* background prefetch workers, 1..64; 0 = prefetch inline;
                                  TINYAI_PREFETCH_THREADS_AUTO (-1, the default): one while the
                                  weights fit the cap, and while the cache streams them, enough
                                  for 4 MB of reads in flight (4 with 1 MB row slices) */
    bool prefetchEnabled;      /* honour tinyaiPrefetchLayerWeights(); default true */
    bool adaptiveCaching;      /* learn the access cycle to choose what stays; default true */
    bool verifyChecksums;      /* check every tensor's CRC-32C the first time any of it is
                                  loaded; default true */
    size_t rowSliceSize;       /* bytes of rows the cache moves as one piece when a runner
                                  streams tensors; default 1 MB (kept for compressed tensors:
                                  their frames are the blocks). Smaller blocks lower the
                                  least memory a model runs in; larger ones cost fewer loads */
    int directReads;           /* reads from storage straight into the cache's memory, past the
                                  OS's page cache (O_DIRECT, where the file system allows; else
                                  buffered): 0 (default) while the cache streams (a cap below the
                                  model's weights: the page cache would only copy them twice and
                                  hold memory the limit charges), 1 always, -1 never */
} TinyAIMmapConfig;

typedef struct TinyAILayerDescriptor {
    uint32_t structSize;       /* sizeof(TinyAILayerDescriptor) of the library that filled it */
    int32_t index;             /* 0 .. tinyaiGetMappedLayerCount()-1 */
    TinyAILayerKind kind;
    int32_t blockIndex;        /* transformer block number; -1 when kind is not a block */
    int32_t firstTensor;       /* index of the layer's first tensor (tinyaiGetMappedTensorInfo) */
    int32_t tensorCount;       /* tensors firstTensor .. firstTensor+tensorCount-1 */
    uint64_t fileOffset;       /* bytes from the start of the file; page-aligned (a GGUF read in
                                  place: where its first tensor lies) */
    uint64_t storedSize;       /* bytes the layer occupies in the file (a GGUF read in place:
                                  from its first tensor to the end of its last) */
    uint64_t decodedSize;      /* bytes of the layer's weights once loaded */
    const char* name;          /* "embedding", "block.3", "output"; owned by the model */
} TinyAILayerDescriptor;

typedef struct TinyAITensorInfo {
    uint32_t structSize;       /* set to sizeof(TinyAITensorInfo) before the call */
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
    uint32_t checksum;         /* CRC-32C of the stored bytes (0: a GGUF read in place has none) */
} TinyAITensorInfo;

/* What the weight cache did (since open or the last reset). */
typedef struct TinyAICacheStats {
    uint32_t structSize;       /* set to sizeof(TinyAICacheStats) before the call */
    uint64_t hits;             /* uses that found their weights loaded (or being loaded) */
    uint64_t misses;           /* uses that had to load them */
    uint64_t bytesRead;        /* bytes read from the file or image, checksum passes included */
    uint64_t bytesLoaded;      /* bytes made resident (decoded) */
    uint64_t evictions;
    uint64_t prefetchRequests; /* prefetches queued */
    uint64_t prefetchLoads;    /* loads a prefetch did */
    uint64_t prefetchDropped;  /* prefetches skipped: no room without evicting something worth more */
    uint64_t prefetchHits;     /* uses served by a prefetch's load */
    uint64_t stalls;           /* uses that waited for a load in flight */
    uint64_t heldBytes;        /* memory held for weights now (= tinyaiGetMappedModelMemoryUsage) */
    uint64_t peakHeldBytes;    /* the most held */
    uint64_t residentBytes;    /* of heldBytes, memory of loaded weights (the rest is free slots) */
    uint64_t capacity;         /* the cap; 0 = none */
    uint64_t bytesReadDirect;  /* of bytesRead, read past the OS's page cache
                                  (TinyAIMmapConfig.directReads) */
    uint64_t prefetchWorkers;  /* background prefetch workers taking loads now */
} TinyAICacheStats;

/* Defaults as documented on each field. Returned by value; nothing to free. */
TINYAI_API TinyAIMmapConfig tinyaiCreateDefaultMmapConfig(void);

/* Opens and validates a .tmai file (header, metadata, tensor directory and
 * bounds; checksums are checked when layers load). config may be NULL for the
 * defaults. Returns NULL on failure: tinyaiGetLastError() gives the status
 * (TINYAI_ERR_FILE_NOT_FOUND, _BAD_MAGIC, _UNSUPPORTED_VERSION, _TRUNCATED,
 * _OUT_OF_BOUNDS, _OVERFLOW, _BAD_FORMAT, ...) and the message the cause.
 * A GGUF file (llama or qwen2; recognised by its magic) is read in place:
 * the index a conversion would write is built in memory from its header and
 * its tensors are read from the file as they are, with the same cache, cap
 * and streaming (docs/format.md, "GGUF read in place"; it has no checksums).
 * So are the images and callbacks below. */
TINYAI_API TinyAIMappedModel* tinyaiOpenMappedModel(const char* path, const TinyAIMmapConfig* config);

/* As tinyaiOpenMappedModel() over an image already in memory (flash, a test
 * buffer). The caller keeps data alive and unchanged until the model is
 * closed; data must be 64-byte aligned. */
TINYAI_API TinyAIMappedModel* tinyaiOpenMappedModelFromMemory(const void* data, size_t size,
                                                              const TinyAIMmapConfig* config);

/* Reads size bytes at offset of the model into dst (the caller's storage:
 * external flash, an SD card, a network); returns 0 on success, anything
 * else on failure (reported as TINYAI_ERR_IO with the value). */
typedef int (*TinyAIReadCallback)(void* user, uint64_t offset, void* dst, size_t size);

/* As tinyaiOpenMappedModel() over a model of size bytes that read fetches:
 * the index once, then weights into the weight cache as they are needed
 * (cap it with maxCacheSize or an LLM's memoryLimit). user goes to read. */
TINYAI_API TinyAIMappedModel* tinyaiOpenMappedModelFromReader(TinyAIReadCallback read, void* user, uint64_t size,
                                                              const TinyAIMmapConfig* config);

/* Stops the prefetch workers and frees everything. NULL is ok. Weight
 * pointers die with it. Closing a model twice (or a pointer that is not an
 * open model) records TINYAI_ERR_MISUSE and frees nothing. LLMs and
 * schedulers still on the model become unusable (their calls fail with
 * TINYAI_ERR_MISUSE; destroy them as usual); closing it from a runner's own
 * text callback records TINYAI_ERR_MISUSE and leaves it open. */
TINYAI_API void tinyaiCloseMappedModel(TinyAIMappedModel* model);

/* Number of layers, or -1 (and the last error set) if model is NULL or not
 * open. */
TINYAI_API int tinyaiGetMappedLayerCount(const TinyAIMappedModel* model);

/* The layer's descriptor, or NULL (last error set) for a bad model or index. */
TINYAI_API const TinyAILayerDescriptor* tinyaiGetLayerDescriptor(const TinyAIMappedModel* model,
                                                                 int layerIndex);

/* Makes the layer's weights resident, verifies its checksums on first load,
 * pins it, and returns the address of its data (tensor t lives at
 * weights + info.offsetInLayer). Each successful call must be balanced by one
 * tinyaiReleaseLayerWeights(). Returns NULL (last error set) on failure,
 * e.g. TINYAI_ERR_CHECKSUM for corrupt data. */
TINYAI_API void* tinyaiGetLayerWeights(TinyAIMappedModel* model, int layerIndex);

/* Asks for the layer to be paged in ahead of use. Never blocks on I/O when
 * prefetch threads run; a no-op when prefetch is disabled. */
TINYAI_API TinyAIStatus tinyaiPrefetchLayerWeights(TinyAIMappedModel* model, int layerIndex);

/* Unpins a layer got with tinyaiGetLayerWeights(). Releasing a layer that is
 * not pinned is TINYAI_ERR_MISUSE. */
TINYAI_API TinyAIStatus tinyaiReleaseLayerWeights(TinyAIMappedModel* model, int layerIndex);

/* Bytes of memory the weight cache holds right now: loaded layers and row
 * slices in whole pages, and slots kept for reuse; never above
 * maxCacheSize. Weights of an uncompressed image in memory are used in place
 * and count nothing. 0 for NULL or a model that is not open (last error set). */
TINYAI_API size_t tinyaiGetMappedModelMemoryUsage(const TinyAIMappedModel* model);

/* Fills out (set out->structSize first). */
TINYAI_API TinyAIStatus tinyaiGetMappedModelCacheStats(const TinyAIMappedModel* model, TinyAICacheStats* out);
/* Zeroes the counters (peakHeldBytes restarts at heldBytes). */
TINYAI_API TinyAIStatus tinyaiResetMappedModelCacheStats(TinyAIMappedModel* model);

/* Priority of a layer in the cache: higher values stay longer. Default 1.0;
 * must be finite and >= 0. */
TINYAI_API TinyAIStatus tinyaiSetLayerPriority(TinyAIMappedModel* model, int layerIndex, float priority);

/* ---- Tensors and metadata (TinyAI extensions to the guide's API) ---- */

/* Number of tensors, or -1 (last error set) if model is NULL or not open. */
TINYAI_API int tinyaiGetMappedTensorCount(const TinyAIMappedModel* model);

TINYAI_API TinyAIStatus tinyaiGetMappedTensorInfo(const TinyAIMappedModel* model, int tensorIndex,
                                                  TinyAITensorInfo* out);

/* Index of the tensor called name, or TINYAI_ERR_NOT_FOUND. */
TINYAI_API TinyAIStatus tinyaiFindMappedTensor(const TinyAIMappedModel* model, const char* name,
                                               int* tensorIndex);

/* Metadata values by key (see docs/format.md for the keys a model carries,
 * e.g. "general.architecture", "llama.dim"). TINYAI_ERR_NOT_FOUND if the key
 * is missing, TINYAI_ERR_BAD_FORMAT if it holds another type. Strings are
 * owned by the model and not NUL-terminated: *len gives their length. */
TINYAI_API TinyAIStatus tinyaiGetMetadataInt(const TinyAIMappedModel* model, const char* key, int64_t* out);
TINYAI_API TinyAIStatus tinyaiGetMetadataFloat(const TinyAIMappedModel* model, const char* key, float* out);
TINYAI_API TinyAIStatus tinyaiGetMetadataString(const TinyAIMappedModel* model, const char* key,
                                                const char** str, size_t* len);

/* Size in bytes of the mapped file. 0 (last error set) for NULL or a model
 * that is not open. */
TINYAI_API uint64_t tinyaiGetMappedModelFileSize(const TinyAIMappedModel* model);

#ifdef __cplusplus
}
#endif

#endif /* TINYAI_UTILS_MMAP_LOADER_H */
