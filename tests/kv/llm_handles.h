// What the KV tests share: owning handles for a model and an LLM, an
// LLM's vocabulary size, a fixture with stories260K open, and the logits
// of a greedy text.
#ifndef TINYAI_TESTS_KV_LLM_HANDLES_H_
#define TINYAI_TESTS_KV_LLM_HANDLES_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "format/test_models.h"
#include "require_shared.h"
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

// stories260K (the convert_stories260K fixture's) open as model_.
class StoriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = StoriesTmai();
    if (path.empty()) TINYAI_SKIP_WITHOUT_SHARED("stories260K.tmai not found (the convert_stories260K fixture)");
    model_.model = tinyaiOpenMappedModel(path.c_str(), nullptr);
    ASSERT_NE(model_.model, nullptr) << LastMessage();
  }
  ModelHandle model_;
};

// Greedy text from BOS (BOS sampled is taken as token 2), n positions
// evaluated one at a time: every position's logits; *ids (may be nullptr)
// the n tokens evaluated.
inline std::vector<float> GreedyLogits(TinyAILLM* llm, int32_t n, std::vector<int32_t>* ids = nullptr) {
  const size_t vocab = VocabSize(llm);
  std::vector<float> all(vocab * static_cast<size_t>(n));
  std::vector<int32_t> local;
  std::vector<int32_t>* tokens = ids ? ids : &local;
  tokens->assign(1, 1);
  for (int32_t t = 0; t < n; ++t) {
    float* logits = all.data() + static_cast<size_t>(t) * vocab;
    EXPECT_EQ(tinyaiLLMEval(llm, &tokens->back(), 1, logits), TINYAI_OK) << LastMessage();
    size_t best = 0;
    for (size_t i = 1; i < vocab; ++i) best = logits[i] > logits[best] ? i : best;
    tokens->push_back(best == 1 ? 2 : static_cast<int32_t>(best));
  }
  tokens->pop_back();
  return all;
}

}  // namespace testing
}  // namespace tinyai

#endif  // TINYAI_TESTS_KV_LLM_HANDLES_H_
