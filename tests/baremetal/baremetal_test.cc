// The bare-metal port end to end on the host: stories260K from an in-memory
// image (and through a read callback) in a static arena, producing the
// golden text; the arena's estimate is exact to the byte; nothing is
// allocated after the LLM is created. Links the core built with
// ports/baremetal (tinyai_baremetal), never the posix one.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "port/port.h"
#include "require_shared.h"
#include "tinyai/tinyai.h"
#include "tinyai/utils/quantize_mixed.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#endif

namespace {

// The caller's static arena: the tests hand TinyAI a prefix of it.
alignas(64) uint8_t g_static[16u << 20];

std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The model image, 64-byte aligned as tinyaiOpenMappedModelFromMemory
// wants (flash would be).
struct Image {
  void* data = nullptr;
  size_t size = 0;
  ~Image() { std::free(data); }
};

bool LoadImage(const std::string& path, Image* image) {
  const std::string bytes = ReadAll(path);
  if (bytes.empty()) return false;
  image->size = bytes.size();
  image->data = std::aligned_alloc(64, (bytes.size() + 63) / 64 * 64);
  std::memcpy(image->data, bytes.data(), bytes.size());
  return true;
}

std::string FileName(const std::string& path) { return path.substr(path.rfind('/') + 1); }

std::string StoriesPath() { return EnvOr("TINYAI_TEST_STORIES_TMAI", TINYAI_TEST_STORIES_TMAI); }

// The model at path (stories260K, converted from ../shared), or a skip.
#define REQUIRE_MODEL(image, path)                                                                    \
  Image image;                                                                                        \
  if (!LoadImage((path), &image))                                                                     \
  TINYAI_SKIP_WITHOUT_SHARED(FileName(path) << " not found (../shared absent?): " << (path))
#define REQUIRE_STORIES(image) REQUIRE_MODEL(image, StoriesPath())

std::string Golden(int n, std::string* prompt) {
  char name[64];
  const std::string dir = EnvOr("TINYAI_TEST_SHARED_DIR", TINYAI_TEST_SHARED_DIR) + "/golden/stories260K/";
  std::snprintf(name, sizeof name, "greedy-%02d", n);
  *prompt = ReadAll(dir + name + ".prompt");
  std::string expected = ReadAll(dir + name + ".expected");
  if (!expected.empty() && expected.back() == '\n') expected.pop_back();
  return expected;
}

int ReadImage(void* user, uint64_t offset, void* dst, size_t size) {
  const Image* image = static_cast<const Image*>(user);
  if (offset > image->size || size > image->size - offset) return -5;
  std::memcpy(dst, static_cast<const uint8_t*>(image->data) + offset, size);
  return 0;
}

TinyAIArenaStats Stats() {
  TinyAIArenaStats s;
  std::memset(&s, 0, sizeof s);
  s.structSize = sizeof s;
  EXPECT_EQ(tinyaiGetStaticArenaStats(&s), TINYAI_OK) << tinyaiGetLastErrorMessage();
  return s;
}

// Opens the model (from memory, or through the callback when reader) and
// creates the LLM; on failure returns the status with nothing left open.
TinyAIStatus Open(const Image& image, bool reader, const TinyAILLMConfig* cfg, TinyAIMappedModel** model,
                  TinyAILLM** llm) {
  *llm = nullptr;
  *model = reader ? tinyaiOpenMappedModelFromReader(ReadImage, const_cast<Image*>(&image), image.size, nullptr)
                  : tinyaiOpenMappedModelFromMemory(image.data, image.size, nullptr);
  if (!*model) return tinyaiGetLastError();
  const TinyAIStatus s = tinyaiCreateLLM(*model, cfg, llm);
  if (s != TINYAI_OK) {
    tinyaiCloseMappedModel(*model);
    *model = nullptr;
  }
  return s;
}

size_t Estimate(const Image& image, bool reader, const TinyAILLMConfig* cfg) {
  EXPECT_EQ(tinyaiSetStaticArena(g_static, sizeof g_static), TINYAI_OK) << tinyaiGetLastErrorMessage();
  size_t bytes = 0;
  const TinyAIStatus s = reader ? tinyaiEstimateStaticArena(nullptr, image.size, ReadImage,
                                                            const_cast<Image*>(&image), nullptr, cfg, &bytes)
                                : tinyaiEstimateStaticArena(image.data, image.size, nullptr, nullptr, nullptr, cfg,
                                                            &bytes);
  EXPECT_EQ(s, TINYAI_OK) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(Stats().usedBytes, 0u) << "the estimate left memory allocated";
  return bytes;
}

// Runs the three golden prompts in an arena of exactly the estimate: golden
// text, the high-water mark at the estimate, no allocation after creation.
void RunGoldenInExactArena(bool reader, const TinyAILLMConfig* cfg, const std::string& path = StoriesPath()) {
  REQUIRE_MODEL(image, path);
  const size_t estimate = Estimate(image, reader, cfg);
  ASSERT_GT(estimate, 0u);
  ASSERT_EQ(tinyaiSetStaticArena(g_static, estimate), TINYAI_OK) << tinyaiGetLastErrorMessage();
  TinyAIMappedModel* model = nullptr;
  TinyAILLM* llm = nullptr;
  ASSERT_EQ(Open(image, reader, cfg, &model, &llm), TINYAI_OK) << tinyaiGetLastErrorMessage();
  const TinyAIArenaStats created = Stats();
  // What the arena holds is what TinyAI's own accounting says, give or take
  // the arena's headers and alignment; and weights used in place from the
  // image hold nothing (the cache carves no slots for slices it never loads:
  // it once took a second copy of the weights, 1.27 MB of 2.1).
  TinyAIMemoryReport report;
  std::memset(&report, 0, sizeof report);
  report.structSize = sizeof report;
  ASSERT_EQ(tinyaiGetLLMMemoryReport(llm, &report), TINYAI_OK) << tinyaiGetLastErrorMessage();
  EXPECT_GE(created.usedBytes, report.totalBytes);
  EXPECT_LE(created.usedBytes, report.totalBytes + (16u << 10))
      << "the arena holds " << created.usedBytes << " bytes, the memory report accounts for " << report.totalBytes
      << " (weights " << report.weightBytes << ", KV cache " << report.kvCacheBytes << ", activations "
      << report.activationBytes << ", other " << report.otherBytes << ")";
  if (!reader) {
    EXPECT_EQ(report.weightBytes, 0u) << "weights used in place take no memory";
    EXPECT_EQ(report.weightPeakBytes, 0u);
  }
  for (int n = 1; n <= 3; ++n) {
    std::string prompt;
    const std::string expected = Golden(n, &prompt);
    ASSERT_FALSE(expected.empty());
    TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
    gp.steps = 256;
    gp.sampler.temperature = 0.0f;
    static char text[8192];
    size_t len = 0;
    ASSERT_EQ(tinyaiLLMGenerate(llm, prompt.c_str(), &gp, text, sizeof text, &len, nullptr), TINYAI_OK)
        << tinyaiGetLastErrorMessage();
    EXPECT_EQ(std::string(text, len), expected) << "greedy-0" << n;
  }
  const TinyAIArenaStats after = Stats();
  EXPECT_EQ(after.allocations, created.allocations) << "generation allocated";
  EXPECT_EQ(after.usedBytes, created.usedBytes);
  EXPECT_EQ(after.failures, 0u);
  EXPECT_EQ(after.peakBytes, estimate) << "the estimate is the high-water mark, to the byte";
  std::printf("static arena: %zu bytes (%s), %llu allocations, %zu in use after creation\n", estimate,
              reader ? "read callback" : "in-place image", static_cast<unsigned long long>(after.allocations),
              after.usedBytes);
  // Destroying the LLM gives its room back without taking any: the model's
  // cache is not carved again for a cap no runner claims.
  tinyaiClearLastError();
  tinyaiDestroyLLM(llm);
  EXPECT_EQ(Stats().failures, 0u) << "destroying the LLM tried to allocate";
  EXPECT_EQ(Stats().allocations, after.allocations) << "destroying the LLM allocated";
  EXPECT_EQ(tinyaiGetLastError(), TINYAI_OK) << tinyaiGetLastErrorMessage();
  tinyaiCloseMappedModel(model);
  EXPECT_EQ(Stats().usedBytes, 0u) << "closing frees everything";
}

// One byte below the estimate: the open or the create fails, naming the
// arena, before anything runs.
void FailOneByteShort(bool reader, const TinyAILLMConfig* cfg) {
  REQUIRE_STORIES(image);
  const size_t estimate = Estimate(image, reader, cfg);
  ASSERT_EQ(tinyaiSetStaticArena(g_static, estimate - 1), TINYAI_OK) << tinyaiGetLastErrorMessage();
  TinyAIMappedModel* model = nullptr;
  TinyAILLM* llm = nullptr;
  EXPECT_EQ(Open(image, reader, cfg, &model, &llm), TINYAI_ERR_OUT_OF_MEMORY);
  EXPECT_NE(std::strstr(tinyaiGetLastErrorMessage(), "static arena of"), nullptr) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(llm, nullptr);
  EXPECT_EQ(Stats().usedBytes, 0u) << "a failed creation frees what it took";
  EXPECT_GE(Stats().failures, 1u);
}

TinyAILLMConfig Streaming() {
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  cfg.memoryLimit = 1u << 20;  // below stories260K's 1.06 MiB of weights: streamed through the cache
  return cfg;
}

TEST(BaremetalPort, InPlaceImageGoldenInExactEstimate) { RunGoldenInExactArena(false, nullptr); }

// f16 weights (tinyai-convert --dtype f16) reproduce the golden texts too,
// in place and streamed through a read callback under a limit.
TEST(BaremetalPort, F16ImageGoldenInExactEstimate) {
  RunGoldenInExactArena(false, nullptr, TINYAI_TEST_STORIES_F16_TMAI);
}

TEST(BaremetalPort, F16ReadCallbackGoldenInExactEstimate) {
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  // Under the 0.53 MiB of f16 weights plus 0.62 of KV cache: they stream
  // (the least limit is 0.89 MiB since the runner's handle and the
  // allocator's headers are counted).
  cfg.memoryLimit = 960u << 10;
  RunGoldenInExactArena(true, &cfg, TINYAI_TEST_STORIES_F16_TMAI);
}

// A quantized model on the bare-metal port: stories260K's f32 image with the
// default mix applied as it loads (in place, and streamed through a read
// callback under a limit), saved through a write callback into memory, and
// that image opened and run: the same greedy text every way, no heap.
std::string Greedy(TinyAILLM* llm) {
  TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
  gp.maxNewTokens = 48;
  gp.sampler.temperature = 0.0f;
  static char text[4096];
  size_t len = 0;
  EXPECT_EQ(tinyaiLLMGenerate(llm, "Once upon a time", &gp, text, sizeof text, &len, nullptr), TINYAI_OK)
      << tinyaiGetLastErrorMessage();
  return std::string(text, len);
}

int WriteImage(void* user, uint64_t offset, const void* data, size_t size) {
  Image* image = static_cast<Image*>(user);
  if (offset > image->size || size > image->size - offset) return -5;
  std::memcpy(static_cast<uint8_t*>(image->data) + offset, data, size);
  return 0;
}

TEST(BaremetalPort, QuantizedAppliedSavedAndReopened) {
  REQUIRE_STORIES(image);
  ASSERT_EQ(tinyaiSetStaticArena(g_static, sizeof g_static), TINYAI_OK) << tinyaiGetLastErrorMessage();
  TinyAIMixedPrecisionConfig mp;
  tinyaiInitMixedPrecisionConfig(&mp);
  std::string texts[3];
  Image saved;
  for (int way = 0; way < 2; ++way) {
    TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
    // Under the 0.19 MiB of weights, 0.62 of KV cache and 0.19 of tables: they stream.
    if (way == 1) cfg.memoryLimit = 900u << 10;
    TinyAIMappedModel* model = way == 0 ? tinyaiOpenMappedModelFromMemory(image.data, image.size, nullptr)
                                        : tinyaiOpenMappedModelFromReader(ReadImage, &image, image.size, nullptr);
    ASSERT_NE(model, nullptr) << tinyaiGetLastErrorMessage();
    ASSERT_EQ(tinyaiApplyMixedPrecision(model, &mp), TINYAI_OK) << tinyaiGetLastErrorMessage();
    TinyAILLM* llm = nullptr;
    ASSERT_EQ(tinyaiCreateLLM(model, &cfg, &llm), TINYAI_OK) << tinyaiGetLastErrorMessage();
    const TinyAIArenaStats created = Stats();
    texts[way] = Greedy(llm);
    // Slices converted as they load have slots carved for them at creation
    // (in place, the converted ones only): generating allocates nothing.
    EXPECT_EQ(Stats().allocations, created.allocations) << "generation allocated (way " << way << ")";
    tinyaiDestroyLLM(llm);
    if (way == 0) {
      uint64_t size = 0;
      ASSERT_EQ(tinyaiGetSavedModelSize(model, &size), TINYAI_OK);
      saved.size = static_cast<size_t>(size);
      saved.data = std::aligned_alloc(64, (saved.size + 63) / 64 * 64);
      ASSERT_EQ(tinyaiSaveMappedModelTo(model, WriteImage, &saved, nullptr), TINYAI_OK) << tinyaiGetLastErrorMessage();
      EXPECT_EQ(tinyaiSaveMappedModel(model, "out.tmai", nullptr), TINYAI_ERR_UNSUPPORTED);
    }
    tinyaiCloseMappedModel(model);
  }
  EXPECT_EQ(Stats().usedBytes, 0u) << "closing frees everything";
  TinyAIMappedModel* model = nullptr;
  TinyAILLM* llm = nullptr;
  ASSERT_EQ(Open(saved, false, nullptr, &model, &llm), TINYAI_OK) << tinyaiGetLastErrorMessage();
  texts[2] = Greedy(llm);
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
  EXPECT_GT(texts[0].size(), 40u) << texts[0];
  EXPECT_EQ(texts[1], texts[0]);
  EXPECT_EQ(texts[2], texts[0]);
  EXPECT_EQ(Stats().usedBytes, 0u);
}

// The prompt's bound (tinyaiLLMGenerate in <tinyai/llm.h>): the context's
// positions at up to the vocabulary's longest piece each, 512 x 7 = 3,584
// bytes for stories260K. The LLM reserves the memory to encode a prompt that
// long when it is created (it once reserved 4 bytes a position, and a longer
// prompt grew the scratch during generation: past the static arena, past
// memoryLimit). In an arena of exactly the estimate: a prompt at the bound is
// encoded without an allocation (and refused for its tokens: no text that
// long fits 512 positions); the longest prompt that fits (a 7-byte piece
// repeated, 3,576 bytes) is tokenized and runs without one; a byte over the
// bound is refused naming it, before anything is encoded.
constexpr size_t kStoriesPromptBound = 512 * 7;

// The longest piece with a leading space whose repetition stories260K
// encodes as that piece again and again: the longest text that fits the
// context, which is "piece piece ..." (the dummy prefix gives the first
// its space).
std::string LongestFittingPrompt(TinyAILLM* llm, int32_t context) {
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  EXPECT_EQ(tinyaiGetLLMModelInfo(llm, &info), TINYAI_OK) << tinyaiGetLastErrorMessage();
  std::string best, best_piece;
  char piece[256];
  for (int32_t id = 0; id < info.vocabSize; ++id) {
    size_t len = 0;
    if (tinyaiLLMDecodeToken(llm, info.eosId, id, piece, sizeof piece, &len) != TINYAI_OK) continue;
    const std::string p(piece, len);
    if (p.size() < 2 || p[0] != ' ' || p.size() <= best_piece.size()) continue;
    std::string text = p.substr(1);
    for (int32_t i = 2; i < context; ++i) text += p;  // BOS and context - 1 pieces
    static int32_t tokens[1024];
    int32_t count = 0;
    if (tinyaiLLMTokenize(llm, text.c_str(), 1, tokens, 1024, &count) != TINYAI_OK || count != context) continue;
    bool same = true;
    for (int32_t i = 1; i < count; ++i) same = same && tokens[i] == id;
    if (same) {
      best = text;
      best_piece = p;
    }
  }
  return best;
}

TEST(BaremetalPort, PromptAtItsBoundAllocatesNothing) {
  REQUIRE_STORIES(image);
  // The prompts and the LLM's estimate, in an arena with room to spare.
  ASSERT_EQ(tinyaiSetStaticArena(g_static, sizeof g_static), TINYAI_OK) << tinyaiGetLastErrorMessage();
  TinyAIMappedModel* model = nullptr;
  TinyAILLM* llm = nullptr;
  ASSERT_EQ(Open(image, false, nullptr, &model, &llm), TINYAI_OK) << tinyaiGetLastErrorMessage();
  const std::string fits = LongestFittingPrompt(llm, 512);
  TinyAIMemoryReport planned;
  std::memset(&planned, 0, sizeof planned);
  planned.structSize = sizeof planned;
  ASSERT_EQ(tinyaiEstimateLLMMemory(model, nullptr, &planned), TINYAI_OK) << tinyaiGetLastErrorMessage();
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
  ASSERT_EQ(fits.size(), kStoriesPromptBound - 8) << "a 7-byte piece, 511 times, less the dummy prefix's space";
  ASSERT_GT(fits.size(), 512u * 4) << "longer than the 4 bytes a position once reserved";
  std::string at_bound;
  while (at_bound.size() < kStoriesPromptBound) at_bound += "Once upon a time, there was a little girl. ";
  at_bound.resize(kStoriesPromptBound);
  const std::string over = at_bound + "x";

  // In an arena of exactly the estimate.
  const size_t estimate = Estimate(image, false, nullptr);
  ASSERT_EQ(tinyaiSetStaticArena(g_static, estimate), TINYAI_OK) << tinyaiGetLastErrorMessage();
  ASSERT_EQ(Open(image, false, nullptr, &model, &llm), TINYAI_OK) << tinyaiGetLastErrorMessage();
  const TinyAIArenaStats created = Stats();
  // What the estimate, the memory report and the arena say agree.
  TinyAIMemoryReport report;
  std::memset(&report, 0, sizeof report);
  report.structSize = sizeof report;
  ASSERT_EQ(tinyaiGetLLMMemoryReport(llm, &report), TINYAI_OK) << tinyaiGetLastErrorMessage();
  // The estimate counts the tables by the plan, with an allowance for the
  // recording allocator's headers; the report has what was taken.
  EXPECT_LE(report.otherBytes, planned.otherBytes);
  EXPECT_GE(report.otherBytes + 4096, planned.otherBytes);
  EXPECT_LE(report.totalBytes, planned.totalBytes);
  EXPECT_GE(report.totalBytes + 4096, planned.totalBytes);
  EXPECT_GE(created.usedBytes, report.totalBytes);
  EXPECT_LE(created.usedBytes, report.totalBytes + (16u << 10));

  TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
  gp.sampler.temperature = 0.0f;
  static char text[16384];
  size_t len = 0;
  TinyAIGenerateStats stats;
  std::memset(&stats, 0, sizeof stats);
  stats.structSize = sizeof stats;
  // At the bound: encoded in the reserved memory, then refused for its tokens.
  EXPECT_EQ(tinyaiLLMGenerate(llm, at_bound.c_str(), &gp, text, sizeof text, &len, nullptr),
            TINYAI_ERR_CONTEXT_OVERFLOW);
  EXPECT_NE(std::strstr(tinyaiGetLastErrorMessage(), "tokens (BOS included) but the context holds 512"), nullptr)
      << tinyaiGetLastErrorMessage();
  EXPECT_EQ(Stats().failures, 0u) << "encoding a prompt at the bound wanted more memory";
  EXPECT_EQ(Stats().allocations, created.allocations) << "encoding a prompt at the bound allocated";
  // The longest that fits: tokenized and run.
  int32_t count = 0;
  EXPECT_EQ(tinyaiLLMTokenize(llm, fits.c_str(), 1, nullptr, 0, &count), TINYAI_ERR_BUFFER_TOO_SMALL)
      << tinyaiGetLastErrorMessage();
  EXPECT_EQ(count, 512);
  ASSERT_EQ(tinyaiLLMGenerate(llm, fits.c_str(), &gp, text, sizeof text, &len, &stats), TINYAI_OK)
      << tinyaiGetLastErrorMessage();
  EXPECT_EQ(stats.promptTokens, 512);
  EXPECT_EQ(std::string(text, fits.size()), fits);
  EXPECT_EQ(Stats().failures, 0u) << "the longest prompt that fits wanted more memory";
  EXPECT_EQ(Stats().allocations, created.allocations) << "the longest prompt that fits allocated";
  // A byte over: refused, naming the bound.
  EXPECT_EQ(tinyaiLLMGenerate(llm, over.c_str(), &gp, text, sizeof text, &len, nullptr), TINYAI_ERR_CONTEXT_OVERFLOW);
  EXPECT_NE(std::strstr(tinyaiGetLastErrorMessage(), "the prompt is 3585 bytes, more than the 512 tokens of the "
                                                     "context can hold: a prompt holds at most 3584 bytes, the "
                                                     "context's 512 positions at up to 7 bytes each"),
            nullptr)
      << tinyaiGetLastErrorMessage();
  const TinyAIArenaStats after = Stats();
  EXPECT_EQ(after.failures, 0u);
  EXPECT_EQ(after.allocations, created.allocations);
  EXPECT_EQ(after.usedBytes, created.usedBytes);
  EXPECT_EQ(after.peakBytes, estimate);
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
  EXPECT_EQ(Stats().usedBytes, 0u);
}

TEST(BaremetalPort, InPlaceImageOneByteBelowEstimateFails) { FailOneByteShort(false, nullptr); }

TEST(BaremetalPort, ReadCallbackGoldenInExactEstimate) {
  const TinyAILLMConfig cfg = Streaming();
  RunGoldenInExactArena(true, &cfg);
}

TEST(BaremetalPort, ReadCallbackOneByteBelowEstimateFails) {
  const TinyAILLMConfig cfg = Streaming();
  FailOneByteShort(true, &cfg);
}

TEST(BaremetalPort, NoFileSystemNoThreadsNoHeap) {
  // Without an arena: nothing can be allocated, and the message says why.
  REQUIRE_STORIES(image);
  ASSERT_EQ(tinyaiSetStaticArena(nullptr, 0), TINYAI_OK) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(tinyaiOpenMappedModelFromMemory(image.data, image.size, nullptr), nullptr);
  EXPECT_EQ(tinyaiGetLastError(), TINYAI_ERR_OUT_OF_MEMORY);
  EXPECT_NE(std::strstr(tinyaiGetLastErrorMessage(), "tinyaiSetStaticArena"), nullptr) << tinyaiGetLastErrorMessage();
  TinyAIArenaStats s;
  s.structSize = sizeof s;
  EXPECT_EQ(tinyaiGetStaticArenaStats(&s), TINYAI_ERR_MISUSE);

  ASSERT_EQ(tinyaiSetStaticArena(g_static, sizeof g_static), TINYAI_OK);
  EXPECT_EQ(tinyaiOpenMappedModel(TINYAI_TEST_STORIES_TMAI, nullptr), nullptr);
  EXPECT_EQ(tinyaiGetLastError(), TINYAI_ERR_UNSUPPORTED);
  EXPECT_NE(std::strstr(tinyaiGetLastErrorMessage(), "no file system"), nullptr) << tinyaiGetLastErrorMessage();

  // More threads than the port has: planned for, run on the caller's.
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  cfg.threads = 2;
  TinyAIMappedModel* model = nullptr;
  TinyAILLM* llm = nullptr;
  const TinyAIStatus st = Open(image, false, &cfg, &model, &llm);
  if (st == TINYAI_OK) {
    tinyaiDestroyLLM(llm);
    tinyaiCloseMappedModel(model);
  } else {
    EXPECT_EQ(st, TINYAI_ERR_UNSUPPORTED) << tinyaiGetLastErrorMessage();
  }

  // The arena cannot change while it holds something.
  ASSERT_EQ(Open(image, false, nullptr, &model, &llm), TINYAI_OK) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(tinyaiSetStaticArena(g_static, 1024), TINYAI_ERR_MISUSE);
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
  EXPECT_EQ(tinyaiSetStaticArena(g_static + 8, 1024), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiSetStaticArena(nullptr, 1024), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiSetStaticArena(g_static, 32), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiSetClock(nullptr), TINYAI_OK);
}

// This build has no zstd: a compressed model is refused when opened, with
// the reason, and nothing is left allocated.
TEST(BaremetalPort, CompressedModelIsRefusedWithoutZstd) {
  const std::string bytes = ReadAll(TINYAI_TEST_COMPRESSED_TMAI);
  if (bytes.empty()) GTEST_SKIP() << TINYAI_TEST_COMPRESSED_TMAI << " not found (made by make_compressed_model)";
  Image image;
  image.size = bytes.size();
  image.data = std::aligned_alloc(64, (bytes.size() + 63) / 64 * 64);
  std::memcpy(image.data, bytes.data(), bytes.size());
  ASSERT_EQ(tinyaiSetStaticArena(g_static, sizeof g_static), TINYAI_OK) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(tinyaiOpenMappedModelFromMemory(image.data, image.size, nullptr), nullptr);
  EXPECT_EQ(tinyaiGetLastError(), TINYAI_ERR_UNSUPPORTED);
  EXPECT_NE(std::strstr(tinyaiGetLastErrorMessage(), "no zstd codec"), nullptr) << tinyaiGetLastErrorMessage();
  EXPECT_EQ(Stats().usedBytes, 0u);
}

// Under AddressSanitizer the arena is poisoned outside live allocations: an
// overrun into the next block's header is reported as on the heap.
TEST(BaremetalPort, OverrunIsCaughtUnderAddressSanitizer) {
#if TEST_ASAN
  ASSERT_EQ(tinyaiSetStaticArena(g_static, 4096), TINYAI_OK);
  char* a = static_cast<char*>(tinyai::port::AlignedAlloc(16, 20));
  char* b = static_cast<char*>(tinyai::port::AlignedAlloc(16, 20));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  a[19] = 1;  // the last byte asked for is fine
  volatile char* overrun = a + 20;
  EXPECT_DEATH(*overrun = 1, "use-after-poison");
  tinyai::port::AlignedFree(b);
  volatile char* freed = b;
  EXPECT_DEATH(*freed = 1, "use-after-poison");
  tinyai::port::AlignedFree(a);
#else
  GTEST_SKIP() << "needs AddressSanitizer";
#endif
}

}  // namespace
