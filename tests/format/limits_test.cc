// One set of limits (src/format/limits.h), checked on both sides: what the
// converters refuse to write (model_builder: CheckShape, CheckTokenizerPieces,
// ParseSyntheticSpec, WriteSyntheticModel) is what the runtime refuses to run
// (llama.cc's hyper-parameters and tokenizer), with a specific status and a
// message naming the field and the limit; and the synthetic writer stays
// fast on the largest vocabularies.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/status.h"
#include "format/limits.h"
#include "import/model_builder.h"
#include "format/test_models.h"
#include "format/tmai_writer.h"
#include "tinyai/llm.h"
#include "tinyai/tinyai.h"

namespace {

using tinyai::LlamaShape;
using tinyai::testing::Bytes;
using tinyai::testing::Contains;
using tinyai::testing::LastMessage;
using tinyai::testing::TempDir;
namespace tt = tinyai::testing;
namespace limits = tinyai::limits;

// A llama hyper-parameter: its key, the shape field that holds it and its
// limits.
struct Param {
  const char* key;
  int32_t LlamaShape::*field;
  int32_t min, max;
};

const Param kParams[] = {
    {"llama.dim", &LlamaShape::dim, 1, limits::kMaxLlamaDim},
    {"llama.hidden_dim", &LlamaShape::hidden_dim, 1, limits::kMaxLlamaHiddenDim},
    {"llama.layers", &LlamaShape::layers, 1, limits::kMaxLlamaLayers},
    {"llama.heads", &LlamaShape::heads, 1, limits::kMaxLlamaHeads},
    {"llama.kv_heads", &LlamaShape::kv_heads, 1, limits::kMaxLlamaHeads},
    {"llama.vocab_size", &LlamaShape::vocab_size, limits::kMinVocab, limits::kMaxVocab},
    {"llama.seq_len", &LlamaShape::seq_len, 1, limits::kMaxSeqLen},
};

// Creates an LLM over the model at path (which must open) and returns the
// status; the LLM is destroyed.
TinyAIStatus CreateLLM(const std::string& path) {
  TinyAIMappedModel* m = tinyaiOpenMappedModel(path.c_str(), nullptr);
  EXPECT_NE(m, nullptr) << LastMessage();
  if (!m) return tinyaiGetLastError();
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  TinyAILLM* llm = nullptr;
  tinyaiClearLastError();
  const TinyAIStatus s = tinyaiCreateLLM(m, &cfg, &llm);
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(m);
  return s;
}

// A tiny llama model with these tokenizer pieces (vocab = pieces.size()),
// written past the builders' checks, as a foreign converter might.
TinyAIStatus WriteWithPieces(const std::string& path, const std::vector<std::string>& pieces) {
  LlamaShape s = tt::TinyShape();
  s.vocab_size = static_cast<int32_t>(pieces.size());
  tinyai::TmaiWriter w;
  tinyai::AddLlamaMetadata(&w, s, "llama", "pieces", "tests", nullptr);
  tinyai::AddTokenizerMetadata(&w, pieces, std::vector<float>(pieces.size(), 0.0f));
  tinyai::DeclareLlamaTensors(&w, s);
  TINYAI_RETURN_IF_ERROR(w.Open(path.c_str()));
  for (int32_t t = 0;; ++t) {
    const uint64_t bytes = w.TensorBytes(t);
    if (bytes == 0) break;
    std::vector<float> ones(static_cast<size_t>(bytes / 4), 0.01f);
    TINYAI_RETURN_IF_ERROR(w.Write(ones.data(), ones.size() * 4));
  }
  return w.Finish();
}

std::vector<std::string> BytePieces(int32_t vocab) {
  std::vector<std::string> pieces = {"<unk>", "\n<s>\n", "\n</s>\n"};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    pieces.push_back(buf);
  }
  for (int i = 0; static_cast<int32_t>(pieces.size()) < vocab; ++i) pieces.push_back(" w" + std::to_string(i));
  return pieces;
}

class LimitsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()) << "cannot create a temporary folder"; }
  TempDir dir_;
};

TEST_F(LimitsTest, TheConverterRefusesEachHyperParameterBeyondTheRuntimesLimit) {
  for (const Param& p : kParams) {
    SCOPED_TRACE(p.key);
    LlamaShape s = tt::TinyShape();
    s.*p.field = p.max + 1;
    tinyaiClearLastError();
    EXPECT_EQ(tinyai::CheckShape(s, false), TINYAI_ERR_UNSUPPORTED) << LastMessage();
    EXPECT_TRUE(Contains(LastMessage(), p.key)) << LastMessage();
    EXPECT_TRUE(Contains(LastMessage(), std::to_string(p.min) + ".." + std::to_string(p.max))) << LastMessage();
    const std::string out = dir_.File(std::string(p.key) + ".tmai");
    s.*p.field = p.max + 1;
    EXPECT_EQ(tinyai::WriteSyntheticModel(s, out.c_str()), TINYAI_ERR_UNSUPPORTED) << LastMessage();
    EXPECT_FALSE(tt::FileExists(out)) << "a refused shape still wrote " << out;
  }
  // Below the minimum vocabulary (BOS 1 and EOS 2 must exist).
  LlamaShape s = tt::TinyShape();
  s.vocab_size = limits::kMinVocab - 1;
  EXPECT_EQ(tinyai::CheckShape(s, false), TINYAI_ERR_UNSUPPORTED);
  EXPECT_TRUE(Contains(LastMessage(), "llama.vocab_size 2")) << LastMessage();
}

TEST_F(LimitsTest, TheRuntimeRefusesTheSameValues) {
  const std::string path = dir_.File("tiny.tmai");
  ASSERT_EQ(tt::WriteTinyModel(path), TINYAI_OK) << LastMessage();
  ASSERT_EQ(CreateLLM(path), TINYAI_OK) << LastMessage();
  Bytes image;
  ASSERT_TRUE(tt::ReadFileBytes(path, &image));
  for (const Param& p : kParams) {
    for (int64_t bad : {static_cast<int64_t>(p.min) - 1, static_cast<int64_t>(p.max) + 1}) {
      SCOPED_TRACE(std::string(p.key) + " = " + std::to_string(bad));
      Bytes b = image;
      uint8_t type = 0;
      const size_t at = tt::FindMetaValue(b, p.key, &type);
      ASSERT_NE(at, 0u);
      ASSERT_EQ(type, tinyai::tmai::kMetaInt);
      std::memcpy(b.data() + at, &bad, 8);
      tt::Reseal(&b);
      const std::string bad_path = dir_.File("bad.tmai");
      ASSERT_TRUE(tt::WriteFileBytes(bad_path, b));
      EXPECT_EQ(CreateLLM(bad_path), TINYAI_ERR_BAD_FORMAT) << LastMessage();
      EXPECT_TRUE(Contains(LastMessage(), p.key)) << LastMessage();
      EXPECT_TRUE(Contains(LastMessage(), std::to_string(p.min) + ".." + std::to_string(p.max))) << LastMessage();
    }
  }
}

TEST_F(LimitsTest, AtTheLimitsBothSidesAgree) {
  // The largest and smallest values both sides accept (small enough to write
  // and run here): layers and vocab at their limits are cheap with dim 2.
  LlamaShape s;
  s.dim = 2;
  s.hidden_dim = 1;
  s.heads = 1;
  s.kv_heads = 1;
  s.seq_len = 1;
  s.vocab_size = 260;
  s.layers = limits::kMaxLlamaLayers;
  const std::string path = dir_.File("deep.tmai");
  ASSERT_EQ(tinyai::WriteSyntheticModel(s, path.c_str()), TINYAI_OK) << LastMessage();
  EXPECT_EQ(CreateLLM(path), TINYAI_OK) << LastMessage();
  // The smallest vocabulary a converter writes (no synthetic tokenizer).
  const std::string small = dir_.File("vocab3.tmai");
  ASSERT_EQ(WriteWithPieces(small, {"<unk>", "\n<s>\n", "\n</s>\n"}), TINYAI_OK) << LastMessage();
  EXPECT_EQ(CreateLLM(small), TINYAI_OK) << LastMessage();
}

TEST_F(LimitsTest, TokenizerPiecesTheRuntimeRefusesAreRefusedByTheConverter) {
  std::vector<std::string> pieces = BytePieces(300);
  std::vector<float> scores(pieces.size(), 0.0f);
  EXPECT_EQ(tinyai::CheckTokenizerPieces(pieces, scores), TINYAI_OK) << LastMessage();
  // An empty piece (llama2.c tokenizer files can hold one).
  pieces[290].clear();
  EXPECT_EQ(tinyai::CheckTokenizerPieces(pieces, scores), TINYAI_ERR_BAD_TOKENIZER);
  EXPECT_TRUE(Contains(LastMessage(), "token 290")) << LastMessage();
  EXPECT_TRUE(Contains(LastMessage(), "1..65536")) << LastMessage();
  const std::string empty_path = dir_.File("empty-piece.tmai");
  ASSERT_EQ(WriteWithPieces(empty_path, pieces), TINYAI_OK) << LastMessage();
  EXPECT_EQ(CreateLLM(empty_path), TINYAI_ERR_BAD_TOKENIZER) << LastMessage();
  EXPECT_TRUE(Contains(LastMessage(), "token 290")) << LastMessage();
  EXPECT_TRUE(Contains(LastMessage(), empty_path)) << LastMessage();
  // A piece longer than kMaxPieceBytes; the longest allowed passes.
  pieces[290] = std::string(limits::kMaxPieceBytes, 'a');
  EXPECT_EQ(tinyai::CheckTokenizerPieces(pieces, scores), TINYAI_OK) << LastMessage();
  pieces[290] += 'a';
  EXPECT_EQ(tinyai::CheckTokenizerPieces(pieces, scores), TINYAI_ERR_BAD_TOKENIZER);
  EXPECT_TRUE(Contains(LastMessage(), "token 290")) << LastMessage();
  const std::string long_path = dir_.File("long-piece.tmai");
  ASSERT_EQ(WriteWithPieces(long_path, pieces), TINYAI_OK) << LastMessage();
  EXPECT_EQ(CreateLLM(long_path), TINYAI_ERR_BAD_TOKENIZER) << LastMessage();
  // Non-finite scores.
  pieces[290] = "ok";
  scores[7] = std::nanf("");
  EXPECT_EQ(tinyai::CheckTokenizerPieces(pieces, scores), TINYAI_ERR_BAD_TOKENIZER);
  EXPECT_TRUE(Contains(LastMessage(), "token 7")) << LastMessage();
}

TEST_F(LimitsTest, SyntheticSpecNumbersAreDigitsInRange) {
  LlamaShape s;
  struct Case {
    const char* spec;
    TinyAIStatus status;
    const char* needle;
  } cases[] = {
      {"dim=+8,hidden=8,layers=1,heads=2,vocab=300,seq_len=8", TINYAI_ERR_INVALID_ARGUMENT, "'+8' for 'dim'"},
      {"dim= 8,hidden=8,layers=1,heads=2,vocab=300,seq_len=8", TINYAI_ERR_INVALID_ARGUMENT, "for 'dim'"},
      {"dim=8,hidden=8,layers=1,heads=2,vocab=300,seq_len=99999999999", TINYAI_ERR_INVALID_ARGUMENT, "'seq_len'"},
      {"dim=8,hidden=8,layers=1,heads=2,vocab=300,seq_len=8,dim=16", TINYAI_ERR_INVALID_ARGUMENT, "'dim' is given twice"},
      {"dim=8,hidden=8,layers=1,heads=2,vocab=300,seq_len=8,shared=2", TINYAI_ERR_INVALID_ARGUMENT, "'shared'"},
      {"dim=8,hidden=8,layers=1,heads=2,vocab=300,seq_len=8,depth=3", TINYAI_ERR_INVALID_ARGUMENT, "unknown spec key 'depth'"},
      {"dim=8,hidden=8,layers=4097,heads=2,vocab=300,seq_len=8", TINYAI_ERR_UNSUPPORTED, "llama.layers 4097"},
      {"dim=8,hidden=8,layers=1,heads=2,vocab=16777217,seq_len=8", TINYAI_ERR_UNSUPPORTED, "llama.vocab_size 16777217"},
      {"dim=8,hidden=8,layers=1,heads=2,vocab=300,seq_len=1048577", TINYAI_ERR_UNSUPPORTED, "llama.seq_len 1048577"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec);
    tinyaiClearLastError();
    EXPECT_EQ(tinyai::ParseSyntheticSpec(c.spec, &s), c.status) << LastMessage();
    EXPECT_TRUE(Contains(LastMessage(), c.needle)) << LastMessage();
  }
  ASSERT_EQ(tinyai::ParseSyntheticSpec("dim=8,hidden=8,layers=1,heads=2,vocab=300,seq_len=8,seed=18446744073709551615,shared=0", &s),
            TINYAI_OK)
      << LastMessage();
  EXPECT_EQ(s.seed, UINT64_MAX);
  EXPECT_FALSE(s.shared_classifier);
}

TEST_F(LimitsTest, SyntheticVocabularyIsWrittenInLinearTime) {
  // 2^19 pieces: a scan of every earlier piece per piece (quadratic) took
  // 67 s; a hash set takes about a second (4 s under ASan). What is bounded
  // is how the cost grows from 2^12 to 2^19 pieces (CPU time, so neither a
  // slow nor a busy machine changes it), never a time: linear measured
  // n^1.29-1.36 in release beside an ASan suite and two fuzzers (n^1.5-1.6
  // from 2^14: the set outgrows the caches), the scan about n^1.9.
  LlamaShape s;
  s.dim = 2;
  s.hidden_dim = 1;
  s.layers = 1;
  s.heads = 1;
  s.kv_heads = 1;
  s.seq_len = 2;
  const std::string path = dir_.File("big-vocab.tmai");
  auto write = [&](int64_t pieces) {
    s.vocab_size = static_cast<int32_t>(pieces);
    ASSERT_EQ(tinyai::WriteSyntheticModel(s, path.c_str()), TINYAI_OK) << LastMessage();
  };
  EXPECT_TRUE(tt::GrowsLinearly(write, 1 << 12, 1 << 19)) << "writing a synthetic vocabulary";
  ASSERT_FALSE(HasFatalFailure());
  // Every piece is unique and the runtime takes the model.
  EXPECT_EQ(CreateLLM(path), TINYAI_OK) << LastMessage();
  TinyAIMappedModel* m = tinyaiOpenMappedModel(path.c_str(), nullptr);
  ASSERT_NE(m, nullptr) << LastMessage();
  int64_t vocab = 0;
  EXPECT_EQ(tinyaiGetMetadataInt(m, "llama.vocab_size", &vocab), TINYAI_OK);
  EXPECT_EQ(vocab, 1 << 19);
  tinyaiCloseMappedModel(m);
}

}  // namespace
