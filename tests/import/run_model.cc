#include "import/run_model.h"

#include <cstring>

#include <gtest/gtest.h>

#include "format/test_models.h"
#include "tinyai/tinyai.h"

namespace tinyai {
namespace testing {

OpenedModel::~OpenedModel() {
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
}

bool OpenedModel::Open(const std::string& path) {
  model = tinyaiOpenMappedModel(path.c_str(), nullptr);
  return model != nullptr && tinyaiCreateLLM(model, nullptr, &llm) == TINYAI_OK;
}

int32_t OpenedModel::vocab() const {
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  tinyaiGetLLMModelInfo(llm, &info);
  return info.vocabSize;
}

std::vector<float> LogitsOf(const std::string& path, const char* text) {
  OpenedModel m;
  EXPECT_TRUE(m.Open(path)) << path << ": " << LastMessage();
  if (m.llm == nullptr) return {};
  int32_t tokens[256];
  int32_t count = 0;
  EXPECT_EQ(tinyaiLLMTokenize(m.llm, text, 1, tokens, 256, &count), TINYAI_OK) << LastMessage();
  const size_t vocab = static_cast<size_t>(m.vocab());
  std::vector<float> out(vocab * static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) {
    EXPECT_EQ(tinyaiLLMEval(m.llm, tokens + i, 1, out.data() + vocab * static_cast<size_t>(i)), TINYAI_OK)
        << LastMessage();
  }
  return out;
}

std::string Greedy(const std::string& path, const char* prompt, int32_t steps) {
  OpenedModel m;
  EXPECT_TRUE(m.Open(path)) << path << ": " << LastMessage();
  if (m.llm == nullptr) return "";
  TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
  params.steps = steps;
  params.sampler.temperature = 0.0f;
  std::vector<char> text(16384);
  size_t len = 0;
  EXPECT_EQ(tinyaiLLMGenerate(m.llm, prompt, &params, text.data(), text.size(), &len, nullptr), TINYAI_OK)
      << LastMessage();
  return std::string(text.data(), len);
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && !a.empty() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace testing
}  // namespace tinyai
