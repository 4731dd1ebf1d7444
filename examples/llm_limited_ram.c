/* The guide's "Running a Large Language Model on Limited RAM", as written: a
 * 100 MB weight cache, a 200 MB limit in MEMORY_OPT mode, layer by layer
 * until the text is generated. Where the guide elides "add embedding layer,
 * attention layers, FFN layers, etc.", tinyaiAddModelLayersToSchedule() adds
 * the model's chain. Each call runs one layer; a token takes all of them.
 * Usage: llm_limited_ram [MODEL.tmai]   (default: large_language_model.tmai) */
#include <stdio.h>

#include <tinyai/tinyai.h>
#include <tinyai/utils/forward_scheduler.h>
#include <tinyai/utils/mmap_loader.h>

int main(int argc, char** argv) {
    const char* path = argc > 1 ? argv[1] : "large_language_model.tmai";

    // Open model with memory mapping
    TinyAIMmapConfig mmapConfig = tinyaiCreateDefaultMmapConfig();
    mmapConfig.maxCacheSize = 100 * 1024 * 1024; // 100MB cache
    TinyAIMappedModel* model = tinyaiOpenMappedModel(path, &mmapConfig);
    if (!model) {
        printf("Failed to open model: %s\n", tinyaiGetLastErrorMessage());
        return 1;
    }

    // Create forward scheduler with 200MB limit
    TinyAIForwardScheduler* scheduler = tinyaiCreateForwardScheduler(
        model, TINYAI_EXEC_MEMORY_OPT, 200 * 1024 * 1024);

    // Add layers to schedule (transformer architecture)
    tinyaiAddModelLayersToSchedule(scheduler);  // embedding layer, transformer blocks, output layer

    // Prepare for execution
    if (tinyaiPrepareForwardPass(scheduler) != TINYAI_OK) {
        printf("Failed to prepare: %s\n", tinyaiGetLastErrorMessage());
        tinyaiDestroyForwardScheduler(scheduler);
        tinyaiCloseMappedModel(model);
        return 1;
    }

    // Execute layer by layer
    const char* input = "TinyAI is";
    char output[1024];
    int layerIndex;

    while (tinyaiExecuteNextLayer(scheduler, input, output, &layerIndex)) {
        printf("Executed layer %d\n", layerIndex);
        printf("Current memory usage: %.2f MB\n", 
               tinyaiGetSchedulerMemoryUsage(scheduler) / (1024.0 * 1024.0));
    }
    if (tinyaiGetSchedulerStatus(scheduler) != TINYAI_OK) {
        printf("Generation failed: %s\n", tinyaiGetLastErrorMessage());
        tinyaiDestroyForwardScheduler(scheduler);
        tinyaiCloseMappedModel(model);
        return 1;
    }

    printf("Generated text: %s\n", output);
    printf("Peak memory usage: %.2f MB\n", tinyaiGetSchedulerPeakMemoryUsage(scheduler) / (1024.0 * 1024.0));
    printf("Peak resident set of the process (OS): %.2f MB\n", tinyaiGetProcessPeakRss() / (1024.0 * 1024.0));

    // Clean up
    tinyaiDestroyForwardScheduler(scheduler);
    tinyaiCloseMappedModel(model);
    return 0;
}
