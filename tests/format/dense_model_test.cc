// Dense networks in the .tmai format (docs/format.md, "Dense networks"): the
// definition parser and its errors (each naming its line), the offline writer
// (tinyai::WriteDenseModel: layers, tensors, metadata, seeded weights, zstd),
// the loader's names for dense layers, and the reader-side spec the runtime
// uses (tinyai::DenseNetSpec::Load) with every way a file can be wrong.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "import/model_builder.h"
#include "format/test_models.h"
#include "format/tmai_format.h"
#include "format/tmai_reader.h"
#include "format/tmai_writer.h"
#include "loader/mapped_model.h"
#include "model/dense_spec.h"
#include "tinyai/tinyai.h"
#include "tinyai/utils/mmap_loader.h"

namespace {

using tinyai::DenseActivation;
using tinyai::DenseLayerSpec;
using tinyai::DenseNetDef;
using tinyai::DenseNetSpec;
using tinyai::testing::Bytes;
using tinyai::testing::Contains;
using tinyai::testing::LastMessage;
using tinyai::testing::TempDir;
namespace tt = tinyai::testing;

// The example of the format documentation: an input layer, two residual
// blocks and a head.
const char kResidualDef[] =
    "# a residual MLP\n"
    "name mlp-test          # optional\n"
    "\n"
    "input 12\n"
    "seed 5\n"
    "layer fc_in  out=16 act=relu\n"
    "layer b0_fc1 out=16 act=relu\n"
    "\tlayer b0_fc2 out=16 act=none   \r\n"
    "layer b1_fc1 out=16 act=tanh inputs=b0_fc2,fc_in    # x1 = F0 + x0\n"
    "layer b1_fc2 out=16\n"
    "layer head   out=3 act=none bias=0 inputs=b1_fc2,b0_fc2,fc_in";

// The committed definition, in the source tree (CMake passes its absolute
// path: __FILE__ may be relative, e.g. when ccache rewrites paths).
std::string CommittedDefinitionPath() { return TINYAI_TEST_DEFINITION_PATH; }

bool ReadText(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  if (!in || !(s << in.rdbuf())) return false;
  *out = s.str();
  return true;
}

// Opens path, expecting success (a failure fails the test with the message).
struct Opened {
  explicit Opened(const std::string& path) {
    model = tinyaiOpenMappedModel(path.c_str(), nullptr);
    EXPECT_NE(model, nullptr) << path << ": " << LastMessage();
  }
  ~Opened() { tinyaiCloseMappedModel(model); }
  Opened(const Opened&) = delete;
  Opened& operator=(const Opened&) = delete;
  TinyAIMappedModel* model = nullptr;
};

std::string MetaString(TinyAIMappedModel* m, const std::string& key) {
  const char* s = nullptr;
  size_t len = 0;
  if (tinyaiGetMetadataString(m, key.c_str(), &s, &len) != TINYAI_OK) return "<" + key + " missing>";
  return std::string(s, len);
}

std::vector<int32_t> InputsOf(const DenseNetSpec& spec, const DenseLayerSpec& l) {
  std::vector<int32_t> v;
  for (int32_t i = 0; i < l.input_count; ++i) v.push_back(spec.inputs()[static_cast<size_t>(l.first_input + i)]);
  return v;
}

// ---- The definition parser -------------------------------------------------------

TEST(DenseDefinitionTest, ParsesTheDocumentedExample) {
  DenseNetDef def;
  ASSERT_EQ(tinyai::ParseDenseDefinition(kResidualDef, &def), TINYAI_OK) << LastMessage();
  EXPECT_EQ(def.name, "mlp-test");
  EXPECT_EQ(def.input_dim, 12);
  EXPECT_EQ(def.seed, 5u);
  ASSERT_EQ(def.layers.size(), 6u);
  const char* names[] = {"fc_in", "b0_fc1", "b0_fc2", "b1_fc1", "b1_fc2", "head"};
  const int32_t outs[] = {16, 16, 16, 16, 16, 3};
  const char* acts[] = {"relu", "relu", "none", "tanh", "none", "none"};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(def.layers[i].name, names[i]);
    EXPECT_EQ(def.layers[i].out, outs[i]) << names[i];
    EXPECT_EQ(def.layers[i].activation, acts[i]) << names[i];
    EXPECT_EQ(def.layers[i].bias, i != 5) << names[i];
  }
  EXPECT_TRUE(def.layers[0].inputs.empty());  // the network input, by default
  EXPECT_TRUE(def.layers[1].inputs.empty());  // the previous layer, by default
  EXPECT_EQ(def.layers[3].inputs, (std::vector<std::string>{"b0_fc2", "fc_in"}));
  EXPECT_EQ(def.layers[5].inputs, (std::vector<std::string>{"b1_fc2", "b0_fc2", "fc_in"}));
}

TEST(DenseDefinitionTest, OptionalDirectivesDefault) {
  DenseNetDef def;
  ASSERT_EQ(tinyai::ParseDenseDefinition("input 3\nlayer only out=2 inputs=input\n", &def), TINYAI_OK)
      << LastMessage();
  EXPECT_EQ(def.name, "");
  EXPECT_EQ(def.seed, 1u);
  ASSERT_EQ(def.layers.size(), 1u);
  EXPECT_EQ(def.layers[0].activation, "none");
  EXPECT_TRUE(def.layers[0].bias);
  EXPECT_EQ(def.layers[0].inputs, (std::vector<std::string>{"input"}));
}

struct BadDefinition {
  const char* what;
  const char* text;
  int line;
  const char* needle;
};

TEST(DenseDefinitionTest, EveryErrorNamesItsLineAndTheProblem) {
  const BadDefinition cases[] = {
      {"unknown directive", "input 4\n\nlayers a out=2\n", 3, "unknown directive 'layers'"},
      {"missing input before a layer", "# no input\nlayer a out=2\n", 2, "missing 'input'"},
      {"missing input altogether", "# nothing\nseed 3\n", 2, "missing 'input'"},
      {"empty text", "", 1, "missing 'input'"},
      {"input twice", "input 4\ninput 4\nlayer a out=2\n", 2, "'input' is given twice"},
      {"bad input number", "input 4x\n", 1, "input '4x' is not a number"},
      {"zero input", "input 0\n", 1, "input '0' is not a number"},
      {"input without value", "input\n", 1, "'input' takes one number"},
      {"bad seed", "seed -1\ninput 4\n", 1, "seed '-1' is not a number"},
      {"bad out", "input 4\nlayer a out=-3\n", 2, "out '-3' is not a number"},
      {"huge out", "input 4\nlayer a out=99999999999\n", 2, "out '99999999999'"},
      {"missing out", "input 4\nlayer a act=relu\n", 2, "layer 'a' has no out=N"},
      {"unknown key", "input 4\nlayer a out=2 kind=x\n", 2, "unknown key 'kind'"},
      {"repeated key", "input 4\nlayer a out=2 out=3\n", 2, "'out' is given twice"},
      {"not key=value", "input 4\nlayer a out=2 relu\n", 2, "'relu' is not key=value"},
      {"layer without a name", "input 4\nlayer out=2\n", 2, "needs a name"},
      {"bad bias", "input 4\nlayer a out=2 bias=2\n", 2, "bias '2' is not 0 or 1"},
      {"unknown activation", "input 4\nlayer a out=2 act=gelu\n", 2, "unknown activation 'gelu'"},
      {"duplicate layer name", "input 4\nlayer a out=4\nlayer b out=4\nlayer a out=4\n", 4,
       "duplicate layer name 'a'"},
      {"layer called input", "input 4\nlayer input out=4\n", 2, "'input' names the network input"},
      {"bad layer name", "input 4\nlayer a,b out=4\n", 2, "may hold only"},
      {"input naming an unknown layer", "input 4\nlayer a out=4\nlayer b out=4 inputs=a,zz\n", 3,
       "input 'zz' names no layer"},
      {"input naming a later layer", "input 4\nlayer a out=4 inputs=b\nlayer b out=4\n", 2, "a later layer"},
      {"input naming the layer itself", "input 4\nlayer a out=4 inputs=a\n", 2, "the layer itself"},
      {"empty input name", "input 4\nlayer a out=4\nlayer b out=4 inputs=a,,input\n", 3, "empty name"},
      {"inputs of different widths", "input 4\nlayer a out=8\nlayer b out=8 inputs=a,input\n", 3,
       "inputs of different widths: 'a' is 8 wide, 'input' 4"},
      {"no layers", "name x\ninput 4\nseed 3\n", 3, "no layers"},
  };
  for (const BadDefinition& c : cases) {
    SCOPED_TRACE(c.what);
    DenseNetDef def;
    def.input_dim = 77;
    tinyaiClearLastError();
    EXPECT_EQ(tinyai::ParseDenseDefinition(c.text, &def), TINYAI_ERR_INVALID_ARGUMENT);
    const std::string msg = LastMessage();
    EXPECT_EQ(tinyaiGetLastError(), TINYAI_ERR_INVALID_ARGUMENT) << msg;
    EXPECT_TRUE(Contains(msg, "line " + std::to_string(c.line) + ":")) << "wrong line: " << msg;
    EXPECT_TRUE(Contains(msg, c.needle)) << "lacks '" << c.needle << "': " << msg;
    EXPECT_EQ(def.input_dim, 77) << "a failed parse changed its output";
  }
}

// A word of the definition that holds a NUL is shown whole (\x00) in the
// message, not cut at it.
TEST(DenseDefinitionTest, NamesWithANulAreShownWhole) {
  DenseNetDef def;
  tinyaiClearLastError();
  EXPECT_EQ(tinyai::ParseDenseDefinition(std::string("input 4\nlayer a out=2 act=re\0lu\n", 32), &def),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(LastMessage(), "unknown activation 're\\x00lu' (none, relu or tanh)")) << LastMessage();
  EXPECT_EQ(tinyai::ParseDenseDefinition(std::string("input 4\nlayer a\0b out=2\n", 24), &def),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(LastMessage(), "layer name 'a\\x00b' may hold only")) << LastMessage();
}

TEST(DenseDefinitionTest, TheCommittedModelDefinitionParses) {
  const std::string path = CommittedDefinitionPath();
  std::string text;
  ASSERT_TRUE(ReadText(path, &text)) << "cannot read " << path;
  DenseNetDef def;
  ASSERT_EQ(tinyai::ParseDenseDefinition(text, &def), TINYAI_OK) << LastMessage();
  EXPECT_EQ(def.name, "mlp-residual");
  EXPECT_EQ(def.input_dim, 32);
  ASSERT_EQ(def.layers.size(), 8u);
  for (size_t i = 0; i + 1 < def.layers.size(); ++i) EXPECT_EQ(def.layers[i].out, 64) << def.layers[i].name;
  EXPECT_EQ(def.layers.back().name, "head");
  EXPECT_EQ(def.layers.back().out, 10);
  EXPECT_FALSE(def.layers.back().bias);

  // Written and read back: three residual sums, one output of 10 floats.
  TempDir dir;
  const std::string out = dir.File("mlp-residual.tmai");
  tinyai::TmaiWriteStats stats;
  ASSERT_EQ(tinyai::WriteDenseModel(def, out.c_str(), tinyai::WriteOptions(), &stats), TINYAI_OK) << LastMessage();
  EXPECT_EQ(stats.decoded_bytes, 110848u);  // (32*64+64) + 6*(64*64+64) + 64*10 floats
  Opened o(out);
  ASSERT_NE(o.model, nullptr);
  DenseNetSpec spec;
  ASSERT_EQ(spec.Load(o.model->reader()), TINYAI_OK) << LastMessage();
  EXPECT_EQ(spec.input_dim(), 32);
  EXPECT_EQ(spec.output_dim(), 10);
  ASSERT_EQ(spec.layers().size(), 8u);
  EXPECT_EQ(InputsOf(spec, spec.layers()[3]), (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(InputsOf(spec, spec.layers()[5]), (std::vector<int32_t>{4, 2, 0}));
  EXPECT_EQ(InputsOf(spec, spec.layers()[7]), (std::vector<int32_t>{6, 4, 2, 0}));
  for (size_t l = 0; l < 8; ++l) EXPECT_EQ(spec.layers()[l].is_output, l == 7) << l;
}

// ---- The writer, read back through the loader and DenseNetSpec ------------------------

class DenseModelTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()) << "cannot create a temporary folder"; }

  // Parses text and writes it to a fresh file; returns its path ("" on failure).
  std::string Write(const std::string& text, const tinyai::WriteOptions& options = tinyai::WriteOptions(),
                    tinyai::TmaiWriteStats* stats = nullptr) {
    DenseNetDef def;
    EXPECT_EQ(tinyai::ParseDenseDefinition(text, &def), TINYAI_OK) << LastMessage();
    const std::string path = dir_.File("dense-" + std::to_string(++files_) + ".tmai");
    TinyAIStatus s = tinyai::WriteDenseModel(def, path.c_str(), options, stats);
    EXPECT_EQ(s, TINYAI_OK) << LastMessage();
    return s == TINYAI_OK ? path : std::string();
  }

  // The floats of a tensor, read through tinyaiGetLayerWeights.
  std::vector<float> TensorFloats(TinyAIMappedModel* m, const std::string& name) {
    int index = -1;
    EXPECT_EQ(tinyaiFindMappedTensor(m, name.c_str(), &index), TINYAI_OK) << name;
    TinyAITensorInfo info;
    std::memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    if (index < 0 || tinyaiGetMappedTensorInfo(m, index, &info) != TINYAI_OK) return {};
    const uint8_t* w = static_cast<const uint8_t*>(tinyaiGetLayerWeights(m, info.layer));
    EXPECT_NE(w, nullptr) << LastMessage();
    if (!w) return {};
    std::vector<float> v(static_cast<size_t>(info.elementCount));
    std::memcpy(v.data(), w + info.offsetInLayer, v.size() * sizeof(float));
    EXPECT_EQ(tinyaiReleaseLayerWeights(m, info.layer), TINYAI_OK);
    return v;
  }

  TempDir dir_;
  int files_ = 0;
};

TEST_F(DenseModelTest, WritesLayersTensorsAndMetadataAsDefined) {
  const std::string path = Write(kResidualDef);
  ASSERT_FALSE(path.empty());
  Opened o(path);
  ASSERT_NE(o.model, nullptr);
  TinyAIMappedModel* m = o.model;

  EXPECT_EQ(MetaString(m, "general.architecture"), "dense");
  EXPECT_EQ(MetaString(m, "general.name"), "mlp-test");
  int64_t v = 0;
  ASSERT_EQ(tinyaiGetMetadataInt(m, "dense.input_dim", &v), TINYAI_OK);
  EXPECT_EQ(v, 12);
  ASSERT_EQ(tinyaiGetMetadataInt(m, "dense.layers", &v), TINYAI_OK);
  EXPECT_EQ(v, 6);
  EXPECT_EQ(MetaString(m, "dense.0.inputs"), "-1");
  EXPECT_EQ(MetaString(m, "dense.1.inputs"), "0");
  EXPECT_EQ(MetaString(m, "dense.3.inputs"), "2,0");
  EXPECT_EQ(MetaString(m, "dense.5.inputs"), "4,2,0");
  EXPECT_EQ(MetaString(m, "dense.3.activation"), "tanh");
  EXPECT_EQ(MetaString(m, "dense.4.activation"), "none");
  EXPECT_EQ(MetaString(m, "dense.3.name"), "b1_fc1");

  // Layers: one dense layer per network layer, named dense.N.
  ASSERT_EQ(tinyaiGetMappedLayerCount(m), 6);
  for (int l = 0; l < 6; ++l) {
    const TinyAILayerDescriptor* d = tinyaiGetLayerDescriptor(m, l);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->kind, TINYAI_LAYER_DENSE);
    EXPECT_EQ(std::string(d->name), "dense." + std::to_string(l));
    EXPECT_EQ(d->blockIndex, -1);  // blockIndex stays the transformer block number
    EXPECT_EQ(d->tensorCount, l == 5 ? 1 : 2);
    EXPECT_EQ(m->reader().layers()[static_cast<size_t>(l)].block_index, l);
  }

  DenseNetSpec spec;
  ASSERT_EQ(spec.Load(m->reader()), TINYAI_OK) << LastMessage();
  EXPECT_EQ(spec.input_dim(), 12);
  EXPECT_EQ(spec.output_dim(), 3);
  ASSERT_EQ(spec.layers().size(), 6u);
  const int32_t ins[] = {12, 16, 16, 16, 16, 16};
  const int32_t outs[] = {16, 16, 16, 16, 16, 3};
  const DenseActivation acts[] = {DenseActivation::kRelu, DenseActivation::kRelu, DenseActivation::kNone,
                                  DenseActivation::kTanh, DenseActivation::kNone, DenseActivation::kNone};
  const std::vector<std::vector<int32_t>> inputs = {{-1}, {0}, {1}, {2, 0}, {3}, {4, 2, 0}};
  for (size_t l = 0; l < 6; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const DenseLayerSpec& s = spec.layers()[l];
    EXPECT_EQ(s.layer, static_cast<int32_t>(l));
    EXPECT_EQ(s.in, ins[l]);
    EXPECT_EQ(s.out, outs[l]);
    EXPECT_EQ(s.activation, acts[l]);
    EXPECT_EQ(InputsOf(spec, s), inputs[l]);
    EXPECT_EQ(s.is_output, l == 5);
    const std::string p = "dense." + std::to_string(l) + ".";
    const auto& tensors = m->reader().tensors();
    ASSERT_GE(s.weight, 0);
    EXPECT_EQ(std::string(tensors[static_cast<size_t>(s.weight)].name), p + "weight");
    EXPECT_EQ(tensors[static_cast<size_t>(s.weight)].role, TINYAI_ROLE_DENSE_WEIGHT);
    EXPECT_EQ(tensors[static_cast<size_t>(s.weight)].shape[0], static_cast<uint64_t>(outs[l]));
    EXPECT_EQ(tensors[static_cast<size_t>(s.weight)].shape[1], static_cast<uint64_t>(ins[l]));
    EXPECT_EQ(s.weight, m->descriptor(static_cast<int32_t>(l)).firstTensor);  // weight first
    if (l == 5) {
      EXPECT_EQ(s.bias, -1);
    } else {
      ASSERT_GE(s.bias, 0);
      EXPECT_EQ(std::string(tensors[static_cast<size_t>(s.bias)].name), p + "bias");
      EXPECT_EQ(tensors[static_cast<size_t>(s.bias)].role, TINYAI_ROLE_DENSE_BIAS);
      EXPECT_EQ(tensors[static_cast<size_t>(s.bias)].ndims, 1);
      EXPECT_EQ(tensors[static_cast<size_t>(s.bias)].shape[0], static_cast<uint64_t>(outs[l]));
    }
  }
  EXPECT_EQ(spec.bytes(), 6 * sizeof(DenseLayerSpec) + 9 * sizeof(int32_t));
  EXPECT_STREQ(tinyai::DenseActivationName(DenseActivation::kTanh), "tanh");
  EXPECT_STREQ(tinyai::DenseActivationName(static_cast<DenseActivation>(9)), "?");

  // Weights: uniform with variance 1/in (|w| <= sqrt(3/in)), biases in [-0.1, 0.1].
  for (size_t l = 0; l < 6; ++l) {
    const std::string p = "dense." + std::to_string(l) + ".";
    const std::vector<float> w = TensorFloats(m, p + "weight");
    ASSERT_EQ(w.size(), static_cast<size_t>(ins[l] * outs[l]));
    const float bound = std::sqrt(3.0f / static_cast<float>(ins[l]));
    double sum_sq = 0.0;
    for (float x : w) {
      EXPECT_LE(std::fabs(x), bound);
      sum_sq += static_cast<double>(x) * x;
    }
    const double variance = sum_sq / static_cast<double>(w.size());
    EXPECT_NEAR(variance, 1.0 / ins[l], 0.5 / ins[l]) << p;
    if (l == 5) continue;
    const std::vector<float> b = TensorFloats(m, p + "bias");
    ASSERT_EQ(b.size(), static_cast<size_t>(outs[l]));
    bool any_nonzero = false;
    for (float x : b) {
      EXPECT_LE(std::fabs(x), 0.1f);
      any_nonzero = any_nonzero || x != 0.0f;
    }
    EXPECT_TRUE(any_nonzero);
  }
}

TEST_F(DenseModelTest, OutputIsTheLayersNoLaterLayerReads) {
  // a feeds b and c; d reads the input only. Outputs: b, c, d (3 + 5 + 2).
  const std::string path = Write(
      "input 4\n"
      "layer a out=8 act=relu\n"
      "layer b out=3 inputs=a\n"
      "layer c out=5 act=tanh inputs=a\n"
      "layer d out=2 inputs=input\n");
  ASSERT_FALSE(path.empty());
  Opened o(path);
  ASSERT_NE(o.model, nullptr);
  DenseNetSpec spec;
  ASSERT_EQ(spec.Load(o.model->reader()), TINYAI_OK) << LastMessage();
  ASSERT_EQ(spec.layers().size(), 4u);
  EXPECT_FALSE(spec.layers()[0].is_output);
  EXPECT_TRUE(spec.layers()[1].is_output);
  EXPECT_TRUE(spec.layers()[2].is_output);
  EXPECT_TRUE(spec.layers()[3].is_output);
  EXPECT_EQ(spec.output_dim(), 10);
  EXPECT_EQ(InputsOf(spec, spec.layers()[3]), (std::vector<int32_t>{-1}));
  EXPECT_EQ(spec.layers()[3].in, 4);
}

TEST_F(DenseModelTest, SameDefinitionAndSeedGiveTheSameBytes) {
  const std::string a = Write(kResidualDef), b = Write(kResidualDef);
  std::string reseeded = kResidualDef;
  reseeded.replace(reseeded.find("seed 5"), 6, "seed 6");
  const std::string c = Write(reseeded);
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  ASSERT_FALSE(c.empty());
  Bytes ba, bb, bc;
  ASSERT_TRUE(tt::ReadFileBytes(a, &ba));
  ASSERT_TRUE(tt::ReadFileBytes(b, &bb));
  ASSERT_TRUE(tt::ReadFileBytes(c, &bc));
  EXPECT_TRUE(ba == bb) << "two writes of one definition differ";
  ASSERT_EQ(ba.size(), bc.size());
  EXPECT_FALSE(ba == bc) << "another seed wrote the same weights";
}

TEST_F(DenseModelTest, ZstdCompressedModelLoadsToTheSameWeights) {
  // Wide layers of random floats: zstd shrinks them a little (their low
  // mantissa bits are zero), so they are stored compressed.
  const std::string text = "input 256\nlayer a out=512 act=relu\nlayer b out=256 act=none inputs=a\n";
  tinyai::WriteOptions zstd;
  zstd.codec = TINYAI_CODEC_ZSTD;
  tinyai::TmaiWriteStats stats;
  const std::string plain = Write(text), packed = Write(text, zstd, &stats);
  ASSERT_FALSE(plain.empty());
  ASSERT_FALSE(packed.empty());
  EXPECT_GT(stats.compressed_tensors, 0u);
  EXPECT_LT(stats.stored_bytes, stats.decoded_bytes);
  Opened p(plain), z(packed);
  ASSERT_NE(p.model, nullptr);
  ASSERT_NE(z.model, nullptr);
  DenseNetSpec spec;
  ASSERT_EQ(spec.Load(z.model->reader()), TINYAI_OK) << LastMessage();
  ASSERT_EQ(spec.layers().size(), 2u);
  EXPECT_EQ(z.model->reader().tensors()[static_cast<size_t>(spec.layers()[0].weight)].codec, TINYAI_CODEC_ZSTD);
  EXPECT_EQ(spec.output_dim(), 256);
  for (const char* name : {"dense.0.weight", "dense.0.bias", "dense.1.weight", "dense.1.bias"}) {
    EXPECT_TRUE(TensorFloats(p.model, name) == TensorFloats(z.model, name)) << name;
  }
}

TEST_F(DenseModelTest, WriterChecksADefinitionBuiltInCode) {
  DenseNetDef def;
  def.input_dim = 4;
  const std::string path = dir_.File("never.tmai");
  tinyaiClearLastError();
  EXPECT_EQ(tinyai::WriteDenseModel(def, path.c_str()), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "0 layers");
  def.layers.push_back({"a", 8, "relu", {}, true});
  def.layers.push_back({"b", 8, "", {"a", "input"}, true});
  EXPECT_EQ(tinyai::WriteDenseModel(def, path.c_str()), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "layer 1: layer 'b': inputs of different widths");
  def.layers[1].inputs = {"a"};
  def.layers[1].activation = "softmax";
  EXPECT_EQ(tinyai::WriteDenseModel(def, path.c_str()), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "unknown activation 'softmax'");
  EXPECT_FALSE(tt::FileExists(path));
  def.layers[1].activation = "";  // none
  ASSERT_EQ(tinyai::WriteDenseModel(def, path.c_str()), TINYAI_OK) << LastMessage();
  Opened o(path);
  ASSERT_NE(o.model, nullptr);
  EXPECT_EQ(MetaString(o.model, "dense.1.activation"), "none");
  EXPECT_EQ(MetaString(o.model, "dense.1.inputs"), "0");
}

// Plans the dense model at path with the forward scheduler; returns the status.
TinyAIStatus PlanDense(const std::string& path) {
  Opened o(path);
  if (!o.model) return tinyaiGetLastError();
  TinyAISchedulerConfig cfg = tinyaiCreateDefaultSchedulerConfig();
  TinyAIForwardScheduler* sched = tinyaiCreateForwardSchedulerWithConfig(o.model, TINYAI_EXEC_ADAPTIVE, 0, &cfg);
  TinyAIStatus s = sched ? tinyaiAddModelLayersToSchedule(sched) : tinyaiGetLastError();
  if (s == TINYAI_OK) s = tinyaiPlanForwardPass(sched);
  tinyaiDestroyForwardScheduler(sched);
  return s;
}

// "input 4", n layers a0.. of out=4 reading the input, then "sum" reading
// every one of them (and the network input when with_input).
std::string WideSumDefinition(int n, bool with_input) {
  std::string text = "input 4\n", inputs = with_input ? "input" : "";
  for (int i = 0; i < n; ++i) {
    text += "layer a" + std::to_string(i) + " out=4 inputs=input\n";
    inputs += (inputs.empty() ? "" : ",") + std::string("a") + std::to_string(i);
  }
  return text + "layer sum out=2 inputs=" + inputs + "\n";
}

// The limits the runtime keeps on a dense network (format/limits.h) are the
// writer's: each input at most once, at most 64 inputs per layer, an output
// at most INT32_MAX floats wide. What one side refuses, so does the other.
TEST_F(DenseModelTest, TheWriterRefusesWhatTheRuntimeRefuses) {
  DenseNetDef def;
  // A repeated input, by name or as the network input.
  EXPECT_EQ(tinyai::ParseDenseDefinition("input 4\nlayer a out=4\nlayer b out=4 inputs=a,a\n", &def),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "line 3: layer 'b': input 'a' is named twice");
  EXPECT_EQ(tinyai::ParseDenseDefinition("input 4\nlayer a out=4 inputs=input,input\n", &def),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "line 2: layer 'a': input 'input' is named twice");
  // In code, too.
  DenseNetDef coded;
  coded.input_dim = 4;
  coded.layers.push_back({"a", 4, "relu", {}, true});
  coded.layers.push_back({"b", 4, "", {"a", "a"}, true});
  const std::string never = dir_.File("never.tmai");
  EXPECT_EQ(tinyai::WriteDenseModel(coded, never.c_str()), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "input 'a' is named twice");
  EXPECT_FALSE(tt::FileExists(never));

  // 64 inputs write, load and plan; 65 are refused.
  ASSERT_EQ(tinyai::ParseDenseDefinition(WideSumDefinition(63, true), &def), TINYAI_OK) << LastMessage();
  const std::string wide = dir_.File("wide64.tmai");
  ASSERT_EQ(tinyai::WriteDenseModel(def, wide.c_str()), TINYAI_OK) << LastMessage();
  EXPECT_EQ(PlanDense(wide), TINYAI_OK) << LastMessage();
  EXPECT_EQ(tinyai::ParseDenseDefinition(WideSumDefinition(64, true), &def), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "65 inputs; a layer sums at most 64");

  // The network's output: 127 layers of 2^24 floats fit an int32 (127 * 2^24
  // < 2^31), 128 do not.
  std::string text = "input 1\n";
  for (int i = 0; i < 128; ++i) text += "layer o" + std::to_string(i) + " out=16777216 inputs=input\n";
  EXPECT_EQ(tinyai::ParseDenseDefinition(text, &def), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "output (the layers no later layer reads) is 2147483648 floats wide");
  text = text.substr(0, text.rfind("layer o127"));
  EXPECT_EQ(tinyai::ParseDenseDefinition(text, &def), TINYAI_OK) << LastMessage();
}

// A definition of many layers parses in linear time (names are looked up in a
// hash index, not by scanning every earlier layer): 65,536 layers took 0.2 s
// (0.8 s under ASan), the scan 17 s. What is bounded is how the cost grows
// from 512 to 65,536 layers (CPU time, so neither a slow nor a busy machine
// changes it), never a time: linear measured n^1.30-1.38 in release beside
// an ASan suite and two fuzzers (n^1.6-1.7 from 4,096: the index outgrows
// the caches), the scan about n^1.97 (17 s against about 1 ms at 512).
TEST(DenseDefinitionTest, ManyLayersParseInLinearTime) {
  const int n = 65536;
  std::vector<std::string> texts;
  for (int layers : {512, n}) {
    std::string text = "input 1\n";
    for (int i = 0; i < layers; ++i) text += "layer l" + std::to_string(i) + " out=1\n";
    texts.push_back(text);
  }
  DenseNetDef def;
  auto parse = [&](int64_t layers) {
    ASSERT_EQ(tinyai::ParseDenseDefinition(texts[layers == n ? 1 : 0], &def), TINYAI_OK) << LastMessage();
    ASSERT_EQ(def.layers.size(), static_cast<size_t>(layers));
  };
  EXPECT_TRUE(tt::GrowsLinearly(parse, 512, n)) << "parsing a definition";
  ASSERT_FALSE(HasFatalFailure());
  std::string text = texts[1] + "layer one_too_many out=1\n";
  EXPECT_EQ(tinyai::ParseDenseDefinition(text, &def), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "65537 layers; at most 65536");
}

// ---- DenseNetSpec::Load on malformed files ------------------------------------------

// A dense model written tensor by tensor, with zero weights, every part of
// which a test may get wrong.
struct RawLayer {
  uint32_t kind = TINYAI_LAYER_DENSE;
  int32_t block_index = -2;  // -2: the layer's index
  std::string activation;    // "" leaves the key out
  std::string inputs;        // "" leaves the key out
  std::vector<uint64_t> weight_shape;
  TinyAIDType weight_dtype = TINYAI_DTYPE_F32;
  TinyAIDType bias_dtype = TINYAI_DTYPE_F32;
  std::vector<uint64_t> bias_shape;  // empty: no bias
  bool weight = true;
  bool extra_tensor = false;  // a tensor of another role
};

struct RawNet {
  std::string architecture = "dense";
  bool input_dim_as_string = false;
  int64_t input_dim = 4;     // < 0 leaves the key out
  int64_t layer_count = -1;  // -1: the number of layers
  std::vector<RawLayer> layers;
};

// input 4 -> a: 8 relu -> b: 4 tanh -> c: 2 none (reads b and the input).
RawNet GoodNet() {
  RawNet n;
  RawLayer a, b, c;
  a.activation = "relu";
  a.inputs = "-1";
  a.weight_shape = {8, 4};
  a.bias_shape = {8};
  b.activation = "tanh";
  b.inputs = "0";
  b.weight_shape = {4, 8};
  b.bias_shape = {4};
  c.activation = "none";
  c.inputs = "1,-1";
  c.weight_shape = {2, 4};
  n.layers = {a, b, c};
  return n;
}

TinyAIStatus WriteRaw(const std::string& path, const RawNet& n) {
  tinyai::TmaiWriter w;
  w.AddMetaString("general.architecture", n.architecture);
  if (n.input_dim_as_string) w.AddMetaString("dense.input_dim", std::to_string(n.input_dim));
  else if (n.input_dim >= 0) w.AddMetaInt("dense.input_dim", n.input_dim);
  w.AddMetaInt("dense.layers", n.layer_count >= 0 ? n.layer_count : static_cast<int64_t>(n.layers.size()));
  for (size_t l = 0; l < n.layers.size(); ++l) {
    const std::string p = "dense." + std::to_string(l) + ".";
    if (!n.layers[l].activation.empty()) w.AddMetaString(p + "activation", n.layers[l].activation);
    if (!n.layers[l].inputs.empty()) w.AddMetaString(p + "inputs", n.layers[l].inputs);
  }
  int32_t tensors = 0;
  for (size_t l = 0; l < n.layers.size(); ++l) {
    const RawLayer& r = n.layers[l];
    const std::string p = "dense." + std::to_string(l) + ".";
    w.AddLayer(static_cast<TinyAILayerKind>(r.kind), r.block_index == -2 ? static_cast<int32_t>(l) : r.block_index);
    if (r.weight) {
      w.AddTensor(p + "weight", TINYAI_ROLE_DENSE_WEIGHT, r.weight_dtype, r.weight_shape);
      ++tensors;
    }
    if (!r.bias_shape.empty()) {
      w.AddTensor(p + "bias", TINYAI_ROLE_DENSE_BIAS, r.bias_dtype, r.bias_shape);
      ++tensors;
    }
    if (r.extra_tensor) {
      w.AddTensor(p + "norm", TINYAI_ROLE_FFN_NORM, TINYAI_DTYPE_F32, {4});
      ++tensors;
    }
  }
  TINYAI_RETURN_IF_ERROR(w.Open(path.c_str()));
  for (int32_t t = 0; t < tensors; ++t) {
    std::vector<uint8_t> zeros(static_cast<size_t>(w.TensorBytes(t)));
    TINYAI_RETURN_IF_ERROR(w.Write(zeros.data(), zeros.size()));
  }
  return w.Finish();
}

class DenseSpecLoadTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()) << "cannot create a temporary folder"; }

  // Writes n, opens it (which must succeed: the file is well-formed .tmai)
  // and expects DenseNetSpec::Load to fail with code and a message naming the
  // file and containing every needle.
  void ExpectLoadFails(const RawNet& n, TinyAIStatus code, std::initializer_list<const char*> needles) {
    const std::string path = dir_.File("bad-" + std::to_string(++files_) + ".tmai");
    ASSERT_EQ(WriteRaw(path, n), TINYAI_OK) << LastMessage();
    Opened o(path);
    ASSERT_NE(o.model, nullptr);
    DenseNetSpec spec;
    tinyaiClearLastError();
    EXPECT_EQ(spec.Load(o.model->reader()), code) << LastMessage();
    const std::string msg = LastMessage();
    EXPECT_EQ(tinyaiGetLastError(), code) << msg;
    EXPECT_TRUE(Contains(msg, path)) << "message does not name the file: " << msg;
    for (const char* needle : needles) EXPECT_TRUE(Contains(msg, needle)) << "lacks '" << needle << "': " << msg;
    EXPECT_EQ(spec.layers().size(), 0u) << "a failed Load left layers behind";
    EXPECT_EQ(spec.input_dim(), 0);
  }

  TempDir dir_;
  int files_ = 0;
};

TEST_F(DenseSpecLoadTest, TheGoodNetLoads) {
  const std::string path = dir_.File("good.tmai");
  ASSERT_EQ(WriteRaw(path, GoodNet()), TINYAI_OK) << LastMessage();
  Opened o(path);
  ASSERT_NE(o.model, nullptr);
  DenseNetSpec spec;
  ASSERT_EQ(spec.Load(o.model->reader()), TINYAI_OK) << LastMessage();
  EXPECT_EQ(spec.output_dim(), 2);
  EXPECT_EQ(InputsOf(spec, spec.layers()[2]), (std::vector<int32_t>{1, -1}));
  EXPECT_EQ(spec.layers()[2].bias, -1);
  // Loading again (another file) replaces what was there.
  RawNet wide = GoodNet();
  wide.layers[2].weight_shape = {6, 4};
  const std::string path2 = dir_.File("good2.tmai");
  ASSERT_EQ(WriteRaw(path2, wide), TINYAI_OK) << LastMessage();
  Opened o2(path2);
  ASSERT_NE(o2.model, nullptr);
  ASSERT_EQ(spec.Load(o2.model->reader()), TINYAI_OK) << LastMessage();
  EXPECT_EQ(spec.output_dim(), 6);
  EXPECT_EQ(spec.inputs().size(), 4u);
}

TEST_F(DenseSpecLoadTest, AnotherArchitectureIsUnsupported) {
  RawNet n = GoodNet();
  n.architecture = "llama";
  ExpectLoadFails(n, TINYAI_ERR_UNSUPPORTED, {"architecture 'llama'"});
}

TEST_F(DenseSpecLoadTest, MissingKeysAreBadFormat) {
  RawNet n = GoodNet();
  n.input_dim = -1;
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"'dense.input_dim' is missing"});
  n = GoodNet();
  n.layers[1].inputs.clear();
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"'dense.1.inputs' is missing"});
  n = GoodNet();
  n.layers[2].activation.clear();
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"'dense.2.activation' is missing"});
}

TEST_F(DenseSpecLoadTest, MistypedOrOutOfRangeKeysAreBadFormat) {
  RawNet n = GoodNet();
  n.input_dim_as_string = true;
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"'dense.input_dim' is not an integer"});
  n = GoodNet();
  n.input_dim = 0;
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"'dense.input_dim' is 0"});
  n = GoodNet();
  n.layer_count = 2;
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"dense.layers is 2", "3 layers"});
}

TEST_F(DenseSpecLoadTest, UnknownActivationIsUnsupported) {
  RawNet n = GoodNet();
  n.layers[1].activation = "gelu";
  ExpectLoadFails(n, TINYAI_ERR_UNSUPPORTED, {"dense layer 1", "'gelu'"});
}

// An activation name that holds a NUL (or a control byte) is shown whole
// in the message, as \x00, not cut at it.
TEST_F(DenseSpecLoadTest, NamesWithANulAreShownWhole) {
  RawNet n = GoodNet();
  n.layers[1].activation = std::string("relu\0\x1b[2J", 9);
  ExpectLoadFails(n, TINYAI_ERR_UNSUPPORTED, {"activation 'relu\\x00\\x1b[2J' is not supported"});
  n = GoodNet();
  n.architecture = std::string("dense\0x", 7);
  ExpectLoadFails(n, TINYAI_ERR_UNSUPPORTED, {"architecture 'dense\\x00x'"});
}

TEST_F(DenseSpecLoadTest, InputsMustNameTheInputOrEarlierLayers) {
  RawNet n = GoodNet();
  n.layers[1].inputs = "2";
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"dense layer 1", "input 2 is a later layer"});
  n.layers[1].inputs = "1";
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"dense layer 1", "input 1 is the layer itself"});
  n.layers[1].inputs = "-2";
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"dense layer 1", "input -2 is out of range"});
  n.layers[1].inputs = "3";
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"dense layer 1", "input 3 is out of range"});
  n = GoodNet();
  for (const char* bad : {"0, -1", "0,", ",0", "x", "0;1", "+0", "-", "12345678901"}) {
    SCOPED_TRACE(bad);
    n.layers[2].inputs = bad;
    ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"dense layer 2", "not a comma-separated list"});
  }
}

// What the scheduler and the runtime refuse, Load refuses first with a
// specific status: an input named twice, more than 64 inputs.
TEST_F(DenseSpecLoadTest, RepeatedOrTooManyInputsAreBadFormat) {
  RawNet n = GoodNet();
  n.layers[2].inputs = "1,1";
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"dense layer 2", "input 1 appears twice"});
  n.layers[2].inputs = "-1,1,-1";
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"dense layer 2", "input -1 appears twice"});
  // 65 layers of 4 reading the input, and one that sums them all.
  RawNet wide;
  std::string all;
  for (int i = 0; i < 65; ++i) {
    RawLayer l;
    l.activation = "none";
    l.inputs = "-1";
    l.weight_shape = {4, 4};
    wide.layers.push_back(l);
    all += (all.empty() ? "" : ",") + std::to_string(i);
  }
  RawLayer sum;
  sum.activation = "none";
  sum.inputs = all;
  sum.weight_shape = {2, 4};
  wide.layers.push_back(sum);
  ExpectLoadFails(wide, TINYAI_ERR_BAD_FORMAT, {"dense layer 65", "more than 64 inputs"});
}

TEST_F(DenseSpecLoadTest, InputsOfDifferentWidthsAreBadFormat) {
  RawNet n = GoodNet();
  n.layers[2].inputs = "1,0";  // 4 and 8 wide
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"dense layer 2", "inputs of different widths", "input 0 is 8"});
}

TEST_F(DenseSpecLoadTest, WrongTensorShapesAreBadFormat) {
  RawNet n = GoodNet();
  n.layers[1].weight_shape = {4, 7};
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"dense layer 1", "'dense.1.weight'", "[4, 7]", "[out, 8]"});
  n = GoodNet();
  n.layers[1].weight_shape = {32};
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"'dense.1.weight'", "[32]"});
  n = GoodNet();
  n.layers[0].bias_shape = {4};
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"dense layer 0", "'dense.0.bias'", "[4]", "expected [8]"});
}

// Weights may be f16 (the kernels multiply it); biases must stay f32.
TEST_F(DenseSpecLoadTest, F16WeightsLoadAndF16BiasesAreUnsupported) {
  RawNet n = GoodNet();
  n.layers[1].weight_dtype = TINYAI_DTYPE_F16;
  const std::string path = dir_.File("f16-weights.tmai");
  ASSERT_EQ(WriteRaw(path, n), TINYAI_OK) << LastMessage();
  Opened o(path);
  ASSERT_NE(o.model, nullptr);
  DenseNetSpec spec;
  EXPECT_EQ(spec.Load(o.model->reader()), TINYAI_OK) << LastMessage();
  n = GoodNet();
  n.layers[1].bias_dtype = TINYAI_DTYPE_F16;
  n.layers[1].bias_shape = {8};  // 4 f32 values' bytes, as halves
  ExpectLoadFails(n, TINYAI_ERR_UNSUPPORTED, {"dense layer 1", "'dense.1.bias'", "f16", "biases must be f32"});
}

TEST_F(DenseSpecLoadTest, LayersMustBeDenseAndInOrder) {
  RawNet n = GoodNet();
  n.layers[1].kind = TINYAI_LAYER_OUTPUT;
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"layer 1 is of kind output"});
  n = GoodNet();
  n.layers[2].block_index = 5;
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"dense layer 2 has block_index 5"});
}

TEST_F(DenseSpecLoadTest, TensorsMustBeOneWeightAndAtMostOneBias) {
  RawNet n = GoodNet();
  n.layers[1].weight = false;
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"dense layer 1 has no dense_weight tensor"});
  n = GoodNet();
  n.layers[0].extra_tensor = true;
  ExpectLoadFails(n, TINYAI_ERR_BAD_FORMAT, {"dense layer 0", "'dense.0.norm'", "ffn_norm"});
}

TEST_F(DenseSpecLoadTest, AnUnreadableCodecIsUnsupported) {
  const std::string path = dir_.File("sparse.tmai");
  ASSERT_EQ(WriteRaw(path, GoodNet()), TINYAI_OK) << LastMessage();
  Bytes image;
  ASSERT_TRUE(tt::ReadFileBytes(path, &image));
  const int32_t t = tt::FindTensor(image, "dense.1.weight");
  ASSERT_GE(t, 0);
  tt::PatchTensor(&image, static_cast<uint32_t>(t), [](tinyai::tmai::TensorEntry& e) {
    e.codec = TINYAI_CODEC_TILE_SPARSE;  // reserved: the reader parses it, no runner reads it
  });
  tt::AlignedImage aligned(image);
  ASSERT_NE(aligned.data(), nullptr);
  tinyai::TmaiReader reader;
  ASSERT_EQ(reader.Parse(aligned.data(), aligned.size(), aligned.size(), "sparse.tmai"), TINYAI_OK) << LastMessage();
  DenseNetSpec spec;
  EXPECT_EQ(spec.Load(reader), TINYAI_ERR_UNSUPPORTED);
  EXPECT_LAST_ERROR(TINYAI_ERR_UNSUPPORTED, "'sparse.tmai': dense layer 1: tensor 'dense.1.weight' is stored with codec");
}

}  // namespace
