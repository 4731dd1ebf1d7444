// <tinyai/utils/prune.h> on whole models: a model pruned as its weight cache
// loads it runs exactly as the same model saved and opened again, and is
// counted at its pruned size; pruning composes with the precisions applied
// and a pruned file quantizes with its blocks kept; the savings reported are
// what the file and the cache lose; every refusal names its cause and leaves
// the model as it was.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "format/test_models.h"
#include "format/tmai_format.h"
#include "import/model_builder.h"
#include "import/synthetic.h"
#include "tinyai/llm.h"
#include "tinyai/tinyai.h"
#include "tinyai/utils/mmap_loader.h"
#include "tinyai/utils/prune.h"
#include "tinyai/utils/quantize_mixed.h"
#include "tools/common/cli.h"

namespace tt = tinyai::testing;

namespace {

// Rows of 48 and 100 values (100 is not a multiple of 8: a narrow last
// block and a short last band), an untied classifier, two blocks.
tinyai::LlamaShape OddShape() {
  tinyai::LlamaShape s = tt::TinyShape();
  s.dim = 48;
  s.hidden_dim = 100;
  s.heads = 4;
  s.kv_heads = 2;
  s.shared_classifier = false;
  return s;
}

std::string WriteModel(const tt::TempDir& dir, const std::string& name, TinyAIDType matrices = TINYAI_DTYPE_F32,
                       const tinyai::LlamaShape& shape = OddShape()) {
  tinyai::WriteOptions o;
  o.matrix_dtype = matrices;
  const std::string path = dir.File(name);
  EXPECT_EQ(tinyai::WriteSyntheticModel(shape, path.c_str(), o), TINYAI_OK) << tt::LastMessage();
  return path;
}

int TensorIndex(const TinyAIMappedModel* m, const char* name) {
  int32_t index = -1;
  EXPECT_EQ(tinyaiFindMappedTensor(m, name, &index), TINYAI_OK) << name;
  return index;
}

TinyAITensorSparsity SparsityOf(const TinyAIMappedModel* m, const char* name) {
  TinyAITensorSparsity s;
  std::memset(&s, 0, sizeof s);
  s.structSize = sizeof s;
  EXPECT_EQ(tinyaiGetTensorSparsity(m, TensorIndex(m, name), &s), TINYAI_OK) << tt::LastMessage();
  return s;
}

std::vector<float> Logits(TinyAIMappedModel* m, int threads = 1) {
  TinyAILLMConfig lc = tinyaiCreateDefaultLLMConfig();
  lc.threads = threads;
  tinyai_tools::LLMHandle llm = tinyai_tools::CreateLLM(m, lc);
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
  // A prompt of several tokens at once (the matrix-matrix products).
  std::vector<int32_t> prompt = {3, 9, 27, 81 % info.vocabSize, 5};
  EXPECT_EQ(tinyaiResetLLM(llm.get()), TINYAI_OK);
  EXPECT_EQ(tinyaiLLMEval(llm.get(), prompt.data(), static_cast<int32_t>(prompt.size()), logits.data()), TINYAI_OK)
      << tt::LastMessage();
  all.insert(all.end(), logits.begin(), logits.end());
  return all;
}

TinyAIPruneConfig Config(double sparsity, int block, TinyAIPruneMethod method = TINYAI_PRUNE_MAGNITUDE) {
  TinyAIPruneConfig c;
  tinyaiInitPruneConfig(&c);
  c.sparsity = sparsity;
  c.blockSize = block;
  c.method = method;
  return c;
}

bool SameFloats(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(PruneModel, DefaultsAndNames) {
  TinyAIPruneConfig c;
  ASSERT_EQ(tinyaiInitPruneConfig(&c), TINYAI_OK);
  EXPECT_EQ(c.structSize, sizeof c);
  EXPECT_EQ(c.method, TINYAI_PRUNE_MAGNITUDE);
  EXPECT_EQ(c.sparsity, 0.5);
  EXPECT_EQ(c.blockSize, 4);
  EXPECT_LT(c.layerSparsity[0], 0.0);
  EXPECT_LT(c.layerSparsity[TINYAI_PRUNE_MAX_LAYERS - 1], 0.0);
  EXPECT_EQ(c.calibrationTokens, 2048);
  EXPECT_EQ(tinyaiInitPruneConfig(nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  for (TinyAIPruneMethod m : {TINYAI_PRUNE_MAGNITUDE, TINYAI_PRUNE_ACTIVATION, TINYAI_PRUNE_SPARSEGPT}) {
    TinyAIPruneMethod back;
    ASSERT_EQ(tinyaiParsePruneMethod(tinyaiPruneMethodName(m), &back), TINYAI_OK);
    EXPECT_EQ(back, m);
  }
  TinyAIPruneMethod m;
  EXPECT_EQ(tinyaiParsePruneMethod("wanda", &m), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tt::LastMessage()).find("magnitude, activation or sparsegpt"), std::string::npos);
  EXPECT_STREQ(tinyaiPruneMethodName(static_cast<TinyAIPruneMethod>(7)), "unknown");
}

// Pruned as the cache loads it, then saved and opened: the same bytes for
// every tensor and the same logits bit for bit, at every block size, with
// shapes the blocks do not divide; and not the dense model's.
TEST(PruneModel, AppliedEqualsSaved) {
  tt::TempDir dir;
  const std::string f32 = WriteModel(dir, "f32.tmai");
  tinyai_tools::ModelHandle ref = tinyai_tools::OpenModel(f32, nullptr);
  const std::vector<float> dense = Logits(ref.get());
  for (int block : {1, 2, 4, 8, 16, 32}) {
    SCOPED_TRACE(block);
    tinyai_tools::ModelHandle m = tinyai_tools::OpenModel(f32, nullptr);
    const TinyAIPruneConfig c = Config(0.5, block);
    ASSERT_EQ(tinyaiPruneModel(m.get(), &c), TINYAI_OK) << tt::LastMessage();
    const TinyAITensorSparsity up = SparsityOf(m.get(), "blk.1.ffn_up");  // [100, 48]
    EXPECT_EQ(up.blockSize, block);
    EXPECT_EQ(up.blocksPerBand, (48u + block - 1) / block);
    EXPECT_EQ(up.keptBlocks, up.blocksPerBand - static_cast<uint64_t>(std::floor(0.5 * up.blocksPerBand + 0.5)));
    EXPECT_EQ(SparsityOf(m.get(), "token_embd").blockSize, 0);
    EXPECT_EQ(SparsityOf(m.get(), "output").blockSize, 0);  // the classifier stays dense
    const std::string saved = dir.File("pruned-" + std::to_string(block) + ".tmai");
    uint64_t expect_size = 0;
    ASSERT_EQ(tinyaiGetSavedModelSize(m.get(), &expect_size), TINYAI_OK);
    TinyAISaveOptions two = tinyaiCreateDefaultSaveOptions();
    two.threads = 2;
    ASSERT_EQ(tinyaiSaveMappedModel(m.get(), saved.c_str(), &two), TINYAI_OK) << tt::LastMessage();
    tinyai_tools::ModelHandle s = tinyai_tools::OpenModel(saved, nullptr);
    EXPECT_EQ(tinyaiGetMappedModelFileSize(s.get()), expect_size);
    for (int t = 0; t < tinyaiGetMappedTensorCount(m.get()); ++t) {
      SCOPED_TRACE(t);
      EXPECT_EQ(tt::TensorBytes(s.get(), t), tt::TensorBytes(m.get(), t));
    }
    EXPECT_EQ(SparsityOf(s.get(), "blk.1.ffn_down").keptBlocks, SparsityOf(m.get(), "blk.1.ffn_down").keptBlocks);
    const std::vector<float> applied = Logits(m.get()), reopened = Logits(s.get());
    EXPECT_TRUE(SameFloats(applied, reopened));
    EXPECT_TRUE(SameFloats(Logits(s.get(), 2), applied)) << "two threads split the bands";
    EXPECT_FALSE(SameFloats(applied, dense));
    // Sparsity 0 undoes it: the dense model's logits again.
    const TinyAIPruneConfig none = Config(0.0, block);
    ASSERT_EQ(tinyaiPruneModel(m.get(), &none), TINYAI_OK) << tt::LastMessage();
    EXPECT_EQ(SparsityOf(m.get(), "blk.1.ffn_up").blockSize, 0);
    EXPECT_TRUE(SameFloats(Logits(m.get()), dense));
  }
}

// What tinyaiCalculatePruningSavings says is what the saved file loses, to
// the byte, and what the cache holding the whole model loses within 2% (it
// holds whole layers in whole pages).
TEST(PruneModel, SavingsAreMeasured) {
  tt::TempDir dir;
  tinyai::LlamaShape shape = OddShape();
  shape.dim = 256;
  shape.hidden_dim = 700;
  shape.heads = 8;
  shape.kv_heads = 4;
  const std::string f32 = WriteModel(dir, "f32.tmai", TINYAI_DTYPE_F32, shape);
  for (TinyAIPrecision p : {TINYAI_PREC_FP32, TINYAI_PREC_INT4}) {
    SCOPED_TRACE(tinyaiPrecisionName(p));
    TinyAIMixedPrecisionConfig mp;
    tinyaiInitMixedPrecisionConfig(&mp);
    mp.embeddingPrecision = mp.outputPrecision = TINYAI_PREC_AS_STORED;
    mp.attentionPrecision = mp.ffnPrecision = p;
    tinyai_tools::ModelHandle dense = tinyai_tools::OpenModel(f32, nullptr);
    tinyai_tools::ModelHandle pruned = tinyai_tools::OpenModel(f32, nullptr);
    ASSERT_EQ(tinyaiApplyMixedPrecision(dense.get(), &mp), TINYAI_OK) << tt::LastMessage();
    ASSERT_EQ(tinyaiApplyMixedPrecision(pruned.get(), &mp), TINYAI_OK) << tt::LastMessage();
    EXPECT_EQ(tinyaiCalculatePruningSavings(pruned.get()), 0u);
    const TinyAIPruneConfig c = Config(0.5, 4);
    ASSERT_EQ(tinyaiPruneModel(pruned.get(), &c), TINYAI_OK) << tt::LastMessage();
    const double saved = static_cast<double>(tinyaiCalculatePruningSavings(pruned.get()));
    EXPECT_GT(saved, 0.0);
    uint64_t dense_file = 0, pruned_file = 0;
    ASSERT_EQ(tinyaiGetSavedModelSize(dense.get(), &dense_file), TINYAI_OK);
    ASSERT_EQ(tinyaiGetSavedModelSize(pruned.get(), &pruned_file), TINYAI_OK);
    EXPECT_EQ(static_cast<double>(dense_file - pruned_file), saved);
    const std::string out = dir.File(std::string("pruned-") + tinyaiPrecisionName(p) + ".tmai");
    ASSERT_EQ(tinyaiSaveMappedModel(pruned.get(), out.c_str(), nullptr), TINYAI_OK) << tt::LastMessage();
    tinyai_tools::ModelHandle reopened = tinyai_tools::OpenModel(out, nullptr);
    EXPECT_EQ(static_cast<double>(tinyaiCalculatePruningSavings(reopened.get())), saved);
    // The cache over the two files with every layer held whole
    // (tinyaiGetLayerWeights): what it holds is the weights' own bytes,
    // page-rounded. (Running an LLM, the cache holds row slices in shared
    // slots, whose rounding is its own policy: docs/benchmarks.md gives the
    // figures on the 110M shape.)
    const std::string dense_out = dir.File(std::string("dense-") + tinyaiPrecisionName(p) + ".tmai");
    ASSERT_EQ(tinyaiSaveMappedModel(dense.get(), dense_out.c_str(), nullptr), TINYAI_OK) << tt::LastMessage();
    tinyai_tools::ModelHandle dense_file_model = tinyai_tools::OpenModel(dense_out, nullptr);
    auto hold_all = [](TinyAIMappedModel* m) {
      for (int l = 0; l < tinyaiGetMappedLayerCount(m); ++l) EXPECT_NE(tinyaiGetLayerWeights(m, l), nullptr);
      const uint64_t resident = tt::CacheStats(m).residentBytes;
      for (int l = 0; l < tinyaiGetMappedLayerCount(m); ++l) EXPECT_EQ(tinyaiReleaseLayerWeights(m, l), TINYAI_OK);
      return static_cast<double>(resident);
    };
    const double held_dense = hold_all(dense_file_model.get()), held_pruned = hold_all(reopened.get());
    const double held = held_dense - held_pruned;
    std::printf("%s: saved %.0f bytes; file %llu -> %llu; resident %.0f -> %.0f\n", tinyaiPrecisionName(p), saved,
                static_cast<unsigned long long>(dense_file), static_cast<unsigned long long>(pruned_file), held_dense,
                held_pruned);
    EXPECT_NEAR(held, saved, 0.02 * saved);
  }
}

// Prune then quantize, quantize then prune, and quantizing a pruned file:
// the same bands; a pruned model streams through a cap with the same logits.
TEST(PruneModel, ComposesWithPrecisions) {
  tt::TempDir dir;
  const std::string f32 = WriteModel(dir, "f32.tmai");
  TinyAIMixedPrecisionConfig mp;
  tinyaiInitMixedPrecisionConfig(&mp);
  mp.embeddingPrecision = mp.outputPrecision = TINYAI_PREC_AS_STORED;
  const TinyAIPruneConfig c = Config(0.5, 4);
  tinyai_tools::ModelHandle a = tinyai_tools::OpenModel(f32, nullptr), b = tinyai_tools::OpenModel(f32, nullptr);
  ASSERT_EQ(tinyaiPruneModel(a.get(), &c), TINYAI_OK) << tt::LastMessage();
  ASSERT_EQ(tinyaiApplyMixedPrecision(a.get(), &mp), TINYAI_OK) << tt::LastMessage();
  ASSERT_EQ(tinyaiApplyMixedPrecision(b.get(), &mp), TINYAI_OK) << tt::LastMessage();
  ASSERT_EQ(tinyaiPruneModel(b.get(), &c), TINYAI_OK) << tt::LastMessage();
  const int up = TensorIndex(a.get(), "blk.0.ffn_up");
  EXPECT_EQ(tt::TensorDType(a.get(), up), TINYAI_DTYPE_Q4NL_G32);
  EXPECT_EQ(SparsityOf(a.get(), "blk.0.ffn_up").blockSize, 4);
  // The f32 model pruned, saved, then quantized as a file.
  tinyai_tools::ModelHandle p = tinyai_tools::OpenModel(f32, nullptr);
  ASSERT_EQ(tinyaiPruneModel(p.get(), &c), TINYAI_OK) << tt::LastMessage();
  const std::string pruned = dir.File("pruned.tmai");
  ASSERT_EQ(tinyaiSaveMappedModel(p.get(), pruned.c_str(), nullptr), TINYAI_OK) << tt::LastMessage();
  tinyai_tools::ModelHandle q = tinyai_tools::OpenModel(pruned, nullptr);
  ASSERT_EQ(tinyaiApplyMixedPrecision(q.get(), &mp), TINYAI_OK) << tt::LastMessage();
  for (int t = 0; t < tinyaiGetMappedTensorCount(a.get()); ++t) {
    SCOPED_TRACE(t);
    const std::vector<uint8_t> bytes = tt::TensorBytes(a.get(), t);
    EXPECT_EQ(tt::TensorBytes(b.get(), t), bytes);
    EXPECT_EQ(tt::TensorBytes(q.get(), t), bytes);
  }
  const std::vector<float> whole = Logits(a.get());
  EXPECT_TRUE(SameFloats(Logits(q.get()), whole));
  // Through a cap smaller than the pruned model, a few bands a slice.
  TinyAIMmapConfig capped = tinyaiCreateDefaultMmapConfig();
  capped.rowSliceSize = 2048;
  uint64_t size = 0;
  ASSERT_EQ(tinyaiGetSavedModelSize(a.get(), &size), TINYAI_OK);
  capped.maxCacheSize = static_cast<size_t>(size / 3);
  tinyai_tools::ModelHandle small = tinyai_tools::OpenModel(f32, &capped);
  ASSERT_EQ(tinyaiApplyMixedPrecision(small.get(), &mp), TINYAI_OK) << tt::LastMessage();
  ASSERT_EQ(tinyaiPruneModel(small.get(), &c), TINYAI_OK) << tt::LastMessage();
  EXPECT_TRUE(SameFloats(Logits(small.get()), whole));
  EXPECT_LE(tt::CacheStats(small.get()).peakHeldBytes, capped.maxCacheSize);
}

// Per-layer sparsity: set entries win, 0 keeps a block dense, unset ones
// take the model-wide figure.
TEST(PruneModel, LayerSparsity) {
  tt::TempDir dir;
  tinyai_tools::ModelHandle m = tinyai_tools::OpenModel(WriteModel(dir, "f32.tmai"), nullptr);
  TinyAIPruneConfig c = Config(0.75, 4);
  c.layerSparsity[0] = 0.0;
  ASSERT_EQ(tinyaiPruneModel(m.get(), &c), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(SparsityOf(m.get(), "blk.0.attn_q").blockSize, 0);
  EXPECT_EQ(SparsityOf(m.get(), "blk.1.attn_q").sparsity, 0.75);  // 9 of 12 blocks
  c.layerSparsity[0] = 0.25;
  c.pruneOutput = 1;
  ASSERT_EQ(tinyaiPruneModel(m.get(), &c), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(SparsityOf(m.get(), "blk.0.attn_q").sparsity, 0.25);
  EXPECT_EQ(SparsityOf(m.get(), "blk.1.ffn_down").keptBlocks, 6u);  // 25 blocks of 100 columns: 19 pruned
  EXPECT_EQ(SparsityOf(m.get(), "output").blockSize, 4);
  (void)Logits(m.get());
}

TEST(PruneModel, RefusalsLeaveTheModelAsItWas) {
  tt::TempDir dir;
  const std::string f32 = WriteModel(dir, "f32.tmai");
  tinyai_tools::ModelHandle m = tinyai_tools::OpenModel(f32, nullptr);
  const TinyAIPruneConfig good = Config(0.5, 4);
  ASSERT_EQ(tinyaiPruneModel(m.get(), &good), TINYAI_OK) << tt::LastMessage();
  const std::vector<float> before = Logits(m.get());
  auto expect = [&](TinyAIPruneConfig c, TinyAIStatus want, const char* says) {
    EXPECT_EQ(tinyaiPruneModel(m.get(), &c), want) << says;
    EXPECT_NE(std::string(tt::LastMessage()).find(says), std::string::npos) << tt::LastMessage();
    EXPECT_EQ(SparsityOf(m.get(), "blk.0.attn_q").sparsity, 0.5);
  };
  TinyAIPruneConfig c = good;
  c.method = static_cast<TinyAIPruneMethod>(9);
  expect(c, TINYAI_ERR_INVALID_ARGUMENT, "method is 9");
  for (double s : {1.0, -0.25, 7.0, std::numeric_limits<double>::quiet_NaN()}) {
    c = good;
    c.sparsity = s;
    expect(c, TINYAI_ERR_INVALID_ARGUMENT, "sparsity is");
  }
  c = good;
  c.blockSize = 0;
  expect(c, TINYAI_ERR_INVALID_ARGUMENT, "blockSize is 0");
  c.blockSize = -4;
  expect(c, TINYAI_ERR_INVALID_ARGUMENT, "blockSize is -4");
  for (int b : {3, 6, 64, 1000}) {
    c.blockSize = b;
    expect(c, TINYAI_ERR_UNSUPPORTED, "no kernel multiplies");
  }
  c = good;
  c.layerSparsity[2] = 0.5;  // the model has blocks 0 and 1
  expect(c, TINYAI_ERR_INVALID_ARGUMENT, "layerSparsity[2] is set");
  c = good;
  c.layerSparsity[1] = 1.5;
  expect(c, TINYAI_ERR_INVALID_ARGUMENT, "layerSparsity[1] is 1.5");
  c = good;
  c.calibrationTokens = -1;
  expect(c, TINYAI_ERR_INVALID_ARGUMENT, "calibrationTokens is -1");
  c.method = TINYAI_PRUNE_ACTIVATION;
  c.calibrationTokens = 0;
  expect(c, TINYAI_ERR_INVALID_ARGUMENT, "calibrationTokens is 0");
  c = good;
  c.structSize = 3;
  expect(c, TINYAI_ERR_INVALID_ARGUMENT, "structSize");
  EXPECT_EQ(tinyaiPruneModel(m.get(), nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiPruneModel(nullptr, &good), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiCalculatePruningSavings(nullptr), 0u);
  EXPECT_EQ(tinyaiGetLastError(), TINYAI_ERR_INVALID_ARGUMENT);
  TinyAITensorSparsity sp;
  sp.structSize = sizeof sp;
  EXPECT_EQ(tinyaiGetTensorSparsity(m.get(), 999, &sp), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiGetTensorSparsity(m.get(), 0, nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  {  // while an LLM runs on it
    tinyai_tools::LLMHandle llm = tinyai_tools::CreateLLM(m.get(), tinyaiCreateDefaultLLMConfig());
    expect(Config(0.25, 4), TINYAI_ERR_MISUSE, "an LLM or scheduler runs on this model");
  }
  EXPECT_TRUE(SameFloats(Logits(m.get()), before));

  // A file stored pruned: pruning it again is refused; sparsity 0 for its
  // blocks keeps it as stored.
  const std::string pruned = dir.File("pruned.tmai");
  ASSERT_EQ(tinyaiSaveMappedModel(m.get(), pruned.c_str(), nullptr), TINYAI_OK) << tt::LastMessage();
  tinyai_tools::ModelHandle p = tinyai_tools::OpenModel(pruned, nullptr);
  EXPECT_EQ(tinyaiPruneModel(p.get(), &good), TINYAI_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(tt::LastMessage()).find("is stored pruned already"), std::string::npos) << tt::LastMessage();
  EXPECT_NE(std::string(tt::LastMessage()).find("blk.0.attn_q"), std::string::npos) << tt::LastMessage();
  EXPECT_EQ(tinyaiPruneModel(p.get(), &c), TINYAI_ERR_INVALID_ARGUMENT);  // still structSize 3
  const TinyAIPruneConfig zero = Config(0.0, 4);
  ASSERT_EQ(tinyaiPruneModel(p.get(), &zero), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(SparsityOf(p.get(), "blk.0.attn_q").sparsity, 0.5);
  EXPECT_TRUE(SameFloats(Logits(p.get()), before));

  // A quantized file: its values would be rounded twice.
  tinyai_tools::ModelHandle q = tinyai_tools::OpenModel(WriteModel(dir, "q8.tmai", TINYAI_DTYPE_Q8_G32), nullptr);
  EXPECT_EQ(tinyaiPruneModel(q.get(), &good), TINYAI_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(tt::LastMessage()).find("is stored q8_g32; pruning it would round"), std::string::npos)
      << tt::LastMessage();
  EXPECT_EQ(SparsityOf(q.get(), "blk.0.attn_q").blockSize, 0);
  // Activation needs a language model's calibration: a text without tokens.
  c = Config(0.5, 4, TINYAI_PRUNE_ACTIVATION);
  c.calibrationText = "";
  EXPECT_EQ(tinyaiPruneModel(m.get(), &c), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tt::LastMessage()).find("calibrationText has no tokens"), std::string::npos)
      << tt::LastMessage();
  EXPECT_TRUE(SameFloats(Logits(m.get()), before));
}

// A pruned file's entries checked by the reader, its bitmaps by the loader
// (each against the checksum-sealed file: what a tool that writes its own
// block-sparse tensors could get wrong).
TEST(PruneModel, ReaderAndLoaderRefuseBadBlockSparseEntries) {
  tt::TempDir dir;
  tinyai_tools::ModelHandle m = tinyai_tools::OpenModel(WriteModel(dir, "f32.tmai"), nullptr);
  const TinyAIPruneConfig c = Config(0.5, 4);
  ASSERT_EQ(tinyaiPruneModel(m.get(), &c), TINYAI_OK) << tt::LastMessage();
  const std::string pruned = dir.File("pruned.tmai");
  ASSERT_EQ(tinyaiSaveMappedModel(m.get(), pruned.c_str(), nullptr), TINYAI_OK) << tt::LastMessage();
  tt::Bytes good;
  ASSERT_TRUE(tt::ReadFileBytes(pruned, &good));
  const int32_t q = tt::FindTensor(good, "blk.0.attn_q");
  ASSERT_GE(q, 0);
  ASSERT_EQ(tt::GetTensor(good, static_cast<uint32_t>(q)).flags, 1);
  auto refused = [&](const tt::Bytes& image, TinyAIStatus status, const char* says) {
    const std::string path = dir.File("bad.tmai");
    ASSERT_TRUE(tt::WriteFileBytes(path, image));
    TinyAIMappedModel* bad = tinyaiOpenMappedModel(path.c_str(), nullptr);
    TinyAIStatus s = bad ? TINYAI_OK : tinyaiGetLastError();
    if (bad) {  // the bitmaps are checked as the weights load
      s = tinyaiGetLayerWeights(bad, 1) ? TINYAI_OK : tinyaiGetLastError();
      tinyaiCloseMappedModel(bad);
    }
    EXPECT_EQ(s, status) << says;
    EXPECT_NE(std::string(tt::LastMessage()).find(says), std::string::npos) << tt::LastMessage();
  };
  auto patched = [&](const std::function<void(tinyai::tmai::TensorEntry&)>& edit) {
    tt::Bytes image = good;
    tt::PatchTensor(&image, static_cast<uint32_t>(q), edit);
    return image;
  };
  refused(patched([](tinyai::tmai::TensorEntry& e) { e.flags = 3; }), TINYAI_ERR_BAD_FORMAT, "has flags 0x03");
  refused(patched([](tinyai::tmai::TensorEntry& e) { e.shape[2] = 3; }), TINYAI_ERR_BAD_FORMAT, "has block 3");
  refused(patched([](tinyai::tmai::TensorEntry& e) { e.shape[3] = 13; }), TINYAI_ERR_BAD_FORMAT, "keeps 13 blocks");
  refused(patched([](tinyai::tmai::TensorEntry& e) { e.shape[3] = 5; }), TINYAI_ERR_BAD_FORMAT, "needs");
  refused(patched([](tinyai::tmai::TensorEntry& e) {
            e.ndims = 3;
          }),
          TINYAI_ERR_BAD_FORMAT, "has 3 dimensions (a matrix: 2)");
  refused(patched([](tinyai::tmai::TensorEntry& e) { e.codec = TINYAI_CODEC_ZSTD; }), TINYAI_ERR_UNSUPPORTED,
          "is stored with codec zstd");
  // A bitmap with a bit more than its entry keeps, the checksum made to match.
  tt::Bytes image = good;
  tinyai::tmai::TensorEntry e = tt::GetTensor(image, static_cast<uint32_t>(q));
  uint8_t* band = image.data() + e.offset + 3 * (e.stored_size / 12);  // band 3 of 12
  uint32_t bit = 0;
  while (band[bit / 8] >> (bit % 8) & 1u) ++bit;
  band[bit / 8] = static_cast<uint8_t>(band[bit / 8] | 1u << (bit % 8));
  tt::PatchTensor(&image, static_cast<uint32_t>(q), [&](tinyai::tmai::TensorEntry& t) {
    t.checksum = tinyai::Crc32c(0, image.data() + t.offset, static_cast<size_t>(t.stored_size));
  });
  refused(image, TINYAI_ERR_BAD_FORMAT, "band 3's bitmap sets 7 bits; its entry keeps 6 of 12 blocks");
}

// The measured methods on the trained model: each runs, each keeps as many
// blocks as magnitude, and on stories260K both beat magnitude's mean KL
// against the dense model (docs/benchmarks.md has the figures).
TEST(PruneModel, MeasuredMethodsOnStories) {
  const std::string stories = tt::StoriesTmai();
  if (stories.empty()) GTEST_SKIP() << "stories260K .tmai not found";
  tinyai_tools::ModelHandle ref = tinyai_tools::OpenModel(stories, nullptr);
  const std::vector<float> dense = Logits(ref.get());
  auto error = [&](TinyAIPruneMethod method) {
    tinyai_tools::ModelHandle m = tinyai_tools::OpenModel(stories, nullptr);
    TinyAIPruneConfig c = Config(0.5, 4, method);
    c.calibrationTokens = 512;
    EXPECT_EQ(tinyaiPruneModel(m.get(), &c), TINYAI_OK) << tt::LastMessage();
    EXPECT_EQ(SparsityOf(m.get(), "blk.2.ffn_down").keptBlocks, 21u);  // 172 columns: 43 blocks, 21.5 rounds to 22 pruned
    const std::vector<float> l = Logits(m.get());
    double e = 0.0;
    for (size_t i = 0; i < l.size(); ++i) e += (l[i] - dense[i]) * (l[i] - dense[i]);
    return e;
  };
  const double magnitude = error(TINYAI_PRUNE_MAGNITUDE);
  const double activation = error(TINYAI_PRUNE_ACTIVATION);
  const double sparsegpt = error(TINYAI_PRUNE_SPARSEGPT);
  EXPECT_LT(activation, magnitude);
  EXPECT_LT(sparsegpt, magnitude);
}

}  // namespace
