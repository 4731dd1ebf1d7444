// What the KV tests share: owning handles for a model and an LLM, and an
// LLM's vocabulary size.
#ifndef TINYAI_TESTS_KV_LLM_HANDLES_H_
#define TINYAI_TESTS_KV_LLM_HANDLES_H_

#include <cstddef>
#include <cstring>

#include "tinyai/llm.h"
#include "tinyai/tinyai.h"

namespace tinyai {
namespace testing {

struct ModelHandle {
  TinyAIMappedModel* model = nullptr;
  ~ModelHandle() { tinyaiCloseMappedModel(model); }
};

struct LLMHandle {
  TinyAILLM* llm = nullptr;
  ~LLMHandle() { tinyaiDestroyLLM(llm); }
};

inline size_t VocabSize(TinyAILLM* llm) {
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  tinyaiGetLLMModelInfo(llm, &info);
  return static_cast<size_t>(info.vocabSize);
}

}  // namespace testing
}  // namespace tinyai

#endif  // TINYAI_TESTS_KV_LLM_HANDLES_H_
