/* The guide's "Configuration Options", as written, then used to open a model.
 * Usage: config_options [MODEL.tmai] */
#include <stdio.h>

#include <tinyai/utils/mmap_loader.h>

int main(int argc, char** argv) {
    const char* path = argc > 1 ? argv[1] : "path/to/model.tmai";

    TinyAIMmapConfig config = tinyaiCreateDefaultMmapConfig();

    // Set maximum cache size (default is 256MB)
    config.maxCacheSize = 100 * 1024 * 1024; // 100MB

    // Enable/disable prefetching (default is enabled)
    config.prefetchEnabled = true;

    // Set number of prefetch threads (default is 1)
    config.prefetchThreads = 2;

    // Enable/disable adaptive caching (default is enabled)
    config.adaptiveCaching = true;

    // Set minimum layer cache size (default is 4KB)
    config.minLayerCacheSize = 8 * 1024; // 8KB

    TinyAIMappedModel* model = tinyaiOpenMappedModel(path, &config);
    if (!model) {
        printf("Failed to open model: %s\n", tinyaiGetLastErrorMessage());
        return 1;
    }
    printf("maxCacheSize %zu, prefetch %s with %d threads, adaptive %s, minLayerCacheSize %zu\n",
           config.maxCacheSize, config.prefetchEnabled ? "on" : "off", config.prefetchThreads,
           config.adaptiveCaching ? "on" : "off", config.minLayerCacheSize);
    tinyaiCloseMappedModel(model);
    return 0;
}
