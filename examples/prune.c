/* The guide's "Model Pruning", as written, on an open model; then the
 * pruned model generates, and is saved as a new .tmai (what tinyai-prune
 * does) when OUT is given.
 * Usage: prune MODEL.tmai [OUT.tmai] */
#include <stdio.h>

#include <tinyai/tinyai.h>
#include <tinyai/utils/prune.h>

int main(int argc, char** argv) {
    const char* path = argc > 1 ? argv[1] : "path/to/model.tmai";
    TinyAIMappedModel* model = tinyaiOpenMappedModel(path, NULL);
    if (!model) {
        printf("Failed to open model: %s\n", tinyaiGetLastErrorMessage());
        return 1;
    }

    // Create pruning configuration
    TinyAIPruneConfig pruneConfig;
    tinyaiInitPruneConfig(&pruneConfig);

    // Set pruning parameters
    pruneConfig.method = TINYAI_PRUNE_MAGNITUDE;   // Magnitude-based pruning
    pruneConfig.sparsity = 0.7;                    // Target 70% sparsity
    pruneConfig.blockSize = 4;                     // 4x4 block pruning
    pruneConfig.layerSparsity[0] = 0.5;            // Custom sparsity for layer 0

    // Apply pruning to the model
    if (tinyaiPruneModel(model, &pruneConfig) != TINYAI_OK) {
        printf("Failed to prune: %s\n", tinyaiGetLastErrorMessage());
        tinyaiCloseMappedModel(model);
        return 1;
    }

    // Calculate memory savings
    size_t savedBytes = tinyaiCalculatePruningSavings(model);
    printf("Memory saved: %.2f MB\n", savedBytes / (1024.0 * 1024.0));

    for (int t = 0; t < tinyaiGetMappedTensorCount(model) && t < 8; ++t) {
        TinyAITensorInfo info;
        TinyAITensorSparsity sp;
        info.structSize = sizeof info;
        sp.structSize = sizeof sp;
        tinyaiGetMappedTensorInfo(model, t, &info);
        tinyaiGetTensorSparsity(model, t, &sp);
        if (sp.blockSize > 0) {
            printf("  %-16s %dx%d blocks, %.1f%% pruned, %llu -> %llu bytes\n", info.name, sp.blockSize,
                   sp.blockSize, 100.0 * sp.sparsity, (unsigned long long)sp.denseBytes,
                   (unsigned long long)sp.bytes);
        } else {
            printf("  %-16s dense\n", info.name);
        }
    }

    TinyAILLM* llm = NULL;
    if (tinyaiCreateLLM(model, NULL, &llm) != TINYAI_OK) {
        printf("Failed to create the LLM: %s\n", tinyaiGetLastErrorMessage());
        tinyaiCloseMappedModel(model);
        return 1;
    }
    TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
    params.maxNewTokens = 32;
    char text[1024];
    TinyAIStatus s = tinyaiLLMGenerate(llm, "Once upon a time", &params, text, sizeof text, NULL, NULL);
    if (s == TINYAI_OK) printf("%s\n", text);
    tinyaiDestroyLLM(llm);
    if (s == TINYAI_OK && argc > 2) {
        s = tinyaiSaveMappedModel(model, argv[2], NULL);
        if (s == TINYAI_OK) printf("Saved %s\n", argv[2]);
    }
    if (s != TINYAI_OK) printf("Failed: %s\n", tinyaiGetLastErrorMessage());
    tinyaiCloseMappedModel(model);
    return s == TINYAI_OK ? 0 : 1;
}
