// The weight cache (src/loader/weight_cache.h) through the loader API and the
// model's internal row-slice interface: the cap holds whatever the access
// order, weights read through the cache equal the file's after evictions and
// reloads, what is evicted (plain LRU, priorities, pins, small layers), the
// decode cycle (LRU's worst case against the adaptive policy), the counters,
// prefetch with worker threads, and closing a model twice.
//
// Also: compressed (zstd) models and images in memory under the cap, a
// corrupt tensor failing cleanly, and the row slices in a huge-page region
// when they all fit.
//
// Deterministic: every test but PrefetchWithWorkers runs without prefetch
// threads, and that one waits for the counters to show the prefetches done
// (its verdicts follow from the counts, not from how long they took).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "format/test_models.h"
#include "loader/cache_policy.h"
#include "loader/mapped_model.h"
#include "port/port.h"
#include "tinyai/tinyai.h"
#include "tinyai/utils/mmap_loader.h"

namespace {

namespace tt = tinyai::testing;
using tt::Bytes;
using tt::LastMessage;

// dim=32, hidden=64, 6 slices, vocab 300: layers 0 (embedding, 38400 bytes)
// and 1..6 (slices, ~37 KB) each take 10 pages; layer 7 (output: the final
// norm only, 128 bytes) is smaller than the default minLayerCacheSize.
tinyai::LlamaShape CacheShape() {
  tinyai::LlamaShape s = tt::TinyShape();
  s.layers = 6;
  s.seq_len = 16;
  s.seed = 11;
  return s;
}

TinyAIMmapConfig Config(size_t cap, bool adaptive, size_t row_slice = 4096) {
  TinyAIMmapConfig c = tinyaiCreateDefaultMmapConfig();
  c.maxCacheSize = cap;
  c.adaptiveCaching = adaptive;
  c.prefetchEnabled = false;
  c.prefetchThreads = 0;
  c.rowSliceSize = row_slice;
  return c;
}

TinyAICacheStats Stats(const TinyAIMappedModel* m) { return tt::CacheStats(m); }

uint64_t LayerBytes(const TinyAIMappedModel* m, int layer) {
  return m->cache().EntryBytes(m->cache().LayerEntry(layer));
}

uint64_t MaxSliceBytes(const TinyAIMappedModel* m) {
  uint64_t b = 0;
  for (int32_t i = 0; i < m->slices().slice_count(); ++i) b = std::max(b, m->cache().EntryBytes(i));
  return b;
}

uint64_t MaxLayerBytes(const TinyAIMappedModel* m) {
  uint64_t b = 0;
  for (int i = 0; i < m->layer_count(); ++i) b = std::max(b, LayerBytes(m, i));
  return b;
}

// Every tensor's decoded bytes as an uncapped open of path reads them (and,
// for an uncompressed file, as the file holds them).
void LoadReference(const std::string& path, std::vector<Bytes>* ref) {
  Bytes image;
  ASSERT_TRUE(tt::ReadFileBytes(path, &image));
  TinyAIMmapConfig cfg = Config(0, true);
  TinyAIMappedModel* m = tinyaiOpenMappedModel(path.c_str(), &cfg);
  ASSERT_NE(m, nullptr) << LastMessage();
  ref->assign(static_cast<size_t>(tinyaiGetMappedTensorCount(m)), Bytes());
  for (int l = 0; l < tinyaiGetMappedLayerCount(m); ++l) {
    const TinyAILayerDescriptor* d = tinyaiGetLayerDescriptor(m, l);
    const uint8_t* w = static_cast<const uint8_t*>(tinyaiGetLayerWeights(m, l));
    ASSERT_NE(w, nullptr) << LastMessage();
    for (int t = d->firstTensor; t < d->firstTensor + d->tensorCount; ++t) {
      TinyAITensorInfo info;
      std::memset(&info, 0, sizeof info);
      info.structSize = sizeof info;
      ASSERT_EQ(tinyaiGetMappedTensorInfo(m, t, &info), TINYAI_OK);
      Bytes& r = (*ref)[static_cast<size_t>(t)];
      r.assign(w + info.offsetInLayer, w + info.offsetInLayer + info.decodedSize);
      if (info.codec == TINYAI_CODEC_NONE) {
        ASSERT_LE(d->fileOffset + info.offsetInLayer + info.decodedSize, image.size());
        ASSERT_EQ(std::memcmp(r.data(), image.data() + d->fileOffset + info.offsetInLayer, r.size()), 0)
            << "uncapped read of " << info.name << " differs from the file";
      }
    }
    ASSERT_EQ(tinyaiReleaseLayerWeights(m, l), TINYAI_OK);
  }
  tinyaiCloseMappedModel(m);
}

::testing::AssertionResult LayerMatches(const TinyAIMappedModel* m, int layer, const uint8_t* w,
                                        const std::vector<Bytes>& ref) {
  if (!w) return ::testing::AssertionFailure() << "layer " << layer << ": NULL weights: " << LastMessage();
  const TinyAILayerDescriptor* d = tinyaiGetLayerDescriptor(m, layer);
  for (int t = d->firstTensor; t < d->firstTensor + d->tensorCount; ++t) {
    TinyAITensorInfo info;
    std::memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    if (tinyaiGetMappedTensorInfo(m, t, &info) != TINYAI_OK) return ::testing::AssertionFailure() << LastMessage();
    const Bytes& r = ref[static_cast<size_t>(t)];
    if (r.size() != info.decodedSize || std::memcmp(w + info.offsetInLayer, r.data(), r.size()) != 0) {
      return ::testing::AssertionFailure() << "layer " << layer << ": tensor " << info.name << " differs";
    }
  }
  return ::testing::AssertionSuccess();
}

// Compares every span of every tensor that lives in slice b (base = the
// slice's first byte).
::testing::AssertionResult SliceMatches(const TinyAIMappedModel* m, int32_t b, const uint8_t* base,
                                        const std::vector<Bytes>& ref) {
  if (!base) return ::testing::AssertionFailure() << "slice " << b << ": NULL data";
  const tinyai::RowSliceTable& table = m->slices();
  const tinyai::tmai::LayerEntry& layer = m->reader().layers()[static_cast<size_t>(table.slice(b).layer)];
  int spans = 0;
  for (uint32_t t = layer.first_tensor; t < layer.first_tensor + layer.tensor_count; ++t) {
    const int32_t ti = static_cast<int32_t>(t);
    for (const tinyai::TensorSpan& s : table.spans(ti)) {
      if (s.slice != b) continue;
      ++spans;
      const uint64_t rb = table.row_bytes(ti);
      const Bytes& r = ref[t];
      if ((s.row_end * rb) > r.size() ||
          std::memcmp(base + s.offset, r.data() + s.row_begin * rb, static_cast<size_t>((s.row_end - s.row_begin) * rb)) !=
              0) {
        return ::testing::AssertionFailure() << "slice " << b << ": rows " << s.row_begin << ".." << s.row_end
                                             << " of tensor " << t << " differ";
      }
    }
  }
  if (spans == 0) return ::testing::AssertionFailure() << "slice " << b << " holds no rows";
  return ::testing::AssertionSuccess();
}

// Rows got through AcquireRows: `rows` rows of tensor from `row`.
::testing::AssertionResult RowsMatch(const TinyAIMappedModel* m, int32_t tensor, uint64_t row, const uint8_t* p,
                                     uint64_t rows, const std::vector<Bytes>& ref) {
  const uint64_t rb = m->slices().row_bytes(tensor);
  const Bytes& r = ref[static_cast<size_t>(tensor)];
  if (rows == 0 || (row + rows) * rb > r.size()) {
    return ::testing::AssertionFailure() << "tensor " << tensor << " row " << row << ": bad row count " << rows;
  }
  if (std::memcmp(p, r.data() + row * rb, static_cast<size_t>(rows * rb)) != 0) {
    return ::testing::AssertionFailure() << "tensor " << tensor << " rows " << row << "+" << rows << " differ";
  }
  return ::testing::AssertionSuccess();
}

class WeightCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    plain_ = dir_.File("plain.tmai");
    ASSERT_EQ(tinyai::WriteSyntheticModel(CacheShape(), plain_.c_str()), TINYAI_OK) << LastMessage();
    ASSERT_NO_FATAL_FAILURE(LoadReference(plain_, &ref_));
  }
  void TearDown() override {
    for (TinyAIMappedModel* m : open_) tinyaiCloseMappedModel(m);
  }

  TinyAIMappedModel* Open(const TinyAIMmapConfig& cfg, const std::string& path = std::string(), bool memory = false) {
    const std::string& file = path.empty() ? plain_ : path;
    TinyAIMappedModel* m = nullptr;
    if (memory) {
      Bytes bytes;
      EXPECT_TRUE(tt::ReadFileBytes(file, &bytes));
      images_.push_back(std::make_unique<tt::AlignedImage>(bytes));
      m = tinyaiOpenMappedModelFromMemory(images_.back()->data(), images_.back()->size(), &cfg);
    } else {
      m = tinyaiOpenMappedModel(file.c_str(), &cfg);
    }
    EXPECT_NE(m, nullptr) << LastMessage();
    if (m) open_.push_back(m);
    return m;
  }
  // Gets and releases layer; 1 if the get hit, 0 if it missed, -1 (and a
  // test failure) if it failed or the weights are wrong.
  int Touch(TinyAIMappedModel* m, int layer) {
    const uint64_t hits = Stats(m).hits;
    const uint8_t* w = static_cast<const uint8_t*>(tinyaiGetLayerWeights(m, layer));
    if (!w) {
      ADD_FAILURE() << "get layer " << layer << ": " << LastMessage();
      return -1;
    }
    EXPECT_TRUE(LayerMatches(m, layer, w, ref_));
    EXPECT_EQ(tinyaiReleaseLayerWeights(m, layer), TINYAI_OK) << LastMessage();
    EXPECT_TRUE(m->cache().CheckInvariants());
    return Stats(m).hits > hits ? 1 : 0;
  }

  tt::TempDir dir_;
  std::string plain_;
  std::vector<Bytes> ref_;
  std::vector<std::unique_ptr<tt::AlignedImage>> images_;  // outlive the models (closed in TearDown)
  std::vector<TinyAIMappedModel*> open_;
};

// ---- The cap ------------------------------------------------------------------

struct CapVariant {
  bool zstd;
  bool adaptive;
  size_t row_slice;
  bool memory;  // opened from an image in memory (uncompressed weights used in place)
  int direct = 0;  // TinyAIMmapConfig.directReads
};

std::string Name(const CapVariant& v) {
  return std::string(v.zstd ? "Zstd" : "Plain") + (v.adaptive ? "Adaptive" : "Lru") + std::to_string(v.row_slice) +
         (v.memory ? "Memory" : "") + (v.direct > 0 ? "Direct" : v.direct < 0 ? "Buffered" : "");
}
// Test names and ctest names print this (not the struct's padding bytes).
void PrintTo(const CapVariant& v, std::ostream* os) { *os << Name(v); }

class WeightCacheCapTest : public WeightCacheTest, public ::testing::WithParamInterface<CapVariant> {};

// Layers and row slices touched forwards, backwards, strided and at random,
// alone and two at a time: usage never exceeds the cap, the invariants hold,
// and every byte read through the cache is the file's.
TEST_P(WeightCacheCapTest, CapHoldsAndWeightsMatchAfterEvictions) {
  const CapVariant v = GetParam();
  std::string path = plain_;
  if (v.zstd) {
    path = dir_.File("zstd.tmai");
    tinyai::WriteOptions zstd;
    zstd.codec = TINYAI_CODEC_ZSTD;
    ASSERT_EQ(tinyai::WriteSyntheticModel(CacheShape(), path.c_str(), zstd), TINYAI_OK) << LastMessage();
    std::vector<Bytes> packed_ref;
    ASSERT_NO_FATAL_FAILURE(LoadReference(path, &packed_ref));
    ASSERT_EQ(packed_ref, ref_) << "the compressed twin decodes to the same weights";
  }
  // Size the cap from the model: two layers and three of the largest slices,
  // minus a byte (not a page multiple) - far below the model.
  TinyAIMmapConfig probe_cfg = Config(0, v.adaptive, v.row_slice);
  TinyAIMappedModel* probe = Open(probe_cfg, path, v.memory);
  ASSERT_NE(probe, nullptr);
  const uint64_t layer_max = MaxLayerBytes(probe), slice_max = MaxSliceBytes(probe);
  uint64_t everything = 0;
  for (int l = 0; l < probe->layer_count(); ++l) everything += LayerBytes(probe, l);
  for (int32_t b = 0; b < probe->slices().slice_count(); ++b) everything += probe->cache().EntryBytes(b);
  // An uncompressed image is used in place: nothing to hold, any cap works.
  const bool in_place = v.memory && !v.zstd;
  const size_t cap = in_place ? 1 : static_cast<size_t>(2 * layer_max + 3 * slice_max - 1);
  if (in_place) {
    ASSERT_EQ(everything, 0u) << "an uncompressed image in memory costs nothing";
  } else {
    ASSERT_GT(everything, 2 * static_cast<uint64_t>(cap)) << "the model must not fit";
  }

  TinyAIMmapConfig cfg = Config(cap, v.adaptive, v.row_slice);
  cfg.directReads = v.direct;
  TinyAIMappedModel* m = Open(cfg, path, v.memory);
  ASSERT_NE(m, nullptr);
  // Streaming under the cap reads past the page cache unless told not to,
  // where the file system has direct reads (a file, not an image).
  const bool can_direct = m->source().direct_align() > 0;
  EXPECT_EQ(m->source().direct_now(), can_direct && v.direct >= 0);
  if (v.memory || v.direct < 0) EXPECT_FALSE(can_direct);
  const int layers = m->layer_count();
  const int32_t slices = m->slices().slice_count();
  const int tensors = tinyaiGetMappedTensorCount(m);
  ASSERT_GT(slices, layers);
  std::printf("[ cap      ] %s: %d layers, %d slices, cap %zu bytes (model %llu)\n", Name(v).c_str(), layers,
              slices, cap, static_cast<unsigned long long>(everything));

  auto check_cap = [&](const char* what) {
    const size_t usage = tinyaiGetMappedModelMemoryUsage(m);
    EXPECT_LE(usage, cap) << what;
    EXPECT_EQ(Stats(m).heldBytes, usage) << what;
    EXPECT_TRUE(m->cache().CheckInvariants()) << what;
    return usage <= cap && m->cache().CheckInvariants();
  };
  auto layer = [&](int l) {
    const uint8_t* w = static_cast<const uint8_t*>(tinyaiGetLayerWeights(m, l));
    EXPECT_TRUE(LayerMatches(m, l, w, ref_));
    if (w) EXPECT_EQ(tinyaiReleaseLayerWeights(m, l), TINYAI_OK) << LastMessage();
    return check_cap("after a layer");
  };
  auto slice = [&](int32_t b) {
    const uint8_t* base = nullptr;
    EXPECT_EQ(m->cache().Acquire(b, &base), TINYAI_OK) << LastMessage();
    EXPECT_TRUE(SliceMatches(m, b, base, ref_));
    if (base) EXPECT_EQ(m->cache().Release(b), TINYAI_OK) << LastMessage();
    return check_cap("after a slice");
  };
  auto rows = [&](int32_t t, uint64_t row) {
    const uint8_t* p = nullptr;
    uint64_t n = 0;
    int32_t b = -1;
    EXPECT_EQ(m->AcquireRows(t, row, &p, &n, &b), TINYAI_OK) << LastMessage();
    if (!p) return false;
    EXPECT_TRUE(RowsMatch(m, t, row, p, n, ref_));
    EXPECT_EQ(m->ReleaseSlice(b), TINYAI_OK) << LastMessage();
    return check_cap("after rows");
  };

  for (int l = 0; l < layers; ++l) ASSERT_TRUE(layer(l)) << "layers forward, layer " << l;
  for (int l = layers - 1; l >= 0; --l) ASSERT_TRUE(layer(l)) << "layers backward, layer " << l;
  for (int32_t b = 0; b < slices; ++b) ASSERT_TRUE(slice(b)) << "slices forward, slice " << b;
  for (int32_t b = slices - 1; b >= 0; --b) ASSERT_TRUE(slice(b)) << "slices backward, slice " << b;
  for (int32_t i = 0, b = 0; i < 2 * slices; ++i, b = (b + 7) % slices) ASSERT_TRUE(slice(b)) << "strided, slice " << b;
  // Layers and their own slices interleaved (the same bytes held twice).
  for (int l = 0; l < layers; ++l) {
    ASSERT_TRUE(layer(l));
    for (int32_t b = m->slices().layer_first_slice(l); b < m->slices().layer_end_slice(l); ++b) ASSERT_TRUE(slice(b));
  }
  std::mt19937 rng(20240601u + (v.zstd ? 1u : 0u) + (v.adaptive ? 2u : 0u));
  for (int i = 0; i < 1500; ++i) {
    SCOPED_TRACE("random op " + std::to_string(i));
    switch (rng() % 4) {
      case 0:
        ASSERT_TRUE(layer(static_cast<int>(rng() % static_cast<unsigned>(layers))));
        break;
      case 1:
        ASSERT_TRUE(slice(static_cast<int32_t>(rng() % static_cast<unsigned>(slices))));
        break;
      case 2: {
        const int32_t t = static_cast<int32_t>(rng() % static_cast<unsigned>(tensors));
        ASSERT_TRUE(rows(t, rng() % m->slices().rows(t)));
        break;
      }
      default: {
        // Two at once: a pinned layer stays put while slices come and go.
        const int l = static_cast<int>(rng() % static_cast<unsigned>(layers));
        const uint8_t* w = static_cast<const uint8_t*>(tinyaiGetLayerWeights(m, l));
        ASSERT_TRUE(LayerMatches(m, l, w, ref_));
        for (int k = 0; k < 4; ++k) ASSERT_TRUE(slice(static_cast<int32_t>(rng() % static_cast<unsigned>(slices))));
        ASSERT_TRUE(LayerMatches(m, l, w, ref_)) << "a pinned layer changed while pinned";
        ASSERT_EQ(tinyaiReleaseLayerWeights(m, l), TINYAI_OK);
        ASSERT_TRUE(check_cap("after two at once"));
      }
    }
  }
  const TinyAICacheStats s = Stats(m);
  if (in_place) {
    EXPECT_EQ(s.peakHeldBytes, 0u);
  } else {
    EXPECT_GT(s.evictions, 0u);
  }
  EXPECT_LE(s.peakHeldBytes, cap);
  EXPECT_EQ(s.capacity, cap);
  EXPECT_LE(s.bytesReadDirect, s.bytesRead);
  // Uncompressed slices whose memory has room for a direct read's blocks
  // (slices of at least 8 times that room, and those that share their
  // slots) are read directly; compressed frames, whole layers and small
  // slices of their own size through the page cache.
  const uint64_t room = 2 * static_cast<uint64_t>(m->source().direct_align());
  bool large = false;
  for (int32_t b = 0; b < slices; ++b) large = large || m->slices().slice(b).decoded_size >= 8 * room;
  if (can_direct && v.direct >= 0 && !v.zstd && large) EXPECT_GT(s.bytesReadDirect, 0u);
  if (!can_direct || v.direct < 0) EXPECT_EQ(s.bytesReadDirect, 0u);
  std::printf("[ cap      ] %llu of %llu bytes read directly\n", static_cast<unsigned long long>(s.bytesReadDirect),
              static_cast<unsigned long long>(s.bytesRead));
  EXPECT_LE(s.residentBytes, s.heldBytes);
  std::printf("[ cap      ] hits %llu, misses %llu, evictions %llu, peak %llu bytes\n",
              static_cast<unsigned long long>(s.hits), static_cast<unsigned long long>(s.misses),
              static_cast<unsigned long long>(s.evictions), static_cast<unsigned long long>(s.peakHeldBytes));
}

INSTANTIATE_TEST_SUITE_P(Variants, WeightCacheCapTest,
                         ::testing::Values(CapVariant{false, false, 4096, false}, CapVariant{false, true, 4096, false},
                                           CapVariant{false, true, 5000, false}, CapVariant{false, false, 1000, false},
                                           CapVariant{true, false, 4096, false}, CapVariant{true, true, 4096, false},
                                           CapVariant{true, true, 4096, true}, CapVariant{false, false, 4096, true},
                                           CapVariant{false, true, 4096, false, -1},
                                           CapVariant{false, true, 1000, false, 1},
                                           CapVariant{false, true, 20000, false, 1},
                                           CapVariant{false, false, 20000, false}),
                         [](const ::testing::TestParamInfo<CapVariant>& p) { return Name(p.param); });

// ---- What is evicted ------------------------------------------------------------

// Layers 1..6 (transformer blocks) all hold the same bytes; a cap of three of
// them makes the fourth evict one.
class EvictionTest : public WeightCacheTest {
 protected:
  void SetUp() override {
    WeightCacheTest::SetUp();
    TinyAIMmapConfig cfg = Config(0, false);
    TinyAIMappedModel* probe = Open(cfg);
    ASSERT_NE(probe, nullptr);
    h_ = LayerBytes(probe, 1);
    for (int l = 1; l <= CacheShape().layers; ++l) ASSERT_EQ(LayerBytes(probe, l), h_);
  }
  uint64_t h_ = 0;
};

TEST_F(EvictionTest, PlainLruEvictsTheLeastRecentlyUsed) {
  TinyAIMappedModel* m = Open(Config(static_cast<size_t>(3 * h_), false));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(Touch(m, 1), 0);
  EXPECT_EQ(Touch(m, 2), 0);
  EXPECT_EQ(Touch(m, 3), 0);
  EXPECT_EQ(Touch(m, 1), 1);  // recency now 2 < 3 < 1
  EXPECT_EQ(Touch(m, 4), 0);  // evicts 2
  EXPECT_EQ(Stats(m).evictions, 1u);
  EXPECT_EQ(Touch(m, 3), 1);
  EXPECT_EQ(Touch(m, 1), 1);
  EXPECT_EQ(Touch(m, 4), 1);
  EXPECT_EQ(Touch(m, 2), 0) << "layer 2 was the least recently used";
  EXPECT_EQ(Stats(m).evictions, 2u);
  EXPECT_EQ(tinyaiGetMappedModelMemoryUsage(m), 3 * h_);
}

TEST_F(EvictionTest, HigherPriorityKeepsALayerLonger) {
  for (bool adaptive : {false, true}) {
    SCOPED_TRACE(adaptive ? "adaptive" : "plain LRU");
    // Default priority: layer 1, the least recently used, goes first.
    TinyAIMappedModel* base = Open(Config(static_cast<size_t>(3 * h_), adaptive));
    ASSERT_NE(base, nullptr);
    for (int l : {1, 2, 3, 4}) EXPECT_EQ(Touch(base, l), 0);
    EXPECT_EQ(Touch(base, 1), 0) << "without a priority layer 1 is evicted";

    TinyAIMappedModel* m = Open(Config(static_cast<size_t>(3 * h_), adaptive));
    ASSERT_NE(m, nullptr);
    ASSERT_EQ(tinyaiSetLayerPriority(m, 1, 8.0f), TINYAI_OK);
    for (int l : {1, 2, 3, 4}) EXPECT_EQ(Touch(m, l), 0);
    EXPECT_EQ(Touch(m, 1), 1) << "priority 8 keeps layer 1 over more recent layers";
    for (int l : {5, 6, 2, 3}) EXPECT_EQ(Touch(m, l), 0);
    EXPECT_EQ(Touch(m, 1), 1) << "and keeps it while four other layers cycle through";

    // Priority 0: evicted first even when it is the most recently used.
    TinyAIMappedModel* z = Open(Config(static_cast<size_t>(3 * h_), adaptive));
    ASSERT_NE(z, nullptr);
    EXPECT_EQ(Touch(z, 2), 0);
    EXPECT_EQ(Touch(z, 3), 0);
    ASSERT_EQ(tinyaiSetLayerPriority(z, 1, 0.0f), TINYAI_OK);
    EXPECT_EQ(Touch(z, 1), 0);
    EXPECT_EQ(Touch(z, 4), 0);
    EXPECT_EQ(Touch(z, 2), 1);
    EXPECT_EQ(Touch(z, 3), 1);
    EXPECT_EQ(Touch(z, 4), 1);
    EXPECT_EQ(Touch(z, 1), 0) << "priority 0 went first";
  }
}

TEST_F(EvictionTest, PinnedLayerIsNeverEvicted) {
  const size_t cap = static_cast<size_t>(3 * h_);
  TinyAIMappedModel* m = Open(Config(cap, false));
  ASSERT_NE(m, nullptr);
  const void* pinned = tinyaiGetLayerWeights(m, 1);
  ASSERT_NE(pinned, nullptr) << LastMessage();
  for (int round = 0; round < 3; ++round) {
    for (int l : {2, 3, 4, 5, 6, 0}) EXPECT_EQ(Touch(m, l), 0) << "round " << round << " layer " << l;
  }
  EXPECT_GE(Stats(m).evictions, 16u);
  EXPECT_EQ(Touch(m, 1), 1) << "the pinned layer stayed";
  const void* again = tinyaiGetLayerWeights(m, 1);
  EXPECT_EQ(again, pinned) << "a pinned layer does not move";
  EXPECT_TRUE(LayerMatches(m, 1, static_cast<const uint8_t*>(again), ref_));
  EXPECT_EQ(tinyaiReleaseLayerWeights(m, 1), TINYAI_OK);
  EXPECT_EQ(tinyaiReleaseLayerWeights(m, 1), TINYAI_OK);

  // Everything pinned: the fourth layer cannot be made room for.
  for (int l : {1, 2, 3}) ASSERT_NE(tinyaiGetLayerWeights(m, l), nullptr) << LastMessage();
  const TinyAICacheStats before = Stats(m);
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiGetLayerWeights(m, 4), nullptr);
  EXPECT_LAST_ERROR(TINYAI_ERR_RESOURCE_EXHAUSTED, "layer 4 ('block.3')");
  EXPECT_LAST_ERROR(TINYAI_ERR_RESOURCE_EXHAUSTED, std::to_string(h_) + " bytes");
  EXPECT_LAST_ERROR(TINYAI_ERR_RESOURCE_EXHAUSTED, "cap of " + std::to_string(cap) + " bytes");
  EXPECT_LAST_ERROR(TINYAI_ERR_RESOURCE_EXHAUSTED, "pinned");
  EXPECT_EQ(tinyaiGetMappedModelMemoryUsage(m), cap);
  EXPECT_TRUE(m->cache().CheckInvariants());
  EXPECT_EQ(Stats(m).evictions, before.evictions) << "a failed get evicts nothing pinned";
  EXPECT_EQ(tinyaiReleaseLayerWeights(m, 4), TINYAI_ERR_MISUSE) << "the failed get left no pin";
  // A row slice cannot get in either.
  const uint8_t* p = nullptr;
  uint64_t n = 0;
  int32_t b = -1;
  tinyaiClearLastError();
  EXPECT_EQ(m->AcquireRows(0, 0, &p, &n, &b), TINYAI_ERR_RESOURCE_EXHAUSTED);
  EXPECT_LAST_ERROR(TINYAI_ERR_RESOURCE_EXHAUSTED, "row slice 0");
  // Unpinning one makes room again.
  EXPECT_EQ(tinyaiReleaseLayerWeights(m, 2), TINYAI_OK);
  EXPECT_EQ(Touch(m, 4), 0);
  EXPECT_EQ(Touch(m, 2), 0) << "layer 2 was the one evicted";
  for (int l : {1, 3}) EXPECT_EQ(tinyaiReleaseLayerWeights(m, l), TINYAI_OK);
  EXPECT_TRUE(m->cache().CheckInvariants());
}

TEST_F(EvictionTest, LayerLargerThanTheCapIsResourceExhausted) {
  const size_t cap = static_cast<size_t>(h_ - 1);
  TinyAIMappedModel* m = Open(Config(cap, false));
  ASSERT_NE(m, nullptr);
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiGetLayerWeights(m, 2), nullptr);
  EXPECT_LAST_ERROR(TINYAI_ERR_RESOURCE_EXHAUSTED, "layer 2 ('block.1')");
  EXPECT_LAST_ERROR(TINYAI_ERR_RESOURCE_EXHAUSTED, std::to_string(h_) + " bytes");
  EXPECT_LAST_ERROR(TINYAI_ERR_RESOURCE_EXHAUSTED, std::to_string(cap) + " bytes");
  EXPECT_EQ(tinyaiGetMappedModelMemoryUsage(m), 0u);
  // Its row slices still fit.
  const uint8_t* p = nullptr;
  uint64_t n = 0;
  int32_t b = -1;
  int index = -1;
  ASSERT_EQ(tinyaiFindMappedTensor(m, "blk.1.ffn_up", &index), TINYAI_OK);
  ASSERT_EQ(m->AcquireRows(index, 5, &p, &n, &b), TINYAI_OK) << LastMessage();
  EXPECT_TRUE(RowsMatch(m, index, 5, p, n, ref_));
  EXPECT_EQ(m->ReleaseSlice(b), TINYAI_OK);
}

// A corrupt tensor: every load that touches it (its layer, its row slices, a
// prefetch) fails with TINYAI_ERR_CHECKSUM naming it, again on every retry;
// the failed load gives its memory back, pins nothing, and the rest of the
// model keeps working.
TEST_F(WeightCacheTest, CorruptTensorFailsCleanly) {
  for (bool zstd : {false, true}) {
    SCOPED_TRACE(zstd ? "zstd" : "plain");
    std::string good = plain_;
    const char* name = "blk.1.attn_q";
    if (zstd) {
      good = dir_.File("zstd.tmai");
      tinyai::WriteOptions options;
      options.codec = TINYAI_CODEC_ZSTD;
      ASSERT_EQ(tinyai::WriteSyntheticModel(CacheShape(), good.c_str(), options), TINYAI_OK) << LastMessage();
      name = "blk.1.ffn_norm";  // a norm (all ones) always compresses
    }
    Bytes image;
    ASSERT_TRUE(tt::ReadFileBytes(good, &image));
    const int32_t t = tt::FindTensor(image, name);
    ASSERT_GE(t, 0);
    const tinyai::tmai::TensorEntry e = tt::GetTensor(image, static_cast<uint32_t>(t));
    ASSERT_EQ(e.codec, zstd ? TINYAI_CODEC_ZSTD : TINYAI_CODEC_NONE);
    image[static_cast<size_t>(e.offset + e.stored_size - 3)] ^= 0x5a;
    const std::string bad = dir_.File(zstd ? "bad-zstd.tmai" : "bad.tmai");
    ASSERT_TRUE(tt::WriteFileBytes(bad, image));

    TinyAIMmapConfig probe_cfg = Config(0, true);
    TinyAIMappedModel* probe = Open(probe_cfg, good);
    ASSERT_NE(probe, nullptr);
    const size_t cap = static_cast<size_t>(3 * MaxLayerBytes(probe));
    TinyAIMmapConfig cfg = Config(cap, true);
    cfg.prefetchEnabled = true;  // inline
    TinyAIMappedModel* m = Open(cfg, bad);
    ASSERT_NE(m, nullptr) << "checksums are checked at load, not at open";
    const int layer = tinyaiGetLayerDescriptor(m, 2)->index;
    ASSERT_EQ(static_cast<int>(e.layer), layer);
    EXPECT_EQ(Touch(m, 0), 0);
    EXPECT_EQ(Touch(m, 1), 0);
    const size_t before = tinyaiGetMappedModelMemoryUsage(m);
    for (int attempt = 0; attempt < 2; ++attempt) {
      tinyaiClearLastError();
      EXPECT_EQ(tinyaiGetLayerWeights(m, layer), nullptr);
      EXPECT_LAST_ERROR(TINYAI_ERR_CHECKSUM, name);
      EXPECT_EQ(tinyaiGetMappedModelMemoryUsage(m), before) << "the failed load gave its memory back";
      EXPECT_TRUE(m->cache().CheckInvariants());
    }
    EXPECT_EQ(tinyaiReleaseLayerWeights(m, layer), TINYAI_ERR_MISUSE) << "a failed get pins nothing";
    const uint64_t loads = Stats(m).prefetchLoads;
    EXPECT_EQ(tinyaiPrefetchLayerWeights(m, layer), TINYAI_OK) << "a prefetch never fails";
    EXPECT_EQ(Stats(m).prefetchLoads, loads);
    tinyaiClearLastError();
    EXPECT_EQ(tinyaiGetLayerWeights(m, layer), nullptr);
    EXPECT_LAST_ERROR(TINYAI_ERR_CHECKSUM, name);
    const uint8_t* p = nullptr;
    uint64_t n = 0;
    int32_t b = -1;
    for (uint64_t row : {uint64_t{0}, m->slices().rows(t) - 1}) {
      tinyaiClearLastError();
      EXPECT_EQ(m->AcquireRows(t, row, &p, &n, &b), TINYAI_ERR_CHECKSUM) << "row " << row;
      EXPECT_LAST_ERROR(TINYAI_ERR_CHECKSUM, name);
    }
    EXPECT_TRUE(m->cache().CheckInvariants());
    EXPECT_LE(tinyaiGetMappedModelMemoryUsage(m), cap);
    for (int l : {3, 0, 4, 1}) EXPECT_GE(Touch(m, l), 0) << "the other layers still load";
    ASSERT_EQ(m->AcquireRows(0, 7, &p, &n, &b), TINYAI_OK) << LastMessage();
    EXPECT_TRUE(RowsMatch(m, 0, 7, p, n, ref_));
    EXPECT_EQ(m->ReleaseSlice(b), TINYAI_OK);
  }
}

// Layers under minLayerCacheSize stay when anything else can go: neither a
// demand load nor a prefetch evicts them while a full-size layer is evictable.
// A row slice holding part of a corrupt tensor checks the whole tensor first,
// streaming it through the slice's memory: read directly (whole blocks
// around a tensor that starts and ends inside them) or buffered, the
// checksum fails the same way and the slice holds nothing after.
TEST_F(WeightCacheTest, CorruptTensorFailsWhenStreamedDirectlyOrNot) {
  Bytes image;
  ASSERT_TRUE(tt::ReadFileBytes(plain_, &image));
  const char* name = "blk.2.ffn_down";
  const int32_t t = tt::FindTensor(image, name);
  ASSERT_GE(t, 0);
  const tinyai::tmai::TensorEntry e = tt::GetTensor(image, static_cast<uint32_t>(t));
  image[static_cast<size_t>(e.offset + e.stored_size - 5)] ^= 0x21;
  const std::string bad = dir_.File("bad-rows.tmai");
  ASSERT_TRUE(tt::WriteFileBytes(bad, image));
  for (int direct : {1, -1}) {
    SCOPED_TRACE(direct > 0 ? "direct" : "buffered");
    TinyAIMmapConfig cfg = Config(64 * 1024, true, 1000);
    cfg.directReads = direct;
    TinyAIMappedModel* m = Open(cfg, bad);
    ASSERT_NE(m, nullptr);
    const bool can_direct = m->source().direct_align() > 0;
    EXPECT_EQ(m->source().direct_now(), direct > 0 && can_direct);
    for (int attempt = 0; attempt < 2; ++attempt) {
      const uint8_t* p = nullptr;
      uint64_t n = 0;
      int32_t b = -1;
      tinyaiClearLastError();
      EXPECT_EQ(m->AcquireRows(t, 0, &p, &n, &b), TINYAI_ERR_CHECKSUM);
      EXPECT_LAST_ERROR(TINYAI_ERR_CHECKSUM, name);
      EXPECT_TRUE(m->cache().CheckInvariants());
    }
    // Another tensor of the same file streams and checks fine.
    const int32_t good = tt::FindTensor(image, "blk.2.ffn_up");
    ASSERT_GE(good, 0);
    const uint8_t* p = nullptr;
    uint64_t n = 0;
    int32_t b = -1;
    ASSERT_EQ(m->AcquireRows(good, 1, &p, &n, &b), TINYAI_OK) << LastMessage();
    EXPECT_TRUE(RowsMatch(m, good, 1, p, n, ref_));
    EXPECT_EQ(m->ReleaseSlice(b), TINYAI_OK);
    if (direct > 0 && can_direct) EXPECT_GT(Stats(m).bytesReadDirect, 0u) << "the checks streamed directly";
    if (direct < 0) EXPECT_EQ(Stats(m).bytesReadDirect, 0u);
  }
}

TEST_F(EvictionTest, LayersSmallerThanMinLayerCacheSizeAreNotEvicted) {
  TinyAIMmapConfig probe_cfg = Config(0, false);
  TinyAIMappedModel* probe = Open(probe_cfg);
  ASSERT_NE(probe, nullptr);
  const int out = probe->layer_count() - 1;
  const TinyAILayerDescriptor* d = tinyaiGetLayerDescriptor(probe, out);
  ASSERT_LT(d->decodedSize, probe_cfg.minLayerCacheSize) << "the output layer is small";
  const uint64_t small = LayerBytes(probe, out);
  const size_t cap = static_cast<size_t>(2 * h_ + small);

  // Control: with minLayerCacheSize 0 the output layer is plain LRU prey.
  {
    TinyAIMmapConfig cfg = Config(cap, false);
    cfg.minLayerCacheSize = 0;
    TinyAIMappedModel* m = Open(cfg);
    ASSERT_NE(m, nullptr);
    for (int l : {out, 1, 2, 3}) EXPECT_EQ(Touch(m, l), 0);
    EXPECT_EQ(Touch(m, out), 0) << "minLayerCacheSize 0: the least recently used small layer is evicted";
  }
  // Prefetch: making room for a prefetch skips the small layer.
  {
    TinyAIMmapConfig cfg = Config(cap, false);
    cfg.prefetchEnabled = true;  // inline (prefetchThreads 0)
    TinyAIMappedModel* m = Open(cfg);
    ASSERT_NE(m, nullptr);
    for (int l : {out, 1, 2}) EXPECT_EQ(Touch(m, l), 0);
    ASSERT_EQ(tinyaiPrefetchLayerWeights(m, 3), TINYAI_OK);
    EXPECT_EQ(Stats(m).prefetchLoads, 1u);
    EXPECT_EQ(Touch(m, out), 1) << "a prefetch did not evict the small layer";
    EXPECT_EQ(Touch(m, 3), 1);
  }
  // Demand loads (the default minLayerCacheSize, 4 KB).
  {
    TinyAIMappedModel* m = Open(Config(cap, false));
    ASSERT_NE(m, nullptr);
    for (int l : {out, 1, 2}) EXPECT_EQ(Touch(m, l), 0);
    EXPECT_EQ(tinyaiGetMappedModelMemoryUsage(m), cap) << "full";
    EXPECT_EQ(Touch(m, 3), 0);  // must evict layer 1, not the smaller, older output layer
    EXPECT_EQ(Touch(m, out), 1) << "a layer smaller than minLayerCacheSize was evicted by a demand load";
    EXPECT_EQ(Touch(m, 2), 1);
    EXPECT_EQ(Touch(m, 3), 1);
  }
}

// ---- The decode cycle ---------------------------------------------------------

// Every row slice in order, pass after pass (what decoding a token does), with
// room for about half of them. Plain LRU always evicts the slice needed
// soonest and hits nothing after the first pass; the adaptive policy learns
// the cycle and keeps close to cap/cycle of it (Belady: cap-1 hits a pass).
TEST_F(WeightCacheTest, DecodeCycleAdaptiveBeatsLru) {
  constexpr int kPasses = 10;
  TinyAIMmapConfig probe_cfg = Config(0, true);
  TinyAIMappedModel* probe = Open(probe_cfg);
  ASSERT_NE(probe, nullptr);
  const int32_t n = probe->slices().slice_count();
  const uint64_t slot = MaxSliceBytes(probe);
  for (int32_t b = 0; b < n; ++b) ASSERT_EQ(probe->cache().EntryBytes(b), slot) << "every slice takes one slot";
  const int32_t fit = n / 2;
  const size_t cap = static_cast<size_t>(fit * slot);

  uint64_t hits[2] = {0, 0}, misses[2] = {0, 0};
  for (int adaptive = 0; adaptive < 2; ++adaptive) {
    SCOPED_TRACE(adaptive ? "adaptive" : "plain LRU");
    TinyAIMappedModel* m = Open(Config(cap, adaptive != 0));
    ASSERT_NE(m, nullptr);
    for (int pass = 0; pass < kPasses; ++pass) {
      if (pass == 1) ASSERT_EQ(tinyaiResetMappedModelCacheStats(m), TINYAI_OK);  // count from the second pass
      for (int32_t b = 0; b < n; ++b) {
        const uint8_t* base = nullptr;
        ASSERT_EQ(m->cache().Acquire(b, &base), TINYAI_OK) << LastMessage();
        if (pass == 0 || pass == kPasses - 1) ASSERT_TRUE(SliceMatches(m, b, base, ref_));
        ASSERT_EQ(m->cache().Release(b), TINYAI_OK);
      }
      ASSERT_LE(tinyaiGetMappedModelMemoryUsage(m), cap);
    }
    const TinyAICacheStats s = Stats(m);
    hits[adaptive] = s.hits;
    misses[adaptive] = s.misses;
    EXPECT_EQ(s.hits + s.misses, static_cast<uint64_t>(n) * (kPasses - 1));
    EXPECT_TRUE(m->cache().CheckInvariants());
  }
  const double uses = static_cast<double>(n) * (kPasses - 1);
  const double optimum = static_cast<double>(fit - 1) / n;  // Belady on a cycle
  const double lru_rate = hits[0] / uses, adaptive_rate = hits[1] / uses;
  std::printf("[ decode   ] %d slices, room for %d, %d passes counted: LRU %llu hits (%.3f), adaptive %llu hits "
              "(%.3f), optimum %.3f\n",
              n, fit, kPasses - 1, static_cast<unsigned long long>(hits[0]), lru_rate,
              static_cast<unsigned long long>(hits[1]), adaptive_rate, optimum);
  RecordProperty("lru_hit_rate", std::to_string(lru_rate));
  RecordProperty("adaptive_hit_rate", std::to_string(adaptive_rate));
  EXPECT_LE(hits[0], static_cast<uint64_t>(kPasses - 1)) << "LRU on a cycle longer than the cache hits (nearly) nothing";
  EXPECT_GE(adaptive_rate, 0.85 * optimum) << "adaptive caching stays close to the optimum";
  EXPECT_GT(hits[1], hits[0] + static_cast<uint64_t>(uses * optimum / 2)) << "adaptive beats LRU by a clear margin";
  EXPECT_LT(misses[1], misses[0]);
}

// ---- Counters -------------------------------------------------------------------

TEST_F(WeightCacheTest, StatsAddUpForAScriptedSequence) {
  TinyAIMmapConfig probe_cfg = Config(0, false);
  TinyAIMappedModel* probe = Open(probe_cfg);
  ASSERT_NE(probe, nullptr);
  const uint64_t h = LayerBytes(probe, 1);
  for (int l : {2, 3}) ASSERT_EQ(LayerBytes(probe, l), h);
  auto stored = [&](int l) {  // bytes a load of layer l reads: its tensors (checksums are checked in memory)
    const TinyAILayerDescriptor* d = tinyaiGetLayerDescriptor(probe, l);
    uint64_t sum = 0;
    for (int t = d->firstTensor; t < d->firstTensor + d->tensorCount; ++t) {
      TinyAITensorInfo info;
      std::memset(&info, 0, sizeof info);
      info.structSize = sizeof info;
      EXPECT_EQ(tinyaiGetMappedTensorInfo(probe, t, &info), TINYAI_OK);
      sum += info.storedSize;
    }
    return sum;
  };
  auto decoded = [&](int l) { return tinyaiGetLayerDescriptor(probe, l)->decodedSize; };

  const size_t cap = static_cast<size_t>(2 * h);
  TinyAIMappedModel* m = Open(Config(cap, false));
  ASSERT_NE(m, nullptr);
  TinyAICacheStats s = Stats(m);
  EXPECT_EQ(s.hits + s.misses + s.evictions + s.bytesRead + s.bytesLoaded + s.heldBytes + s.residentBytes, 0u);
  EXPECT_EQ(s.capacity, cap);
  // 1 miss, 1 hit, 2 miss, 3 miss (evicts 1), 2 hit, 1 miss (evicts 3).
  const int script[] = {1, 1, 2, 3, 2, 1};
  const int expect_hit[] = {0, 1, 0, 0, 1, 0};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(Touch(m, script[i]), expect_hit[i]) << "step " << i;
  s = Stats(m);
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.misses, 4u);
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.bytesRead, 2 * stored(1) + stored(2) + stored(3));
  EXPECT_EQ(s.bytesLoaded, 2 * decoded(1) + decoded(2) + decoded(3));
  EXPECT_EQ(s.heldBytes, cap);
  EXPECT_EQ(s.heldBytes, tinyaiGetMappedModelMemoryUsage(m));
  EXPECT_EQ(s.peakHeldBytes, cap);
  EXPECT_EQ(s.residentBytes, cap);
  EXPECT_EQ(s.capacity, cap);
  EXPECT_EQ(s.prefetchRequests + s.prefetchLoads + s.prefetchDropped + s.prefetchHits + s.stalls, 0u);

  ASSERT_EQ(tinyaiResetMappedModelCacheStats(m), TINYAI_OK);
  s = Stats(m);
  EXPECT_EQ(s.hits + s.misses + s.evictions + s.bytesRead + s.bytesLoaded, 0u);
  EXPECT_EQ(s.prefetchRequests + s.prefetchLoads + s.prefetchDropped + s.prefetchHits + s.stalls, 0u);
  EXPECT_EQ(s.heldBytes, cap) << "a reset keeps what is held";
  EXPECT_EQ(s.residentBytes, cap);
  EXPECT_EQ(s.peakHeldBytes, cap) << "the peak restarts at what is held";
  EXPECT_EQ(s.capacity, cap);
  EXPECT_EQ(Touch(m, 2), 1);
  s = Stats(m);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 0u);
  EXPECT_EQ(s.bytesRead, 0u);

  // Row slices: the first slice of a tensor that spans several slices also
  // reads the whole tensor once to check its CRC; later slices read only
  // themselves.
  TinyAIMappedModel* r = Open(Config(0, false));
  ASSERT_NE(r, nullptr);
  const tinyai::RowSliceTable& table = r->slices();
  ASSERT_EQ(table.slice(0).tensor, 0);
  ASSERT_GT(table.spans(0).size(), 2u) << "the embedding spans several slices";
  TinyAITensorInfo embd;
  std::memset(&embd, 0, sizeof embd);
  embd.structSize = sizeof embd;
  ASSERT_EQ(tinyaiGetMappedTensorInfo(r, 0, &embd), TINYAI_OK);
  const uint8_t* base = nullptr;
  ASSERT_EQ(r->cache().Acquire(0, &base), TINYAI_OK) << LastMessage();
  EXPECT_TRUE(SliceMatches(r, 0, base, ref_));
  s = Stats(r);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.bytesRead, embd.storedSize + table.slice(0).stored_size);
  EXPECT_EQ(s.bytesLoaded, table.slice(0).decoded_size);
  ASSERT_EQ(r->cache().Acquire(1, &base), TINYAI_OK) << LastMessage();
  EXPECT_TRUE(SliceMatches(r, 1, base, ref_));
  ASSERT_EQ(r->cache().Acquire(0, &base), TINYAI_OK) << LastMessage();
  s = Stats(r);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.bytesRead, embd.storedSize + table.slice(0).stored_size + table.slice(1).stored_size);
  EXPECT_EQ(s.heldBytes, r->cache().EntryBytes(0) + r->cache().EntryBytes(1));
  EXPECT_EQ(s.capacity, 0u);
  for (int32_t b : {0, 1, 0}) EXPECT_EQ(r->cache().Release(b), TINYAI_OK);
  EXPECT_EQ(r->cache().Release(0), TINYAI_ERR_MISUSE);
}

TEST_F(WeightCacheTest, StatsRejectBadArguments) {
  TinyAIMappedModel* m = Open(Config(0, false));
  ASSERT_NE(m, nullptr);
  TinyAICacheStats s;
  std::memset(&s, 0, sizeof s);
  s.structSize = sizeof s;
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiGetMappedModelCacheStats(nullptr, &s), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "model");
  EXPECT_EQ(tinyaiGetMappedModelCacheStats(m, nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "out");
  for (uint32_t bad : {0u, 4u, 12u, static_cast<uint32_t>(sizeof s + 8)}) {  // below hits' end, or newer
    SCOPED_TRACE(bad);
    s.structSize = bad;
    s.hits = 12345;
    tinyaiClearLastError();
    EXPECT_EQ(tinyaiGetMappedModelCacheStats(m, &s), TINYAI_ERR_INVALID_ARGUMENT);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "structSize");
    EXPECT_EQ(s.hits, 12345u) << "a rejected call writes nothing";
  }
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiResetMappedModelCacheStats(nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "model");
}

// ---- Prefetch with workers ------------------------------------------------------

// Polls the counters until done(stats) holds; checks the cap on every poll.
// False only for a hang: the slowest wait measured on a 2-core machine
// loaded by other builds was 8.9 ms under ASan (2.6 ms in release); qemu
// (aarch64 runs the whole suite) loads slices tens of times slower. The
// wait ends when the counters say so, so the bound costs only a hang's
// time: 30 s, well past 10x any of them.
bool WaitFor(TinyAIMappedModel* m, const std::function<bool(const TinyAICacheStats&)>& done) {
  const auto started = std::chrono::steady_clock::now();
  const auto give_up = started + std::chrono::seconds(30);
  for (;;) {
    const TinyAICacheStats s = Stats(m);
    if (s.capacity > 0) EXPECT_LE(s.heldBytes, s.capacity);
    if (done(s)) return true;
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// The automatic prefetch count (TINYAI_PREFETCH_THREADS_AUTO, the default):
// one worker takes loads while the weights fit, four (4 MB of reads in
// flight, slices far smaller) while a cap makes the cache stream, and one
// again when the cap is lifted; a count given is kept whatever the cap.
TEST_F(WeightCacheTest, AutomaticPrefetchWorkersFollowTheCap) {
  TinyAIMmapConfig cfg = Config(0, true);
  cfg.prefetchEnabled = true;
  cfg.prefetchThreads = TINYAI_PREFETCH_THREADS_AUTO;
  TinyAIMappedModel* m = Open(cfg);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(Stats(m).prefetchWorkers, 1u) << "no cap: the weights fit";
  uint64_t everything = 0;
  for (int l = 0; l < m->layer_count(); ++l) everything += LayerBytes(m, l);
  ASSERT_EQ(m->cache().SetCapacity(everything, false), TINYAI_OK) << LastMessage();
  EXPECT_EQ(Stats(m).prefetchWorkers, 1u) << "a cap that holds every layer";
  const uint64_t cap = 3 * MaxLayerBytes(m);
  ASSERT_LT(cap, everything);
  ASSERT_EQ(m->cache().SetCapacity(cap, false), TINYAI_OK) << LastMessage();
  EXPECT_EQ(Stats(m).prefetchWorkers, 4u) << "streaming: reads in flight";
  // The four load what is asked ahead, and the bytes are the file's.
  for (int l = 0; l < m->layer_count(); ++l) ASSERT_EQ(tinyaiPrefetchLayerWeights(m, l), TINYAI_OK) << LastMessage();
  ASSERT_TRUE(WaitFor(m, [&](const TinyAICacheStats& s) {
    return s.prefetchLoads + s.prefetchDropped >= static_cast<uint64_t>(m->layer_count()) ||
           s.prefetchLoads + s.prefetchDropped >= s.prefetchRequests;
  })) << "the prefetches never completed";
  for (int l = 0; l < m->layer_count(); ++l) EXPECT_GE(Touch(m, l), 0);
  EXPECT_LE(tinyaiGetMappedModelMemoryUsage(m), cap);
  ASSERT_EQ(m->cache().SetCapacity(0, false), TINYAI_OK) << LastMessage();
  EXPECT_EQ(Stats(m).prefetchWorkers, 1u) << "the cap lifted";

  cfg.prefetchThreads = 2;
  TinyAIMappedModel* two = Open(cfg);
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(Stats(two).prefetchWorkers, 2u);
  ASSERT_EQ(two->cache().SetCapacity(cap, false), TINYAI_OK) << LastMessage();
  EXPECT_EQ(Stats(two).prefetchWorkers, 2u) << "a count given is kept";
  cfg.prefetchThreads = 0;
  TinyAIMappedModel* inline_ = Open(cfg);
  ASSERT_NE(inline_, nullptr);
  EXPECT_EQ(Stats(inline_).prefetchWorkers, 0u) << "0: prefetches load inline";
}

TEST_F(WeightCacheTest, PrefetchWithWorkers) {
  TinyAIMmapConfig probe_cfg = Config(0, false);
  TinyAIMappedModel* probe = Open(probe_cfg);
  ASSERT_NE(probe, nullptr);
  const uint64_t h = LayerBytes(probe, 1);
  for (int l = 2; l <= 6; ++l) ASSERT_EQ(LayerBytes(probe, l), h);
  const size_t cap = static_cast<size_t>(3 * h);
  for (bool adaptive : {false, true}) {
    SCOPED_TRACE(adaptive ? "adaptive" : "plain LRU");
    TinyAIMmapConfig cfg = Config(cap, adaptive);
    cfg.prefetchEnabled = true;
    cfg.prefetchThreads = 2;
    TinyAIMappedModel* m = Open(cfg);
    ASSERT_NE(m, nullptr);

    ASSERT_EQ(tinyaiPrefetchLayerWeights(m, 2), TINYAI_OK) << LastMessage();
    ASSERT_TRUE(WaitFor(m, [](const TinyAICacheStats& s) { return s.prefetchLoads + s.prefetchDropped >= 1; }))
        << "the prefetch never completed";
    TinyAICacheStats s = Stats(m);
    EXPECT_EQ(s.prefetchRequests, 1u);
    EXPECT_EQ(s.prefetchLoads, 1u);
    EXPECT_EQ(s.prefetchDropped, 0u);
    EXPECT_EQ(s.residentBytes, h);
    EXPECT_EQ(s.misses, 0u);
    // Prefetching what is resident queues nothing.
    ASSERT_EQ(tinyaiPrefetchLayerWeights(m, 2), TINYAI_OK);
    EXPECT_EQ(Stats(m).prefetchRequests, 1u);
    // The get that follows is a hit served by the prefetch.
    EXPECT_EQ(Touch(m, 2), 1);
    s = Stats(m);
    EXPECT_EQ(s.hits, 1u);
    EXPECT_EQ(s.misses, 0u);
    EXPECT_EQ(s.prefetchHits, 1u);
    EXPECT_EQ(Touch(m, 2), 1);
    EXPECT_EQ(Stats(m).prefetchHits, 1u) << "only the first use counts as the prefetch's";

    // With two layers pinned and layer 2 unpinned, prefetches may take layer
    // 2's room once, and never more than the cap.
    const void* w1 = tinyaiGetLayerWeights(m, 1);
    const void* w3 = tinyaiGetLayerWeights(m, 3);
    ASSERT_NE(w1, nullptr) << LastMessage();
    ASSERT_NE(w3, nullptr) << LastMessage();
    EXPECT_EQ(tinyaiGetMappedModelMemoryUsage(m), cap);
    const uint64_t requests = Stats(m).prefetchRequests;
    for (int l : {4, 5, 6}) ASSERT_EQ(tinyaiPrefetchLayerWeights(m, l), TINYAI_OK);
    ASSERT_TRUE(WaitFor(m, [&](const TinyAICacheStats& x) {
      return x.prefetchRequests == requests + 3 && x.prefetchLoads + x.prefetchDropped == x.prefetchRequests;
    })) << "the prefetches never completed";
    s = Stats(m);
    EXPECT_EQ(s.prefetchLoads, 2u) << "one of 4, 5, 6 took layer 2's room";
    EXPECT_EQ(s.prefetchDropped, 2u) << "the others found only pinned or unused prefetched layers";
    EXPECT_LE(tinyaiGetMappedModelMemoryUsage(m), cap);
    EXPECT_TRUE(m->cache().CheckInvariants());
    EXPECT_EQ(Touch(m, 2), 0) << "layer 2 made room for a prefetch";
    EXPECT_TRUE(LayerMatches(m, 1, static_cast<const uint8_t*>(w1), ref_));
    EXPECT_TRUE(LayerMatches(m, 3, static_cast<const uint8_t*>(w3), ref_));
    EXPECT_EQ(tinyaiReleaseLayerWeights(m, 1), TINYAI_OK);
    EXPECT_EQ(tinyaiReleaseLayerWeights(m, 3), TINYAI_OK);

    // Every layer and every slice prefetched at once: the cap holds.
    for (int l = 0; l < m->layer_count(); ++l) ASSERT_EQ(tinyaiPrefetchLayerWeights(m, l), TINYAI_OK);
    for (int32_t b = 0; b < m->slices().slice_count(); ++b) m->PrefetchSlice(b);
    ASSERT_TRUE(WaitFor(m, [&](const TinyAICacheStats& x) {
      // Entries found loaded when their turn came count neither way; every
      // request above is for an entry nobody else loads meanwhile.
      return x.prefetchLoads + x.prefetchDropped == x.prefetchRequests;
    })) << "the prefetches never completed";
    EXPECT_LE(tinyaiGetMappedModelMemoryUsage(m), cap);
    EXPECT_LE(Stats(m).peakHeldBytes, cap);
    EXPECT_TRUE(m->cache().CheckInvariants());
  }
}

// ---- Closing twice --------------------------------------------------------------

// A row slice target near 2^64 (rowSliceSize SIZE_MAX: "as large as you
// like") packs each layer into one slice, each tensor one span, and the
// runner streams them as with any target. Found by tinyai_capi_fuzz:
// stored_offset + target wrapped around, so every row became a span of its
// own in one open slice, and WeightStream::MatMul, pinning one entry per
// span, wrote past its per-slice arrays (heap-buffer-overflow).
TEST_F(WeightCacheTest, HugeRowSliceSizeMakesOneSlicePerLayer) {
  std::string expected;
  for (size_t row_slice : {size_t{1} << 20, SIZE_MAX, SIZE_MAX / 2 + 1, SIZE_MAX - 4095}) {
    SCOPED_TRACE(row_slice);
    TinyAIMmapConfig cfg = Config(0, true, row_slice);
    TinyAIMappedModel* m = Open(cfg);
    ASSERT_NE(m, nullptr);
    if (row_slice != (size_t{1} << 20)) {
      EXPECT_EQ(m->slices().slice_count(), m->layer_count());
      for (int32_t t = 0; t < tinyaiGetMappedTensorCount(m); ++t) EXPECT_EQ(m->slices().spans(t).size(), 1u) << t;
    }
    TinyAILLMConfig llm_cfg = tinyaiCreateDefaultLLMConfig();
    llm_cfg.memoryLimit = 4u << 20;  // MEMORY_OPT: the weights stream through windows of slices
    TinyAILLM* llm = nullptr;
    ASSERT_EQ(tinyaiCreateLLM(m, &llm_cfg, &llm), TINYAI_OK) << LastMessage();
    TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
    gp.steps = 12;
    char text[512];
    size_t len = 0;
    EXPECT_EQ(tinyaiLLMGenerate(llm, "ab", &gp, text, sizeof text, &len, nullptr), TINYAI_OK) << LastMessage();
    tinyaiDestroyLLM(llm);
    if (expected.empty()) expected = text;
    EXPECT_EQ(std::string(text), expected);
  }
}

// Bytes resident in the mappings that overlap [begin, end) (/proc/self/smaps,
// their Rss); -1 where that cannot be read (or means nothing: under
// qemu-user the file describes the emulator).
int64_t RangeRss(const uint8_t* begin, const uint8_t* end) {
#if defined(TINYAI_TEST_EMULATED)
  return -1;
#else
  std::FILE* f = std::fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  bool inside = false;
  int64_t kib = 0;
  bool any = false;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long lo = 0, hi = 0, rss = 0;
    const char* dash = std::strchr(line, '-');
    const char* space = std::strchr(line, ' ');
    if (dash && space && dash < space && std::sscanf(line, "%llx-%llx ", &lo, &hi) == 2) {
      inside = lo < reinterpret_cast<uintptr_t>(end) && hi > reinterpret_cast<uintptr_t>(begin);
      any = any || inside;
    } else if (inside && std::sscanf(line, "Rss: %llu kB", &rss) == 1) {
      kib += static_cast<int64_t>(rss);
    }
  }
  std::fclose(f);
  return any ? kib * 1024 : -1;
#endif
}

// Where every row slice fits the cap at once (no cap, or one holding them)
// and the OS has transparent huge pages, the slices live at fixed offsets of
// one region asked to be in huge pages (weight_cache.h): each slice at the
// bytes of those before it, the region at a huge page boundary, never more
// resident than it. Once a slice is evicted, or a cap set below the region,
// or a layer's buffer shares the cap, the region holds no more memory than
// its loaded slices (huge pages a fault took for a neighbour given back),
// and slices read again are the file's. A cap below the region keeps slots.
TEST_F(WeightCacheTest, RowSlicesLiveInAHugePageRegionWhenAllFit) {
  const uint64_t huge = tinyai::port::HugePageSize();
  void* probe_region = tinyai::port::HugeRegionReserve(1);
  if (huge == 0 || !probe_region) GTEST_SKIP() << "this OS gives no transparent huge pages (THP never, or none)";
  tinyai::port::HugeRegionFree(probe_region, 1);
  // About 12 MB of slices: several huge pages.
  tinyai::LlamaShape shape = tt::TinyShape();
  shape.dim = 256;
  shape.hidden_dim = 768;
  shape.layers = 4;
  shape.heads = 8;
  shape.kv_heads = 4;
  shape.vocab_size = 512;
  const std::string path = dir_.File("region.tmai");
  ASSERT_EQ(tinyai::WriteSyntheticModel(shape, path.c_str()), TINYAI_OK) << LastMessage();
  std::vector<Bytes> ref;
  ASSERT_NO_FATAL_FAILURE(LoadReference(path, &ref));

  TinyAIMappedModel* probe = Open(Config(0, true, size_t{1} << 20), path);
  ASSERT_NE(probe, nullptr);
  uint64_t total = 0;
  for (int32_t b = 0; b < probe->slices().slice_count(); ++b) total += probe->cache().EntryBytes(b);
  ASSERT_GT(total, 4 * huge);

  const uint8_t* region = nullptr;  // the current model's first slice
  // Reads slices [from, to) (then back, when twice), checking their bytes
  // and, in the region, where each lies; returns the bytes of the slices.
  auto read = [&](TinyAIMappedModel* m, int32_t from, int32_t to, bool in_region, bool twice) {
    const uint8_t* first = nullptr;
    uint64_t offset = 0;
    const int32_t n = to - from;
    for (int32_t i = 0; i < (twice ? 2 * n : n); ++i) {
      const int32_t b = i < n ? from + i : from + 2 * n - 1 - i;
      const uint8_t* base = nullptr;
      EXPECT_EQ(m->cache().Acquire(b, &base), TINYAI_OK) << LastMessage();
      EXPECT_TRUE(SliceMatches(m, b, base, ref));
      if (base) EXPECT_EQ(m->cache().Release(b), TINYAI_OK) << LastMessage();
      EXPECT_TRUE(m->cache().CheckInvariants());
      if (i >= n) continue;
      if (in_region && base) {
        if (!first) first = base;
        EXPECT_EQ(base, first + offset) << "slice " << b << " is not where the bytes before it end";
      }
      offset += m->cache().EntryBytes(b);
    }
    if (in_region && first && from == 0) {
      region = first;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % huge, 0u) << "the region starts off a huge page boundary";
    }
    return offset;
  };
  // What the region has resident, at most `most` bytes (every range is
  // whole pages: no slack); skipped where smaps cannot tell.
  auto region_rss_at_most = [&](uint64_t most, const char* what) {
    const int64_t rss = RangeRss(region, region + total);
    if (rss >= 0) EXPECT_LE(static_cast<uint64_t>(rss), most) << what;
  };

  for (size_t cap : {size_t{0}, static_cast<size_t>(total)}) {
    SCOPED_TRACE(cap);
    TinyAIMappedModel* m = Open(Config(cap, true, size_t{1} << 20), path);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(read(m, 0, m->slices().slice_count(), true, true), total);
    EXPECT_TRUE(m->cache().huge_region());
    EXPECT_EQ(Stats(m).heldBytes, total) << "every slice held, counted at its own bytes";
    region_rss_at_most(total, "all slices loaded: the region, never past its end");

    // A cap below the region: what is evicted goes back to the OS.
    const uint64_t small = 3 * MaxSliceBytes(m);
    ASSERT_EQ(m->cache().SetCapacity(small), TINYAI_OK) << LastMessage();
    EXPECT_LE(Stats(m).heldBytes, small);
    EXPECT_TRUE(m->cache().CheckInvariants());
    region_rss_at_most(Stats(m).heldBytes, "after a cap below the region");
    read(m, 0, m->slices().slice_count(), false, true);
    EXPECT_LE(Stats(m).heldBytes, small);
    EXPECT_LE(tinyaiGetMappedModelMemoryUsage(m), small);
    region_rss_at_most(Stats(m).heldBytes, "slices read again under the small cap");
    tinyaiCloseMappedModel(m);
    open_.erase(std::find(open_.begin(), open_.end(), m));
  }

  // Under a cap of the region and a layer more: slices one in three (each
  // huge page a fault takes commits its neighbours' ranges too), then a
  // layer's buffer - the region gives back what its slices do not hold.
  {
    const size_t cap = static_cast<size_t>(total + MaxLayerBytes(probe));
    TinyAIMappedModel* m = Open(Config(cap, true, size_t{1} << 20), path);
    ASSERT_NE(m, nullptr);
    uint64_t loaded = read(m, 0, 1, true, false);
    for (int32_t b = 3; b < m->slices().slice_count(); b += 3) loaded += read(m, b, b + 1, false, false);
    EXPECT_TRUE(m->cache().huge_region());
    const uint8_t* w = static_cast<const uint8_t*>(tinyaiGetLayerWeights(m, 1));
    EXPECT_TRUE(LayerMatches(m, 1, w, ref));
    if (w) EXPECT_EQ(tinyaiReleaseLayerWeights(m, 1), TINYAI_OK) << LastMessage();
    EXPECT_TRUE(m->cache().CheckInvariants());
    region_rss_at_most(loaded, "a layer beside the region under a cap");
    tinyaiCloseMappedModel(m);
    open_.erase(std::find(open_.begin(), open_.end(), m));
  }

  // A layer held before the first slice, under a cap of the region and the
  // layer: the region is made, but its faults are small pages from the start.
  {
    const size_t cap = static_cast<size_t>(total + MaxLayerBytes(probe));
    TinyAIMappedModel* m = Open(Config(cap, true, size_t{1} << 20), path);
    ASSERT_NE(m, nullptr);
    const uint8_t* w = static_cast<const uint8_t*>(tinyaiGetLayerWeights(m, 1));
    EXPECT_TRUE(LayerMatches(m, 1, w, ref));
    uint64_t loaded = read(m, 0, 1, true, false);
    for (int32_t b = 3; b < m->slices().slice_count(); b += 3) loaded += read(m, b, b + 1, false, false);
    EXPECT_TRUE(m->cache().huge_region());
    region_rss_at_most(loaded, "a layer held before the region was made");
    if (w) EXPECT_EQ(tinyaiReleaseLayerWeights(m, 1), TINYAI_OK) << LastMessage();
    tinyaiCloseMappedModel(m);
    open_.erase(std::find(open_.begin(), open_.end(), m));
  }
  // No cap (huge faults on), a layer and slices held, then a cap that holds
  // the region and the layer: the cap no longer holds the region whole.
  {
    TinyAIMappedModel* m = Open(Config(0, true, size_t{1} << 20), path);
    ASSERT_NE(m, nullptr);
    uint64_t loaded = read(m, 0, 1, true, false);
    for (int32_t b = 3; b < m->slices().slice_count(); b += 3) loaded += read(m, b, b + 1, false, false);
    const uint8_t* w = static_cast<const uint8_t*>(tinyaiGetLayerWeights(m, 1));
    EXPECT_TRUE(LayerMatches(m, 1, w, ref));
    ASSERT_EQ(m->cache().SetCapacity(total + MaxLayerBytes(probe)), TINYAI_OK) << LastMessage();
    region_rss_at_most(loaded, "a cap set beside a layer held");
    if (w) EXPECT_EQ(tinyaiReleaseLayerWeights(m, 1), TINYAI_OK) << LastMessage();
    tinyaiCloseMappedModel(m);
    open_.erase(std::find(open_.begin(), open_.end(), m));
  }

  // The same slices under a cap of the region, then a cap a byte below it
  // (nothing to evict): the region gives back what its slices do not hold.
  {
    TinyAIMappedModel* m = Open(Config(static_cast<size_t>(total), true, size_t{1} << 20), path);
    ASSERT_NE(m, nullptr);
    uint64_t loaded = read(m, 0, 1, true, false);
    for (int32_t b = 3; b < m->slices().slice_count(); b += 3) loaded += read(m, b, b + 1, false, false);
    ASSERT_EQ(m->cache().SetCapacity(total - 1), TINYAI_OK) << LastMessage();
    EXPECT_EQ(Stats(m).heldBytes, loaded) << "nothing evicted";
    region_rss_at_most(loaded, "a cap below the region, nothing evicted");
    for (int32_t b = 1; b < m->slices().slice_count(); b += 3) read(m, b, b + 1, false, false);
    region_rss_at_most(Stats(m).heldBytes, "slices read after that");
    tinyaiCloseMappedModel(m);
    open_.erase(std::find(open_.begin(), open_.end(), m));
  }

  // A cap a byte below every slice's bytes: the slices take slots.
  TinyAIMappedModel* m = Open(Config(static_cast<size_t>(total - 1), true, size_t{1} << 20), path);
  ASSERT_NE(m, nullptr);
  read(m, 0, m->slices().slice_count(), false, true);
  EXPECT_FALSE(m->cache().huge_region());
}

// Safe to call twice: Close looks the pointer up in the registry of open
// models and never dereferences one that is not there (mapped_model.cc).
TEST_F(WeightCacheTest, ClosingAModelTwiceIsMisuse) {
  TinyAIMmapConfig cfg = Config(0, true);
  cfg.prefetchEnabled = true;
  cfg.prefetchThreads = 1;
  TinyAIMappedModel* m = tinyaiOpenMappedModel(plain_.c_str(), &cfg);
  ASSERT_NE(m, nullptr) << LastMessage();
  ASSERT_NE(tinyaiGetLayerWeights(m, 1), nullptr);
  ASSERT_EQ(tinyaiReleaseLayerWeights(m, 1), TINYAI_OK);
  tinyaiClearLastError();
  tinyaiCloseMappedModel(m);
  EXPECT_EQ(tinyaiGetLastError(), TINYAI_OK) << LastMessage();
  tinyaiCloseMappedModel(m);
  EXPECT_LAST_ERROR(TINYAI_ERR_MISUSE, "not an open model");
  // A pointer that never was a model: reported, not touched.
  tinyaiClearLastError();
  alignas(64) static unsigned char not_a_model[256];
  tinyaiCloseMappedModel(reinterpret_cast<TinyAIMappedModel*>(not_a_model));
  EXPECT_LAST_ERROR(TINYAI_ERR_MISUSE, "not an open model");
  // Other open models are unaffected.
  TinyAIMappedModel* other = Open(Config(0, true));
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(Touch(other, 1), 0);
}

}  // namespace

namespace {

// A slice used twice in a row once per cycle (a norm, then the matrix rows
// packed after it) must still be predicted a whole cycle away after its
// second use, not treated as overdue (which would make it LRU prey).
TEST(CachePolicyTest, DoubleTouchPerCycleLearnsTheCycle) {
  constexpr uint64_t kCycle = 100;
  tinyai::EntryUse u;
  for (uint64_t pass = 0; pass < 3; ++pass) {
    tinyai::RecordUse(&u, 5 + pass * kCycle);
    tinyai::RecordUse(&u, 6 + pass * kCycle);
  }
  const uint64_t now = 7 + 2 * kCycle;
  EXPECT_GE(tinyai::PredictedDistance(u, now, true), kCycle - 5);
  // A slice used once per cycle just before now is predicted further away
  // than one needed a few accesses from now.
  tinyai::EntryUse soon;
  tinyai::RecordUse(&soon, 10 + kCycle);
  tinyai::RecordUse(&soon, 10 + 2 * kCycle);
  EXPECT_LT(tinyai::PredictedDistance(soon, now + 90, true), tinyai::PredictedDistance(u, now, true));
  // Plain LRU: distance is the age.
  EXPECT_EQ(tinyai::PredictedDistance(u, now, false), 1u);
}

}  // namespace
