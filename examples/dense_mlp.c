/* A dense network through the same scheduler: models/mlp_residual.def (an
 * MLP with residual blocks), a batch of 8 rows, its own graph from the file
 * (tinyaiAddModelLayersToSchedule), under a memory limit the scheduler plans
 * for. Prints each row's arg-max class and the memory it took.
 * Usage: dense_mlp MODEL.tmai [LIMIT_BYTES] */
#include <stdio.h>
#include <stdlib.h>

#include <tinyai/tinyai.h>

enum { kBatch = 8 };

int main(int argc, char** argv) {
    const char* path = argc > 1 ? argv[1] : "mlp-residual.tmai";
    size_t limit = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : 512 * 1024;
    TinyAIMappedModel* model = tinyaiOpenMappedModel(path, NULL);
    if (!model) {
        printf("Failed to open model: %s\n", tinyaiGetLastErrorMessage());
        return 1;
    }
    TinyAISchedulerConfig config = tinyaiCreateDefaultSchedulerConfig();
    config.batchSize = kBatch;
    TinyAIForwardScheduler* scheduler =
        tinyaiCreateForwardSchedulerWithConfig(model, TINYAI_EXEC_ADAPTIVE, limit, &config);
    if (!scheduler || tinyaiAddModelLayersToSchedule(scheduler) != TINYAI_OK ||
        tinyaiPrepareForwardPass(scheduler) != TINYAI_OK) {
        printf("Failed to prepare: %s\n", tinyaiGetLastErrorMessage());
        tinyaiDestroyForwardScheduler(scheduler);
        tinyaiCloseMappedModel(model);
        return 1;
    }
    TinyAISchedulerReport report;
    report.structSize = sizeof report;
    tinyaiGetSchedulerReport(scheduler, &report);
    printf("%s\n%d layers, %d operators (%d in place); arena %llu bytes, lower bound %llu, naive %llu\n",
           report.reason, report.layerCount, report.opCount, report.inPlaceCount,
           (unsigned long long)report.arenaBytes, (unsigned long long)report.lowerBoundBytes,
           (unsigned long long)report.naiveBytes);

    int64_t inputDim = 0;
    tinyaiGetMetadataInt(model, "dense.input_dim", &inputDim);
    int outputDim = (int)(tinyaiGetLayerOutputSize(model, tinyaiGetMappedLayerCount(model) - 1) / sizeof(float));
    float* input = malloc((size_t)(kBatch * inputDim) * sizeof(float));
    float* output = malloc((size_t)(kBatch * outputDim) * sizeof(float));
    for (int64_t i = 0; i < kBatch * inputDim; ++i) input[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
    int layerIndex, steps = 0;
    while (tinyaiExecuteNextLayer(scheduler, input, output, &layerIndex)) ++steps;
    const int failed = tinyaiGetSchedulerStatus(scheduler) != TINYAI_OK;
    if (failed) printf("Execution failed: %s\n", tinyaiGetLastErrorMessage());
    for (int r = 0; r < kBatch && !failed; ++r) {
        int best = 0;
        for (int c = 1; c < outputDim; ++c) best = output[r * outputDim + c] > output[r * outputDim + best] ? c : best;
        printf("row %d: class %d (%.4f)\n", r, best, output[r * outputDim + best]);
    }
    if (!failed) {
        printf("%d layer steps; peak %zu bytes of a %zu-byte limit\n", steps,
               tinyaiGetSchedulerPeakMemoryUsage(scheduler), limit);
    }
    free(input);
    free(output);
    tinyaiDestroyForwardScheduler(scheduler);
    tinyaiCloseMappedModel(model);
    return failed;
}
