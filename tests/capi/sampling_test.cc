// Sampling beyond llama2.c's (TinyAISamplerConfig: top-k, min-p, the
// repetition penalty) and stop strings (TinyAIGenerateParams.stop): the
// sampler's filters on hand-made distributions, then generation on
// stories260K, and every bad value refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "kv/llm_handles.h"
#include "text/sampler.h"

namespace tinyai {
namespace testing {
namespace {

// ---- The sampler's filters --------------------------------------------------------

// Probabilities 0.4, 0.25, 0.15, 0.1, 0.06, 0.04 as logits (temperature 1).
std::vector<float> Logits() {
  const float p[] = {0.25f, 0.06f, 0.4f, 0.04f, 0.15f, 0.1f};
  std::vector<float> l;
  for (float x : p) l.push_back(std::log(x));
  return l;
}

std::set<int32_t> Drawn(const SampleRule& rule, int draws = 2000) {
  Sampler s;
  EXPECT_EQ(s.Init(6), TINYAI_OK);
  std::set<int32_t> seen;
  uint64_t rng = 7;
  for (int i = 0; i < draws; ++i) {
    std::vector<float> l = Logits();
    int32_t t = -1;
    EXPECT_EQ(s.Sample(l.data(), rule, &rng, &t), TINYAI_OK);
    seen.insert(t);
  }
  return seen;
}

TEST(SamplerFilters, TopKKeepsTheKMostLikely) {
  SampleRule r;
  r.temperature = 1.0f;
  EXPECT_EQ(Drawn(r), (std::set<int32_t>{0, 1, 2, 3, 4, 5}));
  r.top_k = 1;
  EXPECT_EQ(Drawn(r), (std::set<int32_t>{2}));
  r.top_k = 3;
  EXPECT_EQ(Drawn(r), (std::set<int32_t>{2, 0, 4}));
  r.top_k = 6;
  EXPECT_EQ(Drawn(r).size(), 6u);
  r.top_k = 1000;  // more than the vocabulary: off
  EXPECT_EQ(Drawn(r).size(), 6u);
}

TEST(SamplerFilters, MinPKeepsTokensNearTheMostLikely) {
  SampleRule r;
  r.temperature = 1.0f;
  r.min_p = 0.3f;  // >= 0.12: 0.4, 0.25, 0.15
  EXPECT_EQ(Drawn(r), (std::set<int32_t>{2, 0, 4}));
  r.min_p = 1.0f;
  EXPECT_EQ(Drawn(r), (std::set<int32_t>{2}));
  // With top-k and top-p: the tokens that pass all three.
  r.min_p = 0.2f;  // >= 0.08: five tokens
  r.top_k = 4;     // four
  EXPECT_EQ(Drawn(r), (std::set<int32_t>{2, 0, 4, 5}));
  r.top_p = 0.5f;  // renormalized 0.44, 0.27, ...: the two first pass 0.5
  EXPECT_EQ(Drawn(r), (std::set<int32_t>{2, 0}));
}

TEST(SamplerFilters, TheKeptTokensAreRenormalized) {
  // top-k 2 of {0.4, 0.25}: 0.615 and 0.385.
  SampleRule r;
  r.temperature = 1.0f;
  r.top_k = 2;
  Sampler s;
  ASSERT_EQ(s.Init(6), TINYAI_OK);
  uint64_t rng = 11;
  int first = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = Logits();
    int32_t t = -1;
    ASSERT_EQ(s.Sample(l.data(), r, &rng, &t), TINYAI_OK);
    first += t == 2;
  }
  EXPECT_NEAR(static_cast<double>(first) / n, 0.4 / 0.65, 0.015);
}

TEST(SamplerFilters, OffTheyDrawWhatLlama2cDraws) {
  Sampler a, b;
  ASSERT_EQ(a.Init(6), TINYAI_OK);
  ASSERT_EQ(b.Init(6), TINYAI_OK);
  for (float top_p : {1.0f, 0.9f, 0.3f}) {
    uint64_t ra = 3, rb = 3;
    SampleRule r;
    r.temperature = 0.8f;
    r.top_p = top_p;
    for (int i = 0; i < 500; ++i) {
      std::vector<float> la = Logits(), lb = Logits();
      int32_t ta = -1, tb = -2;
      ASSERT_EQ(a.Sample(la.data(), 0.8f, top_p, &ra, &ta), TINYAI_OK);
      ASSERT_EQ(b.Sample(lb.data(), r, &rb, &tb), TINYAI_OK);
      ASSERT_EQ(ta, tb) << "draw " << i << " top-p " << top_p;
    }
  }
}

TEST(SamplerFilters, BadValuesAreRefused) {
  Sampler s;
  ASSERT_EQ(s.Init(6), TINYAI_OK);
  uint64_t rng = 1;
  int32_t t = 0;
  std::vector<float> l = Logits();
  SampleRule r;
  r.temperature = 1.0f;
  r.top_k = -1;
  EXPECT_EQ(s.Sample(l.data(), r, &rng, &t), TINYAI_ERR_INVALID_ARGUMENT);
  r.top_k = 0;
  r.min_p = 1.5f;
  EXPECT_EQ(s.Sample(l.data(), r, &rng, &t), TINYAI_ERR_INVALID_ARGUMENT);
  r.min_p = std::nanf("");
  EXPECT_EQ(s.Sample(l.data(), r, &rng, &t), TINYAI_ERR_INVALID_ARGUMENT);
}

TEST(SamplerFilters, RepeatPenaltyOncePerTokenBySign) {
  float logits[] = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
  const int32_t recent[] = {0, 1, 0, 0, 4, 99, -3};  // 99 and -3 are outside the vocabulary: ignored
  int32_t scratch[7];
  ApplyRepeatPenalty(logits, 5, recent, 7, 2.0f, scratch);
  EXPECT_EQ(logits[0], 1.0f);   // positive: divided, once though it appears three times
  EXPECT_EQ(logits[1], -2.0f);  // negative: multiplied
  EXPECT_EQ(logits[2], 0.5f);   // not among them
  EXPECT_EQ(logits[3], 3.0f);
  EXPECT_EQ(logits[4], 0.0f);
  ApplyRepeatPenalty(logits, 5, recent, 7, 1.0f, scratch);  // 1: off
  EXPECT_EQ(logits[0], 1.0f);
}

// ---- Generation on stories260K --------------------------------------------------------

class SamplingTest : public StoriesTest {
 protected:
  void SetUp() override {
    StoriesTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
    cfg.threads = 1;
    ASSERT_EQ(tinyaiCreateLLM(model_.model, &cfg, &llm_.llm), TINYAI_OK) << LastMessage();
  }
  // The text (prompt echo included) and why it stopped.
  std::string Generate(const TinyAIGenerateParams& p, TinyAIStopReason* why = nullptr,
                       TinyAIStatus expect = TINYAI_OK) {
    std::vector<char> out(8192);
    TinyAIGenerateStats stats;
    std::memset(&stats, 0, sizeof stats);
    stats.structSize = sizeof stats;
    EXPECT_EQ(tinyaiLLMGenerate(llm_.llm, "Once upon a time", &p, out.data(), out.size(), nullptr, &stats), expect)
        << LastMessage();
    if (why) *why = stats.stopReason;
    return out.data();
  }
  TinyAIGenerateParams Params() {
    TinyAIGenerateParams p = tinyaiCreateDefaultGenerateParams();
    p.maxNewTokens = 120;
    return p;
  }
  LLMHandle llm_;
};

TEST_F(SamplingTest, StopStringsEndTheTextBeforeThem) {
  TinyAIStopReason why = TINYAI_STOP_NONE;
  const std::string whole = Generate(Params(), &why);
  ASSERT_EQ(why, TINYAI_STOP_MAX_NEW);
  const size_t prompt = std::strlen("Once upon a time");
  ASSERT_GT(whole.size(), prompt + 60) << whole;
  // A stop string from the middle of the generated text, which its tokens
  // may cross: the text ends just before its first occurrence.
  const std::string stop = whole.substr(prompt + 40, 7);
  const size_t at = whole.find(stop, prompt);
  TinyAIGenerateParams p = Params();
  const char* stops[] = {"no such words here", stop.c_str()};
  p.stop = stops;
  p.stopCount = 2;
  EXPECT_EQ(Generate(p, &why), whole.substr(0, at));
  EXPECT_EQ(why, TINYAI_STOP_STRING);
  EXPECT_STREQ(tinyaiStopReasonName(why), "stop_string");
  // The pieces a callback gets add up to the same text, none past the stop.
  std::string pieces;
  p.onText = [](const char* piece, size_t len, void* user) {
    static_cast<std::string*>(user)->append(piece, len);
    return 0;
  };
  p.user = &pieces;
  Generate(p);
  EXPECT_EQ(pieces, whole.substr(0, at));
  // A stop string the text never holds changes nothing; held-back text is
  // given at the end.
  TinyAIGenerateParams q = Params();
  const char* never[] = {"Once upon a time there was a zebra named Q"};
  q.stop = never;
  q.stopCount = 1;
  EXPECT_EQ(Generate(q, &why), whole);
  EXPECT_EQ(why, TINYAI_STOP_MAX_NEW);
  // The prompt is not searched: a stop string only it holds stops nothing.
  const char* in_prompt[] = {"upon a"};
  q.stop = in_prompt;
  if (whole.find("upon a", prompt) == std::string::npos) EXPECT_EQ(Generate(q, &why), whole);
}

TEST_F(SamplingTest, RepeatPenaltyChangesAGreedyText) {
  const std::string plain = Generate(Params());
  TinyAIGenerateParams p = Params();
  p.sampler.repeatPenalty = 1.5f;
  p.sampler.repeatLastN = 64;
  const std::string penalized = Generate(p);
  EXPECT_NE(penalized, plain);
  EXPECT_EQ(Generate(p), penalized) << "deterministic";
  // Penalty 1 is off: the text is llama2.c's.
  p.sampler.repeatPenalty = 1.0f;
  EXPECT_EQ(Generate(p), plain);
}

TEST_F(SamplingTest, TopKOneIsGreedy) {
  const std::string greedy = Generate(Params());
  TinyAIGenerateParams p = Params();
  p.sampler.temperature = 1.0f;
  p.sampler.topK = 1;
  EXPECT_EQ(Generate(p), greedy);
  p.sampler.topK = 0;
  p.sampler.minP = 1.0f;
  EXPECT_EQ(Generate(p), greedy);
}

TEST_F(SamplingTest, BadValuesAreRefusedByName) {
  struct Case {
    void (*set)(TinyAIGenerateParams*);
    const char* message;
  };
  static const char* kEmpty[] = {""};
  static const char* kNull[] = {nullptr};
  static const std::string kLong(TINYAI_MAX_STOP_BYTES + 1, 'x');
  static const char* kTooLong[] = {kLong.c_str()};
  const Case cases[] = {
      {[](TinyAIGenerateParams* p) { p->sampler.topK = -1; }, "topK -1 is negative"},
      {[](TinyAIGenerateParams* p) { p->sampler.minP = 1.5f; }, "minP 1.5 must be in [0, 1]"},
      {[](TinyAIGenerateParams* p) { p->sampler.repeatPenalty = 0.0f; }, "repeatPenalty 0 must be finite and > 0"},
      {[](TinyAIGenerateParams* p) { p->sampler.repeatLastN = 0; }, "repeatLastN 0 is outside 1..4096"},
      {[](TinyAIGenerateParams* p) { p->sampler.repeatLastN = TINYAI_MAX_REPEAT_LAST_N + 1; }, "is outside 1..4096"},
      {[](TinyAIGenerateParams* p) { p->stopCount = TINYAI_MAX_STOP_STRINGS + 1; }, "stopCount 17 is outside 0..16"},
      {[](TinyAIGenerateParams* p) { p->stopCount = -1; }, "stopCount -1"},
      {[](TinyAIGenerateParams* p) { p->stopCount = 1; }, "stop is NULL with stopCount 1"},
      {[](TinyAIGenerateParams* p) { p->stop = kEmpty; p->stopCount = 1; }, "stop[0] is 0 bytes"},
      {[](TinyAIGenerateParams* p) { p->stop = kNull; p->stopCount = 1; }, "stop[0] is NULL"},
      {[](TinyAIGenerateParams* p) { p->stop = kTooLong; p->stopCount = 1; }, "stop[0] is 257 bytes"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    TinyAIGenerateParams p = Params();
    c.set(&p);
    char out[64];
    EXPECT_EQ(tinyaiLLMGenerate(llm_.llm, "a", &p, out, sizeof out, nullptr, nullptr), TINYAI_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(LastMessage()).find(c.message), std::string::npos) << LastMessage();
  }
  // tinyaiLLMSample sees no tokens: a penalty there is refused, saying what to do.
  std::vector<float> logits(VocabSize(llm_.llm), 0.0f);
  TinyAISamplerConfig sc = tinyaiCreateDefaultSamplerConfig();
  sc.repeatPenalty = 1.1f;
  uint64_t rng = 1;
  int32_t token = 0;
  EXPECT_EQ(tinyaiLLMSample(llm_.llm, logits.data(), &sc, &rng, &token), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(LastMessage()).find("apply it to the logits first"), std::string::npos) << LastMessage();
  sc.repeatPenalty = 1.0f;
  sc.topK = 1;
  sc.temperature = 1.0f;
  logits[5] = 3.0f;
  EXPECT_EQ(tinyaiLLMSample(llm_.llm, logits.data(), &sc, &rng, &token), TINYAI_OK) << LastMessage();
  EXPECT_EQ(token, 5);
}

// ---- A conversation's turns in one KV cache (keepContext) -----------------------------

// The tokens the cache holds.
std::vector<int32_t> CacheTokens(TinyAILLM* llm) {
  int32_t n = 0;
  tinyaiGetLLMTokens(llm, nullptr, 0, &n);
  std::vector<int32_t> t(static_cast<size_t>(n));
  EXPECT_EQ(tinyaiGetLLMTokens(llm, t.data(), n, &n), TINYAI_OK) << LastMessage();
  return t;
}

TEST_F(SamplingTest, ATurnContinuesTheCacheAsOneText) {
  // Turn one, then a continuation: nothing of the second prompt is printed,
  // and the cache then holds one text whose every generated token is the
  // arg-max after the tokens before it, as a fresh evaluation of the whole
  // text gives (the first turn's last token, printed but never evaluated,
  // is evaluated first).
  TinyAIGenerateParams p = Params();
  p.maxNewTokens = 12;
  const std::string one = Generate(p);
  const size_t after_one = CacheTokens(llm_.llm).size();
  p.keepContext = 1;
  std::vector<char> out(4096);
  TinyAIGenerateStats stats;
  std::memset(&stats, 0, sizeof stats);
  stats.structSize = sizeof stats;
  ASSERT_EQ(tinyaiLLMGenerate(llm_.llm, " The cat", &p, out.data(), out.size(), nullptr, &stats), TINYAI_OK)
      << LastMessage();
  const std::string two = out.data();
  EXPECT_EQ(two.find("The cat"), std::string::npos) << "a continuation's prompt is not printed: " << two;
  EXPECT_EQ(stats.generatedTokens, 12);
  const std::vector<int32_t> all = CacheTokens(llm_.llm);
  // Turn one's tokens, its unfed last one, the new prompt, turn two's but its last.
  ASSERT_EQ(all.size(), after_one + 1 + static_cast<size_t>(stats.promptTokens - 1) + 11);
  // A fresh evaluation of the same tokens picks each generated one.
  LLMHandle fresh;
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  cfg.threads = 1;
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &cfg, &fresh.llm), TINYAI_OK) << LastMessage();
  std::vector<float> logits(VocabSize(fresh.llm));
  const size_t second_prompt_end = after_one + static_cast<size_t>(stats.promptTokens);
  for (size_t i = 0; i + 1 < all.size(); ++i) {
    ASSERT_EQ(tinyaiLLMEval(fresh.llm, &all[i], 1, logits.data()), TINYAI_OK) << LastMessage();
    const bool generated = (i + 1 >= after_one - 11 && i + 1 <= after_one) || i + 1 >= second_prompt_end;
    if (!generated) continue;
    const int32_t argmax = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    EXPECT_EQ(argmax, all[i + 1]) << "position " << i + 1;
  }
  // Without keepContext the next generation starts afresh: turn one again.
  p.keepContext = 0;
  EXPECT_EQ(Generate(p), one);
}

TEST_F(SamplingTest, ATurnThatDoesNotFitIsRefusedNamingWhatIsLeft) {
  // A context of 32 positions, filled.
  tinyaiDestroyLLM(llm_.llm);
  llm_.llm = nullptr;
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  cfg.threads = 1;
  cfg.contextLength = 32;
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &cfg, &llm_.llm), TINYAI_OK) << LastMessage();
  TinyAIGenerateParams p = Params();
  p.maxNewTokens = 0;  // to the context's end
  TinyAIStopReason why = TINYAI_STOP_NONE;
  Generate(p, &why);
  ASSERT_EQ(why, TINYAI_STOP_CONTEXT);
  p.keepContext = 1;
  char out[64];
  EXPECT_EQ(tinyaiLLMGenerate(llm_.llm, " and more", &p, out, sizeof out, nullptr, nullptr),
            TINYAI_ERR_CONTEXT_OVERFLOW);
  EXPECT_NE(std::string(LastMessage()).find("positions are left"), std::string::npos) << LastMessage();
  // keepContext on an empty cache is a fresh start.
  ASSERT_EQ(tinyaiResetLLM(llm_.llm), TINYAI_OK);
  p.maxNewTokens = 8;
  const std::string kept = Generate(p);
  p.keepContext = 0;
  EXPECT_EQ(Generate(p), kept);
}

}  // namespace
}  // namespace testing
}  // namespace tinyai
