/*
 * tinyai/status.h - status codes and the per-thread last error.
 *
 * Every TinyAI function either returns a TinyAIStatus or, where the guide's
 * contract returns a pointer or a count, records one: after a NULL handle or
 * a negative count, tinyaiGetLastError() says what failed and
 * tinyaiGetLastErrorMessage() says why (errno / dlerror style).
 *
 * Values are pinned forever: 0 is success, errors are negative, and new codes
 * are only ever appended. Positive values are outcomes that are not errors
 * but not a plain success either (TINYAI_STOPPED): test `status < 0` for
 * failure, `status != TINYAI_OK` for anything but a plain success.
 */
#ifndef TINYAI_STATUS_H
#define TINYAI_STATUS_H

#include <stdint.h>

#include "api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The public enums have int as their fixed underlying type in C++, as they
 * have in C: any int a C caller stores in one (a mode of 7 in a config) is a
 * value C++ may load, and TinyAI checks it and answers with
 * TINYAI_ERR_INVALID_ARGUMENT, instead of the undefined behaviour of an
 * enum read outside its enumerators' range. */
#ifndef TINYAI_ENUM_BASE
#ifdef __cplusplus
#define TINYAI_ENUM_BASE : int
#else
#define TINYAI_ENUM_BASE
#endif
#endif

typedef enum TinyAIStatus TINYAI_ENUM_BASE {
    TINYAI_OK = 0,
    TINYAI_ERR_INVALID_ARGUMENT = -1,    /* NULL or out-of-range argument */
    TINYAI_ERR_OUT_OF_MEMORY = -2,       /* the allocator returned NULL */
    TINYAI_ERR_RESOURCE_EXHAUSTED = -3,  /* a memory budget (limit, cache cap, arena) is too small */
    TINYAI_ERR_FILE_NOT_FOUND = -4,      /* no file at the given path */
    TINYAI_ERR_IO = -5,                  /* open/read/map failed */
    TINYAI_ERR_BAD_MAGIC = -6,           /* not a .tmai file */
    TINYAI_ERR_UNSUPPORTED_VERSION = -7, /* .tmai version newer than this library */
    TINYAI_ERR_TRUNCATED = -8,           /* file shorter than its contents claim (empty included) */
    TINYAI_ERR_OUT_OF_BOUNDS = -9,       /* an offset or size points outside its section */
    TINYAI_ERR_OVERFLOW = -10,           /* a size or element count overflows */
    TINYAI_ERR_CHECKSUM = -11,           /* stored data does not match its checksum */
    TINYAI_ERR_BAD_FORMAT = -12,         /* any other malformed structure */
    TINYAI_ERR_BAD_TOKENIZER = -13,      /* impossible tokenizer data */
    TINYAI_ERR_CONTEXT_OVERFLOW = -14,   /* more tokens than the context holds */
    TINYAI_ERR_UNSUPPORTED = -15,        /* valid but not supported (dtype, codec, arch) */
    TINYAI_ERR_MISUSE = -16,             /* API called in the wrong state, or given a handle that
                                            is not live (closed, destroyed, never created) */
    TINYAI_ERR_NOT_FOUND = -17,          /* a named tensor or key does not exist */
    TINYAI_ERR_INTERNAL = -18,           /* a bug in TinyAI: please report it */
    TINYAI_ERR_GRAPH_CYCLE = -19,        /* a schedule's dependencies form a cycle (a layer on itself included) */
    TINYAI_ERR_MISSING_DEPENDENCY = -20, /* a scheduled layer depends on a layer never added to the schedule */
    TINYAI_ERR_NOT_FINITE = -21,         /* a computation produced NaN or infinity (bad weights or inputs) */
    TINYAI_ERR_BUFFER_TOO_SMALL = -22,   /* the caller's buffer is too small; the call's size argument
                                            (count, len, needed, outLen) says how much it needs */
    TINYAI_ERR_MISMATCH = -23,           /* saved state belongs to another model or declaration
                                            (a session of another model, KV type or layout) */
    TINYAI_STOPPED = 1                   /* not an error: the caller's callback asked to stop; what was
                                            produced so far is complete and valid */
} TinyAIStatus;

/* Static name of a status, e.g. "TINYAI_ERR_BAD_MAGIC". Never NULL. */
TINYAI_API const char* tinyaiStatusString(TinyAIStatus status);

/* Status recorded by the last failing TinyAI call on this thread
 * (TINYAI_OK if none failed since tinyaiClearLastError()). */
TINYAI_API TinyAIStatus tinyaiGetLastError(void);

/* Human-readable cause of the last failure on this thread, naming the file,
 * tensor, argument or byte counts involved. Owned by TinyAI, valid until the
 * next failing call on this thread. Never NULL ("" when there is none). */
TINYAI_API const char* tinyaiGetLastErrorMessage(void);

TINYAI_API void tinyaiClearLastError(void);

/* What a program needs to act on the last failure without parsing its
 * message: which resource ran out, by how much, where, and what would make
 * it fit. Filled where a plan is refused (tinyaiCreateLLM,
 * tinyaiPreflightLLM, tinyaiCreateForwardScheduler's plan: a memory limit
 * or the weight cache's cap too small for the mode asked for, or for any)
 * and by tinyaiDetectMemoryLimit; a KV type as a remedy is one the LLM's
 * plan was tried with and fits. Other failures - a runner's claim on a cache
 * other runners share, OptimalBatch, the cache refusing a load - leave
 * resource NONE with status and message set. */
typedef enum TinyAIResource TINYAI_ENUM_BASE {
    TINYAI_RESOURCE_NONE = 0,
    TINYAI_RESOURCE_MEMORY_LIMIT = 1, /* a runner's memoryLimit (LLM, scheduler) */
    TINYAI_RESOURCE_WEIGHT_CACHE = 2, /* the weight cache's cap: maxCacheSize or what other runners allow */
    TINYAI_RESOURCE_SYSTEM = 3        /* the room the system leaves the process (tinyaiDetectMemoryLimit) */
} TinyAIResource;

/* Where it ran out: the stages of a run. */
typedef enum TinyAIStage TINYAI_ENUM_BASE {
    TINYAI_STAGE_NONE = 0,
    TINYAI_STAGE_OPEN = 1,     /* opening a model, reading its index */
    TINYAI_STAGE_PLAN = 2,     /* creating a runner: the mode, the arena, the KV cache, the cache's cap */
    TINYAI_STAGE_GENERATE = 3, /* a prompt or decode */
    TINYAI_STAGE_ENVIRONMENT = 4 /* reading what the system allows */
} TinyAIStage;

/* What would make it fit; remedyValue says how. */
typedef enum TinyAIRemedy TINYAI_ENUM_BASE {
    TINYAI_REMEDY_NONE = 0,
    TINYAI_REMEDY_RAISE_LIMIT = 1,  /* remedyValue: the least memoryLimit that runs as configured (in the mode asked for) */
    TINYAI_REMEDY_KV_TYPE = 2,      /* remedyValue: a TinyAIKVType that fits the limit as it is */
    TINYAI_REMEDY_MODE = 3,         /* remedyValue: a TinyAIExecutionMode that fits the limit as it is */
    TINYAI_REMEDY_RAISE_CACHE = 4,  /* remedyValue: the least weight cache cap that runs */
    TINYAI_REMEDY_FREE_MEMORY = 5   /* remedyValue: the bytes the system must give the process beyond what it has */
} TinyAIRemedy;

typedef struct TinyAIErrorInfo {
    uint32_t structSize;       /* set to sizeof(TinyAIErrorInfo) before the call */
    TinyAIStatus status;       /* tinyaiGetLastError() */
    TinyAIResource resource;   /* what ran out; NONE for other failures */
    TinyAIStage stage;
    uint64_t bytesNeeded;      /* what the configuration needs of it */
    uint64_t bytesLimit;       /* what it has */
    int32_t layer;             /* the transformer block involved, -1 for none */
    char tensor[96];           /* the tensor involved (a row slice's), "" for none */
    TinyAIRemedy remedy;
    uint64_t remedyValue;
    TinyAIRemedy remedy2;      /* a second way, or NONE (a smaller KV type, and a higher limit) */
    uint64_t remedy2Value;
    char message[512];         /* tinyaiGetLastErrorMessage() */
} TinyAIErrorInfo;

/* Fills out (set out->structSize first) with this thread's last failure;
 * status TINYAI_OK and resource NONE when there is none. Errors:
 * TINYAI_ERR_INVALID_ARGUMENT (out NULL, or structSize below the first
 * fields or above sizeof(TinyAIErrorInfo) of this library; not recorded, so
 * the last failure stays to be read). */
TINYAI_API TinyAIStatus tinyaiGetLastErrorInfo(TinyAIErrorInfo* out);

#ifdef __cplusplus
}
#endif

#endif /* TINYAI_STATUS_H */
