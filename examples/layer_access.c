/* The guide's "Layer Access", as written, over every layer of a model.
 * Usage: layer_access [MODEL.tmai] */
#include <stdio.h>

#include <tinyai/utils/mmap_loader.h>

int main(int argc, char** argv) {
    const char* path = argc > 1 ? argv[1] : "path/to/model.tmai";
    TinyAIMmapConfig config = tinyaiCreateDefaultMmapConfig();
    TinyAIMappedModel* model = tinyaiOpenMappedModel(path, &config);
    if (!model) {
        printf("Failed to open model: %s\n", tinyaiGetLastErrorMessage());
        return 1;
    }

    // Get layer count
    int layerCount = tinyaiGetMappedLayerCount(model);

    for (int layerIndex = 0; layerIndex < layerCount; layerIndex++) {
        // Get layer descriptor
        const TinyAILayerDescriptor* desc = tinyaiGetLayerDescriptor(model, layerIndex);

        // Prefetch layer weights in anticipation of use
        tinyaiPrefetchLayerWeights(model, layerIndex);

        // Load layer weights (will be cached based on configuration)
        void* weights = tinyaiGetLayerWeights(model, layerIndex);
        if (!weights) {
            printf("layer %d: %s\n", layerIndex, tinyaiGetLastErrorMessage());
            tinyaiCloseMappedModel(model);
            return 1;
        }

        // Set layer priority (higher values = more likely to keep in cache)
        tinyaiSetLayerPriority(model, layerIndex, 2.0f);

        // Get current memory usage
        size_t memUsage = tinyaiGetMappedModelMemoryUsage(model);
        printf("layer %2d %-12s %3d tensors %10llu bytes; %zu bytes of weights resident\n", layerIndex,
               desc->name, desc->tensorCount, (unsigned long long)desc->decodedSize, memUsage);

        // Release layer weights when no longer needed
        tinyaiReleaseLayerWeights(model, layerIndex);
    }

    tinyaiCloseMappedModel(model);
    return 0;
}
