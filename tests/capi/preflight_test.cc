// tinyaiPreflightLLM: what tinyaiCreateLLM would choose and hold, before
// anything is allocated, against what a created LLM then holds - over
// stories260K and the default model, every KV type (auto included), two
// context lengths and limits from the least to none: the same mode, KV type
// and rows per pass, and TinyAI's accounted peak after a generation never
// above the estimate, within one row slice of it, and within 5% where the
// weights stay resident or the cache holds 20 slices or more; a limit
// nothing fits fails as tinyaiCreateLLM does, with the same message.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "format/test_models.h"
#include "tinyai/tinyai.h"

namespace tinyai {
namespace {

namespace tt = tinyai::testing;

TinyAIPreflight Preflight(TinyAIMappedModel* m, const TinyAILLMConfig& c, TinyAIStatus want = TINYAI_OK) {
  TinyAIPreflight p;
  std::memset(&p, 0, sizeof p);
  p.structSize = sizeof p;
  EXPECT_EQ(tinyaiPreflightLLM(m, &c, &p), want) << tinyaiGetLastErrorMessage();
  return p;
}

struct Measured {
  TinyAIExecutionMode mode = TINYAI_EXEC_ADAPTIVE;
  int32_t rows = 0;
  TinyAIKVType kv = TINYAI_KV_AUTO;
  uint64_t peak = 0;
};

// Creates the LLM, generates 24 tokens, and reads what it held.
Measured Run(TinyAIMappedModel* m, const TinyAILLMConfig& c) {
  Measured out;
  TinyAILLM* llm = nullptr;
  EXPECT_EQ(tinyaiCreateLLM(m, &c, &llm), TINYAI_OK) << tinyaiGetLastErrorMessage();
  if (llm == nullptr) return out;
  TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
  gp.maxNewTokens = 24;
  gp.sampler.temperature = 0.0f;
  char text[4096];
  size_t len = 0;
  EXPECT_EQ(tinyaiLLMGenerate(llm, "Once upon a time", &gp, text, sizeof text, &len, nullptr), TINYAI_OK)
      << tinyaiGetLastErrorMessage();
  TinyAIMemoryReport r;
  std::memset(&r, 0, sizeof r);
  r.structSize = sizeof r;
  EXPECT_EQ(tinyaiGetLLMMemoryReport(llm, &r), TINYAI_OK);
  TinyAISchedulerReport s;
  std::memset(&s, 0, sizeof s);
  s.structSize = sizeof s;
  EXPECT_EQ(tinyaiGetSchedulerReport(tinyaiGetLLMScheduler(llm), &s), TINYAI_OK);
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  EXPECT_EQ(tinyaiGetLLMModelInfo(llm, &info), TINYAI_OK);
  out.mode = s.mode;
  out.rows = s.rowsPerPass;
  out.kv = info.kvType;
  out.peak = r.peakTotalBytes;
  tinyaiDestroyLLM(llm);
  return out;
}

void CheckModel(const std::string& path) {
  TinyAIMmapConfig mc = tinyaiCreateDefaultMmapConfig();
  mc.maxCacheSize = 0;
  TinyAIMappedModel* m = tinyaiOpenMappedModel(path.c_str(), &mc);
  ASSERT_NE(m, nullptr) << tinyaiGetLastErrorMessage();
  size_t checked = 0, within = 0;
  for (TinyAIKVType kv : {TINYAI_KV_F32, TINYAI_KV_F16, TINYAI_KV_INT8, TINYAI_KV_AUTO}) {
    for (int32_t context : {64, 0}) {
      TinyAILLMConfig c = tinyaiCreateDefaultLLMConfig();
      c.threads = 1;
      c.kvType = kv;
      c.contextLength = context;
      const TinyAIPreflight none = Preflight(m, c);
      ASSERT_EQ(none.mode, TINYAI_EXEC_NORMAL);
      ASSERT_GT(none.minimumMemoryLimit, 0u);
      EXPECT_EQ(none.storageBytesPerToken, 0u);
      EXPECT_GT(none.decodeBytesPerToken, none.kvCacheBytes);
      EXPECT_LE(none.decodeBytesPerToken, none.weightTotalBytes + none.kvCacheBytes);
      const uint64_t least = none.minimumMemoryLimit, all = none.peakBytes;
      for (uint64_t limit : {least, least + (all - least) / 3, all - 1, all, all * 2, uint64_t{0}}) {
        SCOPED_TRACE(path + " kv " + tinyaiKVTypeName(kv) + " context " + std::to_string(context) + " limit " +
                     std::to_string(limit));
        c.memoryLimit = static_cast<size_t>(limit);
        const TinyAIPreflight p = Preflight(m, c);
        EXPECT_EQ(p.memoryLimit, limit);
        EXPECT_EQ(p.peakBytes, p.weightBytes + p.kvCacheBytes + p.activationBytes + p.otherBytes);
        EXPECT_EQ(p.processPeakBytes, p.peakBytes + TINYAI_PROCESS_OVERHEAD_BYTES);
        if (limit != 0) EXPECT_LE(p.peakBytes, limit);
        if (p.mode == TINYAI_EXEC_NORMAL) EXPECT_EQ(p.storageBytesPerToken, 0u);
        // Streaming, what the cap cannot hold of what a token reads comes
        // from storage again (none when the weights a token reads fit it).
        EXPECT_LE(p.storageBytesPerToken, p.decodeBytesPerToken - p.kvCacheBytes);
        if (p.mode != TINYAI_EXEC_NORMAL && p.weightBytes + p.storageBytesPerToken < p.decodeBytesPerToken - p.kvCacheBytes) {
          ADD_FAILURE() << "storage " << p.storageBytesPerToken << " + cache " << p.weightBytes << " below the "
                        << p.decodeBytesPerToken - p.kvCacheBytes << " bytes of weights a token reads";
        }
        const Measured got = Run(m, c);
        EXPECT_EQ(got.mode, p.mode);
        EXPECT_EQ(got.rows, p.rowsPerPass);
        EXPECT_EQ(got.kv, p.kvType);
        // The accounted peak never above the estimate; within 5% of it where
        // the weights stay resident or the cache holds 20 row slices or
        // more - streaming, the cache holds whole slices, so it may stay
        // up to one below its cap.
        EXPECT_LE(got.peak, p.peakBytes);
        EXPECT_GE(got.peak + p.largestSliceBytes, p.peakBytes);
        if (p.mode == TINYAI_EXEC_NORMAL || p.weightBytes >= 20 * p.largestSliceBytes) {
          EXPECT_GE(static_cast<double>(got.peak), 0.95 * static_cast<double>(p.peakBytes))
              << "estimated " << p.peakBytes << ", held at most " << got.peak;
          ++within;
        }
        ++checked;
      }
      // Below the least: the error tinyaiCreateLLM gives, with its remedies.
      c.memoryLimit = static_cast<size_t>(least - 1);
      Preflight(m, c, TINYAI_ERR_RESOURCE_EXHAUSTED);
      TinyAIErrorInfo e;
      std::memset(&e, 0, sizeof e);
      e.structSize = sizeof e;
      ASSERT_EQ(tinyaiGetLastErrorInfo(&e), TINYAI_OK);
      EXPECT_EQ(e.resource, TINYAI_RESOURCE_MEMORY_LIMIT);
      EXPECT_EQ(e.bytesNeeded, least);
      EXPECT_TRUE(e.remedy == TINYAI_REMEDY_RAISE_LIMIT || e.remedy2 == TINYAI_REMEDY_RAISE_LIMIT);
      const std::string message = tinyaiGetLastErrorMessage();
      TinyAILLM* llm = nullptr;
      EXPECT_EQ(tinyaiCreateLLM(m, &c, &llm), TINYAI_ERR_RESOURCE_EXHAUSTED);
      EXPECT_EQ(message, tinyaiGetLastErrorMessage());
    }
  }
  EXPECT_GT(checked, 0u);
  EXPECT_GT(within, 0u);
  tinyaiCloseMappedModel(m);
}

TEST(Preflight, Stories260K) {
  const std::string path = tt::StoriesTmai();
  if (path.empty()) TINYAI_SKIP_WITHOUT_SHARED("stories260K .tmai not found; the convert_stories260K fixture makes it");
  CheckModel(path);
}

TEST(Preflight, TheDefaultModel) {
  const std::string path = tt::Env("TINYAI_DEFAULT_MODEL");
  ASSERT_TRUE(tt::FileExists(path)) << path;
  CheckModel(path);
}

TEST(Preflight, BadArguments) {
  TinyAIPreflight p;
  p.structSize = sizeof p;
  EXPECT_EQ(tinyaiPreflightLLM(nullptr, nullptr, &p), TINYAI_ERR_INVALID_ARGUMENT);
  const std::string path = tt::Env("TINYAI_DEFAULT_MODEL");
  TinyAIMappedModel* m = tinyaiOpenMappedModel(path.c_str(), nullptr);
  ASSERT_NE(m, nullptr) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(tinyaiPreflightLLM(m, nullptr, nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  p.structSize = 4;
  EXPECT_EQ(tinyaiPreflightLLM(m, nullptr, &p), TINYAI_ERR_INVALID_ARGUMENT);
  p.structSize = sizeof p;
  TinyAILLMConfig c = tinyaiCreateDefaultLLMConfig();
  c.kvType = static_cast<TinyAIKVType>(9);
  EXPECT_EQ(tinyaiPreflightLLM(m, &c, &p), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiPreflightLLM(m, nullptr, &p), TINYAI_OK);  // the default config
  EXPECT_GT(p.peakBytes, 0u);
  tinyaiCloseMappedModel(m);
}

}  // namespace
}  // namespace tinyai
