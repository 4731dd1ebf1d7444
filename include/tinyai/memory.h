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

#ifdef __cplusplus
}
#endif

#endif /* TINYAI_MEMORY_H */
