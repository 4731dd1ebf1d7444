/*
 * tinyai/memory.h - the memory this process may take, read from the system:
 * the C equivalent of the tools' `--mem-limit auto`.
 *
 *     TinyAIMemoryEnvironment env;
 *     env.structSize = sizeof env;
 *     if (tinyaiDetectMemoryLimit(&env) == TINYAI_OK) cfg.memoryLimit = env.limitBytes;
 *
 * The bound is the tightest of the memory cgroups (v1 or v2) the process is
 * in - its own and each ancestor up to the hierarchy's root: the limit less
 * what the cgroup uses now, plus the page cache it could give back - and of
 * the system's available memory (/proc/meminfo MemAvailable). limitBytes
 * leaves overheadBytes of that room to the process beyond what TinyAI
 * accounts for (code, libraries, thread stacks, the C library's heap: the
 * README's 16 MB). Under a cgroup the page cache of the files TinyAI reads
 * counts too; the kernel takes it back before it kills, so it is room.
 */
#ifndef TINYAI_MEMORY_H
#define TINYAI_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum TinyAIMemorySource TINYAI_ENUM_BASE {
    TINYAI_MEMORY_SOURCE_NONE = 0,      /* nothing found: the call failed */
    TINYAI_MEMORY_SOURCE_CGROUP_V1 = 1, /* a cgroup v1 memory controller's limit */
    TINYAI_MEMORY_SOURCE_CGROUP_V2 = 2, /* a cgroup v2 memory.max (or memory.high, when lower) */
    TINYAI_MEMORY_SOURCE_SYSTEM = 3     /* /proc/meminfo MemAvailable: no cgroup limit is tighter */
} TinyAIMemorySource;

/* The README's process overhead: what a process running TinyAI holds beyond
 * TinyAI's accounting, at most. */
#define TINYAI_PROCESS_OVERHEAD_BYTES ((size_t)16 << 20)

typedef struct TinyAIMemoryEnvironment {
    uint32_t structSize;           /* set to sizeof(TinyAIMemoryEnvironment) before the call */
    TinyAIMemorySource source;     /* which bound gave roomBytes */
    size_t limitBytes;             /* roomBytes - overheadBytes: a TinyAILLMConfig.memoryLimit */
    size_t roomBytes;              /* what this process may still take */
    size_t overheadBytes;          /* TINYAI_PROCESS_OVERHEAD_BYTES */
    uint64_t cgroupLimitBytes;     /* the limit of the cgroup that bounds most; 0: no cgroup limit */
    uint64_t cgroupUsageBytes;     /* that cgroup's usage now, page cache included */
    uint64_t cgroupReclaimableBytes; /* of which inactive page cache, which the kernel takes back first */
    uint64_t systemAvailableBytes; /* MemAvailable; 0 when /proc/meminfo has none */
    char cgroupPath[256];          /* the directory of that cgroup; "" when none bounds */
} TinyAIMemoryEnvironment;

/* Fills out (set out->structSize first) with the room this process has and
 * the memoryLimit that leaves the process overhead free. Errors:
 * TINYAI_ERR_INVALID_ARGUMENT (out NULL or structSize too small),
 * TINYAI_ERR_UNSUPPORTED (no /proc/meminfo and no cgroup limit: a port
 * without an OS, or /proc not mounted - give the limit yourself),
 * TINYAI_ERR_RESOURCE_EXHAUSTED (the room is no more than the overhead:
 * out is filled, limitBytes 0, and the message says which bound and by how
 * much). */
TINYAI_API TinyAIStatus tinyaiDetectMemoryLimit(TinyAIMemoryEnvironment* out);

/* ---- Where the memory went: TinyAI's own account beside the OS's ----
 *
 * Every allocation TinyAI makes goes through one recording allocator under a
 * category; points of a run (stages) call an observer the caller installs
 * with a snapshot of that account and of the process's memory from the OS.
 *
 *     static void seen(const TinyAIMemorySnapshot* s, void* user) {
 *         printf("%s: TinyAI %llu bytes, RSS %llu\n", s->stageName,
 *                (unsigned long long)s->totalBytes, (unsigned long long)s->rssBytes);
 *     }
 *     tinyaiSetMemoryObserver(seen, NULL, 16);   // and every 16 tokens
 *
 * The two sides differ by what the report names: pages TinyAI reserved but
 * never wrote (a KV cache sized for the whole context holds pages only up to
 * the positions reached: kvReservedBytes - kvTouchedBytes), the model's file
 * pages the OS maps in (rssFileBytes: weights used in place), and the
 * process's own (code, the C library's heap, thread stacks: the README's
 * process overhead). */

typedef enum TinyAIMemoryCategory TINYAI_ENUM_BASE {
    TINYAI_MEMORY_RUNTIME = 0,     /* handles, the scheduler's tables, what is not below */
    TINYAI_MEMORY_MODEL = 1,       /* the model's index, metadata and slice tables */
    TINYAI_MEMORY_WEIGHTS = 2,     /* the weight cache's slots: weights read or decoded into memory */
    TINYAI_MEMORY_KV = 3,          /* KV caches and persistent stores (reserved) */
    TINYAI_MEMORY_ACTIVATIONS = 4, /* the activation arena (the operators' scratch lives in it too) */
    TINYAI_MEMORY_SCRATCH = 5,     /* temporaries outside it: the arena planner's tables while it plans */
    TINYAI_MEMORY_TEXT = 6,        /* tokenizer, sampler, prompt tokens */
    TINYAI_MEMORY_CATEGORY_COUNT = 7
} TinyAIMemoryCategory;

typedef enum TinyAIMemoryStage TINYAI_ENUM_BASE {
    TINYAI_MEMORY_STAGE_NOW = 0,         /* tinyaiGetMemorySnapshot */
    TINYAI_MEMORY_STAGE_OPEN = 1,        /* a model's file opened, its header read */
    TINYAI_MEMORY_STAGE_INDEX = 2,       /* its index read: the model is open */
    TINYAI_MEMORY_STAGE_PLAN = 3,        /* an LLM planned: arena, KV cache and tables allocated */
    TINYAI_MEMORY_STAGE_WARMUP = 4,      /* its weight cache filled (NORMAL mode preloads every weight) */
    TINYAI_MEMORY_STAGE_FIRST_TOKEN = 5, /* the first token of a generation sampled */
    TINYAI_MEMORY_STAGE_TOKENS = 6,      /* every everyTokens positions evaluated */
    TINYAI_MEMORY_STAGE_CLOSE = 7,       /* an LLM destroyed or a model closed */
    TINYAI_MEMORY_STAGE_COUNT = 8
} TinyAIMemoryStage;

typedef struct TinyAIMemorySnapshot {
    uint32_t structSize;           /* set to sizeof(TinyAIMemorySnapshot) before tinyaiGetMemorySnapshot */
    TinyAIMemoryStage stage;
    const char* stageName;         /* "now", "open", "index", "plan", "warmup", "first_token", "tokens", "close" */
    int64_t tokens;                /* positions the LLM has evaluated; -1 for a model's event */
    uint64_t bytes[TINYAI_MEMORY_CATEGORY_COUNT];     /* TinyAI holds now, by category */
    uint64_t peakBytes[TINYAI_MEMORY_CATEGORY_COUNT]; /* the most each has held */
    uint64_t totalBytes;           /* all categories now */
    uint64_t peakTotalBytes;       /* the most TinyAI has held at once */
    uint64_t stagePeakBytes;       /* the most since the previous stage */
    uint64_t headerBytes;          /* of totalBytes, the recording allocator's headers */
    uint64_t allocations;          /* live allocations */
    uint64_t kvReservedBytes;      /* = bytes[TINYAI_MEMORY_KV] */
    uint64_t kvTouchedBytes;       /* of those, the rows of positions written at least once */
    int32_t rssKnown;              /* 1: the fields below are the OS's (0 on a port without one) */
    uint64_t rssBytes;             /* resident set now */
    uint64_t rssAnonBytes;         /* of which anonymous (heap, stacks, the weight cache's slots) */
    uint64_t rssFileBytes;         /* of which file pages (code, the model's pages used in place) */
    uint64_t peakRssBytes;         /* the resident set's peak */
} TinyAIMemorySnapshot;

typedef void (*TinyAIMemoryObserver)(const TinyAIMemorySnapshot* snapshot, void* user);

/* Installs the process's memory observer (NULL removes it): called on the
 * thread that reaches each stage, and every everyTokens positions an LLM
 * evaluates (0: never). The observer must not call into TinyAI but
 * tinyaiGetMemorySnapshot, and must return (no longjmp, no C++ exception).
 * Install or remove it while no model is being opened or closed and no LLM
 * is created, runs or is destroyed: it is read without a lock. Resets the
 * peaks. Errors: TINYAI_ERR_INVALID_ARGUMENT for a negative everyTokens. */
TINYAI_API TinyAIStatus tinyaiSetMemoryObserver(TinyAIMemoryObserver observer, void* user, int32_t everyTokens);

/* The account now (stage NOW). Set out->structSize first. */
TINYAI_API TinyAIStatus tinyaiGetMemorySnapshot(TinyAIMemorySnapshot* out);

/* Static names of the categories: "runtime", "model", "weights", "kv",
 * "activations", "scratch", "text"; "?" otherwise. */
TINYAI_API const char* tinyaiMemoryCategoryName(TinyAIMemoryCategory category);
TINYAI_API const char* tinyaiMemoryStageName(TinyAIMemoryStage stage);

#ifdef __cplusplus
}
#endif

#endif /* TINYAI_MEMORY_H */
