/* The guide's "Memory-Mapped Model Loading / Basic Usage", as written.
 * Usage: basic_usage [MODEL.tmai] */
#include <stdio.h>

#include <tinyai/utils/mmap_loader.h>

int main(int argc, char** argv) {
    const char* path = argc > 1 ? argv[1] : "path/to/model.tmai";

    // Create a default configuration
    TinyAIMmapConfig config = tinyaiCreateDefaultMmapConfig();

    // Open the model with memory mapping
    TinyAIMappedModel* model = tinyaiOpenMappedModel(path, &config);
    if (!model) {
        printf("Failed to open model\n");
        printf("  %s: %s\n", tinyaiStatusString(tinyaiGetLastError()), tinyaiGetLastErrorMessage());
        return 1;
    }

    // Use the model
    printf("Opened %s: %d layers, %d tensors\n", path, tinyaiGetMappedLayerCount(model),
           tinyaiGetMappedTensorCount(model));

    // Close the model when done
    tinyaiCloseMappedModel(model);
    return 0;
}
