/* The guide's "Forward Pass Scheduling / Basic Usage", as written: a
 * sequential network, each layer on the one before, under a 100 MB limit in
 * MEMORY_OPT mode. What the guide leaves as "..." is filled in for the model
 * given: a language model reads a prompt and writes text; a dense network
 * reads one row of floats and writes its output row.
 * Usage: forward_pass MODEL.tmai */
#include <stdio.h>
#include <string.h>

#include <tinyai/llm.h>
#include <tinyai/utils/forward_scheduler.h>

int main(int argc, char** argv) {
    const char* path = argc > 1 ? argv[1] : "path/to/model.tmai";
    TinyAIMappedModel* model = tinyaiOpenMappedModel(path, NULL);
    if (!model) {
        printf("Failed to open model: %s\n", tinyaiGetLastErrorMessage());
        return 1;
    }
    int layerCount = tinyaiGetMappedLayerCount(model);
    const char* arch = "";
    size_t archLen = 0;
    tinyaiGetMetadataString(model, "general.architecture", &arch, &archLen);
    const int isText = archLen == 5 && strncmp(arch, "llama", 5) == 0;

    // Create a scheduler with memory limit
    TinyAIForwardScheduler* scheduler = tinyaiCreateForwardScheduler(
        model,                  // Mapped model
        TINYAI_EXEC_MEMORY_OPT, // Memory optimization mode
        100 * 1024 * 1024       // 100MB memory limit
    );
    if (!scheduler) {
        printf("Failed to create the scheduler: %s\n", tinyaiGetLastErrorMessage());
        tinyaiCloseMappedModel(model);
        return 1;
    }

    // Add layers to the schedule (in execution order)
    for (int i = 0; i < layerCount; i++) {
        // For sequential network (each layer depends on previous)
        int dependsOn = (i > 0) ? i - 1 : -1;
        TinyAIDependencyType depType = (i > 0) ? TINYAI_DEP_SEQUENTIAL : TINYAI_DEP_NONE;

        // Each layer produces output activations of this size
        size_t outputSize = tinyaiGetLayerOutputSize(model, i); // Size in bytes

        tinyaiAddLayerToSchedule(scheduler, i, dependsOn, depType, outputSize);
    }

    // Prepare for execution
    if (tinyaiPrepareForwardPass(scheduler) != TINYAI_OK) {
        printf("Failed to prepare: %s\n", tinyaiGetLastErrorMessage());
        tinyaiDestroyForwardScheduler(scheduler);
        tinyaiCloseMappedModel(model);
        return 1;
    }

    // Execute the forward pass layer by layer
    float row[4096];
    char text[1024];
    int64_t inputDim = 0;
    tinyaiGetMetadataInt(model, "dense.input_dim", &inputDim);
    for (int64_t i = 0; i < inputDim && i < 4096; ++i) row[i] = (float)((i % 7) - 3) / 3.0f;
    float result[4096];
    const void* input = isText ? (const void*)"Once upon a time" : (const void*)row; // Input data
    void* output = isText ? (void*)text : (void*)result; // Output buffer
    int layerIndex;
    int executed = 0;

    while (tinyaiExecuteNextLayer(scheduler, input, output, &layerIndex)) {
        // Layer layerIndex has been executed
        // Memory is automatically managed
        ++executed;
    }
    if (tinyaiGetSchedulerStatus(scheduler) != TINYAI_OK) {
        printf("Execution failed: %s\n", tinyaiGetLastErrorMessage());
        tinyaiDestroyForwardScheduler(scheduler);
        tinyaiCloseMappedModel(model);
        return 1;
    }
    printf("Executed %d layers of %d; peak memory %.3f MB\n", executed, layerCount,
           tinyaiGetSchedulerPeakMemoryUsage(scheduler) / (1024.0 * 1024.0));
    if (isText) {
        printf("Output: %s\n", text);
    } else {
        printf("Output row starts:");
        for (int i = 0; i < 4; ++i) printf(" %.5f", result[i]);
        printf("\n");
    }

    // Clean up
    tinyaiDestroyForwardScheduler(scheduler);
    tinyaiCloseMappedModel(model);
    return 0;
}
