/* The guide's "Mixed Precision Quantization", as written, on an open model;
 * then the quantized model generates, and is saved as a new .tmai (what
 * tinyai-quantize does) when OUT is given.
 * Usage: mixed_precision MODEL.tmai [OUT.tmai] */
#include <stdio.h>

#include <tinyai/tinyai.h>
#include <tinyai/utils/quantize_mixed.h>

int main(int argc, char** argv) {
    const char* path = argc > 1 ? argv[1] : "path/to/model.tmai";
    TinyAIMappedModel* model = tinyaiOpenMappedModel(path, NULL);
    if (!model) {
        printf("Failed to open model: %s\n", tinyaiGetLastErrorMessage());
        return 1;
    }
    size_t before = 0;
    for (int i = 0; i < tinyaiGetMappedLayerCount(model); ++i) before += tinyaiGetLayerDescriptor(model, i)->decodedSize;

    // Create mixed precision configuration
    TinyAIMixedPrecisionConfig mpConfig;
    tinyaiInitMixedPrecisionConfig(&mpConfig);

    // Set precision for different layer types
    mpConfig.embeddingPrecision = TINYAI_PREC_INT8;   // 8-bit for embeddings
    mpConfig.attentionPrecision = TINYAI_PREC_INT4;   // 4-bit for attention
    mpConfig.ffnPrecision = TINYAI_PREC_INT4;         // 4-bit for feed-forward
    mpConfig.outputPrecision = TINYAI_PREC_FP16;      // FP16 for output layer

    // Apply mixed precision configuration to model
    if (tinyaiApplyMixedPrecision(model, &mpConfig) != TINYAI_OK) {
        printf("Failed to quantize: %s\n", tinyaiGetLastErrorMessage());
        tinyaiCloseMappedModel(model);
        return 1;
    }

    size_t after = 0;
    for (int i = 0; i < tinyaiGetMappedLayerCount(model); ++i) after += tinyaiGetLayerDescriptor(model, i)->decodedSize;
    printf("Weights: %.2f MB -> %.2f MB\n", before / (1024.0 * 1024.0), after / (1024.0 * 1024.0));
    for (int t = 0; t < tinyaiGetMappedTensorCount(model) && t < 6; ++t) {
        TinyAITensorInfo info;
        TinyAIPrecision p;
        info.structSize = sizeof info;
        tinyaiGetMappedTensorInfo(model, t, &info);
        tinyaiGetTensorPrecision(model, t, &p);
        printf("  %-16s %s\n", info.name, tinyaiPrecisionName(p));
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
