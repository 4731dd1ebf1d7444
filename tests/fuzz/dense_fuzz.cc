// libFuzzer target: dense-network definition files (what `tinyai-convert
// --dense DEF.txt` reads; docs/format.md, "Dense networks").
//
//  - tinyai::ParseDenseDefinition must accept the text or refuse it with
//    TINYAI_ERR_INVALID_ARGUMENT and a message "line N: ..." naming a line
//    of the text.
//  - A definition it accepts (and that is small enough to write quickly: at
//    most 256 layers and 2^18 weights) must be written by WriteDenseModel,
//    open with the loader, and run through the forward scheduler: three rows
//    with no memory limit, then again in STREAMING mode at exactly the
//    least limit the first plan reports (the definition's seed picks debug
//    execution for both). Both outputs must match a float64 evaluation of
//    the network from the weights in the file, and a run may end with
//    TINYAI_ERR_NOT_FINITE only where that evaluation leaves float's range.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "import/model_builder.h"
#include "fuzz_util.h"
#include "tinyai/tinyai.h"

namespace {

using tinyai_fuzz::CheckFailure;

constexpr int32_t kRows = 3;

// Each layer's producers (-1: the network's input) and input width.
struct Resolved {
  std::vector<std::vector<int32_t>> producers;
  std::vector<int32_t> in;
  std::vector<bool> is_output;
  uint64_t weights = 0;
  int32_t output_dim = 0;
};

Resolved Resolve(const tinyai::DenseNetDef& def) {
  Resolved r;
  std::map<std::string, int32_t> index;
  for (size_t l = 0; l < def.layers.size(); ++l) {
    const tinyai::DenseLayerDef& d = def.layers[l];
    std::vector<std::string> names = d.inputs;
    if (names.empty()) names.push_back(l == 0 ? std::string("input") : def.layers[l - 1].name);
    std::vector<int32_t> p;
    for (const std::string& n : names) {
      if (n == "input") {
        p.push_back(-1);
      } else {
        auto it = index.find(n);
        FUZZ_CHECK(it != index.end(), "layer %zu reads '%s', which is no earlier layer", l, n.c_str());
        p.push_back(it->second);
      }
    }
    const int32_t in = p[0] < 0 ? def.input_dim : def.layers[static_cast<size_t>(p[0])].out;
    for (int32_t q : p) {
      FUZZ_CHECK((q < 0 ? def.input_dim : def.layers[static_cast<size_t>(q)].out) == in,
                 "layer %zu's inputs differ in width", l);
    }
    r.producers.push_back(p);
    r.in.push_back(in);
    r.weights += static_cast<uint64_t>(d.out) * static_cast<uint64_t>(in);
    FUZZ_CHECK(index.emplace(d.name, static_cast<int32_t>(l)).second, "duplicate layer name '%s'", d.name.c_str());
  }
  r.is_output.assign(def.layers.size(), true);
  for (const auto& p : r.producers) {
    for (int32_t q : p) {
      if (q >= 0) r.is_output[static_cast<size_t>(q)] = false;
    }
  }
  int64_t out = 0;
  for (size_t l = 0; l < def.layers.size(); ++l) out += r.is_output[l] ? def.layers[l].out : 0;
  r.output_dim = static_cast<int32_t>(out);
  return r;
}

// The network in float64 from the weights in the file; false when a value
// (or a sum of magnitudes that float partial sums may reach) is not below
// 1e30: the float run may then overflow, and nothing is compared.
bool Reference(TinyAIMappedModel* model, const tinyai::DenseNetDef& def, const Resolved& r,
               const std::vector<float>& input, std::vector<double>* out) {
  const size_t layers = def.layers.size();
  std::vector<std::vector<double>> y(layers);  // kRows x out per layer
  out->assign(static_cast<size_t>(kRows) * static_cast<size_t>(r.output_dim), 0.0);
  for (size_t l = 0; l < layers; ++l) {
    const int32_t in = r.in[l], o = def.layers[l].out;
    char name[64];
    int wt = -1, bt = -1;
    std::snprintf(name, sizeof name, "dense.%zu.weight", l);
    FUZZ_CHECK(tinyaiFindMappedTensor(model, name, &wt) == TINYAI_OK, "no tensor %s", name);
    std::snprintf(name, sizeof name, "dense.%zu.bias", l);
    const bool has_bias = tinyaiFindMappedTensor(model, name, &bt) == TINYAI_OK;
    FUZZ_CHECK(has_bias == def.layers[l].bias, "layer %zu: bias %d in the file, %d in the definition", l, has_bias,
               def.layers[l].bias);
    TinyAITensorInfo wi{}, bi{};
    wi.structSize = bi.structSize = sizeof wi;
    FUZZ_CHECK(tinyaiGetMappedTensorInfo(model, wt, &wi) == TINYAI_OK, "tensor info");
    const uint8_t* base = static_cast<const uint8_t*>(tinyaiGetLayerWeights(model, wi.layer));
    FUZZ_CHECK(base != nullptr, "layer %d does not load", wi.layer);
    const float* w = reinterpret_cast<const float*>(base + wi.offsetInLayer);
    const float* b = nullptr;
    if (has_bias) {
      FUZZ_CHECK(tinyaiGetMappedTensorInfo(model, bt, &bi) == TINYAI_OK, "tensor info");
      b = reinterpret_cast<const float*>(base + bi.offsetInLayer);
    }
    y[l].assign(static_cast<size_t>(kRows) * static_cast<size_t>(o), 0.0);
    std::vector<double> x(static_cast<size_t>(in));
    bool finite = true;
    for (int32_t row = 0; row < kRows && finite; ++row) {
      std::fill(x.begin(), x.end(), 0.0);
      for (int32_t q : r.producers[l]) {
        for (int32_t i = 0; i < in; ++i) {
          x[static_cast<size_t>(i)] += q < 0 ? input[static_cast<size_t>(row * in + i)]
                                             : y[static_cast<size_t>(q)][static_cast<size_t>(row * in + i)];
        }
      }
      for (int32_t j = 0; j < o; ++j) {
        double acc = b ? b[j] : 0.0;
        double magnitude = std::fabs(acc);  // what float partial sums may reach
        for (int32_t i = 0; i < in; ++i) {
          const double term = static_cast<double>(w[static_cast<size_t>(j) * in + i]) * x[static_cast<size_t>(i)];
          acc += term;
          magnitude += std::fabs(term);
        }
        finite = finite && magnitude < 1e30;
        const std::string& act = def.layers[l].activation;
        if (act == "relu") acc = acc > 0.0 ? acc : 0.0;
        if (act == "tanh") acc = std::tanh(acc);
        finite = finite && std::isfinite(acc) && std::fabs(acc) < 1e30;
        y[l][static_cast<size_t>(row * o + j)] = acc;
      }
    }
    tinyaiReleaseLayerWeights(model, wi.layer);
    if (!finite) return false;
  }
  for (int32_t row = 0; row < kRows; ++row) {
    size_t at = static_cast<size_t>(row) * static_cast<size_t>(r.output_dim);
    for (size_t l = 0; l < layers; ++l) {
      if (!r.is_output[l]) continue;
      const int32_t o = def.layers[l].out;
      for (int32_t j = 0; j < o; ++j) (*out)[at++] = y[l][static_cast<size_t>(row * o + j)];
    }
  }
  return true;
}

// Runs kRows rows through a scheduler in mode under limit; *min_limit (may
// be null) receives the plan's least limit.
void Run(TinyAIMappedModel* model, TinyAIExecutionMode mode, size_t limit, bool debug, const Resolved& r,
         const tinyai::DenseNetDef& def, const std::vector<float>& input, bool finite, std::vector<float>* output,
         uint64_t* min_limit) {
  TinyAISchedulerConfig cfg = tinyaiCreateDefaultSchedulerConfig();
  cfg.debugExecution = debug;
  TinyAIForwardScheduler* s = tinyaiCreateForwardSchedulerWithConfig(model, mode, limit, &cfg);
  FUZZ_CHECK(s != nullptr, "a scheduler for the network");
  FUZZ_CHECK(tinyaiAddModelLayersToSchedule(s) == TINYAI_OK, "adding the network's layers");
  FUZZ_CHECK(tinyaiSetScheduleBatchSize(s, kRows) == TINYAI_OK, "batch size");
  TinyAIStatus st = tinyaiPrepareForwardPass(s);
  FUZZ_CHECK(st == TINYAI_OK, "the network does not prepare in %s under %zu bytes: %s",
             tinyaiExecutionModeName(mode), limit, tinyaiStatusString(st));
  TinyAISchedulerReport report;
  report.structSize = sizeof report;
  FUZZ_CHECK(tinyaiGetSchedulerReport(s, &report) == TINYAI_OK, "report");
  FUZZ_CHECK(report.layerCount == static_cast<int32_t>(def.layers.size()), "%d layers scheduled of %zu",
             report.layerCount, def.layers.size());
  if (min_limit) *min_limit = report.minimumMemoryLimit;
  output->assign(static_cast<size_t>(kRows) * static_cast<size_t>(r.output_dim), NAN);
  int layer = -1, steps = 0;
  while (tinyaiExecuteNextLayer(s, input.data(), output->data(), &layer)) {
    FUZZ_CHECK(layer >= 0 && layer < static_cast<int>(def.layers.size()), "executed layer %d", layer);
    ++steps;
    FUZZ_CHECK(steps <= kRows * static_cast<int>(def.layers.size()), "more steps than rows times layers");
  }
  st = tinyaiGetSchedulerStatus(s);
  // An output row that overflows ends the run with TINYAI_ERR_NOT_FINITE:
  // only where the float64 evaluation leaves float's range.
  FUZZ_CHECK(st == TINYAI_OK || (st == TINYAI_ERR_NOT_FINITE && !finite), "execution fails: %s",
             tinyaiStatusString(st));
  FUZZ_CHECK(st != TINYAI_OK || (steps % static_cast<int>(def.layers.size()) == 0 && steps > 0),
             "%d steps for %zu layers", steps, def.layers.size());
  tinyaiDestroyForwardScheduler(s);
}

void Compare(const std::vector<float>& got, const std::vector<double>& want, const char* what) {
  for (size_t i = 0; i < want.size(); ++i) {
    const double tolerance = 1e-3 * (1.0 + std::fabs(want[i]));
    FUZZ_CHECK(std::fabs(static_cast<double>(got[i]) - want[i]) <= tolerance, "%s: output %zu is %g, expected %g",
               what, i, static_cast<double>(got[i]), want[i]);
  }
}

// The project's example network, and definitions with every directive and
// key: several inputs, the network's input named, no bias, comments, tabs,
// CRLF line ends, and a few errors (an unknown key, a layer before the
// input, an unknown input, an input named twice).
void WriteSeeds(const char* dir) {
  std::vector<uint8_t> example;
  const std::string example_path = std::string(TINYAI_FUZZ_SOURCE_DIR) + "/models/mlp_residual.def";
  FUZZ_CHECK(tinyai_fuzz::ReadFile(example_path, &example), "cannot read %s", example_path.c_str());
  tinyai_fuzz::WriteSeed(dir, "mlp_residual.def", example.data(), example.size());
  const std::string defs[] = {
      "input 4\nlayer a out=4 act=tanh\nlayer b out=4 inputs=a,input\nlayer c out=3 act=relu inputs=b,input,a bias=0\n",
      "name tiny-net   # a comment\nseed 12\ninput 1\nlayer only out=1\n",
      "input 3\r\nlayer\tx.1 out=5 act=relu\r\nlayer y-2 out=3 act=none inputs=input\r\nlayer z_3 out=2 inputs=x.1\r\n",
      "input 8\nlayer a out=8\nlayer b out=8 inputs=a\nlayer c out=8 inputs=b,a\nlayer d out=8 inputs=c,b,a,input\n"
      "layer e out=2 act=tanh inputs=d,c,b,a,input\n",
      "input 4\nlayer a out=4 foo=1\n",
      "input 4\nlayer a out=4\nlayer b out=4 inputs=a,a\n",
      "layer a out=4\ninput 4\n",
      "input 4\nlayer a out=4\nlayer b out=8 inputs=a,input,zz\n",
  };
  for (size_t i = 0; i < sizeof defs / sizeof defs[0]; ++i) {
    tinyai_fuzz::WriteSeed(dir, "def-" + std::to_string(i), defs[i]);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tinyai_fuzz::WriteSeedsIfAsked(WriteSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tinyai::DenseNetDef def;
  tinyaiClearLastError();
  TinyAIStatus s = tinyai::ParseDenseDefinition(text, &def);
  if (s != TINYAI_OK) {
    CheckFailure(s, "ParseDenseDefinition");
    FUZZ_CHECK(s == TINYAI_ERR_INVALID_ARGUMENT, "ParseDenseDefinition: %s", tinyaiStatusString(s));
    int line = 0;
    FUZZ_CHECK(std::sscanf(tinyaiGetLastErrorMessage(), "line %d: ", &line) == 1, "the message names no line");
    size_t lines = 1;
    for (char c : text) lines += c == '\n' ? 1 : 0;
    FUZZ_CHECK(line >= 1 && static_cast<size_t>(line) <= lines, "line %d of a text of %zu lines", line, lines);
    return 0;
  }
  FUZZ_CHECK(def.input_dim >= 1 && def.input_dim <= (1 << 24) && !def.layers.empty(), "input %d, %zu layers",
             def.input_dim, def.layers.size());
  for (const tinyai::DenseLayerDef& d : def.layers) {
    FUZZ_CHECK(d.out >= 1 && d.out <= (1 << 24), "layer '%s': out %d", d.name.c_str(), d.out);
  }
  const Resolved r = Resolve(def);
  if (def.layers.size() > 256 || r.weights > (1u << 18) || static_cast<uint64_t>(def.input_dim) * kRows > (1u << 18) ||
      static_cast<uint64_t>(r.output_dim) * kRows > (1u << 18)) {
    return 0;  // valid, but too large to write and run for every input
  }

  const std::string path = tinyai_fuzz::ScratchDir::Get().File("dense.tmai");
  s = tinyai::WriteDenseModel(def, path.c_str());
  FUZZ_CHECK(s == TINYAI_OK, "WriteDenseModel refuses a parsed definition: %s", tinyaiStatusString(s));
  TinyAIMmapConfig config = tinyaiCreateDefaultMmapConfig();
  config.prefetchThreads = 0;
  TinyAIMappedModel* model = tinyaiOpenMappedModel(path.c_str(), &config);
  FUZZ_CHECK(model != nullptr, "the written network does not open");
  FUZZ_CHECK(tinyaiGetMappedLayerCount(model) == static_cast<int>(def.layers.size()), "layer count");

  std::vector<float> input(static_cast<size_t>(kRows) * static_cast<size_t>(def.input_dim));
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 8.0f;
  std::vector<double> want;
  const bool finite = Reference(model, def, r, input, &want);
  std::vector<float> got;
  uint64_t min_limit = 0;
  Run(model, TINYAI_EXEC_ADAPTIVE, 0, (def.seed & 1) != 0, r, def, input, finite, &got, &min_limit);
  if (finite) Compare(got, want, "no limit");
  Run(model, TINYAI_EXEC_STREAMING, static_cast<size_t>(min_limit), (def.seed & 1) != 0, r, def, input, finite, &got,
      nullptr);
  if (finite) Compare(got, want, "STREAMING at the least limit");
  tinyaiCloseMappedModel(model);
  std::remove(path.c_str());
  return 0;
}
