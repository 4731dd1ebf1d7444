/*
 * tinyai/utils/prune.h - pruning a model's weight matrices, stored block-sparse.
 *
 * Removes the least useful B x B blocks of each weight matrix of a
 * transformer block (the q, k, v, output, gate, up and down projections; a
 * dense network's weight matrices) so that what is removed is never stored,
 * never cached and never read:
 *
 *     TinyAIPruneConfig pruneConfig;
 *     tinyaiInitPruneConfig(&pruneConfig);
 *     pruneConfig.method = TINYAI_PRUNE_MAGNITUDE;   // or TINYAI_PRUNE_ACTIVATION
 *     pruneConfig.sparsity = 0.7;                    // remove 70% of each matrix
 *     pruneConfig.blockSize = 4;                     // in 4x4 blocks
 *     pruneConfig.layerSparsity[0] = 0.5;            // block 0 loses only half
 *     tinyaiPruneModel(model, &pruneConfig);         // runs pruned now
 *     size_t saved = tinyaiCalculatePruningSavings(model);
 *     tinyaiSaveMappedModel(model, "model-pruned.tmai", NULL);  // ... or offline
 *
 * Each band of B rows keeps the same number of its column blocks - the
 * ones that score highest in that band - so every band takes the same bytes
 * (docs/format.md, "Block-sparse tensors"): a bitmap of the kept blocks, then
 * their values in the matrix's dtype. The products skip the pruned blocks.
 * Pruning composes with quantization: the kept values are stored at the
 * precision tinyaiApplyMixedPrecision gives the matrix, and a pruned file can
 * be quantized (tinyai-quantize) with its blocks kept.
 *
 * Applied to an open model, pruning changes what its weight cache loads:
 * each row slice of a matrix is pruned as it is read from the file, and held
 * and counted at its pruned size. A slice evicted and read again is pruned
 * again (the same blocks: the choice is deterministic), which costs time: for
 * a model larger than its cache, prune offline (tinyaiSaveMappedModel,
 * tinyai-prune) and open the result. docs/pruning.md says what each method
 * costs in quality.
 */
#ifndef TINYAI_UTILS_PRUNE_H
#define TINYAI_UTILS_PRUNE_H

#include <stddef.h>
#include <stdint.h>

#include "../status.h"
#include "../types.h"
#include "mmap_loader.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum TinyAIPruneMethod TINYAI_ENUM_BASE {
    /* A block's score is the sum of its weights' magnitudes |w|. */
    TINYAI_PRUNE_MAGNITUDE = 0,
    /* |w| times the root mean square of the inputs each weight meets (the
     * published "Wanda" score), measured by running the model over
     * calibration text: much better than magnitude on language models. */
    TINYAI_PRUNE_ACTIVATION = 1,
    /* As ACTIVATION's measurement, blocks chosen by w^2 / [H^-1]_jj^2 and the
     * kept weights of each row corrected for the pruned ones through the
     * inverse of the inputs' second moment H (the published "SparseGPT"
     * update, GPTQ's error feedback). Holds 4 x cols^2 bytes per distinct
     * matrix input while it applies. */
    TINYAI_PRUNE_SPARSEGPT = 2
} TinyAIPruneMethod;

/* Entries of TinyAIPruneConfig::layerSparsity. */
#define TINYAI_PRUNE_MAX_LAYERS 256

typedef struct TinyAIPruneConfig {
    uint32_t structSize;          /* sizeof(TinyAIPruneConfig); set by Init */
    TinyAIPruneMethod method;     /* default TINYAI_PRUNE_MAGNITUDE */
    /* The share of each matrix's blocks removed, in [0, 1): a band keeps
     * round((1 - sparsity) x blocks) of its blocks. Default 0.5. */
    double sparsity;
    /* B: blocks of B x B weights, 1 = unstructured (each weight on its own).
     * 1, 2, 4, 8, 16 or 32; default 4. A matrix whose shape is not a multiple
     * of B has a narrower last block and a shorter last band. */
    int32_t blockSize;
    /* Per transformer block (a dense network: per weight matrix, in order):
     * that block's sparsity. Entries left negative (Init sets -1) take
     * `sparsity`; 0 leaves the block dense. */
    double layerSparsity[TINYAI_PRUNE_MAX_LAYERS];
    /* Also prune the classifier (an untied output matrix)? Default 0: it is
     * small next to the blocks and pruning it costs the most quality. */
    int32_t pruneOutput;
    /* What ACTIVATION and SPARSEGPT measure: the model (as its file stores
     * it) runs over calibrationTokens positions of calibrationText, or of a
     * stream it samples itself (seed calibrationSeed), as
     * tinyaiApplyMixedPrecision's calibration does. Default 2048 and NULL;
     * ignored by MAGNITUDE. Language models only. */
    int32_t calibrationTokens;
    const char* calibrationText;
    uint64_t calibrationSeed;     /* default 7 */
} TinyAIPruneConfig;

/* The defaults above. NULL is TINYAI_ERR_INVALID_ARGUMENT. */
TINYAI_API TinyAIStatus tinyaiInitPruneConfig(TinyAIPruneConfig* config);

/* Makes model run its matrices pruned from now on: the weight cache drops
 * what it holds and loads (and counts) each matrix block-sparse. Each call
 * starts again from the weights the file stores, so a second call replaces
 * the first and sparsity 0 undoes it; the precisions applied
 * (tinyaiApplyMixedPrecision) stay, and the kept values take them.
 * Errors, each leaving the model as it was: TINYAI_ERR_INVALID_ARGUMENT for
 * NULL, an unknown method, a sparsity (or a set layerSparsity) outside
 * [0, 1) or not a number, a blockSize of 0 or below, a layerSparsity set for
 * a block the model does not have, or a negative calibrationTokens;
 * TINYAI_ERR_UNSUPPORTED for a blockSize no kernel takes (not 1, 2, 4, 8,
 * 16 or 32), a matrix the file stores pruned already (prune the dense
 * model instead), one it stores quantized (pruning it would round it again:
 * prune the fp32 or fp16 model, then quantize), a zstd-compressed matrix,
 * or ACTIVATION/SPARSEGPT on a model that is not a language model; and
 * TINYAI_ERR_MISUSE for a model that is not open, while an LLM or scheduler
 * runs on it, or while a layer's weights are pinned. */
TINYAI_API TinyAIStatus tinyaiPruneModel(TinyAIMappedModel* model, const TinyAIPruneConfig* config);

/* Bytes pruning saves: what the model saved now (tinyaiSaveMappedModel) is
 * smaller by than the same model with every block-sparse matrix dense at its
 * dtype - to the byte, alignment included - which is also what a weight cache
 * holding the whole model holds less (within its rounding of slices to
 * pages: 2% on a model of a few MB). Works for a model pruned by
 * tinyaiPruneModel and for a file stored pruned. 0 for a model with nothing
 * pruned, and 0 with the status recorded for NULL or a closed model. */
TINYAI_API size_t tinyaiCalculatePruningSavings(const TinyAIMappedModel* model);

/* How one tensor is pruned (all zero but structSize for a dense one). */
typedef struct TinyAITensorSparsity {
    uint32_t structSize;      /* set to sizeof(TinyAITensorSparsity) before the call */
    int32_t blockSize;        /* B; 0 for a dense tensor */
    uint64_t keptBlocks;      /* blocks each band of B rows keeps */
    uint64_t blocksPerBand;   /* ceil(cols / B) */
    double sparsity;          /* the share of blocks removed: 1 - kept / blocksPerBand */
    uint64_t denseBytes;      /* the tensor's bytes dense, at its dtype */
    uint64_t bytes;           /* its bytes as it runs (and is saved) */
} TinyAITensorSparsity;

/* How tensor (by index) runs: pruned by tinyaiPruneModel, stored pruned, or
 * dense. TINYAI_ERR_INVALID_ARGUMENT for NULL or an index out of range. */
TINYAI_API TinyAIStatus tinyaiGetTensorSparsity(const TinyAIMappedModel* model, int tensorIndex,
                                                TinyAITensorSparsity* out);

/* Static name ("magnitude", "activation", "sparsegpt"); "unknown" else. */
TINYAI_API const char* tinyaiPruneMethodName(TinyAIPruneMethod method);
/* The method called name, or TINYAI_ERR_INVALID_ARGUMENT naming the
 * accepted names. */
TINYAI_API TinyAIStatus tinyaiParsePruneMethod(const char* name, TinyAIPruneMethod* out);

#ifdef __cplusplus
}
#endif

#endif /* TINYAI_UTILS_PRUNE_H */
