// The fallback chain (TinyAILLMConfig.fallback): one test per level a
// chain can reach - a smaller KV type (f16, int8), MEMORY_OPT, STREAMING,
// a KV window - each under the least limit its level runs in, so the level
// before it does not fit; the caller's order; steps that change nothing;
// one clean error, before anything is held, when no level fits; the
// preflight's level equal to creation's; and chains that are refused.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "format/test_models.h"
#include "tinyai/tinyai.h"

namespace tinyai {
namespace {

namespace tt = tinyai::testing;

TinyAIErrorInfo LastInfo() {
  TinyAIErrorInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  EXPECT_EQ(tinyaiGetLastErrorInfo(&info), TINYAI_OK);
  return info;
}

class FallbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("tiny.tmai");
    LlamaShape shape = tt::TinyShape();
    shape.seq_len = 128;
    ASSERT_EQ(tt::WriteTinyModel(path_, shape), TINYAI_OK) << tinyaiGetLastErrorMessage();
    model_ = tinyaiOpenMappedModel(path_.c_str(), nullptr);
    ASSERT_NE(model_, nullptr) << tinyaiGetLastErrorMessage();
  }
  void TearDown() override {
    tinyaiDestroyLLM(llm_);
    tinyaiCloseMappedModel(model_);
  }

  static TinyAILLMConfig Config(TinyAIExecutionMode mode, TinyAIKVType kv) {
    TinyAILLMConfig c = tinyaiCreateDefaultLLMConfig();
    c.threads = 1;
    c.mode = mode;
    c.kvType = kv;
    return c;
  }

  // The least limit c runs under in its own mode (no chain): the bytes a
  // refusal at a limit of 1 byte says the requested mode needs.
  uint64_t Needs(TinyAILLMConfig c) {
    c.memoryLimit = 1;
    TinyAIPreflight p;
    std::memset(&p, 0, sizeof p);
    p.structSize = sizeof p;
    EXPECT_EQ(tinyaiPreflightLLM(model_, &c, &p), TINYAI_ERR_RESOURCE_EXHAUSTED);
    return LastInfo().bytesNeeded;
  }

  // Creates c (with its chain) and returns the chain's report.
  TinyAIFallbackReport Create(const TinyAILLMConfig& c) {
    TinyAIFallbackReport r;
    std::memset(&r, 0, sizeof r);
    r.structSize = sizeof r;
    EXPECT_EQ(tinyaiCreateLLM(model_, &c, &llm_), TINYAI_OK) << tinyaiGetLastErrorMessage();
    if (!llm_) return r;
    EXPECT_EQ(tinyaiGetLLMFallback(llm_, &r), TINYAI_OK) << tinyaiGetLastErrorMessage();
    // The preflight reaches the same level.
    TinyAIPreflight p;
    std::memset(&p, 0, sizeof p);
    p.structSize = sizeof p;
    EXPECT_EQ(tinyaiPreflightLLM(model_, &c, &p), TINYAI_OK) << tinyaiGetLastErrorMessage();
    EXPECT_EQ(p.fallbackLevel, r.level);
    EXPECT_EQ(p.kvType, r.kvType);
    EXPECT_EQ(p.kvWindow, r.kvWindow);
    return r;
  }

  // Generates a few tokens: the level reached runs.
  void Runs() {
    ASSERT_NE(llm_, nullptr);
    TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
    gp.maxNewTokens = 8;
    gp.sampler.temperature = 0.0f;
    char text[1024];
    size_t len = 0;
    EXPECT_EQ(tinyaiLLMGenerate(llm_, "Once upon a time", &gp, text, sizeof text, &len, nullptr), TINYAI_OK)
        << tinyaiGetLastErrorMessage();
  }

  tt::TempDir dir_;
  std::string path_;
  TinyAIMappedModel* model_ = nullptr;
  TinyAILLM* llm_ = nullptr;
};

TEST_F(FallbackTest, AsConfiguredWhenItFits) {
  TinyAILLMConfig c = Config(TINYAI_EXEC_NORMAL, TINYAI_KV_F32);
  c.fallback[0] = TINYAI_FALLBACK_KV_F16;
  const TinyAIFallbackReport r = Create(c);
  EXPECT_EQ(r.level, 0);
  EXPECT_EQ(r.kvType, TINYAI_KV_F32);
  EXPECT_STREQ(r.log, "");
}

TEST_F(FallbackTest, LevelOneAnF16Cache) {
  const uint64_t f32 = Needs(Config(TINYAI_EXEC_NORMAL, TINYAI_KV_F32));
  const uint64_t f16 = Needs(Config(TINYAI_EXEC_NORMAL, TINYAI_KV_F16));
  ASSERT_LT(f16, f32);
  TinyAILLMConfig c = Config(TINYAI_EXEC_NORMAL, TINYAI_KV_F32);
  c.memoryLimit = f16;
  // Without a chain: refused.
  TinyAILLM* none = nullptr;
  EXPECT_EQ(tinyaiCreateLLM(model_, &c, &none), TINYAI_ERR_RESOURCE_EXHAUSTED);
  EXPECT_EQ(none, nullptr);
  c.fallback[0] = TINYAI_FALLBACK_KV_F16;
  c.fallback[1] = TINYAI_FALLBACK_KV_INT8;
  const TinyAIFallbackReport r = Create(c);
  EXPECT_EQ(r.level, 1);
  EXPECT_EQ(r.kvType, TINYAI_KV_F16);
  EXPECT_EQ(r.mode, TINYAI_EXEC_NORMAL);
  EXPECT_NE(std::strstr(r.log, "as configured: needs"), nullptr) << r.log;
  EXPECT_NE(std::strstr(r.log, "1. kv-f16: KV cache f32 -> f16: fits (NORMAL"), nullptr) << r.log;
  EXPECT_EQ(std::strstr(r.log, "2. kv-int8"), nullptr) << r.log;  // never tried
  Runs();
}

TEST_F(FallbackTest, LevelTwoAnInt8Cache) {
  const uint64_t int8 = Needs(Config(TINYAI_EXEC_NORMAL, TINYAI_KV_INT8));
  ASSERT_LT(int8, Needs(Config(TINYAI_EXEC_NORMAL, TINYAI_KV_F16)));
  TinyAILLMConfig c = Config(TINYAI_EXEC_NORMAL, TINYAI_KV_F32);
  c.memoryLimit = int8;
  c.fallback[0] = TINYAI_FALLBACK_KV_F16;
  c.fallback[1] = TINYAI_FALLBACK_KV_INT8;
  const TinyAIFallbackReport r = Create(c);
  EXPECT_EQ(r.level, 2);
  EXPECT_EQ(r.kvType, TINYAI_KV_INT8);
  EXPECT_NE(std::strstr(r.log, "1. kv-f16: KV cache f32 -> f16: needs"), nullptr) << r.log;
  EXPECT_NE(std::strstr(r.log, "2. kv-int8: KV cache f16 -> int8: fits"), nullptr) << r.log;
  Runs();
}

TEST_F(FallbackTest, TheCallersOrderIsKept) {
  // int8 first: taken, though f16 would have fitted.
  TinyAILLMConfig c = Config(TINYAI_EXEC_NORMAL, TINYAI_KV_F32);
  c.memoryLimit = Needs(Config(TINYAI_EXEC_NORMAL, TINYAI_KV_F16));
  c.fallback[0] = TINYAI_FALLBACK_KV_INT8;
  c.fallback[1] = TINYAI_FALLBACK_KV_F16;
  const TinyAIFallbackReport r = Create(c);
  EXPECT_EQ(r.level, 1);
  EXPECT_EQ(r.kvType, TINYAI_KV_INT8);
}

TEST_F(FallbackTest, LevelOneMemoryOpt) {
  const uint64_t memopt = Needs(Config(TINYAI_EXEC_MEMORY_OPT, TINYAI_KV_F32));
  ASSERT_LT(memopt, Needs(Config(TINYAI_EXEC_NORMAL, TINYAI_KV_F32)));
  TinyAILLMConfig c = Config(TINYAI_EXEC_NORMAL, TINYAI_KV_F32);
  c.memoryLimit = memopt;
  c.fallback[0] = TINYAI_FALLBACK_MEMORY_OPT;
  c.fallback[1] = TINYAI_FALLBACK_STREAMING;
  const TinyAIFallbackReport r = Create(c);
  EXPECT_EQ(r.level, 1);
  EXPECT_EQ(r.mode, TINYAI_EXEC_MEMORY_OPT);
  EXPECT_EQ(r.kvType, TINYAI_KV_F32);
  EXPECT_NE(std::strstr(r.log, "mode NORMAL -> MEMORY_OPT: fits (MEMORY_OPT"), nullptr) << r.log;
  Runs();
}

TEST_F(FallbackTest, LevelTwoStreamingWithFewerRows) {
  const uint64_t streaming = Needs(Config(TINYAI_EXEC_STREAMING, TINYAI_KV_F32));
  ASSERT_LT(streaming, Needs(Config(TINYAI_EXEC_MEMORY_OPT, TINYAI_KV_F32)));
  TinyAILLMConfig c = Config(TINYAI_EXEC_NORMAL, TINYAI_KV_F32);
  c.memoryLimit = streaming;
  c.fallback[0] = TINYAI_FALLBACK_MEMORY_OPT;
  c.fallback[1] = TINYAI_FALLBACK_STREAMING;
  const TinyAIFallbackReport r = Create(c);
  EXPECT_EQ(r.level, 2);
  EXPECT_EQ(r.mode, TINYAI_EXEC_STREAMING);
  EXPECT_NE(std::strstr(r.log, "fits (STREAMING, 1 row per pass)"), nullptr) << r.log;
  Runs();
}

TEST_F(FallbackTest, LevelTwoTheLongestKvWindowThatFits) {
  // Below STREAMING's least with the whole context: a window of 32
  // positions (and 4 sinks) fits, the whole context does not.
  TinyAILLMConfig windowed = Config(TINYAI_EXEC_STREAMING, TINYAI_KV_F32);
  windowed.kvWindow = 32;
  windowed.kvSinks = 4;
  const uint64_t limit = Needs(windowed);
  ASSERT_LT(limit, Needs(Config(TINYAI_EXEC_STREAMING, TINYAI_KV_F32)));
  TinyAILLMConfig c = Config(TINYAI_EXEC_NORMAL, TINYAI_KV_F32);
  c.memoryLimit = limit;
  c.kvGrowable = 1;
  c.fallback[0] = TINYAI_FALLBACK_STREAMING;
  c.fallback[1] = TINYAI_FALLBACK_KV_WINDOW;
  const TinyAIFallbackReport r = Create(c);
  EXPECT_EQ(r.level, 2);
  EXPECT_EQ(r.mode, TINYAI_EXEC_STREAMING);
  EXPECT_EQ(r.kvSinks, 4);
  EXPECT_GE(r.kvWindow, 32);
  EXPECT_LE(r.kvWindow, 128 - 4 - 32) << "the sinks and a pass's ring beside it: no longer saves anything";
  EXPECT_NE(std::strstr(r.log, "(no longer growable)"), nullptr) << r.log;
  // The longest: one position more does not fit.
  TinyAILLMConfig longer = Config(TINYAI_EXEC_STREAMING, TINYAI_KV_F32);
  longer.memoryLimit = limit;
  longer.kvWindow = r.kvWindow + 1;
  longer.kvSinks = 4;
  TinyAIPreflight p;
  std::memset(&p, 0, sizeof p);
  p.structSize = sizeof p;
  EXPECT_EQ(tinyaiPreflightLLM(model_, &longer, &p), TINYAI_ERR_RESOURCE_EXHAUSTED);
  Runs();
}

TEST_F(FallbackTest, StepsThatChangeNothingAreSkipped) {
  TinyAILLMConfig c = Config(TINYAI_EXEC_ADAPTIVE, TINYAI_KV_INT8);
  c.memoryLimit = Needs(Config(TINYAI_EXEC_STREAMING, TINYAI_KV_F16));
  c.fallback[0] = TINYAI_FALLBACK_MEMORY_OPT;
  c.fallback[1] = TINYAI_FALLBACK_KV_F16;
  // int8 under ADAPTIVE fits already: level 0, nothing tried.
  TinyAIFallbackReport r = Create(c);
  EXPECT_EQ(r.level, 0);
  tinyaiDestroyLLM(llm_);
  llm_ = nullptr;
  // f32 does not fit that limit in any mode: the mode step is skipped,
  // f16 fits.
  c.kvType = TINYAI_KV_F32;
  r = Create(c);
  EXPECT_EQ(r.level, 1) << "a skipped step is not a level";
  EXPECT_EQ(r.kvType, TINYAI_KV_F16);
  EXPECT_NE(std::strstr(r.log, "1. memory-opt: skipped: ADAPTIVE chooses the mode already"), nullptr) << r.log;
}

TEST_F(FallbackTest, NothingFitsOneCleanErrorBeforeAnyWork) {
  TinyAIMemorySnapshot before;
  std::memset(&before, 0, sizeof before);
  before.structSize = sizeof before;
  ASSERT_EQ(tinyaiGetMemorySnapshot(&before), TINYAI_OK);
  TinyAILLMConfig c = Config(TINYAI_EXEC_NORMAL, TINYAI_KV_F32);
  c.memoryLimit = 4096;
  const TinyAIFallback all[] = {TINYAI_FALLBACK_KV_F16, TINYAI_FALLBACK_KV_INT8, TINYAI_FALLBACK_MEMORY_OPT,
                                TINYAI_FALLBACK_STREAMING, TINYAI_FALLBACK_KV_WINDOW};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) c.fallback[i] = all[i];
  TinyAILLM* llm = nullptr;
  EXPECT_EQ(tinyaiCreateLLM(model_, &c, &llm), TINYAI_ERR_RESOURCE_EXHAUSTED);
  EXPECT_EQ(llm, nullptr);
  const TinyAIErrorInfo info = LastInfo();
  EXPECT_NE(std::strstr(info.message, "the fallback chain (kv-f16, kv-int8, memory-opt, streaming, kv-window) was "
                                      "tried to its end"),
            nullptr)
      << info.message;
  EXPECT_EQ(info.resource, TINYAI_RESOURCE_MEMORY_LIMIT);
  EXPECT_EQ(info.bytesLimit, 4096u);
  EXPECT_GT(info.bytesNeeded, 4096u);
  EXPECT_EQ(info.remedy, TINYAI_REMEDY_RAISE_LIMIT);
  // Every level tried is in the thread's last chain, and asking for it
  // leaves the error as it was.
  TinyAIFallbackReport r;
  std::memset(&r, 0, sizeof r);
  r.structSize = sizeof r;
  ASSERT_EQ(tinyaiGetLLMFallback(nullptr, &r), TINYAI_OK);
  EXPECT_EQ(r.level, 4) << "no window fits: not a level";
  EXPECT_EQ(r.kvType, TINYAI_KV_INT8);
  EXPECT_EQ(r.mode, TINYAI_EXEC_STREAMING);
  EXPECT_EQ(r.kvWindow, 0);
  for (const char* step : {"as configured: needs", "1. kv-f16: KV cache f32 -> f16: needs",
                           "2. kv-int8: KV cache f16 -> int8: needs", "3. memory-opt: mode NORMAL -> MEMORY_OPT: needs",
                           "4. streaming: mode MEMORY_OPT -> STREAMING: needs",
                           "5. kv-window: skipped: no window fits (one position and 4 sinks needs"}) {
    EXPECT_NE(std::strstr(r.log, step), nullptr) << step << " in\n" << r.log;
  }
  EXPECT_EQ(tinyaiGetLastError(), TINYAI_ERR_RESOURCE_EXHAUSTED);
  // Nothing held after it: every trial's tables were given back.
  TinyAIMemorySnapshot after;
  std::memset(&after, 0, sizeof after);
  after.structSize = sizeof after;
  ASSERT_EQ(tinyaiGetMemorySnapshot(&after), TINYAI_OK);
  EXPECT_EQ(after.totalBytes, before.totalBytes);
  // The preflight says the same.
  TinyAIPreflight p;
  std::memset(&p, 0, sizeof p);
  p.structSize = sizeof p;
  EXPECT_EQ(tinyaiPreflightLLM(model_, &c, &p), TINYAI_ERR_RESOURCE_EXHAUSTED);
  EXPECT_NE(std::strstr(tinyaiGetLastErrorMessage(), "tried to its end"), nullptr);
}

TEST_F(FallbackTest, AShortContextLeavesNoRoomForAWindow) {
  // 32 positions: a window's ring alone takes a pass's 32.
  TinyAILLMConfig c = Config(TINYAI_EXEC_NORMAL, TINYAI_KV_F32);
  c.contextLength = 32;
  c.memoryLimit = Needs(c) - 1;
  c.fallback[0] = TINYAI_FALLBACK_KV_WINDOW;
  TinyAILLM* llm = nullptr;
  EXPECT_EQ(tinyaiCreateLLM(model_, &c, &llm), TINYAI_ERR_RESOURCE_EXHAUSTED);
  TinyAIFallbackReport r;
  std::memset(&r, 0, sizeof r);
  r.structSize = sizeof r;
  ASSERT_EQ(tinyaiGetLLMFallback(nullptr, &r), TINYAI_OK);
  EXPECT_EQ(r.level, 0);
  EXPECT_NE(std::strstr(r.log, "1. kv-window: skipped: the context leaves no room for a window"), nullptr) << r.log;
  // The error is the configuration's own: its least limit still holds.
  EXPECT_EQ(LastInfo().bytesNeeded, c.memoryLimit + 1);
}

TEST_F(FallbackTest, TheThreadsLastChainIsOnlyTheLastCallsOwn) {
  TinyAILLMConfig c = Config(TINYAI_EXEC_NORMAL, TINYAI_KV_F32);
  TinyAIFallbackReport r;
  std::memset(&r, 0, sizeof r);
  r.structSize = sizeof r;
  c.memoryLimit = 4096;
  c.fallback[0] = TINYAI_FALLBACK_KV_INT8;
  TinyAILLM* llm = nullptr;
  EXPECT_EQ(tinyaiCreateLLM(model_, &c, &llm), TINYAI_ERR_RESOURCE_EXHAUSTED);
  ASSERT_EQ(tinyaiGetLLMFallback(nullptr, &r), TINYAI_OK);
  EXPECT_EQ(r.level, 1);
  // A later call without a chain, or refused before one ran, leaves none.
  c.fallback[0] = TINYAI_FALLBACK_END;
  EXPECT_EQ(tinyaiCreateLLM(model_, &c, &llm), TINYAI_ERR_RESOURCE_EXHAUSTED);
  ASSERT_EQ(tinyaiGetLLMFallback(nullptr, &r), TINYAI_OK);
  EXPECT_EQ(r.level, -1);
  EXPECT_STREQ(r.log, "");
  c.fallback[0] = TINYAI_FALLBACK_KV_INT8;
  EXPECT_EQ(tinyaiCreateLLM(model_, &c, &llm), TINYAI_ERR_RESOURCE_EXHAUSTED);
  c.fallback[1] = TINYAI_FALLBACK_KV_INT8;  // refused before a chain runs
  EXPECT_EQ(tinyaiCreateLLM(model_, &c, &llm), TINYAI_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(tinyaiGetLLMFallback(nullptr, &r), TINYAI_OK);
  EXPECT_EQ(r.level, -1) << r.log;
  // Another failure ends the chain at once: nothing applied, nothing logged.
  c.fallback[1] = TINYAI_FALLBACK_END;
  c.contextLength = -1;
  EXPECT_EQ(tinyaiCreateLLM(model_, &c, &llm), TINYAI_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(tinyaiGetLLMFallback(nullptr, &r), TINYAI_OK);
  EXPECT_EQ(r.level, 0);
  EXPECT_STREQ(r.log, "");
  EXPECT_EQ(tinyaiGetLastError(), TINYAI_ERR_INVALID_ARGUMENT) << "asking leaves the error";
}

TEST_F(FallbackTest, TheReasonSaysTheModeCameFromTheChain) {
  TinyAILLMConfig c = Config(TINYAI_EXEC_NORMAL, TINYAI_KV_F32);
  c.memoryLimit = Needs(Config(TINYAI_EXEC_MEMORY_OPT, TINYAI_KV_F32));
  c.fallback[0] = TINYAI_FALLBACK_MEMORY_OPT;
  Create(c);
  ASSERT_NE(llm_, nullptr);
  const TinyAIForwardScheduler* s = tinyaiGetLLMScheduler(llm_);
  ASSERT_NE(s, nullptr);
  TinyAISchedulerReport report;
  std::memset(&report, 0, sizeof report);
  report.structSize = sizeof report;
  ASSERT_EQ(tinyaiGetSchedulerReport(s, &report), TINYAI_OK) << tinyaiGetLastErrorMessage();
  ASSERT_NE(report.reason, nullptr);
  EXPECT_NE(std::strstr(report.reason, "MEMORY_OPT (fallback level 1)"), nullptr) << report.reason;
}

TEST_F(FallbackTest, ChainsThatAreNotChainsAreRefusedByName) {
  TinyAILLMConfig c = Config(TINYAI_EXEC_NORMAL, TINYAI_KV_F32);
  TinyAILLM* llm = nullptr;
  c.fallback[0] = static_cast<TinyAIFallback>(9);
  EXPECT_EQ(tinyaiCreateLLM(model_, &c, &llm), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(tinyaiGetLastErrorMessage(), "fallback[0] is 9, not a step"), nullptr)
      << tinyaiGetLastErrorMessage();
  c.fallback[0] = TINYAI_FALLBACK_KV_F16;
  c.fallback[1] = TINYAI_FALLBACK_KV_F16;
  EXPECT_EQ(tinyaiCreateLLM(model_, &c, &llm), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(tinyaiGetLastErrorMessage(), "fallback[1] repeats fallback[0] (kv-f16)"), nullptr)
      << tinyaiGetLastErrorMessage();
  c.fallback[1] = TINYAI_FALLBACK_END;
  c.fallback[2] = TINYAI_FALLBACK_STREAMING;
  TinyAIPreflight p;
  std::memset(&p, 0, sizeof p);
  p.structSize = sizeof p;
  EXPECT_EQ(tinyaiPreflightLLM(model_, &c, &p), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(tinyaiGetLastErrorMessage(), "fallback[2] (streaming) comes after TINYAI_FALLBACK_END"),
            nullptr)
      << tinyaiGetLastErrorMessage();
  EXPECT_EQ(llm, nullptr);
  EXPECT_STREQ(tinyaiFallbackName(TINYAI_FALLBACK_KV_WINDOW), "kv-window");
  EXPECT_STREQ(tinyaiFallbackName(static_cast<TinyAIFallback>(42)), "?");
  EXPECT_EQ(tinyaiGetLLMFallback(nullptr, nullptr), TINYAI_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace tinyai
