/* A consumer of the installed TinyAI package: opens the model given as
 * argv[1] and prints its layer count. */
#include <stdio.h>

#include <tinyai/tinyai.h>
#include <tinyai/utils/mmap_loader.h>

int main(int argc, char** argv) {
    TinyAIMmapConfig config;
    TinyAIMappedModel* model;
    int layers;
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.tmai\n", argv[0]);
        return 2;
    }
    config = tinyaiCreateDefaultMmapConfig();
    model = tinyaiOpenMappedModel(argv[1], &config);
    if (!model) {
        fprintf(stderr, "%s: %s\n", tinyaiStatusString(tinyaiGetLastError()), tinyaiGetLastErrorMessage());
        return 1;
    }
    layers = tinyaiGetMappedLayerCount(model);
    printf("tinyai %s: %s has %d layers\n", tinyaiVersionString(), argv[1], layers);
    tinyaiCloseMappedModel(model);
    return layers > 0 ? 0 : 1;
}
