// What the KV tests share: owning handles for a model and an LLM, an
// LLM's vocabulary size, a fixture with stories260K open, and the logits
// of a greedy text.
#ifndef TINYAI_TESTS_KV_LLM_HANDLES_H_
#define TINYAI_TESTS_KV_LLM_HANDLES_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "format/test_models.h"
#include "kernels/kernels.h"
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

// Whether a prompt's products give each token the bits a token evaluated
// alone gets: the best table's fp32 matmul over 32 inputs (a prompt pass)
// against its matvec input by input. True for every table but the AVX-512
// ones, whose products from 12 inputs on (src/kernels/simd/matmul_avx512.h)
// sum each output along its columns where the matvec sums in 16 lanes: a
// prompt then agrees with token by token evaluation within fp32 rounding.
inline bool PromptRowsAreTokenRows() {
  const kernels::WeightKernels* wk = kernels::WeightKernelsFor(kernels::Best(), TINYAI_DTYPE_F32);
  constexpr size_t kRows = 24, kCols = 96, kInputs = 32;
  std::vector<float> w(kRows * kCols), x(kInputs * kCols), batch(kInputs * kRows), alone(kInputs * kRows);
  uint32_t state = 1;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 16777216.0f - 0.5f;
  };
  for (float& v : w) v = next();
  for (float& v : x) v = next();
  const uint8_t* rows = reinterpret_cast<const uint8_t*>(w.data());
  wk->matmul(rows, kCols * sizeof(float), x.data(), kCols, batch.data(), kRows, kRows, kCols, kInputs);
  for (size_t j = 0; j < kInputs; ++j) wk->matvec(rows, kCols * sizeof(float), x.data() + j * kCols, alone.data() + j * kRows, kRows, kCols);
  return std::memcmp(batch.data(), alone.data(), batch.size() * sizeof(float)) == 0;
}

// How far a prompt's logits may be from the same tokens evaluated one at a
// time, relative to max(1, |logit|): 0 (the same bits) where
// PromptRowsAreTokenRows(); else fp32 rounding, which an f16 or int8 KV
// cache can turn into one step of its own rounding for a key or a value.
// Seen on stories260K (AVX-512, Zen 4): at most 9e-6 (f32), 3.6e-3 (f16),
// 4.8e-3 (int8).
inline float PromptTolerance(int32_t kv_type) {
  if (PromptRowsAreTokenRows()) return 0.0f;
  return kv_type == TINYAI_KV_F32 ? 3e-5f : 2e-2f;
}

// A prompt's logits (got) against the same position evaluated token by
// token (want), vocab of each: the same bits where PromptTolerance(kv_type)
// is 0, and within it (at least 1e-5) of max(1, |want|) everywhere.
inline void ExpectPromptLogits(const float* got, const float* want, size_t vocab, int32_t kv_type, size_t position) {
  const float tolerance = PromptTolerance(kv_type);
  if (tolerance == 0.0f) EXPECT_EQ(std::memcmp(got, want, vocab * sizeof(float)), 0) << "position " << position;
  for (size_t i = 0; i < vocab; ++i) {
    ASSERT_LE(std::fabs(got[i] - want[i]), std::max(tolerance, 1e-5f) * std::max(1.0f, std::fabs(want[i])))
        << "position " << position << " token " << i;
  }
}

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
