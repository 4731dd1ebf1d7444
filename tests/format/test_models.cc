#include "format/test_models.h"

#include <sys/stat.h>
#include <time.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/crc32c.h"
#include "common/status.h"
#include "format/tmai_writer.h"

#include <gtest/gtest.h>

namespace tinyai {
namespace testing {

LlamaShape TinyShape() {
  LlamaShape s;
  s.dim = 32;
  s.hidden_dim = 64;
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.vocab_size = 300;
  s.seq_len = 64;
  s.shared_classifier = true;
  s.seed = 7;
  return s;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  if (v) return std::string(v);
  // Defaults compiled in by tests/CMakeLists.txt.
  const std::string n = name;
  if (n == "TINYAI_SHARED_DIR") return TINYAI_TEST_SHARED_DIR;
  if (n == "TINYAI_TEST_DATA") return TINYAI_TEST_DATA_DIR;
  if (n == "TINYAI_STORIES_TMAI") return TINYAI_TEST_STORIES_TMAI;
  if (n == "TINYAI_DEFAULT_MODEL") return TINYAI_TEST_DEFAULT_MODEL;
  if (n == "TINYAI_CORPUS_DIR") return TINYAI_TEST_CORPUS_DIR;
  if (n == "TINYAI_CORPUS_LIST") return TINYAI_TEST_CORPUS_LIST;
  return std::string();
}

bool FileExists(const std::string& path) {
  struct stat st;
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string StoriesTmai() {
  std::string p = Env("TINYAI_STORIES_TMAI");
  return FileExists(p) ? p : std::string();
}

std::string StoriesDir() {
  std::string shared = Env("TINYAI_SHARED_DIR");
  if (shared.empty()) return std::string();
  std::string dir = shared + "/models/stories260K";
  if (!FileExists(dir + "/stories260K.bin") || !FileExists(dir + "/tok512.bin")) return std::string();
  return dir;
}

TempDir::TempDir() {
  std::string base = Env("TINYAI_TEST_DATA");
  if (!base.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(base, ec);
    if (ec) base.clear();
  }
  if (base.empty()) {
    base = Env("TMPDIR");
    if (base.empty()) base = "/tmp";
  }
  std::string templ = base + "/tinyai-test-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data())) path_ = buf.data();
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

TinyAIStatus WriteTinyModel(const std::string& path, const LlamaShape& shape) {
  return WriteSyntheticModel(shape, path.c_str());
}

TinyAIStatus WriteModel(const std::string& path, const ModelOptions& o) {
  const LlamaShape& s = o.shape;
  TmaiWriter w;
  w.set_version_for_testing(o.version_major, o.version_minor);
  AddLlamaMetadata(&w, s, o.architecture, "test model", "tests", nullptr);
  std::vector<std::string> pieces = {"<unk>", "\n<s>\n", "\n</s>\n"};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    pieces.push_back(buf);
  }
  for (int i = 0; static_cast<int32_t>(pieces.size()) < s.vocab_size; ++i) {
    pieces.push_back(" w" + std::to_string(i));
  }
  AddTokenizerMetadata(&w, pieces, std::vector<float>(pieces.size(), 0.0f));
  DeclareLlamaTensors(&w, s, [&o](const std::string& name, std::vector<uint64_t>* shape) {
    if (name == o.override_tensor) *shape = o.override_shape;
  });

  TINYAI_RETURN_IF_ERROR(w.Open(path.c_str()));
  uint64_t rng = s.seed;
  std::vector<float> chunk;
  for (int32_t t = 0;; ++t) {
    uint64_t bytes = w.TensorBytes(t);
    if (bytes == 0) break;
    chunk.resize(static_cast<size_t>(bytes / 4));
    for (float& f : chunk) {
      f = (static_cast<float>(SplitMix64(&rng) >> 40) * (1.0f / 16777216.0f) - 0.5f) * 0.2f;
    }
    TINYAI_RETURN_IF_ERROR(w.Write(chunk.data(), chunk.size() * 4));
  }
  return w.Finish();
}

bool ReadFileBytes(const std::string& path, Bytes* out) {
  out->clear();
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  in.seekg(0, std::ios::end);
  std::streamoff n = in.tellg();
  if (n < 0) return false;
  in.seekg(0, std::ios::beg);
  out->resize(static_cast<size_t>(n));
  if (n > 0) in.read(reinterpret_cast<char*>(out->data()), n);
  return static_cast<bool>(in);
}

bool WriteFileBytes(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return false;
  if (!bytes.empty()) f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  f.close();
  return static_cast<bool>(f);
}

// ---- Structured access -------------------------------------------------------

tmai::Header GetHeader(const Bytes& image) {
  tmai::Header h;
  std::memset(&h, 0, sizeof h);
  std::memcpy(&h, image.data(), image.size() < sizeof h ? image.size() : sizeof h);
  return h;
}

void SetHeader(Bytes* image, const tmai::Header& h) {
  if (image->size() < sizeof h) image->resize(sizeof h);
  std::memcpy(image->data(), &h, sizeof h);
}

namespace {

// Entry index of the table starting at the header field `offset`.
template <class Entry>
size_t EntryAt(const Bytes& image, uint64_t tmai::Header::*offset, uint32_t index) {
  return static_cast<size_t>(GetHeader(image).*offset) + size_t{index} * sizeof(Entry);
}

}  // namespace

tmai::LayerEntry GetLayer(const Bytes& image, uint32_t index) {
  tmai::LayerEntry l;
  std::memcpy(&l, image.data() + EntryAt<tmai::LayerEntry>(image, &tmai::Header::layers_offset, index), sizeof l);
  return l;
}

void SetLayer(Bytes* image, uint32_t index, const tmai::LayerEntry& l) {
  std::memcpy(image->data() + EntryAt<tmai::LayerEntry>(*image, &tmai::Header::layers_offset, index), &l, sizeof l);
}

tmai::TensorEntry GetTensor(const Bytes& image, uint32_t index) {
  tmai::TensorEntry t;
  std::memcpy(&t, image.data() + EntryAt<tmai::TensorEntry>(image, &tmai::Header::tensors_offset, index), sizeof t);
  return t;
}

void SetTensor(Bytes* image, uint32_t index, const tmai::TensorEntry& t) {
  std::memcpy(image->data() + EntryAt<tmai::TensorEntry>(*image, &tmai::Header::tensors_offset, index), &t, sizeof t);
}

int32_t FindTensor(const Bytes& image, const char* name) {
  tmai::Header h = GetHeader(image);
  for (uint32_t i = 0; i < h.tensor_count; ++i) {
    tmai::TensorEntry t = GetTensor(image, i);
    if (std::strncmp(t.name, name, sizeof t.name) == 0) return static_cast<int32_t>(i);
  }
  return -1;
}

void ResealHeaderOnly(Bytes* image) {
  tmai::Header h = GetHeader(*image);
  h.header_crc = 0;
  h.header_crc = Crc32c(0, &h, sizeof h);
  SetHeader(image, h);
}

void Reseal(Bytes* image) {
  tmai::Header h = GetHeader(*image);
  if (h.data_offset >= tmai::kHeaderSize && h.data_offset <= image->size()) {
    h.index_crc = Crc32c(0, image->data() + tmai::kHeaderSize, static_cast<size_t>(h.data_offset - tmai::kHeaderSize));
    SetHeader(image, h);
  }
  ResealHeaderOnly(image);
}

void PatchHeader(Bytes* image, const std::function<void(tmai::Header&)>& edit, bool reseal) {
  tmai::Header h = GetHeader(*image);
  edit(h);
  SetHeader(image, h);
  if (reseal) Reseal(image);
}

void PatchLayer(Bytes* image, uint32_t index, const std::function<void(tmai::LayerEntry&)>& edit, bool reseal) {
  tmai::LayerEntry l = GetLayer(*image, index);
  edit(l);
  SetLayer(image, index, l);
  if (reseal) Reseal(image);
}

void PatchTensor(Bytes* image, uint32_t index, const std::function<void(tmai::TensorEntry&)>& edit, bool reseal) {
  tmai::TensorEntry t = GetTensor(*image, index);
  edit(t);
  SetTensor(image, index, t);
  if (reseal) Reseal(image);
}

uint32_t LoadU32(const Bytes& image, size_t offset) {
  uint32_t v;
  std::memcpy(&v, image.data() + offset, 4);
  return v;
}

void StoreU32(Bytes* image, size_t offset, uint32_t value) { std::memcpy(image->data() + offset, &value, 4); }

void StoreI32(Bytes* image, size_t offset, int32_t value) { std::memcpy(image->data() + offset, &value, 4); }

size_t FindMetaValue(const Bytes& image, const char* key, uint8_t* type) {
  tmai::Header h = GetHeader(image);
  size_t p = static_cast<size_t>(h.metadata_offset);
  const size_t end = p + static_cast<size_t>(h.metadata_size);
  if (end > image.size() || p + 4 > end) return 0;
  uint32_t count = LoadU32(image, p);
  p += 4;
  const size_t key_len = std::strlen(key);
  for (uint32_t i = 0; i < count && p + 3 <= end; ++i) {
    uint16_t kl;
    std::memcpy(&kl, image.data() + p, 2);
    if (p + 3 + kl > end) return 0;
    const bool match = kl == key_len && std::memcmp(image.data() + p + 2, key, key_len) == 0;
    const uint8_t t = image[p + 2 + kl];
    p += 3u + kl;
    if (match) {
      if (type) *type = t;
      return p;
    }
    switch (t) {
      case tmai::kMetaInt: p += 8; break;
      case tmai::kMetaFloat: p += 4; break;
      case tmai::kMetaString: p += 4 + size_t{LoadU32(image, p)}; break;
      case tmai::kMetaFloatArray: p += 4 + 4 * size_t{LoadU32(image, p)}; break;
      case tmai::kMetaStringArray: {
        uint32_t n = LoadU32(image, p);
        p += 4;
        for (uint32_t s = 0; s < n && p + 4 <= end; ++s) p += 4 + size_t{LoadU32(image, p)};
        break;
      }
      default: return 0;
    }
  }
  return 0;
}

AlignedImage::AlignedImage(const uint8_t* data, size_t size) : size_(size) {
  void* p = nullptr;
  // posix_memalign with the exact size: reads past size are heap overflows
  // ASan reports. At least one byte so the pointer is never NULL.
  if (::posix_memalign(&p, 64, size > 0 ? size : 1) == 0) {
    data_ = static_cast<uint8_t*>(p);
    if (size > 0) std::memcpy(data_, data, size);
  }
}

AlignedImage::~AlignedImage() { std::free(data_); }

TinyAICacheStats CacheStats(const TinyAIMappedModel* model) {
  TinyAICacheStats s;
  std::memset(&s, 0, sizeof s);
  s.structSize = sizeof s;
  EXPECT_EQ(tinyaiGetMappedModelCacheStats(model, &s), TINYAI_OK) << LastMessage();
  return s;
}

TinyAIDType TensorDType(const TinyAIMappedModel* model, int tensor) {
  TinyAITensorInfo info;
  info.structSize = sizeof info;
  EXPECT_EQ(tinyaiGetMappedTensorInfo(model, tensor, &info), TINYAI_OK);
  return info.dtype;
}

std::vector<uint8_t> TensorBytes(TinyAIMappedModel* model, int tensor) {
  TinyAITensorInfo info;
  info.structSize = sizeof info;
  EXPECT_EQ(tinyaiGetMappedTensorInfo(model, tensor, &info), TINYAI_OK);
  const uint8_t* layer = static_cast<const uint8_t*>(tinyaiGetLayerWeights(model, info.layer));
  EXPECT_NE(layer, nullptr) << LastMessage();
  if (!layer) return {};
  std::vector<uint8_t> bytes(layer + info.offsetInLayer, layer + info.offsetInLayer + info.decodedSize);
  EXPECT_EQ(tinyaiReleaseLayerWeights(model, info.layer), TINYAI_OK);
  return bytes;
}

void SyntheticAndStoriesTest::SetUp() {
  ASSERT_FALSE(dir_.path().empty());
  synthetic_ = dir_.File("tiny.tmai");
  ASSERT_EQ(WriteTinyModel(synthetic_), TINYAI_OK) << LastMessage();
  stories_ = StoriesTmai();
}

std::vector<std::string> SyntheticAndStoriesTest::Models() const {
  std::vector<std::string> m = {synthetic_};
  if (!stories_.empty()) {
    m.push_back(stories_);
  } else if (SharedRequired()) {
    ADD_FAILURE() << "TINYAI_REQUIRE_SHARED is set and stories260K .tmai not found (TINYAI_STORIES_TMAI='"
                  << Env("TINYAI_STORIES_TMAI") << "'); the convert_stories260K fixture makes it from ../shared";
  } else {
    std::printf("note: stories260K not found (TINYAI_STORIES_TMAI='%s'); synthetic model only\n",
                Env("TINYAI_STORIES_TMAI").c_str());
  }
  return m;
}

namespace {

uint64_t ThreadCpuNanos() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t CpuNanosOf(const std::function<void(int64_t)>& run, int64_t n) {
  const uint64_t t0 = ThreadCpuNanos();
  run(n);
  const uint64_t t = ThreadCpuNanos() - t0;
  return t == 0 ? 1 : t;
}

}  // namespace

::testing::AssertionResult GrowsLinearly(const std::function<void(int64_t n)>& run, int64_t small, int64_t big) {
  run(small);
  uint64_t small_ns = UINT64_MAX;
  for (int i = 0; i < 3; ++i) {
    const uint64_t t = CpuNanosOf(run, small);
    if (t < small_ns) small_ns = t;
  }
  auto exponent = [&](uint64_t big_ns) {
    return std::log(static_cast<double>(big_ns) / static_cast<double>(small_ns)) /
           std::log(static_cast<double>(big) / static_cast<double>(small));
  };
  uint64_t big_ns = CpuNanosOf(run, big);
  if (exponent(big_ns) >= kLinearGrowthBound) {
    const uint64_t again = CpuNanosOf(run, big);
    if (again < big_ns) big_ns = again;
  }
  char detail[160];
  std::snprintf(detail, sizeof detail, "n=%lld: %.1f ms, n=%lld: %.1f ms of CPU time: the cost grows as n^%.2f",
                static_cast<long long>(small), static_cast<double>(small_ns) * 1e-6, static_cast<long long>(big),
                static_cast<double>(big_ns) * 1e-6, exponent(big_ns));
  std::printf("[ growth   ] %s\n", detail);
  if (exponent(big_ns) < kLinearGrowthBound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "not linear: " << detail << " (linear: under n^" << kLinearGrowthBound << ")";
}

}  // namespace testing
}  // namespace tinyai
