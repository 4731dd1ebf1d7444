// <tinyai/utils/quantize_mixed.h>: precisions resolved per kind, block and
// tensor; a model quantized as its weight cache loads it runs exactly as
// the same model saved and opened again, and is counted at its quantized
// size; the saved file is byte for byte what tinyai-convert --dtype writes;
// every refusal leaves the model as it was and writes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "format/test_models.h"
#include "import/model_builder.h"
#include "import/synthetic.h"
#include "tinyai/llm.h"
#include "tinyai/tinyai.h"
#include "tinyai/utils/mmap_loader.h"
#include "tinyai/utils/quantize_mixed.h"
#include "tools/common/cli.h"

namespace tt = tinyai::testing;

namespace {

// Rows of 48 and 100 values: neither a multiple of 32 (the last group of a
// row is padded), and an untied classifier.
tinyai::LlamaShape OddShape(bool shared) {
  tinyai::LlamaShape s = tt::TinyShape();
  s.dim = 48;
  s.hidden_dim = 100;
  s.heads = 4;
  s.kv_heads = 2;
  s.shared_classifier = shared;
  return s;
}

std::string WriteModel(const tt::TempDir& dir, const std::string& name, const tinyai::LlamaShape& shape,
                       TinyAIDType matrices = TINYAI_DTYPE_F32) {
  tinyai::WriteOptions o;
  o.matrix_dtype = matrices;
  const std::string path = dir.File(name);
  EXPECT_EQ(tinyai::WriteSyntheticModel(shape, path.c_str(), o), TINYAI_OK) << tt::LastMessage();
  return path;
}

TinyAIPrecision PrecisionOf(const TinyAIMappedModel* m, const char* name) {
  int32_t index = -1;
  EXPECT_EQ(tinyaiFindMappedTensor(m, name, &index), TINYAI_OK) << name;
  TinyAIPrecision p = TINYAI_PREC_AS_STORED;
  EXPECT_EQ(tinyaiGetTensorPrecision(m, index, &p), TINYAI_OK);
  return p;
}

// Greedy logits over a few positions.
std::vector<float> Logits(TinyAIMappedModel* m) {
  tinyai_tools::LLMHandle llm = tinyai_tools::CreateLLM(m, tinyaiCreateDefaultLLMConfig());
  TinyAIModelInfo info;
  info.structSize = sizeof info;
  EXPECT_EQ(tinyaiGetLLMModelInfo(llm.get(), &info), TINYAI_OK);
  std::vector<float> all, logits(static_cast<size_t>(info.vocabSize));
  int32_t token = 1;
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(tinyaiLLMEval(llm.get(), &token, 1, logits.data()), TINYAI_OK) << tt::LastMessage();
    all.insert(all.end(), logits.begin(), logits.end());
    token = static_cast<int32_t>((token * 31 + 7) % info.vocabSize);
  }
  return all;
}

TinyAIMixedPrecisionConfig All(TinyAIPrecision p) {
  TinyAIMixedPrecisionConfig c;
  tinyaiInitMixedPrecisionConfig(&c);
  c.embeddingPrecision = c.attentionPrecision = c.ffnPrecision = c.outputPrecision = p;
  return c;
}

TEST(MixedPrecision, DefaultsAndNames) {
  TinyAIMixedPrecisionConfig c;
  ASSERT_EQ(tinyaiInitMixedPrecisionConfig(&c), TINYAI_OK);
  EXPECT_EQ(c.structSize, sizeof c);
  EXPECT_EQ(c.embeddingPrecision, TINYAI_PREC_INT8);
  EXPECT_EQ(c.attentionPrecision, TINYAI_PREC_INT4);
  EXPECT_EQ(c.ffnPrecision, TINYAI_PREC_INT4);
  EXPECT_EQ(c.outputPrecision, TINYAI_PREC_INT8);
  EXPECT_EQ(c.groupSize, 32);
  EXPECT_EQ(c.overrideCount, 0u);
  EXPECT_EQ(tinyaiInitMixedPrecisionConfig(nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  for (int p = TINYAI_PREC_FP32; p <= TINYAI_PREC_Q5_1; ++p) {
    TinyAIPrecision back = TINYAI_PREC_FP32;
    ASSERT_EQ(tinyaiParsePrecision(tinyaiPrecisionName(static_cast<TinyAIPrecision>(p)), &back), TINYAI_OK);
    EXPECT_EQ(back, p);
  }
  TinyAIPrecision out;
  // GGUF's names, in either case.
  const std::pair<const char*, TinyAIPrecision> gguf[] = {
      {"Q4_0", TINYAI_PREC_INT4_SYMMETRIC}, {"q8_0", TINYAI_PREC_INT8}, {"IQ4_NL", TINYAI_PREC_INT4},
      {"f16", TINYAI_PREC_FP16},           {"Q4_K", TINYAI_PREC_Q4_K}, {"q6_k", TINYAI_PREC_Q6_K},
      {"Q5_1", TINYAI_PREC_Q5_1}};
  for (const auto& g : gguf) {
    ASSERT_EQ(tinyaiParsePrecision(g.first, &out), TINYAI_OK) << g.first;
    EXPECT_EQ(out, g.second) << g.first;
  }
  EXPECT_EQ(tinyaiParsePrecision("q4_k_m_and_then_some", &out), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiParsePrecision("int3", &out), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tt::LastMessage()).find("int3"), std::string::npos);
  EXPECT_STREQ(tinyaiPrecisionName(static_cast<TinyAIPrecision>(42)), "unknown");
}

// Kinds, then blocks, then tensors; norms never change; a tied classifier
// takes the finer of embedding and output.
TEST(MixedPrecision, ResolvesKindsBlocksAndTensors) {
  tt::TempDir dir;
  const std::string untied = WriteModel(dir, "untied.tmai", OddShape(false));
  tinyai_tools::ModelHandle m = tinyai_tools::OpenModel(untied, nullptr);
  TinyAIMixedPrecisionConfig c;
  tinyaiInitMixedPrecisionConfig(&c);
  c.embeddingPrecision = TINYAI_PREC_INT8;
  c.attentionPrecision = TINYAI_PREC_INT4;
  c.ffnPrecision = TINYAI_PREC_INT4_SYMMETRIC;
  c.outputPrecision = TINYAI_PREC_FP16;
  const TinyAIPrecisionOverride overrides[] = {
      {1, nullptr, TINYAI_PREC_INT8},                 // block 1: int8 ...
      {-1, "blk.1.ffn_down", TINYAI_PREC_FP32},      // ... but its down projection fp32
      {-1, "blk.0.attn_v", TINYAI_PREC_AS_STORED},   // as the file has it
  };
  c.overrides = overrides;
  c.overrideCount = 3;
  ASSERT_EQ(tinyaiApplyMixedPrecision(m.get(), &c), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(PrecisionOf(m.get(), "token_embd"), TINYAI_PREC_INT8);
  EXPECT_EQ(PrecisionOf(m.get(), "output"), TINYAI_PREC_FP16);
  EXPECT_EQ(PrecisionOf(m.get(), "blk.0.attn_q"), TINYAI_PREC_INT4);
  EXPECT_EQ(PrecisionOf(m.get(), "blk.0.attn_v"), TINYAI_PREC_FP32);
  EXPECT_EQ(PrecisionOf(m.get(), "blk.0.ffn_gate"), TINYAI_PREC_INT4_SYMMETRIC);
  EXPECT_EQ(PrecisionOf(m.get(), "blk.1.attn_q"), TINYAI_PREC_INT8);
  EXPECT_EQ(PrecisionOf(m.get(), "blk.1.ffn_up"), TINYAI_PREC_INT8);
  EXPECT_EQ(PrecisionOf(m.get(), "blk.1.ffn_down"), TINYAI_PREC_FP32);
  EXPECT_EQ(PrecisionOf(m.get(), "blk.1.attn_norm"), TINYAI_PREC_FP32);
  EXPECT_EQ(PrecisionOf(m.get(), "output_norm"), TINYAI_PREC_FP32);
  int32_t q = -1;
  ASSERT_EQ(tinyaiFindMappedTensor(m.get(), "blk.0.attn_q", &q), TINYAI_OK);
  EXPECT_EQ(tt::TensorDType(m.get(), q), TINYAI_DTYPE_Q4NL_G32);
  // The tensor's entry wins over its block's where it is listed, not because
  // it comes later; of two entries for the same block or tensor, the last.
  const TinyAIPrecisionOverride reordered[] = {
      {-1, "blk.1.ffn_down", TINYAI_PREC_FP32},             // before its block's entry: still wins
      {1, nullptr, TINYAI_PREC_INT8},
      {0, nullptr, TINYAI_PREC_INT8},                       // block 0 twice: the last, fp16
      {0, nullptr, TINYAI_PREC_FP16},
      {-1, "blk.0.ffn_up", TINYAI_PREC_INT4_SYMMETRIC},     // ffn_up twice: the last, int4
      {-1, "blk.0.ffn_up", TINYAI_PREC_INT4},
  };
  c.overrides = reordered;
  c.overrideCount = 6;
  ASSERT_EQ(tinyaiApplyMixedPrecision(m.get(), &c), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(PrecisionOf(m.get(), "blk.1.ffn_down"), TINYAI_PREC_FP32);
  EXPECT_EQ(PrecisionOf(m.get(), "blk.1.ffn_up"), TINYAI_PREC_INT8);
  EXPECT_EQ(PrecisionOf(m.get(), "blk.0.attn_q"), TINYAI_PREC_FP16);
  EXPECT_EQ(PrecisionOf(m.get(), "blk.0.ffn_gate"), TINYAI_PREC_FP16);
  EXPECT_EQ(PrecisionOf(m.get(), "blk.0.ffn_up"), TINYAI_PREC_INT4);
  EXPECT_EQ(PrecisionOf(m.get(), "token_embd"), TINYAI_PREC_INT8);
  EXPECT_EQ(PrecisionOf(m.get(), "output"), TINYAI_PREC_FP16);

  const std::string tied = WriteModel(dir, "tied.tmai", OddShape(true));
  tinyai_tools::ModelHandle t = tinyai_tools::OpenModel(tied, nullptr);
  // What the model handed out before stays valid across applications (the
  // mmap_loader.h contract: until close), and descriptors follow them.
  TinyAITensorInfo info;
  info.structSize = sizeof info;
  ASSERT_EQ(tinyaiGetMappedTensorInfo(t.get(), 0, &info), TINYAI_OK);
  const char* name = info.name;
  const TinyAILayerDescriptor* block0 = tinyaiGetLayerDescriptor(t.get(), 1);
  const uint64_t f32_bytes = block0->decodedSize;
  c.overrideCount = 0;
  ASSERT_EQ(tinyaiApplyMixedPrecision(t.get(), &c), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(PrecisionOf(t.get(), "token_embd"), TINYAI_PREC_FP16);
  c.outputPrecision = TINYAI_PREC_INT4;
  ASSERT_EQ(tinyaiApplyMixedPrecision(t.get(), &c), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(PrecisionOf(t.get(), "token_embd"), TINYAI_PREC_INT8);
  // The classifier left as stored: the tied table stays the file's f32, the
  // finer of that and int8 (and so does an embedding left as stored).
  c.outputPrecision = TINYAI_PREC_AS_STORED;
  ASSERT_EQ(tinyaiApplyMixedPrecision(t.get(), &c), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(PrecisionOf(t.get(), "token_embd"), TINYAI_PREC_FP32);
  EXPECT_EQ(PrecisionOf(t.get(), "blk.0.attn_q"), TINYAI_PREC_INT4);
  c.embeddingPrecision = TINYAI_PREC_AS_STORED;
  c.outputPrecision = TINYAI_PREC_INT4;
  ASSERT_EQ(tinyaiApplyMixedPrecision(t.get(), &c), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(PrecisionOf(t.get(), "token_embd"), TINYAI_PREC_FP32);
  c.embeddingPrecision = TINYAI_PREC_INT8;
  c.outputPrecision = TINYAI_PREC_INT4;
  {
    // In an f16 file, a table left as stored is f16: coarser than FP32,
    // finer than INT8.
    const std::string tied16 = WriteModel(dir, "tied16.tmai", OddShape(true), TINYAI_DTYPE_F16);
    tinyai_tools::ModelHandle h = tinyai_tools::OpenModel(tied16, nullptr);
    TinyAIMixedPrecisionConfig f = c;
    f.embeddingPrecision = TINYAI_PREC_FP32;
    f.outputPrecision = TINYAI_PREC_AS_STORED;
    ASSERT_EQ(tinyaiApplyMixedPrecision(h.get(), &f), TINYAI_OK) << tt::LastMessage();
    EXPECT_EQ(PrecisionOf(h.get(), "token_embd"), TINYAI_PREC_FP32);
    f.embeddingPrecision = TINYAI_PREC_AS_STORED;
    f.outputPrecision = TINYAI_PREC_FP32;
    ASSERT_EQ(tinyaiApplyMixedPrecision(h.get(), &f), TINYAI_OK) << tt::LastMessage();
    EXPECT_EQ(PrecisionOf(h.get(), "token_embd"), TINYAI_PREC_FP32);
    f.embeddingPrecision = TINYAI_PREC_INT8;
    f.outputPrecision = TINYAI_PREC_AS_STORED;
    ASSERT_EQ(tinyaiApplyMixedPrecision(h.get(), &f), TINYAI_OK) << tt::LastMessage();
    EXPECT_EQ(PrecisionOf(h.get(), "token_embd"), TINYAI_PREC_FP16);
  }
  {
    // In a q4nl file, a table left as stored stays so whatever the other
    // side asks: int8 would quantize it twice, fp16 widen it for nothing.
    const std::string tied4 = WriteModel(dir, "tied4.tmai", OddShape(true), TINYAI_DTYPE_Q4NL_G32);
    tinyai_tools::ModelHandle h = tinyai_tools::OpenModel(tied4, nullptr);
    ASSERT_EQ(PrecisionOf(h.get(), "token_embd"), TINYAI_PREC_INT4);
    TinyAIMixedPrecisionConfig f = All(TINYAI_PREC_AS_STORED);
    for (TinyAIPrecision other : {TINYAI_PREC_INT8, TINYAI_PREC_FP16, TINYAI_PREC_INT4_SYMMETRIC}) {
      SCOPED_TRACE(other);
      f.embeddingPrecision = other;
      f.outputPrecision = TINYAI_PREC_AS_STORED;
      ASSERT_EQ(tinyaiApplyMixedPrecision(h.get(), &f), TINYAI_OK) << tt::LastMessage();
      EXPECT_EQ(PrecisionOf(h.get(), "token_embd"), TINYAI_PREC_INT4);
      f.embeddingPrecision = TINYAI_PREC_AS_STORED;
      f.outputPrecision = other;
      ASSERT_EQ(tinyaiApplyMixedPrecision(h.get(), &f), TINYAI_OK) << tt::LastMessage();
      EXPECT_EQ(PrecisionOf(h.get(), "token_embd"), TINYAI_PREC_INT4);
    }
  }
  // Each call starts from the file: AS_STORED everywhere undoes it.
  const TinyAIMixedPrecisionConfig keep = All(TINYAI_PREC_AS_STORED);
  ASSERT_EQ(tinyaiApplyMixedPrecision(t.get(), &keep), TINYAI_OK);
  EXPECT_EQ(PrecisionOf(t.get(), "token_embd"), TINYAI_PREC_FP32);
  EXPECT_EQ(PrecisionOf(t.get(), "blk.0.attn_q"), TINYAI_PREC_FP32);
  EXPECT_STREQ(name, "token_embd");
  EXPECT_EQ(block0, tinyaiGetLayerDescriptor(t.get(), 1));
  EXPECT_EQ(block0->decodedSize, f32_bytes);
  ASSERT_EQ(tinyaiApplyMixedPrecision(t.get(), &c), TINYAI_OK);
  EXPECT_LT(block0->decodedSize * 4, f32_bytes);
  EXPECT_STREQ(name, "token_embd");
}

// Quantizing as the cache loads, saving, and converting offline give the
// same bytes; the applied and the saved model compute the same logits.
TEST(MixedPrecision, AppliedEqualsSavedEqualsConverted) {
  tt::TempDir dir;
  const tinyai::LlamaShape shape = OddShape(false);
  const std::string f32 = WriteModel(dir, "f32.tmai", shape);
  for (TinyAIPrecision p : {TINYAI_PREC_INT8, TINYAI_PREC_INT4, TINYAI_PREC_INT4_SYMMETRIC, TINYAI_PREC_FP16}) {
    SCOPED_TRACE(tinyaiPrecisionName(p));
    tinyai_tools::ModelHandle m = tinyai_tools::OpenModel(f32, nullptr);
    const TinyAIMixedPrecisionConfig c = All(p);
    ASSERT_EQ(tinyaiApplyMixedPrecision(m.get(), &c), TINYAI_OK) << tt::LastMessage();
    const std::string saved = dir.File(std::string("saved-") + tinyaiPrecisionName(p) + ".tmai");
    uint64_t expect_size = 0;
    ASSERT_EQ(tinyaiGetSavedModelSize(m.get(), &expect_size), TINYAI_OK);
    TinyAISaveOptions two = tinyaiCreateDefaultSaveOptions();
    two.threads = 2;  // the same bytes as one thread (and as the converter)
    ASSERT_EQ(tinyaiSaveMappedModel(m.get(), saved.c_str(), &two), TINYAI_OK) << tt::LastMessage();
    EXPECT_FALSE(tt::FileExists(saved + ".part"));
    const TinyAIDType d = tt::TensorDType(m.get(), 2);  // blk.0.attn_q
    const std::string converted = WriteModel(dir, std::string("conv-") + tinyaiPrecisionName(p) + ".tmai", shape, d);
    tinyai_tools::ModelHandle s = tinyai_tools::OpenModel(saved, nullptr);
    tinyai_tools::ModelHandle v = tinyai_tools::OpenModel(converted, nullptr);
    EXPECT_EQ(tinyaiGetMappedModelFileSize(s.get()), expect_size);
    ASSERT_EQ(tinyaiGetMappedTensorCount(s.get()), tinyaiGetMappedTensorCount(m.get()));
    for (int t = 0; t < tinyaiGetMappedTensorCount(m.get()); ++t) {
      SCOPED_TRACE(t);
      EXPECT_EQ(tt::TensorDType(s.get(), t), tt::TensorDType(m.get(), t));
      const std::vector<uint8_t> applied = tt::TensorBytes(m.get(), t);
      EXPECT_EQ(tt::TensorBytes(s.get(), t), applied);
      EXPECT_EQ(tt::TensorBytes(v.get(), t), applied);
    }
    const std::vector<float> la = Logits(m.get()), ls = Logits(s.get());
    ASSERT_EQ(la.size(), ls.size());
    EXPECT_EQ(std::memcmp(la.data(), ls.data(), la.size() * sizeof(float)), 0);
    // And they are not the fp32 model's.
    tinyai_tools::ModelHandle ref = tinyai_tools::OpenModel(f32, nullptr);
    const std::vector<float> lr = Logits(ref.get());
    EXPECT_NE(std::memcmp(la.data(), lr.data(), la.size() * sizeof(float)), 0);
  }
}

// GGUF's block formats as precisions: a K-quant where the rows are whole
// blocks of 256, llama.cpp's fallback where they are not (q4_k to q5_0, q5_k
// to q5_1, q6_k to int8), the applied model equal to its saved file, and
// the logits near the fp32 model's, nearer with more bits.
TEST(MixedPrecision, BlockFormatsAndTheirFallbacks) {
  tt::TempDir dir;
  tinyai::LlamaShape shape = tt::TinyShape();
  shape.dim = 256;         // q, k, v, out, gate, up: rows of 256
  shape.hidden_dim = 320;  // down: rows of 320, not whole blocks
  shape.heads = 4;
  shape.kv_heads = 2;
  shape.shared_classifier = false;
  const std::string f32 = WriteModel(dir, "f32.tmai", shape);
  tinyai_tools::ModelHandle ref = tinyai_tools::OpenModel(f32, nullptr);
  const std::vector<float> lr = Logits(ref.get());
  double previous = 1e30;
  const struct {
    TinyAIPrecision p, fallback;
  } cases[] = {{TINYAI_PREC_Q4_K, TINYAI_PREC_Q5_0}, {TINYAI_PREC_Q5_K, TINYAI_PREC_Q5_1},
               {TINYAI_PREC_Q6_K, TINYAI_PREC_INT8}};
  for (const auto& k : cases) {
    SCOPED_TRACE(tinyaiPrecisionName(k.p));
    tinyai_tools::ModelHandle m = tinyai_tools::OpenModel(f32, nullptr);
    const TinyAIMixedPrecisionConfig c = All(k.p);
    ASSERT_EQ(tinyaiApplyMixedPrecision(m.get(), &c), TINYAI_OK) << tt::LastMessage();
    EXPECT_EQ(PrecisionOf(m.get(), "blk.0.attn_q"), k.p);
    EXPECT_EQ(PrecisionOf(m.get(), "blk.1.ffn_up"), k.p);
    EXPECT_EQ(PrecisionOf(m.get(), "blk.0.ffn_down"), k.fallback);
    const std::string saved = dir.File(std::string("saved-") + tinyaiPrecisionName(k.p) + ".tmai");
    ASSERT_EQ(tinyaiSaveMappedModel(m.get(), saved.c_str(), nullptr), TINYAI_OK) << tt::LastMessage();
    tinyai_tools::ModelHandle s = tinyai_tools::OpenModel(saved, nullptr);
    EXPECT_EQ(PrecisionOf(s.get(), "blk.0.ffn_down"), k.fallback);
    const std::vector<float> la = Logits(m.get()), ls = Logits(s.get());
    ASSERT_EQ(la.size(), lr.size());
    EXPECT_EQ(std::memcmp(la.data(), ls.data(), la.size() * sizeof(float)), 0);
    double err = 0.0, norm = 0.0;
    for (size_t i = 0; i < la.size(); ++i) {
      err += (la[i] - lr[i]) * static_cast<double>(la[i] - lr[i]);
      norm += lr[i] * static_cast<double>(lr[i]);
    }
    const double rel = std::sqrt(err / norm);
    EXPECT_GT(rel, 0.0);
    EXPECT_LT(rel, 0.2);
    EXPECT_LT(rel, previous);
    previous = rel;
  }
}

// The weight cache holds and counts the quantized bytes: streamed through
// a cap, the weights held are the int4 model's, not the f32 one's.
TEST(MixedPrecision, CacheCountsQuantizedBytes) {
  tt::TempDir dir;
  tinyai::LlamaShape shape = OddShape(false);
  shape.vocab_size = 3000;  // an embedding of ~576 KB in f32
  const std::string f32 = WriteModel(dir, "f32.tmai", shape);
  TinyAIMmapConfig cfg = tinyaiCreateDefaultMmapConfig();
  cfg.rowSliceSize = 16 * 1024;
  tinyai_tools::ModelHandle m = tinyai_tools::OpenModel(f32, &cfg);
  tinyai_tools::ModelHandle plain = tinyai_tools::OpenModel(f32, &cfg);
  const TinyAIMixedPrecisionConfig c = All(TINYAI_PREC_INT4);
  ASSERT_EQ(tinyaiApplyMixedPrecision(m.get(), &c), TINYAI_OK) << tt::LastMessage();
  uint64_t quantized = 0, full = 0;
  for (int l = 0; l < tinyaiGetMappedLayerCount(m.get()); ++l) {
    quantized += tinyaiGetLayerDescriptor(m.get(), l)->decodedSize;
    full += tinyaiGetLayerDescriptor(plain.get(), l)->decodedSize;
  }
  EXPECT_LT(quantized * 5, full);  // 18 bytes per 32 values against 128 (norms stay f32)
  (void)Logits(m.get());
  (void)Logits(plain.get());
  const TinyAICacheStats a = tt::CacheStats(m.get()), b = tt::CacheStats(plain.get());
  EXPECT_GT(a.peakHeldBytes, 0u);
  EXPECT_LT(a.peakHeldBytes * 3, b.peakHeldBytes);
  EXPECT_LT(a.bytesLoaded * 5, b.bytesLoaded);
  // Under a cap smaller than the quantized model it streams, and the cap holds.
  TinyAIMmapConfig capped = cfg;
  capped.maxCacheSize = static_cast<size_t>(quantized / 2);
  tinyai_tools::ModelHandle small = tinyai_tools::OpenModel(f32, &capped);
  ASSERT_EQ(tinyaiApplyMixedPrecision(small.get(), &c), TINYAI_OK);
  const std::vector<float> streamed = Logits(small.get()), whole = Logits(m.get());
  EXPECT_EQ(std::memcmp(streamed.data(), whole.data(), whole.size() * sizeof(float)), 0);
  EXPECT_LE(tt::CacheStats(small.get()).peakHeldBytes, capped.maxCacheSize);
}

// A model in memory (flash) converts too; saving through a callback.
TEST(MixedPrecision, FromMemoryAndThroughACallback) {
  tt::TempDir dir;
  const std::string f16 = WriteModel(dir, "f16.tmai", OddShape(true), TINYAI_DTYPE_F16);
  tt::Bytes bytes;
  ASSERT_TRUE(tt::ReadFileBytes(f16, &bytes));
  tt::AlignedImage image(bytes);
  TinyAIMappedModel* m = tinyaiOpenMappedModelFromMemory(image.data(), image.size(), nullptr);
  ASSERT_NE(m, nullptr) << tt::LastMessage();
  const TinyAIMixedPrecisionConfig c = All(TINYAI_PREC_INT8);
  ASSERT_EQ(tinyaiApplyMixedPrecision(m, &c), TINYAI_OK) << tt::LastMessage();
  uint64_t size = 0;
  ASSERT_EQ(tinyaiGetSavedModelSize(m, &size), TINYAI_OK);
  std::vector<uint8_t> out(static_cast<size_t>(size), 0xAB);
  auto write = [](void* user, uint64_t offset, const void* data, size_t n) -> int {
    auto* o = static_cast<std::vector<uint8_t>*>(user);
    if (offset + n > o->size()) return 7;
    std::memcpy(o->data() + offset, data, n);
    return 0;
  };
  int calls = 0;
  TinyAISaveOptions opt = tinyaiCreateDefaultSaveOptions();
  opt.progressUser = &calls;
  opt.progress = [](void* user, const TinyAISaveProgress* p) -> int {
    ++*static_cast<int*>(user);
    EXPECT_LE(p->bytesDone, p->bytesTotal);
    if (p->savedDType == TINYAI_DTYPE_Q8_G32) {
      EXPECT_EQ(p->storedDType, TINYAI_DTYPE_F16);
      EXPECT_GT(p->relativeRmsError, 0.0);
      EXPECT_LT(p->relativeRmsError, 0.02);
      EXPECT_LT(p->bytesAfter, p->bytesBefore);
    } else {
      EXPECT_EQ(p->relativeRmsError, 0.0);
    }
    return 0;
  };
  ASSERT_EQ(tinyaiSaveMappedModelTo(m, write, &out, &opt), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(calls, tinyaiGetMappedTensorCount(m));
  tt::AlignedImage saved(out);
  TinyAIMappedModel* s = tinyaiOpenMappedModelFromMemory(saved.data(), saved.size(), nullptr);
  ASSERT_NE(s, nullptr) << tt::LastMessage();
  for (int t = 0; t < tinyaiGetMappedTensorCount(m); ++t) EXPECT_EQ(tt::TensorBytes(s, t), tt::TensorBytes(m, t)) << t;
  const std::vector<float> a = Logits(m), b = Logits(s);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  // A failing write is TINYAI_ERR_IO naming the callback's value.
  std::vector<uint8_t> tiny(100);
  EXPECT_EQ(tinyaiSaveMappedModelTo(m, write, &tiny, nullptr), TINYAI_ERR_IO);
  EXPECT_NE(std::string(tt::LastMessage()).find("returned 7"), std::string::npos) << tt::LastMessage();
  tinyaiCloseMappedModel(s);
  tinyaiCloseMappedModel(m);
}

// A stored int8 model widens to fp32 exactly (the dequantized values).
TEST(MixedPrecision, WidensQuantizedExactly) {
  tt::TempDir dir;
  const std::string q8 = WriteModel(dir, "q8.tmai", OddShape(false), TINYAI_DTYPE_Q8_G32);
  tinyai_tools::ModelHandle a = tinyai_tools::OpenModel(q8, nullptr);
  tinyai_tools::ModelHandle b = tinyai_tools::OpenModel(q8, nullptr);
  const TinyAIMixedPrecisionConfig c = All(TINYAI_PREC_FP32);
  ASSERT_EQ(tinyaiApplyMixedPrecision(b.get(), &c), TINYAI_OK) << tt::LastMessage();
  int32_t q = -1;
  ASSERT_EQ(tinyaiFindMappedTensor(a.get(), "blk.0.attn_q", &q), TINYAI_OK);
  EXPECT_EQ(tt::TensorDType(b.get(), q), TINYAI_DTYPE_F32);
  const std::vector<float> la = Logits(a.get()), lb = Logits(b.get());
  // (Counted, not a max reduction: aarch64 GCC 12 crashes vectorizing
  // std::fmax over this loop, an internal compiler error in
  // vect_transform_reduction.)
  size_t far = 0;
  for (size_t i = 0; i < la.size(); ++i) far += std::fabs(la[i] - lb[i]) >= 1e-3f;
  EXPECT_EQ(far, 0u);  // the same weights; only the products' input rounding differs
}

TEST(MixedPrecision, RefusalsLeaveTheModelAsItWas) {
  tt::TempDir dir;
  const std::string f32 = WriteModel(dir, "f32.tmai", OddShape(false));
  tinyai_tools::ModelHandle m = tinyai_tools::OpenModel(f32, nullptr);
  auto expect = [&](TinyAIMixedPrecisionConfig c, TinyAIStatus want, const char* says) {
    EXPECT_EQ(tinyaiApplyMixedPrecision(m.get(), &c), want) << says;
    EXPECT_NE(std::string(tt::LastMessage()).find(says), std::string::npos) << tt::LastMessage();
    EXPECT_EQ(PrecisionOf(m.get(), "blk.0.attn_q"), TINYAI_PREC_FP32);
  };
  TinyAIMixedPrecisionConfig c = All(TINYAI_PREC_INT8);
  c.ffnPrecision = static_cast<TinyAIPrecision>(11);
  expect(c, TINYAI_ERR_INVALID_ARGUMENT, "ffnPrecision is 11");
  c = All(TINYAI_PREC_INT8);
  c.groupSize = 0;
  expect(c, TINYAI_ERR_INVALID_ARGUMENT, "groupSize is 0");
  c.groupSize = 64;
  expect(c, TINYAI_ERR_UNSUPPORTED, "groupSize 64");
  c = All(TINYAI_PREC_INT8);
  TinyAIPrecisionOverride o = {2, nullptr, TINYAI_PREC_INT4};
  c.overrides = &o;
  c.overrideCount = 1;
  expect(c, TINYAI_ERR_INVALID_ARGUMENT, "overrides[0].layer is 2");
  o = {-1, "blk.9.attn_q", TINYAI_PREC_INT4};
  expect(c, TINYAI_ERR_NOT_FOUND, "blk.9.attn_q");
  o = {0, "blk.0.attn_q", TINYAI_PREC_INT4};
  expect(c, TINYAI_ERR_INVALID_ARGUMENT, "both");
  o = {-1, nullptr, TINYAI_PREC_INT4};
  expect(c, TINYAI_ERR_INVALID_ARGUMENT, "neither");
  o = {-1, "blk.0.attn_norm", TINYAI_PREC_INT8};
  expect(c, TINYAI_ERR_UNSUPPORTED, "not a matrix");
  o = {-1, "blk.0.attn_q", static_cast<TinyAIPrecision>(-3)};
  expect(c, TINYAI_ERR_INVALID_ARGUMENT, "overrides[0].precision is -3");
  c.overrides = nullptr;
  expect(c, TINYAI_ERR_INVALID_ARGUMENT, "overrides is NULL");
  c = All(TINYAI_PREC_INT8);
  c.structSize = 2;
  expect(c, TINYAI_ERR_INVALID_ARGUMENT, "structSize");
  EXPECT_EQ(tinyaiApplyMixedPrecision(m.get(), nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiApplyMixedPrecision(nullptr, &c), TINYAI_ERR_INVALID_ARGUMENT);

  // Pinned weights, a runner on the model: TINYAI_ERR_MISUSE.
  c = All(TINYAI_PREC_INT8);
  ASSERT_NE(tinyaiGetLayerWeights(m.get(), 1), nullptr);
  expect(c, TINYAI_ERR_MISUSE, "pinned");
  ASSERT_EQ(tinyaiReleaseLayerWeights(m.get(), 1), TINYAI_OK);
  {
    tinyai_tools::LLMHandle llm = tinyai_tools::CreateLLM(m.get(), tinyaiCreateDefaultLLMConfig());
    expect(c, TINYAI_ERR_MISUSE, "runs on this model");
  }
  ASSERT_EQ(tinyaiApplyMixedPrecision(m.get(), &c), TINYAI_OK) << tt::LastMessage();

  // An int4 model is not quantized again to int8; kept or widened it may be.
  const std::string q4 = WriteModel(dir, "q4.tmai", OddShape(false), TINYAI_DTYPE_Q4_G32);
  tinyai_tools::ModelHandle q = tinyai_tools::OpenModel(q4, nullptr);
  c = All(TINYAI_PREC_INT8);
  EXPECT_EQ(tinyaiApplyMixedPrecision(q.get(), &c), TINYAI_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(tt::LastMessage()).find("round it twice"), std::string::npos) << tt::LastMessage();
  c = All(TINYAI_PREC_INT4_SYMMETRIC);
  EXPECT_EQ(tinyaiApplyMixedPrecision(q.get(), &c), TINYAI_OK) << tt::LastMessage();
  c = All(TINYAI_PREC_FP16);
  EXPECT_EQ(tinyaiApplyMixedPrecision(q.get(), &c), TINYAI_OK) << tt::LastMessage();

  // A zstd-compressed matrix must be decompressed first.
  tinyai::WriteOptions z;
  z.codec = TINYAI_CODEC_ZSTD;
  const std::string zpath = dir.File("zstd.tmai");
  ASSERT_EQ(tinyai::WriteSyntheticModel(OddShape(false), zpath.c_str(), z), TINYAI_OK) << tt::LastMessage();
  tinyai_tools::ModelHandle zm = tinyai_tools::OpenModel(zpath, nullptr);
  c = All(TINYAI_PREC_INT8);
  EXPECT_EQ(tinyaiApplyMixedPrecision(zm.get(), &c), TINYAI_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(tt::LastMessage()).find("zstd"), std::string::npos) << tt::LastMessage();
  // ... but it saves (decompressed) as it is.
  const std::string zsaved = dir.File("zstd-saved.tmai");
  ASSERT_EQ(tinyaiSaveMappedModel(zm.get(), zsaved.c_str(), nullptr), TINYAI_OK) << tt::LastMessage();
  tinyai_tools::ModelHandle zs = tinyai_tools::OpenModel(zsaved, nullptr);
  const std::vector<float> l1 = Logits(zm.get()), l2 = Logits(zs.get());
  EXPECT_EQ(std::memcmp(l1.data(), l2.data(), l1.size() * sizeof(float)), 0);

  // A closed model.
  TinyAIMappedModel* closed = tinyaiOpenMappedModel(f32.c_str(), nullptr);
  ASSERT_NE(closed, nullptr);
  tinyaiCloseMappedModel(closed);
  EXPECT_EQ(tinyaiApplyMixedPrecision(closed, &c), TINYAI_ERR_MISUSE);
  EXPECT_EQ(tinyaiSaveMappedModel(closed, dir.File("x.tmai").c_str(), nullptr), TINYAI_ERR_MISUSE);
}

TEST(MixedPrecision, SaveRefusalsWriteNothing) {
  tt::TempDir dir;
  const std::string f32 = WriteModel(dir, "f32.tmai", OddShape(false));
  tinyai_tools::ModelHandle m = tinyai_tools::OpenModel(f32, nullptr);
  const TinyAIMixedPrecisionConfig c = All(TINYAI_PREC_INT4);
  ASSERT_EQ(tinyaiApplyMixedPrecision(m.get(), &c), TINYAI_OK);
  EXPECT_EQ(tinyaiSaveMappedModel(m.get(), f32.c_str(), nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tt::LastMessage()).find("own file"), std::string::npos);
  EXPECT_EQ(tinyaiSaveMappedModel(m.get(), "", nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiSaveMappedModel(m.get(), nullptr, nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  const std::string nodir = dir.File("no/such/dir/out.tmai");
  EXPECT_EQ(tinyaiSaveMappedModel(m.get(), nodir.c_str(), nullptr), TINYAI_ERR_FILE_NOT_FOUND);
  // Stopped by its progress callback: TINYAI_STOPPED and no file.
  const std::string out = dir.File("stopped.tmai");
  TinyAISaveOptions opt = tinyaiCreateDefaultSaveOptions();
  opt.progressUser = nullptr;
  opt.progress = [](void*, const TinyAISaveProgress* p) -> int { return p->tensorIndex >= 2; };
  EXPECT_EQ(tinyaiSaveMappedModel(m.get(), out.c_str(), &opt), TINYAI_STOPPED);
  EXPECT_FALSE(tt::FileExists(out));
  EXPECT_FALSE(tt::FileExists(out + ".part"));
  opt.structSize = 3;
  EXPECT_EQ(tinyaiSaveMappedModel(m.get(), out.c_str(), &opt), TINYAI_ERR_INVALID_ARGUMENT);
  opt = tinyaiCreateDefaultSaveOptions();
  opt.threads = -1;
  EXPECT_EQ(tinyaiSaveMappedModel(m.get(), out.c_str(), &opt), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tt::LastMessage()).find("threads is -1"), std::string::npos) << tt::LastMessage();
  EXPECT_EQ(tinyaiSaveMappedModelTo(m.get(), nullptr, nullptr, nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  // A corrupt input is found while saving, and nothing is left.
  tt::Bytes bytes;
  ASSERT_TRUE(tt::ReadFileBytes(f32, &bytes));
  const int32_t t = tt::FindTensor(bytes, "blk.1.ffn_up");
  bytes[static_cast<size_t>(tt::GetTensor(bytes, static_cast<uint32_t>(t)).offset) + 5] ^= 0x40;
  const std::string bad = dir.File("bad.tmai");
  ASSERT_TRUE(tt::WriteFileBytes(bad, bytes));
  tinyai_tools::ModelHandle b = tinyai_tools::OpenModel(bad, nullptr);
  ASSERT_EQ(tinyaiApplyMixedPrecision(b.get(), &c), TINYAI_OK);
  const std::string bad_out = dir.File("bad-out.tmai");
  EXPECT_EQ(tinyaiSaveMappedModel(b.get(), bad_out.c_str(), nullptr), TINYAI_ERR_CHECKSUM);
  EXPECT_FALSE(tt::FileExists(bad_out));
  EXPECT_FALSE(tt::FileExists(bad_out + ".part"));
}

// Calibration changes the rounding (so the bytes), and what runs is what is
// saved; from a text, from the model's own stream; with and without error
// feedback; refusals.
TEST(MixedPrecision, Calibration) {
  tt::TempDir dir;
  const std::string f32 = WriteModel(dir, "f32.tmai", OddShape(false));
  tinyai_tools::ModelHandle plain = tinyai_tools::OpenModel(f32, nullptr);
  tinyai_tools::ModelHandle sampled = tinyai_tools::OpenModel(f32, nullptr);
  tinyai_tools::ModelHandle text = tinyai_tools::OpenModel(f32, nullptr);
  TinyAIMixedPrecisionConfig c = All(TINYAI_PREC_INT4);
  ASSERT_EQ(tinyaiApplyMixedPrecision(plain.get(), &c), TINYAI_OK);
  c.calibrationTokens = 100;
  ASSERT_EQ(tinyaiApplyMixedPrecision(sampled.get(), &c), TINYAI_OK) << tt::LastMessage();
  c.calibrationText = "the quick brown fox jumps over the lazy dog, again and again";
  ASSERT_EQ(tinyaiApplyMixedPrecision(text.get(), &c), TINYAI_OK) << tt::LastMessage();
  int32_t q = -1;
  ASSERT_EQ(tinyaiFindMappedTensor(plain.get(), "blk.1.ffn_down", &q), TINYAI_OK);
  const std::vector<uint8_t> a = tt::TensorBytes(plain.get(), q), b = tt::TensorBytes(sampled.get(), q),
                             t = tt::TensorBytes(text.get(), q);
  EXPECT_NE(a, b);
  EXPECT_NE(b, t);
  const std::string saved = dir.File("calibrated.tmai");
  ASSERT_EQ(tinyaiSaveMappedModel(sampled.get(), saved.c_str(), nullptr), TINYAI_OK) << tt::LastMessage();
  tinyai_tools::ModelHandle s = tinyai_tools::OpenModel(saved, nullptr);
  for (int i = 0; i < tinyaiGetMappedTensorCount(s.get()); ++i) EXPECT_EQ(tt::TensorBytes(s.get(), i), tt::TensorBytes(sampled.get(), i)) << i;
  // Calibrated twice the same way: the same bytes (the stream is seeded).
  tinyai_tools::ModelHandle again = tinyai_tools::OpenModel(f32, nullptr);
  c.calibrationText = nullptr;
  ASSERT_EQ(tinyaiApplyMixedPrecision(again.get(), &c), TINYAI_OK);
  EXPECT_EQ(tt::TensorBytes(again.get(), q), b);
  // The scales' weighting alone (no error feedback) rounds otherwise.
  c.calibrationErrorFeedback = 0;
  ASSERT_EQ(tinyaiApplyMixedPrecision(again.get(), &c), TINYAI_OK) << tt::LastMessage();
  const std::vector<uint8_t> weighted = tt::TensorBytes(again.get(), q);
  EXPECT_NE(weighted, b);
  EXPECT_NE(weighted, a);
  c.calibrationErrorFeedback = 2;
  EXPECT_EQ(tinyaiApplyMixedPrecision(again.get(), &c), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tt::LastMessage()).find("calibrationErrorFeedback is 2"), std::string::npos)
      << tt::LastMessage();
  EXPECT_EQ(tt::TensorBytes(again.get(), q), weighted);  // as it was
  c.calibrationErrorFeedback = 1;
  ASSERT_EQ(tinyaiApplyMixedPrecision(again.get(), &c), TINYAI_OK);
  EXPECT_EQ(tt::TensorBytes(again.get(), q), b);

  c.calibrationTokens = -1;
  EXPECT_EQ(tinyaiApplyMixedPrecision(again.get(), &c), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tt::TensorBytes(again.get(), q), b);  // as it was
  c.calibrationTokens = 10;
  c.calibrationText = "";
  EXPECT_EQ(tinyaiApplyMixedPrecision(again.get(), &c), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tt::LastMessage()).find("calibrationText has no tokens"), std::string::npos)
      << tt::LastMessage();
  EXPECT_EQ(PrecisionOf(again.get(), "blk.1.ffn_down"), TINYAI_PREC_INT4);  // put back
  EXPECT_EQ(tt::TensorBytes(again.get(), q), b);  // with its calibration, not rounded without it
}

// A quantized model through every execution mode, 1 and 2 threads, and the
// debug execution: the same greedy text each way (stories260K with the
// default mix applied as it loads, and the same saved and opened).
TEST(MixedPrecision, EveryModeSameText) {
  const std::string stories = tt::StoriesTmai();
  if (stories.empty()) GTEST_SKIP() << "stories260K .tmai not found";
  tt::TempDir dir;
  TinyAIMixedPrecisionConfig mp;
  tinyaiInitMixedPrecisionConfig(&mp);
  auto open = [&](const std::string& path, bool apply) {
    tinyai_tools::ModelHandle m = tinyai_tools::OpenModel(path, nullptr);
    if (apply) EXPECT_EQ(tinyaiApplyMixedPrecision(m.get(), &mp), TINYAI_OK) << tt::LastMessage();
    return m;
  };
  auto run = [&](TinyAIMappedModel* m, TinyAIExecutionMode mode, size_t limit, int threads, bool debug,
                 int tokens = 40) {
    TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
    cfg.mode = mode;
    cfg.memoryLimit = limit;
    cfg.threads = threads;
    cfg.debugExecution = debug;
    TinyAILLM* llm = nullptr;
    EXPECT_EQ(tinyaiCreateLLM(m, &cfg, &llm), TINYAI_OK) << tt::LastMessage();
    if (!llm) return std::string();
    TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
    gp.maxNewTokens = tokens;
    char text[2048] = "";
    size_t len = 0;
    EXPECT_EQ(tinyaiLLMGenerate(llm, "Once upon a time", &gp, text, sizeof text, &len, nullptr), TINYAI_OK)
        << tt::LastMessage();
    TinyAIMemoryReport r;
    r.structSize = sizeof r;
    EXPECT_EQ(tinyaiGetLLMMemoryReport(llm, &r), TINYAI_OK);
    if (limit) EXPECT_LE(r.peakTotalBytes, limit);
    tinyaiDestroyLLM(llm);
    return std::string(text, len);
  };
  tinyai_tools::ModelHandle m = open(stories, true);
  const std::string normal = run(m.get(), TINYAI_EXEC_NORMAL, 0, 1, false);
  ASSERT_GT(normal.size(), 40u);
  EXPECT_EQ(run(m.get(), TINYAI_EXEC_NORMAL, 0, 2, false), normal);
  EXPECT_EQ(run(m.get(), TINYAI_EXEC_NORMAL, 0, 1, true), normal);
  auto least = [&](TinyAIMappedModel* model, int threads) {
    TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
    cfg.threads = threads;
    TinyAIMemoryReport est;
    est.structSize = sizeof est;
    EXPECT_EQ(tinyaiEstimateLLMMemory(model, &cfg, &est), TINYAI_OK) << tt::LastMessage();
    return static_cast<size_t>(est.minimumMemoryLimit);
  };
  // Streamed while converted as it loads: every pass encodes again what it
  // evicted (slow: once here); the saved file streams as stored.
  const std::string first = run(m.get(), TINYAI_EXEC_STREAMING, least(m.get(), 1), 1, false, 6);
  EXPECT_GT(first.size(), 20u);
  EXPECT_EQ(normal.compare(0, first.size(), first), 0) << first;
  const std::string saved = dir.File("mixed.tmai");
  ASSERT_EQ(tinyaiSaveMappedModel(m.get(), saved.c_str(), nullptr), TINYAI_OK) << tt::LastMessage();
  m.reset();
  tinyai_tools::ModelHandle s = open(saved, false);
  for (int threads : {1, 2}) {
    const size_t low = least(s.get(), threads), partial = low + 64 * 1024;  // not all 0.19 MiB of weights
    EXPECT_EQ(run(s.get(), TINYAI_EXEC_NORMAL, 0, threads, false), normal) << threads;
    EXPECT_EQ(run(s.get(), TINYAI_EXEC_MEMORY_OPT, partial, threads, false), normal) << threads;
    EXPECT_EQ(run(s.get(), TINYAI_EXEC_STREAMING, low, threads, false), normal) << threads;
    EXPECT_EQ(run(s.get(), TINYAI_EXEC_ADAPTIVE, partial, threads, false), normal) << threads;
  }
}

// The guide's block, as written, on stories260K (where ../shared has it).
TEST(MixedPrecision, GuideBlockOnStories) {
  const std::string stories = tt::StoriesTmai();
  if (stories.empty()) GTEST_SKIP() << "stories260K .tmai not found";
  TinyAIMappedModel* model = tinyaiOpenMappedModel(stories.c_str(), nullptr);
  ASSERT_NE(model, nullptr) << tt::LastMessage();

  // Create mixed precision configuration
  TinyAIMixedPrecisionConfig mpConfig;
  tinyaiInitMixedPrecisionConfig(&mpConfig);

  // Set precision for different layer types
  mpConfig.embeddingPrecision = TINYAI_PREC_INT8;   // 8-bit for embeddings
  mpConfig.attentionPrecision = TINYAI_PREC_INT4;   // 4-bit for attention
  mpConfig.ffnPrecision = TINYAI_PREC_INT4;         // 4-bit for feed-forward
  mpConfig.outputPrecision = TINYAI_PREC_FP16;      // FP16 for output layer

  // Apply mixed precision configuration to model
  ASSERT_EQ(tinyaiApplyMixedPrecision(model, &mpConfig), TINYAI_OK) << tt::LastMessage();

  EXPECT_EQ(PrecisionOf(model, "blk.0.ffn_down"), TINYAI_PREC_INT4);  // 172 columns: padded groups
  EXPECT_EQ(PrecisionOf(model, "token_embd"), TINYAI_PREC_FP16);     // tied: the finer of int8 and fp16
  tinyai_tools::LLMHandle llm = tinyai_tools::CreateLLM(model, tinyaiCreateDefaultLLMConfig());
  TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
  params.maxNewTokens = 24;
  params.sampler.temperature = 0.0f;
  char text[512] = "";
  ASSERT_EQ(tinyaiLLMGenerate(llm.get(), "Once upon a time", &params, text, sizeof text, nullptr, nullptr), TINYAI_OK)
      << tt::LastMessage();
  EXPECT_GT(std::strlen(text), 10u) << text;
  llm.reset();
  tinyaiCloseMappedModel(model);
}

}  // namespace
