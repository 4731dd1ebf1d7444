/*
 * tinyai/utils/forward_scheduler.h - layer-wise execution under a memory cap.
 *
 * A forward scheduler runs a mapped model's layers in dependency order
 * inside a memory limit: weights come through the model's weight cache
 * (all resident, or streamed and released after use), and every activation
 * and every operator's scratch buffer lives in one arena planned ahead of
 * time, where buffers whose lifetimes do not overlap share space.
 *
 *     TinyAIForwardScheduler* s = tinyaiCreateForwardScheduler(model, TINYAI_EXEC_ADAPTIVE, 64u << 20);
 *     tinyaiAddModelLayersToSchedule(s);         // or tinyaiAddLayerToSchedule() per layer
 *     if (tinyaiPrepareForwardPass(s) != TINYAI_OK) { ... tinyaiGetLastErrorMessage() ... }
 *     int layer;
 *     while (tinyaiExecuteNextLayer(s, input, output, &layer)) { ... }
 *     if (tinyaiGetSchedulerStatus(s) != TINYAI_OK) { ... the pass failed ... }
 *     tinyaiDestroyForwardScheduler(s);
 *
 * The graph. A layer's input is the sum of its dependencies' outputs (the
 * scheduler's input for a layer added with TINYAI_DEP_NONE): a residual
 * connection is a layer that depends on two producers. Adding a layer again
 * adds a dependency. Each added layer's outputSize is the bytes one row of
 * its output takes (one token of a language model, one sample of a batch);
 * buffers hold as many rows as a pass has.
 *
 * What execution means depends on the model:
 *  - a language model ("llama"): the schedule is its chain of layers
 *    (embedding, blocks, output; tinyaiAddModelLayersToSchedule adds it).
 *    input is the prompt (const char*, NUL-terminated); each call runs one
 *    layer of one pass, and after the output layer of the last pass of a
 *    token the next token is sampled, so calls go on until the text is done;
 *    the text (prompt included) is written to output as it grows,
 *    NUL-terminated, at most TinyAISchedulerConfig.outputCapacity bytes
 *    (default 1024, the guide's buffer): generation also ends before a
 *    piece of text that would not fit whole. Generation settings (steps,
 *    sampler, a callback per piece): tinyaiSetSchedulerGenerateParams() in
 *    <tinyai/llm.h>.
 *  - a dense network ("dense"): input is batchSize rows of
 *    dense.input_dim floats; output receives batchSize rows of the network's
 *    output (the outputs of layers no other layer reads, in layer order).
 *    A row of output that is NaN or infinite ends the run with
 *    TINYAI_ERR_NOT_FINITE naming it (the rows are written).
 *  - no model (NULL): the schedule plans memory only; execution fails with
 *    TINYAI_ERR_UNSUPPORTED.
 * tinyaiExecuteNextLayer() returns false when the work is done or failed;
 * tinyaiGetSchedulerStatus() tells which. The next call starts over with the
 * input then given.
 *
 * Modes, under memoryLimit (bytes for weights, arena, KV cache and tables; 0 =
 * no limit):
 *  - NORMAL keeps every weight resident (loaded at prepare).
 *  - MEMORY_OPT streams weights through the model's cache in row slices,
 *    pinning the running layer's and prefetching ahead; the cache gets what
 *    the rest leaves (and no more than the model's maxCacheSize).
 *  - STREAMING is MEMORY_OPT with each input split into fewer rows per pass
 *    (sequence chunks of a prompt, sub-batches of a batch) so the arena fits.
 *  - ADAPTIVE picks the first of NORMAL, MEMORY_OPT, STREAMING that fits and
 *    says why (tinyaiGetSchedulerReport()).
 * A limit nothing fits in fails tinyaiPrepareForwardPass() with
 * TINYAI_ERR_RESOURCE_EXHAUSTED naming what is needed.
 *
 * Ownership: the scheduler borrows the model. Closing the model first
 * leaves the scheduler unusable (every call fails with TINYAI_ERR_MISUSE)
 * but safe to destroy: it never reads the closed model. A scheduler is used
 * by one thread at a time, and a text callback must not call back into the
 * scheduler that called it (TINYAI_ERR_MISUSE), though it may read its
 * status and memory figures.
 *
 * Handles that are not live: every call given a scheduler pointer that is
 * not a live scheduler (destroyed already, an LLM's whose LLM was
 * destroyed, or never created) reads nothing through it and fails with
 * TINYAI_ERR_MISUSE (or returns false, 0 or -1 with TINYAI_ERR_MISUSE as the
 * last error, writing nothing to the caller's output), the message naming
 * the call. The call finds the pointer among the live schedulers; it does
 * not hold the scheduler, so a call racing with its destruction on another
 * thread is the caller's race (as in SQLite).
 *
 * Sharing a model: schedulers and LLMs on one model share its weight cache,
 * so the weights are held once. The cache's cap is the least that the
 * model's maxCacheSize and every runner's memory limit allow, so each
 * runner's limit holds whatever the others do; a runner whose limit would
 * take the cache below what another one needs (all of its weights, in
 * NORMAL mode) fails to prepare with TINYAI_ERR_RESOURCE_EXHAUSTED. When a
 * runner is destroyed the cap rises to what the others allow.
 */
#ifndef TINYAI_UTILS_FORWARD_SCHEDULER_H
#define TINYAI_UTILS_FORWARD_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../status.h"
#include "mmap_loader.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TinyAIForwardScheduler TinyAIForwardScheduler;

typedef enum TinyAIExecutionMode TINYAI_ENUM_BASE {
    TINYAI_EXEC_NORMAL = 0,      /* all weights resident */
    TINYAI_EXEC_MEMORY_OPT = 1,  /* weights streamed, released after use */
    TINYAI_EXEC_STREAMING = 2,   /* MEMORY_OPT plus inputs split into fewer rows per pass */
    TINYAI_EXEC_ADAPTIVE = 3     /* the first of the above that fits */
} TinyAIExecutionMode;

typedef enum TinyAIDependencyType TINYAI_ENUM_BASE {
    TINYAI_DEP_NONE = 0,        /* no producer (dependsOn -1): the layer reads the scheduler's input */
    TINYAI_DEP_SEQUENTIAL = 1,  /* reads the producer's output; may overwrite it in place at its last use */
    TINYAI_DEP_RESIDUAL = 2,    /* a skip connection: the producer's output stays alive until this layer */
    TINYAI_DEP_ATTENTION = 3    /* read throughout the layer's attention: never overwritten by it in place */
} TinyAIDependencyType;

/* The largest pass a plan serves: passes of at most `rows` rows and
 * `context` positions run in it without reallocating. */
typedef struct TinyAIMaxShape {
    int32_t rows;     /* tokens of a prompt chunk, or samples of a batch; >= 1 */
    int32_t context;  /* positions attended to; language models only (0 = the context length) */
} TinyAIMaxShape;

#define TINYAI_MAX_SHAPES 8

typedef struct TinyAISchedulerConfig {
    uint32_t structSize;     /* sizeof(TinyAISchedulerConfig); set by tinyaiCreateDefaultSchedulerConfig() */
    int32_t threads;         /* compute threads including the caller; 0 = one per core; default 1 */
    int32_t batchSize;       /* rows of input per tinyaiExecuteNextLayer() run (dense networks); default 1 */
    int32_t contextLength;   /* language models: positions the KV cache holds; 0 = the model's seq_len */
    int32_t maxShapeCount;   /* 0 = one default shape: (batchSize rows, or 16 tokens; the context) */
    TinyAIMaxShape maxShapes[TINYAI_MAX_SHAPES]; /* candidates, e.g. the first and the last decoding
                                                    step; the arena is the largest of their plans */
    bool debugExecution;     /* no in-place reuse (every tensor its own buffer); results are identical */
    size_t outputCapacity;   /* language models: bytes tinyaiExecuteNextLayer() may write at output,
                                NUL included (>= 1); generation ends when the next piece would not
                                fit; default 1024 (tinyaiSetSchedulerOutputCapacity() changes it) */
    int32_t kvType;          /* language models: how the KV cache stores keys and values, a
                                TinyAIKVType of <tinyai/llm.h>; default 0 (TINYAI_KV_F32);
                                TINYAI_KV_AUTO: chosen inside the memory limit with the mode */
    int32_t kvWindow;        /* language models: 0 (default) or a rolling window of this many
                                positions (TinyAILLMConfig.kvWindow) */
    int32_t kvSinks;         /* language models: with kvWindow, the first positions kept */
    int32_t kvGrowable;      /* language models: 1 = the KV cache takes memory as positions are
                                reached (TinyAILLMConfig.kvGrowable); default 0 */
} TinyAISchedulerConfig;

/* What a prepared schedule plans and uses. */
typedef struct TinyAISchedulerReport {
    uint32_t structSize;              /* set to sizeof(TinyAISchedulerReport) before the call */
    TinyAIExecutionMode requestedMode;
    TinyAIExecutionMode mode;         /* the mode in use (ADAPTIVE's choice) */
    const char* reason;               /* why this mode; owned by the scheduler */
    uint64_t memoryLimit;             /* 0 = none */
    uint64_t minimumMemoryLimit;      /* the least memoryLimit this schedule runs under (STREAMING, 1 row) */
    uint64_t arenaBytes;              /* the planned arena: activations and scratch */
    uint64_t lowerBoundBytes;         /* most bytes simultaneously live at one step (no plan can do better) */
    uint64_t naiveBytes;              /* every activation and scratch buffer in its own place */
    uint64_t weightBytes;             /* decoded weights of the scheduled layers */
    uint64_t weightResidentBytes;     /* what NORMAL holds in the weight cache for them (whole slots;
                                         0 for an uncompressed image in memory, used in place) */
    uint64_t weightCacheCap;          /* the weight cache's cap in this mode; 0 = none */
    uint64_t kvCacheBytes;            /* persistent state: the KV cache */
    uint64_t tableBytes;              /* tokenizer, slice and graph tables, loader index */
    uint64_t largestSliceBytes;       /* the largest row slice the cache must hold at once */
    int32_t rowsPerPass;              /* rows a pass takes at most (STREAMING's split) */
    int32_t layerCount;               /* layers in the schedule */
    int32_t opCount;                  /* operators in the activation graph */
    int32_t bufferCount;              /* planned buffers (activations and scratch) */
    int32_t inPlaceCount;             /* operators that overwrite an input in place */
    int32_t shapeCount;               /* max shapes planned */
    int32_t atLowerBound;             /* 1 when every shape's arena equals its lower bound */
    const char* planNote;             /* why not, when atLowerBound is 0; owned by the scheduler */
    uint64_t memoryUsage;             /* tinyaiGetSchedulerMemoryUsage() */
    uint64_t peakMemoryUsage;         /* tinyaiGetSchedulerPeakMemoryUsage() */
} TinyAISchedulerReport;

/* ---- The guide's API ---- */

/* Creates a scheduler for model (NULL: planning only) in mode under memoryLimit
 * bytes (0 = no limit). Returns NULL (last error set) for a bad mode or an
 * architecture the scheduler cannot run. */
TINYAI_API TinyAIForwardScheduler* tinyaiCreateForwardScheduler(TinyAIMappedModel* model, TinyAIExecutionMode mode,
                                                                size_t memoryLimit);

/* Adds layer layerIndex (a layer of the model, or any index >= 0 without a
 * model) depending on dependsOn with depType; outputSize is bytes per row
 * (> 0). Adding a layer again adds another dependency (its outputSize must
 * not change). Errors: TINYAI_ERR_INVALID_ARGUMENT (bad index, type,
 * outputSize 0, a model layer whose output is not outputSize bytes per row,
 * NONE with a producer or a producer without a type), TINYAI_ERR_GRAPH_CYCLE
 * (a layer on itself), TINYAI_ERR_OVERFLOW (outputSize too large to plan),
 * TINYAI_ERR_MISUSE (after prepare). */
TINYAI_API TinyAIStatus tinyaiAddLayerToSchedule(TinyAIForwardScheduler* scheduler, int layerIndex, int dependsOn,
                                                 TinyAIDependencyType depType, size_t outputSize);

/* Validates and orders the graph (TINYAI_ERR_GRAPH_CYCLE naming the cycle,
 * TINYAI_ERR_MISSING_DEPENDENCY naming the layer and the missing producer,
 * TINYAI_ERR_UNSUPPORTED for a language model's layers out of their chain),
 * derives every activation's lifetime, plans the arena for each max shape,
 * picks the mode under the limit (TINYAI_ERR_RESOURCE_EXHAUSTED when nothing
 * fits), allocates, and in NORMAL mode loads every weight. Calling it again
 * on a prepared scheduler restarts execution. */
TINYAI_API TinyAIStatus tinyaiPrepareForwardPass(TinyAIForwardScheduler* scheduler);

/* Runs the next layer (see above); *layerIndex (may be NULL) receives it
 * (-1 when none ran). Returns false when there is nothing left to run or it
 * failed; tinyaiGetSchedulerStatus() tells which.
 * A language model writes its text to output, NUL-terminated, at most the
 * output capacity in bytes: 1024 by default (the guide's `char output[1024]`);
 * a smaller buffer MUST be declared first with
 * tinyaiSetSchedulerOutputCapacity() (or TinyAISchedulerConfig.outputCapacity),
 * since this signature cannot say how large output is. When a call fails,
 * output holds an empty string. */
TINYAI_API bool tinyaiExecuteNextLayer(TinyAIForwardScheduler* scheduler, const void* input, void* output,
                                       int* layerIndex);

/* The bytes tinyaiExecuteNextLayer() may write at output for a language
 * model, NUL included (>= 1; default 1024): generation ends before a piece
 * of text that would not fit whole (TINYAI_STOP_OUTPUT_FULL), and fails with
 * TINYAI_ERR_BUFFER_TOO_SMALL (its message gives the bytes needed) when
 * not even the first piece fits.
 * TINYAI_ERR_INVALID_ARGUMENT for 0; TINYAI_ERR_MISUSE during a generation. */
TINYAI_API TinyAIStatus tinyaiSetSchedulerOutputCapacity(TinyAIForwardScheduler* scheduler, size_t capacity);

/* Bytes the scheduler holds now: weights in the model's cache, the arena,
 * the KV cache and tables. 0 (last error set) for NULL or a scheduler that
 * cannot run. */
TINYAI_API size_t tinyaiGetSchedulerMemoryUsage(const TinyAIForwardScheduler* scheduler);

/* The most it has held since prepare. 0 (last error set) as above. */
TINYAI_API size_t tinyaiGetSchedulerPeakMemoryUsage(const TinyAIForwardScheduler* scheduler);

/* The largest batch (rows per pass, 1..maxBatch) whose plan fits the limit
 * in the scheduler's mode, counting inputSize and outputSize bytes per row
 * for the caller's input and output. -1 (last error set) on error:
 * TINYAI_ERR_RESOURCE_EXHAUSTED when even one row does not fit,
 * TINYAI_ERR_INVALID_ARGUMENT for maxBatch < 1, or the graph's errors. */
TINYAI_API int tinyaiCalculateOptimalBatchSize(TinyAIForwardScheduler* scheduler, size_t inputSize, size_t outputSize,
                                               int maxBatch);

/* NULL ok. A pointer that is not a live scheduler (destroyed already, or
 * never created), or an LLM's (from tinyaiGetLLMScheduler(): tinyaiDestroyLLM
 * destroys it), is left alone with TINYAI_ERR_MISUSE as the last error. */
TINYAI_API void tinyaiDestroyForwardScheduler(TinyAIForwardScheduler* scheduler);

/* ---- TinyAI extensions ---- */

TINYAI_API TinyAISchedulerConfig tinyaiCreateDefaultSchedulerConfig(void);

/* As tinyaiCreateForwardScheduler() with a configuration (NULL = defaults). */
TINYAI_API TinyAIForwardScheduler* tinyaiCreateForwardSchedulerWithConfig(TinyAIMappedModel* model,
                                                                          TinyAIExecutionMode mode, size_t memoryLimit,
                                                                          const TinyAISchedulerConfig* config);

/* Adds every layer of the model with the dependencies it describes (a
 * language model's chain; a dense network's inputs). TINYAI_ERR_UNSUPPORTED
 * without a model. */
TINYAI_API TinyAIStatus tinyaiAddModelLayersToSchedule(TinyAIForwardScheduler* scheduler);

/* Bytes one row of a model layer's output takes (what
 * tinyaiAddLayerToSchedule() expects as outputSize), or 0 (last error set). */
TINYAI_API size_t tinyaiGetLayerOutputSize(const TinyAIMappedModel* model, int layerIndex);

/* Everything tinyaiPrepareForwardPass() decides - order, lifetimes, plans,
 * mode - without allocating the arena or state or loading weights: for tools
 * that inspect a schedule (tinyaiGetSchedulerReport, tinyaiDumpActivationDag
 * work after it). Same errors as prepare. */
TINYAI_API TinyAIStatus tinyaiPlanForwardPass(TinyAIForwardScheduler* scheduler);

/* Before prepare: rows of input per run (dense networks). */
TINYAI_API TinyAIStatus tinyaiSetScheduleBatchSize(TinyAIForwardScheduler* scheduler, int batchSize);

/* The status of the last tinyaiExecuteNextLayer() (TINYAI_OK when it ran a
 * layer or finished cleanly). */
TINYAI_API TinyAIStatus tinyaiGetSchedulerStatus(const TinyAIForwardScheduler* scheduler);

/* Fills out (set out->structSize first); after plan or prepare. */
TINYAI_API TinyAIStatus tinyaiGetSchedulerReport(const TinyAIForwardScheduler* scheduler, TinyAISchedulerReport* out);

/* Static names: "NORMAL", "MEMORY_OPT", "STREAMING", "ADAPTIVE"; "?" otherwise. */
TINYAI_API const char* tinyaiExecutionModeName(TinyAIExecutionMode mode);

/* Writes the activation DAG and the plans as YAML (000_*.txt's
 * dump_activation_dag) into buf (NUL-terminated when capacity > 0) and sets
 * *needed to the bytes the whole text takes, NUL included; a first call with
 * capacity 0 sizes the buffer. TINYAI_ERR_BUFFER_TOO_SMALL when capacity
 * was too small; TINYAI_ERR_MISUSE before plan or prepare. */
TINYAI_API TinyAIStatus tinyaiDumpActivationDag(const TinyAIForwardScheduler* scheduler, char* buf, size_t capacity,
                                                size_t* needed);

#ifdef __cplusplus
}
#endif

#endif /* TINYAI_UTILS_FORWARD_SCHEDULER_H */
