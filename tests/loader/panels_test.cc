// Row panels (common/panels.h): where the best kernels have a panel product
// (this host's AVX-512 VNNI table; elsewhere these tests check that nothing
// is packed), the weight cache holds 4-bit rows in panels. Slices are cut
// at panels whatever their size, so products give the same values however a
// model streams; rows handed out as rows (CopyRows, a save, an embedding
// row) are the file's bytes; products equal the row layout's within fp32
// rounding, including panels that two threads' ranges cut. Other matrices'
// slices are cut at the products' tiles of 8 rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/panels.h"
#include "common/thread_pool.h"
#include "format/test_models.h"
#include "import/model_builder.h"
#include "import/reencode.h"
#include "import/synthetic.h"
#include "kernels/kernels.h"
#include "loader/mapped_model.h"
#include "model/weight_stream.h"
#include "model/weight_transform.h"
#include "tinyai/llm.h"
#include "tinyai/tinyai.h"
#include "tinyai/utils/mmap_loader.h"
#include "tinyai/utils/quantize_mixed.h"
#include "tools/common/cli.h"

namespace tt = tinyai::testing;

namespace {

// Matrices of 40, 20 and 300 rows (300 = 37 panels and 4 rows), 40 and 300
// columns (neither a multiple of 32).
tinyai::LlamaShape PanelShape() {
  tinyai::LlamaShape s = tt::TinyShape();
  s.dim = 40;
  s.hidden_dim = 300;
  s.heads = 4;
  s.kv_heads = 2;
  s.shared_classifier = true;
  return s;
}

std::string WriteModel(const tt::TempDir& dir, const std::string& name, TinyAIDType dtype,
                       TinyAICodec codec = TINYAI_CODEC_NONE) {
  tinyai::WriteOptions o;
  o.matrix_dtype = dtype;
  o.codec = codec;
  const std::string path = dir.File(name);
  EXPECT_EQ(tinyai::WriteSyntheticModel(PanelShape(), path.c_str(), o), TINYAI_OK) << tt::LastMessage();
  return path;
}

bool BestHasPanels(int32_t dtype) {
  const tinyai::kernels::WeightKernels* k = tinyai::kernels::WeightKernelsFor(tinyai::kernels::Best(), dtype);
  return k && k->matvec_panels;
}

// Opens path with panels on or off: the C API's row transform
// (model/weight_transform.h), or the same without panels.
tinyai_tools::ModelHandle Open(const std::string& path, bool panels, const TinyAIMmapConfig* cfg = nullptr) {
  tinyai::RowTransform transform = tinyai::ModelRowTransform();
  if (!panels) transform.panel_dtypes = 0;
  tinyai::ModelOrigin origin;
  origin.path = path.c_str();
  TinyAIMappedModel* m = nullptr;
  EXPECT_EQ(TinyAIMappedModel::Open(origin, cfg, transform, &m), TINYAI_OK) << tt::LastMessage();
  return tinyai_tools::ModelHandle(m);
}

std::vector<float> Logits(TinyAIMappedModel* m, int threads = 1) {
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  cfg.threads = threads;
  tinyai_tools::LLMHandle llm = tinyai_tools::CreateLLM(m, cfg);
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
  // A prompt of several tokens at once (the panel products per input).
  int32_t prompt[5] = {3, 9, 27, 81, 243 % info.vocabSize};
  EXPECT_EQ(tinyaiLLMEval(llm.get(), prompt, 5, logits.data()), TINYAI_OK) << tt::LastMessage();
  all.insert(all.end(), logits.begin(), logits.end());
  return all;
}

void ExpectClose(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  float top = 0.0f;
  for (float v : b) top = std::fabs(v) > top ? std::fabs(v) : top;
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4f * top + 1e-6f) << "logit " << i;
}

TEST(Panels, SlicesCutAtPanelsWhateverTheirSize) {
  tt::TempDir dir;
  const std::string q4 = WriteModel(dir, "q4.tmai", TINYAI_DTYPE_Q4_G32);
  for (size_t target : {size_t{64}, size_t{300}, size_t{1000}, size_t{4096}, size_t{1} << 30}) {
    TinyAIMmapConfig cfg = tinyaiCreateDefaultMmapConfig();
    cfg.rowSliceSize = target;
    tinyai_tools::ModelHandle m = Open(q4, true, &cfg);
    const tinyai::RowSliceTable& table = m->slices();
    const auto tensors = m->reader().tensors();
    for (size_t t = 0; t < tensors.size(); ++t) {
      const int32_t ti = static_cast<int32_t>(t);
      const bool packed = tensors[t].dtype == TINYAI_DTYPE_Q4_G32 && BestHasPanels(TINYAI_DTYPE_Q4_G32);
      ASSERT_EQ(table.panels(ti), packed) << tensors[t].name;
      if (!packed) continue;
      uint64_t in_panels = 0;
      for (const tinyai::TensorSpan& s : table.spans(ti)) {
        EXPECT_EQ(s.row_begin % tinyai::kPanelRows, 0u) << tensors[t].name << " target " << target;
        uint64_t first = 0, end = 0;
        table.SpanPanels(ti, s, &first, &end);
        EXPECT_EQ(first, s.row_begin);
        in_panels += end - first;
      }
      EXPECT_EQ(in_panels, table.rows(ti) / tinyai::kPanelRows * tinyai::kPanelRows) << tensors[t].name;
    }
  }
}

// Rows of other matrices are cut at multiples of 8 (the products' row
// tiles) wherever the target holds 64 rows, and a slice stays within the
// target: 1 MiB of 768 fp32 columns was 341 rows, 5 of them on the tiles'
// slower path in every slice (docs/benchmarks.md, "Slices of whole row
// tiles").
TEST(Panels, PlainRowsAreCutAtTilesOfEight) {
  tt::TempDir dir;
  for (TinyAIDType dtype : {TINYAI_DTYPE_F32, TINYAI_DTYPE_Q8_G32}) {
    const std::string path = WriteModel(dir, "m.tmai", dtype);
    for (size_t target : {size_t{64}, size_t{300}, size_t{4096}, size_t{12000}, size_t{20000}, size_t{1} << 30}) {
      TinyAIMmapConfig cfg = tinyaiCreateDefaultMmapConfig();
      cfg.rowSliceSize = target;
      tinyai_tools::ModelHandle m = Open(path, false, &cfg);
      const tinyai::RowSliceTable& table = m->slices();
      const auto tensors = m->reader().tensors();
      int cut = 0;  // spans that end inside a tensor of 64 rows or more a slice
      for (size_t t = 0; t < tensors.size(); ++t) {
        const int32_t ti = static_cast<int32_t>(t);
        const uint64_t rb = table.row_bytes(ti);
        for (const tinyai::TensorSpan& s : table.spans(ti)) {
          const std::string where = std::string(tensors[t].name) + " target " + std::to_string(target);
          EXPECT_LE(table.slice(s.slice).decoded_size, rb > target ? rb : target) << where;
          if (target / rb < 64) continue;
          EXPECT_EQ(s.row_begin % 8, 0u) << where;
          if (s.row_end != table.rows(ti)) {
            EXPECT_EQ(s.row_end % 8, 0u) << where;
            ++cut;
          }
        }
      }
      if (target == 12000 || target == 20000) EXPECT_GT(cut, 0) << "target " << target;
    }
  }
}

// Rows read back are the file's; a row in a panel is not handed out as a
// row; products (one token at a time, and a prompt) match the row layout's.
TEST(Panels, RowsAreTheFilesAndProductsMatch) {
  tt::TempDir dir;
  for (TinyAIDType dtype : {TINYAI_DTYPE_Q4_G32, TINYAI_DTYPE_Q4NL_G32}) {
    const std::string path = WriteModel(dir, "m.tmai", dtype);
    tinyai_tools::ModelHandle packed = Open(path, true), plain = Open(path, false);
    ASSERT_FALSE(plain->slices().any_panels());
    ASSERT_EQ(packed->slices().any_panels(), BestHasPanels(dtype));
    const auto tensors = packed->reader().tensors();
    for (size_t t = 0; t < tensors.size(); ++t) {
      if (tensors[t].dtype != dtype) continue;
      const int32_t ti = static_cast<int32_t>(t);
      const uint64_t rows = plain->slices().rows(ti), rb = plain->slices().row_bytes(ti);
      std::vector<uint8_t> a(rows * rb), b(rows * rb);
      for (uint64_t row = 0, got = 0; row < rows; row += got) {
        ASSERT_EQ(packed->CopyRows(ti, row, 5, a.data() + row * rb, &got), TINYAI_OK) << tt::LastMessage();
      }
      for (uint64_t row = 0, got = 0; row < rows; row += got) {
        ASSERT_EQ(plain->CopyRows(ti, row, rows, b.data() + row * rb, &got), TINYAI_OK) << tt::LastMessage();
      }
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << tensors[t].name;
      if (packed->slices().panels(ti)) {
        const uint8_t* p = nullptr;
        uint64_t n = 0;
        int32_t slice = -1;
        EXPECT_EQ(packed->AcquireRows(ti, 0, &p, &n, &slice), TINYAI_ERR_INTERNAL);
        EXPECT_NE(std::string(tt::LastMessage()).find("panel"), std::string::npos) << tt::LastMessage();
      }
    }
    ExpectClose(Logits(packed.get()), Logits(plain.get()));
  }
}

// However the model streams (small slices, a cap), the values are the same
// bit for bit: every mode multiplies the same rows in panels.
TEST(Panels, SameValuesUnderACap) {
  tt::TempDir dir;
  const std::string path = WriteModel(dir, "q4.tmai", TINYAI_DTYPE_Q4_G32);
  tinyai_tools::ModelHandle whole = Open(path, true);
  TinyAIMmapConfig cfg = tinyaiCreateDefaultMmapConfig();
  cfg.rowSliceSize = 700;
  cfg.maxCacheSize = 16 * 1024;
  tinyai_tools::ModelHandle capped = Open(path, true, &cfg);
  const std::vector<float> a = Logits(whole.get()), b = Logits(capped.get());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

// Two threads whose ranges meet inside a panel (the 300-row FFN matrices
// after each other: the second starts 4 rows into a panel's stride).
TEST(Panels, ProductsAcrossThreadsCuttingPanels) {
  tt::TempDir dir;
  const std::string path = WriteModel(dir, "q4.tmai", TINYAI_DTYPE_Q4_G32);
  tinyai_tools::ModelHandle packed = Open(path, true), plain = Open(path, false);
  int32_t up = -1, gate = -1;
  ASSERT_EQ(packed->FindTensor("blk.0.ffn_up", &up), TINYAI_OK);
  ASSERT_EQ(packed->FindTensor("blk.0.ffn_gate", &gate), TINYAI_OK);
  const int32_t tensors[2] = {up, gate};
  const int32_t cols = 40, n = 3, rows = 600;
  std::vector<float> x(static_cast<size_t>(cols * n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  std::vector<std::vector<float>> out;
  for (TinyAIMappedModel* m : {packed.get(), plain.get()}) {
    for (int threads : {1, 2}) {
      tinyai::ThreadPool pool;
      ASSERT_EQ(pool.Start(threads), TINYAI_OK);
      pool.set_always_split_for_testing(true);
      tinyai::WeightStream stream;
      ASSERT_EQ(stream.Init(m), TINYAI_OK);
      stream.Bind(&pool, &tinyai::kernels::Best());
      for (int32_t count : {1, n}) {
        std::vector<uint8_t> scratch(stream.InputScratchBytes(tensors, 2, cols) * static_cast<uint64_t>(count));
        std::vector<float> y(static_cast<size_t>(rows * count), NAN);
        ASSERT_EQ(stream.MatMul(tensors, 2, x.data(), static_cast<size_t>(cols), y.data(), rows, cols, count,
                                scratch.data(), scratch.size()),
                  TINYAI_OK)
            << tt::LastMessage();
        out.push_back(y);
      }
    }
  }
  // packed: [t1 n1, t1 n3, t2 n1, t2 n3], plain likewise.
  for (size_t i = 0; i < 4; ++i) {
    for (float v : out[i]) ASSERT_FALSE(std::isnan(v));
    EXPECT_EQ(std::memcmp(out[i].data(), out[i % 2].data(), out[i].size() * sizeof(float)), 0) << i;
    ExpectClose(out[i], out[4 + i]);
  }
  // One input of a batch equals that input alone, in the tables that promise
  // it (GroupedParity.BatchEqualsEachInputAlone: the reference and AVX-512;
  // AVX2 sums a token's groups in two chains and a prompt's in one, the
  // faster order for each, measured in tinyai-bench-kernels).
  const std::string best = tinyai::kernels::Best().name;
  if (best == "ref" || best.rfind("avx512", 0) == 0) {
    EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), static_cast<size_t>(rows) * sizeof(float)), 0) << best;
  }
}

// A model written again through the loader (tinyai-convert --from tmai
// reads every tensor out of the weight cache) is the same file whether the
// cache held panels or not.
TEST(Panels, ReencodedModelIsTheSame) {
  tt::TempDir dir;
  const std::string path = WriteModel(dir, "q4.tmai", TINYAI_DTYPE_Q4_G32);
  std::vector<tt::Bytes> written;
  for (bool panels : {true, false}) {
    const std::string out = dir.File(panels ? "a.tmai" : "b.tmai");
    tinyai::WriteOptions o;
    o.name = "same";
    tinyai_tools::ModelHandle m = Open(path, panels);
    ASSERT_EQ(m->slices().any_panels(), panels && BestHasPanels(TINYAI_DTYPE_Q4_G32));
    const TinyAIStatus s = tinyai::ReencodeModel(m.get(), out.c_str(), o, true);
    ASSERT_EQ(s, TINYAI_OK) << tt::LastMessage();
    written.emplace_back();
    ASSERT_TRUE(tt::ReadFileBytes(out, &written.back()));
  }
  EXPECT_EQ(written[0], written[1]);
}

}  // namespace
