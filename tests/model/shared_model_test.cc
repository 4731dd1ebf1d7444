// Runners that share a model, outlive it, or are called back from their own
// text callback:
//  - several LLMs (and schedulers) on one model share its weight cache, and
//    each one's memory limit holds whatever the others ask for;
//  - a runner that would starve another one's NORMAL mode is refused;
//  - destroying a runner twice, or an LLM's scheduler, is TINYAI_ERR_MISUSE;
//  - a runner whose model was closed fails every call with
//    TINYAI_ERR_MISUSE and is still destroyed cleanly (AddressSanitizer
//    checks nothing freed is touched);
//  - a text callback calling back into its own runner is refused with
//    TINYAI_ERR_MISUSE, and the generation it interrupted is unchanged.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "format/test_models.h"
#include "tinyai/tinyai.h"

namespace {

namespace tt = tinyai::testing;
using tt::Contains;
using tt::LastMessage;

TinyAIMappedModel* OpenModel(const std::string& path) {
  TinyAIMappedModel* m = tinyaiOpenMappedModel(path.c_str(), nullptr);
  EXPECT_NE(m, nullptr) << path << ": " << LastMessage();
  return m;
}

TinyAILLM* CreateLLM(TinyAIMappedModel* model, size_t limit, TinyAIExecutionMode mode = TINYAI_EXEC_ADAPTIVE) {
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  cfg.memoryLimit = limit;
  cfg.mode = mode;
  TinyAILLM* llm = nullptr;
  tinyaiCreateLLM(model, &cfg, &llm);
  return llm;
}

TinyAIMemoryReport MemoryOf(const TinyAILLM* llm) {
  TinyAIMemoryReport r;
  std::memset(&r, 0, sizeof r);
  r.structSize = sizeof r;
  EXPECT_EQ(tinyaiGetLLMMemoryReport(llm, &r), TINYAI_OK) << LastMessage();
  return r;
}

TinyAISchedulerReport SchedulerReportOf(const TinyAILLM* llm) {
  TinyAISchedulerReport r;
  std::memset(&r, 0, sizeof r);
  r.structSize = sizeof r;
  EXPECT_EQ(tinyaiGetSchedulerReport(tinyaiGetLLMScheduler(llm), &r), TINYAI_OK) << LastMessage();
  return r;
}

std::string Greedy(TinyAILLM* llm, const char* prompt, int32_t new_tokens) {
  TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
  gp.maxNewTokens = new_tokens;
  std::vector<char> out(1 << 14);
  size_t len = 0;
  EXPECT_EQ(tinyaiLLMGenerate(llm, prompt, &gp, out.data(), out.size(), &len, nullptr), TINYAI_OK) << LastMessage();
  return std::string(out.data());
}

std::string DefaultModel() { return tt::Env("TINYAI_DEFAULT_MODEL"); }

// ---- sharing ------------------------------------------------------------------------

TEST(SharedModel, EachRunnerKeepsItsOwnLimit) {
  TinyAIMappedModel* model = OpenModel(DefaultModel());
  ASSERT_NE(model, nullptr);
  // What a lone runner generates, all weights resident.
  TinyAILLM* lone = CreateLLM(model, 0);
  ASSERT_NE(lone, nullptr) << LastMessage();
  const std::string expected = Greedy(lone, "A man", 60);
  tinyaiDestroyLLM(lone);

  // The case: 2 MB, then 64 MB on the same model (3.7 MB of weights).
  const size_t small_limit = 2u << 20, big_limit = 64u << 20;
  TinyAILLM* small = CreateLLM(model, small_limit);
  ASSERT_NE(small, nullptr) << LastMessage();
  const uint64_t small_cap = MemoryOf(small).weightCacheCap;
  ASSERT_GT(small_cap, 0u);
  TinyAILLM* big = CreateLLM(model, big_limit);
  ASSERT_NE(big, nullptr) << LastMessage();
  // The shared cache keeps the smaller allowance; the big runner streams
  // under it and says why.
  EXPECT_EQ(MemoryOf(big).weightCacheCap, small_cap);
  const TinyAISchedulerReport big_report = SchedulerReportOf(big);
  EXPECT_EQ(big_report.mode, TINYAI_EXEC_MEMORY_OPT);
  EXPECT_TRUE(Contains(big_report.reason, "another runner's memory limit")) << big_report.reason;
  EXPECT_EQ(Greedy(big, "A man", 60), expected);
  EXPECT_EQ(Greedy(small, "A man", 60), expected);
  EXPECT_EQ(Greedy(big, "A man", 60), expected);
  // Every byte the small runner is charged with stayed within its limit
  // while the big one ran (before, the big one lifted the cap to 64 MB).
  const TinyAIMemoryReport small_mem = MemoryOf(small);
  EXPECT_LE(small_mem.weightPeakBytes, small_cap);
  EXPECT_LE(small_mem.peakTotalBytes, small_limit);
  // Gone, its allowance no longer binds: the cap rises to the big one's.
  tinyaiDestroyLLM(small);
  EXPECT_GT(MemoryOf(big).weightCacheCap, small_cap);
  EXPECT_LE(MemoryOf(big).weightCacheCap, big_limit);
  EXPECT_EQ(Greedy(big, "A man", 60), expected);
  tinyaiDestroyLLM(big);
  tinyaiCloseMappedModel(model);
}

TEST(SharedModel, ARunnerThatWouldStarveANormalOneIsRefused) {
  TinyAIMappedModel* model = OpenModel(DefaultModel());
  ASSERT_NE(model, nullptr);
  // NORMAL first (every weight resident), then a runner whose limit would
  // take the shared cache below them.
  TinyAILLM* normal = CreateLLM(model, 0, TINYAI_EXEC_NORMAL);
  ASSERT_NE(normal, nullptr) << LastMessage();
  EXPECT_EQ(CreateLLM(model, 2u << 20), nullptr);
  EXPECT_LAST_ERROR(TINYAI_ERR_RESOURCE_EXHAUSTED, "another runner on the model (NORMAL)");
  const std::string text = Greedy(normal, "A man", 20);
  EXPECT_FALSE(text.empty());
  tinyaiDestroyLLM(normal);
  // The other way round: a limited runner first, then NORMAL is refused
  // when asked for, and chosen away from when left to ADAPTIVE.
  TinyAILLM* small = CreateLLM(model, 2u << 20);
  ASSERT_NE(small, nullptr) << LastMessage();
  EXPECT_EQ(CreateLLM(model, 0, TINYAI_EXEC_NORMAL), nullptr);
  EXPECT_LAST_ERROR(TINYAI_ERR_RESOURCE_EXHAUSTED, "another runner's memory limit");
  TinyAILLM* adaptive = CreateLLM(model, 0);
  ASSERT_NE(adaptive, nullptr) << LastMessage();
  EXPECT_EQ(SchedulerReportOf(adaptive).mode, TINYAI_EXEC_MEMORY_OPT);
  EXPECT_EQ(Greedy(adaptive, "A man", 20), text);
  tinyaiDestroyLLM(adaptive);
  tinyaiDestroyLLM(small);
  tinyaiCloseMappedModel(model);
}

// ---- lifetimes ----------------------------------------------------------------------

class RunnerLifetime : public tt::SyntheticAndStoriesTest {};

TEST_F(RunnerLifetime, DestroyingTwiceIsMisuse) {
  TinyAIMappedModel* model = OpenModel(synthetic_);
  ASSERT_NE(model, nullptr);
  TinyAILLM* llm = CreateLLM(model, 0);
  ASSERT_NE(llm, nullptr) << LastMessage();
  // An LLM's scheduler belongs to the LLM.
  tinyaiClearLastError();
  tinyaiDestroyForwardScheduler(const_cast<TinyAIForwardScheduler*>(tinyaiGetLLMScheduler(llm)));
  EXPECT_LAST_ERROR(TINYAI_ERR_MISUSE, "not a live scheduler");
  EXPECT_FALSE(Greedy(llm, "ab", 5).empty()) << "still whole";
  tinyaiDestroyLLM(llm);
  tinyaiClearLastError();
  tinyaiDestroyLLM(llm);  // a double free before
  EXPECT_LAST_ERROR(TINYAI_ERR_MISUSE, "not a live LLM");

  TinyAIForwardScheduler* s = tinyaiCreateForwardScheduler(model, TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_NE(s, nullptr) << LastMessage();
  tinyaiDestroyForwardScheduler(s);
  tinyaiClearLastError();
  tinyaiDestroyForwardScheduler(s);
  EXPECT_LAST_ERROR(TINYAI_ERR_MISUSE, "not a live scheduler");
  tinyaiCloseMappedModel(model);
}

TEST_F(RunnerLifetime, ARunnerWhoseModelWasClosedFailsEveryCallAndStillDestroys) {
  TinyAIMappedModel* model = OpenModel(synthetic_);
  ASSERT_NE(model, nullptr);
  TinyAILLM* llm = CreateLLM(model, 0);
  ASSERT_NE(llm, nullptr) << LastMessage();
  TinyAIForwardScheduler* s = tinyaiCreateForwardScheduler(model, TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(tinyaiAddModelLayersToSchedule(s), TINYAI_OK);
  ASSERT_EQ(tinyaiPrepareForwardPass(s), TINYAI_OK);
  tinyaiCloseMappedModel(model);  // before its runners: their later calls were use-after-free

  const int32_t token = 1;
  EXPECT_EQ(tinyaiLLMEval(llm, &token, 1, nullptr), TINYAI_ERR_MISUSE);
  EXPECT_TRUE(Contains(LastMessage(), "has been closed")) << LastMessage();
  char text[64];
  std::memset(text, 'X', sizeof text);
  EXPECT_EQ(tinyaiLLMGenerate(llm, "ab", nullptr, text, sizeof text, nullptr, nullptr), TINYAI_ERR_MISUSE);
  int32_t ids[8];
  int32_t count = 0;
  EXPECT_EQ(tinyaiLLMTokenize(llm, "ab", 1, ids, 8, &count), TINYAI_ERR_MISUSE);
  EXPECT_EQ(tinyaiResetLLM(llm), TINYAI_ERR_MISUSE);
  EXPECT_EQ(tinyaiGetLLMPosition(llm), -1);
  TinyAIMemoryReport mem;
  mem.structSize = sizeof mem;
  EXPECT_EQ(tinyaiGetLLMMemoryReport(llm, &mem), TINYAI_ERR_MISUSE);
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  EXPECT_EQ(tinyaiGetLLMModelInfo(llm, &info), TINYAI_ERR_MISUSE);
  EXPECT_EQ(tinyaiGetLLMScheduler(llm), nullptr);

  int layer = 7;
  EXPECT_FALSE(tinyaiExecuteNextLayer(s, "ab", text, &layer));
  EXPECT_EQ(layer, -1);
  EXPECT_EQ(text[0], '\0') << "a failed call leaves an empty string";
  EXPECT_EQ(tinyaiGetSchedulerMemoryUsage(s), 0u);
  EXPECT_EQ(tinyaiPrepareForwardPass(s), TINYAI_ERR_MISUSE);
  TinyAISchedulerReport rep;
  rep.structSize = sizeof rep;
  EXPECT_EQ(tinyaiGetSchedulerReport(s, &rep), TINYAI_ERR_MISUSE);

  tinyaiDestroyForwardScheduler(s);
  tinyaiDestroyLLM(llm);
  // A closed model takes no new runners.
  TinyAILLM* late = nullptr;
  EXPECT_EQ(tinyaiCreateLLM(model, nullptr, &late), TINYAI_ERR_MISUSE);
  EXPECT_EQ(late, nullptr);
  EXPECT_EQ(tinyaiCreateForwardScheduler(model, TINYAI_EXEC_ADAPTIVE, 0), nullptr);
  EXPECT_LAST_ERROR(TINYAI_ERR_MISUSE, "not an open model");
}

// ---- callbacks calling back ---------------------------------------------------------

struct Reentry {
  TinyAILLM* llm = nullptr;
  TinyAIForwardScheduler* sched = nullptr;
  TinyAIMappedModel* model = nullptr;
  int calls = 0;
  std::vector<TinyAIStatus> refused;  // what each mutating call returned
  int32_t position = -2;
  std::string text;
};

int CallBack(const char* piece, size_t len, void* user) {
  Reentry* r = static_cast<Reentry*>(user);
  r->text.append(piece, len);
  if (++r->calls != 3) return 0;
  if (r->llm) {
    const int32_t token = 1;
    r->refused.push_back(tinyaiLLMEval(r->llm, &token, 1, nullptr));
    char out[64];
    r->refused.push_back(tinyaiLLMGenerate(r->llm, "x", nullptr, out, sizeof out, nullptr, nullptr));
    r->refused.push_back(tinyaiResetLLM(r->llm));
    float logits[2] = {0, 1};
    uint64_t rng = 1;
    int32_t next = 0;
    TinyAISamplerConfig sc = tinyaiCreateDefaultSamplerConfig();
    r->refused.push_back(tinyaiLLMSample(r->llm, logits, &sc, &rng, &next));
    tinyaiClearLastError();
    tinyaiDestroyLLM(r->llm);
    r->refused.push_back(tinyaiGetLastError());
    // Reading is fine.
    r->position = tinyaiGetLLMPosition(r->llm);
  }
  if (r->sched) {
    char out[64];
    int layer = 0;
    tinyaiClearLastError();
    if (!tinyaiExecuteNextLayer(r->sched, "x", out, &layer)) r->refused.push_back(tinyaiGetLastError());
    r->refused.push_back(tinyaiPrepareForwardPass(r->sched));
    tinyaiClearLastError();
    tinyaiDestroyForwardScheduler(r->sched);
    r->refused.push_back(tinyaiGetLastError());
  }
  tinyaiClearLastError();
  tinyaiCloseMappedModel(r->model);
  r->refused.push_back(tinyaiGetLastError());
  return 0;
}

TEST_F(RunnerLifetime, ATextCallbackCannotCallBackIntoItsRunner) {
  TinyAIMappedModel* model = OpenModel(synthetic_);
  ASSERT_NE(model, nullptr);
  TinyAILLM* llm = CreateLLM(model, 0);
  ASSERT_NE(llm, nullptr);
  const std::string expected = Greedy(llm, "ab", 12);

  Reentry r;
  r.llm = llm;
  r.model = model;
  TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
  gp.maxNewTokens = 12;
  gp.onText = CallBack;
  gp.user = &r;
  std::vector<char> out(4096);
  ASSERT_EQ(tinyaiLLMGenerate(llm, "ab", &gp, out.data(), out.size(), nullptr, nullptr), TINYAI_OK) << LastMessage();
  EXPECT_EQ(std::string(out.data()), expected) << "the generation the callback tried to disturb is unchanged";
  ASSERT_EQ(r.refused.size(), 6u);
  for (TinyAIStatus s : r.refused) EXPECT_EQ(s, TINYAI_ERR_MISUSE) << tinyaiStatusString(s);
  EXPECT_GE(r.position, 0) << "reading the runner from its callback is allowed";
  tinyaiDestroyLLM(llm);

  // The same from tinyaiExecuteNextLayer's callback.
  TinyAIForwardScheduler* s = tinyaiCreateForwardScheduler(model, TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_NE(s, nullptr);
  Reentry q;
  q.sched = s;
  q.model = model;
  gp.user = &q;
  ASSERT_EQ(tinyaiSetSchedulerGenerateParams(s, &gp), TINYAI_OK);
  ASSERT_EQ(tinyaiAddModelLayersToSchedule(s), TINYAI_OK);
  ASSERT_EQ(tinyaiPrepareForwardPass(s), TINYAI_OK);
  char text[1024];
  int layer = 0;
  while (tinyaiExecuteNextLayer(s, "ab", text, &layer)) {
  }
  EXPECT_EQ(tinyaiGetSchedulerStatus(s), TINYAI_OK) << LastMessage();
  EXPECT_EQ(std::string(text), expected);
  ASSERT_EQ(q.refused.size(), 4u);
  for (TinyAIStatus st : q.refused) EXPECT_EQ(st, TINYAI_ERR_MISUSE) << tinyaiStatusString(st);
  tinyaiDestroyForwardScheduler(s);
  tinyaiCloseMappedModel(model);
}

}  // namespace
