/* The guide's "Memory Usage Tracking", as written, after a run of the
 * model's own schedule (a prompt for a language model, one row of zeros for a
 * dense network), beside what the OS measured.
 * Usage: memory_tracking MODEL.tmai [LIMIT_BYTES] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tinyai/tinyai.h>

int main(int argc, char** argv) {
    const char* path = argc > 1 ? argv[1] : "path/to/model.tmai";
    size_t limit = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : 0;
    TinyAIMappedModel* model = tinyaiOpenMappedModel(path, NULL);
    if (!model) {
        printf("Failed to open model: %s\n", tinyaiGetLastErrorMessage());
        return 1;
    }
    TinyAIForwardScheduler* scheduler = tinyaiCreateForwardScheduler(model, TINYAI_EXEC_ADAPTIVE, limit);
    if (tinyaiAddModelLayersToSchedule(scheduler) != TINYAI_OK || tinyaiPrepareForwardPass(scheduler) != TINYAI_OK) {
        printf("Failed to prepare: %s\n", tinyaiGetLastErrorMessage());
        tinyaiDestroyForwardScheduler(scheduler);
        tinyaiCloseMappedModel(model);
        return 1;
    }
    static float zeros[65536], out[65536];
    char text[1024];
    const char* arch = "";
    size_t archLen = 0;
    tinyaiGetMetadataString(model, "general.architecture", &arch, &archLen);
    const int isText = archLen == 5 && strncmp(arch, "llama", 5) == 0;
    int layerIndex;
    while (tinyaiExecuteNextLayer(scheduler, isText ? (const void*)"Once upon a time" : (const void*)zeros,
                                  isText ? (void*)text : (void*)out, &layerIndex)) {
    }
    if (tinyaiGetSchedulerStatus(scheduler) != TINYAI_OK) {
        printf("Execution failed: %s\n", tinyaiGetLastErrorMessage());
        tinyaiDestroyForwardScheduler(scheduler);
        tinyaiCloseMappedModel(model);
        return 1;
    }

    // Get current memory usage
    size_t memUsage = tinyaiGetSchedulerMemoryUsage(scheduler);

    // Get peak memory usage
    size_t peakMemUsage = tinyaiGetSchedulerPeakMemoryUsage(scheduler);

    printf("Current memory usage: %.2f MB\n", memUsage / (1024.0 * 1024.0));
    printf("Peak memory usage: %.2f MB\n", peakMemUsage / (1024.0 * 1024.0));
    printf("Peak resident set of the process (OS): %.2f MB\n", tinyaiGetProcessPeakRss() / (1024.0 * 1024.0));
    const int over = limit && peakMemUsage > limit;
    if (over) printf("Peak above the limit of %zu bytes\n", limit);
    tinyaiDestroyForwardScheduler(scheduler);
    tinyaiCloseMappedModel(model);
    return over;
}
