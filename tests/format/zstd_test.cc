// Codec zstd (docs/format.md, "codec zstd"): the writer's row-slice frames
// decode back to exactly the uncompressed model, incompressible tensors stay
// uncompressed, and every malformed table or frame gets a status and a
// message naming the tensor and the frame, never a crash (these tests also run
// under ASan+UBSan).
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_estimateDCtxSize
#include <zstd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/crc32c.h"
#include "import/model_builder.h"
#include "format/test_models.h"
#include "format/tmai_format.h"
#include "format/tmai_reader.h"
#include "format/tmai_writer.h"
#include "format/zstd_frames.h"
#include "tinyai/tinyai.h"
#include "tinyai/utils/mmap_loader.h"

namespace {

using tinyai::TmaiReader;
using tinyai::TmaiWriter;
using tinyai::ZstdDecoder;
using tinyai::testing::AlignedImage;
using tinyai::testing::Bytes;
using tinyai::testing::LastMessage;
using tinyai::testing::TempDir;
namespace tt = tinyai::testing;
namespace tmai = tinyai::tmai;

// A parsed file image (8-byte aligned for the reader).
struct Parsed {
  explicit Parsed(const Bytes& bytes) : image(bytes) {}
  TinyAIStatus Parse(const std::string& source) {
    name = source;
    return reader.Parse(image.data(), image.size(), image.size(), name.c_str());
  }
  const uint8_t* stored(uint32_t t) const { return image.data() + reader.tensors()[t].offset; }
  AlignedImage image;
  TmaiReader reader;
  std::string name;
};

// Decodes every frame of zstd tensor t into out (its decoded bytes).
TinyAIStatus DecodeTensor(const Parsed& p, uint32_t t, Bytes* out) {
  const tmai::TensorEntry& e = p.reader.tensors()[t];
  const uint32_t frames = tinyai::ZstdFrameCount(e);
  if (frames == 0) return TINYAI_ERR_BAD_FORMAT;
  std::vector<uint64_t> offsets(frames + 1);
  const uint8_t* stored = p.stored(t);
  TINYAI_RETURN_IF_ERROR(tinyai::ParseZstdFrameTable(e, stored, static_cast<size_t>(e.stored_size), offsets.data(),
                                                     p.name.c_str()));
  uint64_t rows = 0, row_bytes = 0;
  TINYAI_RETURN_IF_ERROR(tinyai::TensorRowLayout(e, &rows, &row_bytes));
  ZstdDecoder dec;
  TINYAI_RETURN_IF_ERROR(dec.Init());
  out->assign(static_cast<size_t>(e.decoded_size), 0xAB);
  for (uint32_t f = 0; f < frames; ++f) {
    uint64_t first = 0, count = 0;
    TINYAI_RETURN_IF_ERROR(tinyai::ZstdFrameRows(e, f, &first, &count));
    uint8_t* dst = out->data() + first * row_bytes;
    TINYAI_RETURN_IF_ERROR(dec.DecodeFrame(e, f, stored + offsets[f], static_cast<size_t>(offsets[f + 1] - offsets[f]),
                                           dst, static_cast<size_t>(count * row_bytes), p.name.c_str()));
  }
  return TINYAI_OK;
}

uint64_t ExpectedRowsPerFrame(const tmai::TensorEntry& e) {
  const uint64_t rows = e.ndims >= 2 ? e.shape[0] : 1;
  uint64_t per = tmai::kDefaultRowSliceBytes / (e.decoded_size / rows);
  if (per == 0) per = 1;
  return per < rows ? per : rows;
}

// A tensor for WriteCustom: its shape and decoded bytes.
struct TensorSpec {
  std::string name;
  std::vector<uint64_t> shape;
  Bytes data;
  bool new_layer = false;
};

// Floats that compress (few distinct values), and words that do not.
Bytes Compressible(size_t bytes, uint64_t seed) {
  Bytes b(bytes);
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    float f = static_cast<float>(tinyai::SplitMix64(&seed) % 8) * 0.25f;
    std::memcpy(b.data() + i, &f, 4);
  }
  return b;
}

Bytes Random(size_t bytes, uint64_t seed) {
  Bytes b(bytes);
  for (size_t i = 0; i < bytes; i += 8) {
    uint64_t v = tinyai::SplitMix64(&seed);
    std::memcpy(b.data() + i, &v, bytes - i < 8 ? bytes - i : 8);
  }
  return b;
}

// Writes the tensors (f32; the first and each new_layer one start a dense
// layer) as one stream cut into chunks of chunk bytes, which may straddle
// tensors.
TinyAIStatus WriteCustom(const std::string& path, const std::vector<TensorSpec>& specs, TinyAICodec codec,
                         size_t chunk = 1 << 16, tinyai::TmaiWriteStats* stats = nullptr) {
  TmaiWriter w;
  w.SetCompression(codec, 3);
  w.AddMetaString("general.architecture", "test");
  Bytes stream;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (i == 0 || specs[i].new_layer) w.AddLayer(TINYAI_LAYER_DENSE, -1);
    w.AddTensor(specs[i].name, TINYAI_ROLE_OTHER, TINYAI_DTYPE_F32, specs[i].shape);
    stream.insert(stream.end(), specs[i].data.begin(), specs[i].data.end());
  }
  TINYAI_RETURN_IF_ERROR(w.Open(path.c_str()));
  for (size_t at = 0; at < stream.size(); at += chunk) {
    const size_t n = stream.size() - at < chunk ? stream.size() - at : chunk;
    TINYAI_RETURN_IF_ERROR(w.Write(stream.data() + at, n));
  }
  TINYAI_RETURN_IF_ERROR(w.Finish());
  if (stats) *stats = w.stats();
  return TINYAI_OK;
}

class ZstdTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()) << "cannot create a temporary folder"; }

  // Writes specs compressed, reads the file back into *bytes.
  void WriteSpecs(const std::vector<TensorSpec>& specs, Bytes* bytes, size_t chunk = 1 << 16,
                  tinyai::TmaiWriteStats* stats = nullptr) {
    const std::string path = dir_.File("custom-" + std::to_string(++files_) + ".tmai");
    ASSERT_EQ(WriteCustom(path, specs, TINYAI_CODEC_ZSTD, chunk, stats), TINYAI_OK) << LastMessage();
    ASSERT_TRUE(tt::ReadFileBytes(path, bytes));
  }

  TempDir dir_;
  int files_ = 0;
};

// ---- Round trips ---------------------------------------------------------------

// The same synthetic model written uncompressed and with zstd: every tensor
// decodes to the uncompressed bytes, and every stored CRC verifies.
void ExpectSameModel(const Bytes& plain_bytes, const Bytes& packed_bytes, int* compressed) {
  Parsed plain(plain_bytes), packed(packed_bytes);
  ASSERT_EQ(plain.Parse("plain.tmai"), TINYAI_OK) << LastMessage();
  ASSERT_EQ(packed.Parse("packed.tmai"), TINYAI_OK) << LastMessage();
  ASSERT_EQ(plain.reader.tensors().size(), packed.reader.tensors().size());
  ASSERT_EQ(plain.reader.layers().size(), packed.reader.layers().size());
  for (size_t l = 0; l < plain.reader.layers().size(); ++l) {
    EXPECT_EQ(plain.reader.layers()[l].decoded_size, packed.reader.layers()[l].decoded_size) << "layer " << l;
    EXPECT_LE(packed.reader.layers()[l].stored_size, plain.reader.layers()[l].stored_size) << "layer " << l;
  }
  *compressed = 0;
  for (uint32_t t = 0; t < packed.reader.tensors().size(); ++t) {
    const tmai::TensorEntry& a = plain.reader.tensors()[t];
    const tmai::TensorEntry& b = packed.reader.tensors()[t];
    SCOPED_TRACE(b.name);
    EXPECT_STREQ(a.name, b.name);
    EXPECT_EQ(a.decoded_offset, b.decoded_offset);
    EXPECT_EQ(a.decoded_size, b.decoded_size);
    EXPECT_EQ(packed.reader.VerifyTensor(t, packed.stored(t)), TINYAI_OK) << LastMessage();
    if (b.codec == TINYAI_CODEC_ZSTD) {
      ++*compressed;
      EXPECT_EQ(b.codec_param, ExpectedRowsPerFrame(b));
      EXPECT_LT(b.stored_size, b.decoded_size);
      Bytes decoded;
      ASSERT_EQ(DecodeTensor(packed, t, &decoded), TINYAI_OK) << LastMessage();
      EXPECT_EQ(std::memcmp(decoded.data(), plain.stored(t), decoded.size()), 0) << "decoded bytes differ";
    } else {
      EXPECT_EQ(b.codec, TINYAI_CODEC_NONE);
      EXPECT_EQ(b.codec_param, 0u);
      ASSERT_EQ(b.stored_size, a.stored_size);
      EXPECT_EQ(std::memcmp(packed.stored(t), plain.stored(t), static_cast<size_t>(a.stored_size)), 0);
    }
  }
}

TEST_F(ZstdTest, SyntheticModelDecodesToTheUncompressedModel) {
  for (bool shared : {true, false}) {
    SCOPED_TRACE(shared ? "shared classifier" : "separate classifier");
    tinyai::LlamaShape shape = tt::TinyShape();
    shape.shared_classifier = shared;
    const std::string plain_path = dir_.File("plain.tmai"), packed_path = dir_.File("packed.tmai");
    ASSERT_EQ(tinyai::WriteSyntheticModel(shape, plain_path.c_str()), TINYAI_OK) << LastMessage();
    tinyai::WriteOptions zstd;
    zstd.codec = TINYAI_CODEC_ZSTD;
    tinyai::TmaiWriteStats stats;
    ASSERT_EQ(tinyai::WriteSyntheticModel(shape, packed_path.c_str(), zstd, &stats), TINYAI_OK) << LastMessage();
    Bytes plain, packed;
    ASSERT_TRUE(tt::ReadFileBytes(plain_path, &plain));
    ASSERT_TRUE(tt::ReadFileBytes(packed_path, &packed));
    EXPECT_LT(packed.size(), plain.size());
    int compressed = 0;
    ExpectSameModel(plain, packed, &compressed);
    // The norms (all 1.0) compress whatever the random weights do.
    EXPECT_GE(compressed, 2 * shape.layers + 1);
    EXPECT_EQ(stats.compressed_tensors, static_cast<uint64_t>(compressed));
    EXPECT_EQ(stats.file_size, packed.size());
    EXPECT_LT(stats.stored_bytes, stats.decoded_bytes);
    // The public loader opens it (the index is valid; loading is the cache's).
    TinyAIMappedModel* m = tinyaiOpenMappedModel(packed_path.c_str(), nullptr);
    EXPECT_NE(m, nullptr) << LastMessage();
    tinyaiCloseMappedModel(m);
  }
}

TEST_F(ZstdTest, UncompressedOutputIsUnchangedByTheCompressionOption) {
  const std::string a = dir_.File("a.tmai"), b = dir_.File("b.tmai");
  ASSERT_EQ(tinyai::WriteSyntheticModel(tt::TinyShape(), a.c_str()), TINYAI_OK) << LastMessage();
  tinyai::WriteOptions none;
  none.codec = TINYAI_CODEC_NONE;
  none.level = 19;
  tinyai::TmaiWriteStats stats;
  ASSERT_EQ(tinyai::WriteSyntheticModel(tt::TinyShape(), b.c_str(), none, &stats), TINYAI_OK) << LastMessage();
  Bytes x, y;
  ASSERT_TRUE(tt::ReadFileBytes(a, &x));
  ASSERT_TRUE(tt::ReadFileBytes(b, &y));
  EXPECT_EQ(x, y);
  EXPECT_EQ(stats.compressed_tensors, 0u);
  EXPECT_EQ(stats.stored_bytes, stats.decoded_bytes);
}

TEST_F(ZstdTest, Llama2cImportDecodesToTheUncompressedImport) {
  const std::string dir = tt::StoriesDir();
  if (dir.empty()) TINYAI_SKIP_WITHOUT_SHARED("stories260K not found under $TINYAI_SHARED_DIR/models");
  const std::string plain_path = dir_.File("plain.tmai"), packed_path = dir_.File("packed.tmai");
  const std::string ckpt = dir + "/stories260K.bin", tok = dir + "/tok512.bin";
  ASSERT_EQ(tinyai::ConvertLlama2c(ckpt.c_str(), tok.c_str(), plain_path.c_str(), nullptr), TINYAI_OK)
      << LastMessage();
  tinyai::WriteOptions zstd;
  zstd.codec = TINYAI_CODEC_ZSTD;
  zstd.level = 5;
  ASSERT_EQ(tinyai::ConvertLlama2c(ckpt.c_str(), tok.c_str(), packed_path.c_str(), nullptr, zstd), TINYAI_OK)
      << LastMessage();
  Bytes plain, packed;
  ASSERT_TRUE(tt::ReadFileBytes(plain_path, &plain));
  ASSERT_TRUE(tt::ReadFileBytes(packed_path, &packed));
  int compressed = 0;
  ExpectSameModel(plain, packed, &compressed);
  EXPECT_GT(compressed, 0);
}

// Several frames, a short last frame, rows bigger than a slice, 1-D and 3-D
// tensors, fed in chunks that straddle tensors and as whole tensors.
TEST_F(ZstdTest, RowSlicesSplitIntoFramesAsSpecified) {
  std::vector<TensorSpec> specs = {
      {"multi", {600, 1024}, Compressible(600 * 1024 * 4, 1)},         // 4 KiB rows: 256 per frame, 3 frames
      {"wide", {3, 300000}, Compressible(3 * 300000 * 4, 2)},          // rows above 1 MiB: one per frame
      {"vector", {1000}, Compressible(1000 * 4, 3), true},             // 1 row
      {"cube", {4, 8, 16}, Compressible(4 * 8 * 16 * 4, 4)},           // 4 rows of 512 bytes
  };
  // Chunks of 1000 bytes are buffered; one chunk of everything brings each
  // tensor whole.
  for (size_t chunk : {size_t{1000}, size_t{1} << 24}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    Bytes bytes;
    tinyai::TmaiWriteStats stats;
    WriteSpecs(specs, &bytes, chunk, &stats);
    Parsed p(bytes);
    ASSERT_EQ(p.Parse("rows.tmai"), TINYAI_OK) << LastMessage();
    EXPECT_EQ(stats.compressed_tensors, 4u);
    const uint32_t expect_frames[] = {3, 3, 1, 1};
    const uint32_t expect_param[] = {256, 1, 1, 4};
    for (uint32_t t = 0; t < specs.size(); ++t) {
      const tmai::TensorEntry& e = p.reader.tensors()[t];
      SCOPED_TRACE(e.name);
      ASSERT_EQ(e.codec, TINYAI_CODEC_ZSTD);
      EXPECT_EQ(e.codec_param, expect_param[t]);
      EXPECT_EQ(tinyai::ZstdFrameCount(e), expect_frames[t]);
      EXPECT_EQ(e.offset % 64, 0u);
      EXPECT_EQ(p.reader.VerifyTensor(t, p.stored(t)), TINYAI_OK) << LastMessage();
      Bytes decoded;
      ASSERT_EQ(DecodeTensor(p, t, &decoded), TINYAI_OK) << LastMessage();
      EXPECT_TRUE(decoded == specs[t].data);
    }
    // The short last frame of "multi": rows 512..599.
    uint64_t first = 0, count = 0;
    ASSERT_EQ(tinyai::ZstdFrameRows(p.reader.tensors()[0], 2, &first, &count), TINYAI_OK);
    EXPECT_EQ(first, 512u);
    EXPECT_EQ(count, 88u);
    // The frames are standard zstd frames: libzstd decodes the table's ranges
    // on its own and finds the declared content size and a checksum.
    const tmai::TensorEntry& multi = p.reader.tensors()[0];
    uint64_t offsets[4];
    ASSERT_EQ(tinyai::ParseZstdFrameTable(multi, p.stored(0), 32, offsets, "rows.tmai"), TINYAI_OK) << LastMessage();
    EXPECT_EQ(offsets[0], 32u);
    EXPECT_EQ(offsets[3], multi.stored_size);
    EXPECT_EQ(ZSTD_getFrameContentSize(p.stored(0) + offsets[2], offsets[3] - offsets[2]), 88u * 4096);
    const uint8_t descriptor = p.stored(0)[offsets[0] + 4];
    EXPECT_NE(descriptor & 0x04, 0) << "content checksum flag";
  }
}

TEST_F(ZstdTest, TensorRowLayoutOfEveryCodec) {
  tmai::TensorEntry e{};
  e.ndims = 2;
  e.shape[0] = 6;
  e.shape[1] = 10;
  e.decoded_size = 240;
  uint64_t rows = 0, row_bytes = 0;
  ASSERT_EQ(tinyai::TensorRowLayout(e, &rows, &row_bytes), TINYAI_OK);
  EXPECT_EQ(rows, 6u);
  EXPECT_EQ(row_bytes, 40u);
  e.ndims = 1;
  e.shape[0] = 60;
  e.shape[1] = 0;
  ASSERT_EQ(tinyai::TensorRowLayout(e, &rows, &row_bytes), TINYAI_OK);
  EXPECT_EQ(rows, 1u);
  EXPECT_EQ(row_bytes, 240u);
  e.ndims = 2;
  e.shape[0] = 7;
  e.shape[1] = 10;
  std::strcpy(e.name, "odd");
  EXPECT_EQ(tinyai::TensorRowLayout(e, &rows, &row_bytes), TINYAI_ERR_BAD_FORMAT);
  EXPECT_LAST_ERROR(TINYAI_ERR_BAD_FORMAT, "odd");
  EXPECT_EQ(tinyai::ZstdFrameCount(e), 0u);  // codec none
}

// ---- The writer's per-tensor choice --------------------------------------------

TEST_F(ZstdTest, IncompressibleTensorsAreStoredUncompressed) {
  std::vector<TensorSpec> specs = {
      {"noise_first", {64, 64}, Random(64 * 64 * 4, 9)},  // first in its layer: no padding
      {"zeros", {64, 64}, Bytes(64 * 64 * 4, 0)},
      {"noise", {64, 64}, Random(64 * 64 * 4, 10)},       // after a compressed tensor: at its decoded offset
      {"tail", {16}, Bytes(64, 0)},
      {"tiny", {3}, Random(12, 11), true},                // too small to win anything
  };
  Bytes bytes;
  tinyai::TmaiWriteStats stats;
  WriteSpecs(specs, &bytes, 1 << 16, &stats);
  Parsed p(bytes);
  ASSERT_EQ(p.Parse("fallback.tmai"), TINYAI_OK) << LastMessage();
  const auto tensors = p.reader.tensors();
  const auto layers = p.reader.layers();
  const uint8_t expect_codec[] = {TINYAI_CODEC_NONE, TINYAI_CODEC_ZSTD, TINYAI_CODEC_NONE, TINYAI_CODEC_ZSTD,
                                  TINYAI_CODEC_NONE};
  for (uint32_t t = 0; t < specs.size(); ++t) {
    const tmai::TensorEntry& e = tensors[t];
    SCOPED_TRACE(e.name);
    EXPECT_EQ(e.codec, expect_codec[t]);
    EXPECT_EQ(p.reader.VerifyTensor(t, p.stored(t)), TINYAI_OK) << LastMessage();
    if (e.codec == TINYAI_CODEC_NONE) {
      EXPECT_EQ(e.codec_param, 0u);
      EXPECT_EQ(e.stored_size, e.decoded_size);
      EXPECT_EQ(e.offset - layers[e.layer].offset, e.decoded_offset);
      EXPECT_EQ(std::memcmp(p.stored(t), specs[t].data.data(), specs[t].data.size()), 0);
    } else {
      Bytes decoded;
      ASSERT_EQ(DecodeTensor(p, t, &decoded), TINYAI_OK) << LastMessage();
      EXPECT_TRUE(decoded == specs[t].data);
    }
  }
  // "tail" follows "noise" directly: compressed tensors are packed.
  EXPECT_EQ(tensors[3].offset, tensors[2].offset + tensors[2].stored_size);
  EXPECT_EQ(stats.tensors, 5u);
  EXPECT_EQ(stats.compressed_tensors, 2u);
}

TEST_F(ZstdTest, BadCompressionSettingsAreReportedByOpen) {
  const std::string path = dir_.File("bad.tmai");
  struct Case {
    TinyAICodec codec;
    int level;
    TinyAIStatus status;
    const char* needle;
  } cases[] = {
      {TINYAI_CODEC_ZSTD, 0, TINYAI_ERR_INVALID_ARGUMENT, "level 0"},
      {TINYAI_CODEC_ZSTD, 20, TINYAI_ERR_INVALID_ARGUMENT, "level 20"},
      {TINYAI_CODEC_TILE_SPARSE, 3, TINYAI_ERR_UNSUPPORTED, "codec 2"},
  };
  for (const Case& c : cases) {
    TmaiWriter w;
    w.SetCompression(c.codec, c.level);
    w.AddLayer(TINYAI_LAYER_DENSE, -1);
    w.AddTensor("x", TINYAI_ROLE_OTHER, TINYAI_DTYPE_F32, {4});
    tinyaiClearLastError();
    EXPECT_EQ(w.Open(path.c_str()), c.status);
    EXPECT_LAST_ERROR(c.status, c.needle);
  }
  TmaiWriter late;
  late.AddLayer(TINYAI_LAYER_DENSE, -1);
  late.AddTensor("x", TINYAI_ROLE_OTHER, TINYAI_DTYPE_F32, {4});
  ASSERT_EQ(late.Open(path.c_str()), TINYAI_OK) << LastMessage();
  late.SetCompression(TINYAI_CODEC_ZSTD, 3);
  const float x[4] = {1, 2, 3, 4};
  ASSERT_EQ(late.Write(x, sizeof x), TINYAI_OK) << LastMessage();
  EXPECT_EQ(late.Finish(), TINYAI_ERR_MISUSE);
  EXPECT_LAST_ERROR(TINYAI_ERR_MISUSE, "after Open");
}

// ---- Bad input -------------------------------------------------------------------

class ZstdBadInputTest : public ZstdTest {
 protected:
  void SetUp() override {
    ZstdTest::SetUp();
    data_ = Compressible(600 * 1024 * 4, 5);
    WriteSpecs({{"blk.0.attn_q", {600, 1024}, data_}, {"blk.0.attn_norm", {1024}, Bytes(4096, 0)}}, &bytes_);
    parsed_.reset(new Parsed(bytes_));
    ASSERT_EQ(parsed_->Parse("bad.tmai"), TINYAI_OK) << LastMessage();
    e_ = parsed_->reader.tensors()[0];
    ASSERT_EQ(e_.codec, TINYAI_CODEC_ZSTD);
    ASSERT_EQ(tinyai::ZstdFrameCount(e_), 3u);
    table_.resize(4);
    std::memcpy(table_.data(), parsed_->stored(0), 32);
    stored_.assign(parsed_->stored(0), parsed_->stored(0) + e_.stored_size);
    ASSERT_EQ(dec_.Init(), TINYAI_OK);
  }

  TinyAIStatus ParseTable(const std::vector<uint64_t>& table, size_t bytes = 32) {
    uint64_t out[4];
    tinyaiClearLastError();
    return tinyai::ParseZstdFrameTable(e_, reinterpret_cast<const uint8_t*>(table.data()), bytes, out, "bad.tmai");
  }

  // Decodes frame f of the (possibly modified) stored bytes.
  TinyAIStatus Decode(const Bytes& stored, uint32_t f, Bytes* out, size_t extra_src = 0) {
    uint64_t first = 0, count = 0;
    EXPECT_EQ(tinyai::ZstdFrameRows(e_, f, &first, &count), TINYAI_OK);
    out->assign(static_cast<size_t>(count * 4096), 0);
    tinyaiClearLastError();
    const size_t src_size = static_cast<size_t>(table_[f + 1] - table_[f]) + extra_src;
    return dec_.DecodeFrame(e_, f, stored.data() + table_[f], src_size, out->data(), out->size(), "bad.tmai");
  }

  Bytes data_, bytes_, stored_;
  std::unique_ptr<Parsed> parsed_;
  tmai::TensorEntry e_{};
  std::vector<uint64_t> table_;
  ZstdDecoder dec_;
};

TEST_F(ZstdBadInputTest, ValidTableParses) {
  EXPECT_EQ(ParseTable(table_), TINYAI_OK) << LastMessage();
  EXPECT_EQ(ParseTable(table_, stored_.size()), TINYAI_OK) << LastMessage();  // more bytes than the table: fine
  EXPECT_GT(dec_.bytes(), 0u);
}

TEST_F(ZstdBadInputTest, FrameTableNotIncreasing) {
  std::vector<uint64_t> t = table_;
  std::swap(t[1], t[2]);
  EXPECT_EQ(ParseTable(t), TINYAI_ERR_BAD_FORMAT);
  EXPECT_LAST_ERROR(TINYAI_ERR_BAD_FORMAT, "blk.0.attn_q");
  EXPECT_LAST_ERROR(TINYAI_ERR_BAD_FORMAT, "frame 1");
  EXPECT_LAST_ERROR(TINYAI_ERR_BAD_FORMAT, "bad.tmai");
  t = table_;
  t[2] = t[1];  // an empty frame
  EXPECT_EQ(ParseTable(t), TINYAI_ERR_BAD_FORMAT);
  EXPECT_LAST_ERROR(TINYAI_ERR_BAD_FORMAT, "frame 1");
  t = table_;
  t[1] = t[0] + 3;  // shorter than any zstd frame
  EXPECT_EQ(ParseTable(t), TINYAI_ERR_BAD_FORMAT);
  EXPECT_LAST_ERROR(TINYAI_ERR_BAD_FORMAT, "frame 0");
}

TEST_F(ZstdBadInputTest, FrameTableEndsElsewhere) {
  for (int64_t delta : {-1, 1, 4096}) {
    std::vector<uint64_t> t = table_;
    t[3] = static_cast<uint64_t>(static_cast<int64_t>(t[3]) + delta);
    EXPECT_EQ(ParseTable(t), TINYAI_ERR_BAD_FORMAT);
    EXPECT_LAST_ERROR(TINYAI_ERR_BAD_FORMAT, "frame 2 ends at");
  }
  std::vector<uint64_t> t = table_;
  t[0] = 24;  // frames must start right after the table
  EXPECT_EQ(ParseTable(t), TINYAI_ERR_BAD_FORMAT);
  EXPECT_LAST_ERROR(TINYAI_ERR_BAD_FORMAT, "frame 0 starts at 24");
  t = table_;
  t[3] = ~uint64_t{0};  // wraps nothing
  EXPECT_EQ(ParseTable(t), TINYAI_ERR_BAD_FORMAT);
}

TEST_F(ZstdBadInputTest, FrameTableTooShort) {
  EXPECT_EQ(ParseTable(table_, 31), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "needs 32 bytes, 31");
  EXPECT_EQ(ParseTable(table_, 0), TINYAI_ERR_INVALID_ARGUMENT);
  // Not a zstd tensor at all.
  tmai::TensorEntry other = parsed_->reader.tensors()[1];
  ASSERT_EQ(other.codec, TINYAI_CODEC_ZSTD);
  other.codec = TINYAI_CODEC_NONE;
  uint64_t out[2];
  EXPECT_EQ(tinyai::ParseZstdFrameTable(other, parsed_->stored(1), 16, out, "bad.tmai"), TINYAI_ERR_BAD_FORMAT);
  EXPECT_LAST_ERROR(TINYAI_ERR_BAD_FORMAT, "not a valid zstd tensor");
}

TEST_F(ZstdBadInputTest, EveryFrameDecodes) {
  for (uint32_t f = 0; f < 3; ++f) {
    Bytes out;
    ASSERT_EQ(Decode(stored_, f, &out), TINYAI_OK) << LastMessage();
    EXPECT_EQ(std::memcmp(out.data(), data_.data() + size_t{f} * 256 * 4096, out.size()), 0) << "frame " << f;
  }
}

// Flipped bytes anywhere in a frame: a clean BAD_FORMAT or CHECKSUM, or (for
// bits zstd ignores) the right rows; never a crash or wrong rows reported OK.
TEST_F(ZstdBadInputTest, FlippedFrameBytesNeverCrash) {
  const uint32_t f = 2;
  const size_t begin = static_cast<size_t>(table_[f]), end = static_cast<size_t>(table_[f + 1]);
  Bytes want;
  ASSERT_EQ(Decode(stored_, f, &want), TINYAI_OK);
  int bad_format = 0, checksum = 0, ok = 0;
  const size_t step = (end - begin) / 400 + 1;
  for (size_t at = begin; at < end; at += (at < begin + 64 || at + 64 > end) ? 1 : step) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}}) {
      Bytes corrupt = stored_;
      corrupt[at] ^= mask;
      Bytes out;
      const TinyAIStatus s = Decode(corrupt, f, &out);
      if (s == TINYAI_OK) {
        ++ok;
        EXPECT_TRUE(out == want) << "byte " << at - begin << " mask " << int{mask} << ": wrong rows decoded as OK";
      } else if (s == TINYAI_ERR_CHECKSUM) {
        ++checksum;
        EXPECT_TRUE(tt::Contains(LastMessage(), "frame 2")) << LastMessage();
      } else {
        ++bad_format;
        EXPECT_EQ(s, TINYAI_ERR_BAD_FORMAT) << "byte " << at - begin << ": " << LastMessage();
        EXPECT_TRUE(tt::Contains(LastMessage(), "blk.0.attn_q")) << LastMessage();
      }
      // The tensor's CRC-32C catches every flip before decoding is tried.
      EXPECT_NE(tinyai::Crc32c(0, corrupt.data(), corrupt.size()), e_.checksum);
    }
  }
  EXPECT_GT(bad_format, 0);
  EXPECT_GT(checksum, 0);
  std::printf("flipped frame bytes: %d bad format, %d checksum, %d ignored\n", bad_format, checksum, ok);
}

TEST_F(ZstdBadInputTest, WrongZstdChecksumIsChecksum) {
  Bytes corrupt = stored_;
  corrupt[static_cast<size_t>(table_[1]) - 1] ^= 0x10;  // last byte of frame 0: its content checksum
  Bytes out;
  EXPECT_EQ(Decode(corrupt, 0, &out), TINYAI_ERR_CHECKSUM);
  EXPECT_LAST_ERROR(TINYAI_ERR_CHECKSUM, "frame 0");
  EXPECT_LAST_ERROR(TINYAI_ERR_CHECKSUM, "bad.tmai");
}

TEST_F(ZstdBadInputTest, DestinationTooSmallIsRefused) {
  Bytes out(256 * 4096 - 1);
  tinyaiClearLastError();
  EXPECT_EQ(dec_.DecodeFrame(e_, 0, stored_.data() + table_[0], static_cast<size_t>(table_[1] - table_[0]),
                             out.data(), out.size(), "bad.tmai"),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "destination holds 1048575");
  EXPECT_EQ(dec_.DecodeFrame(e_, 0, stored_.data() + table_[0], static_cast<size_t>(table_[1] - table_[0]),
                             nullptr, 0, "bad.tmai"),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dec_.DecodeFrame(e_, 3, stored_.data(), 16, out.data(), out.size(), "bad.tmai"),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "frame 3 does not exist");
}

TEST_F(ZstdBadInputTest, FrameMustBeExactlyOneFrameOfTheRightSize) {
  Bytes out;
  // Running into the next frame: two frames where the table says one.
  EXPECT_EQ(Decode(stored_, 0, &out, static_cast<size_t>(table_[2] - table_[1])), TINYAI_ERR_BAD_FORMAT);
  EXPECT_LAST_ERROR(TINYAI_ERR_BAD_FORMAT, "frame 0");
  // Frame 2 (88 rows) handed over as frame 1 (256 rows).
  out.assign(256 * 4096, 0);
  tinyaiClearLastError();
  EXPECT_EQ(dec_.DecodeFrame(e_, 1, stored_.data() + table_[2], static_cast<size_t>(table_[3] - table_[2]),
                             out.data(), out.size(), "bad.tmai"),
            TINYAI_ERR_BAD_FORMAT);
  EXPECT_LAST_ERROR(TINYAI_ERR_BAD_FORMAT, "declares 360448 bytes");
  // Cut short.
  tinyaiClearLastError();
  EXPECT_EQ(dec_.DecodeFrame(e_, 2, stored_.data() + table_[2], static_cast<size_t>(table_[3] - table_[2]) - 5,
                             out.data(), out.size(), "bad.tmai"),
            TINYAI_ERR_BAD_FORMAT);
  // A skippable frame, and a frame without its content size.
  const Bytes rows(88 * 4096, 0);
  Bytes frame(ZSTD_compressBound(rows.size()));
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ASSERT_NE(cctx, nullptr);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
  ZSTD_inBuffer in = {rows.data(), rows.size(), 0};
  ZSTD_outBuffer outb = {frame.data(), frame.size(), 0};
  ASSERT_EQ(ZSTD_compressStream2(cctx, &outb, &in, ZSTD_e_end), 0u);  // streaming: size unknown
  ZSTD_freeCCtx(cctx);
  tinyaiClearLastError();
  EXPECT_EQ(dec_.DecodeFrame(e_, 2, frame.data(), outb.pos, out.data(), out.size(), "bad.tmai"),
            TINYAI_ERR_BAD_FORMAT);
  EXPECT_LAST_ERROR(TINYAI_ERR_BAD_FORMAT, "does not declare its content size");
  Bytes skippable = {0x50, 0x2A, 0x4D, 0x18, 8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
  tinyaiClearLastError();
  EXPECT_EQ(dec_.DecodeFrame(e_, 2, skippable.data(), skippable.size(), out.data(), out.size(), "bad.tmai"),
            TINYAI_ERR_BAD_FORMAT);
  EXPECT_LAST_ERROR(TINYAI_ERR_BAD_FORMAT, "is not a zstd frame");
  // Before Init.
  ZstdDecoder fresh;
  EXPECT_EQ(fresh.bytes(), 0u);
  EXPECT_EQ(fresh.DecodeFrame(e_, 2, stored_.data() + table_[2], static_cast<size_t>(table_[3] - table_[2]),
                              out.data(), out.size(), "bad.tmai"),
            TINYAI_ERR_MISUSE);
}

// ---- The reader's checks at open -----------------------------------------------

class ZstdParseTest : public ZstdTest {
 protected:
  void SetUp() override {
    ZstdTest::SetUp();
    path_ = dir_.File("model.tmai");
    tinyai::WriteOptions zstd;
    zstd.codec = TINYAI_CODEC_ZSTD;
    ASSERT_EQ(tinyai::WriteSyntheticModel(tt::TinyShape(), path_.c_str(), zstd), TINYAI_OK) << LastMessage();
    ASSERT_TRUE(tt::ReadFileBytes(path_, &image_));
    norm_ = static_cast<uint32_t>(tt::FindTensor(image_, "blk.0.attn_norm"));
    ASSERT_EQ(tt::GetTensor(image_, norm_).codec, TINYAI_CODEC_ZSTD);
  }

  // Parses image (both with TmaiReader and through the public open) and
  // expects code with a message containing needle.
  void ExpectParseFails(const Bytes& image, TinyAIStatus code, const char* needle) {
    Parsed p(image);
    tinyaiClearLastError();
    EXPECT_EQ(p.Parse(path_), code) << LastMessage();
    EXPECT_LAST_ERROR(code, needle);
    EXPECT_LAST_ERROR(code, path_);
    const std::string bad = dir_.File("bad.tmai");
    ASSERT_TRUE(tt::WriteFileBytes(bad, image));
    tinyaiClearLastError();
    TinyAIMappedModel* m = tinyaiOpenMappedModel(bad.c_str(), nullptr);
    EXPECT_EQ(m, nullptr);
    tinyaiCloseMappedModel(m);
    EXPECT_LAST_ERROR(code, needle);
  }

  std::string path_;
  Bytes image_;
  uint32_t norm_ = 0;
};

TEST_F(ZstdParseTest, CodecParamZeroIsBadFormat) {
  Bytes b = image_;
  tt::PatchTensor(&b, norm_, [](tmai::TensorEntry& t) { t.codec_param = 0; });
  ExpectParseFails(b, TINYAI_ERR_BAD_FORMAT, "codec_param 0");
}

TEST_F(ZstdParseTest, UncompressedTensorWithCodecParamIsBadFormat) {
  const uint32_t t = static_cast<uint32_t>(tt::FindTensor(image_, "blk.0.attn_q"));
  Bytes plain;
  const std::string plain_path = dir_.File("plain.tmai");
  ASSERT_EQ(tinyai::WriteSyntheticModel(tt::TinyShape(), plain_path.c_str()), TINYAI_OK) << LastMessage();
  ASSERT_TRUE(tt::ReadFileBytes(plain_path, &plain));
  tt::PatchTensor(&plain, t, [](tmai::TensorEntry& e) { e.codec_param = 4; });
  ExpectParseFails(plain, TINYAI_ERR_BAD_FORMAT, "codec_param 4");
}

TEST_F(ZstdParseTest, StoredSizeTooSmallForItsTableIsBadFormat) {
  // One frame needs a 16-byte table and a frame of at least 9 bytes.
  Bytes b = image_;
  tt::PatchTensor(&b, norm_, [](tmai::TensorEntry& x) { x.stored_size = 24; });
  ExpectParseFails(b, TINYAI_ERR_BAD_FORMAT, "too few for 1 frames");
}

TEST_F(ZstdParseTest, ReaderAcceptsTheWrittenModelAndItsChecksums) {
  Parsed p(image_);
  ASSERT_EQ(p.Parse(path_), TINYAI_OK) << LastMessage();
  for (uint32_t t = 0; t < p.reader.tensors().size(); ++t) {
    EXPECT_EQ(p.reader.VerifyTensor(t, p.stored(t)), TINYAI_OK) << LastMessage();
  }
  // A flipped frame byte fails the tensor's CRC first.
  Bytes b = image_;
  const tmai::TensorEntry e = tt::GetTensor(image_, norm_);
  b[static_cast<size_t>(e.offset + e.stored_size - 1)] ^= 1;
  Parsed bad(b);
  ASSERT_EQ(bad.Parse(path_), TINYAI_OK) << LastMessage();
  EXPECT_EQ(bad.reader.VerifyTensor(norm_, bad.stored(norm_)), TINYAI_ERR_CHECKSUM);
  EXPECT_LAST_ERROR(TINYAI_ERR_CHECKSUM, "blk.0.attn_norm");
}

}  // namespace

// ---- Decoding a block at a time, and what compression costs in memory -----------

namespace streaming {

struct Source {
  const Bytes* bytes;
  int reads = 0;
  size_t largest_read = 0;
};

TinyAIStatus ReadFrom(void* ctx, uint64_t offset, size_t size, uint8_t* dst) {
  Source* s = static_cast<Source*>(ctx);
  if (offset + size > s->bytes->size()) return TINYAI_ERR_IO;
  std::memcpy(dst, s->bytes->data() + offset, size);
  ++s->reads;
  if (size > s->largest_read) s->largest_read = size;
  return TINYAI_OK;
}

}  // namespace streaming

class ZstdStreamingTest : public ZstdBadInputTest {
 protected:
  TinyAIStatus DecodeStreaming(const Bytes& stored, uint32_t f, Bytes* out, size_t bounce_size,
                               streaming::Source* src = nullptr) {
    uint64_t first = 0, count = 0;
    EXPECT_EQ(tinyai::ZstdFrameRows(e_, f, &first, &count), TINYAI_OK);
    out->assign(static_cast<size_t>(count * 4096), 0);
    Bytes bounce(bounce_size, 0xCD);
    streaming::Source local{&stored};
    streaming::Source* s = src ? src : &local;
    s->bytes = &stored;
    tinyaiClearLastError();
    return dec_.DecodeFrameStreaming(e_, f, &streaming::ReadFrom, s, table_[f],
                                     static_cast<size_t>(table_[f + 1] - table_[f]), bounce.data(), bounce.size(),
                                     out->data(), out->size(), "bad.tmai");
  }
};

// The writer's frames have 16 KiB blocks: a 16 KiB buffer decodes every
// frame, read a block at a time, to the bytes written.
TEST_F(ZstdStreamingTest, EveryFrameDecodesThroughASixteenKiBBuffer) {
  const size_t bound = tinyai::ZstdFrameBlockBound(stored_.data() + table_[0], 18);
  EXPECT_EQ(bound, size_t{1} << TmaiWriter::kZstdWindowLog);
  for (uint32_t f = 0; f < 3; ++f) {
    Bytes out;
    streaming::Source src{&stored_};
    ASSERT_EQ(DecodeStreaming(stored_, f, &out, bound, &src), TINYAI_OK) << LastMessage();
    EXPECT_EQ(std::memcmp(out.data(), data_.data() + size_t{f} * 256 * 4096, out.size()), 0) << "frame " << f;
    EXPECT_LE(src.largest_read, bound);
    EXPECT_GT(src.reads, 2);
  }
}

TEST_F(ZstdStreamingTest, FlippedBytesTruncationAndOversizedBlocksAreErrors) {
  const uint32_t f = 1;
  const size_t begin = static_cast<size_t>(table_[f]), end = static_cast<size_t>(table_[f + 1]);
  Bytes want;
  ASSERT_EQ(DecodeStreaming(stored_, f, &want, 16384), TINYAI_OK) << LastMessage();
  int errors = 0;
  const size_t step = (end - begin) / 300 + 1;
  for (size_t at = begin; at < end; at += (at < begin + 64 || at + 64 > end) ? 1 : step) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0xFF}}) {
      Bytes corrupt = stored_;
      corrupt[at] ^= mask;
      Bytes out;
      const TinyAIStatus s = DecodeStreaming(corrupt, f, &out, 16384);
      if (s == TINYAI_OK) {
        EXPECT_TRUE(out == want) << "byte " << at - begin << ": wrong rows decoded as OK";
      } else {
        ++errors;
        EXPECT_TRUE(s == TINYAI_ERR_BAD_FORMAT || s == TINYAI_ERR_CHECKSUM) << tinyaiStatusString(s);
        EXPECT_TRUE(tt::Contains(LastMessage(), "blk.0.attn_q")) << LastMessage();
      }
    }
  }
  EXPECT_GT(errors, 0);
  // A buffer smaller than the frame's blocks.
  Bytes out;
  EXPECT_EQ(DecodeStreaming(stored_, f, &out, 32), TINYAI_ERR_BAD_FORMAT);
  EXPECT_LAST_ERROR(TINYAI_ERR_BAD_FORMAT, "has a block of");
  // Cut short, or a source that fails.
  uint64_t first = 0, count = 0;
  ASSERT_EQ(tinyai::ZstdFrameRows(e_, f, &first, &count), TINYAI_OK);
  out.assign(static_cast<size_t>(count * 4096), 0);
  Bytes bounce(16384);
  streaming::Source src{&stored_};
  EXPECT_EQ(dec_.DecodeFrameStreaming(e_, f, &streaming::ReadFrom, &src, table_[f], end - begin - 7, bounce.data(),
                                      bounce.size(), out.data(), out.size(), "bad.tmai"),
            TINYAI_ERR_BAD_FORMAT);
  EXPECT_LAST_ERROR(TINYAI_ERR_BAD_FORMAT, "runs past its");
  Bytes short_file(stored_.begin(), stored_.begin() + static_cast<long>(begin + 100));
  src.bytes = &short_file;
  EXPECT_EQ(dec_.DecodeFrameStreaming(e_, f, &streaming::ReadFrom, &src, table_[f], end - begin, bounce.data(),
                                      bounce.size(), out.data(), out.size(), "bad.tmai"),
            TINYAI_ERR_IO);
}

// Writing compressed holds a frame at a time, not the tensor (a 98 MB
// classifier once took twice its size).
TEST_F(ZstdTest, WritingCompressedHoldsAFrameNotATensor) {
  const std::string path = dir_.File("big.tmai");
  TmaiWriter w;
  w.SetCompression(TINYAI_CODEC_ZSTD, 3);
  w.AddMetaString("general.architecture", "test");
  w.AddLayer(TINYAI_LAYER_DENSE, -1);
  const uint64_t rows = 4096, cols = 2048;  // 32 MiB of floats
  ASSERT_GE(w.AddTensor("big", TINYAI_ROLE_OTHER, TINYAI_DTYPE_F32, {rows, cols}), 0);
  ASSERT_GE(w.AddTensor("small", TINYAI_ROLE_OTHER, TINYAI_DTYPE_F32, {cols}), 0);
  ASSERT_EQ(w.Open(path.c_str()), TINYAI_OK) << LastMessage();
  const Bytes chunk = Compressible(3 * 4096 + 12, 9);  // chunks that straddle frames
  uint64_t left = rows * cols * 4 + cols * 4;
  while (left > 0) {
    const size_t n = left < chunk.size() ? static_cast<size_t>(left) : chunk.size();
    ASSERT_EQ(w.Write(chunk.data(), n), TINYAI_OK) << LastMessage();
    left -= n;
  }
  ASSERT_EQ(w.Finish(), TINYAI_OK) << LastMessage();
  EXPECT_EQ(w.stats().compressed_tensors, 2u);
  EXPECT_LE(w.peak_buffer_bytes(), 3u * tmai::kDefaultRowSliceBytes) << "about two frames";
  // And the file opens, every tensor's checksum verified as it loads.
  TinyAIMappedModel* m = tinyaiOpenMappedModel(path.c_str(), nullptr);
  ASSERT_NE(m, nullptr) << LastMessage();
  for (int l = 0; l < tinyaiGetMappedLayerCount(m); ++l) {
    ASSERT_NE(tinyaiGetLayerWeights(m, l), nullptr) << LastMessage();
    tinyaiReleaseLayerWeights(m, l);
  }
  tinyaiCloseMappedModel(m);
}

// What zstd costs a runner beside the same model uncompressed: one decoding
// context and one 16 KiB block buffer (the tables), not a frame-sized
// staging buffer per thread; and under a limit that holds every weight, the
// compressed model keeps them resident as the plain one does.
TEST_F(ZstdTest, ACompressedModelNeedsAtMostOneDecoderMoreThanThePlainOne) {
  tinyai::LlamaShape shape = tt::TinyShape();
  shape.dim = 128;
  shape.hidden_dim = 384;
  shape.vocab_size = 1024;
  const std::string plain = dir_.File("plain.tmai"), packed = dir_.File("packed.tmai");
  ASSERT_EQ(tt::WriteTinyModel(plain, shape), TINYAI_OK) << LastMessage();
  tinyai::WriteOptions zstd;
  zstd.codec = TINYAI_CODEC_ZSTD;
  ASSERT_EQ(tinyai::WriteSyntheticModel(shape, packed.c_str(), zstd), TINYAI_OK) << LastMessage();
  TinyAIMemoryReport est[2];
  for (int i = 0; i < 2; ++i) {
    TinyAIMappedModel* m = tinyaiOpenMappedModel((i ? packed : plain).c_str(), nullptr);
    ASSERT_NE(m, nullptr) << LastMessage();
    std::memset(&est[i], 0, sizeof est[i]);
    est[i].structSize = sizeof est[i];
    ASSERT_EQ(tinyaiEstimateLLMMemory(m, nullptr, &est[i]), TINYAI_OK) << LastMessage();
    tinyaiCloseMappedModel(m);
  }
  const uint64_t decoder = ZSTD_estimateDCtxSize() + 16384 + 8192;  // context, block buffer, page rounding
  EXPECT_LE(est[1].otherBytes, est[0].otherBytes + decoder);
  EXPECT_LE(est[1].minimumMemoryLimit, est[0].minimumMemoryLimit + decoder);
  // A limit with room for every weight: resident, nothing evicted.
  TinyAIMappedModel* m = tinyaiOpenMappedModel(packed.c_str(), nullptr);
  ASSERT_NE(m, nullptr);
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  Bytes plain_file;
  ASSERT_TRUE(tt::ReadFileBytes(plain, &plain_file));
  cfg.memoryLimit = static_cast<size_t>(est[0].minimumMemoryLimit + decoder) + plain_file.size();  // every weight fits
  TinyAILLM* llm = nullptr;
  ASSERT_EQ(tinyaiCreateLLM(m, &cfg, &llm), TINYAI_OK) << LastMessage();
  TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
  gp.maxNewTokens = 30;
  ASSERT_EQ(tinyaiLLMGenerate(llm, "ab", &gp, nullptr, 0, nullptr, nullptr), TINYAI_OK) << LastMessage();
  EXPECT_EQ(tt::CacheStats(m).evictions, 0u);
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(m);
}
