// The loader API of <tinyai/utils/mmap_loader.h>: layer descriptors,
// pinning, residency accounting, priorities, prefetch, tensor lookup, every
// NULL argument, and a concurrency smoke test (run under TSan too).
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "format/test_models.h"
#include "tinyai/tinyai.h"
#include "tinyai/utils/mmap_loader.h"

namespace {

// Memory the cache holds for a loaded layer: its decoded bytes in whole pages.
size_t HeldBytes(const TinyAILayerDescriptor* d) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (static_cast<size_t>(d->decodedSize) + page - 1) / page * page;
}

namespace tt = tinyai::testing;
using tt::AlignedImage;
using tt::Bytes;

using tinyai::testing::Contains;
using tinyai::testing::LastMessage;

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    path_ = dir_.File("tiny.tmai");
    ASSERT_EQ(tt::WriteTinyModel(path_), TINYAI_OK) << LastMessage();
    ASSERT_TRUE(tt::ReadFileBytes(path_, &image_));
    TinyAIMmapConfig cfg = tinyaiCreateDefaultMmapConfig();
    cfg.maxCacheSize = 0;  // no cap: touched layers stay resident
    model_ = tinyaiOpenMappedModel(path_.c_str(), &cfg);
    ASSERT_NE(model_, nullptr) << LastMessage();
  }
  void TearDown() override { tinyaiCloseMappedModel(model_); }

  tt::TempDir dir_;
  std::string path_;
  Bytes image_;
  TinyAIMappedModel* model_ = nullptr;
};

TEST_F(LoaderTest, DefaultConfig) {
  TinyAIMmapConfig c = tinyaiCreateDefaultMmapConfig();
  EXPECT_EQ(c.structSize, sizeof(TinyAIMmapConfig));
  EXPECT_EQ(c.maxCacheSize, size_t{256} * 1024 * 1024);
  EXPECT_EQ(c.minLayerCacheSize, size_t{4} * 1024);
  EXPECT_EQ(c.prefetchThreads, TINYAI_PREFETCH_THREADS_AUTO);
  EXPECT_TRUE(c.prefetchEnabled);
  EXPECT_TRUE(c.adaptiveCaching);
  EXPECT_TRUE(c.verifyChecksums);
}

TEST_F(LoaderTest, LayerDescriptors) {
  const tinyai::LlamaShape s = tt::TinyShape();
  const int n = tinyaiGetMappedLayerCount(model_);
  ASSERT_EQ(n, s.layers + 2);
  const int tensors = tinyaiGetMappedTensorCount(model_);
  ASSERT_EQ(tensors, 2 + 9 * s.layers);
  int next_tensor = 0;
  uint64_t prev_end = 0;
  for (int i = 0; i < n; ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const TinyAILayerDescriptor* d = tinyaiGetLayerDescriptor(model_, i);
    ASSERT_NE(d, nullptr) << LastMessage();
    EXPECT_EQ(d, tinyaiGetLayerDescriptor(model_, i)) << "descriptors are owned by the model and stable";
    EXPECT_EQ(d->index, i);
    ASSERT_NE(d->name, nullptr);
    if (i == 0) {
      EXPECT_EQ(d->kind, TINYAI_LAYER_EMBEDDING);
      EXPECT_EQ(d->blockIndex, -1);
      EXPECT_STREQ(d->name, "embedding");
      EXPECT_EQ(d->tensorCount, 1);
    } else if (i == n - 1) {
      EXPECT_EQ(d->kind, TINYAI_LAYER_OUTPUT);
      EXPECT_EQ(d->blockIndex, -1);
      EXPECT_STREQ(d->name, "output");
      EXPECT_EQ(d->tensorCount, 1);  // shared classifier: only the final norm
    } else {
      EXPECT_EQ(d->kind, TINYAI_LAYER_TRANSFORMER);
      EXPECT_EQ(d->blockIndex, i - 1);
      EXPECT_EQ(std::string(d->name), "block." + std::to_string(i - 1));
      EXPECT_EQ(d->tensorCount, 9);
    }
    EXPECT_EQ(d->firstTensor, next_tensor);
    next_tensor += d->tensorCount;
    EXPECT_EQ(d->fileOffset % 4096, 0u) << "layers start on a page";
    EXPECT_GE(d->fileOffset, prev_end) << "layers do not overlap";
    EXPECT_GT(d->storedSize, 0u);
    EXPECT_EQ(d->storedSize, d->decodedSize);
    EXPECT_LE(d->fileOffset + d->storedSize, tinyaiGetMappedModelFileSize(model_));
    prev_end = d->fileOffset + d->storedSize;
    // The layer's tensors lie inside it, in order.
    uint64_t decoded = 0;
    for (int t = d->firstTensor; t < d->firstTensor + d->tensorCount; ++t) {
      TinyAITensorInfo info;
      std::memset(&info, 0, sizeof info);
      info.structSize = sizeof info;
      ASSERT_EQ(tinyaiGetMappedTensorInfo(model_, t, &info), TINYAI_OK);
      EXPECT_EQ(info.layer, i);
      EXPECT_EQ(info.blockIndex, d->blockIndex);
      EXPECT_GE(info.offsetInLayer, decoded);
      decoded = info.offsetInLayer + info.decodedSize;
    }
    EXPECT_EQ(decoded, d->decodedSize);
  }
  EXPECT_EQ(next_tensor, tensors) << "the layers' tensor ranges cover every tensor";
  EXPECT_EQ(prev_end, tinyaiGetMappedModelFileSize(model_));
}

TEST_F(LoaderTest, UntiedClassifierSitsInTheOutputLayer) {
  tinyai::LlamaShape s = tt::TinyShape();
  s.shared_classifier = false;
  const std::string path = dir_.File("untied.tmai");
  ASSERT_EQ(tt::WriteTinyModel(path, s), TINYAI_OK) << LastMessage();
  TinyAIMappedModel* m = tinyaiOpenMappedModel(path.c_str(), nullptr);
  ASSERT_NE(m, nullptr) << LastMessage();
  const TinyAILayerDescriptor* out = tinyaiGetLayerDescriptor(m, tinyaiGetMappedLayerCount(m) - 1);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->kind, TINYAI_LAYER_OUTPUT);
  EXPECT_EQ(out->tensorCount, 2);
  int index = -1;
  ASSERT_EQ(tinyaiFindMappedTensor(m, "output", &index), TINYAI_OK) << LastMessage();
  TinyAITensorInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  ASSERT_EQ(tinyaiGetMappedTensorInfo(m, index, &info), TINYAI_OK);
  EXPECT_EQ(info.role, TINYAI_ROLE_CLASSIFIER);
  EXPECT_EQ(info.layer, out->index);
  tinyaiCloseMappedModel(m);
}

TEST_F(LoaderTest, WeightsPointIntoTheLayerAndMatchTheirChecksums) {
  const int n = tinyaiGetMappedLayerCount(model_);
  for (int i = 0; i < n; ++i) {
    const TinyAILayerDescriptor* d = tinyaiGetLayerDescriptor(model_, i);
    const uint8_t* w = static_cast<const uint8_t*>(tinyaiGetLayerWeights(model_, i));
    ASSERT_NE(w, nullptr) << LastMessage();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(w) % 64, 0u);
    for (int t = d->firstTensor; t < d->firstTensor + d->tensorCount; ++t) {
      TinyAITensorInfo info;
      std::memset(&info, 0, sizeof info);
      info.structSize = sizeof info;
      ASSERT_EQ(tinyaiGetMappedTensorInfo(model_, t, &info), TINYAI_OK);
      EXPECT_EQ(tinyai::Crc32cSoftware(0, w + info.offsetInLayer, static_cast<size_t>(info.decodedSize)), info.checksum)
          << info.name;
      EXPECT_EQ(std::memcmp(w + info.offsetInLayer, image_.data() + d->fileOffset + info.offsetInLayer,
                            static_cast<size_t>(info.decodedSize)),
                0)
          << info.name;
    }
    EXPECT_EQ(tinyaiReleaseLayerWeights(model_, i), TINYAI_OK);
  }
}

TEST_F(LoaderTest, PinsAreCountedAndBalanced) {
  void* a = tinyaiGetLayerWeights(model_, 1);
  ASSERT_NE(a, nullptr) << LastMessage();
  void* b = tinyaiGetLayerWeights(model_, 1);
  EXPECT_EQ(a, b) << "a pinned layer stays where it is";
  EXPECT_EQ(tinyaiReleaseLayerWeights(model_, 1), TINYAI_OK);
  EXPECT_EQ(tinyaiReleaseLayerWeights(model_, 1), TINYAI_OK);
  // A third release has no matching get.
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiReleaseLayerWeights(model_, 1), TINYAI_ERR_MISUSE);
  EXPECT_LAST_ERROR(TINYAI_ERR_MISUSE, "layer 1");
  // A layer never got.
  EXPECT_EQ(tinyaiReleaseLayerWeights(model_, 2), TINYAI_ERR_MISUSE);
  EXPECT_LAST_ERROR(TINYAI_ERR_MISUSE, "not held");
  // The call, then the cause: "tinyaiReleaseLayerWeights: release of layer 2 ..."
  EXPECT_EQ(LastMessage().rfind("tinyaiReleaseLayerWeights: release of layer 2", 0), 0u) << LastMessage();
  // Get and release again after misuse works.
  ASSERT_NE(tinyaiGetLayerWeights(model_, 2), nullptr);
  EXPECT_EQ(tinyaiReleaseLayerWeights(model_, 2), TINYAI_OK);
  EXPECT_EQ(tinyaiReleaseLayerWeights(model_, 2), TINYAI_ERR_MISUSE);
}

TEST_F(LoaderTest, OutOfRangeLayersAreInvalidArgument) {
  const int n = tinyaiGetMappedLayerCount(model_);
  for (int bad : {-1, n, n + 1, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()}) {
    SCOPED_TRACE(bad);
    const std::string layer = "layer " + std::to_string(bad);
    tinyaiClearLastError();
    EXPECT_EQ(tinyaiGetLayerDescriptor(model_, bad), nullptr);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, layer);
    tinyaiClearLastError();
    EXPECT_EQ(tinyaiGetLayerWeights(model_, bad), nullptr);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetLayerWeights");
    EXPECT_EQ(tinyaiReleaseLayerWeights(model_, bad), TINYAI_ERR_INVALID_ARGUMENT);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiReleaseLayerWeights");
    EXPECT_EQ(tinyaiPrefetchLayerWeights(model_, bad), TINYAI_ERR_INVALID_ARGUMENT);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiPrefetchLayerWeights");
    EXPECT_EQ(tinyaiSetLayerPriority(model_, bad, 1.0f), TINYAI_ERR_INVALID_ARGUMENT);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiSetLayerPriority");
  }
  TinyAITensorInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  const int tensors = tinyaiGetMappedTensorCount(model_);
  for (int bad : {-1, tensors, std::numeric_limits<int>::max()}) {
    EXPECT_EQ(tinyaiGetMappedTensorInfo(model_, bad, &info), TINYAI_ERR_INVALID_ARGUMENT);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "tensor " + std::to_string(bad));
  }
}

TEST_F(LoaderTest, PriorityValidation) {
  EXPECT_EQ(tinyaiSetLayerPriority(model_, 0, 0.0f), TINYAI_OK);
  EXPECT_EQ(tinyaiSetLayerPriority(model_, 1, 2.5f), TINYAI_OK);
  EXPECT_EQ(tinyaiSetLayerPriority(model_, 2, 1e30f), TINYAI_OK);
  for (float bad : {std::nanf(""), -1.0f, -0.001f, std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE(bad);
    tinyaiClearLastError();
    EXPECT_EQ(tinyaiSetLayerPriority(model_, 1, bad), TINYAI_ERR_INVALID_ARGUMENT);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "priority");
  }
}

TEST_F(LoaderTest, MemoryUsageIsTheSumOfTouchedLayers) {
  EXPECT_EQ(tinyaiGetMappedModelMemoryUsage(model_), 0u) << "nothing is resident before a layer is touched";
  const int n = tinyaiGetMappedLayerCount(model_);
  size_t expected = 0;
  // Touch layers out of order, one twice: usage is the sum over the set of
  // layers touched so far.
  std::vector<bool> touched(static_cast<size_t>(n), false);
  for (int i : {2, 0, 2, n - 1, 1}) {
    ASSERT_NE(tinyaiGetLayerWeights(model_, i), nullptr) << LastMessage();
    EXPECT_EQ(tinyaiReleaseLayerWeights(model_, i), TINYAI_OK);
    if (!touched[static_cast<size_t>(i)]) {
      touched[static_cast<size_t>(i)] = true;
      expected += HeldBytes(tinyaiGetLayerDescriptor(model_, i));
    }
    EXPECT_EQ(tinyaiGetMappedModelMemoryUsage(model_), expected) << "after layer " << i;
  }
  size_t sum = 0;
  for (int i : {0, 1, 2, n - 1}) sum += HeldBytes(tinyaiGetLayerDescriptor(model_, i));
  EXPECT_EQ(tinyaiGetMappedModelMemoryUsage(model_), sum);
  // Touching a resident layer again does not count it twice.
  ASSERT_NE(tinyaiGetLayerWeights(model_, 0), nullptr);
  EXPECT_EQ(tinyaiGetMappedModelMemoryUsage(model_), sum);
  EXPECT_EQ(tinyaiReleaseLayerWeights(model_, 0), TINYAI_OK);
  // Every layer touched: the whole model.
  size_t all = 0;
  for (int i = 0; i < n; ++i) {
    ASSERT_NE(tinyaiGetLayerWeights(model_, i), nullptr);
    all += HeldBytes(tinyaiGetLayerDescriptor(model_, i));
  }
  EXPECT_EQ(tinyaiGetMappedModelMemoryUsage(model_), all);
  for (int i = 0; i < n; ++i) EXPECT_EQ(tinyaiReleaseLayerWeights(model_, i), TINYAI_OK);
}

TEST_F(LoaderTest, MemoryUsageGrowsStepByStep) {
  const int n = tinyaiGetMappedLayerCount(model_);
  size_t expected = 0;
  for (int i = n - 1; i >= 0; --i) {
    ASSERT_NE(tinyaiGetLayerWeights(model_, i), nullptr) << LastMessage();
    expected += HeldBytes(tinyaiGetLayerDescriptor(model_, i));
    EXPECT_EQ(tinyaiGetMappedModelMemoryUsage(model_), expected) << "while layer " << i << " is pinned";
  }
  for (int i = 0; i < n; ++i) EXPECT_EQ(tinyaiReleaseLayerWeights(model_, i), TINYAI_OK);
}

TEST_F(LoaderTest, PrefetchIsAccepted) {
  const int n = tinyaiGetMappedLayerCount(model_);
  for (int i = 0; i < n; ++i) EXPECT_EQ(tinyaiPrefetchLayerWeights(model_, i), TINYAI_OK) << LastMessage();
  // Prefetching a pinned layer and then using it.
  ASSERT_NE(tinyaiGetLayerWeights(model_, 1), nullptr);
  EXPECT_EQ(tinyaiPrefetchLayerWeights(model_, 1), TINYAI_OK);
  EXPECT_EQ(tinyaiReleaseLayerWeights(model_, 1), TINYAI_OK);
  // With prefetch disabled and with inline prefetch.
  for (int variant = 0; variant < 2; ++variant) {
    TinyAIMmapConfig cfg = tinyaiCreateDefaultMmapConfig();
    if (variant == 0) cfg.prefetchEnabled = false;
    if (variant == 1) cfg.prefetchThreads = 0;
    TinyAIMappedModel* m = tinyaiOpenMappedModel(path_.c_str(), &cfg);
    ASSERT_NE(m, nullptr) << LastMessage();
    for (int i = 0; i < n; ++i) EXPECT_EQ(tinyaiPrefetchLayerWeights(m, i), TINYAI_OK) << LastMessage();
    for (int i = 0; i < n; ++i) {
      EXPECT_NE(tinyaiGetLayerWeights(m, i), nullptr) << LastMessage();
      EXPECT_EQ(tinyaiReleaseLayerWeights(m, i), TINYAI_OK);
    }
    tinyaiCloseMappedModel(m);
  }
}

TEST_F(LoaderTest, TensorLookupByName) {
  const int tensors = tinyaiGetMappedTensorCount(model_);
  for (int i = 0; i < tensors; ++i) {
    TinyAITensorInfo info;
    std::memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    ASSERT_EQ(tinyaiGetMappedTensorInfo(model_, i, &info), TINYAI_OK);
    int found = -1;
    EXPECT_EQ(tinyaiFindMappedTensor(model_, info.name, &found), TINYAI_OK) << info.name;
    EXPECT_EQ(found, i) << info.name;
  }
  int index = -1;
  ASSERT_EQ(tinyaiFindMappedTensor(model_, "blk.1.ffn_up", &index), TINYAI_OK);
  TinyAITensorInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  ASSERT_EQ(tinyaiGetMappedTensorInfo(model_, index, &info), TINYAI_OK);
  EXPECT_STREQ(info.name, "blk.1.ffn_up");
  EXPECT_EQ(info.role, TINYAI_ROLE_FFN_UP);
  EXPECT_EQ(info.blockIndex, 1);
  EXPECT_EQ(info.layer, 2);
  EXPECT_EQ(info.nDims, 2);
  EXPECT_EQ(info.shape[0], 64u);
  EXPECT_EQ(info.shape[1], 32u);
  for (const char* missing : {"blk.1.ffn", "blk.1.ffn_up ", "BLK.1.FFN_UP", "", "blk.2.ffn_up"}) {
    index = -5;
    tinyaiClearLastError();
    EXPECT_EQ(tinyaiFindMappedTensor(model_, missing, &index), TINYAI_ERR_NOT_FOUND) << "'" << missing << "'";
    EXPECT_LAST_ERROR(TINYAI_ERR_NOT_FOUND, std::string("'") + missing + "'");
    EXPECT_EQ(index, -5) << "a failed lookup must not write its output";
  }
}

TEST_F(LoaderTest, NullArguments) {
  TinyAITensorInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  int index = 0;
  int64_t i64 = 0;
  float f = 0;
  const char* str = nullptr;
  size_t len = 0;

  tinyaiClearLastError();
  EXPECT_EQ(tinyaiOpenMappedModel(nullptr, nullptr), nullptr);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "path");
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiOpenMappedModel("", nullptr), nullptr);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "path");
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiOpenMappedModelFromMemory(nullptr, 100, nullptr), nullptr);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "data");
  tinyaiCloseMappedModel(nullptr);  // ok

  tinyaiClearLastError();
  EXPECT_EQ(tinyaiGetMappedLayerCount(nullptr), -1);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "model");
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiGetLayerDescriptor(nullptr, 0), nullptr);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "model");
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiGetLayerWeights(nullptr, 0), nullptr);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "model");
  EXPECT_EQ(tinyaiPrefetchLayerWeights(nullptr, 0), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "model");
  EXPECT_EQ(tinyaiReleaseLayerWeights(nullptr, 0), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "model");
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiGetMappedModelMemoryUsage(nullptr), 0u);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "model");
  EXPECT_EQ(tinyaiSetLayerPriority(nullptr, 0, 1.0f), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "model");
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiGetMappedTensorCount(nullptr), -1);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "model");
  EXPECT_EQ(tinyaiGetMappedTensorInfo(nullptr, 0, &info), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "model");
  EXPECT_EQ(tinyaiGetMappedTensorInfo(model_, 0, nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "out");
  EXPECT_EQ(tinyaiFindMappedTensor(nullptr, "token_embd", &index), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "model");
  EXPECT_EQ(tinyaiFindMappedTensor(model_, nullptr, &index), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "name");
  EXPECT_EQ(tinyaiFindMappedTensor(model_, "token_embd", nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "tensorIndex");
  EXPECT_EQ(tinyaiGetMetadataInt(nullptr, "llama.dim", &i64), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "model");
  EXPECT_EQ(tinyaiGetMetadataInt(model_, nullptr, &i64), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "key");
  EXPECT_EQ(tinyaiGetMetadataInt(model_, "llama.dim", nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "out");
  EXPECT_EQ(tinyaiGetMetadataFloat(nullptr, "llama.norm_eps", &f), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "model");
  EXPECT_EQ(tinyaiGetMetadataFloat(model_, nullptr, &f), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "key");
  EXPECT_EQ(tinyaiGetMetadataFloat(model_, "llama.norm_eps", nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "out");
  EXPECT_EQ(tinyaiGetMetadataString(nullptr, "general.name", &str, &len), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "model");
  EXPECT_EQ(tinyaiGetMetadataString(model_, nullptr, &str, &len), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "key");
  EXPECT_EQ(tinyaiGetMetadataString(model_, "general.name", nullptr, &len), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "str");
  EXPECT_EQ(tinyaiGetMetadataString(model_, "general.name", &str, nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "len");
  // The header promises 0 for NULL; the status.h contract also asks for the
  // last error to say why.
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiGetMappedModelFileSize(nullptr), 0u);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "model");
}

TEST_F(LoaderTest, BadConfigsAreInvalidArgument) {
  TinyAIMmapConfig cfg = tinyaiCreateDefaultMmapConfig();
  cfg.structSize = 0;
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiOpenMappedModel(path_.c_str(), &cfg), nullptr);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "structSize");
  cfg.structSize = sizeof cfg + 8;
  EXPECT_EQ(tinyaiOpenMappedModel(path_.c_str(), &cfg), nullptr);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "structSize");
  cfg = tinyaiCreateDefaultMmapConfig();
  cfg.prefetchThreads = -2;
  EXPECT_EQ(tinyaiOpenMappedModel(path_.c_str(), &cfg), nullptr);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "prefetchThreads");
  for (int direct : {-2, 2}) {
    cfg = tinyaiCreateDefaultMmapConfig();
    cfg.directReads = direct;
    EXPECT_EQ(tinyaiOpenMappedModel(path_.c_str(), &cfg), nullptr);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "directReads");
  }
}

TEST_F(LoaderTest, OpenFromMemory) {
  AlignedImage img(image_);
  ASSERT_NE(img.data(), nullptr);
  TinyAIMappedModel* m = tinyaiOpenMappedModelFromMemory(img.data(), img.size(), nullptr);
  ASSERT_NE(m, nullptr) << LastMessage();
  EXPECT_EQ(tinyaiGetMappedLayerCount(m), tinyaiGetMappedLayerCount(model_));
  EXPECT_EQ(tinyaiGetMappedModelFileSize(m), image_.size());
  void* w = tinyaiGetLayerWeights(m, 1);
  EXPECT_EQ(w, img.data() + tinyaiGetLayerDescriptor(m, 1)->fileOffset) << "memory images are used in place";
  EXPECT_EQ(tinyaiReleaseLayerWeights(m, 1), TINYAI_OK);
  tinyaiCloseMappedModel(m);
}

TEST_F(LoaderTest, MisalignedMemoryImageIsInvalidArgument) {
  // One byte past a 64-byte boundary, and 8 bytes past (aligned for the
  // header structs but not as the API requires).
  std::vector<uint8_t> storage(image_.size() + 128);
  uint8_t* base = storage.data();
  uint8_t* aligned = base + (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  for (size_t shift : {size_t{1}, size_t{8}, size_t{32}}) {
    SCOPED_TRACE(shift);
    std::memcpy(aligned + shift, image_.data(), image_.size());
    tinyaiClearLastError();
    TinyAIMappedModel* m = tinyaiOpenMappedModelFromMemory(aligned + shift, image_.size(), nullptr);
    EXPECT_EQ(m, nullptr);
    tinyaiCloseMappedModel(m);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "64-byte aligned");
  }
}

TEST_F(LoaderTest, ModelsAreIndependent) {
  TinyAIMappedModel* other = tinyaiOpenMappedModel(path_.c_str(), nullptr);
  ASSERT_NE(other, nullptr);
  ASSERT_NE(tinyaiGetLayerWeights(other, 1), nullptr);
  EXPECT_EQ(tinyaiReleaseLayerWeights(model_, 1), TINYAI_ERR_MISUSE) << "pins belong to one model";
  EXPECT_EQ(tinyaiReleaseLayerWeights(other, 1), TINYAI_OK);
  tinyaiCloseMappedModel(other);
}

// Four threads pin and release random layers; every call succeeds, pins
// balance, and afterwards no layer is held. Meant for TSan as well.
TEST_F(LoaderTest, ConcurrentPinAndRelease) {
  const int layers = tinyaiGetMappedLayerCount(model_);
  constexpr int kThreads = 4;
  constexpr int kIterations = 10000;
  std::atomic<int> failures{0};
  std::atomic<long> pins{0};
  std::vector<std::thread> threads;
  std::vector<const void*> expected(static_cast<size_t>(layers));
  for (int i = 0; i < layers; ++i) {
    expected[static_cast<size_t>(i)] = tinyaiGetLayerWeights(model_, i);
    ASSERT_NE(expected[static_cast<size_t>(i)], nullptr);
    ASSERT_EQ(tinyaiReleaseLayerWeights(model_, i), TINYAI_OK);
  }
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(1234u + static_cast<unsigned>(t));
      std::uniform_int_distribution<int> pick(0, layers - 1);
      std::vector<int> held;
      for (int i = 0; i < kIterations; ++i) {
        // Hold up to three layers at a time, releasing in random order.
        if (held.size() < 3 && (held.empty() || rng() % 2 == 0)) {
          const int l = pick(rng);
          const void* w = tinyaiGetLayerWeights(model_, l);
          if (w != expected[static_cast<size_t>(l)]) {
            failures.fetch_add(1);
            continue;
          }
          held.push_back(l);
          pins.fetch_add(1);
        } else {
          const size_t k = rng() % held.size();
          if (tinyaiReleaseLayerWeights(model_, held[k]) != TINYAI_OK) failures.fetch_add(1);
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
          pins.fetch_sub(1);
        }
        if (i % 97 == 0) {
          (void)tinyaiGetMappedModelMemoryUsage(model_);
          (void)tinyaiPrefetchLayerWeights(model_, pick(rng));
          (void)tinyaiSetLayerPriority(model_, pick(rng), static_cast<float>(i % 5));
        }
      }
      for (int l : held) {
        if (tinyaiReleaseLayerWeights(model_, l) != TINYAI_OK) failures.fetch_add(1);
        pins.fetch_sub(1);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(pins.load(), 0);
  // No pins remain: one more release of any layer is misuse.
  for (int i = 0; i < layers; ++i) {
    EXPECT_EQ(tinyaiReleaseLayerWeights(model_, i), TINYAI_ERR_MISUSE) << "layer " << i << " still pinned";
  }
  size_t all = 0;
  for (int i = 0; i < layers; ++i) all += HeldBytes(tinyaiGetLayerDescriptor(model_, i));
  EXPECT_EQ(tinyaiGetMappedModelMemoryUsage(model_), all);
}

// Errors are per thread: a failure on one thread leaves another's last
// error alone.
TEST_F(LoaderTest, LastErrorIsPerThread) {
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiReleaseLayerWeights(model_, 0), TINYAI_ERR_MISUSE);
  std::thread other([] {
    EXPECT_EQ(tinyaiGetLastError(), TINYAI_OK);
    EXPECT_STREQ(tinyaiGetLastErrorMessage(), "");
    EXPECT_EQ(tinyaiGetMappedLayerCount(nullptr), -1);
    EXPECT_EQ(tinyaiGetLastError(), TINYAI_ERR_INVALID_ARGUMENT);
  });
  other.join();
  EXPECT_EQ(tinyaiGetLastError(), TINYAI_ERR_MISUSE);
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiGetLastError(), TINYAI_OK);
  EXPECT_STREQ(tinyaiGetLastErrorMessage(), "");
}

}  // namespace

namespace {

// A zstd model whose last tensor's last frame has a flipped byte: the load
// fails with a specific status (the CRC, or without CRCs zstd's own frame
// checks), never with wrong weights or a crash, and the model stays usable.
TEST(CompressedLoaderTest, CorruptCompressedDataIsDetected) {
  tt::TempDir dir;
  const std::string path = dir.File("zstd.tmai");
  tinyai::LlamaShape shape = tt::TinyShape();
  shape.dim = 64;
  shape.hidden_dim = 256;
  tinyai::WriteOptions options;
  options.codec = TINYAI_CODEC_ZSTD;
  ASSERT_EQ(tinyai::WriteSyntheticModel(shape, path.c_str(), options), TINYAI_OK) << LastMessage();
  Bytes image;
  ASSERT_TRUE(tt::ReadFileBytes(path, &image));
  TinyAIMappedModel* model = tinyaiOpenMappedModel(path.c_str(), nullptr);
  ASSERT_NE(model, nullptr) << LastMessage();
  ASSERT_NE(tinyaiGetLayerDescriptor(model, 1), nullptr);
  const TinyAILayerDescriptor block0_copy = *tinyaiGetLayerDescriptor(model, 1);  // outlives the model
  const TinyAILayerDescriptor* block0 = &block0_copy;
  TinyAITensorInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  ASSERT_EQ(tinyaiGetMappedTensorInfo(model, block0->firstTensor + block0->tensorCount - 1, &info), TINYAI_OK);
  ASSERT_EQ(info.codec, TINYAI_CODEC_ZSTD) << "the synthetic weights must compress";
  const std::string last_name = info.name;  // owned by the model
  ASSERT_LT(block0->storedSize, block0->decodedSize);
  // The intact model loads, and its decoded weights are what the checksums say.
  ASSERT_NE(tinyaiGetLayerWeights(model, 1), nullptr) << LastMessage();
  EXPECT_EQ(tinyaiReleaseLayerWeights(model, 1), TINYAI_OK);
  tinyaiCloseMappedModel(model);

  image[static_cast<size_t>(block0->fileOffset + block0->storedSize - 8)] ^= 0x5a;
  ASSERT_TRUE(tt::WriteFileBytes(path, image));
  for (bool verify : {true, false}) {
    SCOPED_TRACE(verify);
    TinyAIMmapConfig cfg = tinyaiCreateDefaultMmapConfig();
    cfg.verifyChecksums = verify;
    model = tinyaiOpenMappedModel(path.c_str(), &cfg);
    ASSERT_NE(model, nullptr) << LastMessage();
    for (int attempt = 0; attempt < 2; ++attempt) {  // a failed load leaves nothing behind
      EXPECT_EQ(tinyaiGetLayerWeights(model, 1), nullptr);
      const TinyAIStatus s = tinyaiGetLastError();
      if (verify) {
        EXPECT_EQ(s, TINYAI_ERR_CHECKSUM) << LastMessage();
      } else {
        EXPECT_TRUE(s == TINYAI_ERR_CHECKSUM || s == TINYAI_ERR_BAD_FORMAT) << tinyaiStatusString(s) << LastMessage();
      }
      EXPECT_TRUE(Contains(LastMessage(), last_name)) << LastMessage();
    }
    EXPECT_EQ(tinyaiGetMappedModelMemoryUsage(model), 0u);
    // Other layers still load.
    EXPECT_NE(tinyaiGetLayerWeights(model, 0), nullptr) << LastMessage();
    EXPECT_EQ(tinyaiReleaseLayerWeights(model, 0), TINYAI_OK);
    tinyaiCloseMappedModel(model);
  }
}

TEST(CompressedLoaderTest, DoubleCloseIsMisuse) {
  tt::TempDir dir;
  ASSERT_EQ(tt::WriteTinyModel(dir.File("m.tmai")), TINYAI_OK);
  TinyAIMappedModel* model = tinyaiOpenMappedModel(dir.File("m.tmai").c_str(), nullptr);
  ASSERT_NE(model, nullptr);
  tinyaiClearLastError();
  tinyaiCloseMappedModel(model);
  EXPECT_EQ(tinyaiGetLastError(), TINYAI_OK);
  tinyaiCloseMappedModel(model);  // the registry refuses it before touching it
  EXPECT_EQ(tinyaiGetLastError(), TINYAI_ERR_MISUSE);
  EXPECT_TRUE(Contains(LastMessage(), "closed twice")) << LastMessage();
}

}  // namespace
