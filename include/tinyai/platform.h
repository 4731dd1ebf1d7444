/*
 * tinyai/platform.h - what a port without an OS needs from its caller
 * (TINYAI_PORT=baremetal, ports/baremetal/): a static arena that every byte
 * TinyAI allocates comes from, and a clock.
 *
 *     static uint8_t arena[ARENA_BYTES] __attribute__((aligned(64)));
 *     tinyaiSetStaticArena(arena, sizeof arena);          // before any other call
 *     TinyAIMappedModel* m = tinyaiOpenMappedModelFromMemory(flash_image, image_size, NULL);
 *     TinyAILLM* llm = NULL;
 *     tinyaiCreateLLM(m, NULL, &llm);    // weights used in place; all else from the arena
 *     tinyaiLLMGenerate(llm, "Once upon a time", &gp, text, sizeof text, &len, NULL);
 *
 * tinyaiEstimateStaticArena() gives ARENA_BYTES for a model and config, to
 * the byte: it creates them in the arena it runs in (a large one, e.g. on the
 * host in a build of this port) and measures. On the posix port TinyAI
 * allocates from the heap and these calls return TINYAI_ERR_UNSUPPORTED.
 */
#ifndef TINYAI_PLATFORM_H
#define TINYAI_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

#include "llm.h"
#include "status.h"
#include "utils/mmap_loader.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TinyAIArenaStats {
    uint32_t structSize;   /* set to sizeof(TinyAIArenaStats) before the call */
    size_t size;           /* the arena's bytes */
    size_t usedBytes;      /* bytes of live allocations, 16-byte headers included */
    size_t peakBytes;      /* high-water mark: the furthest offset from the start ever used */
    uint64_t allocations;  /* allocations served since the arena was set */
    uint64_t failures;     /* allocations refused for lack of room */
} TinyAIArenaStats;

/* Every allocation TinyAI makes from now on comes from [arena, arena+size)
 * (at least 64 bytes, 16-byte aligned). Call before anything is allocated, or
 * again when everything has been freed (models closed, LLMs destroyed);
 * otherwise TINYAI_ERR_MISUSE. (NULL, 0) detaches the arena, leaving none.
 * TINYAI_ERR_UNSUPPORTED on ports with a heap.
 * When the arena has no room, the call that needed it fails with
 * TINYAI_ERR_OUT_OF_MEMORY naming what it needed and the arena's room. */
TINYAI_API TinyAIStatus tinyaiSetStaticArena(void* arena, size_t size);

/* Fills out (set out->structSize first). TINYAI_ERR_UNSUPPORTED on ports with
 * a heap; TINYAI_ERR_MISUSE before tinyaiSetStaticArena(). */
TINYAI_API TinyAIStatus tinyaiGetStaticArenaStats(TinyAIArenaStats* out);

/* The arena bytes (from the arena's start) a model and an LLM over it need:
 * opens the model from image (size bytes, 64-byte aligned) or, when image is
 * NULL, through read (tinyaiOpenMappedModelFromReader), creates the LLM with
 * llmConfig (may be NULL), measures the arena's high-water mark, and frees
 * both. Generation allocates nothing, so an arena of *bytes runs them and one
 * of *bytes - 1 fails in tinyaiOpenMappedModel* or tinyaiCreateLLM with
 * TINYAI_ERR_OUT_OF_MEMORY. Run it in an arena larger than the answer; the
 * answer holds for this build (a 64-bit host build needs more than a 32-bit
 * device for its pointers). Errors: those of the open and the create. */
TINYAI_API TinyAIStatus tinyaiEstimateStaticArena(const void* image, size_t size, TinyAIReadCallback read, void* user,
                                                  const TinyAIMmapConfig* mmapConfig, const TinyAILLMConfig* llmConfig,
                                                  size_t* bytes);

/* The clock of generation statistics and timing: nanoseconds from any fixed
 * start, never decreasing. Without one, the bare-metal port reports 0 s.
 * NULL removes it. TINYAI_ERR_UNSUPPORTED on ports with an OS clock. */
TINYAI_API TinyAIStatus tinyaiSetClock(uint64_t (*nowNanos)(void));

#ifdef __cplusplus
}
#endif

#endif /* TINYAI_PLATFORM_H */
