// The recording allocator and its observer (tinyaiSetMemoryObserver,
// tinyaiGetMemorySnapshot): the stages of a run in order, every byte given
// back when the LLM and the model are gone, the categories against the
// LLM's own figures (KV cache, arena, weight cache), TinyAI's recorded peak
// inside a memory limit, the KV cache's touched bytes following the
// positions, the OS's side on a port that has one, and the errors.
// (TheRecordedPeakStaysInsideTheLimit found the plan 9.7 KB short of what
// the runner holds at its least limit - the runner object, the allocator's
// headers, the model object: now counted, and Prepare() checks.)
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "format/test_models.h"
#include "tinyai/tinyai.h"

namespace tinyai {
namespace {

namespace tt = tinyai::testing;

struct Seen {
  std::vector<TinyAIMemorySnapshot> snapshots;
};

void Record(const TinyAIMemorySnapshot* s, void* user) { static_cast<Seen*>(user)->snapshots.push_back(*s); }

TinyAIMemorySnapshot Now() {
  TinyAIMemorySnapshot s;
  std::memset(&s, 0, sizeof s);
  s.structSize = sizeof s;
  EXPECT_EQ(tinyaiGetMemorySnapshot(&s), TINYAI_OK) << tinyaiGetLastErrorMessage();
  return s;
}

TinyAIModelInfo Info(const TinyAILLM* llm) {
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  EXPECT_EQ(tinyaiGetLLMModelInfo(llm, &info), TINYAI_OK) << tinyaiGetLastErrorMessage();
  return info;
}

TinyAILLM* CreateOneThread(TinyAIMappedModel* model) {
  TinyAILLMConfig config = tinyaiCreateDefaultLLMConfig();
  config.threads = 1;
  TinyAILLM* llm = nullptr;
  EXPECT_EQ(tinyaiCreateLLM(model, &config, &llm), TINYAI_OK) << tinyaiGetLastErrorMessage();
  return llm;
}

class MemoryLedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("tiny.tmai");
    LlamaShape shape = tt::TinyShape();
    shape.seq_len = 128;
    ASSERT_EQ(tt::WriteTinyModel(path_, shape), TINYAI_OK) << tinyaiGetLastErrorMessage();
  }
  void TearDown() override { tinyaiSetMemoryObserver(nullptr, nullptr, 0); }

  // Opens, creates, generates `tokens` greedily, destroys and closes.
  void RunOnce(const TinyAILLMConfig& config, int32_t tokens, TinyAIMemoryReport* report = nullptr) {
    TinyAIMappedModel* model = tinyaiOpenMappedModel(path_.c_str(), nullptr);
    ASSERT_NE(model, nullptr) << tinyaiGetLastErrorMessage();
    TinyAILLM* llm = nullptr;
    ASSERT_EQ(tinyaiCreateLLM(model, &config, &llm), TINYAI_OK) << tinyaiGetLastErrorMessage();
    TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
    gp.maxNewTokens = tokens;
    gp.sampler.temperature = 0.0f;
    char text[4096];
    size_t len = 0;
    EXPECT_EQ(tinyaiLLMGenerate(llm, "Once upon a time", &gp, text, sizeof text, &len, nullptr), TINYAI_OK)
        << tinyaiGetLastErrorMessage();
    if (report) {
      std::memset(report, 0, sizeof *report);
      report->structSize = sizeof *report;
      EXPECT_EQ(tinyaiGetLLMMemoryReport(llm, report), TINYAI_OK);
    }
    tinyaiDestroyLLM(llm);
    tinyaiCloseMappedModel(model);
  }

  tt::TempDir dir_;
  std::string path_;
};

TEST_F(MemoryLedgerTest, StagesComeInOrderAndEveryByteIsGivenBack) {
  const TinyAIMemorySnapshot before = Now();
  Seen seen;
  ASSERT_EQ(tinyaiSetMemoryObserver(Record, &seen, 4), TINYAI_OK);
  TinyAILLMConfig config = tinyaiCreateDefaultLLMConfig();
  config.threads = 1;
  RunOnce(config, 20);
  std::vector<std::string> stages;
  int64_t last_tokens = 0;
  for (const TinyAIMemorySnapshot& s : seen.snapshots) {
    EXPECT_EQ(s.structSize, sizeof s);
    EXPECT_STREQ(s.stageName, tinyaiMemoryStageName(s.stage));
    if (s.stage == TINYAI_MEMORY_STAGE_TOKENS) {
      EXPECT_GT(s.tokens / 4, last_tokens / 4) << "a multiple of 4 positions crossed";
      last_tokens = s.tokens;
      continue;
    }
    stages.push_back(s.stageName);
  }
  const std::vector<std::string> want = {"open", "index", "plan", "warmup", "first_token", "close", "close"};
  EXPECT_EQ(stages, want);
  EXPECT_GE(last_tokens, 20);
  // The LLM and the model gone, TinyAI holds what it held before.
  ASSERT_FALSE(seen.snapshots.empty());
  EXPECT_EQ(seen.snapshots.back().totalBytes, before.totalBytes);
  EXPECT_EQ(seen.snapshots.back().allocations, before.allocations);
  const TinyAIMemorySnapshot after = Now();
  for (int c = 0; c < TINYAI_MEMORY_CATEGORY_COUNT; ++c) {
    EXPECT_EQ(after.bytes[c], before.bytes[c]) << tinyaiMemoryCategoryName(static_cast<TinyAIMemoryCategory>(c));
  }
  EXPECT_EQ(after.kvTouchedBytes, before.kvTouchedBytes);
  // The peak is at least what any stage held, and each stage's own peak too.
  for (const TinyAIMemorySnapshot& s : seen.snapshots) {
    EXPECT_LE(s.totalBytes, s.stagePeakBytes);
    EXPECT_LE(s.stagePeakBytes, s.peakTotalBytes);
    uint64_t sum = 0;
    for (uint64_t b : s.bytes) sum += b;
    EXPECT_EQ(sum, s.totalBytes) << s.stageName;
    EXPECT_LE(s.headerBytes, s.totalBytes);
  }
}

TEST_F(MemoryLedgerTest, CategoriesHoldWhatTheLLMSaysItHolds) {
  TinyAIMappedModel* model = tinyaiOpenMappedModel(path_.c_str(), nullptr);
  ASSERT_NE(model, nullptr) << tinyaiGetLastErrorMessage();
  const TinyAIMemorySnapshot opened = Now();
  EXPECT_GT(opened.bytes[TINYAI_MEMORY_MODEL], 0u) << "the index and tables";
  TinyAILLM* llm = CreateOneThread(model);
  ASSERT_NE(llm, nullptr) << tinyaiGetLastErrorMessage();
  const TinyAIModelInfo info = Info(llm);
  TinyAIMemoryReport report;
  std::memset(&report, 0, sizeof report);
  report.structSize = sizeof report;
  ASSERT_EQ(tinyaiGetLLMMemoryReport(llm, &report), TINYAI_OK);
  const TinyAIMemorySnapshot s = Now();
  // The KV cache's store and the activation arena, each with the
  // allocator's headers (at most 64 bytes an allocation).
  EXPECT_GE(s.bytes[TINYAI_MEMORY_KV], info.kvCacheBytes);
  EXPECT_LE(s.bytes[TINYAI_MEMORY_KV], info.kvCacheBytes + 4096);
  EXPECT_GE(s.bytes[TINYAI_MEMORY_ACTIVATIONS], info.activationBytes);
  EXPECT_LE(s.bytes[TINYAI_MEMORY_ACTIVATIONS], info.activationBytes + 64);
  // The weight cache's pages, as its own count has them.
  EXPECT_EQ(s.bytes[TINYAI_MEMORY_WEIGHTS], report.weightBytes);
  EXPECT_GT(s.bytes[TINYAI_MEMORY_TEXT], 0u) << "tokenizer and sampler";
  EXPECT_EQ(s.kvReservedBytes, s.bytes[TINYAI_MEMORY_KV]);
  EXPECT_EQ(s.kvTouchedBytes, 0u) << "no position evaluated yet";
  // The LLM's own account (its report, the plan's figures corrected by what
  // Prepare found taken) and the recorded one agree to the byte but for the
  // model's tables (listed once at open).
  const uint64_t recorded = s.totalBytes - opened.totalBytes + opened.bytes[TINYAI_MEMORY_MODEL];
  const uint64_t planned = report.totalBytes;
  const uint64_t gap = recorded > planned ? recorded - planned : planned - recorded;
  EXPECT_LE(gap, 256u) << "recorded " << recorded << ", the report " << planned;
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
}

TEST_F(MemoryLedgerTest, TouchedKvFollowsThePositions) {
  TinyAIMappedModel* model = tinyaiOpenMappedModel(path_.c_str(), nullptr);
  ASSERT_NE(model, nullptr) << tinyaiGetLastErrorMessage();
  TinyAILLM* llm = CreateOneThread(model);
  ASSERT_NE(llm, nullptr) << tinyaiGetLastErrorMessage();
  const TinyAIModelInfo info = Info(llm);
  std::vector<int32_t> tokens(32, 5);
  ASSERT_EQ(tinyaiLLMEval(llm, tokens.data(), 16, nullptr), TINYAI_OK) << tinyaiGetLastErrorMessage();
  const TinyAIMemorySnapshot at16 = Now();
  ASSERT_EQ(tinyaiLLMEval(llm, tokens.data(), 16, nullptr), TINYAI_OK) << tinyaiGetLastErrorMessage();
  const TinyAIMemorySnapshot at32 = Now();
  // A fixed cache of 128 positions: a quarter, then half of it, by rows.
  const uint64_t per_position = info.kvCacheBytes / static_cast<uint64_t>(info.contextLength);
  EXPECT_NEAR(static_cast<double>(at16.kvTouchedBytes), 16.0 * per_position, per_position);
  EXPECT_NEAR(static_cast<double>(at32.kvTouchedBytes), 32.0 * per_position, per_position);
  EXPECT_LE(at32.kvTouchedBytes, at32.kvReservedBytes);
  // A reset writes over the same rows: nothing new touched.
  ASSERT_EQ(tinyaiResetLLM(llm), TINYAI_OK);
  ASSERT_EQ(tinyaiLLMEval(llm, tokens.data(), 8, nullptr), TINYAI_OK);
  EXPECT_EQ(Now().kvTouchedBytes, at32.kvTouchedBytes);
  tinyaiDestroyLLM(llm);
  EXPECT_EQ(Now().kvTouchedBytes, 0u);
  tinyaiCloseMappedModel(model);
}

TEST_F(MemoryLedgerTest, TheRecordedPeakStaysInsideTheLimit) {
  TinyAIMappedModel* model = tinyaiOpenMappedModel(path_.c_str(), nullptr);
  ASSERT_NE(model, nullptr) << tinyaiGetLastErrorMessage();
  TinyAILLMConfig config = tinyaiCreateDefaultLLMConfig();
  config.threads = 1;
  TinyAIPreflight p;
  std::memset(&p, 0, sizeof p);
  p.structSize = sizeof p;
  ASSERT_EQ(tinyaiPreflightLLM(model, &config, &p), TINYAI_OK) << tinyaiGetLastErrorMessage();
  tinyaiCloseMappedModel(model);
  for (uint64_t limit : {p.minimumMemoryLimit, p.minimumMemoryLimit + p.weightTotalBytes / 3,
                         p.minimumMemoryLimit + p.weightTotalBytes}) {
    SCOPED_TRACE("limit " + std::to_string(limit));
    const TinyAIMemorySnapshot before = Now();
    Seen seen;
    ASSERT_EQ(tinyaiSetMemoryObserver(Record, &seen, 1), TINYAI_OK);
    config.memoryLimit = static_cast<size_t>(limit);
    RunOnce(config, 24);
    ASSERT_EQ(tinyaiSetMemoryObserver(nullptr, nullptr, 0), TINYAI_OK);
    ASSERT_FALSE(seen.snapshots.empty());
    const uint64_t peak = seen.snapshots.back().peakTotalBytes - before.totalBytes;
    // Everything recorded - the runner, its tables and headers, the model's
    // own - within the limit, at the least limit too.
    EXPECT_LE(peak, limit) << "TinyAI held " << peak << " bytes at most";
    EXPECT_GE(peak, limit / 2) << "the limit is the model's least: TinyAI holds most of it";
  }
}

// A growable KV cache takes 64 positions at a time, three allocations a
// chunk (keys, values, tokens) and directories that double: with their
// headers, what it holds stays inside the limit as it grows, at the least
// limit too, and after a reset gives the chunks back and takes them again.
TEST_F(MemoryLedgerTest, AGrowableCacheStaysInsideTheLimitAsItGrowsAndResets) {
  const std::string long_path = dir_.File("long.tmai");
  LlamaShape shape = tt::TinyShape();
  shape.seq_len = 1024;
  ASSERT_EQ(tt::WriteTinyModel(long_path, shape), TINYAI_OK) << tinyaiGetLastErrorMessage();
  const TinyAIMemorySnapshot unopened = Now();
  TinyAIMappedModel* model = tinyaiOpenMappedModel(long_path.c_str(), nullptr);
  ASSERT_NE(model, nullptr) << tinyaiGetLastErrorMessage();
  TinyAILLMConfig config = tinyaiCreateDefaultLLMConfig();
  config.threads = 1;
  config.kvGrowable = 1;
  TinyAIPreflight p;
  std::memset(&p, 0, sizeof p);
  p.structSize = sizeof p;
  ASSERT_EQ(tinyaiPreflightLLM(model, &config, &p), TINYAI_OK) << tinyaiGetLastErrorMessage();
  config.memoryLimit = static_cast<size_t>(p.minimumMemoryLimit);
  TinyAILLM* llm = nullptr;
  ASSERT_EQ(tinyaiCreateLLM(model, &config, &llm), TINYAI_OK) << tinyaiGetLastErrorMessage();
  std::vector<int32_t> tokens(32, 5);
  uint64_t grown = 0;
  for (int round = 0; round < 2; ++round) {
    for (int32_t at = 0; at + 32 <= 1024; at += 32) {
      ASSERT_EQ(tinyaiLLMEval(llm, tokens.data(), 32, nullptr), TINYAI_OK) << tinyaiGetLastErrorMessage();
    }
    const TinyAIMemorySnapshot s = Now();
    // Everything recorded - the model's own too - within the limit.
    const uint64_t peak = s.peakTotalBytes - unopened.totalBytes;
    EXPECT_LE(peak, config.memoryLimit) << "round " << round << ": TinyAI held " << peak << " bytes at most";
    if (round == 0) grown = s.bytes[TINYAI_MEMORY_KV];
    EXPECT_EQ(s.bytes[TINYAI_MEMORY_KV], grown) << "the same chunks again after the reset";
    ASSERT_EQ(tinyaiResetLLM(llm), TINYAI_OK);
    EXPECT_LT(Now().bytes[TINYAI_MEMORY_KV], grown / 4) << "a reset gives the chunks back";
  }
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
  EXPECT_EQ(Now().totalBytes, unopened.totalBytes);
}

TEST_F(MemoryLedgerTest, TheOSsSideIsThere) {
  const TinyAIMemorySnapshot s = Now();
  ASSERT_EQ(s.rssKnown, 1) << "this test runs on a port with an OS";
  EXPECT_GT(s.rssBytes, 0u);
  EXPECT_LE(s.rssAnonBytes + s.rssFileBytes, s.rssBytes + 4096 * 16);
  EXPECT_GE(s.peakRssBytes, s.rssBytes);
  EXPECT_EQ(s.stage, TINYAI_MEMORY_STAGE_NOW);
  EXPECT_EQ(s.tokens, -1);
}

TEST_F(MemoryLedgerTest, BadArgumentsAreRefusedByName) {
  EXPECT_EQ(tinyaiSetMemoryObserver(Record, nullptr, -1), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(tt::Contains(tinyaiGetLastErrorMessage(), "everyTokens is -1")) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(tinyaiGetMemorySnapshot(nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(tt::Contains(tinyaiGetLastErrorMessage(), "out is NULL"));
  TinyAIMemorySnapshot s;
  std::memset(&s, 0, sizeof s);
  s.structSize = 8;
  EXPECT_NE(tinyaiGetMemorySnapshot(&s), TINYAI_OK);
  EXPECT_TRUE(tt::Contains(tinyaiGetLastErrorMessage(), "tinyaiGetMemorySnapshot: out")) << tinyaiGetLastErrorMessage();
  EXPECT_STREQ(tinyaiMemoryCategoryName(TINYAI_MEMORY_KV), "kv");
  EXPECT_STREQ(tinyaiMemoryCategoryName(static_cast<TinyAIMemoryCategory>(99)), "?");
  EXPECT_STREQ(tinyaiMemoryStageName(TINYAI_MEMORY_STAGE_FIRST_TOKEN), "first_token");
  EXPECT_STREQ(tinyaiMemoryStageName(static_cast<TinyAIMemoryStage>(-1)), "?");
  // An observer taken away is called no more: a whole run reaches nobody.
  Seen seen;
  ASSERT_EQ(tinyaiSetMemoryObserver(Record, &seen, 1), TINYAI_OK);
  ASSERT_EQ(tinyaiSetMemoryObserver(nullptr, nullptr, 0), TINYAI_OK);
  TinyAILLMConfig config = tinyaiCreateDefaultLLMConfig();
  config.threads = 1;
  RunOnce(config, 4);
  EXPECT_TRUE(seen.snapshots.empty()) << seen.snapshots.size() << " snapshots after the observer was removed";
}

}  // namespace
}  // namespace tinyai
