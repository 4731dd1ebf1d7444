// A growable KV cache (TinyAILLMConfig.kvGrowable): the same
// logits as a cache taken whole (positions across chunk boundaries, every
// storage type), token by token equal to the whole prefix bit for bit; the
// memory it holds grows a chunk of 64 positions at a time, never past what
// the estimate plans, and comes back on a reset; under a memory limit the
// weight cache has the room the KV cache has not taken yet and gives it
// back as the cache grows, the sum staying within the limit; a session
// saves and loads through it; bad options are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

using LLM = tt::LLMHandle;

TinyAILLMConfig Config(int32_t type, int32_t growable) {
  TinyAILLMConfig c = tinyaiCreateDefaultLLMConfig();
  c.kvType = static_cast<TinyAIKVType>(type);
  c.kvGrowable = growable;
  return c;
}

size_t Vocab(TinyAILLM* llm) { return tt::VocabSize(llm); }

TinyAIMemoryReport Report(TinyAILLM* llm) {
  TinyAIMemoryReport r;
  std::memset(&r, 0, sizeof r);
  r.structSize = sizeof r;
  EXPECT_EQ(tinyaiGetLLMMemoryReport(llm, &r), TINYAI_OK) << tt::LastMessage();
  return r;
}

int32_t Argmax(const float* v, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i) best = v[i] > v[best] ? i : best;
  return static_cast<int32_t>(best);
}

class Growable : public tt::StoriesTest {};

// 150 positions (three chunks): a growable cache's logits are a whole
// cache's (within 1e-4: its attention sums values in runs of a chunk, and
// the reference kernels round each run's sum; 1.1e-5 seen on armhf without
// NEON, below 1e-5 with SIMD kernels), and
// token by token equal the whole prefix in one evaluation bit for bit
// (within tt::PromptTolerance where the kernels sum a prompt's products in
// another order than a token's: the AVX-512 tables).
TEST_F(Growable, TheSameLogitsAsACacheTakenWhole) {
  for (int32_t type : {TINYAI_KV_F32, TINYAI_KV_F16, TINYAI_KV_INT8}) {
    SCOPED_TRACE(tinyaiKVTypeName(static_cast<TinyAIKVType>(type)));
    const TinyAILLMConfig fc = Config(type, 0), gc = Config(type, 1);
    LLM whole, grow;
    ASSERT_EQ(tinyaiCreateLLM(model_.model, &fc, &whole.llm), TINYAI_OK) << tt::LastMessage();
    ASSERT_EQ(tinyaiCreateLLM(model_.model, &gc, &grow.llm), TINYAI_OK) << tt::LastMessage();
    std::vector<int32_t> ids, ids2;
    const std::vector<float> want = tt::GreedyLogits(whole.llm, 150, &ids);
    const std::vector<float> got = tt::GreedyLogits(grow.llm, 150, &ids2);
    EXPECT_EQ(ids, ids2);
    const size_t vocab = Vocab(grow.llm);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_LE(std::fabs(got[i] - want[i]), 1e-4f * std::max(1.0f, std::fabs(want[i])))
          << "position " << i / vocab << " token " << i % vocab;
    }
    for (size_t t : {0u, 63u, 64u, 100u, 149u}) {
      std::vector<float> prefix(vocab);
      ASSERT_EQ(tinyaiResetLLM(grow.llm), TINYAI_OK);
      for (size_t at = 0; at <= t; at += 32) {  // passes of up to 32 tokens
        const int32_t n = static_cast<int32_t>(t + 1 - at < 32 ? t + 1 - at : 32);
        ASSERT_EQ(tinyaiLLMEval(grow.llm, ids.data() + at, n, prefix.data()), TINYAI_OK) << tt::LastMessage();
      }
      ASSERT_NO_FATAL_FAILURE(tt::ExpectPromptLogits(prefix.data(), got.data() + t * vocab, vocab, type, t));
    }
  }
}

// The cache holds a chunk of positions more at 1, 65 and 129 positions,
// never more than the estimate plans, and nothing but its records after a
// reset.
TEST_F(Growable, MemoryGrowsAChunkAtATime) {
  const TinyAILLMConfig fc = Config(TINYAI_KV_F32, 0), gc = Config(TINYAI_KV_F32, 1);
  TinyAIMemoryReport planned, whole_plan;
  planned.structSize = whole_plan.structSize = sizeof planned;
  ASSERT_EQ(tinyaiEstimateLLMMemory(model_.model, &gc, &planned), TINYAI_OK) << tt::LastMessage();
  ASSERT_EQ(tinyaiEstimateLLMMemory(model_.model, &fc, &whole_plan), TINYAI_OK) << tt::LastMessage();
  // Planned: at least the whole cache's rows, and a little more for the chunks' directories.
  EXPECT_GE(planned.kvCacheBytes, whole_plan.kvCacheBytes - 4096u);
  EXPECT_LE(planned.kvCacheBytes, whole_plan.kvCacheBytes + 4096u);
  EXPECT_GE(planned.minimumMemoryLimit, whole_plan.minimumMemoryLimit);  // the limit plans the whole cache
  EXPECT_LE(planned.minimumMemoryLimit, whole_plan.minimumMemoryLimit + 4096u);

  LLM l;
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &gc, &l.llm), TINYAI_OK) << tt::LastMessage();
  const uint64_t empty = Report(l.llm).kvCacheBytes;
  EXPECT_LT(empty, 4096u);  // records and the chunk table
  // stories260K: 5 layers x 4 KV heads x 64 positions x 32 bytes, keys and values, and 64 tokens,
  // each of the three with the recording allocator's 64-byte header.
  const uint64_t chunk = 2u * 5u * 4u * 64u * 32u + 64u * 4u + 3u * 64u;
  const size_t vocab = Vocab(l.llm);
  std::vector<float> logits(vocab);
  std::vector<uint64_t> held;
  const int32_t token = 5;
  for (int32_t p = 0; p < 512; ++p) {
    ASSERT_EQ(tinyaiLLMEval(l.llm, &token, 1, logits.data()), TINYAI_OK) << tt::LastMessage();
    held.push_back(Report(l.llm).kvCacheBytes);
  }
  for (int32_t p : {0, 63, 64, 127, 128, 511}) {
    const uint64_t chunks = static_cast<uint64_t>(p / 64 + 1);
    EXPECT_GE(held[static_cast<size_t>(p)], empty + chunks * chunk) << "position " << p;
    // The three directories, with their headers.
    EXPECT_LE(held[static_cast<size_t>(p)], empty + chunks * chunk + 256u + 3u * 64u) << "position " << p;
  }
  EXPECT_EQ(held[63], held[0]);
  EXPECT_GT(held[64], held[63]);
  EXPECT_LE(held[511], planned.kvCacheBytes);
  const TinyAIMemoryReport full = Report(l.llm);
  EXPECT_EQ(full.peakTotalBytes, full.weightPeakBytes + held[511] + full.activationBytes + full.otherBytes);
  // Full: no more room.
  EXPECT_EQ(tinyaiLLMEval(l.llm, &token, 1, logits.data()), TINYAI_ERR_CONTEXT_OVERFLOW);
  ASSERT_EQ(tinyaiResetLLM(l.llm), TINYAI_OK);
  EXPECT_EQ(Report(l.llm).kvCacheBytes, empty);
  ASSERT_EQ(tinyaiLLMEval(l.llm, &token, 1, logits.data()), TINYAI_OK);
  EXPECT_EQ(Report(l.llm).kvCacheBytes, held[0]);
}

// Under a memory limit with the weights streamed, the weight cache's cap
// is what a whole cache leaves plus the room the KV cache has not taken:
// it shrinks as the text grows, to a whole cache's at the context's end,
// and the cap, the KV cache, the activations and the tables never sum past
// the limit.
TEST_F(Growable, TheWeightCacheHasTheRoomTheKvCacheHasNotTaken) {
  TinyAILLMConfig fc = Config(TINYAI_KV_F32, 0), gc = Config(TINYAI_KV_F32, 1);
  TinyAIMemoryReport plan;
  plan.structSize = sizeof plan;
  ASSERT_EQ(tinyaiEstimateLLMMemory(model_.model, &fc, &plan), TINYAI_OK) << tt::LastMessage();
  // The least limit, and a little more: weights streamed, the cache small.
  fc.memoryLimit = gc.memoryLimit = static_cast<size_t>(plan.minimumMemoryLimit + 64 * 1024);
  fc.mode = gc.mode = TINYAI_EXEC_MEMORY_OPT;
  LLM whole, grow;
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &fc, &whole.llm), TINYAI_OK) << tt::LastMessage();
  const uint64_t whole_cap = Report(whole.llm).weightCacheCap;
  tinyaiDestroyLLM(whole.llm);  // the cap is shared by the runners on a model: one at a time
  whole.llm = nullptr;
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &gc, &grow.llm), TINYAI_OK) << tt::LastMessage();
  const TinyAIMemoryReport start = Report(grow.llm);
  EXPECT_GT(start.weightCacheCap, whole_cap + 600u * 1024u);  // most of the 659 KB cache lent
  const size_t vocab = Vocab(grow.llm);
  std::vector<float> logits(vocab);
  const int32_t token = 7;
  uint64_t last = start.weightCacheCap, first = 0;
  for (int32_t p = 0; p < 512; ++p) {
    ASSERT_EQ(tinyaiLLMEval(grow.llm, &token, 1, logits.data()), TINYAI_OK) << tt::LastMessage() << " at " << p;
    const TinyAIMemoryReport r = Report(grow.llm);
    ASSERT_LE(r.weightCacheCap + r.kvCacheBytes + r.activationBytes + r.otherBytes, r.memoryLimit) << "position " << p;
    ASSERT_LE(r.weightBytes, r.weightCacheCap) << "position " << p;
    ASSERT_LE(r.weightCacheCap, last) << "position " << p;
    last = r.weightCacheCap;
    if (p == 0) first = last;
  }
  // Weights and KV cache at once: within the limit (their own peaks are not at the same time).
  const TinyAIMemoryReport end = Report(grow.llm);
  EXPECT_LE(end.peakTotalBytes, end.memoryLimit);
  EXPECT_GT(end.weightPeakBytes + end.kvCacheBytes + end.activationBytes + end.otherBytes, end.peakTotalBytes);
  // At the context's end the cap is a whole cache's (less the few bytes the
  // chunks' directories may take beyond it, which the plan reserves).
  EXPECT_GE(last + 4096u, whole_cap);
  EXPECT_LE(last, whole_cap + 4096u);
  // A reset gives the room back.
  ASSERT_EQ(tinyaiResetLLM(grow.llm), TINYAI_OK);
  EXPECT_EQ(Report(grow.llm).weightCacheCap, start.weightCacheCap);
  ASSERT_EQ(tinyaiLLMEval(grow.llm, &token, 1, logits.data()), TINYAI_OK);
  EXPECT_EQ(Report(grow.llm).weightCacheCap, first);
}

// Runners share a model's weight cache, its cap the least any allows. A
// growable runner lends its room only while its cache is small, so another
// runner is checked against the least it will ever allow: a runner that
// needs every weight resident and a growable one whose limit leaves less
// than that (though its lent room is more) are refused together, in
// either order, when the second is created (not later, as the cache
// grows).
TEST_F(Growable, OtherRunnersAreCheckedAgainstTheLeastItWillAllow) {
  TinyAILLMConfig normal = Config(TINYAI_KV_F32, 0);
  normal.mode = TINYAI_EXEC_NORMAL;
  uint64_t resident = 0;
  {
    LLM l;
    ASSERT_EQ(tinyaiCreateLLM(model_.model, &normal, &l.llm), TINYAI_OK) << tt::LastMessage();
    resident = Report(l.llm).weightBytes;  // NORMAL: all of them, loaded at creation
  }
  ASSERT_GT(resident, 500u * 1024u);
  TinyAILLMConfig grow = Config(TINYAI_KV_F32, 1);
  TinyAIMemoryReport plan;
  plan.structSize = sizeof plan;
  ASSERT_EQ(tinyaiEstimateLLMMemory(model_.model, &grow, &plan), TINYAI_OK) << tt::LastMessage();
  // The weights get 100 KB less than they need from the limit, and the cache's 659 KB until it grows.
  grow.memoryLimit = static_cast<size_t>(resident + plan.kvCacheBytes + plan.activationBytes + plan.otherBytes -
                                         100u * 1024u);
  for (int order = 0; order < 2; ++order) {
    SCOPED_TRACE(order == 0 ? "the NORMAL runner first" : "the growable runner first");
    LLM first, second;
    const TinyAILLMConfig& a = order == 0 ? normal : grow;
    const TinyAILLMConfig& b = order == 0 ? grow : normal;
    ASSERT_EQ(tinyaiCreateLLM(model_.model, &a, &first.llm), TINYAI_OK) << tt::LastMessage();
    EXPECT_EQ(tinyaiCreateLLM(model_.model, &b, &second.llm), TINYAI_ERR_RESOURCE_EXHAUSTED);
    EXPECT_EQ(second.llm, nullptr);
  }
  // Alone, the growable runner runs under that limit (the weights streamed).
  LLM alone;
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &grow, &alone.llm), TINYAI_OK) << tt::LastMessage();
  const int32_t token = 3;
  std::vector<float> logits(Vocab(alone.llm));
  for (int i = 0; i < 130; ++i) ASSERT_EQ(tinyaiLLMEval(alone.llm, &token, 1, logits.data()), TINYAI_OK);
  const TinyAIMemoryReport r = Report(alone.llm);
  EXPECT_LE(r.peakTotalBytes, r.memoryLimit);
}

// A session saved from a growable cache loads into another and continues
// bit for bit; into a cache taken whole it loads too (the file holds rows
// by position either way).
TEST_F(Growable, SessionsSaveAndLoadThroughIt) {
  const TinyAILLMConfig gc = Config(TINYAI_KV_INT8, 1), fc = Config(TINYAI_KV_INT8, 0);
  LLM a, b, c;
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &gc, &a.llm), TINYAI_OK);
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &gc, &b.llm), TINYAI_OK);
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &fc, &c.llm), TINYAI_OK);
  std::vector<int32_t> ids;
  tt::GreedyLogits(a.llm, 100, &ids);
  tt::TempDir dir;
  const std::string file = dir.File("g.tsn");
  ASSERT_EQ(tinyaiSaveLLMSession(a.llm, file.c_str()), TINYAI_OK) << tt::LastMessage();
  ASSERT_EQ(tinyaiLoadLLMSession(b.llm, file.c_str()), TINYAI_OK) << tt::LastMessage();
  ASSERT_EQ(tinyaiLoadLLMSession(c.llm, file.c_str()), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(Report(b.llm).kvCacheBytes, Report(a.llm).kvCacheBytes);  // two chunks each
  const size_t vocab = Vocab(a.llm);
  std::vector<float> la(vocab), lb(vocab), lc(vocab);
  int32_t next = ids.back();
  for (int i = 0; i < 40; ++i) {  // across the third chunk's start
    ASSERT_EQ(tinyaiLLMEval(a.llm, &next, 1, la.data()), TINYAI_OK);
    ASSERT_EQ(tinyaiLLMEval(b.llm, &next, 1, lb.data()), TINYAI_OK);
    ASSERT_EQ(tinyaiLLMEval(c.llm, &next, 1, lc.data()), TINYAI_OK);
    ASSERT_EQ(std::memcmp(la.data(), lb.data(), vocab * sizeof(float)), 0) << "step " << i;
    for (size_t j = 0; j < vocab; ++j) ASSERT_NEAR(lc[j], la[j], 1e-4f * std::max(1.0f, std::fabs(la[j])));
    next = Argmax(la.data(), vocab);
  }
}

TEST_F(Growable, BadOptionsAreRefused) {
  LLM l;
  TinyAILLMConfig cfg = Config(TINYAI_KV_F32, 2);
  EXPECT_EQ(tinyaiCreateLLM(model_.model, &cfg, &l.llm), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tt::LastMessage()).find("kvGrowable 2"), std::string::npos) << tt::LastMessage();
  cfg = Config(TINYAI_KV_F32, 1);
  cfg.kvWindow = 64;
  EXPECT_EQ(tinyaiCreateLLM(model_.model, &cfg, &l.llm), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tt::LastMessage()).find("a window's cache is constant"), std::string::npos)
      << tt::LastMessage();
  EXPECT_EQ(l.llm, nullptr);
}

}  // namespace
