/* The guide's "Adaptive Batch Size", as written: the largest batch of a
 * dense network whose plan fits a 256 KB limit, then a run at that batch.
 * Usage: adaptive_batch MODEL.tmai [LIMIT_BYTES] */
#include <stdio.h>
#include <stdlib.h>

#include <tinyai/utils/forward_scheduler.h>

int main(int argc, char** argv) {
    const char* path = argc > 1 ? argv[1] : "path/to/model.tmai";
    size_t limit = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : 256 * 1024;
    TinyAIMappedModel* model = tinyaiOpenMappedModel(path, NULL);
    if (!model) {
        printf("Failed to open model: %s\n", tinyaiGetLastErrorMessage());
        return 1;
    }
    TinyAIForwardScheduler* scheduler = tinyaiCreateForwardScheduler(model, TINYAI_EXEC_MEMORY_OPT, limit);
    tinyaiAddModelLayersToSchedule(scheduler);
    int64_t inputDim = 0;
    tinyaiGetMetadataInt(model, "dense.input_dim", &inputDim);
    size_t inputSize = (size_t)inputDim * sizeof(float);
    size_t outputSize = tinyaiGetLayerOutputSize(model, tinyaiGetMappedLayerCount(model) - 1);

    // Calculate optimal batch size
    int batchSize = tinyaiCalculateOptimalBatchSize(
        scheduler,    // Forward scheduler
        inputSize,    // Size of a single input in bytes
        outputSize,   // Size of a single output in bytes
        32            // Maximum batch size to consider
    );

    printf("Optimal batch size: %d\n", batchSize);
    if (batchSize < 1) {
        printf("No batch fits: %s\n", tinyaiGetLastErrorMessage());
        tinyaiDestroyForwardScheduler(scheduler);
        tinyaiCloseMappedModel(model);
        return 1;
    }

    // Run one batch of that size.
    float* input = calloc((size_t)batchSize, inputSize);
    float* output = calloc((size_t)batchSize, outputSize);
    for (int64_t i = 0; i < batchSize * inputDim; ++i) input[i] = (float)(i % 11) / 11.0f - 0.5f;
    tinyaiSetScheduleBatchSize(scheduler, batchSize);
    int layerIndex, steps = 0, failed = tinyaiPrepareForwardPass(scheduler) != TINYAI_OK;
    while (!failed && tinyaiExecuteNextLayer(scheduler, input, output, &layerIndex)) ++steps;
    if (failed || tinyaiGetSchedulerStatus(scheduler) != TINYAI_OK) {
        printf("Failed: %s\n", tinyaiGetLastErrorMessage());
        failed = 1;
    } else {
        printf("Ran a batch of %d in %d layer steps; peak %zu bytes of a %zu-byte limit\n", batchSize, steps,
               tinyaiGetSchedulerPeakMemoryUsage(scheduler), limit);
    }
    free(input);
    free(output);
    tinyaiDestroyForwardScheduler(scheduler);
    tinyaiCloseMappedModel(model);
    return failed;
}
