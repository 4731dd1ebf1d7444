// tinyai-convert --from gguf (import/gguf_import.h) on files the tests write
// from the published specification (import/gguf_writer.h): stories260K from
// its llama2.c checkpoint and the default model, in F32, F16, Q8_0 and Q4_0,
// give the same greedy text and logits as the llama2.c import (F32 bit for
// bit; F16 bit for bit against --dtype f16; Q8_0 and Q4_0 blocks copied, the
// values the specification defines, and bit for bit the logits of TinyAI's
// own quantization when the blocks are its own); and every rule of the
// parser and the importer refuses a bad file with its own status, naming
// the field, writing nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/half.h"
#include "format/test_models.h"
#include "import/gguf.h"
#include "import/gguf_writer.h"
#include "import/llama_source.h"
#include "import/run_model.h"
#include "import/model_builder.h"
#include "kernels/kernels.h"
#include "require_shared.h"
#include "tinyai/llm.h"
#include "tinyai/tinyai.h"
#include "tinyai/utils/mmap_loader.h"

namespace tt = tinyai::testing;

namespace {

using tt::Greedy;
using tt::LogitsOf;
using tt::SameBits;

// Writes source as GGUF to path.
void WriteGguf(const tt::LlamaSource& source, const tt::GgufModelOptions& options, const std::string& path) {
  tt::GgufWriter w;
  std::string error;
  ASSERT_TRUE(tt::GgufFromSource(source, options, &w, &error)) << error;
  ASSERT_TRUE(w.WriteFile(path, options.version, options.alignment)) << path;
}

// Converts gguf; a file it converts also runs read in place, as converted.
TinyAIStatus Convert(const std::string& gguf, const std::string& out) {
  tinyaiClearLastError();
  const TinyAIStatus s = tinyai::ConvertGguf(gguf.c_str(), out.c_str(), nullptr);
  if (s != TINYAI_OK) return s;
  tt::ExpectInPlaceAgrees(gguf, out);
  return s;
}

// The stored bytes of a tensor and its dtype.
std::vector<uint8_t> StoredBytes(const std::string& path, const char* name, TinyAIDType* dtype) {
  TinyAIMappedModel* m = tinyaiOpenMappedModel(path.c_str(), nullptr);
  EXPECT_NE(m, nullptr) << tt::LastMessage();
  if (m == nullptr) return {};
  int32_t t = -1;
  TinyAITensorInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  EXPECT_EQ(tinyaiFindMappedTensor(m, name, &t), TINYAI_OK);
  EXPECT_EQ(tinyaiGetMappedTensorInfo(m, t, &info), TINYAI_OK);
  const uint8_t* base = static_cast<const uint8_t*>(tinyaiGetLayerWeights(m, info.layer));
  std::vector<uint8_t> out(base + info.offsetInLayer, base + info.offsetInLayer + info.decodedSize);
  tinyaiReleaseLayerWeights(m, info.layer);
  *dtype = info.dtype;
  tinyaiCloseMappedModel(m);
  return out;
}

const char kStoriesText[] = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.";
const char kFortuneText[] = "A man who is never wrong about anything will never learn a thing.";

class GgufStories : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = tt::StoriesDir();
    if (dir.empty()) TINYAI_SKIP_WITHOUT_SHARED("stories260K not found under " << tt::Env("TINYAI_SHARED_DIR"));
    ckpt_ = dir + "/stories260K.bin";
    tok_ = dir + "/tok512.bin";
    std::string error;
    ASSERT_TRUE(tt::LoadLlama2c(ckpt_, tok_, &source_, &error)) << error;
    source_.name = "stories260K";
    for (TinyAIDType d : {TINYAI_DTYPE_F32, TINYAI_DTYPE_F16}) {
      tinyai::WriteOptions o;
      o.matrix_dtype = d;
      ASSERT_EQ(tinyai::ConvertLlama2c(ckpt_.c_str(), tok_.c_str(), Llama2c(d).c_str(), nullptr, o), TINYAI_OK)
          << tt::LastMessage();
    }
  }
  std::string Llama2c(TinyAIDType d) const { return dir_.File(std::string("llama2c-") + tinyaiDTypeName(d) + ".tmai"); }

  tt::TempDir dir_;
  std::string ckpt_, tok_;
  tt::LlamaSource source_;
};

// F32 and F16 GGUF files give the llama2.c import's logits bit for bit
// (F16: the llama2.c import with --dtype f16, the same rounding) and its
// greedy text; the vocabulary, hyper-parameters and provenance come across.
TEST_F(GgufStories, FloatFilesMatchTheLlama2cImport) {
  for (uint32_t type : {tt::kGgmlF32, tt::kGgmlF16}) {
    SCOPED_TRACE(type == tt::kGgmlF32 ? "F32" : "F16");
    tt::GgufModelOptions o;
    o.matrix_type = type;
    const std::string gguf = dir_.File("stories.gguf"), out = dir_.File("from-gguf.tmai");
    WriteGguf(source_, o, gguf);
    ASSERT_EQ(Convert(gguf, out), TINYAI_OK) << tt::LastMessage();
    const std::string ref = Llama2c(type == tt::kGgmlF32 ? TINYAI_DTYPE_F32 : TINYAI_DTYPE_F16);
    EXPECT_TRUE(SameBits(LogitsOf(out, kStoriesText), LogitsOf(ref, kStoriesText)));
    const std::string text = Greedy(out, "Once upon a time", 120);
    EXPECT_EQ(text, Greedy(ref, "Once upon a time", 120));
    EXPECT_GT(text.size(), 100u);

    tt::LlamaSource back;
    std::string error;
    ASSERT_TRUE(tt::LoadTmai(out, &back, &error)) << error;
    EXPECT_EQ(back.name, "stories260K");
    EXPECT_EQ(back.params.dim, source_.params.dim);
    EXPECT_EQ(back.params.kv_heads, source_.params.kv_heads);
    EXPECT_EQ(back.params.hidden_dim, source_.params.hidden_dim);
    ASSERT_EQ(back.pieces.size(), source_.pieces.size());
    for (size_t i = 3; i < back.pieces.size(); ++i) EXPECT_EQ(back.pieces[i], source_.pieces[i]) << i;  // U+2581 as a space
    EXPECT_EQ(back.pieces[1], "<s>");  // GGUF's spelling of BOS (llama2.c's export writes "\n<s>\n")
    EXPECT_EQ(back.scores, source_.scores);
    TinyAIMappedModel* m = tinyaiOpenMappedModel(out.c_str(), nullptr);
    ASSERT_NE(m, nullptr);
    const char* v = nullptr;
    size_t n = 0;
    ASSERT_EQ(tinyaiGetMetadataString(m, "general.source_format", &v, &n), TINYAI_OK);
    EXPECT_EQ(std::string(v, n), "gguf");
    ASSERT_EQ(tinyaiGetMetadataString(m, "general.source_file", &v, &n), TINYAI_OK);
    EXPECT_EQ(std::string(v, n), "stories.gguf");
    tinyaiCloseMappedModel(m);
    std::remove(out.c_str());
  }
}

// Q8_0 and Q4_0 blocks made by llama.cpp's reference quantizers are copied
// as they are (q8_g32, q4_g32), and TinyAI reads from them the values the
// specification defines (Q4_0: element j in the low nibble, j + 16 in the
// high one; d * (q - 8)). stories260K's FFN-down rows (172 values) stay F32,
// as llama.cpp's converters leave them. The models generate text.
TEST_F(GgufStories, BlockFilesAreCopiedAndReadAsSpecified) {
  for (uint32_t type : {tt::kGgmlQ8_0, tt::kGgmlQ4_0}) {
    SCOPED_TRACE(type == tt::kGgmlQ8_0 ? "Q8_0" : "Q4_0");
    tt::GgufModelOptions o;
    o.matrix_type = type;
    const std::string gguf = dir_.File("stories.gguf"), out = dir_.File("from-gguf.tmai");
    WriteGguf(source_, o, gguf);
    ASSERT_EQ(Convert(gguf, out), TINYAI_OK) << tt::LastMessage();
    for (const char* name : {"token_embd", "blk.0.attn_q", "blk.4.ffn_up", "blk.2.attn_k", "blk.1.ffn_down"}) {
      SCOPED_TRACE(name);
      const std::vector<float> values = source_.tensor(name);
      const bool blocks = std::string(name) != "blk.1.ffn_down";
      TinyAIDType dtype;
      const std::vector<uint8_t> stored = StoredBytes(out, name, &dtype);
      if (!blocks) {
        EXPECT_EQ(dtype, TINYAI_DTYPE_F32);
        continue;
      }
      EXPECT_EQ(dtype, type == tt::kGgmlQ8_0 ? TINYAI_DTYPE_Q8_G32 : TINYAI_DTYPE_Q4_G32);
      const size_t cols = static_cast<size_t>(source_.params.dim), rows = values.size() / cols;
      const std::vector<uint8_t> file = type == tt::kGgmlQ8_0 ? tt::EncodeQ8_0(values.data(), rows, cols)
                                                              : tt::EncodeQ4_0(values.data(), rows, cols);
      ASSERT_EQ(stored, file);
      const tinyai::kernels::WeightKernels* wk = tinyai::kernels::WeightKernelsFor(tinyai::kernels::Ref(), dtype);
      const size_t block = type == tt::kGgmlQ8_0 ? 34 : 18, row_bytes = cols / 32 * block;
      std::vector<float> row(cols);
      for (size_t r = 0; r < rows; ++r) {
        wk->dequantize_row(stored.data() + r * row_bytes, row.data(), cols);
        for (size_t c = 0; c < cols; ++c) {
          const uint8_t* b = file.data() + r * row_bytes + c / 32 * block;
          const float want = type == tt::kGgmlQ8_0 ? tt::DecodeQ8_0(b, static_cast<int>(c % 32))
                                                   : tt::DecodeQ4_0(b, static_cast<int>(c % 32));
          ASSERT_EQ(row[c], want) << "row " << r << " col " << c;
        }
      }
    }
    const std::string text = Greedy(out, "Once upon a time", 60);
    EXPECT_GT(text.size(), 60u);
  }
}

// A file whose Q8_0 / Q4_0 / IQ4_NL blocks are TinyAI's own quantization
// (the default model and stories260K quantized by tinyai-convert --dtype,
// the blocks copied into GGUF) gives exactly the logits of that quantized
// model: the same scales, the same codes, the same products.
TEST_F(GgufStories, TinyAIsOwnBlocksGiveItsLogits) {
  for (TinyAIDType d : {TINYAI_DTYPE_Q8_G32, TINYAI_DTYPE_Q4_G32, TINYAI_DTYPE_Q4NL_G32, TINYAI_DTYPE_Q5_G32,
                        TINYAI_DTYPE_Q5M_G32}) {
    SCOPED_TRACE(tinyaiDTypeName(d));
    const std::string quantized = dir_.File("quantized.tmai"), gguf = dir_.File("q.gguf"), out = dir_.File("q.tmai");
    tinyai::WriteOptions w;
    w.matrix_dtype = d;
    ASSERT_EQ(tinyai::ReencodeModel(TINYAI_TEST_DEFAULT_MODEL, quantized.c_str(), w, false), TINYAI_OK)
        << tt::LastMessage();
    tt::LlamaSource q;
    std::string error;
    ASSERT_TRUE(tt::LoadTmai(quantized, &q, &error)) << error;
    tt::GgufModelOptions o;
    o.matrix_type = tt::GgufModelOptions::kStored;
    WriteGguf(q, o, gguf);
    ASSERT_EQ(Convert(gguf, out), TINYAI_OK) << tt::LastMessage();
    EXPECT_TRUE(SameBits(LogitsOf(out, kFortuneText), LogitsOf(quantized, kFortuneText)));
    EXPECT_EQ(Greedy(out, "A man", 80), Greedy(quantized, "A man", 80));
  }
}

// The default model (grouped-query attention, its own 1,024-piece
// vocabulary) written as a llama2.c checkpoint and as GGUF: both imports
// give the same logits and text, and the model's own.
TEST(GgufDefaultModel, MatchesItsLlama2cImport) {
  tt::TempDir dir;
  tt::LlamaSource source;
  std::string error;
  ASSERT_TRUE(tt::LoadTmai(TINYAI_TEST_DEFAULT_MODEL, &source, &error)) << error;
  ASSERT_LT(source.params.kv_heads, source.params.heads);
  const std::string ckpt = dir.File("m.bin"), tok = dir.File("tok.bin"), via_llama2c = dir.File("llama2c.tmai");
  ASSERT_TRUE(tt::WriteLlama2c(source, ckpt, tok, &error)) << error;
  ASSERT_EQ(tinyai::ConvertLlama2c(ckpt.c_str(), tok.c_str(), via_llama2c.c_str(), nullptr), TINYAI_OK)
      << tt::LastMessage();
  const std::string gguf = dir.File("m.gguf"), out = dir.File("gguf.tmai");
  WriteGguf(source, tt::GgufModelOptions(), gguf);
  ASSERT_EQ(Convert(gguf, out), TINYAI_OK) << tt::LastMessage();
  const std::vector<float> logits = LogitsOf(out, kFortuneText);
  EXPECT_TRUE(SameBits(logits, LogitsOf(via_llama2c, kFortuneText)));
  EXPECT_TRUE(SameBits(logits, LogitsOf(TINYAI_TEST_DEFAULT_MODEL, kFortuneText)));
  EXPECT_EQ(Greedy(out, "A man", 100), Greedy(via_llama2c, "A man", 100));
}

// A separate classifier ("output.weight"), version 2, another alignment, no
// token types: the same logits as the .tmai the file was written from.
TEST(GgufSynthetic, SeparateClassifierVersion2AndAlignment) {
  tt::TempDir dir;
  tinyai::LlamaShape shape;
  ASSERT_EQ(tinyai::ParseSyntheticSpec("dim=64,hidden=96,layers=2,heads=4,kv_heads=2,vocab=300,seq_len=32,shared=0,seed=5",
                                       &shape),
            TINYAI_OK);
  const std::string model = dir.File("synthetic.tmai");
  ASSERT_EQ(tinyai::WriteSyntheticModel(shape, model.c_str()), TINYAI_OK) << tt::LastMessage();
  tt::LlamaSource source;
  std::string error;
  ASSERT_TRUE(tt::LoadTmai(model, &source, &error)) << error;
  ASSERT_FALSE(source.params.shared_classifier);
  const std::vector<float> want = LogitsOf(model, "ab cd ef");
  for (uint32_t version : {2u, 3u}) {
    for (uint64_t alignment : {32u, 64u, 4096u}) {
      SCOPED_TRACE(std::to_string(version) + " / " + std::to_string(alignment));
      tt::GgufModelOptions o;
      o.version = version;
      o.alignment = alignment;
      o.token_types = alignment != 64;
      const std::string gguf = dir.File("s.gguf"), out = dir.File("s.tmai");
      WriteGguf(source, o, gguf);
      ASSERT_EQ(Convert(gguf, out), TINYAI_OK) << tt::LastMessage();
      EXPECT_TRUE(SameBits(LogitsOf(out, "ab cd ef"), want));
    }
  }
}

// Q4_K, Q5_K and Q6_K blocks (a model of rows of 256 encoded by TinyAI,
// written as GGUF) import as copies: the same bytes, the same logits.
TEST(GgufSynthetic, KQuantBlocksImportAsCopies) {
  tt::TempDir dir;
  tinyai::LlamaShape shape;
  ASSERT_EQ(tinyai::ParseSyntheticSpec("dim=256,hidden=512,layers=2,heads=4,kv_heads=2,vocab=300,seq_len=32,shared=0,"
                                       "seed=6", &shape),
            TINYAI_OK);
  for (TinyAIDType d : {TINYAI_DTYPE_Q4_K, TINYAI_DTYPE_Q5_K, TINYAI_DTYPE_Q6_K}) {
    SCOPED_TRACE(tinyaiDTypeName(d));
    const std::string model = dir.File("k.tmai"), gguf = dir.File("k.gguf"), out = dir.File("k-in.tmai");
    tinyai::WriteOptions w;
    w.matrix_dtype = d;
    ASSERT_EQ(tinyai::WriteSyntheticModel(shape, model.c_str(), w), TINYAI_OK) << tt::LastMessage();
    tt::LlamaSource source;
    std::string error;
    ASSERT_TRUE(tt::LoadTmai(model, &source, &error)) << error;
    tt::GgufModelOptions o;
    o.matrix_type = tt::GgufModelOptions::kStored;
    WriteGguf(source, o, gguf);
    ASSERT_EQ(Convert(gguf, out), TINYAI_OK) << tt::LastMessage();
    tt::LlamaSource back;
    ASSERT_TRUE(tt::LoadTmai(out, &back, &error)) << error;
    int32_t dtype = 0;
    std::vector<uint8_t> a, b;
    ASSERT_TRUE(source.stored("blk.1.ffn_down", &dtype, &a));
    EXPECT_EQ(dtype, d);
    ASSERT_TRUE(back.stored("blk.1.ffn_down", &dtype, &b));
    EXPECT_EQ(dtype, d);
    EXPECT_EQ(a, b);
    EXPECT_TRUE(SameBits(LogitsOf(out, "ab cd ef"), LogitsOf(model, "ab cd ef")));
  }
}

// BF16 matrices and F16 norms are widened to f32 exactly: the imported
// values are the file's, and the model runs.
TEST(GgufSynthetic, Bf16AndF16NormsAreWidenedExactly) {
  tt::TempDir dir;
  tinyai::LlamaShape shape;
  ASSERT_EQ(tinyai::ParseSyntheticSpec("dim=32,hidden=48,layers=2,heads=2,kv_heads=1,vocab=270,seq_len=16,seed=9", &shape),
            TINYAI_OK);
  const std::string model = dir.File("m.tmai");
  ASSERT_EQ(tinyai::WriteSyntheticModel(shape, model.c_str()), TINYAI_OK) << tt::LastMessage();
  tt::LlamaSource source, back;
  std::string error;
  ASSERT_TRUE(tt::LoadTmai(model, &source, &error)) << error;
  tt::GgufModelOptions o;
  o.matrix_type = tt::kGgmlBF16;
  o.norm_type = tt::kGgmlF16;  // norms in half: widened to f32 (the runtime reads norms as f32)
  const std::string gguf = dir.File("b.gguf"), out = dir.File("b.tmai");
  WriteGguf(source, o, gguf);
  ASSERT_EQ(Convert(gguf, out), TINYAI_OK) << tt::LastMessage();
  ASSERT_TRUE(tt::LoadTmai(out, &back, &error)) << error;
  for (const tt::TensorName& t : tt::LlamaTensors(source.params)) {
    const std::vector<float> original = source.tensor(t.name), imported = back.tensor(t.name);
    ASSERT_EQ(original.size(), imported.size()) << t.name;
    TinyAIDType dtype;
    StoredBytes(out, t.name.c_str(), &dtype);
    EXPECT_EQ(dtype, TINYAI_DTYPE_F32) << t.name;
    const std::vector<uint8_t> bf16 = t.matrix ? tt::EncodeBF16(original.data(), original.size()) : std::vector<uint8_t>();
    for (size_t i = 0; i < original.size(); ++i) {
      float want = tinyai::HalfToFloat(tinyai::FloatToHalf(original[i]));
      if (t.matrix) {
        const uint32_t bits = static_cast<uint32_t>(bf16[2 * i] | bf16[2 * i + 1] << 8) << 16;
        std::memcpy(&want, &bits, 4);
      }
      ASSERT_EQ(imported[i], want) << t.name << " " << i;
    }
  }
  const std::vector<float> logits = LogitsOf(out, "ab");
  ASSERT_FALSE(logits.empty());
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

// ---- Bad files -------------------------------------------------------------

// A small valid model as a GGUF writer, to break one rule at a time.
class GgufBad : public ::testing::Test {
 protected:
  void SetUp() override {
    tinyai::LlamaShape shape;
    ASSERT_EQ(tinyai::ParseSyntheticSpec("dim=32,hidden=64,layers=1,heads=2,kv_heads=1,vocab=260,seq_len=8,seed=3", &shape),
              TINYAI_OK);
    model_ = dir_.File("tiny.tmai");
    ASSERT_EQ(tinyai::WriteSyntheticModel(shape, model_.c_str()), TINYAI_OK) << tt::LastMessage();
    std::string error;
    ASSERT_TRUE(tt::LoadTmai(model_, &source_, &error)) << error;
  }
  // The file with `edit` applied to the writer first, as bytes.
  std::vector<uint8_t> Build(const std::function<void(tt::GgufWriter*)>& edit = nullptr, uint32_t version = 3) {
    tt::GgufWriter w;
    std::string error;
    EXPECT_TRUE(tt::GgufFromSource(source_, tt::GgufModelOptions(), &w, &error)) << error;
    if (edit) edit(&w);
    return w.Finish(version);
  }
  // Converts bytes: the status, with the message checked to hold `says` and
  // nothing written.
  void Expect(const std::vector<uint8_t>& bytes, TinyAIStatus want, const std::string& says) {
    const std::string in = dir_.File("bad.gguf"), out = dir_.File("bad.tmai");
    ASSERT_TRUE(tt::WriteFileBytes(in, bytes));
    std::remove(out.c_str());
    const TinyAIStatus s = Convert(in, out);
    EXPECT_EQ(s, want) << tinyaiStatusString(s) << ": " << tt::LastMessage();
    EXPECT_EQ(tinyaiGetLastError(), s);
    EXPECT_NE(std::string(tt::LastMessage()).find(says), std::string::npos) << tt::LastMessage();
    EXPECT_FALSE(tt::FileExists(out)) << "a refused file left an output";
    // Read in place, it is refused too (when it is opened, or when a
    // runner is made on it).
    const std::string message = tt::LastMessage();
    EXPECT_NE(tt::OpenStatus(in), TINYAI_OK) << "read in place, a GGUF the import refuses (" << message << ") runs";
  }
  // Parses bytes from a buffer of exactly their size (ASan sees any read
  // past it): the status.
  static TinyAIStatus ParseExact(const std::vector<uint8_t>& bytes) {
    std::unique_ptr<uint8_t[]> exact(new uint8_t[bytes.size() ? bytes.size() : 1]);
    if (!bytes.empty()) std::memcpy(exact.get(), bytes.data(), bytes.size());
    tinyai::gguf::File f;
    return tinyai::gguf::Parse(exact.get(), bytes.size(), "exact", &f);
  }

  tt::TempDir dir_;
  std::string model_;
  tt::LlamaSource source_;
};

TEST_F(GgufBad, TheValidFileConverts) {
  const std::string in = dir_.File("ok.gguf"), out = dir_.File("ok.tmai");
  ASSERT_TRUE(tt::WriteFileBytes(in, Build()));
  EXPECT_EQ(Convert(in, out), TINYAI_OK) << tt::LastMessage();
  EXPECT_TRUE(SameBits(LogitsOf(out, "abc"), LogitsOf(model_, "abc")));
}

// Every prefix of a valid file is refused (truncated), never read past.
TEST_F(GgufBad, EveryTruncationIsRefused) {
  const std::vector<uint8_t> file = Build();
  tinyai::gguf::File parsed;
  ASSERT_EQ(tinyai::gguf::Parse(file.data(), file.size(), "whole", &parsed), TINYAI_OK) << tt::LastMessage();
  const uint64_t data_end = parsed.tensors.back().offset + parsed.tensors.back().bytes;
  for (size_t n = 0; n < file.size(); n += (n < 4096 ? 1 : 61)) {
    const std::vector<uint8_t> prefix(file.begin(), file.begin() + static_cast<long>(n));
    const TinyAIStatus s = ParseExact(prefix);
    if (n >= data_end) {
      EXPECT_EQ(s, TINYAI_OK) << n;
      continue;
    }
    EXPECT_TRUE(s == TINYAI_ERR_TRUNCATED || s == TINYAI_ERR_OUT_OF_BOUNDS || s == TINYAI_ERR_BAD_MAGIC)
        << n << ": " << tinyaiStatusString(s) << " " << tt::LastMessage();
  }
  Expect(std::vector<uint8_t>(file.begin(), file.end() - 100), TINYAI_ERR_OUT_OF_BOUNDS, "lies outside the data section");
}

TEST_F(GgufBad, MagicAndVersion) {
  std::vector<uint8_t> f = Build();
  f[0] = 'X';
  Expect(f, TINYAI_ERR_BAD_MAGIC, "not a GGUF file");
  Expect(Build(nullptr, 1), TINYAI_ERR_UNSUPPORTED_VERSION, "GGUF version 1");
  Expect(Build(nullptr, 4), TINYAI_ERR_UNSUPPORTED_VERSION, "GGUF version 4");
  f = Build();
  std::swap(f[4], f[7]);  // version 3 written big-endian
  Expect(f, TINYAI_ERR_UNSUPPORTED_VERSION, "big-endian");
}

// Counts, lengths and sizes the file cannot hold, or that overflow 64 bits.
TEST_F(GgufBad, CountsLengthsAndSizes) {
  std::vector<uint8_t> f = Build();
  const uint64_t huge = UINT64_MAX / 2;
  std::vector<uint8_t> g = f;
  std::memcpy(g.data() + 8, &huge, 8);  // tensor count
  Expect(g, TINYAI_ERR_TRUNCATED, "tensors cannot fit");
  g = f;
  std::memcpy(g.data() + 16, &huge, 8);  // key count
  Expect(g, TINYAI_ERR_TRUNCATED, "keys cannot fit");
  g = f;
  std::memcpy(g.data() + 24, &huge, 8);  // the first key's name length
  Expect(g, TINYAI_ERR_TRUNCATED, "the name of key 0");
  // An array whose count overflows 64 bits in bytes.
  std::vector<uint8_t> value(12);
  const uint32_t u32 = 4;
  std::memcpy(value.data(), &u32, 4);
  const uint64_t count = UINT64_MAX / 2;
  std::memcpy(value.data() + 4, &count, 8);
  Expect(Build([&](tt::GgufWriter* w) { w->AddRaw("general.big", 9, value); }), TINYAI_ERR_OVERFLOW, "general.big");
  // An array of strings longer than the file.
  const uint32_t str = 8;
  std::memcpy(value.data(), &str, 4);
  const uint64_t strings = 1000000;
  std::memcpy(value.data() + 4, &strings, 8);
  Expect(Build([&](tt::GgufWriter* w) { w->AddRaw("general.strings", 9, value); }), TINYAI_ERR_TRUNCATED,
         "general.strings");
  // Dimensions whose product overflows.
  Expect(Build([](tt::GgufWriter* w) {
           w->AddTensor("extra", {1ull << 33, 1ull << 33}, tt::kGgmlF32, std::vector<uint8_t>(4));
         }),
         TINYAI_ERR_OVERFLOW, "'extra'");
}

TEST_F(GgufBad, KeysAndValues) {
  Expect(Build([](tt::GgufWriter* w) { w->AddUint32("llama.block_count", 1); }), TINYAI_ERR_BAD_FORMAT,
         "key 'llama.block_count' appears twice");
  Expect(Build([](tt::GgufWriter* w) { w->AddRaw("general.x", 13, {}); }), TINYAI_ERR_BAD_FORMAT, "unknown value type 13");
  Expect(Build([](tt::GgufWriter* w) { w->AddRaw("general.x", 9, {9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}); }),
         TINYAI_ERR_BAD_FORMAT, "array of arrays");
  Expect(Build([](tt::GgufWriter* w) { w->AddRaw("", 4, {0, 0, 0, 0}); }), TINYAI_ERR_BAD_FORMAT, "empty name");
  Expect(Build([](tt::GgufWriter* w) { w->AddUint32("general.alignment", 48); }), TINYAI_ERR_BAD_FORMAT,
         "general.alignment 48");
}

TEST_F(GgufBad, Tensors) {
  // The same name twice.
  Expect(Build([](tt::GgufWriter* w) { w->AddTensor("output_norm.weight", {32}, tt::kGgmlF32, std::vector<uint8_t>(128)); }),
         TINYAI_ERR_BAD_FORMAT, "tensor 'output_norm.weight' appears twice");
  // 0 or 5 dimensions, a dimension of 0.
  Expect(Build([](tt::GgufWriter* w) { w->AddTensor("x", {}, tt::kGgmlF32, std::vector<uint8_t>(4)); }),
         TINYAI_ERR_BAD_FORMAT, "'x' has 0 dimensions");
  Expect(Build([](tt::GgufWriter* w) { w->AddTensor("x", {1, 1, 1, 1, 1}, tt::kGgmlF32, std::vector<uint8_t>(4)); }),
         TINYAI_ERR_BAD_FORMAT, "'x' has 5 dimensions");
  Expect(Build([](tt::GgufWriter* w) { w->AddTensor("x", {4, 0}, tt::kGgmlF32, {}); }), TINYAI_ERR_BAD_FORMAT,
         "dimension 1 of 0");
  // Types: unknown, removed, known but not read (refused by name), rows not whole blocks.
  Expect(Build([](tt::GgufWriter* w) { w->AddTensor("x", {32}, 99, std::vector<uint8_t>(4)); }), TINYAI_ERR_BAD_FORMAT,
         "ggml type unknown (99)");
  Expect(Build([](tt::GgufWriter* w) { w->AddTensor("x", {32}, 31, std::vector<uint8_t>(4)); }), TINYAI_ERR_UNSUPPORTED,
         "Q4_0_4_4");
  Expect(Build([](tt::GgufWriter* w) { w->AddTensor("x", {48}, 8, std::vector<uint8_t>(51)); }), TINYAI_ERR_BAD_FORMAT,
         "not a multiple of its blocks of 32");
  // Offsets: unaligned, outside the data, overlapping.
  Expect(Build([](tt::GgufWriter* w) { w->OverrideOffset(1, 4); }), TINYAI_ERR_BAD_FORMAT, "not a multiple of the alignment");
  Expect(Build([](tt::GgufWriter* w) { w->OverrideOffset(1, 1ull << 40); }), TINYAI_ERR_OUT_OF_BOUNDS,
         "lies outside the data section");
  Expect(Build([](tt::GgufWriter* w) { w->OverrideOffset(2, 0); }), TINYAI_ERR_BAD_FORMAT, "overlap");
}

// A Q2_K, Q3_K or IQ4_XS matrix where a LLaMA tensor belongs is refused by
// its type's name (TinyAI reads F32, F16, BF16, Q8_0, Q4_0, IQ4_NL, Q5_0,
// Q5_1, Q4_K, Q5_K and Q6_K).
TEST(GgufTypes, OtherQuantizedTypesAreRefusedByName) {
  tt::TempDir dir;
  tinyai::LlamaShape shape;
  ASSERT_EQ(tinyai::ParseSyntheticSpec("dim=256,hidden=256,layers=1,heads=4,kv_heads=2,vocab=260,seq_len=8", &shape),
            TINYAI_OK);
  const std::string model = dir.File("m.tmai");
  ASSERT_EQ(tinyai::WriteSyntheticModel(shape, model.c_str()), TINYAI_OK) << tt::LastMessage();
  tt::LlamaSource source;
  std::string error;
  ASSERT_TRUE(tt::LoadTmai(model, &source, &error)) << error;
  for (uint32_t type : {10u, 11u, 23u}) {  // Q2_K, Q3_K, IQ4_XS: 256 values a block
    tt::GgufWriter w;
    ASSERT_TRUE(tt::GgufFromSource(source, tt::GgufModelOptions(), &w, &error)) << error;
    const size_t bytes = type == 10 ? 84 : type == 11 ? 110 : 136;
    ASSERT_TRUE(w.ReplaceTensor("blk.0.ffn_gate.weight", {256, 256}, type, std::vector<uint8_t>(256 * bytes)));
    const std::string in = dir.File("k.gguf"), out = dir.File("k.tmai");
    ASSERT_TRUE(w.WriteFile(in));
    EXPECT_EQ(Convert(in, out), TINYAI_ERR_UNSUPPORTED);
    const char* name = type == 10 ? "is Q2_K" : type == 11 ? "is Q3_K" : "is IQ4_XS";
    EXPECT_NE(std::string(tt::LastMessage()).find(std::string("'blk.0.ffn_gate.weight' ") + name), std::string::npos)
        << tt::LastMessage();
    EXPECT_FALSE(tt::FileExists(out));
  }
}

TEST_F(GgufBad, ModelRules) {
  // Another architecture.
  std::vector<uint8_t> f = Build();
  const std::string llama = "llama";
  auto at = std::search(f.begin(), f.end(), llama.begin(), llama.end());
  std::memcpy(&*at, "gpt2x", 5);
  Expect(f, TINYAI_ERR_UNSUPPORTED, "architecture 'gpt2x'");
  // A missing key, a key of the wrong type.
  f = Build();
  const std::string key = "llama.embedding_length";
  at = std::search(f.begin(), f.end(), key.begin(), key.end());
  (*at) = 'x';
  Expect(f, TINYAI_ERR_BAD_FORMAT, "no key 'llama.embedding_length'");
  f = Build();
  const std::string blocks = "llama.block_count";
  at = std::search(f.begin(), f.end(), blocks.begin(), blocks.end());
  const uint32_t f32 = 6;
  std::memcpy(&*at + blocks.size(), &f32, 4);
  Expect(f, TINYAI_ERR_BAD_FORMAT, "'llama.block_count' is float32, not an integer");
  // Rope scaling, partial rotary dimensions.
  Expect(Build([](tt::GgufWriter* w) { w->AddString("llama.rope.scaling.type", "yarn"); }), TINYAI_ERR_UNSUPPORTED,
         "rope scaling 'yarn'");
  f = Build();
  const std::string rope = "llama.rope.dimension_count";
  at = std::search(f.begin(), f.end(), rope.begin(), rope.end());
  const uint32_t eight = 8;
  std::memcpy(&*at + rope.size() + 4, &eight, 4);
  Expect(f, TINYAI_ERR_UNSUPPORTED, "rotary embeddings over 8 of each head's 16");
  // A missing tensor, an unknown one, one of the wrong shape.
  f = Build();
  const std::string k = "blk.0.attn_k.weight";
  at = std::search(f.begin(), f.end(), k.begin(), k.end());
  (*at) = 'x';
  Expect(f, TINYAI_ERR_BAD_FORMAT, "no tensor 'blk.0.attn_k.weight'");
  Expect(Build([](tt::GgufWriter* w) { w->AddTensor("blk.0.attn_q.bias", {32}, 0, std::vector<uint8_t>(128)); }),
         TINYAI_ERR_UNSUPPORTED, "'blk.0.attn_q.bias' is not part of a LLaMA model");
  f = Build();
  const std::string v = "blk.0.attn_v.weight";
  at = std::search(f.begin(), f.end(), v.begin(), v.end());
  const uint64_t rows = 8;  // [32, 16] written as [32, 8]: a smaller tensor, still inside the file
  std::memcpy(&*at + v.size() + 4 + 8, &rows, 8);
  Expect(f, TINYAI_ERR_BAD_FORMAT, "'blk.0.attn_v.weight' is 2-dimensional [32, 8]; this model's is [32, 16]");
}

TEST_F(GgufBad, Vocabulary) {
  // Fewer tokens than the embedding has rows.
  tt::LlamaSource s = source_;
  s.pieces.pop_back();
  s.scores.pop_back();
  tt::GgufWriter w;
  std::string error;
  ASSERT_TRUE(tt::GgufFromSource(s, tt::GgufModelOptions(), &w, &error)) << error;
  Expect(w.Finish(), TINYAI_ERR_BAD_FORMAT, "the vocabulary has 259 tokens but 'token_embd.weight' has 260 rows");
  // llama.vocab_size against the tokens.
  Expect(Build([](tt::GgufWriter* w) { w->AddUint32("llama.vocab_size", 300); }), TINYAI_ERR_BAD_FORMAT,
         "llama.vocab_size is 300 but tokenizer.ggml.tokens has 260");
  // Scores, token types and byte pieces.
  s = source_;
  s.scores.pop_back();
  tt::GgufWriter w2;
  ASSERT_TRUE(tt::GgufFromSource(s, tt::GgufModelOptions(), &w2, &error)) << error;
  Expect(w2.Finish(), TINYAI_ERR_BAD_TOKENIZER, "260 tokens but 259 scores");
  s = source_;
  std::swap(s.pieces[10], s.pieces[11]);
  tt::GgufWriter w3;
  ASSERT_TRUE(tt::GgufFromSource(s, tt::GgufModelOptions(), &w3, &error)) << error;
  Expect(w3.Finish(), TINYAI_ERR_UNSUPPORTED, "ids 3..258");
  std::vector<uint8_t> f = Build();
  const std::string types = "tokenizer.ggml.token_type";
  auto at = std::search(f.begin(), f.end(), types.begin(), types.end());
  const int32_t control = 3;
  std::memcpy(&*at + types.size() + 4 + 4 + 8 + 4 * 5, &control, 4);  // token 5, a byte piece
  Expect(f, TINYAI_ERR_BAD_TOKENIZER, "token 5 ('<0x02>') has token type 3");
  f = Build();
  const std::string bos = "tokenizer.ggml.bos_token_id";
  at = std::search(f.begin(), f.end(), bos.begin(), bos.end());
  const uint32_t far = 1000;
  std::memcpy(&*at + bos.size() + 4, &far, 4);
  Expect(f, TINYAI_ERR_BAD_TOKENIZER, "BOS 1000 or EOS 2 is not a token (260 tokens)");
  f = Build();
  const std::string model = "tokenizer.ggml.model";
  at = std::search(f.begin(), f.end(), model.begin(), model.end());
  std::memcpy(&*at + model.size() + 4 + 8, "gpt2!", 5);
  Expect(f, TINYAI_ERR_UNSUPPORTED, "tokenizer 'gpt2!'");
}

// What the review of the importer found: a file's shape the runtime
// refuses is BAD_FORMAT (not an invalid argument); a negative BOS is the
// tokenizer's error; a vocabulary without the dummy-prefix space is
// refused; an array longer than the caller reads is refused before it is
// read.
TEST_F(GgufBad, ShapesTokenIdsAndCounts) {
  std::vector<uint8_t> f = Build();
  const std::string dim = "llama.embedding_length";
  auto at = std::search(f.begin(), f.end(), dim.begin(), dim.end());
  const uint32_t zero = 0;
  std::memcpy(&*at + dim.size() + 4, &zero, 4);
  Expect(f, TINYAI_ERR_BAD_FORMAT, "bad.gguf': ");
  f = Build();
  const std::string bos = "tokenizer.ggml.bos_token_id";
  at = std::search(f.begin(), f.end(), bos.begin(), bos.end());
  const uint32_t int32_type = 5;
  const int32_t minus_one = -1;
  std::memcpy(&*at + bos.size(), &int32_type, 4);
  std::memcpy(&*at + bos.size() + 4, &minus_one, 4);
  Expect(f, TINYAI_ERR_BAD_TOKENIZER, "BOS -1 or EOS 2 is not a token");
  // A rope base or RMS epsilon the runtime refuses (found by the fuzz target: 2.9e-35 was converted).
  f = Build();
  const std::string base = "llama.rope.freq_base";
  at = std::search(f.begin(), f.end(), base.begin(), base.end());
  const float tiny = 2.9e-35f, one = 1.0f;
  std::memcpy(&*at + base.size() + 4, &tiny, 4);
  Expect(f, TINYAI_ERR_BAD_FORMAT, "rope_theta 2.9e-35 is outside what the runtime runs");
  f = Build();
  const std::string eps = "llama.attention.layer_norm_rms_epsilon";
  at = std::search(f.begin(), f.end(), eps.begin(), eps.end());
  std::memcpy(&*at + eps.size() + 4, &one, 4);
  Expect(f, TINYAI_ERR_BAD_FORMAT, "norm_eps 1 or rope_theta 10000 is outside what the runtime runs");
  Expect(Build([](tt::GgufWriter* w) { w->AddRaw("tokenizer.ggml.add_space_prefix", 7, {0}); }), TINYAI_ERR_UNSUPPORTED,
         "add_space_prefix is false");
  ASSERT_TRUE(tt::WriteFileBytes(dir_.File("ok.gguf"), Build([](tt::GgufWriter* w) {
                w->AddRaw("tokenizer.ggml.add_space_prefix", 7, {1});
              })));
  EXPECT_EQ(Convert(dir_.File("ok.gguf"), dir_.File("ok.tmai")), TINYAI_OK) << tt::LastMessage();
  const std::vector<uint8_t> file = Build();
  tinyai::gguf::File parsed;
  ASSERT_EQ(tinyai::gguf::Parse(file.data(), file.size(), "f", &parsed), TINYAI_OK);
  std::vector<std::string> tokens;
  tinyaiClearLastError();
  EXPECT_EQ(parsed.GetStrings("tokenizer.ggml.tokens", 100, &tokens), TINYAI_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(tt::LastMessage()).find("holds 260 values; TinyAI reads at most 100"), std::string::npos)
      << tt::LastMessage();
  EXPECT_TRUE(tokens.empty());
  EXPECT_EQ(parsed.GetStrings("tokenizer.ggml.tokens", 260, &tokens), TINYAI_OK);
  EXPECT_EQ(tokens.size(), 260u);
}

// ---- Metadata that changes the numbers: honoured, or refused by name -------

// Reads a float / int metadata value of a .tmai (found: whether it is there).
bool MetaFloat(const std::string& path, const char* key, float* out) {
  TinyAIMappedModel* m = tinyaiOpenMappedModel(path.c_str(), nullptr);
  EXPECT_NE(m, nullptr) << tt::LastMessage();
  const bool found = m != nullptr && tinyaiGetMetadataFloat(m, key, out) == TINYAI_OK;
  tinyaiCloseMappedModel(m);
  return found;
}
bool MetaInt(const std::string& path, const char* key, int64_t* out) {
  TinyAIMappedModel* m = tinyaiOpenMappedModel(path.c_str(), nullptr);
  EXPECT_NE(m, nullptr) << tt::LastMessage();
  const bool found = m != nullptr && tinyaiGetMetadataInt(m, key, out) == TINYAI_OK;
  tinyaiCloseMappedModel(m);
  return found;
}

// A synthetic model with enough positions for the rotary angles to matter,
// written as GGUF with one edit at a time and imported.
class GgufMetadata : public ::testing::Test {
 protected:
  void SetUp() override {
    tinyai::LlamaShape shape;
    ASSERT_EQ(tinyai::ParseSyntheticSpec("dim=64,hidden=96,layers=2,heads=4,kv_heads=2,vocab=300,seq_len=32,seed=7",
                                         &shape),
              TINYAI_OK);
    model_ = dir_.File("m.tmai");
    ASSERT_EQ(tinyai::WriteSyntheticModel(shape, model_.c_str()), TINYAI_OK) << tt::LastMessage();
    std::string error;
    ASSERT_TRUE(tt::LoadTmai(model_, &source_, &error)) << error;
  }
  // The model written as GGUF with `edit`, imported: the .tmai's path.
  std::string Import(const std::function<void(tt::GgufWriter*)>& edit) {
    tt::GgufWriter w;
    std::string error;
    EXPECT_TRUE(tt::GgufFromSource(source_, tt::GgufModelOptions(), &w, &error)) << error;
    if (edit) edit(&w);
    const std::string in = dir_.File("m" + std::to_string(++count_) + ".gguf"), out = dir_.File("m" + std::to_string(count_) + ".tmai");
    EXPECT_TRUE(w.WriteFile(in));
    EXPECT_EQ(Convert(in, out), TINYAI_OK) << tt::LastMessage();
    return out;
  }
  // The reference logits of the source with a linear rope factor.
  std::vector<double> Reference(const std::vector<int32_t>& tokens, float factor) const {
    tt::LlamaSource scaled = source_;
    scaled.params.rope_linear_factor = factor;
    return tt::ReferenceLogits(scaled, tokens);
  }

  tt::TempDir dir_;
  std::string model_;
  tt::LlamaSource source_;
  int count_ = 0;
};

const char kRopeText[] = "ab cd ef gh ij kl mn op";
constexpr double kLogitTolerance = 2e-4;  // float logits against the double-precision reference

// A linear rope factor, said any of the ways llama.cpp reads one (a factor
// without a type is linear: llama.cpp's default type), is recorded in the
// .tmai and the forward pass divides positions by it: the logits are the
// reference's with that factor, not the unscaled ones. A factor of 1 (or 0,
// or type none) is no scaling: the unscaled logits bit for bit, and no key.
TEST_F(GgufMetadata, LinearRopeScalingIsHonoured) {
  const std::vector<int32_t> tokens = tt::TokensOf(model_, kRopeText, true);
  ASSERT_GE(tokens.size(), 8u);
  const std::vector<double> unscaled = Reference(tokens, 1.0f), scaled = Reference(tokens, 4.0f);
  const std::vector<float> plain = LogitsOf(model_, kRopeText);
  ASSERT_LT(tt::MaxDifference(plain, unscaled), kLogitTolerance);  // the reference is the runtime's model
  double apart = 0.0;
  for (size_t i = 0; i < scaled.size(); ++i) apart = std::max(apart, std::fabs(scaled[i] - unscaled[i]));
  ASSERT_GT(apart, 100 * kLogitTolerance);  // scaling changes the numbers this much
  const std::vector<std::pair<const char*, std::function<void(tt::GgufWriter*)>>> scalings = {
      {"type linear and factor", [](tt::GgufWriter* w) {
         w->AddString("llama.rope.scaling.type", "linear");
         w->AddFloat32("llama.rope.scaling.factor", 4.0f);
       }},
      {"a factor without a type", [](tt::GgufWriter* w) { w->AddFloat32("llama.rope.scaling.factor", 4.0f); }},
      {"the older scale_linear", [](tt::GgufWriter* w) { w->AddFloat32("llama.rope.scale_linear", 4.0f); }},
      {"both keys, agreeing", [](tt::GgufWriter* w) {
         w->AddFloat32("llama.rope.scale_linear", 4.0f);
         w->AddFloat32("llama.rope.scaling.factor", 4.0f);
       }},
  };
  for (const auto& c : scalings) {
    SCOPED_TRACE(c.first);
    const std::string out = Import(c.second);
    float factor = 0.0f;
    EXPECT_TRUE(MetaFloat(out, "llama.rope_linear_factor", &factor));
    EXPECT_EQ(factor, 4.0f);
    const std::vector<float> logits = LogitsOf(out, kRopeText);
    EXPECT_LT(tt::MaxDifference(logits, scaled), kLogitTolerance);
    tt::LlamaSource back;
    std::string error;
    EXPECT_TRUE(tt::LoadTmai(out, &back, &error)) << error;
    EXPECT_EQ(back.params.rope_linear_factor, 4.0f);
  }
  const std::vector<std::pair<const char*, std::function<void(tt::GgufWriter*)>>> none = {
      {"linear, factor 1", [](tt::GgufWriter* w) {
         w->AddString("llama.rope.scaling.type", "linear");
         w->AddFloat32("llama.rope.scaling.factor", 1.0f);
       }},
      {"factor 0 (llama.cpp: none)", [](tt::GgufWriter* w) { w->AddFloat32("llama.rope.scaling.factor", 0.0f); }},
      {"type none, whatever the factor", [](tt::GgufWriter* w) {
         w->AddString("llama.rope.scaling.type", "none");
         w->AddFloat32("llama.rope.scaling.factor", 4.0f);
       }},
  };
  for (const auto& c : none) {
    SCOPED_TRACE(c.first);
    const std::string out = Import(c.second);
    float factor = 0.0f;
    EXPECT_FALSE(MetaFloat(out, "llama.rope_linear_factor", &factor));
    EXPECT_TRUE(SameBits(LogitsOf(out, kRopeText), plain));
  }
}

// Llama 3's per-frequency rope factors (rope_freqs.weight, F32, half a
// head) are recorded as llama.rope_freq_factors and divide each pair's
// frequency: the logits are the reference's with those factors; factors of
// 2 everywhere are a linear factor of 2, bit for bit; a tensor of the wrong
// type, length or value is refused by name.
TEST_F(GgufMetadata, Llama3RopeFrequencyFactors) {
  const std::vector<int32_t> tokens = tt::TokensOf(model_, kRopeText, true);
  const size_t pairs = static_cast<size_t>(source_.params.head_size() / 2);
  std::vector<float> factors(pairs);
  for (size_t i = 0; i < pairs; ++i) factors[i] = i < pairs / 4 ? 1.0f : (i < pairs / 2 ? 3.5f : 8.0f);
  auto freqs = [](const std::vector<float>& f) {
    std::vector<uint8_t> bytes(f.size() * 4);
    std::memcpy(bytes.data(), f.data(), bytes.size());
    return bytes;
  };
  const std::string out = Import([&](tt::GgufWriter* w) {
    w->AddTensor("rope_freqs.weight", {pairs}, tt::kGgmlF32, freqs(factors));
  });
  tt::LlamaSource scaled = source_;
  scaled.rope_freq_factors = factors;
  const std::vector<double> want = tt::ReferenceLogits(scaled, tokens), plain = Reference(tokens, 1.0f);
  const std::vector<float> logits = LogitsOf(out, kRopeText);
  EXPECT_LT(tt::MaxDifference(logits, want), kLogitTolerance);
  EXPECT_GT(tt::MaxDifference(logits, plain), 100 * kLogitTolerance);

  const std::string twos = Import([&](tt::GgufWriter* w) {
    w->AddTensor("rope_freqs.weight", {pairs}, tt::kGgmlF32, freqs(std::vector<float>(pairs, 2.0f)));
  });
  const std::string linear = Import([](tt::GgufWriter* w) { w->AddFloat32("llama.rope.scaling.factor", 2.0f); });
  EXPECT_TRUE(SameBits(LogitsOf(twos, kRopeText), LogitsOf(linear, kRopeText)));

  const struct {
    std::function<void(tt::GgufWriter*)> edit;
    const char* says;
  } bad[] = {
      {[&](tt::GgufWriter* w) { w->AddTensor("rope_freqs.weight", {pairs + 1}, tt::kGgmlF32, freqs(std::vector<float>(pairs + 1, 1.0f))); },
       "the rope frequency factors are F32"},
      {[&](tt::GgufWriter* w) {
         std::vector<float> f(pairs, 1.0f);
         f[1] = 0.0f;
         w->AddTensor("rope_freqs.weight", {pairs}, tt::kGgmlF32, freqs(f));
       },
       "rope_freqs.weight[1] is 0"},
      {[&](tt::GgufWriter* w) { w->AddTensor("rope_freqs.weight", {pairs}, tt::kGgmlF16, std::vector<uint8_t>(2 * pairs)); },
       "rope_freqs.weight' is F16"},
  };
  for (const auto& b : bad) {
    tt::GgufWriter w;
    std::string error;
    ASSERT_TRUE(tt::GgufFromSource(source_, tt::GgufModelOptions(), &w, &error)) << error;
    b.edit(&w);
    const std::string in = dir_.File("bad.gguf"), o = dir_.File("bad.tmai");
    ASSERT_TRUE(w.WriteFile(in));
    EXPECT_EQ(Convert(in, o), TINYAI_ERR_BAD_FORMAT) << b.says;
    EXPECT_NE(std::string(tt::LastMessage()).find(b.says), std::string::npos) << tt::LastMessage();
  }
}

// tokenizer.ggml.add_bos_token / add_eos_token are recorded and followed:
// without BOS, the C API's tokenize (add_special) and the generation path
// start the prompt with its first piece (the logits are the reference's
// over the text's tokens alone); with EOS, a text ends with it.
TEST_F(GgufMetadata, BosAndEosAsTheFileSays) {
  const std::string with_bos = Import([](tt::GgufWriter* w) { w->AddRaw("tokenizer.ggml.add_bos_token", 7, {1}); });
  int64_t add = -1;
  EXPECT_FALSE(MetaInt(with_bos, "tokenizer.add_bos", &add));  // the default is not written
  const std::vector<int32_t> text = tt::TokensOf(model_, "ab cd", false), bos = tt::TokensOf(with_bos, "ab cd", true);
  ASSERT_FALSE(text.empty());
  ASSERT_EQ(bos.size(), text.size() + 1);
  EXPECT_EQ(bos[0], source_.bos);

  const std::string no_bos = Import([](tt::GgufWriter* w) { w->AddRaw("tokenizer.ggml.add_bos_token", 7, {0}); });
  EXPECT_TRUE(MetaInt(no_bos, "tokenizer.add_bos", &add));
  EXPECT_EQ(add, 0);
  EXPECT_EQ(tt::TokensOf(no_bos, "ab cd", true), text);
  EXPECT_LT(tt::MaxDifference(LogitsOf(no_bos, "ab cd"), tt::ReferenceLogits(source_, text)), kLogitTolerance);
  // Generation: the prompt is its own tokens, echoed whole.
  tt::OpenedModel m;
  ASSERT_TRUE(m.Open(no_bos)) << tt::LastMessage();
  TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
  params.steps = 12;
  params.sampler.temperature = 0.0f;
  TinyAIGenerateStats stats;
  std::memset(&stats, 0, sizeof stats);
  stats.structSize = sizeof stats;
  char out[4096];
  size_t len = 0;
  ASSERT_EQ(tinyaiLLMGenerate(m.llm, "ab cd", &params, out, sizeof out, &len, &stats), TINYAI_OK) << tt::LastMessage();
  EXPECT_EQ(stats.promptTokens, static_cast<int32_t>(text.size()));
  EXPECT_EQ(std::string(out, len).compare(0, 5, "ab cd"), 0) << std::string(out, len);
  // Nothing to continue: an empty prompt without BOS.
  EXPECT_EQ(tinyaiLLMGenerate(m.llm, "", &params, out, sizeof out, &len, &stats), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tt::LastMessage()).find("tokenizer.add_bos is 0"), std::string::npos) << tt::LastMessage();

  const std::string eos = Import([](tt::GgufWriter* w) { w->AddRaw("tokenizer.ggml.add_eos_token", 7, {1}); });
  EXPECT_TRUE(MetaInt(eos, "tokenizer.add_eos", &add));
  EXPECT_EQ(add, 1);
  const std::vector<int32_t> ended = tt::TokensOf(eos, "ab cd", true);
  ASSERT_EQ(ended.size(), text.size() + 2);
  EXPECT_EQ(ended.front(), source_.bos);
  EXPECT_EQ(ended.back(), source_.eos);
  EXPECT_EQ(tt::TokensOf(eos, "ab cd", false), text);
}

// The runtime checks what the importer wrote: a rope factor outside what it
// runs, or a tokenizer.add_bos / add_eos other than 0 or 1, is refused when
// the model is bound, naming the key.
TEST_F(GgufMetadata, TheRuntimeRefusesImpossibleValues) {
  struct Case {
    std::function<void(tt::GgufWriter*)> edit;
    const char* key;
    bool is_float;
    TinyAIStatus want;
    const char* says;
  };
  const Case cases[] = {
      {[](tt::GgufWriter* w) { w->AddFloat32("llama.rope.scaling.factor", 4.0f); }, "llama.rope_linear_factor", true,
       TINYAI_ERR_BAD_FORMAT, "llama.rope_linear_factor 1e+09 is outside what the runtime runs"},
      {[](tt::GgufWriter* w) { w->AddRaw("tokenizer.ggml.add_bos_token", 7, {0}); }, "tokenizer.add_bos", false,
       TINYAI_ERR_BAD_TOKENIZER, "tokenizer.add_bos is 2; it is 0 or 1"},
      {[](tt::GgufWriter* w) { w->AddRaw("tokenizer.ggml.add_eos_token", 7, {1}); }, "tokenizer.add_eos", false,
       TINYAI_ERR_BAD_TOKENIZER, "tokenizer.add_eos is 2; it is 0 or 1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    tt::Bytes image;
    ASSERT_TRUE(tt::ReadFileBytes(Import(c.edit), &image));
    const size_t at = tt::FindMetaValue(image, c.key);
    ASSERT_NE(at, 0u);
    if (c.is_float) {
      const float huge = 1e9f;
      std::memcpy(&image[at], &huge, 4);
    } else {
      const int64_t two = 2;
      std::memcpy(&image[at], &two, 8);
    }
    tt::Reseal(&image);
    const std::string path = dir_.File("patched.tmai");
    ASSERT_TRUE(tt::WriteFileBytes(path, image));
    TinyAIMappedModel* m = tinyaiOpenMappedModel(path.c_str(), nullptr);
    ASSERT_NE(m, nullptr) << tt::LastMessage();
    TinyAILLM* llm = nullptr;
    EXPECT_EQ(tinyaiCreateLLM(m, nullptr, &llm), c.want);
    EXPECT_NE(std::string(tt::LastMessage()).find(c.says), std::string::npos) << tt::LastMessage();
    tinyaiDestroyLLM(llm);
    tinyaiCloseMappedModel(m);
  }
  // A rope frequency factor that is not positive (the importer refuses one;
  // a file patched after it is refused when bound).
  const size_t pairs = static_cast<size_t>(source_.params.head_size() / 2);
  std::vector<uint8_t> ones(4 * pairs);
  for (size_t i = 0; i < pairs; ++i) {
    const float one = 1.0f;
    std::memcpy(&ones[4 * i], &one, 4);
  }
  tt::Bytes image;
  ASSERT_TRUE(tt::ReadFileBytes(Import([&](tt::GgufWriter* w) {
    w->AddTensor("rope_freqs.weight", {pairs}, tt::kGgmlF32, ones);
  }), &image));
  const size_t at = tt::FindMetaValue(image, "llama.rope_freq_factors");
  ASSERT_NE(at, 0u);
  ASSERT_EQ(tt::LoadU32(image, at), pairs);  // the count, then the floats
  const float minus = -1.0f;
  std::memcpy(&image[at + 4 + 4], &minus, 4);
  tt::Reseal(&image);
  const std::string path = dir_.File("patched-freqs.tmai");
  ASSERT_TRUE(tt::WriteFileBytes(path, image));
  TinyAIMappedModel* m = tinyaiOpenMappedModel(path.c_str(), nullptr);
  ASSERT_NE(m, nullptr) << tt::LastMessage();
  TinyAILLM* llm = nullptr;
  EXPECT_EQ(tinyaiCreateLLM(m, nullptr, &llm), TINYAI_ERR_BAD_FORMAT);
  EXPECT_NE(std::string(tt::LastMessage()).find("llama.rope_freq_factors[1] is -1"), std::string::npos)
      << tt::LastMessage();
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(m);
}

// Every other llama.* key that would change what the model computes holds
// the value TinyAI computes with, or the file is refused naming the key;
// a llama.* key TinyAI does not know is refused too, never ignored.
TEST_F(GgufBad, MetadataThatChangesTheNumbersIsRefusedByName) {
  Expect(Build([](tt::GgufWriter* w) { w->AddUint32("llama.expert_count", 8); }), TINYAI_ERR_UNSUPPORTED,
         "llama.expert_count is 8: a mixture of experts");
  Expect(Build([](tt::GgufWriter* w) { w->AddUint32("llama.expert_used_count", 2); }), TINYAI_ERR_UNSUPPORTED,
         "llama.expert_used_count is 2");
  Expect(Build([](tt::GgufWriter* w) { w->AddUint32("llama.attention.key_length", 8); }), TINYAI_ERR_UNSUPPORTED,
         "llama.attention.key_length is 8: query and key heads of another size");
  Expect(Build([](tt::GgufWriter* w) { w->AddUint32("llama.attention.value_length", 32); }), TINYAI_ERR_UNSUPPORTED,
         "llama.attention.value_length is 32");
  Expect(Build([](tt::GgufWriter* w) { w->AddFloat32("llama.attention.clamp_kqv", 8.0f); }), TINYAI_ERR_UNSUPPORTED,
         "llama.attention.clamp_kqv is 8");
  Expect(Build([](tt::GgufWriter* w) { w->AddFloat32("llama.logit_scale", 0.5f); }), TINYAI_ERR_UNSUPPORTED,
         "llama.logit_scale is 0.5: logits scaled");
  Expect(Build([](tt::GgufWriter* w) { w->AddFloat32("llama.final_logit_softcapping", 30.0f); }),
         TINYAI_ERR_UNSUPPORTED, "llama.final_logit_softcapping is 30: logits soft-capped");
  Expect(Build([](tt::GgufWriter* w) { w->AddFloat32("llama.attention.scale", 0.25f); }), TINYAI_ERR_UNSUPPORTED,
         "llama.attention.scale is 0.25");
  Expect(Build([](tt::GgufWriter* w) { w->AddUint32("llama.attention.sliding_window", 4); }), TINYAI_ERR_UNSUPPORTED,
         "llama.attention.sliding_window is 4");
  Expect(Build([](tt::GgufWriter* w) { w->AddRaw("llama.attention.causal", 7, {0}); }), TINYAI_ERR_UNSUPPORTED,
         "llama.attention.causal is 0");
  Expect(Build([](tt::GgufWriter* w) { w->AddFloat32("llama.rope.scaling.attn_factor", 2.0f); }),
         TINYAI_ERR_UNSUPPORTED, "llama.rope.scaling.attn_factor is 2");
  Expect(Build([](tt::GgufWriter* w) { w->AddFloat32("llama.some_new_scale", 1.0f); }), TINYAI_ERR_UNSUPPORTED,
         "key 'llama.some_new_scale' is not one TinyAI knows");
  Expect(Build([](tt::GgufWriter* w) { w->AddString("llama.tensor_data_layout", "transposed"); }),
         TINYAI_ERR_UNSUPPORTED, "llama.tensor_data_layout 'transposed'");
  // The rope scaling's own rules.
  Expect(Build([](tt::GgufWriter* w) { w->AddString("llama.rope.scaling.type", "longrope"); }), TINYAI_ERR_UNSUPPORTED,
         "rope scaling 'longrope' (llama.rope.scaling.type) changes the rotary frequencies");
  Expect(Build([](tt::GgufWriter* w) { w->AddFloat32("llama.rope.scaling.factor", -2.0f); }), TINYAI_ERR_BAD_FORMAT,
         "llama.rope.scaling.factor is -2");
  Expect(Build([](tt::GgufWriter* w) {
           w->AddFloat32("llama.rope.scaling.factor", 2.0f);
           w->AddFloat32("llama.rope.scale_linear", 4.0f);
         }),
         TINYAI_ERR_BAD_FORMAT, "llama.rope.scaling.factor 2 and llama.rope.scale_linear 4 disagree");
  Expect(Build([](tt::GgufWriter* w) { w->AddFloat32("llama.rope.scale_linear", 1e9f); }), TINYAI_ERR_UNSUPPORTED,
         "llama.rope.scale_linear is 1e+09");
  Expect(Build([](tt::GgufWriter* w) { w->AddUint32("tokenizer.ggml.add_bos_token", 0); }), TINYAI_ERR_BAD_FORMAT,
         "'tokenizer.ggml.add_bos_token' is not a bool");
  // The RMS epsilon is required (as llama.cpp requires it), not guessed.
  std::vector<uint8_t> f = Build();
  const std::string eps = "llama.attention.layer_norm_rms_epsilon";
  auto at = std::search(f.begin(), f.end(), eps.begin(), eps.end());
  *at = 'x';  // xlama.attention...: outside the llama.* keys
  Expect(f, TINYAI_ERR_BAD_FORMAT, "no key 'llama.attention.layer_norm_rms_epsilon'");
  // One file of a split model.
  Expect(Build([](tt::GgufWriter* w) { w->AddUint32("split.count", 3); }), TINYAI_ERR_UNSUPPORTED,
         "one of 3 files of a split model");
  // Keys that hold what TinyAI computes with convert.
  const std::string in = dir_.File("neutral.gguf"), out = dir_.File("neutral.tmai");
  ASSERT_TRUE(tt::WriteFileBytes(in, Build([](tt::GgufWriter* w) {
    w->AddUint32("llama.expert_count", 0);
    w->AddUint32("llama.attention.key_length", 16);
    w->AddUint32("llama.attention.value_length", 16);
    w->AddFloat32("llama.logit_scale", 1.0f);
    w->AddRaw("llama.attention.causal", 7, {1});
    w->AddUint32("llama.rope.scaling.original_context_length", 4096);
    w->AddString("llama.tensor_data_layout", "Meta AI original pth");
  })));
  EXPECT_EQ(Convert(in, out), TINYAI_OK) << tt::LastMessage();
  EXPECT_TRUE(SameBits(LogitsOf(out, "abc"), LogitsOf(model_, "abc")));
}

TEST_F(GgufBad, OutputIsTheInput) {
  const std::string in = dir_.File("same.gguf");
  ASSERT_TRUE(tt::WriteFileBytes(in, Build()));
  EXPECT_EQ(Convert(in, in), TINYAI_ERR_INVALID_ARGUMENT);
  std::vector<uint8_t> back;
  ASSERT_TRUE(tt::ReadFileBytes(in, &back));
  EXPECT_EQ(back, Build());
}

// ---- Names read from the file are shown whole in messages ------------------

// A key or tensor name that holds a NUL (GGUF strings are counted, not
// terminated) is shown whole, the NUL as \x00, not cut at it.
TEST_F(GgufBad, NamesWithANulAreShownWhole) {
  const std::string key("general.a\0b", 11), tensor("blk.0.extra\0.weight", 19);
  Expect(Build([&](tt::GgufWriter* w) {
           w->AddUint32(key, 1);
           w->AddUint32(key, 2);
         }),
         TINYAI_ERR_BAD_FORMAT, "key 'general.a\\x00b' appears twice");
  Expect(Build([&](tt::GgufWriter* w) { w->AddTensor(tensor, {32}, tt::kGgmlF32, std::vector<uint8_t>(128)); }),
         TINYAI_ERR_UNSUPPORTED, "tensor 'blk.0.extra\\x00.weight' is not part of a LLaMA model");
  Expect(Build([&](tt::GgufWriter* w) {
           w->AddTensor(tensor, {32}, tt::kGgmlF32, std::vector<uint8_t>(128));
           w->AddTensor(tensor, {32}, tt::kGgmlF32, std::vector<uint8_t>(128));
         }),
         TINYAI_ERR_BAD_FORMAT, "tensor 'blk.0.extra\\x00.weight' appears twice");
  // A control byte is escaped as well, and a backslash shown as \\.
  Expect(Build([](tt::GgufWriter* w) { w->AddTensor("x\x1b[2J\\y", {32}, tt::kGgmlF32, std::vector<uint8_t>(128)); }),
         TINYAI_ERR_UNSUPPORTED, "tensor 'x\\x1b[2J\\\\y' is not part");
  std::vector<uint8_t> f = Build();
  const std::string arch = "llama";
  auto at = std::search(f.begin(), f.end(), arch.begin(), arch.end());
  *(at + 2) = '\0';
  Expect(f, TINYAI_ERR_UNSUPPORTED, "architecture 'll\\x00ma'");
}

}  // namespace
