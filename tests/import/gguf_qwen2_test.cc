// GGUF files of the Qwen2 architecture (general.architecture "qwen2"), as
// llama.cpp's converter writes them: keys "qwen2.*", biases on q, k and v,
// and q and k in Hugging Face's rotary layout (NEOX: each head's first
// halves, then its second halves). The import permutes q and k (rows and
// biases) into LLaMA's interleaved pairs and records llama.qkv_bias; the
// runtime adds the biases before the rotation. Checked against the
// double-precision reference forward with the biases, on a synthetic model.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
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
#include "tinyai/tinyai.h"
#include "tinyai/utils/mmap_loader.h"

namespace tt = tinyai::testing;

namespace {

class GgufQwen2 : public ::testing::Test {
 protected:
  void SetUp() override {
    tinyai::LlamaShape shape;
    ASSERT_EQ(tinyai::ParseSyntheticSpec("dim=64,hidden=96,layers=2,heads=4,kv_heads=2,vocab=300,seq_len=32,seed=5",
                                         &shape),
              TINYAI_OK);
    const std::string model = dir_.File("m.tmai");
    ASSERT_EQ(tinyai::WriteSyntheticModel(shape, model.c_str()), TINYAI_OK) << tt::LastMessage();
    std::string error;
    ASSERT_TRUE(tt::LoadTmai(model, &llama_, &error)) << error;
    // The same weights with biases of the size real ones have (Qwen2.5's
    // are up to a few units: they shift the attention noticeably).
    qwen_ = llama_;
    qwen_.params.qkv_bias = true;
    auto biases = std::make_shared<std::map<std::string, std::vector<float>>>();
    const size_t dim = static_cast<size_t>(llama_.params.dim), kv = static_cast<size_t>(llama_.params.kv_dim());
    for (int32_t l = 0; l < llama_.params.layers; ++l) {
      int kind = 0;
      for (const char* k : {"attn_q_bias", "attn_k_bias", "attn_v_bias"}) {
        std::vector<float> v(kind == 0 ? dim : kv);
        for (size_t i = 0; i < v.size(); ++i) v[i] = 0.8f * std::sin(0.37f * static_cast<float>(i) + 1.3f * l + kind);
        (*biases)["blk." + std::to_string(l) + "." + k] = v;
        ++kind;
      }
    }
    auto base = llama_.tensor;
    qwen_.tensor = [base, biases](const std::string& name) {
      auto it = biases->find(name);
      return it != biases->end() ? it->second : base(name);
    };
  }
  // qwen_ written as a Qwen2 GGUF (with edit), converted.
  TinyAIStatus Import(const std::function<void(tt::GgufWriter*)>& edit, std::string* out) {
    tt::GgufWriter w;
    tt::GgufModelOptions o;
    o.qwen2 = true;
    std::string error;
    EXPECT_TRUE(tt::GgufFromSource(qwen_, o, &w, &error)) << error;
    if (edit) edit(&w);
    const std::string in = dir_.File("q" + std::to_string(++count_) + ".gguf");
    *out = dir_.File("q" + std::to_string(count_) + ".tmai");
    EXPECT_TRUE(w.WriteFile(in));
    tinyaiClearLastError();
    const TinyAIStatus s = tinyai::ConvertGguf(in.c_str(), out->c_str(), nullptr);
    // Read in place, the file runs as converted (within 1e-4: its rotary pairs run in another order), or is refused too.
    if (s == TINYAI_OK) {
      tt::ExpectInPlaceAgrees(in, *out, 1e-4);
    } else {
      const std::string message = tt::LastMessage();
      EXPECT_NE(tt::OpenStatus(in), TINYAI_OK) << "read in place, a GGUF the import refuses (" << message << ") runs";
      tinyai::SetError(s, "%s", message.c_str());  // the import's error, as the caller checks it
    }
    return s;
  }

  tt::TempDir dir_;
  tt::LlamaSource llama_, qwen_;
  int count_ = 0;
};

TEST_F(GgufQwen2, BiasesAndNeoxRotaryGiveTheReferenceLogits) {
  std::string path;
  ASSERT_EQ(Import(nullptr, &path), TINYAI_OK) << tt::LastMessage();
  TinyAIMappedModel* m = tinyaiOpenMappedModel(path.c_str(), nullptr);
  ASSERT_NE(m, nullptr) << tt::LastMessage();
  int64_t bias = 0;
  EXPECT_EQ(tinyaiGetMetadataInt(m, "llama.qkv_bias", &bias), TINYAI_OK);
  EXPECT_EQ(bias, 1);
  tinyaiCloseMappedModel(m);
  const char* text = "ab cd ef gh ij kl";
  const std::vector<int32_t> tokens = tt::TokensOf(path, text, true);
  ASSERT_GT(tokens.size(), 8u);
  const std::vector<float> logits = tt::LogitsOf(path, text);
  EXPECT_LT(tt::MaxDifference(logits, tt::ReferenceLogits(qwen_, tokens)), 2e-4);
  // The biases matter: without them the logits are far off.
  EXPECT_GT(tt::MaxDifference(logits, tt::ReferenceLogits(llama_, tokens)), 1e-2);
}

// The same model as a Hugging Face checkpoint (model_type qwen2, the biases
// as q_proj.bias ..., q and k in Hugging Face's rotary layout): the same
// logits.
TEST_F(GgufQwen2, AHuggingFaceCheckpointGivesTheReferenceLogits) {
  const std::string folder = dir_.File("hf");
  ASSERT_EQ(::mkdir(folder.c_str(), 0755), 0);
  std::string error;
  ASSERT_TRUE(tt::WriteHfCheckpoint(qwen_, tt::HfOptions(), folder, &error)) << error;
  if (!tinyai::SentencePieceAvailable()) GTEST_SKIP() << "this build reads no tokenizer.model";
  const std::string path = dir_.File("hf.tmai");
  tinyaiClearLastError();
  ASSERT_EQ(tinyai::ConvertSafetensors(folder.c_str(), path.c_str(), nullptr), TINYAI_OK) << tt::LastMessage();
  const char* text = "ab cd ef gh ij kl";
  const std::vector<int32_t> tokens = tt::TokensOf(path, text, true);
  EXPECT_LT(tt::MaxDifference(tt::LogitsOf(path, text), tt::ReferenceLogits(qwen_, tokens)), 2e-4);
  // Without its biases the checkpoint is refused, naming the tensor.
  std::vector<tt::SafetensorsEntry> entries = tt::HfEntries(qwen_, tt::HfOptions());
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [](const tt::SafetensorsEntry& e) { return e.name == "model.layers.1.self_attn.v_proj.bias"; }),
                entries.end());
  ASSERT_TRUE(tt::WriteSafetensors(folder + "/model.safetensors", entries));
  EXPECT_EQ(tinyai::ConvertSafetensors(folder.c_str(), path.c_str(), nullptr), TINYAI_ERR_BAD_FORMAT);
  EXPECT_NE(std::string(tt::LastMessage()).find("model.layers.1.self_attn.v_proj.bias"), std::string::npos)
      << tt::LastMessage();
}

TEST_F(GgufQwen2, MissingOrMisshapenBiasesAreRefused) {
  std::string path;
  const uint64_t kv = static_cast<uint64_t>(qwen_.params.kv_dim());
  EXPECT_EQ(Import([kv](tt::GgufWriter* w) {
    ASSERT_TRUE(w->ReplaceTensor("blk.1.attn_k.bias", {kv + 2}, tt::kGgmlF32, std::vector<uint8_t>(4 * (kv + 2))));
  }, &path), TINYAI_ERR_BAD_FORMAT);
  EXPECT_NE(std::string(tt::LastMessage()).find("tensor 'blk.1.attn_k.bias' is 1-dimensional"), std::string::npos)
      << tt::LastMessage();
  // A "llama" file with Qwen2's bias tensors: they are not part of the model
  // it names, and refused rather than ignored.
  EXPECT_EQ(Import([](tt::GgufWriter* w) {
    w->RemoveKeys("general.architecture");
    w->AddString("general.architecture", "llama");
  }, &path), TINYAI_ERR_BAD_FORMAT);
  EXPECT_NE(std::string(tt::LastMessage()).find("llama.embedding_length"), std::string::npos) << tt::LastMessage();
  EXPECT_EQ(Import([](tt::GgufWriter* w) {
    w->RemoveKeys("general.architecture");
    w->AddString("general.architecture", "qwen3");
  }, &path), TINYAI_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(tt::LastMessage()).find("architecture 'qwen3'"), std::string::npos) << tt::LastMessage();
}

}  // namespace
