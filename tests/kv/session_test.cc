// Sessions (tinyaiSaveLLMSession / tinyaiLoadLLMSession): a
// session saved mid-generation and loaded into a fresh LLM continues with
// the same logits, bit for bit, for every KV type and with a window that has
// slid; the tokens the cache holds come back with it; and a file that is not
// this LLM's session (another model or precisions, KV type, window or
// context, corrupt, cut short, not a session, a later version) is refused
// with its own status and leaves the LLM exactly as it was; so is one whose
// checksum is right but whose contents are not a session's (token ids
// outside the vocabulary, a position or sizes that do not fit its cache).
#include <gtest/gtest.h>

#include <climits>
#include <limits>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "format/test_models.h"
#include "kv/llm_handles.h"
#include "require_shared.h"
#include "tinyai/llm.h"
#include "tinyai/tinyai.h"

namespace tt = tinyai::testing;

namespace {

using Model = tt::ModelHandle;
using LLM = tt::LLMHandle;

TinyAILLMConfig Config(int32_t type, int32_t window = 0, int32_t sinks = 0, int32_t context = 0) {
  TinyAILLMConfig c = tinyaiCreateDefaultLLMConfig();
  c.kvType = static_cast<TinyAIKVType>(type);
  c.kvWindow = window;
  c.kvSinks = sinks;
  c.contextLength = context;
  return c;
}

size_t Vocab(TinyAILLM* llm) { return tt::VocabSize(llm); }

int32_t Argmax(const std::vector<float>& v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i) best = v[i] > v[best] ? i : best;
  return static_cast<int32_t>(best);
}

// Greedy decoding from token `next` for n steps: every step's logits.
std::vector<float> Continue(TinyAILLM* llm, int32_t next, int n) {
  const size_t vocab = Vocab(llm);
  std::vector<float> all, logits(vocab);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(tinyaiLLMEval(llm, &next, 1, logits.data()), TINYAI_OK) << tt::LastMessage();
    all.insert(all.end(), logits.begin(), logits.end());
    next = Argmax(logits);
  }
  return all;
}

std::vector<int32_t> Tokens(TinyAILLM* llm) {
  int32_t n = -1;
  const TinyAIStatus s = tinyaiGetLLMTokens(llm, nullptr, 0, &n);
  EXPECT_EQ(s, n > 0 ? TINYAI_ERR_BUFFER_TOO_SMALL : TINYAI_OK);
  std::vector<int32_t> out(static_cast<size_t>(n > 0 ? n : 0));
  int32_t m = -1;
  EXPECT_EQ(tinyaiGetLLMTokens(llm, out.data(), n, &m), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(m, n);
  return out;
}

// The session file's fields (model/session.h) and its checksum, for files
// crafted with a right checksum.
constexpr size_t kTypeAt = 16, kHeadSizeAt = 40, kPositionAt = 48, kHeader = 64;

template <class T>
void Put(tt::Bytes* image, size_t at, T value) {
  std::memcpy(image->data() + at, &value, sizeof value);
}

// The checksum made right again (CRC-32C of everything before it).
void Seal(tt::Bytes* image) {
  const uint32_t crc = tinyai::Crc32c(0, image->data(), image->size() - 4);
  Put(image, image->size() - 4, crc);
}

class Session : public tt::StoriesTest {
 protected:
  // Evaluates a prompt of `count` tokens the model writes itself (greedy
  // from BOS, in passes of 8) and returns the token it would take next.
  int32_t Prompt(TinyAILLM* llm, int count, std::vector<int32_t>* ids) {
    const size_t vocab = Vocab(llm);
    std::vector<float> logits(vocab);
    ids->assign(1, 1);
    while (static_cast<int>(ids->size()) < count) {
      EXPECT_EQ(tinyaiLLMEval(llm, &ids->back(), 1, logits.data()), TINYAI_OK) << tt::LastMessage();
      const int32_t t = Argmax(logits);
      ids->push_back(t == 1 ? 2 : t);
    }
    tinyaiResetLLM(llm);
    for (int at = 0; at < count; at += 8) {
      const int n = count - at < 8 ? count - at : 8;
      EXPECT_EQ(tinyaiLLMEval(llm, ids->data() + at, n, logits.data()), TINYAI_OK) << tt::LastMessage();
    }
    return Argmax(logits);
  }
  tt::TempDir dir_;
};

TEST_F(Session, AFreshLLMContinuesBitForBit) {
  struct Case {
    int32_t type, window, sinks;
  };
  const Case cases[] = {{TINYAI_KV_F32, 0, 0},  {TINYAI_KV_F16, 0, 0},  {TINYAI_KV_INT8, 0, 0},
                        {TINYAI_KV_F32, 16, 2}, {TINYAI_KV_INT8, 24, 4}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(tinyaiKVTypeName(static_cast<TinyAIKVType>(c.type))) + " window " +
                 std::to_string(c.window) + " sinks " + std::to_string(c.sinks));
    const TinyAILLMConfig cfg = Config(c.type, c.window, c.sinks);
    LLM a, b;
    ASSERT_EQ(tinyaiCreateLLM(model_.model, &cfg, &a.llm), TINYAI_OK) << tt::LastMessage();
    std::vector<int32_t> ids;
    const int32_t next = Prompt(a.llm, 45, &ids);  // a window of 16 or 24 has slid
    const std::string file = dir_.File("session.tsn");
    ASSERT_EQ(tinyaiSaveLLMSession(a.llm, file.c_str()), TINYAI_OK) << tt::LastMessage();

    ASSERT_EQ(tinyaiCreateLLM(model_.model, &cfg, &b.llm), TINYAI_OK) << tt::LastMessage();
    ASSERT_EQ(tinyaiLoadLLMSession(b.llm, file.c_str()), TINYAI_OK) << tt::LastMessage();
    EXPECT_EQ(tinyaiGetLLMPosition(b.llm), 45);
    // The tokens held: all 45, or the sinks and the window - 1 most recent
    // (what the next token attends to besides itself).
    std::vector<int32_t> held = ids;
    if (c.window > 0) {
      held.assign(ids.begin(), ids.begin() + c.sinks);
      held.insert(held.end(), ids.end() - (c.window - 1), ids.end());
    }
    EXPECT_EQ(Tokens(b.llm), held);
    EXPECT_EQ(Tokens(a.llm), held);

    const std::vector<float> want = Continue(a.llm, next, 12);
    const std::vector<float> got = Continue(b.llm, next, 12);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);

    // Loaded again over a runner that has gone on: back to the saved point.
    ASSERT_EQ(tinyaiLoadLLMSession(b.llm, file.c_str()), TINYAI_OK) << tt::LastMessage();
    const std::vector<float> again = Continue(b.llm, next, 12);
    EXPECT_EQ(std::memcmp(again.data(), want.data(), want.size() * sizeof(float)), 0);
  }
}

// A short session (a few tokens into the context) and its tokens; a save
// overwrites the file whole.
TEST_F(Session, ASaveReplacesTheFile) {
  const TinyAILLMConfig cfg = Config(TINYAI_KV_F16);
  LLM a, b;
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &cfg, &a.llm), TINYAI_OK);
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &cfg, &b.llm), TINYAI_OK);
  const std::string file = dir_.File("s.tsn");
  std::vector<int32_t> ids;
  Prompt(a.llm, 30, &ids);
  ASSERT_EQ(tinyaiSaveLLMSession(a.llm, file.c_str()), TINYAI_OK) << tt::LastMessage();
  const int32_t next = Prompt(a.llm, 3, &ids);
  ASSERT_EQ(tinyaiSaveLLMSession(a.llm, file.c_str()), TINYAI_OK) << tt::LastMessage();
  ASSERT_EQ(tinyaiLoadLLMSession(b.llm, file.c_str()), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(tinyaiGetLLMPosition(b.llm), 3);
  EXPECT_EQ(Tokens(b.llm), ids);
  const std::vector<float> want = Continue(a.llm, next, 5), got = Continue(b.llm, next, 5);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
}

// Every refusal has its own status and message, and leaves the LLM where it
// was: the same position, and the next token's logits unchanged.
TEST_F(Session, WhatIsNotThisLLMsSessionIsRefused) {
  const TinyAILLMConfig cfg = Config(TINYAI_KV_F32);
  LLM saver;
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &cfg, &saver.llm), TINYAI_OK);
  std::vector<int32_t> ids;
  Prompt(saver.llm, 20, &ids);
  const std::string good = dir_.File("good.tsn");
  ASSERT_EQ(tinyaiSaveLLMSession(saver.llm, good.c_str()), TINYAI_OK) << tt::LastMessage();
  tt::Bytes image;
  ASSERT_TRUE(tt::ReadFileBytes(good, &image));
  ASSERT_GT(image.size(), 100u);

  // The runner the refusals are tried on, 7 tokens in, and what it would
  // compute next.
  LLM target, reference;
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &cfg, &target.llm), TINYAI_OK);
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &cfg, &reference.llm), TINYAI_OK);
  std::vector<int32_t> mine;
  const int32_t next = Prompt(target.llm, 7, &mine);
  Prompt(reference.llm, 7, &mine);
  const std::vector<float> want = Continue(reference.llm, next, 2);

  struct Bad {
    const char* name;
    tt::Bytes bytes;
    TinyAIStatus status;
    const char* message;
  };
  std::vector<Bad> bad;
  tt::Bytes b = image;
  b[0] = 'X';
  bad.push_back({"magic", b, TINYAI_ERR_BAD_MAGIC, "not a TinyAI session"});
  bad.push_back({"zero", tt::Bytes(), TINYAI_ERR_TRUNCATED, "file is empty (0 bytes)"});
  bad.push_back({"short", tt::Bytes(image.begin(), image.begin() + 40), TINYAI_ERR_TRUNCATED,
                 "40 bytes, fewer than a session's header"});
  bad.push_back({"cut", tt::Bytes(image.begin(), image.end() - 9), TINYAI_ERR_TRUNCATED, "bytes of KV cache"});
  b = image;
  b.push_back(0);
  bad.push_back({"trailing", b, TINYAI_ERR_BAD_FORMAT, "after the session's end"});
  b = image;
  b[b.size() / 2] ^= 0x10;
  bad.push_back({"flipped bit", b, TINYAI_ERR_CHECKSUM, "checksum"});
  b = image;
  b[4] = 2;
  bad.push_back({"version", b, TINYAI_ERR_UNSUPPORTED_VERSION, "session version 2"});
  for (const Bad& x : bad) {
    SCOPED_TRACE(x.name);
    const std::string f = dir_.File(std::string(x.name) + ".tsn");
    ASSERT_TRUE(tt::WriteFileBytes(f, x.bytes));
    EXPECT_EQ(tinyaiLoadLLMSession(target.llm, f.c_str()), x.status);
    EXPECT_NE(std::string(tt::LastMessage()).find(x.message), std::string::npos) << tt::LastMessage();
    EXPECT_EQ(tinyaiGetLLMPosition(target.llm), 7);
  }
  EXPECT_EQ(tinyaiLoadLLMSession(target.llm, dir_.File("missing.tsn").c_str()), TINYAI_ERR_FILE_NOT_FOUND);
  EXPECT_EQ(tinyaiLoadLLMSession(target.llm, nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiLoadLLMSession(target.llm, ""), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiLoadLLMSession(nullptr, good.c_str()), TINYAI_ERR_INVALID_ARGUMENT);

  // Another KV type, window, sinks or context: the message names it.
  struct Other {
    TinyAILLMConfig cfg;
    const char* message;
  };
  const Other others[] = {{Config(TINYAI_KV_F16), "holds a f32 KV cache; this LLM's is f16"},
                          {Config(TINYAI_KV_F32, 16, 0), "KV window is 0; this LLM's is 16"},
                          {Config(TINYAI_KV_F32, 0, 0, 256), "KV slots"}};
  for (const Other& o : others) {
    SCOPED_TRACE(o.message);
    LLM l;
    ASSERT_EQ(tinyaiCreateLLM(model_.model, &o.cfg, &l.llm), TINYAI_OK) << tt::LastMessage();
    EXPECT_EQ(tinyaiLoadLLMSession(l.llm, good.c_str()), TINYAI_ERR_MISMATCH);
    EXPECT_NE(std::string(tt::LastMessage()).find(o.message), std::string::npos) << tt::LastMessage();
    EXPECT_EQ(tinyaiGetLLMPosition(l.llm), 0);
  }

  // Another model: same shapes and sizes but other weights.
  const std::string other_path = dir_.File("other.tmai");
  ASSERT_EQ(tt::WriteTinyModel(other_path), TINYAI_OK);
  const std::string other_path2 = dir_.File("other2.tmai");
  tinyai::LlamaShape shape = tt::TinyShape();
  shape.seed += 1;
  ASSERT_EQ(tt::WriteTinyModel(other_path2, shape), TINYAI_OK);
  Model m1, m2;
  m1.model = tinyaiOpenMappedModel(other_path.c_str(), nullptr);
  m2.model = tinyaiOpenMappedModel(other_path2.c_str(), nullptr);
  ASSERT_NE(m1.model, nullptr);
  ASSERT_NE(m2.model, nullptr);
  LLM l1, l2;
  ASSERT_EQ(tinyaiCreateLLM(m1.model, &cfg, &l1.llm), TINYAI_OK);
  ASSERT_EQ(tinyaiCreateLLM(m2.model, &cfg, &l2.llm), TINYAI_OK);
  const int32_t bos = 1;
  std::vector<float> logits(Vocab(l1.llm));
  ASSERT_EQ(tinyaiLLMEval(l1.llm, &bos, 1, logits.data()), TINYAI_OK);
  const std::string s1 = dir_.File("m1.tsn");
  ASSERT_EQ(tinyaiSaveLLMSession(l1.llm, s1.c_str()), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(tinyaiLoadLLMSession(l2.llm, s1.c_str()), TINYAI_ERR_MISMATCH);
  EXPECT_NE(std::string(tt::LastMessage()).find("belongs to another model"), std::string::npos) << tt::LastMessage();
  EXPECT_EQ(tinyaiLoadLLMSession(target.llm, s1.c_str()), TINYAI_ERR_MISMATCH);
  EXPECT_EQ(tinyaiLoadLLMSession(l2.llm, good.c_str()), TINYAI_ERR_MISMATCH);

  // After all that, the target goes on as if nothing had been tried.
  EXPECT_EQ(tinyaiGetLLMPosition(target.llm), 7);
  const std::vector<float> got = Continue(target.llm, next, 2);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
}

// A checksum says the file arrived as it was written, not that a session
// wrote it: a file crafted with a right checksum whose token ids are outside
// the vocabulary (which every other call refuses), or whose position, sizes
// or KV layout do not fit the LLM's cache, is refused with its own status
// and leaves the LLM where it was. The rows' values are data: a NaN there
// loads, and the next evaluation says TINYAI_ERR_NOT_FINITE.
TEST_F(Session, ARightChecksumOverWrongContentsIsRefused) {
  const TinyAILLMConfig cfg = Config(TINYAI_KV_F32);
  LLM saver;
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &cfg, &saver.llm), TINYAI_OK);
  std::vector<int32_t> ids;
  Prompt(saver.llm, 20, &ids);
  const std::string good = dir_.File("good.tsn");
  ASSERT_EQ(tinyaiSaveLLMSession(saver.llm, good.c_str()), TINYAI_OK) << tt::LastMessage();
  tt::Bytes image;
  ASSERT_TRUE(tt::ReadFileBytes(good, &image));
  const int32_t vocab = static_cast<int32_t>(Vocab(saver.llm));
  const size_t tokens_at = image.size() - 4 - 20 * sizeof(int32_t);  // the 20 tokens end the payload
  int32_t first = 0;
  std::memcpy(&first, image.data() + tokens_at, 4);
  ASSERT_EQ(first, ids[0]) << "the tokens are where model/session.h says";
  {
    tt::Bytes same = image;
    Seal(&same);
    ASSERT_EQ(same, image) << "Seal computes the session's checksum";
  }

  LLM target, reference;
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &cfg, &target.llm), TINYAI_OK);
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &cfg, &reference.llm), TINYAI_OK);
  std::vector<int32_t> mine;
  const int32_t next = Prompt(target.llm, 7, &mine);
  Prompt(reference.llm, 7, &mine);
  const std::vector<float> want = Continue(reference.llm, next, 2);

  struct Bad {
    std::string name;
    tt::Bytes bytes;
    TinyAIStatus status;
    std::string message;
  };
  std::vector<Bad> bad;
  const auto crafted = [&](const std::string& name, size_t at, auto value, TinyAIStatus status,
                           const std::string& message) {
    tt::Bytes b = image;
    Put(&b, at, value);
    Seal(&b);
    bad.push_back({name, b, status, message});
  };
  const std::string range = "outside this model's vocabulary (0.." + std::to_string(vocab - 1) + ")";
  crafted("first token = vocab", tokens_at, vocab, TINYAI_ERR_BAD_FORMAT,
          "token 0 of the 20 the session holds is " + std::to_string(vocab) + ", " + range);
  crafted("last token -1", tokens_at + 19 * 4, int32_t{-1}, TINYAI_ERR_BAD_FORMAT,
          "token 19 of the 20 the session holds is -1, " + range);
  crafted("a token INT32_MIN", tokens_at + 11 * 4, int32_t{INT32_MIN}, TINYAI_ERR_BAD_FORMAT,
          "token 11 of the 20 the session holds is " + std::to_string(INT32_MIN));
  crafted("a token INT32_MAX", tokens_at + 5 * 4, int32_t{INT32_MAX}, TINYAI_ERR_BAD_FORMAT,
          "token 5 of the 20 the session holds is " + std::to_string(INT32_MAX));
  crafted("position -1", kPositionAt, int64_t{-1}, TINYAI_ERR_BAD_FORMAT, "position -1 is outside 0..");
  crafted("position past the cache", kPositionAt, int64_t{INT64_MAX}, TINYAI_ERR_BAD_FORMAT, "is outside 0..");
  crafted("position without its rows", kPositionAt, int64_t{19}, TINYAI_ERR_BAD_FORMAT,
          "bytes of KV cache for position 19");
  crafted("an unknown KV type", kTypeAt, int32_t{9}, TINYAI_ERR_MISMATCH, "holds a ? KV cache; this LLM's is f32");
  crafted("another head size", kHeadSizeAt, int32_t{16}, TINYAI_ERR_MISMATCH, "its head size is 16");
  for (const Bad& x : bad) {
    SCOPED_TRACE(x.name);
    const std::string f = dir_.File("crafted.tsn");
    ASSERT_TRUE(tt::WriteFileBytes(f, x.bytes));
    EXPECT_EQ(tinyaiLoadLLMSession(target.llm, f.c_str()), x.status) << tt::LastMessage();
    EXPECT_NE(std::string(tt::LastMessage()).find(x.message), std::string::npos) << tt::LastMessage();
    EXPECT_EQ(tinyaiGetLLMPosition(target.llm), 7);
    EXPECT_EQ(Tokens(target.llm), mine);
  }
  const std::vector<float> got = Continue(target.llm, next, 2);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << "the target is as it was";

  // Every id in the vocabulary loads (the edges included).
  {
    tt::Bytes b = image;
    Put(&b, tokens_at, int32_t{0});
    Put(&b, tokens_at + 19 * 4, vocab - 1);
    Seal(&b);
    const std::string f = dir_.File("edges.tsn");
    ASSERT_TRUE(tt::WriteFileBytes(f, b));
    LLM l;
    ASSERT_EQ(tinyaiCreateLLM(model_.model, &cfg, &l.llm), TINYAI_OK);
    ASSERT_EQ(tinyaiLoadLLMSession(l.llm, f.c_str()), TINYAI_OK) << tt::LastMessage();
    std::vector<int32_t> held = ids;
    held.front() = 0;
    held.back() = vocab - 1;
    EXPECT_EQ(Tokens(l.llm), held);
  }
  // A NaN key at position 0 is data: it loads, and every query sees it.
  {
    tt::Bytes b = image;
    Put(&b, kHeader, std::numeric_limits<float>::quiet_NaN());
    Seal(&b);
    const std::string f = dir_.File("nan.tsn");
    ASSERT_TRUE(tt::WriteFileBytes(f, b));
    LLM l;
    ASSERT_EQ(tinyaiCreateLLM(model_.model, &cfg, &l.llm), TINYAI_OK);
    ASSERT_EQ(tinyaiLoadLLMSession(l.llm, f.c_str()), TINYAI_OK) << tt::LastMessage();
    std::vector<float> logits(static_cast<size_t>(vocab));
    EXPECT_EQ(tinyaiLLMEval(l.llm, &next, 1, logits.data()), TINYAI_ERR_NOT_FINITE) << tt::LastMessage();
    EXPECT_EQ(tinyaiGetLLMPosition(l.llm), 20);
  }
}

// The fingerprint covers the precisions applied to the model (llm.h): the
// same file run at other precisions is another model, TINYAI_ERR_MISMATCH,
// and the same precisions on a model opened again load.
TEST_F(Session, AnotherPrecisionIsAnotherModel) {
  const TinyAILLMConfig cfg = Config(TINYAI_KV_F32);
  std::vector<int32_t> ids;
  LLM saver;
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &cfg, &saver.llm), TINYAI_OK);
  Prompt(saver.llm, 10, &ids);
  const std::string as_stored = dir_.File("as-stored.tsn");
  ASSERT_EQ(tinyaiSaveLLMSession(saver.llm, as_stored.c_str()), TINYAI_OK) << tt::LastMessage();

  TinyAIMixedPrecisionConfig medium;
  ASSERT_EQ(tinyaiInitMixedPrecisionConfig(&medium), TINYAI_OK);  // int8 embedding and output, int4 the rest
  TinyAIMixedPrecisionConfig int8 = medium;
  int8.attentionPrecision = TINYAI_PREC_INT8;
  int8.ffnPrecision = TINYAI_PREC_INT8;
  const auto open = [&](const TinyAIMixedPrecisionConfig& mix, Model* m, LLM* l) {
    m->model = tinyaiOpenMappedModel(tt::StoriesTmai().c_str(), nullptr);
    ASSERT_NE(m->model, nullptr) << tt::LastMessage();
    ASSERT_EQ(tinyaiApplyMixedPrecision(m->model, &mix), TINYAI_OK) << tt::LastMessage();
    ASSERT_EQ(tinyaiCreateLLM(m->model, &cfg, &l->llm), TINYAI_OK) << tt::LastMessage();
  };

  // The file as stored, loaded over it at the medium mix.
  Model m_medium;
  LLM l_medium;
  ASSERT_NO_FATAL_FAILURE(open(medium, &m_medium, &l_medium));
  EXPECT_EQ(tinyaiLoadLLMSession(l_medium.llm, as_stored.c_str()), TINYAI_ERR_MISMATCH);
  EXPECT_NE(std::string(tt::LastMessage()).find("belongs to another model"), std::string::npos) << tt::LastMessage();
  EXPECT_EQ(tinyaiGetLLMPosition(l_medium.llm), 0);

  // The medium mix's session, loaded at another mix and at the same one.
  Prompt(l_medium.llm, 10, &ids);
  const std::string at_medium = dir_.File("medium.tsn");
  ASSERT_EQ(tinyaiSaveLLMSession(l_medium.llm, at_medium.c_str()), TINYAI_OK) << tt::LastMessage();
  Model m_int8, m_again;
  LLM l_int8, l_again;
  ASSERT_NO_FATAL_FAILURE(open(int8, &m_int8, &l_int8));
  EXPECT_EQ(tinyaiLoadLLMSession(l_int8.llm, at_medium.c_str()), TINYAI_ERR_MISMATCH);
  EXPECT_NE(std::string(tt::LastMessage()).find("belongs to another model"), std::string::npos) << tt::LastMessage();
  EXPECT_EQ(tinyaiGetLLMPosition(l_int8.llm), 0);
  ASSERT_NO_FATAL_FAILURE(open(medium, &m_again, &l_again));
  EXPECT_EQ(tinyaiLoadLLMSession(l_again.llm, at_medium.c_str()), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(tinyaiGetLLMPosition(l_again.llm), 10);
}

TEST_F(Session, MisuseIsRefused) {
  const TinyAILLMConfig cfg = Config(TINYAI_KV_F32);
  LLM l;
  ASSERT_EQ(tinyaiCreateLLM(model_.model, &cfg, &l.llm), TINYAI_OK);
  // Nothing evaluated yet: an empty session, which loads as a reset.
  const std::string file = dir_.File("early.tsn");
  ASSERT_EQ(tinyaiSaveLLMSession(l.llm, file.c_str()), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(tinyaiSaveLLMSession(nullptr, file.c_str()), TINYAI_ERR_INVALID_ARGUMENT);
  const int32_t bos = 1;
  std::vector<float> logits(Vocab(l.llm));
  ASSERT_EQ(tinyaiLLMEval(l.llm, &bos, 1, logits.data()), TINYAI_OK);
  EXPECT_EQ(tinyaiSaveLLMSession(l.llm, nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  const TinyAIStatus nodir = tinyaiSaveLLMSession(l.llm, dir_.File("no/such/dir/x.tsn").c_str());
  EXPECT_TRUE(nodir == TINYAI_ERR_FILE_NOT_FOUND || nodir == TINYAI_ERR_IO) << nodir;
  int32_t count = 0, tok[2];
  EXPECT_EQ(tinyaiGetLLMTokens(l.llm, tok, 2, nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiGetLLMTokens(l.llm, nullptr, 2, &count), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiGetLLMTokens(l.llm, tok, -1, &count), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiGetLLMTokens(l.llm, tok, 2, &count), TINYAI_OK);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(tok[0], 1);
  ASSERT_EQ(tinyaiLoadLLMSession(l.llm, file.c_str()), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(tinyaiGetLLMPosition(l.llm), 0);
  EXPECT_EQ(tinyaiGetLLMTokens(l.llm, tok, 2, &count), TINYAI_OK);
  EXPECT_EQ(count, 0);
  tt::Bytes image;
  ASSERT_TRUE(tt::ReadFileBytes(file, &image));
  EXPECT_LT(image.size(), 100u);  // a header and a checksum
}

}  // namespace
