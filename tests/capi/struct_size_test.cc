// The structSize convention (docs/c-api.md, "Rules every public function follows";
// src/common/struct_size.h), struct by struct: a caller compiled against an
// older, shorter struct still works - an input struct's missing fields take
// their defaults, an output struct is written up to its structSize and no
// further - and a size below the struct's first field or above the struct
// this library knows is TINYAI_ERR_INVALID_ARGUMENT, with nothing written.
//
// "Older" is simulated by cutting today's struct at a field; the bytes past
// the cut hold values the library would refuse (or sentinels), so a call
// that read or wrote them fails the test.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

#include "format/test_models.h"
#include "tinyai/llm.h"
#include "tinyai/persistent.h"
#include "tinyai/platform.h"
#include "tinyai/utils/forward_scheduler.h"
#include "tinyai/utils/mmap_loader.h"
#include "tinyai/utils/quantize_mixed.h"

#include <gtest/gtest.h>

namespace tinyai {
namespace testing {
namespace {

constexpr uint8_t kSentinel = 0xA5;

// A struct whose bytes past `size` hold `fill`, with structSize = size.
template <class T>
T Cut(const T& base, size_t size, uint8_t fill) {
  T t = base;
  std::memset(reinterpret_cast<uint8_t*>(&t) + size, fill, sizeof t - size);
  t.structSize = static_cast<uint32_t>(size);
  return t;
}

// An output struct's checks: call(&out) with structSize = every bad size is
// refused and writes nothing; with the size cut at `cut`, it succeeds
// (or returns `cut_status`), fills the bytes before the cut as the full call
// does, leaves the rest alone and keeps structSize.
template <class T>
void CheckOutput(const char* what, size_t min_size, size_t cut, const std::function<TinyAIStatus(T*)>& call,
                 TinyAIStatus cut_status = TINYAI_OK) {
  SCOPED_TRACE(what);
  ASSERT_LT(cut, sizeof(T));
  ASSERT_GE(cut, min_size);
  for (size_t bad : {size_t{0}, min_size - 1, sizeof(T) + 1, sizeof(T) + 64}) {
    SCOPED_TRACE(bad);
    T out;
    std::memset(&out, kSentinel, sizeof out);
    out.structSize = static_cast<uint32_t>(bad);
    tinyaiClearLastError();
    EXPECT_EQ(call(&out), TINYAI_ERR_INVALID_ARGUMENT);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "structSize is " + std::to_string(bad));
    T untouched;
    std::memset(&untouched, kSentinel, sizeof untouched);
    untouched.structSize = static_cast<uint32_t>(bad);
    EXPECT_EQ(std::memcmp(&out, &untouched, sizeof out), 0) << "a refused call wrote";
  }
  T full;
  std::memset(&full, 0, sizeof full);
  full.structSize = sizeof full;
  ASSERT_EQ(call(&full), cut_status) << LastMessage();
  if (cut_status != TINYAI_OK) {
    // The size was accepted; what failed is the call itself.
    T older = Cut(T(), cut, kSentinel);
    EXPECT_EQ(call(&older), cut_status);
    return;
  }
  EXPECT_EQ(full.structSize, sizeof full);
  T older;
  std::memset(&older, kSentinel, sizeof older);
  older.structSize = static_cast<uint32_t>(cut);
  ASSERT_EQ(call(&older), TINYAI_OK) << LastMessage();
  EXPECT_EQ(older.structSize, cut) << "structSize stays the caller's";
  const uint8_t* o = reinterpret_cast<const uint8_t*>(&older);
  const uint8_t* f = reinterpret_cast<const uint8_t*>(&full);
  EXPECT_EQ(std::memcmp(o + sizeof(uint32_t), f + sizeof(uint32_t), cut - sizeof(uint32_t)), 0)
      << "the fields before the cut are the full call's";
  for (size_t i = cut; i < sizeof(T); ++i) {
    ASSERT_EQ(o[i], kSentinel) << "byte " << i << " past the caller's struct was written";
  }
}

// An input struct's bad sizes: refused with INVALID_ARGUMENT naming the size.
template <class T>
void CheckInputRefused(const char* what, const T& base, size_t min_size, const std::function<TinyAIStatus(const T*)>& call) {
  SCOPED_TRACE(what);
  for (size_t bad : {size_t{0}, min_size - 1, sizeof(T) + 1, sizeof(T) + 64}) {
    SCOPED_TRACE(bad);
    T in = base;
    in.structSize = static_cast<uint32_t>(bad);
    tinyaiClearLastError();
    EXPECT_EQ(call(&in), TINYAI_ERR_INVALID_ARGUMENT);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "structSize is " + std::to_string(bad));
  }
}

class StructSizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("tiny.tmai");
    ASSERT_EQ(WriteTinyModel(path_), TINYAI_OK) << LastMessage();
    model_ = tinyaiOpenMappedModel(path_.c_str(), nullptr);
    ASSERT_NE(model_, nullptr) << LastMessage();
    TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
    cfg.contextLength = 32;
    ASSERT_EQ(tinyaiCreateLLM(model_, &cfg, &llm_), TINYAI_OK) << LastMessage();
  }
  void TearDown() override {
    tinyaiDestroyLLM(llm_);
    tinyaiCloseMappedModel(model_);
  }

  TempDir dir_;
  std::string path_;
  TinyAIMappedModel* model_ = nullptr;
  TinyAILLM* llm_ = nullptr;
};

// ---- input structs ----

TEST_F(StructSizeTest, MmapConfig) {
  // An older config ends before rowSliceSize; past it, a block size of 1
  // byte (refused) must not be read.
  TinyAIMmapConfig base = tinyaiCreateDefaultMmapConfig();
  base.maxCacheSize = 123456;
  TinyAIMmapConfig older = Cut(base, offsetof(TinyAIMmapConfig, rowSliceSize), 0);
  older.rowSliceSize = 1;
  TinyAIMappedModel* m = tinyaiOpenMappedModel(path_.c_str(), &older);
  ASSERT_NE(m, nullptr) << LastMessage();
  TinyAICacheStats st = {};
  st.structSize = sizeof st;
  ASSERT_EQ(tinyaiGetMappedModelCacheStats(m, &st), TINYAI_OK);
  EXPECT_EQ(st.capacity, 123456u) << "the fields before the cut are read";
  tinyaiCloseMappedModel(m);
  base.rowSliceSize = 1;
  EXPECT_EQ(tinyaiOpenMappedModel(path_.c_str(), &base), nullptr) << "the full struct's rowSliceSize 1 is refused";
  CheckInputRefused<TinyAIMmapConfig>("TinyAIMmapConfig", tinyaiCreateDefaultMmapConfig(),
                                      offsetof(TinyAIMmapConfig, maxCacheSize) + sizeof(size_t),
                                      [&](const TinyAIMmapConfig* c) {
                                        TinyAIMappedModel* mm = tinyaiOpenMappedModel(path_.c_str(), c);
                                        tinyaiCloseMappedModel(mm);
                                        return mm ? TINYAI_OK : tinyaiGetLastError();
                                      });
}

TEST_F(StructSizeTest, SchedulerConfig) {
  // Cut before outputCapacity; past it, 0 (refused) must not be read.
  TinyAISchedulerConfig base = tinyaiCreateDefaultSchedulerConfig();
  TinyAISchedulerConfig older = Cut(base, offsetof(TinyAISchedulerConfig, outputCapacity), 0);
  TinyAIForwardScheduler* s = tinyaiCreateForwardSchedulerWithConfig(model_, TINYAI_EXEC_ADAPTIVE, 0, &older);
  ASSERT_NE(s, nullptr) << LastMessage();
  tinyaiDestroyForwardScheduler(s);
  base.outputCapacity = 0;
  EXPECT_EQ(tinyaiCreateForwardSchedulerWithConfig(model_, TINYAI_EXEC_ADAPTIVE, 0, &base), nullptr);
  CheckInputRefused<TinyAISchedulerConfig>(
      "TinyAISchedulerConfig", tinyaiCreateDefaultSchedulerConfig(), offsetof(TinyAISchedulerConfig, threads) + 4,
      [&](const TinyAISchedulerConfig* c) {
        TinyAIForwardScheduler* ss = tinyaiCreateForwardSchedulerWithConfig(model_, TINYAI_EXEC_ADAPTIVE, 0, c);
        tinyaiDestroyForwardScheduler(ss);
        return ss ? TINYAI_OK : tinyaiGetLastError();
      });
}

TEST_F(StructSizeTest, LLMConfig) {
  // Cut before mode; past it, mode 77 (refused) must not be read.
  TinyAILLMConfig base = tinyaiCreateDefaultLLMConfig();
  base.contextLength = 16;
  TinyAILLMConfig older = Cut(base, offsetof(TinyAILLMConfig, mode), 0);
  older.mode = static_cast<TinyAIExecutionMode>(77);
  TinyAILLM* llm = nullptr;
  ASSERT_EQ(tinyaiCreateLLM(model_, &older, &llm), TINYAI_OK) << LastMessage();
  TinyAIModelInfo info = {};
  info.structSize = sizeof info;
  ASSERT_EQ(tinyaiGetLLMModelInfo(llm, &info), TINYAI_OK);
  EXPECT_EQ(info.contextLength, 16) << "the fields before the cut are read";
  tinyaiDestroyLLM(llm);
  TinyAIMemoryReport est = {};
  est.structSize = sizeof est;
  EXPECT_EQ(tinyaiEstimateLLMMemory(model_, &older, &est), TINYAI_OK) << LastMessage();
  base.mode = static_cast<TinyAIExecutionMode>(77);
  EXPECT_EQ(tinyaiCreateLLM(model_, &base, &llm), TINYAI_ERR_INVALID_ARGUMENT);
  const auto create = [&](const TinyAILLMConfig* c) {
    TinyAILLM* l = nullptr;
    const TinyAIStatus s = tinyaiCreateLLM(model_, c, &l);
    tinyaiDestroyLLM(l);
    return s;
  };
  CheckInputRefused<TinyAILLMConfig>("TinyAILLMConfig", tinyaiCreateDefaultLLMConfig(),
                                     offsetof(TinyAILLMConfig, contextLength) + 4, create);
  CheckInputRefused<TinyAILLMConfig>("TinyAILLMConfig (estimate)", tinyaiCreateDefaultLLMConfig(),
                                     offsetof(TinyAILLMConfig, contextLength) + 4, [&](const TinyAILLMConfig* c) {
                                       TinyAIMemoryReport r = {};
                                       r.structSize = sizeof r;
                                       return tinyaiEstimateLLMMemory(model_, c, &r);
                                     });
}

TEST_F(StructSizeTest, SamplerConfig) {
  // Cut before topP; past it, topP -1 (refused) must not be read.
  std::vector<float> logits(300, 0.0f);
  logits[7] = 5.0f;
  TinyAISamplerConfig older = Cut(tinyaiCreateDefaultSamplerConfig(), offsetof(TinyAISamplerConfig, topP), 0);
  older.topP = -1.0f;
  uint64_t rng = 1;
  int32_t token = -1;
  ASSERT_EQ(tinyaiLLMSample(llm_, logits.data(), &older, &rng, &token), TINYAI_OK) << LastMessage();
  EXPECT_EQ(token, 7);
  TinyAISamplerConfig full = tinyaiCreateDefaultSamplerConfig();
  full.topP = -1.0f;
  EXPECT_EQ(tinyaiLLMSample(llm_, logits.data(), &full, &rng, &token), TINYAI_ERR_INVALID_ARGUMENT);
  CheckInputRefused<TinyAISamplerConfig>("TinyAISamplerConfig", tinyaiCreateDefaultSamplerConfig(),
                                         offsetof(TinyAISamplerConfig, temperature) + 4,
                                         [&](const TinyAISamplerConfig* c) {
                                           return tinyaiLLMSample(llm_, logits.data(), c, &rng, &token);
                                         });
}

TEST_F(StructSizeTest, GenerateParams) {
  // (The struct from before maxNewTokens: ModelTest.GenerateParamsFromBeforeMaxNewTokensKeepLlama2cSteps.)
  // Cut before onText: a callback past the cut must not be called.
  TinyAIGenerateParams older = Cut(tinyaiCreateDefaultGenerateParams(), offsetof(TinyAIGenerateParams, onText), 0);
  older.onText = [](const char*, size_t, void*) -> int {
    ADD_FAILURE() << "onText past the caller's struct was called";
    return 1;
  };
  older.steps = 8;
  char text[256];
  ASSERT_EQ(tinyaiLLMGenerate(llm_, "ab", &older, text, sizeof text, nullptr, nullptr), TINYAI_OK) << LastMessage();
  CheckInputRefused<TinyAIGenerateParams>("TinyAIGenerateParams", tinyaiCreateDefaultGenerateParams(),
                                          offsetof(TinyAIGenerateParams, steps) + 4,
                                          [&](const TinyAIGenerateParams* p) {
                                            return tinyaiLLMGenerate(llm_, "ab", p, text, sizeof text, nullptr, nullptr);
                                          });
  TinyAIForwardScheduler* s = tinyaiCreateForwardScheduler(model_, TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(tinyaiSetSchedulerGenerateParams(s, &older), TINYAI_OK) << LastMessage();
  CheckInputRefused<TinyAIGenerateParams>("TinyAIGenerateParams (scheduler)", tinyaiCreateDefaultGenerateParams(),
                                          offsetof(TinyAIGenerateParams, steps) + 4,
                                          [&](const TinyAIGenerateParams* p) {
                                            return tinyaiSetSchedulerGenerateParams(s, p);
                                          });
  tinyaiDestroyForwardScheduler(s);
}

TEST_F(StructSizeTest, MixedPrecisionConfig) {
  // Cut before attentionPrecision: embeddingPrecision is read; past the
  // cut, precision 77 and group size 0 (both refused) must not be: the
  // defaults (INT4, 32) apply. On a model of its own: the fixture's runs an
  // LLM, and a precision is applied to a model nothing runs on.
  TinyAIMappedModel* m = tinyaiOpenMappedModel(path_.c_str(), nullptr);
  ASSERT_NE(m, nullptr) << LastMessage();
  TinyAIMixedPrecisionConfig base;
  ASSERT_EQ(tinyaiInitMixedPrecisionConfig(&base), TINYAI_OK);
  base.embeddingPrecision = TINYAI_PREC_FP16;
  TinyAIMixedPrecisionConfig older = Cut(base, offsetof(TinyAIMixedPrecisionConfig, attentionPrecision), 0);
  older.attentionPrecision = static_cast<TinyAIPrecision>(77);
  ASSERT_EQ(tinyaiApplyMixedPrecision(m, &older), TINYAI_OK) << LastMessage();
  const auto precision = [&](const char* name) {
    int index = -1;
    TinyAIPrecision p = TINYAI_PREC_AS_STORED;
    EXPECT_EQ(tinyaiFindMappedTensor(m, name, &index), TINYAI_OK) << name;
    EXPECT_EQ(tinyaiGetTensorPrecision(m, index, &p), TINYAI_OK) << name;
    return p;
  };
  EXPECT_EQ(precision("token_embd"), TINYAI_PREC_FP16) << "the field before the cut is read";
  EXPECT_EQ(precision("blk.0.attn_q"), TINYAI_PREC_INT4) << "the fields past it take their defaults";
  EXPECT_EQ(precision("blk.1.ffn_down"), TINYAI_PREC_INT4);
  base.attentionPrecision = static_cast<TinyAIPrecision>(77);
  EXPECT_EQ(tinyaiApplyMixedPrecision(m, &base), TINYAI_ERR_INVALID_ARGUMENT) << "the full struct's 77 is refused";
  TinyAIMixedPrecisionConfig defaults;
  ASSERT_EQ(tinyaiInitMixedPrecisionConfig(&defaults), TINYAI_OK);
  CheckInputRefused<TinyAIMixedPrecisionConfig>(
      "TinyAIMixedPrecisionConfig", defaults, offsetof(TinyAIMixedPrecisionConfig, embeddingPrecision) + 4,
      [&](const TinyAIMixedPrecisionConfig* c) { return tinyaiApplyMixedPrecision(m, c); });
  tinyaiCloseMappedModel(m);
}

TEST_F(StructSizeTest, SaveOptions) {
  // Cut before threads: progress and progressUser are read; past the cut,
  // threads -1 (refused) must not be: one thread. Each report the callback
  // gets carries the library's sizeof(TinyAISaveProgress).
  struct Seen {
    int calls = 0, other_sizes = 0;
  } seen;
  TinyAISaveOptions base = tinyaiCreateDefaultSaveOptions();
  base.progress = [](void* user, const TinyAISaveProgress* p) -> int {
    Seen* s = static_cast<Seen*>(user);
    ++s->calls;
    s->other_sizes += p->structSize != sizeof(TinyAISaveProgress);
    return 0;
  };
  base.progressUser = &seen;
  TinyAISaveOptions older = Cut(base, offsetof(TinyAISaveOptions, threads), 0);
  older.threads = -1;
  const std::string out = dir_.File("saved.tmai");
  ASSERT_EQ(tinyaiSaveMappedModel(model_, out.c_str(), &older), TINYAI_OK) << LastMessage();
  EXPECT_EQ(seen.calls, tinyaiGetMappedTensorCount(model_)) << "the callback and its user before the cut are read";
  EXPECT_EQ(seen.other_sizes, 0) << "TinyAISaveProgress.structSize is not the library's";
  base.threads = -1;
  EXPECT_EQ(tinyaiSaveMappedModel(model_, out.c_str(), &base), TINYAI_ERR_INVALID_ARGUMENT)
      << "the full struct's threads -1 is refused";
  CheckInputRefused<TinyAISaveOptions>(
      "TinyAISaveOptions", tinyaiCreateDefaultSaveOptions(),
      offsetof(TinyAISaveOptions, progress) + sizeof(TinyAISaveProgressCallback),
      [&](const TinyAISaveOptions* o) { return tinyaiSaveMappedModel(model_, out.c_str(), o); });
}

TEST(StructSizePersistentTest, PersistentConfig) {
  // Cut before chunkRows: memoryLimit is read; past the cut, chunkRows 0
  // (refused) must not be: 64 rows a chunk, as the default config's.
  TinyAIPersistentConfig base = tinyaiCreateDefaultPersistentConfig();
  base.memoryLimit = 4096;
  TinyAIPersistentConfig older = Cut(base, offsetof(TinyAIPersistentConfig, chunkRows), 0);
  TinyAIPersistentStore* cut = nullptr;
  TinyAIPersistentStore* full = nullptr;
  ASSERT_EQ(tinyaiCreatePersistentStore(&older, &cut), TINYAI_OK) << LastMessage();
  ASSERT_EQ(tinyaiCreatePersistentStore(&base, &full), TINYAI_OK) << LastMessage();
  EXPECT_EQ(tinyaiDeclarePersistent(cut, "big(i): f32[16] @table @fixed(i=128);"), TINYAI_ERR_RESOURCE_EXHAUSTED)
      << "memoryLimit before the cut is read (8 KiB past 4 KiB)";
  const int32_t row[4] = {1, 2, 3, 4};
  for (TinyAIPersistentStore* s : {cut, full}) {
    ASSERT_EQ(tinyaiDeclarePersistent(s, "A(i): i32[4] @table;"), TINYAI_OK) << LastMessage();
    ASSERT_EQ(tinyaiPersistentWrite(s, "A[0]", TINYAI_PTYPE_I32, row, sizeof row), TINYAI_OK) << LastMessage();
  }
  EXPECT_GE(tinyaiGetPersistentMemoryUsage(cut), 64 * sizeof row) << "a chunk of the default 64 rows";
  EXPECT_EQ(tinyaiGetPersistentMemoryUsage(cut), tinyaiGetPersistentMemoryUsage(full));
  tinyaiDestroyPersistentStore(cut);
  tinyaiDestroyPersistentStore(full);
  base.chunkRows = 0;
  TinyAIPersistentStore* refused = nullptr;
  EXPECT_EQ(tinyaiCreatePersistentStore(&base, &refused), TINYAI_ERR_INVALID_ARGUMENT)
      << "the full struct's chunkRows 0 is refused";
  CheckInputRefused<TinyAIPersistentConfig>("TinyAIPersistentConfig", tinyaiCreateDefaultPersistentConfig(),
                                            offsetof(TinyAIPersistentConfig, memoryLimit) + sizeof(size_t),
                                            [](const TinyAIPersistentConfig* c) {
                                              TinyAIPersistentStore* s = nullptr;
                                              const TinyAIStatus status = tinyaiCreatePersistentStore(c, &s);
                                              tinyaiDestroyPersistentStore(s);
                                              return status;
                                            });
}

TEST(StructSizePersistentTest, PersistentEntry) {
  TinyAIPersistentStore* store = nullptr;
  ASSERT_EQ(tinyaiCreatePersistentStore(nullptr, &store), TINYAI_OK) << LastMessage();
  // Declared: cut before the fields only reported (extent on, "ignored when
  // declaring"); past the cut, sentinels.
  TinyAIPersistentEntry e;
  std::memset(&e, 0, sizeof e);
  e.structSize = sizeof e;
  e.name = "A";
  e.dtype = TINYAI_PTYPE_I16;
  e.rank = 1;
  e.shape[0] = 4;
  e.indexCount = 1;
  e.indexNames[0] = "i";
  e.fixedExtent[0] = 8;
  const TinyAIPersistentEntry older = Cut(e, offsetof(TinyAIPersistentEntry, extent), kSentinel);
  ASSERT_EQ(tinyaiDeclarePersistentEntry(store, &older), TINYAI_OK) << LastMessage();
  TinyAIPersistentEntry got;
  std::memset(&got, 0, sizeof got);
  got.structSize = sizeof got;
  ASSERT_EQ(tinyaiGetPersistentEntry(store, "A", &got), TINYAI_OK) << LastMessage();
  EXPECT_EQ(got.dtype, TINYAI_PTYPE_I16);
  EXPECT_EQ(got.shape[0], 4);
  EXPECT_EQ(got.fixedExtent[0], 8);
  EXPECT_EQ(got.extent[0], 8);
  CheckInputRefused<TinyAIPersistentEntry>("TinyAIPersistentEntry (declare)", e,
                                           offsetof(TinyAIPersistentEntry, name) + sizeof(const char*),
                                           [&](const TinyAIPersistentEntry* in) {
                                             return tinyaiDeclarePersistentEntry(store, in);
                                           });
  // Reported: written up to the cut (the declaration), not the extents.
  CheckOutput<TinyAIPersistentEntry>("TinyAIPersistentEntry", offsetof(TinyAIPersistentEntry, name) + sizeof(const char*),
                                     offsetof(TinyAIPersistentEntry, extent), [&](TinyAIPersistentEntry* o) {
                                       return tinyaiGetPersistentEntry(store, "A", o);
                                     });
  tinyaiDestroyPersistentStore(store);
}

// ---- output structs ----

TEST_F(StructSizeTest, ModelInfo) {
  CheckOutput<TinyAIModelInfo>("TinyAIModelInfo", offsetof(TinyAIModelInfo, dim) + 4,
                               offsetof(TinyAIModelInfo, vocabSize),
                               [&](TinyAIModelInfo* o) { return tinyaiGetLLMModelInfo(llm_, o); });
}

TEST_F(StructSizeTest, TensorInfo) {
  CheckOutput<TinyAITensorInfo>("TinyAITensorInfo", offsetof(TinyAITensorInfo, name) + sizeof(const char*),
                                offsetof(TinyAITensorInfo, nDims),
                                [&](TinyAITensorInfo* o) { return tinyaiGetMappedTensorInfo(model_, 1, o); });
}

TEST_F(StructSizeTest, LayerDescriptorCarriesTheLibrarysSize) {
  const TinyAILayerDescriptor* d = tinyaiGetLayerDescriptor(model_, 0);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->structSize, sizeof(TinyAILayerDescriptor));
}

TEST_F(StructSizeTest, CacheStats) {
  CheckOutput<TinyAICacheStats>("TinyAICacheStats", offsetof(TinyAICacheStats, hits) + 8,
                                offsetof(TinyAICacheStats, stalls),
                                [&](TinyAICacheStats* o) { return tinyaiGetMappedModelCacheStats(model_, o); });
}

TEST_F(StructSizeTest, SchedulerReport) {
  const TinyAIForwardScheduler* s = tinyaiGetLLMScheduler(llm_);
  CheckOutput<TinyAISchedulerReport>("TinyAISchedulerReport", offsetof(TinyAISchedulerReport, requestedMode) + 4,
                                     offsetof(TinyAISchedulerReport, memoryUsage),
                                     [&](TinyAISchedulerReport* o) { return tinyaiGetSchedulerReport(s, o); });
}

TEST_F(StructSizeTest, MemoryReports) {
  CheckOutput<TinyAIMemoryReport>("TinyAIMemoryReport", offsetof(TinyAIMemoryReport, memoryLimit) + 8,
                                  offsetof(TinyAIMemoryReport, totalBytes),
                                  [&](TinyAIMemoryReport* o) { return tinyaiGetLLMMemoryReport(llm_, o); });
  CheckOutput<TinyAIMemoryReport>("TinyAIMemoryReport (estimate)", offsetof(TinyAIMemoryReport, memoryLimit) + 8,
                                  offsetof(TinyAIMemoryReport, totalBytes),
                                  [&](TinyAIMemoryReport* o) { return tinyaiEstimateLLMMemory(model_, nullptr, o); });
}

TEST_F(StructSizeTest, GenerateStats) {
  // Timings differ run to run: only the counts before the cut are compared.
  TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
  gp.maxNewTokens = 4;
  char text[256];
  CheckOutput<TinyAIGenerateStats>("TinyAIGenerateStats", offsetof(TinyAIGenerateStats, stopReason) + 4,
                                   offsetof(TinyAIGenerateStats, promptSeconds), [&](TinyAIGenerateStats* o) {
                                     return tinyaiLLMGenerate(llm_, "ab", &gp, text, sizeof text, nullptr, o);
                                   });
}

TEST(StructSizeArenaTest, ArenaStatsSizeIsCheckedBeforeThePort) {
  // On this port there is no static arena (TINYAI_ERR_UNSUPPORTED) once the
  // size is accepted; the bare-metal tests fill it.
  CheckOutput<TinyAIArenaStats>("TinyAIArenaStats", offsetof(TinyAIArenaStats, size) + sizeof(size_t),
                                offsetof(TinyAIArenaStats, peakBytes),
                                [](TinyAIArenaStats* o) { return tinyaiGetStaticArenaStats(o); },
                                TINYAI_ERR_UNSUPPORTED);
}

}  // namespace
}  // namespace testing
}  // namespace tinyai
