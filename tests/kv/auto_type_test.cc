// TINYAI_KV_AUTO: the scheduler chooses the KV cache's type
// inside the memory limit as it chooses a mode - the most precise of f32,
// f16 and int8 with which the best mode the limit allows fits. On
// stories260K: f32 with no limit or room to spare; around every limit
// where a type reaches a mode, the choice an oracle makes from each type
// asked for by name; a smaller cache taken when it buys NORMAL, and the
// text then equals that type's asked for by name; a requested mode met
// with the most precise type that fits it; below every type's least limit
// a specific status; the estimate plans the same choice; windows and
// growable caches choose too; the model info and the scheduler's reason
// say which and why.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "format/test_models.h"
#include "kv/llm_handles.h"
#include "require_shared.h"
#include "tinyai/llm.h"
#include "tinyai/tinyai.h"

namespace tt = tinyai::testing;

namespace {

TinyAILLMConfig Config(TinyAIKVType type, uint64_t limit, TinyAIExecutionMode mode = TINYAI_EXEC_ADAPTIVE) {
  TinyAILLMConfig c = tinyaiCreateDefaultLLMConfig();
  c.kvType = type;
  c.memoryLimit = static_cast<size_t>(limit);
  c.mode = mode;
  c.contextLength = 256;
  return c;
}

TinyAIModelInfo Info(TinyAILLM* llm) {
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  EXPECT_EQ(tinyaiGetLLMModelInfo(llm, &info), TINYAI_OK) << tt::LastMessage();
  return info;
}

std::string Reason(TinyAILLM* llm) {
  TinyAISchedulerReport rep;
  std::memset(&rep, 0, sizeof rep);
  rep.structSize = sizeof rep;
  EXPECT_EQ(tinyaiGetSchedulerReport(tinyaiGetLLMScheduler(llm), &rep), TINYAI_OK) << tt::LastMessage();
  return rep.reason ? rep.reason : "";
}

TinyAISchedulerReport SchedulerReport(TinyAILLM* llm) {
  TinyAISchedulerReport rep;
  std::memset(&rep, 0, sizeof rep);
  rep.structSize = sizeof rep;
  EXPECT_EQ(tinyaiGetSchedulerReport(tinyaiGetLLMScheduler(llm), &rep), TINYAI_OK) << tt::LastMessage();
  return rep;
}

TinyAIExecutionMode Mode(TinyAILLM* llm) { return SchedulerReport(llm).mode; }

// The rule's order of outcomes: NORMAL, MEMORY_OPT, then STREAMING by its
// rows per pass.
int64_t Rank(TinyAILLM* llm) {
  const TinyAISchedulerReport rep = SchedulerReport(llm);
  if (rep.mode == TINYAI_EXEC_NORMAL) return int64_t{3} << 32;
  if (rep.mode == TINYAI_EXEC_MEMORY_OPT) return int64_t{2} << 32;
  return rep.rowsPerPass;
}

uint64_t PeakAfter(TinyAILLM* llm) {
  TinyAIMemoryReport rep;
  std::memset(&rep, 0, sizeof rep);
  rep.structSize = sizeof rep;
  EXPECT_EQ(tinyaiGetLLMMemoryReport(llm, &rep), TINYAI_OK) << tt::LastMessage();
  return rep.peakTotalBytes;
}

class KvAuto : public tt::StoriesTest {
 protected:
  bool Estimate(const TinyAILLMConfig& c, TinyAIMemoryReport* r) {
    std::memset(r, 0, sizeof *r);
    r->structSize = sizeof *r;
    return tinyaiEstimateLLMMemory(model_.model, &c, r) == TINYAI_OK;
  }
  // Whether an LLM with c can be created (the estimate plans no limit).
  bool Fits(const TinyAILLMConfig& c) {
    tt::LLMHandle llm;
    const TinyAIStatus s = tinyaiCreateLLM(model_.model, &c, &llm.llm);
    EXPECT_TRUE(s == TINYAI_OK || s == TINYAI_ERR_RESOURCE_EXHAUSTED) << tt::LastMessage();
    return s == TINYAI_OK;
  }
  // The least memoryLimit with which base fits (a search over creations).
  uint64_t LeastLimit(TinyAILLMConfig base) {
    uint64_t lo = 1, hi = uint64_t{1} << 28;  // lo fails, hi fits
    base.memoryLimit = static_cast<size_t>(hi);
    EXPECT_TRUE(Fits(base)) << tt::LastMessage();
    while (hi - lo > 1) {
      const uint64_t mid = lo + (hi - lo) / 2;
      base.memoryLimit = static_cast<size_t>(mid);
      (Fits(base) ? hi : lo) = mid;
    }
    return hi;
  }
  uint64_t LeastLimit(TinyAIKVType type, TinyAIExecutionMode mode) { return LeastLimit(Config(type, 0, mode)); }
};

TEST_F(KvAuto, WithoutALimitOrWithRoomToSpareItIsF32) {
  for (uint64_t limit : {uint64_t{0}, uint64_t{256} << 20}) {
    tt::LLMHandle llm;
    const TinyAILLMConfig c = Config(TINYAI_KV_AUTO, limit);
    ASSERT_EQ(tinyaiCreateLLM(model_.model, &c, &llm.llm), TINYAI_OK) << tt::LastMessage();
    const TinyAIModelInfo info = Info(llm.llm);
    EXPECT_EQ(info.kvType, TINYAI_KV_F32) << limit;
    TinyAIMemoryReport f32;
    ASSERT_TRUE(Estimate(Config(TINYAI_KV_F32, limit), &f32)) << tt::LastMessage();
    EXPECT_EQ(info.kvCacheBytes, f32.kvCacheBytes);
    EXPECT_EQ(Mode(llm.llm), TINYAI_EXEC_NORMAL);
    EXPECT_TRUE(tt::Contains(Reason(llm.llm), "f32 KV cache")) << Reason(llm.llm);
  }
}

// Around every limit where a type reaches a mode (each type's least limit
// per mode, one byte either side), AUTO takes what the rule says: the best
// outcome any type reaches there (NORMAL, MEMORY_OPT, STREAMING with the
// most rows per pass), with the most precise type that reaches it - worked
// out from each type asked for by name. Every type is chosen somewhere; the
// estimate plans the same choice, and its least limit is the least type's.
TEST_F(KvAuto, EveryLimitGetsTheMostPreciseTypeOfTheBestOutcome) {
  const TinyAIKVType types[] = {TINYAI_KV_F32, TINYAI_KV_F16, TINYAI_KV_INT8};
  const TinyAIExecutionMode modes[] = {TINYAI_EXEC_NORMAL, TINYAI_EXEC_MEMORY_OPT, TINYAI_EXEC_STREAMING};
  uint64_t kv[3];
  uint64_t least = 0;
  std::vector<uint64_t> limits;
  for (int t = 0; t < 3; ++t) {
    TinyAIMemoryReport r;
    ASSERT_TRUE(Estimate(Config(types[t], 0), &r)) << tt::LastMessage();
    kv[t] = r.kvCacheBytes;
    least = t == 0 || r.minimumMemoryLimit < least ? r.minimumMemoryLimit : least;
    for (TinyAIExecutionMode m : modes) {
      const uint64_t l = LeastLimit(types[t], m);
      for (uint64_t x : {l - 1, l, l + 1, l + 4096}) limits.push_back(x);
    }
  }
  ASSERT_GT(kv[0], kv[1]);
  ASSERT_GT(kv[1], kv[2]);
  TinyAIMemoryReport est;
  ASSERT_TRUE(Estimate(Config(TINYAI_KV_AUTO, 0), &est)) << tt::LastMessage();
  EXPECT_EQ(est.minimumMemoryLimit, least);
  EXPECT_EQ(est.kvCacheBytes, kv[0]);
  bool chosen[3] = {false, false, false};
  for (uint64_t limit : limits) {
    SCOPED_TRACE("limit " + std::to_string(limit));
    int want = -1;
    int64_t want_rank = -1;
    for (int t = 0; t < 3; ++t) {
      tt::LLMHandle named;
      const TinyAILLMConfig c = Config(types[t], limit);
      if (tinyaiCreateLLM(model_.model, &c, &named.llm) != TINYAI_OK) continue;
      if (Rank(named.llm) > want_rank) {
        want = t;
        want_rank = Rank(named.llm);
      }
    }
    tt::LLMHandle llm;
    const TinyAILLMConfig c = Config(TINYAI_KV_AUTO, limit);
    if (want < 0) {
      EXPECT_TRUE(Estimate(c, &est));  // int8's needs
      EXPECT_EQ(est.kvCacheBytes, kv[2]);
      EXPECT_EQ(tinyaiCreateLLM(model_.model, &c, &llm.llm), TINYAI_ERR_RESOURCE_EXHAUSTED);
      EXPECT_LAST_ERROR(TINYAI_ERR_RESOURCE_EXHAUSTED, "int8 KV cache");
      continue;
    }
    chosen[want] = true;
    ASSERT_TRUE(Estimate(c, &est)) << tt::LastMessage();
    EXPECT_EQ(est.kvCacheBytes, kv[want]);
    EXPECT_EQ(est.minimumMemoryLimit, least);
    tinyaiClearLastError();
    ASSERT_EQ(tinyaiCreateLLM(model_.model, &c, &llm.llm), TINYAI_OK) << tt::LastMessage();
    EXPECT_EQ(tinyaiGetLastError(), TINYAI_OK) << "a trial's refusal left behind: " << tt::LastMessage();
    const TinyAIModelInfo info = Info(llm.llm);
    EXPECT_EQ(info.kvType, types[want]);
    EXPECT_EQ(info.kvCacheBytes, kv[want]);
    EXPECT_EQ(Rank(llm.llm), want_rank);
    const std::string why = Reason(llm.llm);
    EXPECT_TRUE(tt::Contains(why, std::string(tinyaiKVTypeName(types[want])) + " KV cache")) << why;
    if (want > 0) EXPECT_TRUE(tt::Contains(why, "chosen: with f")) << why;
    // A prompt and a few tokens within the limit by TinyAI's accounting.
    TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
    params.maxNewTokens = 4;
    char text[512];
    ASSERT_EQ(tinyaiLLMGenerate(llm.llm, "Once upon a time", &params, text, sizeof text, nullptr, nullptr), TINYAI_OK)
        << tt::LastMessage();
    EXPECT_LE(PeakAfter(llm.llm), limit);
  }
  EXPECT_TRUE(chosen[0] && chosen[1] && chosen[2]);
}

// A limit where NORMAL fits with f16 but not with f32: f16 and NORMAL,
// not f32 streamed; the text is f16's asked for by name, bit for bit.
TEST_F(KvAuto, ASmallerCacheIsTakenWhenItBuysABetterMode) {
  const uint64_t normal_f16 = LeastLimit(TINYAI_KV_F16, TINYAI_EXEC_NORMAL);
  const uint64_t normal_f32 = LeastLimit(TINYAI_KV_F32, TINYAI_EXEC_NORMAL);
  ASSERT_LT(normal_f16, normal_f32);
  // (Runners on one model share its weight cache: one at a time here.)
  std::vector<float> chosen_logits;
  {
    tt::LLMHandle chosen;
    const TinyAILLMConfig c = Config(TINYAI_KV_AUTO, normal_f16);
    ASSERT_EQ(tinyaiCreateLLM(model_.model, &c, &chosen.llm), TINYAI_OK) << tt::LastMessage();
    EXPECT_EQ(Info(chosen.llm).kvType, TINYAI_KV_F16);
    EXPECT_EQ(Mode(chosen.llm), TINYAI_EXEC_NORMAL);
    const std::string why = Reason(chosen.llm);
    EXPECT_TRUE(tt::Contains(why, "f16 KV cache")) << why;
    EXPECT_TRUE(tt::Contains(why, "only MEMORY_OPT fits")) << why;
    chosen_logits = tt::GreedyLogits(chosen.llm, 40);
  }
  {
    // f32 asked for by name runs here too, its weights streamed.
    tt::LLMHandle f32;
    const TinyAILLMConfig named = Config(TINYAI_KV_F32, normal_f16);
    ASSERT_EQ(tinyaiCreateLLM(model_.model, &named, &f32.llm), TINYAI_OK) << tt::LastMessage();
    EXPECT_EQ(Mode(f32.llm), TINYAI_EXEC_MEMORY_OPT);
  }
  {
    // The text is f16's asked for by name, bit for bit.
    tt::LLMHandle f16;
    const TinyAILLMConfig named = Config(TINYAI_KV_F16, normal_f16);
    ASSERT_EQ(tinyaiCreateLLM(model_.model, &named, &f16.llm), TINYAI_OK) << tt::LastMessage();
    const std::vector<float> named_logits = tt::GreedyLogits(f16.llm, 40);
    EXPECT_EQ(std::memcmp(chosen_logits.data(), named_logits.data(), named_logits.size() * sizeof(float)), 0);
  }
  // With room for f32 in NORMAL it is f32 again.
  tt::LLMHandle roomy;
  const TinyAILLMConfig r = Config(TINYAI_KV_AUTO, normal_f32);
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &r, &roomy.llm), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(Info(roomy.llm).kvType, TINYAI_KV_F32);
  EXPECT_EQ(Mode(roomy.llm), TINYAI_EXEC_NORMAL);
}

// A requested mode: the most precise type with which it fits.
TEST_F(KvAuto, ARequestedModeIsMetWithTheMostPreciseTypeThatFitsIt) {
  const uint64_t normal_int8 = LeastLimit(TINYAI_KV_INT8, TINYAI_EXEC_NORMAL);
  ASSERT_LT(normal_int8, LeastLimit(TINYAI_KV_F16, TINYAI_EXEC_NORMAL));
  tt::LLMHandle llm;
  const TinyAILLMConfig c = Config(TINYAI_KV_AUTO, normal_int8, TINYAI_EXEC_NORMAL);
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &c, &llm.llm), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(Info(llm.llm).kvType, TINYAI_KV_INT8);
  EXPECT_EQ(Mode(llm.llm), TINYAI_EXEC_NORMAL);
  // One byte less and NORMAL fits with none.
  tt::LLMHandle none;
  const TinyAILLMConfig less = Config(TINYAI_KV_AUTO, normal_int8 - 1, TINYAI_EXEC_NORMAL);
  EXPECT_EQ(tinyaiCreateLLM(model_.model, &less, &none.llm), TINYAI_ERR_RESOURCE_EXHAUSTED);
  EXPECT_LAST_ERROR(TINYAI_ERR_RESOURCE_EXHAUSTED, "NORMAL");
}

// The choice is the persistent state's alone: a window and a growable
// cache choose too (where NORMAL fits with the type and not with the more
// precise one), run with it - the logits of the type asked for by name, bit
// for bit, within the limit - and the name of the choice is never "auto".
TEST_F(KvAuto, WindowsAndGrowableCachesChooseToo) {
  struct Case {
    const char* what;
    int32_t window, sinks, growable;
    TinyAIKVType type;
  } const cases[] = {{"window", 64, 4, 0, TINYAI_KV_INT8}, {"growable", 0, 0, 1, TINYAI_KV_F16}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    TinyAILLMConfig c = Config(k.type, 0, TINYAI_EXEC_NORMAL);
    c.kvWindow = k.window;
    c.kvSinks = k.sinks;
    c.kvGrowable = k.growable;
    c.memoryLimit = static_cast<size_t>(LeastLimit(c));
    TinyAILLMConfig better = c;
    better.kvType = static_cast<TinyAIKVType>(k.type - 1);
    EXPECT_FALSE(Fits(better));
    std::vector<float> named_logits;
    {
      tt::LLMHandle named;
      ASSERT_EQ(tinyaiCreateLLM(model_.model, &c, &named.llm), TINYAI_OK) << tt::LastMessage();
      named_logits = tt::GreedyLogits(named.llm, 100);  // past the window, across a growable chunk
    }
    TinyAILLMConfig a = c;
    a.kvType = TINYAI_KV_AUTO;
    a.mode = TINYAI_EXEC_ADAPTIVE;
    tt::LLMHandle llm;
    ASSERT_EQ(tinyaiCreateLLM(model_.model, &a, &llm.llm), TINYAI_OK) << tt::LastMessage();
    EXPECT_EQ(Info(llm.llm).kvType, k.type);
    EXPECT_EQ(Mode(llm.llm), TINYAI_EXEC_NORMAL);
    const std::vector<float> logits = tt::GreedyLogits(llm.llm, 100);
    EXPECT_EQ(std::memcmp(logits.data(), named_logits.data(), logits.size() * sizeof(float)), 0);
    EXPECT_LE(PeakAfter(llm.llm), a.memoryLimit);
  }
  EXPECT_STREQ(tinyaiKVTypeName(TINYAI_KV_AUTO), "auto");
}

}  // namespace
