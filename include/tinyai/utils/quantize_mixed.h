/*
 * tinyai/utils/quantize_mixed.h - mixed-precision quantization of a model.
 *
 * Chooses a precision for each weight matrix of an open model - by what the
 * matrix does (embedding, attention, feed-forward, output), then per layer
 * and per tensor - and either runs the model that way at once or writes it
 * out as a new .tmai:
 *
 *     TinyAIMixedPrecisionConfig mpConfig;
 *     tinyaiInitMixedPrecisionConfig(&mpConfig);
 *     mpConfig.embeddingPrecision = TINYAI_PREC_INT8;
 *     mpConfig.attentionPrecision = TINYAI_PREC_INT4;
 *     mpConfig.ffnPrecision = TINYAI_PREC_INT4;
 *     mpConfig.outputPrecision = TINYAI_PREC_FP16;
 *     tinyaiApplyMixedPrecision(model, &mpConfig);        // runs quantized now
 *     tinyaiSaveMappedModel(model, "model-mixed.tmai", NULL);  // ... or offline
 *
 * Applied to an open model, the choice changes what its weight cache loads:
 * each row slice of a matrix is quantized as it is read from the file, and
 * held and counted at its quantized size (the model's memory usage, an LLM's
 * memory limit). A slice evicted and read again is quantized again, which
 * costs time (docs/quantization.md gives figures): for a model larger than
 * its cache, quantize offline (tinyaiSaveMappedModel, tinyai-quantize) and
 * open the result, which is read as stored.
 *
 * Precisions: INT8 is GGUF's Q8_0 block (int8 in groups of 32 with an f16
 * scale), INT4 a 4-bit non-uniform grid in groups of 32 (GGUF's IQ4_NL
 * block: a lower error than Q4_0 at the same size and speed), INT4_SYMMETRIC
 * the plain symmetric Q4_0 block; docs/format.md gives the bytes. Scales are
 * chosen by a least-squares search (docs/format.md, "Choosing the scales").
 * Only matrices change: norms and biases stay as stored.
 */
#ifndef TINYAI_UTILS_QUANTIZE_MIXED_H
#define TINYAI_UTILS_QUANTIZE_MIXED_H

#include <stddef.h>
#include <stdint.h>

#include "../status.h"
#include "../types.h"
#include "mmap_loader.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum TinyAIPrecision TINYAI_ENUM_BASE {
    TINYAI_PREC_FP32 = 0,
    TINYAI_PREC_FP16 = 1,
    TINYAI_PREC_INT8 = 2,            /* TINYAI_DTYPE_Q8_G32 */
    TINYAI_PREC_INT4 = 3,            /* TINYAI_DTYPE_Q4NL_G32 */
    TINYAI_PREC_INT4_SYMMETRIC = 4,  /* TINYAI_DTYPE_Q4_G32 */
    TINYAI_PREC_AS_STORED = 5,       /* leave the matrix as the file stores it */
    /* GGUF's block formats. A K-quant needs rows of whole blocks of 256
     * values; a matrix whose rows are not falls back as llama.cpp's
     * quantizer does: Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0. */
    TINYAI_PREC_Q4_K = 6,            /* TINYAI_DTYPE_Q4_K */
    TINYAI_PREC_Q5_K = 7,            /* TINYAI_DTYPE_Q5_K */
    TINYAI_PREC_Q6_K = 8,            /* TINYAI_DTYPE_Q6_K */
    TINYAI_PREC_Q5_0 = 9,            /* TINYAI_DTYPE_Q5_G32 */
    TINYAI_PREC_Q5_1 = 10            /* TINYAI_DTYPE_Q5M_G32 */
} TinyAIPrecision;

/* Static name ("int8", "fp16", "q4_k", ...); "unknown" for other values. */
TINYAI_API const char* tinyaiPrecisionName(TinyAIPrecision precision);
/* The precision called name ("fp32", "fp16", "int8", "int4", "int4-sym",
 * "keep", "q4_k", "q5_k", "q6_k", "q5_0", "q5_1"; GGUF's names "f32", "f16",
 * "q8_0", "iq4_nl", "q4_0" too, any case), or TINYAI_ERR_INVALID_ARGUMENT
 * naming the accepted names. */
TINYAI_API TinyAIStatus tinyaiParsePrecision(const char* name, TinyAIPrecision* out);

/* One exception to the per-kind precisions: either every matrix of one
 * transformer block (layer = its block index, tensor = NULL) or one tensor
 * by name (tensor = its name, layer = -1). A tensor's entry wins over its
 * block's, a block's over the kinds'; of two entries for the same thing, the
 * last wins. */
typedef struct TinyAIPrecisionOverride {
    int32_t layer;
    const char* tensor;
    TinyAIPrecision precision;
} TinyAIPrecisionOverride;

typedef struct TinyAIMixedPrecisionConfig {
    uint32_t structSize;                 /* sizeof(TinyAIMixedPrecisionConfig); set by Init */
    TinyAIPrecision embeddingPrecision;  /* the token embedding table; default INT8 */
    TinyAIPrecision attentionPrecision;  /* q, k, v and output projections; default INT4 */
    TinyAIPrecision ffnPrecision;        /* gate, up and down projections (and a dense
                                            network's weight matrices); default INT4 */
    TinyAIPrecision outputPrecision;     /* the classifier; default INT8. A classifier tied to
                                            the embedding table is one tensor: it takes the
                                            finer of embeddingPrecision and outputPrecision
                                            (AS_STORED being the file's dtype; a quantized
                                            table asked to stay as stored stays) */
    int32_t groupSize;                   /* values per scale for INT8/INT4; 32 (the only one
                                            with kernels) */
    const TinyAIPrecisionOverride* overrides;  /* may be NULL when overrideCount is 0; read
                                                  during the call only */
    size_t overrideCount;
    /* Calibration: measure the inputs each INT8/INT4 matrix meets by running the model (at the
     * precisions its file stores) over calibrationTokens positions: the tokens of
     * calibrationText when it is set, else a stream the model samples itself (temperature 1,
     * seed calibrationSeed, sequences of up to 256 tokens). Each sequence starts as the model
     * starts a text: after BOS when it adds one (tokenizer.add_bos), else at the text's first
     * token (a sampled one at a token drawn uniformly). 0 = none (default); 2048
     * or more pays (fewer over-fit the inputs' second moment). Language models only
     * (TINYAI_ERR_UNSUPPORTED for others); docs/quantization.md gives what it gains. */
    int32_t calibrationTokens;
    const char* calibrationText;
    uint64_t calibrationSeed;            /* default 7 */
    /* 1 (default): error feedback - each row is rounded column by column and each column's
     * rounding error passed on to the columns not yet rounded, through the inverse of the
     * inputs' second moment (GPTQ), besides weighting each group's scale search by the mean
     * square of its inputs. The model holds 4 x cols^2 bytes per distinct matrix input while
     * the precisions apply (stories260K 0.8 MiB, a 110M model 275 MiB), and 8 x cols^2 more for
     * the widest while measuring. 0: the weighting alone (4 x cols bytes). */
    int32_t calibrationErrorFeedback;
} TinyAIMixedPrecisionConfig;

/* The defaults above (a "medium" mix: docs/quantization.md says what each
 * kind costs in quality). NULL is TINYAI_ERR_INVALID_ARGUMENT. */
TINYAI_API TinyAIStatus tinyaiInitMixedPrecisionConfig(TinyAIMixedPrecisionConfig* config);

/* Makes model run its matrices at the config's precisions from now on: the
 * weight cache drops what it holds and loads (and counts) each matrix
 * quantized. Each call starts again from the precisions the file stores, so
 * a second call replaces the first, and AS_STORED everywhere undoes it.
 * Errors, each leaving the model as it was: TINYAI_ERR_INVALID_ARGUMENT for
 * NULL, an unknown precision, a group size of 0, a layer index the model
 * does not have, an override naming both or neither, a negative
 * calibrationTokens or a calibrationText without tokens;
 * TINYAI_ERR_NOT_FOUND for a tensor name the model does not have;
 * TINYAI_ERR_UNSUPPORTED for a group size no kernel supports, a matrix
 * the file already stores quantized that would have to be quantized again
 * to another format (refused: quantize from the fp32 or fp16 model
 * instead; keeping it, or widening it to fp16 or fp32, is fine), a
 * zstd-compressed matrix (decompress it first), a precision for a tensor
 * that is not a matrix, calibration of a model that is not a language
 * model; and TINYAI_ERR_MISUSE for a model that is not open
 * (closed already), while an LLM or scheduler runs on the model, or while a
 * layer's weights are pinned (tinyaiGetLayerWeights without release). */
TINYAI_API TinyAIStatus tinyaiApplyMixedPrecision(TinyAIMappedModel* model, const TinyAIMixedPrecisionConfig* config);

/* The precision tinyaiApplyMixedPrecision gave tensor (by index), or the
 * file's when none was applied; TINYAI_PREC_AS_STORED never. */
TINYAI_API TinyAIStatus tinyaiGetTensorPrecision(const TinyAIMappedModel* model, int tensorIndex,
                                                 TinyAIPrecision* out);

/* What tinyaiSaveMappedModel reports after each tensor it wrote. */
typedef struct TinyAISaveProgress {
    uint32_t structSize;      /* sizeof(TinyAISaveProgress) of the library that filled it */
    int tensorIndex;          /* the tensor just written */
    int tensorCount;
    const char* tensorName;
    TinyAIDType storedDType;  /* in the input file */
    TinyAIDType savedDType;   /* in the output */
    uint64_t bytesBefore;     /* the tensor's bytes in the input (decoded) */
    uint64_t bytesAfter;      /* ... and in the output */
    double relativeRmsError;  /* sqrt(sum (saved - stored)^2 / sum stored^2); 0 when copied */
    double maxAbsError;       /* largest |saved - stored| */
    uint64_t bytesDone;       /* output bytes written so far */
    uint64_t bytesTotal;      /* the output's size */
} TinyAISaveProgress;

/* Called after each tensor; return nonzero to stop (the save then fails
 * with TINYAI_STOPPED and removes what it wrote). */
typedef int (*TinyAISaveProgressCallback)(void* user, const TinyAISaveProgress* progress);

/* Positional write of size bytes at offset of the output (a file, flash);
 * 0 on success, anything else on failure (TINYAI_ERR_IO with the value). */
typedef int (*TinyAIWriteCallback)(void* user, uint64_t offset, const void* data, size_t size);

typedef struct TinyAISaveOptions {
    uint32_t structSize;                 /* sizeof(TinyAISaveOptions); set by tinyaiCreateDefaultSaveOptions() */
    TinyAISaveProgressCallback progress; /* may be NULL */
    void* progressUser;
    int32_t threads;                     /* threads encoding, the caller included; 0 = one per
                                            core; default 1 (the same bytes either way) */
} TinyAISaveOptions;

/* The defaults above (no progress callback, one thread). */
TINYAI_API TinyAISaveOptions tinyaiCreateDefaultSaveOptions(void);

/* Writes model as it runs now (the precisions applied to it) as a new .tmai
 * at path: the same metadata, layers and tensor order; every tensor
 * uncompressed. Streams: it holds a few row slices, not the model (the
 * model's weight cache is not used for the quantized matrices, which are
 * read from the file and encoded here - byte for byte what the cache would
 * hold). Written to a temporary beside path and put in place at the end
 * (docs/files.md): on any error path holds what it held and nothing is left
 * beside it. options may be NULL. Errors: the arguments
 * (TINYAI_ERR_INVALID_ARGUMENT; path the model's own file, any file the
 * process is reading, a directory or FIFO included), the model's read
 * errors, TINYAI_ERR_IO for the output (a read-only path included),
 * TINYAI_ERR_UNSUPPORTED on ports without a file system (use
 * tinyaiSaveMappedModelTo). */
TINYAI_API TinyAIStatus tinyaiSaveMappedModel(TinyAIMappedModel* model, const char* path,
                                              const TinyAISaveOptions* options);

/* As tinyaiSaveMappedModel, writing through write (size bytes in all:
 * tinyaiGetSavedModelSize). */
TINYAI_API TinyAIStatus tinyaiSaveMappedModelTo(TinyAIMappedModel* model, TinyAIWriteCallback write, void* user,
                                                const TinyAISaveOptions* options);

/* The size of the file tinyaiSaveMappedModel would write now. */
TINYAI_API TinyAIStatus tinyaiGetSavedModelSize(const TinyAIMappedModel* model, uint64_t* size);

#ifdef __cplusplus
}
#endif

#endif /* TINYAI_UTILS_QUANTIZE_MIXED_H */
