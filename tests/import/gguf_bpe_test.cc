// GGUF files with a byte-level BPE vocabulary (tokenizer.ggml.model "gpt2",
// as Llama 3, Qwen2 and SmolLM files have), written by the tests' GGUF
// writer: imported into the .tmai's tokenizer.* keys, run by the runtime's
// BPE tokenizer (ids, special tokens, BOS as the pre-tokenizer's family
// says, NFC for Qwen2, decoding, generation), and every bad vocabulary
// refused with its own status naming the key. The tokenizer's ids against a
// reference implementation are tests/text/bpe_tokenizer_test.cc's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "format/test_models.h"
#include "import/gguf_import.h"
#include "import/gguf_writer.h"
#include "import/llama_source.h"
#include "import/model_builder.h"
#include "import/run_model.h"
#include "text/text_tokenizer.h"
#include "tinyai/llm.h"
#include "tinyai/tinyai.h"
#include "tinyai/utils/mmap_loader.h"

namespace tt = tinyai::testing;

namespace {

using Vocab = tt::ByteLevelVocab;

class GgufBpe : public ::testing::Test {
 protected:
  void SetUp() override {
    tinyai::LlamaShape shape;
    ASSERT_EQ(tinyai::ParseSyntheticSpec("dim=64,hidden=96,layers=2,heads=4,kv_heads=2,vocab=300,seq_len=64,seed=11",
                                         &shape),
              TINYAI_OK);
    const std::string model = dir_.File("m.tmai");
    ASSERT_EQ(tinyai::WriteSyntheticModel(shape, model.c_str()), TINYAI_OK) << tt::LastMessage();
    std::string error;
    ASSERT_TRUE(tt::LoadTmai(model, &source_, &error)) << error;
  }
  // The model as GGUF with the vocabulary above (pre-tokenizer pre), then
  // edit; converted: the status, and the .tmai's path in *out.
  TinyAIStatus Import(const std::string& pre, const std::function<void(tt::GgufWriter*)>& edit, std::string* out) {
    tt::GgufWriter w;
    std::string error;
    EXPECT_TRUE(tt::GgufFromSource(source_, tt::GgufModelOptions(), &w, &error)) << error;
    vocab_.Write(&w, pre);
    if (edit) edit(&w);
    const std::string in = dir_.File("b" + std::to_string(++count_) + ".gguf");
    *out = dir_.File("b" + std::to_string(count_) + ".tmai");
    EXPECT_TRUE(w.WriteFile(in));
    tinyaiClearLastError();
    return tinyai::ConvertGguf(in.c_str(), out->c_str(), nullptr);
  }
  std::string Imported(const std::string& pre, const std::function<void(tt::GgufWriter*)>& edit = nullptr) {
    std::string out;
    EXPECT_EQ(Import(pre, edit, &out), TINYAI_OK) << tt::LastMessage();
    return out;
  }
  void ExpectRefused(const std::string& pre, const std::function<void(tt::GgufWriter*)>& edit, TinyAIStatus want,
                     const char* says) {
    std::string out;
    EXPECT_EQ(Import(pre, edit, &out), want) << says;
    EXPECT_NE(std::string(tt::LastMessage()).find(says), std::string::npos) << tt::LastMessage();
  }
  int32_t B(char c) const { return static_cast<int32_t>(static_cast<unsigned char>(c)); }

  tt::TempDir dir_;
  tt::LlamaSource source_;
  Vocab vocab_{300};
  int count_ = 0;
};

std::string MetaString(const std::string& path, const char* key) {
  TinyAIMappedModel* m = tinyaiOpenMappedModel(path.c_str(), nullptr);
  if (m == nullptr) return "(no model)";
  const char* s = nullptr;
  size_t len = 0;
  std::string out = tinyaiGetMetadataString(m, key, &s, &len) == TINYAI_OK ? std::string(s, len) : "(none)";
  tinyaiCloseMappedModel(m);
  return out;
}

// Llama 3's pre-tokenizer: BOS added (llama.cpp's default for it), a
// pre-token that is a token as a whole taken whole, digits in threes,
// special tokens cut out of the text; the logits those ids give are the
// reference's.
TEST_F(GgufBpe, Llama3VocabularyEncodesAsItsPreTokenizerSays) {
  const std::string path = Imported("llama-bpe");
  EXPECT_EQ(MetaString(path, "tokenizer.model"), "gpt2");
  EXPECT_EQ(MetaString(path, "tokenizer.pre"), "llama-bpe");
  const Vocab& v = vocab_;
  EXPECT_EQ(tt::TokensOf(path, "the cat", true), (std::vector<int32_t>{v.bos, v.Id("the"), v.Id("Ġcat")}));
  EXPECT_EQ(tt::TokensOf(path, "the cat", false), (std::vector<int32_t>{v.Id("the"), v.Id("Ġcat")}));
  EXPECT_EQ(tt::TokensOf(path, " in the", false), (std::vector<int32_t>{v.Id("Ġin"), v.Id("Ġthe")}));
  EXPECT_EQ(tt::TokensOf(path, "cat", false), (std::vector<int32_t>{v.Id("cat")}));
  EXPECT_EQ(tt::TokensOf(path, "12345", false), (std::vector<int32_t>{B('1'), B('2'), B('3'), B('4'), B('5')}));
  EXPECT_EQ(tt::TokensOf(path, "<|eot_id|>x<tool>", false), (std::vector<int32_t>{v.eot, B('x'), v.tool}));
  // Not NFC: a decomposed e-acute stays three bytes.
  EXPECT_EQ(tt::TokensOf(path, "e\xCC\x81", false), (std::vector<int32_t>{B('e'), 0xCC, 0x81}));
  const std::vector<int32_t> ids = tt::TokensOf(path, "the cat in the", true);
  EXPECT_LT(tt::MaxDifference(tt::LogitsOf(path, "the cat in the"), tt::ReferenceLogits(source_, ids)), 2e-4);
}

// Qwen2's pre-tokenizer: no BOS unless the file asks, NFC first (Hugging
// Face's Qwen tokenizers normalize; recorded as tokenizer.nfc), one digit a
// pre-token.
TEST_F(GgufBpe, Qwen2VocabularyAddsNoBosAndNormalizes) {
  const std::string path = Imported("qwen2");
  EXPECT_EQ(MetaString(path, "tokenizer.pre"), "qwen2");
  const Vocab& v = vocab_;
  EXPECT_EQ(tt::TokensOf(path, "the cat", true), (std::vector<int32_t>{v.Id("the"), v.Id("Ġcat")}));
  // No ignore_merges: "cat" is merged pair by pair, and no merge makes it.
  EXPECT_EQ(tt::TokensOf(path, "cat", false), (std::vector<int32_t>{B('c'), v.Id("at")}));
  EXPECT_EQ(tt::TokensOf(path, "e\xCC\x81", false), (std::vector<int32_t>{0xC3, 0xA9}));
  const std::string with_bos = Imported("qwen2", [](tt::GgufWriter* w) {
    w->AddRaw("tokenizer.ggml.add_bos_token", 7, {1});
  });
  EXPECT_EQ(tt::TokensOf(with_bos, "cat", true).front(), v.bos);
}

// Decoding gives raw bytes; control tokens print nothing; a user-defined
// token prints its text. Generation echoes the prompt without BOS.
TEST_F(GgufBpe, DecodingAndGeneration) {
  const std::string path = Imported("llama-bpe");
  tt::OpenedModel m;
  ASSERT_TRUE(m.Open(path)) << tt::LastMessage();
  char out[64];
  size_t len = 0;
  ASSERT_EQ(tinyaiLLMDecodeToken(m.llm, vocab_.bos, vocab_.Id("Ġcat"), out, sizeof out, &len), TINYAI_OK);
  EXPECT_EQ(std::string(out, len), " cat");
  ASSERT_EQ(tinyaiLLMDecodeToken(m.llm, -1, 0x0A, out, sizeof out, &len), TINYAI_OK);
  EXPECT_EQ(std::string(out, len), "\n");
  ASSERT_EQ(tinyaiLLMDecodeToken(m.llm, -1, vocab_.bos, out, sizeof out, &len), TINYAI_OK);
  EXPECT_EQ(len, 0u);
  ASSERT_EQ(tinyaiLLMDecodeToken(m.llm, -1, vocab_.tool, out, sizeof out, &len), TINYAI_OK);
  EXPECT_EQ(std::string(out, len), "<tool>");
  EXPECT_EQ(tinyaiLLMDecodeToken(m.llm, -1, vocab_.Id("Ġcat"), out, 2, &len), TINYAI_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(len, 4u);
  const std::string text = tt::Greedy(path, "the cat", 8);
  EXPECT_EQ(text.compare(0, 7, "the cat"), 0) << text;
}

// The end of a generation: EOS, the file's eot/eom ids and the tokens whose
// texts are end-of-turn markers (here <|im_end|>, user-defined in the file).
TEST_F(GgufBpe, EndOfGenerationTokens) {
  std::vector<tinyai::StringView> tokens, merges;
  for (const std::string& t : vocab_.tokens) tokens.push_back({t.data(), t.size()});
  for (const std::string& t : vocab_.merges) merges.push_back({t.data(), t.size()});
  tinyai::BpeVocab bv;
  bv.tokens = tinyai::Span<const tinyai::StringView>(tokens.data(), tokens.size());
  bv.types = tinyai::Span<const int32_t>(vocab_.types.data(), vocab_.types.size());
  bv.merges = tinyai::Span<const tinyai::StringView>(merges.data(), merges.size());
  bv.pre = "llama-bpe";
  bv.bos = vocab_.bos;
  bv.eos = vocab_.eos;
  const int32_t extra[] = {vocab_.Id("Ġcat")};
  tinyai::TextTokenizer tok;
  ASSERT_EQ(tok.InitBytePairs(bv, tinyai::Span<const int32_t>(extra, 1)), TINYAI_OK) << tt::LastMessage();
  for (int32_t id : {vocab_.eos, vocab_.eot, vocab_.im_end, vocab_.Id("Ġcat")}) EXPECT_TRUE(tok.EndsGeneration(id)) << id;
  for (int32_t id : {vocab_.bos, vocab_.tool, vocab_.Id("the"), 0}) EXPECT_FALSE(tok.EndsGeneration(id)) << id;
  const int32_t outside[] = {300};
  EXPECT_EQ(tok.InitBytePairs(bv, tinyai::Span<const int32_t>(outside, 1)), TINYAI_ERR_BAD_TOKENIZER);
  // The importer records the file's eot id; <|im_end|> becomes a control token.
  const std::string path = Imported("llama-bpe", [this](tt::GgufWriter* w) {
    w->AddUint32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(vocab_.eot));
  });
  tt::OpenedModel m;
  ASSERT_TRUE(m.Open(path)) << tt::LastMessage();
  char out[32];
  size_t len = 1;
  ASSERT_EQ(tinyaiLLMDecodeToken(m.llm, -1, vocab_.im_end, out, sizeof out, &len), TINYAI_OK);
  EXPECT_EQ(len, 0u);
}

// The greedy answer's first token made the end-of-turn token: the text ends
// there (TINYAI_STOP_EOS), nothing generated. The chat template comes with
// the file, and its turn's special tokens are parsed.
TEST_F(GgufBpe, AnEndOfTurnTokenEndsTheGenerationAndTheChatTurnIsParsed) {
  const char* prompt = "the cat in the";
  const std::string plain = Imported("qwen2");
  const std::vector<float> logits = tt::LogitsOf(plain, prompt);
  ASSERT_EQ(logits.size() % 300, 0u);
  const float* last = logits.data() + logits.size() - 300;
  int32_t next = 0;
  for (int32_t i = 1; i < 300; ++i) next = last[i] > last[next] ? i : next;
  ASSERT_NE(next, vocab_.bos);
  const std::string path = Imported("qwen2", [next](tt::GgufWriter* w) {
    w->AddUint32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(next));
    w->AddString("tokenizer.chat_template", "{{ '<|im_start|>' + message['role'] + '\\n' }}");
  });
  tt::OpenedModel m;
  ASSERT_TRUE(m.Open(path)) << tt::LastMessage();
  TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
  params.sampler.temperature = 0.0f;
  params.maxNewTokens = 8;
  TinyAIGenerateStats stats;
  std::memset(&stats, 0, sizeof stats);
  stats.structSize = sizeof stats;
  char out[256];
  size_t len = 0;
  ASSERT_EQ(tinyaiLLMGenerate(m.llm, prompt, &params, out, sizeof out, &len, &stats), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(stats.stopReason, TINYAI_STOP_EOS);
  EXPECT_EQ(stats.generatedTokens, 0);
  EXPECT_EQ(std::string(out, len), prompt);
  EXPECT_STREQ(tinyaiStopReasonName(TINYAI_STOP_EOS), "eos");
  // Without the eot id, the same prompt generates.
  tt::OpenedModel p;
  ASSERT_TRUE(p.Open(plain)) << tt::LastMessage();
  ASSERT_EQ(tinyaiLLMGenerate(p.llm, prompt, &params, out, sizeof out, &len, &stats), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(stats.generatedTokens, 8);
  EXPECT_STREQ(tinyaiLLMChatTemplateName(p.llm), "none");
  size_t n = 0;
  EXPECT_EQ(tinyaiLLMChatPrompt(p.llm, nullptr, "hi", out, sizeof out, &n), TINYAI_ERR_UNSUPPORTED);

  EXPECT_STREQ(tinyaiLLMChatTemplateName(m.llm), "chatml");
  ASSERT_EQ(tinyaiLLMChatPrompt(m.llm, nullptr, "the cat", out, sizeof out, &n), TINYAI_OK) << tt::LastMessage();
  const std::string turn(out, n);
  EXPECT_EQ(turn, "<|im_start|>user\nthe cat<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<int32_t> ids = tt::TokensOf(path, turn.c_str(), true);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids[0], vocab_.im_start);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), vocab_.im_end), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), vocab_.im_start), 2);
}

TEST_F(GgufBpe, BadVocabulariesAreRefusedByName) {
  ExpectRefused("", nullptr, TINYAI_ERR_UNSUPPORTED, "no key 'tokenizer.ggml.pre'");
  ExpectRefused("default", nullptr, TINYAI_ERR_UNSUPPORTED, "'default'");
  ExpectRefused("llama-bpe", [](tt::GgufWriter* w) { w->RemoveKeys("tokenizer.ggml.merges"); },
                TINYAI_ERR_BAD_TOKENIZER, "no key 'tokenizer.ggml.merges'");
  ExpectRefused("llama-bpe", [](tt::GgufWriter* w) {
    w->RemoveKeys("tokenizer.ggml.merges");
    w->AddStrings("tokenizer.ggml.merges", {"h e", "q z"});
  }, TINYAI_ERR_BAD_TOKENIZER, "merges line 1 'q z'");
  ExpectRefused("llama-bpe", [this](tt::GgufWriter* w) {
    std::vector<int32_t> types = vocab_.types;
    types[7] = 9;
    w->RemoveKeys("tokenizer.ggml.token_type");
    w->AddInt32s("tokenizer.ggml.token_type", types);
  }, TINYAI_ERR_BAD_TOKENIZER, "token 7 ('ć') has token type 9");
  ExpectRefused("llama-bpe", [](tt::GgufWriter* w) { w->AddUint32("tokenizer.ggml.eot_token_id", 999); },
                TINYAI_ERR_BAD_TOKENIZER, "tokenizer.ggml.eot_token_id is 999, not a token (300 tokens)");
  ExpectRefused("llama-bpe", [](tt::GgufWriter* w) {
    w->RemoveKeys("tokenizer.ggml.bos_token_id");
  }, TINYAI_ERR_BAD_TOKENIZER, "adds BOS");
  ExpectRefused("llama-bpe", [](tt::GgufWriter* w) {
    w->RemoveKeys("tokenizer.ggml.model");
    w->AddString("tokenizer.ggml.model", "bert");
  }, TINYAI_ERR_UNSUPPORTED, "tokenizer 'bert'");
}

// The runtime checks the .tmai's keys too: a tokenizer.model it does not
// run, a token type that is no integer 1..6.
TEST_F(GgufBpe, TheRuntimeRefusesBadKeys) {
  const std::string path = Imported("llama-bpe");
  struct Case {
    const char* key;
    std::function<void(tt::Bytes*, size_t)> patch;
    TinyAIStatus want;
    const char* says;
  };
  const Case cases[] = {
      {"tokenizer.model", [](tt::Bytes* b, size_t at) { (*b)[at + 4 + 3] = '3'; }, TINYAI_ERR_UNSUPPORTED,
       "tokenizer.model 'gpt3'"},
      {"tokenizer.token_types", [](tt::Bytes* b, size_t at) {
         const float half = 2.5f;
         std::memcpy(&(*b)[at + 4], &half, 4);
       }, TINYAI_ERR_BAD_TOKENIZER, "tokenizer.token_types[0] is 2.5"},
      {"tokenizer.add_bos", [](tt::Bytes* b, size_t at) {
         const int64_t two = 2;
         std::memcpy(&(*b)[at], &two, 8);
       }, TINYAI_ERR_BAD_TOKENIZER, "tokenizer.add_bos is 2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    tt::Bytes image;
    ASSERT_TRUE(tt::ReadFileBytes(path, &image));
    const size_t at = tt::FindMetaValue(image, c.key);
    ASSERT_NE(at, 0u);
    c.patch(&image, at);
    tt::Reseal(&image);
    const std::string patched = dir_.File("patched.tmai");
    ASSERT_TRUE(tt::WriteFileBytes(patched, image));
    TinyAIMappedModel* m = tinyaiOpenMappedModel(patched.c_str(), nullptr);
    ASSERT_NE(m, nullptr) << tt::LastMessage();
    TinyAILLM* llm = nullptr;
    EXPECT_EQ(tinyaiCreateLLM(m, nullptr, &llm), c.want);
    EXPECT_NE(std::string(tt::LastMessage()).find(c.says), std::string::npos) << tt::LastMessage();
    tinyaiDestroyLLM(llm);
    tinyaiCloseMappedModel(m);
  }
}

}  // namespace
