// The rules a model gives its texts, as everything that makes or reads a text
// follows them:
// - the prompt's bound in bytes (tinyaiLLMGenerate in <tinyai/llm.h>): the
//   context's positions at up to 64 bytes each, the tools' bound too, for a
//   vocabulary whose longest piece is longer (tests/baremetal/ checks a
//   shorter one, with an allocation counter);
// - whether a text starts with BOS (tokenizer.add_bos): calibration
//   (tinyaiApplyMixedPrecision), tinyai-eval's comparison and tinyai-bench's
//   prompt (tools/eval/compare.h) start a text at its first token when the
//   model adds no BOS, as generation does.
// The models are a synthetic one written again as GGUF by the importers' test
// writers (tests/import/) with the metadata that says so, and imported.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "format/test_models.h"
#include "import/gguf_writer.h"
#include "import/llama_source.h"
#include "import/model_builder.h"
#include "model/generate.h"
#include "tinyai/llm.h"
#include "tinyai/tinyai.h"
#include "tinyai/utils/quantize_mixed.h"
#include "tools/common/cli.h"
#include "tools/eval/compare.h"

namespace tt = tinyai::testing;

namespace {

// The library's bound on a prompt and the tools' on what they read of one
// are the same 64 bytes a position.
static_assert(tinyai_tools::kTextBytesPerToken == tinyai::TextSession::kPromptBytesPerPosition,
              "tinyai-generate reads a prompt up to the library's bound");

// How a model is written again.
struct Rules {
  bool add_bos = true;    // tokenizer.ggml.add_bos_token
  bool add_eos = false;   // tokenizer.ggml.add_eos_token
  float bos_shift = 0;    // added to every value of BOS's embedding row
  std::string last_piece;  // when not empty: the vocabulary's last piece
};

// in written again as GGUF with rules, and imported: the .tmai's path.
std::string Rewrite(const tt::TempDir& dir, const std::string& in, const std::string& name, const Rules& rules) {
  tt::LlamaSource source;
  std::string error;
  EXPECT_TRUE(tt::LoadTmai(in, &source, &error)) << error;
  if (rules.bos_shift != 0) {
    const auto read = source.tensor;
    const size_t dim = static_cast<size_t>(source.params.dim), bos = static_cast<size_t>(source.bos);
    const float shift = rules.bos_shift;
    source.tensor = [read, dim, bos, shift](const std::string& tensor) {
      std::vector<float> v = read(tensor);
      if (tensor == "token_embd") {
        for (size_t c = 0; c < dim; ++c) v[bos * dim + c] += shift;
      }
      return v;
    };
  }
  if (!rules.last_piece.empty()) source.pieces.back() = rules.last_piece;
  tt::GgufWriter w;
  EXPECT_TRUE(tt::GgufFromSource(source, tt::GgufModelOptions(), &w, &error)) << error;
  w.AddRaw("tokenizer.ggml.add_bos_token", 7, {static_cast<uint8_t>(rules.add_bos ? 1 : 0)});
  w.AddRaw("tokenizer.ggml.add_eos_token", 7, {static_cast<uint8_t>(rules.add_eos ? 1 : 0)});
  const std::string gguf = dir.File(name + ".gguf"), out = dir.File(name + ".tmai");
  EXPECT_TRUE(w.WriteFile(gguf));
  EXPECT_EQ(tinyai::ConvertGguf(gguf.c_str(), out.c_str(), nullptr), TINYAI_OK) << tt::LastMessage();
  return out;
}

// A synthetic model with its own classifier (BOS's embedding row is read
// only where BOS is a token of the text), and its twins.
class TextRules : public ::testing::Test {
 protected:
  void SetUp() override {
    tinyai::LlamaShape shape;
    ASSERT_EQ(tinyai::ParseSyntheticSpec("dim=32,hidden=64,layers=2,heads=4,kv_heads=2,vocab=300,seq_len=64,"
                                         "shared=0,seed=3",
                                         &shape),
              TINYAI_OK);
    base_ = dir_.File("base.tmai");
    ASSERT_EQ(tinyai::WriteSyntheticModel(shape, base_.c_str()), TINYAI_OK) << tt::LastMessage();
  }
  std::string Twin(const std::string& name, const Rules& rules) { return Rewrite(dir_, base_, name, rules); }

  tt::TempDir dir_;
  std::string base_;
};

tinyai_tools::LLMHandle Runner(TinyAIMappedModel* model, int32_t context = 0) {
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  cfg.contextLength = context;
  return tinyai_tools::CreateLLM(model, cfg);
}

TinyAIModelInfo Info(const TinyAILLM* llm) {
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  EXPECT_EQ(tinyaiGetLLMModelInfo(llm, &info), TINYAI_OK) << tt::LastMessage();
  return info;
}

// ---- The prompt's bound -------------------------------------------------------

// A vocabulary with a 100-byte piece: the bound is the context's 16
// positions at 64 bytes each, 1,024 bytes (it was 16 x 100, so a prompt of
// up to 1,600 bytes was encoded, in scratch grown past what the LLM
// reserved). At the bound the prompt is encoded and refused by its tokens;
// a byte more is refused by its bytes, naming the bound.
TEST_F(TextRules, PromptBoundIsTheContextAt64BytesAPosition) {
  Rules rules;
  rules.last_piece = std::string(100, 'q');
  const std::string path = Twin("long-piece", rules);
  tinyai_tools::ModelHandle model = tinyai_tools::OpenModel(path, nullptr);
  tinyai_tools::LLMHandle llm = Runner(model.get(), 16);
  const std::string at_bound(1024, 'a'), over(1025, 'a');
  TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
  char text[64];
  size_t len = 0;
  EXPECT_EQ(tinyaiLLMGenerate(llm.get(), at_bound.c_str(), &gp, text, sizeof text, &len, nullptr),
            TINYAI_ERR_CONTEXT_OVERFLOW);
  EXPECT_TRUE(tt::Contains(tt::LastMessage(), "tokens (BOS included) but the context holds 16")) << tt::LastMessage();
  EXPECT_EQ(tinyaiLLMGenerate(llm.get(), over.c_str(), &gp, text, sizeof text, &len, nullptr),
            TINYAI_ERR_CONTEXT_OVERFLOW);
  EXPECT_TRUE(tt::Contains(tt::LastMessage(),
                           "the prompt is 1025 bytes, more than the 16 tokens of the context may take: a prompt holds "
                           "at most 1024 bytes, the context's 16 positions at up to 64 bytes each (64 on any model)"))
      << tt::LastMessage();
  EXPECT_EQ(tinyaiGetLLMPosition(llm.get()), 0);
}

// ---- Whether a text starts with BOS -------------------------------------------

// What the tools read through the C API is what the model says.
TEST_F(TextRules, ToolsReadWhetherATextStartsWithBos) {
  for (int bos = 0; bos < 2; ++bos) {
    for (int eos = 0; eos < 2; ++eos) {
      Rules rules;
      rules.add_bos = bos != 0;
      rules.add_eos = eos != 0;
      const std::string path = Twin("rules" + std::to_string(bos) + std::to_string(eos), rules);
      tinyai_tools::ModelHandle model = tinyai_tools::OpenModel(path, nullptr);
      tinyai_tools::LLMHandle llm = Runner(model.get());
      EXPECT_EQ(tinyai_tools::StartsWithBos(llm.get()), bos != 0) << "add_bos " << bos << ", add_eos " << eos;
    }
  }
}

// tinyai-bench's prompt: BOS and random tokens, or (no BOS) the same random
// tokens from the first (it was BOS first whatever the model said).
TEST_F(TextRules, BenchPromptStartsAsTheModelStartsAText) {
  Rules no_bos;
  no_bos.add_bos = false;
  tinyai_tools::ModelHandle m1 = tinyai_tools::OpenModel(Twin("bos", Rules()), nullptr);
  tinyai_tools::ModelHandle m0 = tinyai_tools::OpenModel(Twin("no-bos", no_bos), nullptr);
  tinyai_tools::LLMHandle with = Runner(m1.get()), without = Runner(m0.get());
  const int32_t bos = Info(with.get()).bosId;
  uint64_t seed_with = 12345, seed_without = 12345;
  const std::vector<int32_t> a = tinyai_tools::RandomText(with.get(), 9, &seed_with);
  const std::vector<int32_t> b = tinyai_tools::RandomText(without.get(), 8, &seed_without);
  ASSERT_EQ(a.size(), 9u);
  ASSERT_EQ(b.size(), 8u);
  EXPECT_EQ(a[0], bos);
  EXPECT_EQ(std::vector<int32_t>(a.begin() + 1, a.end()), b) << "the text's tokens, from its first";
  EXPECT_EQ(seed_with, seed_without);
}

// tinyai-eval on twins that differ only in BOS's embedding row: where the
// models add BOS, every sequence reads it and the two differ; where they
// add none, no sequence reads it (it starts at a drawn first token, never
// BOS) and they agree exactly - it was BOS first whatever the models said.
// A reference and a model that start a text differently are refused.
TEST_F(TextRules, EvalStartsAsTheModelsStartAText) {
  Rules shifted, no_bos, no_bos_shifted;
  shifted.bos_shift = no_bos_shifted.bos_shift = 0.5f;
  no_bos.add_bos = no_bos_shifted.add_bos = false;
  tinyai_tools::ModelHandle m1 = tinyai_tools::OpenModel(Twin("bos", Rules()), nullptr);
  tinyai_tools::ModelHandle m1x = tinyai_tools::OpenModel(Twin("bos-shifted", shifted), nullptr);
  tinyai_tools::ModelHandle m0 = tinyai_tools::OpenModel(Twin("no-bos", no_bos), nullptr);
  tinyai_tools::ModelHandle m0x = tinyai_tools::OpenModel(Twin("no-bos-shifted", no_bos_shifted), nullptr);
  tinyai_tools::LLMHandle l1 = Runner(m1.get()), l1x = Runner(m1x.get()), l0 = Runner(m0.get()), l0x = Runner(m0x.get());
  tinyai_tools::CompareOptions o;
  o.tokens = 32;
  o.sequence = 8;
  o.seed = 5;
  const tinyai_tools::CompareResult with = tinyai_tools::CompareModels(l1.get(), l1x.get(), o);
  EXPECT_GT(with.mean_kld, 0.0) << "BOS's row is read";
  const tinyai_tools::CompareResult without = tinyai_tools::CompareModels(l0.get(), l0x.get(), o);
  EXPECT_EQ(without.positions, 32);
  EXPECT_EQ(without.max_kld, 0.0) << "a sequence read BOS";
  EXPECT_EQ(without.top1, 1.0);
  try {
    tinyai_tools::CompareModels(l1.get(), l0.get(), o);
    ADD_FAILURE() << "a model that adds BOS compared with one that does not";
  } catch (const tinyai_tools::RuntimeError& e) {
    EXPECT_EQ(e.status, TINYAI_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(tt::Contains(e.what(), "the reference starts a text with BOS (tokenizer.add_bos 1) and the model "
                                       "does not"))
        << e.what();
  }
}

// ---- Calibration ----------------------------------------------------------------

TinyAIMixedPrecisionConfig Int4(int32_t tokens, const char* text) {
  TinyAIMixedPrecisionConfig c;
  tinyaiInitMixedPrecisionConfig(&c);
  c.embeddingPrecision = c.attentionPrecision = c.ffnPrecision = c.outputPrecision = TINYAI_PREC_INT4;
  c.calibrationTokens = tokens;
  c.calibrationText = text;
  return c;
}

// A tensor's bytes after the model at path is quantized and calibrated with
// c: what the calibration measured decides them.
std::vector<uint8_t> Calibrated(const std::string& path, const TinyAIMixedPrecisionConfig& c,
                                const char* tensor = "blk.1.ffn_down") {
  tinyai_tools::ModelHandle model = tinyai_tools::OpenModel(path, nullptr);
  EXPECT_EQ(tinyaiApplyMixedPrecision(model.get(), &c), TINYAI_OK) << tt::LastMessage();
  int32_t index = -1;
  EXPECT_EQ(tinyaiFindMappedTensor(model.get(), tensor, &index), TINYAI_OK) << tensor;
  TinyAITensorInfo info;
  info.structSize = sizeof info;
  EXPECT_EQ(tinyaiGetMappedTensorInfo(model.get(), index, &info), TINYAI_OK);
  const uint8_t* layer = static_cast<const uint8_t*>(tinyaiGetLayerWeights(model.get(), info.layer));
  EXPECT_NE(layer, nullptr) << tt::LastMessage();
  if (!layer) return {};
  std::vector<uint8_t> bytes(layer + info.offsetInLayer, layer + info.offsetInLayer + info.decodedSize);
  EXPECT_EQ(tinyaiReleaseLayerWeights(model.get(), info.layer), TINYAI_OK);
  return bytes;
}

// Calibration on twins that differ only in BOS's embedding row, from a text
// and from the model's own stream: where the model adds BOS, every window
// reads it and the calibrations differ; where it adds none, no window reads
// it and they are the same (it fed BOS whatever the model said, and dropped
// the text's first token).
TEST_F(TextRules, CalibrationStartsAsTheModelStartsAText) {
  Rules shifted, no_bos, no_bos_shifted;
  shifted.bos_shift = no_bos_shifted.bos_shift = 0.5f;
  no_bos.add_bos = no_bos_shifted.add_bos = false;
  const std::string m1 = Twin("bos", Rules()), m1x = Twin("bos-shifted", shifted), m0 = Twin("no-bos", no_bos),
                    m0x = Twin("no-bos-shifted", no_bos_shifted);
  for (const char* text : {"the quick brown fox jumps over the lazy dog, again and again", static_cast<const char*>(nullptr)}) {
    SCOPED_TRACE(text ? text : "(the model's own stream)");
    const TinyAIMixedPrecisionConfig c = Int4(100, text);
    const std::vector<uint8_t> with = Calibrated(m1, c), with_shifted = Calibrated(m1x, c);
    ASSERT_FALSE(with.empty());
    EXPECT_NE(with, with_shifted) << "BOS's row is read";
    const std::vector<uint8_t> without = Calibrated(m0, c), without_shifted = Calibrated(m0x, c);
    ASSERT_FALSE(without.empty());
    EXPECT_EQ(without, without_shifted) << "a window read BOS";
  }
}

// Without BOS the text's first token is calibrated on: a one-word text
// (one token: " a", a piece of this vocabulary) calibrates, exactly as that
// word repeated (it was refused as having no tokens, the word taken for BOS).
TEST_F(TextRules, CalibrationReadsTheTextsFirstToken) {
  Rules no_bos;
  no_bos.add_bos = false;
  no_bos.last_piece = " a";
  const std::string m0 = Twin("no-bos", no_bos);
  std::string repeated = "a";
  for (int i = 0; i < 150; ++i) repeated += " a";
  {
    tinyai_tools::ModelHandle model = tinyai_tools::OpenModel(m0, nullptr);
    tinyai_tools::LLMHandle llm = Runner(model.get());
    const int32_t id = Info(llm.get()).vocabSize - 1;
    int32_t one[4], count = 0;
    ASSERT_EQ(tinyaiLLMTokenize(llm.get(), "a", 1, one, 4, &count), TINYAI_OK) << tt::LastMessage();
    ASSERT_EQ(count, 1);
    ASSERT_EQ(one[0], id);
    std::vector<int32_t> many(256);
    ASSERT_EQ(tinyaiLLMTokenize(llm.get(), repeated.c_str(), 1, many.data(), 256, &count), TINYAI_OK);
    many.resize(static_cast<size_t>(count));
    EXPECT_EQ(many, std::vector<int32_t>(151, id));
  }
  const std::vector<uint8_t> once = Calibrated(m0, Int4(100, "a"));
  const std::vector<uint8_t> again = Calibrated(m0, Int4(100, repeated.c_str()));
  ASSERT_FALSE(once.empty());
  EXPECT_EQ(once, again);
  EXPECT_NE(once, Calibrated(m0, Int4(100, "b"))) << "calibration decides the bytes";
}

}  // namespace
