// Shared helpers of the C++ tests: small synthetic models in temporary
// folders, file images as byte vectors, and "patches" that change one field of
// the header, a layer or a tensor and then re-seal the header and index
// checksums, so a test reaches the validation step behind the CRCs.
#ifndef TINYAI_TESTS_FORMAT_TEST_MODELS_H_
#define TINYAI_TESTS_FORMAT_TEST_MODELS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "import/model_builder.h"
#include "format/tmai_format.h"
#include "require_shared.h"
#include "tinyai/status.h"
#include "tinyai/utils/mmap_loader.h"

#include <gtest/gtest.h>

namespace tinyai {
namespace testing {

using Bytes = std::vector<uint8_t>;

// dim=32, hidden=64, layers=2, heads=4, kv_heads=2, vocab=300, seq_len=64.
LlamaShape TinyShape();

// A fresh folder under $TINYAI_TEST_DATA (created if needed) or else under
// $TMPDIR; removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes WriteSyntheticModel(shape) to path; returns its status.
TinyAIStatus WriteTinyModel(const std::string& path, const LlamaShape& shape = TinyShape());

// A llama model written with TmaiWriter, with knobs to make it wrong in ways
// the reader accepts but a runner must not.
struct ModelOptions {
  LlamaShape shape = TinyShape();
  std::string architecture = "llama";
  // When set, this tensor gets override_shape instead of its proper shape.
  std::string override_tensor;
  std::vector<uint64_t> override_shape;
  uint16_t version_major = tmai::kVersionMajor;
  uint16_t version_minor = tmai::kVersionMinor;
};
TinyAIStatus WriteModel(const std::string& path, const ModelOptions& options);

// Whole-file I/O (aborts the test through an empty result on failure).
bool ReadFileBytes(const std::string& path, Bytes* out);
bool WriteFileBytes(const std::string& path, const Bytes& bytes);
bool FileExists(const std::string& path);

// Environment variable, else the default tests/CMakeLists.txt compiles in,
// else "".
std::string Env(const char* name);
// $TINYAI_STORIES_TMAI if set and the file exists, else "".
std::string StoriesTmai();
// $TINYAI_SHARED_DIR/models/stories260K if it holds the checkpoint and
// tokenizer, else "".
std::string StoriesDir();

// ---- Structured access to a .tmai image --------------------------------------

tmai::Header GetHeader(const Bytes& image);
void SetHeader(Bytes* image, const tmai::Header& header);
tmai::LayerEntry GetLayer(const Bytes& image, uint32_t index);
void SetLayer(Bytes* image, uint32_t index, const tmai::LayerEntry& layer);
tmai::TensorEntry GetTensor(const Bytes& image, uint32_t index);
void SetTensor(Bytes* image, uint32_t index, const tmai::TensorEntry& tensor);
// Index of the tensor called name, or -1.
int32_t FindTensor(const Bytes& image, const char* name);

// Recomputes index_crc over [header_size, data_offset) (when that range lies
// inside the image) and then header_crc.
void Reseal(Bytes* image);
void ResealHeaderOnly(Bytes* image);

// Edit, then re-seal (unless reseal is false).
void PatchHeader(Bytes* image, const std::function<void(tmai::Header&)>& edit, bool reseal = true);
void PatchLayer(Bytes* image, uint32_t index, const std::function<void(tmai::LayerEntry&)>& edit,
                bool reseal = true);
void PatchTensor(Bytes* image, uint32_t index, const std::function<void(tmai::TensorEntry&)>& edit,
                 bool reseal = true);

// File offset of the value of metadata key (the byte after its type byte), or
// 0 if the key is absent. *type receives the type byte when not null.
size_t FindMetaValue(const Bytes& image, const char* key, uint8_t* type = nullptr);

uint32_t LoadU32(const Bytes& image, size_t offset);
void StoreU32(Bytes* image, size_t offset, uint32_t value);
void StoreI32(Bytes* image, size_t offset, int32_t value);

// A 64-byte aligned copy of bytes (for tinyaiOpenMappedModelFromMemory),
// exactly size bytes long so that ASan catches reads past the end.
class AlignedImage {
 public:
  explicit AlignedImage(const Bytes& bytes) : AlignedImage(bytes.data(), bytes.size()) {}
  AlignedImage(const uint8_t* data, size_t size);
  ~AlignedImage();
  AlignedImage(const AlignedImage&) = delete;
  AlignedImage& operator=(const AlignedImage&) = delete;
  const uint8_t* data() const { return data_; }
  uint8_t* mutable_data() { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// The last TinyAI error message on this thread.
inline std::string LastMessage() { return tinyaiGetLastErrorMessage(); }

// The model's weight cache statistics (a failed call fails the test).
TinyAICacheStats CacheStats(const TinyAIMappedModel* model);
// A tensor's dtype as the model runs it.
TinyAIDType TensorDType(const TinyAIMappedModel* model, int tensor);
// A tensor's loaded bytes, through its whole layer (tinyaiGetLayerWeights).
std::vector<uint8_t> TensorBytes(TinyAIMappedModel* model, int tensor);

inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Whether the cost of run(n) grows linearly with n, judged by the exponent
// log(cost(big) / cost(small)) / log(big / small): 1 for linear work, 2 for
// quadratic; it must stay under kLinearGrowthBound. Costs are the calling
// thread's CPU time, which stops while the thread is preempted, and the
// machine's speed cancels out in the ratio, so the answer holds on a slow or
// busy machine: a test bounds the growth, never a time. run(small) goes once
// unmeasured first (caches, an emulator's translation) and then counts as
// the least of three runs; run(big) runs once, and a second time (the least
// counts) only when the first grew too fast: a first run pays the page
// faults of its new memory. Prints the times. Make big / small 100 or more:
// the cost of linear work per item grows where its memory outgrows the caches,
// which a wide range spreads over more of the exponent's denominator.
::testing::AssertionResult GrowsLinearly(const std::function<void(int64_t n)>& run, int64_t small, int64_t big);
// Linear work measured up to n^1.38 over a 128x range on a loaded machine
// (up to n^1.7 over 16x: a hash set of 2^19 strings costs 4-6x more per
// string than one of 2^14); the quadratic scans these tests replaced n^1.9
// to n^2.0.
constexpr double kLinearGrowthBound = 1.75;

// A fixture with the models runner tests use: a small synthetic llama model
// (always written) and stories260K (when converted; REQUIRE_STORIES() skips
// without it, or fails under TINYAI_REQUIRE_SHARED).
class SyntheticAndStoriesTest : public ::testing::Test {
 protected:
  void SetUp() override;
  // The synthetic model, and stories260K when it exists (a note is printed
  // otherwise, and the test fails under TINYAI_REQUIRE_SHARED).
  std::vector<std::string> Models() const;

  TempDir dir_;
  std::string synthetic_;
  std::string stories_;
};

}  // namespace testing
}  // namespace tinyai

// In a SyntheticAndStoriesTest: skips the test when stories260K is absent
// (fails under TINYAI_REQUIRE_SHARED).
#define REQUIRE_STORIES()                                                                                    \
  do {                                                                                                       \
    if (stories_.empty()) {                                                                                  \
      TINYAI_SKIP_WITHOUT_SHARED("stories260K .tmai not found (TINYAI_STORIES_TMAI='"                        \
                                 << ::tinyai::testing::Env("TINYAI_STORIES_TMAI")                            \
                                 << "'); the convert_stories260K fixture makes it from ../shared");          \
    }                                                                                                        \
  } while (0)

// Expects the last error to be code with a message containing needle.
#define EXPECT_LAST_ERROR(code, needle)                                                             \
  do {                                                                                              \
    EXPECT_EQ(tinyaiGetLastError(), (code)) << tinyaiStatusString(tinyaiGetLastError()) << ": "     \
                                            << ::tinyai::testing::LastMessage();                    \
    EXPECT_TRUE(::tinyai::testing::Contains(::tinyai::testing::LastMessage(), (needle)))            \
        << "lacks '" << (needle) << "': " << ::tinyai::testing::LastMessage();                      \
  } while (0)

#endif  // TINYAI_TESTS_FORMAT_TEST_MODELS_H_
