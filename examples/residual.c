/* The guide's residual-connection example, as written, on the first four
 * layers of a dense network (models/mlp_residual.def: layer 0 is 32 -> 64
 * wide, layers 1 and 2 are 64 -> 64, layer 3 reads 64): layer 3's input is
 * the sum of layer 1's output and layer 2's, and layer 0's output stays alive
 * until layer 2 has read it. The output is layer 3's.
 * Usage: residual MODEL.tmai   (no model: the schedule is only planned) */
#include <stdio.h>

#include <tinyai/utils/forward_scheduler.h>

int main(int argc, char** argv) {
    TinyAIMappedModel* model = NULL;
    if (argc > 1 && !(model = tinyaiOpenMappedModel(argv[1], NULL))) {
        printf("Failed to open model: %s\n", tinyaiGetLastErrorMessage());
        return 1;
    }
    TinyAIForwardScheduler* scheduler = tinyaiCreateForwardScheduler(model, TINYAI_EXEC_ADAPTIVE, 1024 * 1024);
    size_t size0 = 64 * sizeof(float), size1 = 64 * sizeof(float), size2 = 64 * sizeof(float);
    size_t size3 = model ? tinyaiGetLayerOutputSize(model, 3) : 64 * sizeof(float);

    // Main branch, layer 0
    tinyaiAddLayerToSchedule(scheduler, 0, -1, TINYAI_DEP_NONE, size0);

    // Main branch, layer 1
    tinyaiAddLayerToSchedule(scheduler, 1, 0, TINYAI_DEP_SEQUENTIAL, size1);

    // Residual connection layer, depends on layer 0
    tinyaiAddLayerToSchedule(scheduler, 2, 0, TINYAI_DEP_RESIDUAL, size2);

    // Output layer, after both main branch and residual
    tinyaiAddLayerToSchedule(scheduler, 3, 1, TINYAI_DEP_SEQUENTIAL, size3);
    tinyaiAddLayerToSchedule(scheduler, 3, 2, TINYAI_DEP_SEQUENTIAL, size3);

    if (tinyaiPrepareForwardPass(scheduler) != TINYAI_OK) {
        printf("Failed to prepare: %s\n", tinyaiGetLastErrorMessage());
        tinyaiDestroyForwardScheduler(scheduler);
        tinyaiCloseMappedModel(model);
        return 1;
    }
    TinyAISchedulerReport report;
    report.structSize = sizeof report;
    tinyaiGetSchedulerReport(scheduler, &report);
    printf("%d layers, %d operators; arena %llu bytes (lower bound %llu, naive %llu); %s\n", report.layerCount,
           report.opCount, (unsigned long long)report.arenaBytes, (unsigned long long)report.lowerBoundBytes,
           (unsigned long long)report.naiveBytes, report.reason);
    if (model) {
        float input[32], output[256];
        int layerIndex;
        for (int i = 0; i < 32; ++i) input[i] = (float)(i % 5) * 0.25f - 0.5f;
        printf("Execution order:");
        while (tinyaiExecuteNextLayer(scheduler, input, output, &layerIndex)) printf(" %d", layerIndex);
        printf("\n");
        if (tinyaiGetSchedulerStatus(scheduler) != TINYAI_OK) {
            printf("Execution failed: %s\n", tinyaiGetLastErrorMessage());
            tinyaiDestroyForwardScheduler(scheduler);
            tinyaiCloseMappedModel(model);
            return 1;
        }
        printf("Layer 3 output starts: %.5f %.5f %.5f %.5f\n", output[0], output[1], output[2], output[3]);
    }
    tinyaiDestroyForwardScheduler(scheduler);
    tinyaiCloseMappedModel(model);
    return 0;
}
