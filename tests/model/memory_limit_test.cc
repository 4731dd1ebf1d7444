// Generation under TinyAILLMConfig.memoryLimit: a model several times larger
// than the limit runs with the process's peak RSS (VmHWM, from the OS) within
// the limit plus the README's stated overhead, TinyAI's own accounting agrees
// with the OS within 5%, and a limit below the model's minimum fails before
// anything runs. Each test runs in its own process (gtest_discover_tests),
// and the peak is reset (/proc/self/clear_refs) after the model is written,
// so the figures are this test's alone.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "format/test_models.h"
#include "tinyai/llm.h"
#include "tinyai/tinyai.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TINYAI_RSS_MEANINGFUL 0  // sanitizers' shadow memory and quarantines swamp the figures
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TINYAI_RSS_MEANINGFUL 0
#endif
#endif
#ifndef TINYAI_RSS_MEANINGFUL
#define TINYAI_RSS_MEANINGFUL 1
#endif

namespace {

namespace tt = tinyai::testing;
using tt::LastMessage;

// The README's stated allowance for code, libraries, thread stacks and the
// runtime above what TinyAI accounts for.
constexpr uint64_t kOverheadBytes = 16ull << 20;

// Resets VmHWM to the current RSS (Linux >= 4.0); false where unsupported.
bool ResetPeakRss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

// Greedy text of steps positions from prompt; fails the test on an error.
std::string Generate(TinyAILLM* llm, const char* prompt, int32_t steps) {
  TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
  params.steps = steps;
  char text[1024];
  size_t len = 0;
  EXPECT_EQ(tinyaiLLMGenerate(llm, prompt, &params, text, sizeof text, &len, nullptr), TINYAI_OK) << LastMessage();
  return std::string(text, len < sizeof text ? len : sizeof text);
}

class MemoryLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // ~125 MB of weights: 8 blocks of 13.6 MB and a 16 MB tied embedding.
    tinyai::LlamaShape shape;
    shape.dim = 512;
    shape.hidden_dim = 1536;
    shape.layers = 8;
    shape.heads = 8;
    shape.kv_heads = 8;
    shape.vocab_size = 8192;
    shape.seq_len = 64;
    shape.seed = 11;
    path_ = dir_.File("big.tmai");
    ASSERT_EQ(tt::WriteTinyModel(path_, shape), TINYAI_OK) << LastMessage();
  }

  tt::TempDir dir_;
  std::string path_;
};

TEST_F(MemoryLimitTest, PeakRssStaysWithinTheLimitAndAccountingAgrees) {
  constexpr uint64_t kLimit = 24ull << 20;
  const bool reset = ResetPeakRss();
  const uint64_t baseline = tinyaiGetProcessCurrentRss();

  TinyAIMappedModel* model = tinyaiOpenMappedModel(path_.c_str(), nullptr);
  ASSERT_NE(model, nullptr) << LastMessage();
  ASSERT_GE(tinyaiGetMappedModelFileSize(model), 4 * kLimit) << "the model must be at least 4x the limit";
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  cfg.threads = 2;
  cfg.memoryLimit = kLimit;
  TinyAILLM* llm = nullptr;
  ASSERT_EQ(tinyaiCreateLLM(model, &cfg, &llm), TINYAI_OK) << LastMessage();

  // Every position of the context, so the KV cache is committed in full.
  TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
  params.steps = 0;
  TinyAIGenerateStats stats = {sizeof(TinyAIGenerateStats)};
  ASSERT_EQ(tinyaiLLMGenerate(llm, "Once upon a time", &params, nullptr, 0, nullptr, &stats), TINYAI_OK)
      << LastMessage();
  EXPECT_GE(stats.promptTokens + stats.generatedTokens, 64);

  TinyAIMemoryReport mem;
  mem.structSize = sizeof mem;
  ASSERT_EQ(tinyaiGetLLMMemoryReport(llm, &mem), TINYAI_OK) << LastMessage();
  TinyAICacheStats cs;
  cs.structSize = sizeof cs;
  ASSERT_EQ(tinyaiGetMappedModelCacheStats(model, &cs), TINYAI_OK);
  const uint64_t peak = tinyaiGetProcessPeakRss();
  std::printf("limit %llu, TinyAI peak %llu (weights %llu of cap %llu, kv %llu, activations %llu, other %llu), "
              "OS peak %llu over a baseline of %llu; %llu bytes read, %llu evictions\n",
              static_cast<unsigned long long>(kLimit), static_cast<unsigned long long>(mem.peakTotalBytes),
              static_cast<unsigned long long>(mem.weightPeakBytes), static_cast<unsigned long long>(mem.weightCacheCap),
              static_cast<unsigned long long>(mem.kvCacheBytes), static_cast<unsigned long long>(mem.activationBytes),
              static_cast<unsigned long long>(mem.otherBytes), static_cast<unsigned long long>(peak),
              static_cast<unsigned long long>(baseline), static_cast<unsigned long long>(cs.bytesRead),
              static_cast<unsigned long long>(cs.evictions));

  // TinyAI's side: the cap held and the limit was respected.
  EXPECT_LE(mem.peakTotalBytes, kLimit);
  EXPECT_LE(cs.peakHeldBytes, cs.capacity);
  EXPECT_GT(cs.evictions, 0u) << "the model must have streamed through the cache";
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);

  if (!TINYAI_RSS_MEANINGFUL) GTEST_SKIP() << "RSS figures are not meaningful under a sanitizer";
#if defined(TINYAI_TEST_EMULATED)
  GTEST_SKIP() << "RSS figures are the emulator's (its own heap and translated code), not this program's";
#endif
  if (!reset || peak == 0) GTEST_SKIP() << "this kernel cannot reset or report the peak RSS";
  // The OS's side: the whole process within the limit plus the overhead,
  // and the growth over the baseline what TinyAI says it held.
  EXPECT_LE(peak, kLimit + kOverheadBytes);
  const double grown = static_cast<double>(peak - baseline);
  const double accounted = static_cast<double>(mem.peakTotalBytes);
  EXPECT_NEAR(grown, accounted, 0.05 * accounted) << "OS growth " << grown << " vs TinyAI " << accounted;
}

TEST_F(MemoryLimitTest, LimitBelowTheMinimumFailsBeforeRunning) {
  TinyAIMappedModel* model = tinyaiOpenMappedModel(path_.c_str(), nullptr);
  ASSERT_NE(model, nullptr) << LastMessage();
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  TinyAIMemoryReport need;
  need.structSize = sizeof need;
  ASSERT_EQ(tinyaiEstimateLLMMemory(model, &cfg, &need), TINYAI_OK) << LastMessage();
  EXPECT_GT(need.largestSliceBytes, 0u);
  EXPECT_LT(need.minimumMemoryLimit, 8ull << 20) << "row slices, not layers, set the minimum";

  for (uint64_t limit : {need.minimumMemoryLimit - 1, need.minimumMemoryLimit / 2, uint64_t{1}}) {
    SCOPED_TRACE(limit);
    cfg.memoryLimit = static_cast<size_t>(limit);
    TinyAILLM* llm = nullptr;
    EXPECT_EQ(tinyaiCreateLLM(model, &cfg, &llm), TINYAI_ERR_RESOURCE_EXHAUSTED);
    EXPECT_EQ(llm, nullptr);
    const std::string msg = LastMessage();
    EXPECT_NE(msg.find(need.largestSliceTensor), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(limit)), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(need.largestSliceBytes)), std::string::npos) << msg;
  }
  // Exactly the minimum runs.
  cfg.memoryLimit = static_cast<size_t>(need.minimumMemoryLimit);
  TinyAILLM* llm = nullptr;
  ASSERT_EQ(tinyaiCreateLLM(model, &cfg, &llm), TINYAI_OK) << LastMessage();
  EXPECT_FALSE(Generate(llm, "Hi", 8).empty());
  TinyAIMemoryReport mem;
  mem.structSize = sizeof mem;
  ASSERT_EQ(tinyaiGetLLMMemoryReport(llm, &mem), TINYAI_OK);
  EXPECT_LE(mem.peakTotalBytes, need.minimumMemoryLimit);
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
}

TEST_F(MemoryLimitTest, StreamedOutputEqualsUncappedOutput) {
  // The same greedy text with everything resident and through a small cap.
  std::string texts[2];
  for (int capped = 0; capped < 2; ++capped) {
    TinyAIMappedModel* model = tinyaiOpenMappedModel(path_.c_str(), nullptr);
    ASSERT_NE(model, nullptr) << LastMessage();
    TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
    cfg.threads = 2;
    if (capped) cfg.memoryLimit = 12u << 20;
    TinyAILLM* llm = nullptr;
    ASSERT_EQ(tinyaiCreateLLM(model, &cfg, &llm), TINYAI_OK) << LastMessage();
    texts[capped] = Generate(llm, "The cat", 24);
    tinyaiDestroyLLM(llm);
    tinyaiCloseMappedModel(model);
  }
  EXPECT_EQ(texts[0], texts[1]);
  EXPECT_FALSE(texts[0].empty());
}

TEST(MemoryLimitArgs, ReportAndEstimateCheckTheirArguments) {
  TinyAIMemoryReport mem;
  mem.structSize = sizeof mem;
  EXPECT_EQ(tinyaiGetLLMMemoryReport(nullptr, &mem), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiEstimateLLMMemory(nullptr, nullptr, &mem), TINYAI_ERR_INVALID_ARGUMENT);
  tt::TempDir dir;
  ASSERT_EQ(tt::WriteTinyModel(dir.File("tiny.tmai")), TINYAI_OK);
  TinyAIMappedModel* model = tinyaiOpenMappedModel(dir.File("tiny.tmai").c_str(), nullptr);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(tinyaiEstimateLLMMemory(model, nullptr, nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  mem.structSize = 3;
  EXPECT_EQ(tinyaiEstimateLLMMemory(model, nullptr, &mem), TINYAI_ERR_INVALID_ARGUMENT);
  mem.structSize = sizeof mem;
  EXPECT_EQ(tinyaiEstimateLLMMemory(model, nullptr, &mem), TINYAI_OK) << LastMessage();
  tinyaiCloseMappedModel(model);
}

}  // namespace
