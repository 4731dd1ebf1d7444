// libFuzzer target: any byte string handed to the loader must give a status,
// never a crash, a hang or a sanitizer report. When an input opens, every
// layer is loaded (checksums verified), every tensor described, and a runner
// is built and evaluates two tokens.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "tinyai/tinyai.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The loader wants a 64-byte aligned image.
  void* image = nullptr;
  if (posix_memalign(&image, 64, size ? size : 1) != 0) return 0;
  if (size) std::memcpy(image, data, size);
  TinyAIMmapConfig config = tinyaiCreateDefaultMmapConfig();
  TinyAIMappedModel* model = tinyaiOpenMappedModelFromMemory(image, size, &config);
  if (model) {
    for (int t = 0; t < tinyaiGetMappedTensorCount(model); ++t) {
      TinyAITensorInfo info;
      std::memset(&info, 0, sizeof info);
      info.structSize = sizeof info;
      tinyaiGetMappedTensorInfo(model, t, &info);
    }
    bool all_loaded = true;
    for (int l = 0; l < tinyaiGetMappedLayerCount(model); ++l) {
      if (tinyaiGetLayerWeights(model, l)) {
        tinyaiReleaseLayerWeights(model, l);
      } else {
        all_loaded = false;
      }
    }
    TinyAILLMConfig llm_config = tinyaiCreateDefaultLLMConfig();
    llm_config.contextLength = 4;
    TinyAILLM* llm = nullptr;
    if (all_loaded && tinyaiCreateLLM(model, &llm_config, &llm) == TINYAI_OK) {
      int32_t tokens[8];
      int32_t count = 0;
      if (tinyaiLLMTokenize(llm, "Hi", 1, tokens, 8, &count) == TINYAI_OK && count <= 4) {
        tinyaiLLMEval(llm, tokens, count, nullptr);
      }
      tinyaiDestroyLLM(llm);
    }
    tinyaiCloseMappedModel(model);
  }
  std::free(image);
  return 0;
}
