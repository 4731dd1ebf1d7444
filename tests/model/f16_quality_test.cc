// What f16 weights cost in quality on a real model: stories260K converted
// with --dtype f16 against the same checkpoint as f32 (the figures are in
// docs/benchmarks.md). Over 2,400 positions of text the f32 model
// samples (teacher forcing both models), the mean KL divergence of the f16
// model's next-token distribution from the f32 one's and their top-1
// agreement; and which golden greedy texts the f16 model still reproduces
// byte for byte. The bounds pin the measured figures with some room.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "import/model_builder.h"
#include "format/test_models.h"
#include "require_shared.h"
#include "tinyai/llm.h"
#include "tinyai/tinyai.h"
#include "tinyai/utils/mmap_loader.h"

namespace tt = tinyai::testing;

namespace {

struct Opened {
  TinyAIMappedModel* model = nullptr;
  TinyAILLM* llm = nullptr;
  ~Opened() {
    tinyaiDestroyLLM(llm);
    tinyaiCloseMappedModel(model);
  }
  bool Open(const std::string& path) {
    model = tinyaiOpenMappedModel(path.c_str(), nullptr);
    return model != nullptr && tinyaiCreateLLM(model, nullptr, &llm) == TINYAI_OK;
  }
};

std::vector<double> Softmax(const std::vector<float>& logits) {
  double max = logits[0];
  for (float v : logits) max = v > max ? v : max;
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp(logits[i] - max);
  for (double& v : p) v /= sum;
  return p;
}

size_t ArgMax(const std::vector<float>& v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i) best = v[i] > v[best] ? i : best;
  return best;
}

class F16Quality : public ::testing::Test {
 protected:
  void SetUp() override {
    stories_ = tt::StoriesDir();
    if (stories_.empty()) TINYAI_SKIP_WITHOUT_SHARED("stories260K not found under " << tt::Env("TINYAI_SHARED_DIR"));
    for (TinyAIDType d : {TINYAI_DTYPE_F32, TINYAI_DTYPE_F16}) {
      tinyai::WriteOptions o;
      o.matrix_dtype = d;
      const std::string path = dir_.File(std::string("stories-") + tinyaiDTypeName(d) + ".tmai");
      ASSERT_EQ(tinyai::ConvertLlama2c((stories_ + "/stories260K.bin").c_str(), (stories_ + "/tok512.bin").c_str(),
                                       path.c_str(), nullptr, o, nullptr),
                TINYAI_OK)
          << tt::LastMessage();
      ASSERT_TRUE((d == TINYAI_DTYPE_F32 ? f32_ : f16_).Open(path)) << tt::LastMessage();
    }
  }
  std::string stories_;
  tt::TempDir dir_;
  Opened f32_, f16_;
};

TEST_F(F16Quality, NextTokenDistributionsStayCloseToF32) {
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  ASSERT_EQ(tinyaiGetLLMModelInfo(f32_.llm, &info), TINYAI_OK);
  const size_t vocab = static_cast<size_t>(info.vocabSize);
  std::vector<float> l32(vocab), l16(vocab);
  std::mt19937_64 rng(14);
  double kl_sum = 0, kl_max = 0;
  int positions = 0, agree = 0;
  for (int sequence = 0; sequence < 8; ++sequence) {
    ASSERT_EQ(tinyaiResetLLM(f32_.llm), TINYAI_OK);
    ASSERT_EQ(tinyaiResetLLM(f16_.llm), TINYAI_OK);
    int32_t token = 1;  // BOS
    for (int t = 0; t < 300; ++t) {
      ASSERT_EQ(tinyaiLLMEval(f32_.llm, &token, 1, l32.data()), TINYAI_OK) << tt::LastMessage();
      ASSERT_EQ(tinyaiLLMEval(f16_.llm, &token, 1, l16.data()), TINYAI_OK) << tt::LastMessage();
      const std::vector<double> p = Softmax(l32), q = Softmax(l16);
      double kl = 0;
      for (size_t i = 0; i < vocab; ++i) {
        if (p[i] > 0) kl += p[i] * std::log(p[i] / q[i]);
      }
      kl_sum += kl;
      kl_max = kl > kl_max ? kl : kl_max;
      agree += ArgMax(l32) == ArgMax(l16);
      ++positions;
      // The next token: sampled from the f32 model (temperature 1).
      double u = std::uniform_real_distribution<double>(0, 1)(rng), c = 0;
      size_t next = vocab - 1;
      for (size_t i = 0; i < vocab; ++i) {
        if ((c += p[i]) > u) {
          next = i;
          break;
        }
      }
      token = static_cast<int32_t>(next);
    }
  }
  const double mean_kl = kl_sum / positions, top1 = static_cast<double>(agree) / positions;
  std::printf("f16 vs f32, stories260K: %d positions, mean KL %.3g (max %.3g), top-1 agreement %.4f\n", positions,
              mean_kl, kl_max, top1);
  EXPECT_GE(positions, 2000);
  // Measured 2026-11-24 on x86 (AVX2): mean KL 6.1e-7 (max 4.0e-5), top-1 0.9992.
  EXPECT_LT(mean_kl, 5e-6);
  EXPECT_GT(top1, 0.995);
}

TEST_F(F16Quality, GoldenGreedyTexts) {
  const std::string golden = tt::Env("TINYAI_SHARED_DIR") + "/golden/stories260K/";
  int matched = 0, total = 0;
  for (int i = 1; i <= 3; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "greedy-%02d", i);
    tt::Bytes prompt, expected;
    if (!tt::ReadFileBytes(golden + name + ".prompt", &prompt) ||
        !tt::ReadFileBytes(golden + name + ".expected", &expected)) {
      TINYAI_SKIP_WITHOUT_SHARED("golden texts not found under " << golden);
    }
    TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
    gp.steps = 256;
    gp.maxNewTokens = 0;
    gp.sampler.temperature = 0.0f;
    std::vector<char> text(8192);
    size_t len = 0;
    ASSERT_EQ(tinyaiLLMGenerate(f16_.llm, std::string(prompt.begin(), prompt.end()).c_str(), &gp, text.data(),
                             text.size(), &len, nullptr),
              TINYAI_OK)
        << tt::LastMessage();
    // The reference prints a final newline; tinyaiLLMGenerate does not.
    const std::string want(expected.begin(), expected.end() - 1), got(text.data(), len);
    ++total;
    if (got == want) {
      ++matched;
    } else {
      size_t at = 0;
      while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
      std::printf("f16 %s differs from the golden text from byte %zu of %zu\n", name, at, want.size());
    }
  }
  std::printf("f16 reproduces %d of %d golden greedy texts byte for byte\n", matched, total);
  EXPECT_EQ(matched, 3) << "measured 2026-11-24: all three";
}

}  // namespace
