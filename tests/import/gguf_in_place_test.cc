// GGUF files read in place (format/gguf_index.h): tinyaiOpenMappedModel and
// its memory and callback twins take a .gguf as it is. Every GGUF test that
// converts a file also checks the file read in place against the conversion
// (tt::ExpectInPlaceAgrees) and that a file the import refuses is refused in
// place too; here, what is particular to reading in place.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "format/test_models.h"
#include "import/gguf.h"
#include "import/gguf_import.h"
#include "import/gguf_writer.h"
#include "import/llama_source.h"
#include "import/model_builder.h"
#include "import/run_model.h"
#include "tinyai/tinyai.h"
#include "tinyai/utils/mmap_loader.h"
#include "tinyai/utils/quantize_mixed.h"

namespace tt = tinyai::testing;

namespace {

class GgufInPlace : public ::testing::Test {
 protected:
  void SetUp() override {
    tinyai::LlamaShape shape;
    ASSERT_EQ(tinyai::ParseSyntheticSpec("dim=64,hidden=96,layers=2,heads=4,kv_heads=2,vocab=300,seq_len=32,seed=9",
                                         &shape),
              TINYAI_OK);
    const std::string model = dir_.File("m.tmai");
    ASSERT_EQ(tinyai::WriteSyntheticModel(shape, model.c_str()), TINYAI_OK) << tt::LastMessage();
    std::string error;
    ASSERT_TRUE(tt::LoadTmai(model, &source_, &error)) << error;
  }
  // source_ as GGUF (matrices of type `type`, then edit), written to a file.
  std::string Write(uint32_t type, const std::function<void(tt::GgufWriter*)>& edit = nullptr) {
    tt::GgufWriter w;
    tt::GgufModelOptions o;
    o.matrix_type = type;
    std::string error;
    EXPECT_TRUE(tt::GgufFromSource(source_, o, &w, &error)) << error;
    if (edit) edit(&w);
    const std::string path = dir_.File("g" + std::to_string(++count_) + ".gguf");
    EXPECT_TRUE(w.WriteFile(path));
    return path;
  }
  std::string Converted(const std::string& gguf) {
    const std::string out = gguf + ".tmai";
    EXPECT_EQ(tinyai::ConvertGguf(gguf.c_str(), out.c_str(), nullptr), TINYAI_OK) << tt::LastMessage();
    return out;
  }
  // The logits after "ab cd" (one pass) from an opened model.
  static std::vector<float> Logits(TinyAIMappedModel* model) {
    EXPECT_NE(model, nullptr) << tt::LastMessage();
    if (model == nullptr) return {};
    TinyAILLM* llm = nullptr;
    EXPECT_EQ(tinyaiCreateLLM(model, nullptr, &llm), TINYAI_OK) << tt::LastMessage();
    if (llm == nullptr) return {};
    int32_t tokens[32];
    int32_t count = 0;
    EXPECT_EQ(tinyaiLLMTokenize(llm, "ab cd", 1, tokens, 32, &count), TINYAI_OK);
    std::vector<float> out(300);
    EXPECT_EQ(tinyaiLLMEval(llm, tokens, count, out.data()), TINYAI_OK) << tt::LastMessage();
    tinyaiDestroyLLM(llm);
    return out;
  }

  tt::TempDir dir_;
  tt::LlamaSource source_;
  int count_ = 0;
};

TEST_F(GgufInPlace, FileMemoryAndCallbackRunAlike) {
  const std::string gguf = Write(tt::kGgmlQ8_0);
  TinyAIMappedModel* from_file = tinyaiOpenMappedModel(gguf.c_str(), nullptr);
  const std::vector<float> want = Logits(from_file);
  tinyaiCloseMappedModel(from_file);
  ASSERT_FALSE(want.empty());
  const std::string converted = Converted(gguf);
  TinyAIMappedModel* tmai = tinyaiOpenMappedModel(converted.c_str(), nullptr);
  EXPECT_TRUE(tt::SameBits(Logits(tmai), want));
  tinyaiCloseMappedModel(tmai);

  std::vector<uint8_t> bytes;
  ASSERT_TRUE(tt::ReadFileBytes(gguf, &bytes));
  tt::AlignedImage image(bytes);
  TinyAIMappedModel* from_memory = tinyaiOpenMappedModelFromMemory(image.data(), image.size(), nullptr);
  EXPECT_TRUE(tt::SameBits(Logits(from_memory), want));
  tinyaiCloseMappedModel(from_memory);

  struct Reads {
    const std::vector<uint8_t>* bytes;
    int calls = 0;
    static int Read(void* user, uint64_t offset, void* dst, size_t size) {
      Reads* r = static_cast<Reads*>(user);
      ++r->calls;
      if (offset > r->bytes->size() || size > r->bytes->size() - offset) return 5;
      std::memcpy(dst, r->bytes->data() + offset, size);
      return 0;
    }
  } reads{&bytes};
  TinyAIMappedModel* from_reader = tinyaiOpenMappedModelFromReader(&Reads::Read, &reads, bytes.size(), nullptr);
  EXPECT_TRUE(tt::SameBits(Logits(from_reader), want));
  tinyaiCloseMappedModel(from_reader);
  EXPECT_GT(reads.calls, 1);

  // A read that fails while the header is read is an I/O error naming the value.
  // (The first 128 bytes read, then nothing.)
  struct Failing {
    static int Read(void* user, uint64_t offset, void* dst, size_t size) {
      const std::vector<uint8_t>* b = static_cast<const std::vector<uint8_t>*>(user);
      if (offset != 0 || size > 128) return 9;
      std::memcpy(dst, b->data(), size);
      return 0;
    }
  };
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiOpenMappedModelFromReader(&Failing::Read, &bytes, bytes.size(), nullptr), nullptr);
  EXPECT_EQ(tinyaiGetLastError(), TINYAI_ERR_IO) << tt::LastMessage();
  EXPECT_NE(tt::LastMessage().find("9"), std::string::npos) << tt::LastMessage();
}

TEST_F(GgufInPlace, TensorsAnywhereInTheFile) {
  // Output first, the blocks backwards, each block's tensors reversed: the
  // layers gather their tensors wherever they lie.
  const std::string gguf = Write(tt::kGgmlF32, [](tt::GgufWriter* w) { w->ReverseTensors(); });
  tt::ExpectSameInPlace(gguf, Converted(gguf), "ab cd ef");
  // With slices smaller than a row, every row is a read of its own.
  TinyAIMmapConfig config = tinyaiCreateDefaultMmapConfig();
  config.rowSliceSize = 64;
  TinyAIMappedModel* small = tinyaiOpenMappedModel(gguf.c_str(), &config);
  TinyAIMappedModel* plain = tinyaiOpenMappedModel(gguf.c_str(), nullptr);
  EXPECT_TRUE(tt::SameBits(Logits(small), Logits(plain)));
  // Whole layers load too: each tensor's bytes at its offset in the layer,
  // 64-byte aligned, as the file stores them.
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(tt::ReadFileBytes(gguf, &bytes));
  tinyai::gguf::File file;
  ASSERT_EQ(tinyai::gguf::Parse(bytes.data(), bytes.size(), gguf, &file), TINYAI_OK);
  for (int32_t l = 0; l < tinyaiGetMappedLayerCount(small); ++l) {
    const uint8_t* layer = static_cast<const uint8_t*>(tinyaiGetLayerWeights(small, l));
    ASSERT_NE(layer, nullptr) << tt::LastMessage();
    const TinyAILayerDescriptor* d = tinyaiGetLayerDescriptor(small, l);
    ASSERT_NE(d, nullptr);
    for (int32_t t = d->firstTensor; t < d->firstTensor + d->tensorCount; ++t) {
      TinyAITensorInfo info;
      std::memset(&info, 0, sizeof info);
      info.structSize = sizeof info;
      ASSERT_EQ(tinyaiGetMappedTensorInfo(small, t, &info), TINYAI_OK);
      EXPECT_EQ(info.offsetInLayer % 64, 0u) << info.name;
      const tinyai::gguf::TensorInfo* stored = file.FindTensor(info.name);
      ASSERT_NE(stored, nullptr) << info.name;
      ASSERT_EQ(stored->bytes, info.storedSize);
      EXPECT_EQ(std::memcmp(layer + info.offsetInLayer, bytes.data() + stored->offset, stored->bytes), 0) << info.name;
    }
    tinyaiReleaseLayerWeights(small, l);
  }
  tinyaiCloseMappedModel(small);
  tinyaiCloseMappedModel(plain);
}

TEST_F(GgufInPlace, AHeaderLongerThanTheFirstRead) {
  // A header of over a megabyte (a large vocabulary's size) is read in steps.
  const std::string gguf = Write(tt::kGgmlQ4_0, [](tt::GgufWriter* w) {
    w->AddString("general.description", std::string(1500000, 'x'));
  });
  tt::ExpectSameInPlace(gguf, Converted(gguf), "ab cd");
}

TEST_F(GgufInPlace, AHeaderPastItsBoundIsRefusedUnread) {
  // One key whose string claims 300 MiB, in a (sparse) file that long: the
  // reader stops at its 256 MiB bound instead of reading it.
  std::vector<uint8_t> head = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
  auto u64 = [&head](uint64_t v) {
    for (int i = 0; i < 8; ++i) head.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  u64(0);  // tensors
  u64(1);  // keys
  u64(11);
  for (char c : std::string("general.big")) head.push_back(static_cast<uint8_t>(c));
  head.insert(head.end(), {8, 0, 0, 0});  // a string
  u64(300ull << 20);
  const std::string path = dir_.File("big-header.gguf");
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(head.data(), 1, head.size(), f), head.size());
  ASSERT_EQ(std::fseek(f, static_cast<long>((300ull << 20) + 64), SEEK_SET), 0);
  ASSERT_EQ(std::fputc(0, f), 0);
  std::fclose(f);
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiOpenMappedModel(path.c_str(), nullptr), nullptr);
  EXPECT_EQ(tinyaiGetLastError(), TINYAI_ERR_UNSUPPORTED) << tt::LastMessage();
  EXPECT_NE(tt::LastMessage().find("headers of up to 256 MiB"), std::string::npos) << tt::LastMessage();
  std::remove(path.c_str());
}

TEST_F(GgufInPlace, WhatAConversionWidensIsRefusedWithTheCommand) {
  for (uint32_t type : {tt::kGgmlBF16}) {
    const std::string gguf = Write(type);
    tinyaiClearLastError();
    EXPECT_EQ(tinyaiOpenMappedModel(gguf.c_str(), nullptr), nullptr);
    EXPECT_EQ(tinyaiGetLastError(), TINYAI_ERR_UNSUPPORTED);
    const std::string message = tt::LastMessage();
    EXPECT_NE(message.find("BF16"), std::string::npos) << message;
    EXPECT_NE(message.find("tinyai-convert --from gguf '" + gguf + "'"), std::string::npos) << message;
  }
}

TEST_F(GgufInPlace, SavedAsATmai) {
  // A GGUF read in place, saved (and requantized) as a .tmai: the saved file
  // is an ordinary one (no in-place flag, checksums, page-aligned layers).
  const std::string gguf = Write(tt::kGgmlQ8_0);
  TinyAIMappedModel* m = tinyaiOpenMappedModel(gguf.c_str(), nullptr);
  ASSERT_NE(m, nullptr) << tt::LastMessage();
  const std::string saved = dir_.File("saved.tmai");
  ASSERT_EQ(tinyaiSaveMappedModel(m, saved.c_str(), nullptr), TINYAI_OK) << tt::LastMessage();
  const std::vector<float> want = Logits(m);
  tinyaiCloseMappedModel(m);
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(tt::ReadFileBytes(saved, &bytes));
  const tinyai::tmai::Header h = tt::GetHeader(bytes);
  EXPECT_EQ(h.flags, 0u);
  EXPECT_EQ(h.group_alignment, tinyai::tmai::kGroupAlignment);
  TinyAIMmapConfig config = tinyaiCreateDefaultMmapConfig();
  config.verifyChecksums = true;
  TinyAIMappedModel* reopened = tinyaiOpenMappedModel(saved.c_str(), &config);
  EXPECT_TRUE(tt::SameBits(Logits(reopened), want));
  tinyaiCloseMappedModel(reopened);
}

}  // namespace
