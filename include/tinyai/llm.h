/*
 * tinyai/llm.h - text generation with a LLaMA-architecture model.
 *
 * A TinyAILLM runs a mapped .tmai model through a forward scheduler
 * (<tinyai/utils/forward_scheduler.h>): it owns the KV cache, the planned
 * activation arena (allocated at creation; nothing is allocated while tokens
 * are evaluated), the tokenizer and the worker threads.
 *
 *     TinyAIMappedModel* model = tinyaiOpenMappedModel("model.tmai", NULL);
 *     TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
 *     cfg.threads = 2;
 *     TinyAILLM* llm = NULL;
 *     if (tinyaiCreateLLM(model, &cfg, &llm) != TINYAI_OK) { ... tinyaiGetLastErrorMessage() ... }
 *     TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
 *     gp.steps = 256;
 *     char text[4096];
 *     size_t len = 0;
 *     tinyaiLLMGenerate(llm, "Once upon a time", &gp, text, sizeof text, &len, NULL);
 *     tinyaiDestroyLLM(llm);
 *     tinyaiCloseMappedModel(model);
 *
 * Ownership: the LLM borrows the model. Closing the model first leaves the
 * LLM unusable (every call fails with TINYAI_ERR_MISUSE, "the model ... has
 * been closed") but safe to destroy: it never reads the closed model. A
 * TinyAILLM is used by one thread at a time; its text callback must not
 * call back into it (TINYAI_ERR_MISUSE) except to read it
 * (tinyaiGetLLMPosition, tinyaiLLMTokenize, tinyaiLLMDecodeToken, reports).
 *
 * Handles that are not live: every call given an LLM pointer that is not a
 * live LLM (destroyed already, or never created) reads nothing through it
 * and fails with TINYAI_ERR_MISUSE (tinyaiGetLLMPosition returns -1 and
 * tinyaiGetLLMScheduler NULL, with TINYAI_ERR_MISUSE as the last error), the
 * message naming the call; so does every scheduler call given the
 * scheduler of an LLM destroyed since. The call finds the pointer among the
 * live LLMs; it does not hold the LLM, so a call racing with
 * tinyaiDestroyLLM() of the same LLM on another thread is the caller's race
 * (as in SQLite).
 *
 * Several LLMs (and schedulers) on one model share its weight cache, holding
 * each weight once; the cache's cap is the least that maxCacheSize and every
 * runner's memoryLimit allow, so each runner's limit holds however the
 * others are configured (<tinyai/utils/forward_scheduler.h>, "Sharing a
 * model"). A runner whose limit would starve another that keeps all its
 * weights resident (NORMAL) is refused with TINYAI_ERR_RESOURCE_EXHAUSTED.
 */
#ifndef TINYAI_LLM_H
#define TINYAI_LLM_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "utils/forward_scheduler.h"
#include "utils/mmap_loader.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TinyAILLM TinyAILLM;

/* How the KV cache stores keys and values (TinyAILLMConfig.kvType). */
typedef enum TinyAIKVType TINYAI_ENUM_BASE {
    TINYAI_KV_F32 = 0,  /* 4 bytes a value (default) */
    TINYAI_KV_F16 = 1,  /* IEEE half, rounded to nearest even: 2 bytes a value */
    TINYAI_KV_INT8 = 2, /* int8 codes with an f16 scale (max|x| / 127) per 32 values of a head
                           (per head when its size is not a multiple of 32): 1.06 bytes a value */
    TINYAI_KV_AUTO = 3  /* the scheduler chooses inside memoryLimit, as it chooses a mode: the most
                           precise of f32, f16 and int8 with which the best mode the limit allows
                           fits (NORMAL, then MEMORY_OPT, then STREAMING with the most rows per
                           pass): a smaller cache only when it buys a better mode or more rows
                           per pass, or any; f32 with no limit. tinyaiGetLLMModelInfo() says
                           which, the scheduler's reason why; the memory report's
                           minimumMemoryLimit is the least of any type's. */
} TinyAIKVType;

/* A step of the fallback chain (TinyAILLMConfig.fallback): what
 * tinyaiCreateLLM and tinyaiPreflightLLM change, in the caller's order, when
 * the configuration does not fit memoryLimit or the weight cache's cap. Each
 * step applies on top of those before it; the first level that plans within
 * the limit is created, before anything large is allocated. A step that
 * changes nothing (the cache already int8, the mode already STREAMING or
 * ADAPTIVE, no window that fits) is logged as skipped and is not a level.
 * What prefetch reads ahead stays inside the weight cache's cap (a quarter
 * of it) and never takes a run over its limit; what its workers cost is a
 * staging set each (a zstd context and a buffer, when the model decodes,
 * converts or packs as it loads), which the PREFETCH step takes back. */
typedef enum TinyAIFallback TINYAI_ENUM_BASE {
    TINYAI_FALLBACK_END = 0,        /* ends the chain (the default: no fallback) */
    TINYAI_FALLBACK_KV_F16 = 1,     /* an f32 KV cache becomes f16 */
    TINYAI_FALLBACK_KV_INT8 = 2,    /* an f32 or f16 KV cache becomes int8 */
    TINYAI_FALLBACK_MEMORY_OPT = 3, /* NORMAL becomes MEMORY_OPT: weights streamed in row slices */
    TINYAI_FALLBACK_STREAMING = 4,  /* NORMAL or MEMORY_OPT becomes STREAMING: fewer rows per pass,
                                       as many as fit */
    TINYAI_FALLBACK_KV_WINDOW = 5,  /* a rolling KV window, the longest that fits (kvSinks sinks, or
                                       4 when 0; shorter than the context less the sinks and a
                                       pass's 32 positions): a text runs on past it in constant
                                       memory, each token seeing only the window (kvGrowable is
                                       cleared) */
    TINYAI_FALLBACK_PREFETCH = 6    /* the model's prefetch workers share one staging set instead of
                                       one each (TinyAIMmapConfig.prefetchThreads > 1): the others
                                       are freed when the LLM is created, for good - the model's
                                       other runners share the one too. The text does not change;
                                       loads ahead may wait for each other. */
} TinyAIFallback;

#define TINYAI_MAX_FALLBACK_STEPS 8

typedef struct TinyAILLMConfig {
    uint32_t structSize;    /* sizeof(TinyAILLMConfig); set by tinyaiCreateDefaultLLMConfig() */
    int32_t contextLength;  /* tokens the KV cache holds; 0 = the model's seq_len. More than
                               seq_len runs (TinyAIModelInfo.seqLen tells): positions past it
                               were never trained and RoPE extrapolates to them; how much the
                               text degrades there is the model's (docs/tools.md, "-c past seq_len") */
    int32_t threads;        /* compute threads including the caller; 0 = one per core; default 1 */
    size_t memoryLimit;     /* bytes the LLM may hold in all - weights through the model's cache,
                               KV cache, activations, scratch, tables; 0 = no limit (default).
                               The LLM sets the model's weight cache cap to what the rest leaves.
                               Below tinyaiGetLLMMemoryReport()'s minimumMemoryLimit, creation fails
                               with TINYAI_ERR_RESOURCE_EXHAUSTED naming the tensor, bytes and limit. */
    TinyAIExecutionMode mode; /* how the forward scheduler runs it under memoryLimit
                               (<tinyai/utils/forward_scheduler.h>); default TINYAI_EXEC_ADAPTIVE */
    bool debugExecution;    /* no in-place reuse of activations (every tensor its own buffer);
                               the output is identical; default false */
    TinyAIKVType kvType;    /* how the KV cache stores keys and values; default TINYAI_KV_F32 */
    int32_t kvWindow;       /* 0 (default): the cache holds contextLength positions and a text
                               ends there. N > 0: a rolling window - the cache holds the kvSinks
                               first positions and the N most recent, each token attends to
                               those, and a text runs on past contextLength in constant memory
                               (its passes are still at most contextLength positions long) */
    int32_t kvSinks;        /* with kvWindow: the first positions kept for good ("attention
                               sinks"; 4 is the usual choice); default 0 */
    int32_t kvGrowable;     /* 0 (default): the cache takes its contextLength positions when the
                               LLM is created. 1: it takes them 64 positions at a time as a text
                               reaches them (and gives them back on tinyaiResetLLM): a short
                               conversation holds little, and under memoryLimit the weight cache
                               has the room the KV cache has not taken yet (the limit still
                               plans for the whole context). Not with kvWindow. */
    TinyAIFallback fallback[TINYAI_MAX_FALLBACK_STEPS]; /* the fallback chain, in order, ended by
                               TINYAI_FALLBACK_END (all END by default: a configuration that does
                               not fit fails). tinyaiGetLLMFallback() says which level ran and
                               logs every step tried; when no level fits, tinyaiCreateLLM fails
                               once, with the last level's error. E.g. {PREFETCH, KV_F16, KV_INT8,
                               MEMORY_OPT, STREAMING, KV_WINDOW}. */
} TinyAILLMConfig;

typedef struct TinyAIModelInfo {
    uint32_t structSize;    /* set to sizeof(TinyAIModelInfo) before the call */
    int32_t dim;            /* embedding width */
    int32_t hiddenDim;      /* feed-forward width */
    int32_t layers;         /* transformer blocks */
    int32_t heads;          /* query heads */
    int32_t kvHeads;        /* key/value heads (grouped-query attention when < heads) */
    int32_t vocabSize;
    int32_t seqLen;         /* longest context the model was trained for */
    int32_t contextLength;  /* tokens this LLM's KV cache holds */
    int32_t sharedClassifier; /* 1 when the classifier is the token embedding */
    int32_t bosId;
    int32_t eosId;
    float ropeTheta;
    float normEps;
    uint64_t weightBytes;   /* bytes of weights in memory */
    uint64_t kvCacheBytes;  /* bytes of the KV cache */
    uint64_t activationBytes; /* bytes of activation and scratch buffers */
    TinyAIKVType kvType;    /* how the KV cache stores keys and values (TINYAI_KV_AUTO's choice) */
} TinyAIModelInfo;

/* Sampling, in this order: the repetition penalty on the logits; greedy at
 * temperature 0; otherwise the logits divided by the temperature and
 * softmaxed (llama2.c's order), then top-k, min-p and top-p keep the tokens
 * that pass all three, renormalized, and one is drawn. */
typedef struct TinyAISamplerConfig {
    uint32_t structSize;    /* sizeof(TinyAISamplerConfig) */
    float temperature;      /* 0 = greedy (always the arg-max); default 0 */
    float topP;             /* nucleus sampling mass in (0, 1]; 1 = off; default 0.9 */
    uint64_t seed;          /* random seed; same seed and settings give the same text */
    int32_t topK;           /* keep the topK most likely tokens; 0 = off (default), 0..vocabulary */
    float minP;             /* keep tokens at least minP times the most likely's probability, in
                               [0, 1]; 0 = off (default) */
    float repeatPenalty;    /* a token among the last repeatLastN (prompt included) has its logit
                               divided by this when positive, multiplied when not (llama.cpp's
                               rule), each token once; finite and > 0, 1 = off (default). Generation
                               only: tinyaiLLMSample, which sees no tokens, refuses another value */
    int32_t repeatLastN;    /* tokens the penalty looks back over, 1..TINYAI_MAX_REPEAT_LAST_N
                               (default 64); held in memory the generation takes at its start */
} TinyAISamplerConfig;

#define TINYAI_MAX_REPEAT_LAST_N 4096
#define TINYAI_MAX_STOP_STRINGS 16
#define TINYAI_MAX_STOP_BYTES 256

/* Called with each piece of text as it is produced; return non-zero to stop
 * (the generation then ends with TINYAI_STOPPED). It must not call TinyAI on
 * the runner or scheduler that called it (TINYAI_ERR_MISUSE). */
typedef int (*TinyAITextCallback)(const char* piece, size_t len, void* user);

typedef struct TinyAIGenerateParams {
    uint32_t structSize;    /* sizeof(TinyAIGenerateParams) */
    int32_t steps;          /* llama2.c's limit: positions in all, BOS and prompt tokens
                               included; 0 = the context length (default) */
    TinyAISamplerConfig sampler;
    TinyAITextCallback onText; /* may be NULL */
    void* user;             /* passed to onText */
    int32_t maxNewTokens;   /* tokens sampled after the prompt at most; 0 = no limit but steps
                               and the context; default 256. Generation ends at the first of
                               maxNewTokens, steps, the context, or BOS sampled. A struct from
                               before this field (structSize smaller) keeps llama2.c's
                               behaviour: steps only, default 256. */
    const char* const* stop; /* stopCount strings; generation ends where the generated text (not
                               the prompt) first holds one of them, which is not printed; text
                               that may begin one is held back until it is decided. Each is
                               1..TINYAI_MAX_STOP_BYTES bytes; they must live until the generation
                               ends. NULL = none (default) */
    int32_t stopCount;      /* 0..TINYAI_MAX_STOP_STRINGS */
    int32_t keepContext;    /* 1: continue what the LLM's KV cache holds (a conversation's next turn):
                               the prompt follows it (no BOS; the last token of the text before
                               is evaluated first when it was not), is not printed, and must fit
                               the positions left; steps counts from the first position. 0
                               (default): start afresh (tinyaiResetLLM first) */
} TinyAIGenerateParams;

/* Why a generation ended. */
typedef enum TinyAIStopReason TINYAI_ENUM_BASE {
    TINYAI_STOP_NONE = 0,        /* it did not end normally (an error) or has not ended */
    TINYAI_STOP_MAX_NEW = 1,     /* maxNewTokens tokens were sampled */
    TINYAI_STOP_STEPS = 2,       /* steps positions were used (llama2.c's limit) */
    TINYAI_STOP_CONTEXT = 3,     /* the context is full */
    TINYAI_STOP_BOS = 4,         /* the model sampled BOS: the end of its text (llama2.c) */
    TINYAI_STOP_CALLBACK = 5,    /* onText returned non-zero (status TINYAI_STOPPED) */
    TINYAI_STOP_OUTPUT_FULL = 6, /* tinyaiExecuteNextLayer(): the next piece would not fit the
                                    output buffer (TinyAISchedulerConfig.outputCapacity) */
    TINYAI_STOP_EOS = 7,         /* the model sampled an end-of-generation token: EOS or an
                                    end-of-turn token (<|eot_id|>, <|im_end|>) of a byte-level
                                    BPE vocabulary; not printed */
    TINYAI_STOP_STRING = 8       /* the text reached one of TinyAIGenerateParams.stop; not printed */
} TinyAIStopReason;

typedef struct TinyAIGenerateStats {
    uint32_t structSize;      /* set to sizeof(TinyAIGenerateStats) before the call */
    TinyAIStopReason stopReason;
    int32_t promptTokens;     /* BOS included (when the model adds it: tokenizer.add_bos) */
    int32_t generatedTokens;  /* sampled tokens (the text after the prompt) */
    int32_t decodeTokens;     /* sampled tokens evaluated one at a time */
    double promptSeconds;     /* evaluating the prompt */
    double firstTokenSeconds; /* from the call to the first sampled token */
    double decodeSeconds;     /* sampling and evaluating after the prompt */
    double totalSeconds;
} TinyAIGenerateStats;

/* Where an LLM's memory goes, from TinyAI's own accounting. */
typedef struct TinyAIMemoryReport {
    uint32_t structSize;      /* set to sizeof(TinyAIMemoryReport) before the call */
    uint64_t memoryLimit;     /* the config's memoryLimit; 0 = none */
    uint64_t minimumMemoryLimit;    /* the least memoryLimit this model, context and thread count run under */
    uint64_t weightCacheCap;  /* the model's weight cache cap; 0 = none */
    uint64_t weightBytes;     /* memory the weight cache holds now */
    uint64_t weightPeakBytes; /* the most it has held since this LLM was created (the shared
                                 cache's, when several runners share the model) */
    uint64_t kvCacheBytes;    /* KV cache held (kvGrowable: what it has taken so far; the
                                 estimate gives what it takes at the whole context) */
    uint64_t activationBytes; /* activations and scratch */
    uint64_t otherBytes;      /* tokenizer, sampler, slice tables, model index, cache bookkeeping */
    uint64_t totalBytes;      /* weightBytes + kvCacheBytes + activationBytes + otherBytes */
    uint64_t peakTotalBytes;  /* the same with weightPeakBytes */
    uint64_t largestSliceBytes;     /* the largest row slice the cache must hold at once */
    const char* largestSliceTensor; /* a tensor in it; owned by the model */
} TinyAIMemoryReport;

/* Static names: "max_new", "steps", "context", "bos", "callback", "output_full",
 * "eos", "stop_string", "none"; "?" otherwise. */
TINYAI_API const char* tinyaiStopReasonName(TinyAIStopReason reason);
/* Static names: "f32", "f16", "int8", "auto"; "?" otherwise. */
TINYAI_API const char* tinyaiKVTypeName(TinyAIKVType type);

TINYAI_API TinyAILLMConfig tinyaiCreateDefaultLLMConfig(void);
TINYAI_API TinyAISamplerConfig tinyaiCreateDefaultSamplerConfig(void);
TINYAI_API TinyAIGenerateParams tinyaiCreateDefaultGenerateParams(void);

/* Builds a runner for model (architecture "llama"). config may be NULL.
 * Fails with TINYAI_ERR_UNSUPPORTED for another architecture or dtype,
 * TINYAI_ERR_BAD_FORMAT / _BAD_TOKENIZER for inconsistent metadata, and
 * TINYAI_ERR_OUT_OF_MEMORY when buffers cannot be allocated. */
TINYAI_API TinyAIStatus tinyaiCreateLLM(TinyAIMappedModel* model, const TinyAILLMConfig* config,
                                        TinyAILLM** out);

/* NULL ok. A pointer that is not a live LLM (destroyed already, or never
 * created) is left alone with TINYAI_ERR_MISUSE as the last error. The
 * LLM's scheduler (tinyaiGetLLMScheduler) goes with it. */
TINYAI_API void tinyaiDestroyLLM(TinyAILLM* llm);

TINYAI_API TinyAIStatus tinyaiGetLLMModelInfo(const TinyAILLM* llm, TinyAIModelInfo* out);

/* Fills out (set out->structSize first). */
TINYAI_API TinyAIStatus tinyaiGetLLMMemoryReport(const TinyAILLM* llm, TinyAIMemoryReport* out);

/* A configuration that runs, but much slower than it could, in the record a
 * failure gives (tinyaiGetLastErrorInfo): out->status TINYAI_OK, and
 * resource NONE when there is nothing to say. Today: the weight cache's cap
 * (maxCacheSize, 256 MB by default) below the model's weights while the
 * memory limit (or none) would hold them - every token reads every weight
 * from storage; remedy RAISE_CACHE with the weights' bytes. */
TINYAI_API TinyAIStatus tinyaiGetLLMWarning(const TinyAILLM* llm, TinyAIErrorInfo* out);

/* What the fallback chain did (TinyAILLMConfig.fallback). */
typedef struct TinyAIFallbackReport {
    uint32_t structSize;         /* set to sizeof(TinyAIFallbackReport) before the call */
    int32_t level;               /* steps applied (skipped ones not counted): 0 = the configuration
                                    as given; -1 (llm NULL) = no chain ran */
    TinyAIExecutionMode mode;    /* the configuration that runs: its mode as requested, */
    TinyAIKVType kvType;         /* KV type, */
    int32_t kvWindow;            /* window (0: none) */
    int32_t kvSinks;             /* and sinks */
    char log[1024];              /* one line a level tried: the step, then what it needs or that it
                                    fits ("" when the configuration fitted as given) */
} TinyAIFallbackReport;

/* Fills out (set out->structSize first). llm NULL: the chain the last
 * tinyaiCreateLLM or tinyaiPreflightLLM on this thread ran - after a failure,
 * the levels it tried, the configuration its last level had; level -1 when
 * that call ran none (no chain, or it failed before) - and the last error is
 * left as it is. */
TINYAI_API TinyAIStatus tinyaiGetLLMFallback(const TinyAILLM* llm, TinyAIFallbackReport* out);

/* "kv-f16", "kv-int8", "memory-opt", "streaming", "kv-window", "prefetch"
 * ("end"; "?" for any other value): the names the tools' --fallback takes. */
TINYAI_API const char* tinyaiFallbackName(TinyAIFallback step);

/* What an LLM for model with config (may be NULL) would need, without
 * creating it: minimumMemoryLimit, kvCacheBytes, activationBytes, otherBytes and the
 * largest row slice (the weight fields are 0). With TINYAI_KV_AUTO, for the type
 * config's memoryLimit and mode choose (int8, the least, when none fits). */
TINYAI_API TinyAIStatus tinyaiEstimateLLMMemory(const TinyAIMappedModel* model, const TinyAILLMConfig* config,
                                                TinyAIMemoryReport* out);

/* Before anything is allocated: what tinyaiCreateLLM(model, config) would
 * choose and hold. Planned exactly as it plans (the limit, the mode, the KV
 * type - TINYAI_KV_AUTO chosen -, the weight cache's cap), allocating only
 * the plan's tables for the call. */
typedef struct TinyAIPreflight {
    uint32_t structSize;           /* set to sizeof(TinyAIPreflight) before the call */
    TinyAIExecutionMode mode;      /* NORMAL, MEMORY_OPT or STREAMING: what the limit allows */
    TinyAIKVType kvType;           /* the KV cache's type (TINYAI_KV_AUTO: the one chosen) */
    int32_t rowsPerPass;           /* tokens a pass takes (STREAMING: fewer) */
    uint64_t memoryLimit;          /* the config's; 0 = none */
    uint64_t minimumMemoryLimit;   /* the least memoryLimit that runs this config */
    uint64_t weightBytes;          /* the most the weight cache will hold: every weight in NORMAL,
                                      else its cap (or every weight, when that is less); it holds
                                      whole row slices, so streaming it may stay up to one
                                      largestSliceBytes below */
    uint64_t largestSliceBytes;    /* the largest row slice */
    uint64_t weightTotalBytes;     /* every weight, resident */
    uint64_t kvCacheBytes;         /* the KV cache at its largest */
    uint64_t activationBytes;      /* the activation arena */
    uint64_t otherBytes;           /* tokenizer, sampler, slice tables, model index */
    uint64_t peakBytes;            /* the most TinyAI will hold: the four above */
    uint64_t processPeakBytes;     /* peakBytes + TINYAI_PROCESS_OVERHEAD_BYTES: the most the process's RSS
                                      reaches on its account (less where the KV cache is never filled) */
    uint64_t decodeBytesPerToken;  /* weights and KV cache a token reads at the last position */
    uint64_t storageBytesPerToken; /* of the weights, what the cache cannot hold: read from storage
                                      each token (0 when all are resident) */
    int32_t fallbackLevel;         /* config->fallback steps applied (0: none needed) */
    int32_t kvWindow;              /* the KV window that runs (a KV_WINDOW step's; 0: none) */
    int32_t kvSinks;               /* and its sinks */
} TinyAIPreflight;

/* Fills out (set out->structSize first). Errors: those tinyaiCreateLLM
 * gives for this config before it allocates - a limit nothing fits is
 * TINYAI_ERR_RESOURCE_EXHAUSTED with tinyaiGetLastErrorInfo() saying by how
 * much and what would fit. Not checked: the claim tinyaiCreateLLM then makes
 * on a weight cache other runners of the model share (they may leave it
 * less than this plan's cap). */
TINYAI_API TinyAIStatus tinyaiPreflightLLM(const TinyAIMappedModel* model, const TinyAILLMConfig* config,
                                           TinyAIPreflight* out);

/* Encodes text (SentencePiece-style BPE with byte fallback and a dummy-prefix
 * space). addBos != 0 adds the special tokens the model adds to a text, as
 * llama.cpp's add_special: BOS first (unless the model's tokenizer.add_bos
 * is 0) and EOS last (when its tokenizer.add_eos is 1); addBos = 0 gives the
 * text's tokens alone. Writes up to capacity ids and sets
 * *count to the number the text needs, so a first call with capacity 0 sizes
 * the buffer; TINYAI_ERR_BUFFER_TOO_SMALL when capacity was too small.
 * A text within the prompt's bound (tinyaiLLMGenerate) is encoded in the
 * LLM's reserved memory and allocates nothing; a longer one takes temporary
 * memory for the call, about 32 bytes a byte of text, outside memoryLimit
 * (on the bare-metal port, from the static arena: an arena of exactly
 * tinyaiEstimateStaticArena's size has no room for it, and the call fails
 * with TINYAI_ERR_OUT_OF_MEMORY). */
TINYAI_API TinyAIStatus tinyaiLLMTokenize(const TinyAILLM* llm, const char* text, int addBos, int32_t* tokens,
                                          int32_t capacity, int32_t* count);

/* The text of token as printed after prevToken (the leading space of the first
 * piece after BOS is dropped; "<0xXX>" pieces are that byte). Writes up to
 * capacity bytes (no terminator) and sets *len to the length needed;
 * TINYAI_ERR_BUFFER_TOO_SMALL when capacity was too small. */
TINYAI_API TinyAIStatus tinyaiLLMDecodeToken(const TinyAILLM* llm, int32_t prevToken, int32_t token, char* out,
                                             size_t capacity, size_t* len);

/* One turn of a chat, as the model was trained on it: the model's chat
 * template (GGUF's tokenizer.chat_template, recognized by its markers:
 * chatml for Qwen2/2.5/3 and SmolLM2, llama3 for Llama 3/3.1/3.2, zephyr,
 * llama2) applied to an optional system message (NULL or "": the
 * template's default, if it has one) and the user's message, ending where
 * the assistant's answer begins. Give the result to tinyaiLLMGenerate as the
 * prompt: the special tokens in it are parsed, and generation stops at the
 * end of the turn (TINYAI_STOP_EOS). Writes at most capacity bytes, NUL
 * included, and sets *len to the text's length; TINYAI_ERR_BUFFER_TOO_SMALL
 * when it does not fit (*len: the length needed), TINYAI_ERR_UNSUPPORTED
 * when the model has no template or one TinyAI does not know.
 *
 *     char prompt[1024];
 *     size_t n = 0;
 *     if (tinyaiLLMChatPrompt(llm, NULL, "Why is the sky blue?", prompt, sizeof prompt, &n) == TINYAI_OK)
 *         tinyaiLLMGenerate(llm, prompt, &gp, text, sizeof text, &len, NULL);
 */
TINYAI_API TinyAIStatus tinyaiLLMChatPrompt(const TinyAILLM* llm, const char* system, const char* user, char* out,
                                            size_t capacity, size_t* len);

/* The user's next turn in a conversation the LLM's KV cache holds: the
 * text that closes the assistant's answer (however it ended: the
 * end-of-turn token that stopped it is never fed) and opens the next turn,
 * as llama.cpp writes a conversation (chatml "<|im_end|>\n<|im_start|>user\n
 * ...", llama3 "<|eot_id|><|start_header_id|>user...", zephyr "</s>\n
 * <|user|>\n...", llama2 "</s>[INST] ... [/INST]"), ending where the next
 * answer begins. Give it to tinyaiLLMGenerate with keepContext = 1: the
 * cache goes on from the answer, and only the new answer is printed. The
 * first turn is tinyaiLLMChatPrompt's. Same capacity protocol and refusals
 * as tinyaiLLMChatPrompt.
 *
 *     gp.keepContext = 1;  (after a first turn from tinyaiLLMChatPrompt)
 *     if (tinyaiLLMChatNextTurn(llm, "And why?", prompt, sizeof prompt, &n) == TINYAI_OK)
 *         tinyaiLLMGenerate(llm, prompt, &gp, text, sizeof text, &len, NULL);
 */
TINYAI_API TinyAIStatus tinyaiLLMChatNextTurn(const TinyAILLM* llm, const char* user, char* out, size_t capacity,
                                              size_t* len);

/* The name of the model's chat template: "chatml", "llama3", "zephyr",
 * "llama2", "unknown" (it has one TinyAI does not know) or "none"; NULL for
 * a NULL or unusable llm. */
TINYAI_API const char* tinyaiLLMChatTemplateName(const TinyAILLM* llm);

/* Evaluates count tokens at the current position, appending them to the KV
 * cache, and copies the logits of the last one into logits (vocabSize floats;
 * may be NULL). TINYAI_ERR_CONTEXT_OVERFLOW if they do not fit;
 * TINYAI_ERR_NOT_FINITE if the logits are NaN or infinite (the weights hold
 * such values, or overflow). All or nothing: on any failure the position is
 * unchanged. */
TINYAI_API TinyAIStatus tinyaiLLMEval(TinyAILLM* llm, const int32_t* tokens, int32_t count, float* logits);

/* Number of tokens in the KV cache. */
TINYAI_API int32_t tinyaiGetLLMPosition(const TinyAILLM* llm);

/* Empties the KV cache. */
TINYAI_API TinyAIStatus tinyaiResetLLM(TinyAILLM* llm);

/* Sessions that survive a restart. tinyaiSaveLLMSession writes the KV
 * cache (its rows, the token at each position it holds), the position, and
 * what they belong to - a fingerprint of the model's weights, shapes and
 * applied precisions, and the KV type and layout - to path, CRC-32C
 * checksummed, written beside it and renamed (a failed save leaves what
 * path held; docs/files.md says what paths are refused). tinyaiLoadLLMSession puts a saved session into an LLM of
 * the same model and KV configuration, which then continues exactly as the
 * saved one would have (the sampler's rngState is the caller's to keep).
 * Refused, leaving the LLM as it was: TINYAI_ERR_BAD_MAGIC (not a session),
 * TINYAI_ERR_TRUNCATED, TINYAI_ERR_CHECKSUM (corrupt), TINYAI_ERR_MISMATCH
 * (another model, KV type, window, sinks or context: the message names
 * it), TINYAI_ERR_UNSUPPORTED_VERSION. A session file holds what the
 * cache has written: the keys and values of every position evaluated (with
 * a window, at most the sinks, the window and a pass's room), so a session
 * a few tokens into a long context is small. Loading reads the rows into
 * the LLM's own cache: no second copy is held. */
TINYAI_API TinyAIStatus tinyaiSaveLLMSession(const TinyAILLM* llm, const char* path);
TINYAI_API TinyAIStatus tinyaiLoadLLMSession(TinyAILLM* llm, const char* path);

/* The tokens the KV cache holds, in position order: every one evaluated,
 * or with a window the sinks and the kvWindow - 1 most recent (the
 * positions the next token attends to besides itself). *count gets how many there are; at most
 * capacity are copied (TINYAI_ERR_BUFFER_TOO_SMALL when capacity is
 * short, the first capacity copied). */
TINYAI_API TinyAIStatus tinyaiGetLLMTokens(const TinyAILLM* llm, int32_t* tokens, int32_t capacity, int32_t* count);

/* Picks the next token from logits (vocabSize floats, modified in place) with
 * the sampler settings; *rngState carries the random state between calls and
 * should start as the seed. A -inf logit rules its token out; a NaN or +inf
 * one, or every logit -inf, is TINYAI_ERR_NOT_FINITE. Uses the runner's
 * scratch: like every call on a TinyAILLM, one thread at a time. */
TINYAI_API TinyAIStatus tinyaiLLMSample(const TinyAILLM* llm, float* logits, const TinyAISamplerConfig* sampler,
                                        uint64_t* rngState, int32_t* token);

/* Resets the cache, then generates from prompt as llama2.c does (a model
 * whose logits turn NaN or infinite fails with TINYAI_ERR_NOT_FINITE at that
 * position): BOS at position 0 when the model starts a text with it
 * (tokenizer.add_bos), the prompt (and EOS when the model ends a text with
 * it: tokenizer.add_eos), then sampled tokens until params->maxNewTokens are
 * sampled, params->steps positions are used, the context is full or BOS is
 * sampled (stats->stopReason says which). The text (prompt included, first
 * leading space dropped, no trailing newline) goes to onText as it is
 * produced and into out (NUL-terminated when outCapacity > 0; may be NULL).
 * *outLen (may be NULL) receives the full text length; text that did not fit
 * in out is reported as TINYAI_ERR_BUFFER_TOO_SMALL after generation
 * finishes (out needs *outLen + 1 bytes). When onText asks to stop, generation ends there and returns
 * TINYAI_STOPPED (positive: out, *outLen and stats hold the text so far).
 * TINYAI_ERR_CONTEXT_OVERFLOW if the prompt does not fit in the context.
 * stats may be NULL (else set stats->structSize first).
 *
 * The prompt's bound: at most contextLength x 64 bytes, or contextLength x
 * the length of the vocabulary's longest piece when that is shorter than 64
 * bytes (no longer prompt can fit the context then). A longer prompt is
 * refused with TINYAI_ERR_CONTEXT_OVERFLOW, the message naming the bound,
 * before anything is encoded or allocated; one within it is encoded in
 * memory the LLM reserved when it was created (counted in the memory
 * report's otherBytes, and so within memoryLimit and a static arena sized
 * by tinyaiEstimateStaticArena): generation allocates nothing. A prompt
 * within the bound that encodes to more tokens than the context holds is
 * refused with TINYAI_ERR_CONTEXT_OVERFLOW too. The tools read at most
 * contextLength x 64 bytes of a prompt file (tinyai-generate -f). The same
 * holds for the prompt of tinyaiExecuteNextLayer(). */
TINYAI_API TinyAIStatus tinyaiLLMGenerate(TinyAILLM* llm, const char* prompt, const TinyAIGenerateParams* params,
                                          char* out, size_t outCapacity, size_t* outLen,
                                          TinyAIGenerateStats* stats);

/* Generation settings for tinyaiExecuteNextLayer() on a language model's
 * schedule (<tinyai/utils/forward_scheduler.h>): steps, sampler, callback.
 * Copied; before the first call of a generation. Defaults:
 * tinyaiCreateDefaultGenerateParams(). */
TINYAI_API TinyAIStatus tinyaiSetSchedulerGenerateParams(TinyAIForwardScheduler* scheduler,
                                                         const TinyAIGenerateParams* params);

/* The forward scheduler an LLM runs on (owned by the LLM): its report,
 * memory figures and activation DAG. */
TINYAI_API const TinyAIForwardScheduler* tinyaiGetLLMScheduler(const TinyAILLM* llm);

#ifdef __cplusplus
}
#endif

#endif /* TINYAI_LLM_H */
