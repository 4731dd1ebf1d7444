// The forward scheduler through its public C API
// (<tinyai/utils/forward_scheduler.h>, and tinyaiSetSchedulerGenerateParams /
// tinyaiGetLLMScheduler of <tinyai/llm.h>):
//  1. bad input: every error with its status and a message naming the cause;
//  2. tinyaiCalculateOptimalBatchSize against a brute force over batch sizes,
//     on the dense model and on random planning-only graphs, and runs at the
//     batch it returns staying under the limit;
//  3. the dense network (models/mlp_residual.def) against a float64
//     reference computed here from the file's weights, in planned, debug and
//     streaming execution;
//  4. the language model: debug execution and several max shapes give the
//     same logits, and tinyaiExecuteNextLayer generates the golden text;
//  5. the modes on a synthetic model streamed in 64 KB row slices: what
//     NORMAL loads, MEMORY_OPT's evictions, STREAMING at the minimum, what
//     ADAPTIVE picks, and the same text in all of them;
//  6. the reports and the activation-DAG dump.
// Tests that need stories260K skip when it is absent.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "capi/handles.h"
#include "common/crc32c.h"
#include "format/test_models.h"
#include "loader/mapped_model.h"
#include "model/generate.h"
#include "model/llama.h"
#include "model/runtime.h"
#include "scheduler/scheduler.h"
#include "tinyai/llm.h"
#include "tinyai/tinyai.h"
#include "tinyai/utils/forward_scheduler.h"

namespace {

namespace tt = tinyai::testing;
using tt::Contains;
using tt::LastMessage;

// ---- handles -------------------------------------------------------------------------

struct ModelCloser {
  void operator()(TinyAIMappedModel* m) const { tinyaiCloseMappedModel(m); }
};
struct SchedulerDestroyer {
  void operator()(TinyAIForwardScheduler* s) const { tinyaiDestroyForwardScheduler(s); }
};
struct LLMDestroyer {
  void operator()(TinyAILLM* l) const { tinyaiDestroyLLM(l); }
};
using ModelPtr = std::unique_ptr<TinyAIMappedModel, ModelCloser>;
using SchedPtr = std::unique_ptr<TinyAIForwardScheduler, SchedulerDestroyer>;
using LLMPtr = std::unique_ptr<TinyAILLM, LLMDestroyer>;

// Opens path (rowSliceSize 0 = the default).
ModelPtr Open(const std::string& path, size_t row_slice = 0) {
  TinyAIMmapConfig cfg = tinyaiCreateDefaultMmapConfig();
  if (row_slice) cfg.rowSliceSize = row_slice;
  ModelPtr m(tinyaiOpenMappedModel(path.c_str(), &cfg));
  EXPECT_NE(m, nullptr) << path << ": " << LastMessage();
  return m;
}

SchedPtr Make(TinyAIMappedModel* model, TinyAIExecutionMode mode, size_t limit,
              const TinyAISchedulerConfig* cfg = nullptr) {
  SchedPtr s(tinyaiCreateForwardSchedulerWithConfig(model, mode, limit, cfg));
  EXPECT_NE(s, nullptr) << tinyaiStatusString(tinyaiGetLastError()) << ": " << LastMessage();
  return s;
}

TinyAISchedulerConfig Config(int32_t batch = 1, int32_t threads = 1) {
  TinyAISchedulerConfig c = tinyaiCreateDefaultSchedulerConfig();
  c.batchSize = batch;
  c.threads = threads;
  return c;
}

TinyAISchedulerReport ReportOf(const TinyAIForwardScheduler* s) {
  TinyAISchedulerReport r;
  std::memset(&r, 0, sizeof r);
  r.structSize = sizeof r;
  EXPECT_EQ(tinyaiGetSchedulerReport(s, &r), TINYAI_OK) << LastMessage();
  return r;
}

std::string DumpOf(const TinyAIForwardScheduler* s) {
  size_t needed = 0;
  EXPECT_EQ(tinyaiDumpActivationDag(s, nullptr, 0, &needed), TINYAI_ERR_BUFFER_TOO_SMALL);
  EXPECT_GT(needed, 1u);
  std::vector<char> buf(needed + 1, 'X');
  size_t again = 0;
  EXPECT_EQ(tinyaiDumpActivationDag(s, buf.data(), needed, &again), TINYAI_OK) << LastMessage();
  EXPECT_EQ(again, needed);
  EXPECT_EQ(std::strlen(buf.data()) + 1, needed);
  return std::string(buf.data());
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

// What a plan needs in a mode (the scheduler's own accounting), without the
// caller's input and output.
uint64_t Need(const TinyAISchedulerReport& r, bool normal) {
  return (normal ? r.weightResidentBytes : r.largestSliceBytes) + r.arenaBytes + r.kvCacheBytes + r.tableBytes;
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

const TinyAIExecutionMode kModes[] = {TINYAI_EXEC_NORMAL, TINYAI_EXEC_MEMORY_OPT, TINYAI_EXEC_STREAMING,
                                      TINYAI_EXEC_ADAPTIVE};

// ---- the dense network and its float64 reference ---------------------------------------

struct DenseNet {
  struct Layer {
    int32_t in = 0, out = 0;
    std::string activation;
    std::vector<int32_t> inputs;  // -1 = the network's input
    std::vector<double> w;        // [out][in]
    std::vector<double> b;        // [out] (zeros without a bias)
  };
  int32_t input_dim = 0;
  std::vector<Layer> layers;

  // The file's own wiring, per layer.
  std::vector<std::vector<int32_t>> FileInputs() const {
    std::vector<std::vector<int32_t>> in;
    for (const Layer& l : layers) in.push_back(l.inputs);
    return in;
  }
};

std::string MetaString(const TinyAIMappedModel* m, const std::string& key) {
  const char* s = nullptr;
  size_t len = 0;
  if (tinyaiGetMetadataString(m, key.c_str(), &s, &len) != TINYAI_OK) return std::string();
  return std::string(s, len);
}

// Reads a tensor's floats through the loader's layer API. false when absent.
::testing::AssertionResult ReadTensor(TinyAIMappedModel* m, const std::string& name, TinyAITensorInfo* info,
                                      std::vector<double>* out) {
  int t = -1;
  if (tinyaiFindMappedTensor(m, name.c_str(), &t) != TINYAI_OK) return ::testing::AssertionFailure() << name << " absent";
  if (tinyaiGetMappedTensorInfo(m, t, info) != TINYAI_OK) return ::testing::AssertionFailure() << LastMessage();
  if (info->dtype != TINYAI_DTYPE_F32) return ::testing::AssertionFailure() << name << " is not f32";
  const uint8_t* base = static_cast<const uint8_t*>(tinyaiGetLayerWeights(m, info->layer));
  if (!base) return ::testing::AssertionFailure() << "weights of layer " << info->layer << ": " << LastMessage();
  const float* p = reinterpret_cast<const float*>(base + info->offsetInLayer);
  out->assign(p, p + info->elementCount);
  tinyaiReleaseLayerWeights(m, info->layer);
  return ::testing::AssertionSuccess();
}

// Reads the network from the file, independently of the runtime: metadata
// and tensors through the public loader API.
::testing::AssertionResult LoadDense(const std::string& path, DenseNet* net) {
  ModelPtr m(tinyaiOpenMappedModel(path.c_str(), nullptr));
  if (!m) return ::testing::AssertionFailure() << path << ": " << LastMessage();
  if (MetaString(m.get(), "general.architecture") != "dense") return ::testing::AssertionFailure() << "not dense";
  int64_t input_dim = 0, count = 0;
  if (tinyaiGetMetadataInt(m.get(), "dense.input_dim", &input_dim) != TINYAI_OK ||
      tinyaiGetMetadataInt(m.get(), "dense.layers", &count) != TINYAI_OK) {
    return ::testing::AssertionFailure() << LastMessage();
  }
  net->input_dim = static_cast<int32_t>(input_dim);
  net->layers.assign(static_cast<size_t>(count), DenseNet::Layer());
  for (int64_t l = 0; l < count; ++l) {
    DenseNet::Layer& layer = net->layers[static_cast<size_t>(l)];
    const std::string prefix = "dense." + std::to_string(l) + ".";
    layer.activation = MetaString(m.get(), prefix + "activation");
    std::stringstream inputs(MetaString(m.get(), prefix + "inputs"));
    for (std::string item; std::getline(inputs, item, ',');) layer.inputs.push_back(std::stoi(item));
    if (layer.inputs.empty()) return ::testing::AssertionFailure() << prefix << "inputs is empty";
    TinyAITensorInfo info;
    std::memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    ::testing::AssertionResult ok = ReadTensor(m.get(), prefix + "weight", &info, &layer.w);
    if (!ok) return ok;
    layer.out = static_cast<int32_t>(info.shape[0]);
    layer.in = static_cast<int32_t>(info.shape[1]);
    if (!ReadTensor(m.get(), prefix + "bias", &info, &layer.b)) layer.b.assign(static_cast<size_t>(layer.out), 0.0);
  }
  return ::testing::AssertionSuccess();
}

// The network's output for `rows` rows of x, in float64, for the layers that
// `inputs` wires (inputs[l] empty: layer l is not scheduled; -1 = the
// network's input): each layer is act(W (sum of its inputs) + b), and the
// output is the concatenation, in layer order, of the scheduled layers no
// scheduled layer reads. *width receives its floats per row.
std::vector<double> Reference(const DenseNet& net, const std::vector<std::vector<int32_t>>& inputs,
                              const std::vector<float>& x, int32_t rows, int32_t* width) {
  const size_t n = net.layers.size();
  std::vector<std::vector<double>> y(n);  // [rows][out]
  std::vector<bool> done(n, false), read(n, false);
  for (size_t l = 0; l < n; ++l) {
    for (int32_t p : inputs[l]) {
      if (p >= 0) read[static_cast<size_t>(p)] = true;
    }
  }
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t l = 0; l < n; ++l) {
      if (done[l] || inputs[l].empty()) continue;
      bool ready = true;
      for (int32_t p : inputs[l]) ready = ready && (p < 0 || done[static_cast<size_t>(p)]);
      if (!ready) continue;
      const DenseNet::Layer& L = net.layers[l];
      y[l].assign(static_cast<size_t>(rows) * static_cast<size_t>(L.out), 0.0);
      std::vector<double> in(static_cast<size_t>(L.in));
      for (int32_t r = 0; r < rows; ++r) {
        std::fill(in.begin(), in.end(), 0.0);
        for (int32_t p : inputs[l]) {
          for (int32_t i = 0; i < L.in; ++i) {
            in[static_cast<size_t>(i)] +=
                p < 0 ? static_cast<double>(x[static_cast<size_t>(r) * static_cast<size_t>(net.input_dim) + static_cast<size_t>(i)])
                      : y[static_cast<size_t>(p)][static_cast<size_t>(r) * static_cast<size_t>(L.in) + static_cast<size_t>(i)];
          }
        }
        for (int32_t o = 0; o < L.out; ++o) {
          double v = L.b[static_cast<size_t>(o)];
          for (int32_t i = 0; i < L.in; ++i) {
            v += L.w[static_cast<size_t>(o) * static_cast<size_t>(L.in) + static_cast<size_t>(i)] * in[static_cast<size_t>(i)];
          }
          if (L.activation == "relu") v = v > 0.0 ? v : 0.0;
          else if (L.activation == "tanh") v = std::tanh(v);
          y[l][static_cast<size_t>(r) * static_cast<size_t>(L.out) + static_cast<size_t>(o)] = v;
        }
      }
      done[l] = true;
      progress = true;
    }
  }
  *width = 0;
  for (size_t l = 0; l < n; ++l) {
    if (done[l] && !read[l]) *width += net.layers[l].out;
  }
  std::vector<double> out;
  for (int32_t r = 0; r < rows; ++r) {
    for (size_t l = 0; l < n; ++l) {
      if (!done[l] || read[l]) continue;
      const size_t w = static_cast<size_t>(net.layers[l].out);
      out.insert(out.end(), y[l].begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r) * w),
                 y[l].begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(r) + 1) * w));
    }
  }
  return out;
}

// |got - ref| <= rel * max(|ref|, the output's largest magnitude / 10).
::testing::AssertionResult Close(const std::vector<double>& ref, const std::vector<float>& got, double rel) {
  if (ref.size() != got.size()) return ::testing::AssertionFailure() << ref.size() << " vs " << got.size() << " values";
  double scale = 0.0;
  for (double v : ref) scale = std::max(scale, std::fabs(v));
  if (scale == 0.0) return ::testing::AssertionFailure() << "the reference is all zeros";
  for (size_t i = 0; i < ref.size(); ++i) {
    const double tol = rel * std::max(std::fabs(ref[i]), scale / 10.0);
    if (!std::isfinite(got[i]) || std::fabs(static_cast<double>(got[i]) - ref[i]) > tol) {
      return ::testing::AssertionFailure() << "value " << i << ": " << got[i] << " vs reference " << ref[i]
                                           << " (tolerance " << tol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult CloseF(const std::vector<float>& ref, const std::vector<float>& got, double rel) {
  return Close(std::vector<double>(ref.begin(), ref.end()), got, rel);
}

std::vector<float> RandomInput(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = u(rng);
  return v;
}

// Runs a prepared dense schedule to the end; *layers (may be null) gets the
// layers in the order they ran.
::testing::AssertionResult RunDense(TinyAIForwardScheduler* s, const std::vector<float>& input,
                                    std::vector<float>* output, std::vector<int>* layers = nullptr) {
  std::vector<int> seen;
  int layer = -2;
  while (tinyaiExecuteNextLayer(s, input.data(), output->data(), &layer)) {
    seen.push_back(layer);
    if (seen.size() > 100000) return ::testing::AssertionFailure() << "execution does not end";
  }
  const TinyAIStatus st = tinyaiGetSchedulerStatus(s);
  if (st != TINYAI_OK) {
    return ::testing::AssertionFailure() << "execution failed: " << tinyaiStatusString(st) << ": " << LastMessage();
  }
  if (layer != -1) return ::testing::AssertionFailure() << "the last call set layerIndex " << layer << ", not -1";
  if (seen.empty()) return ::testing::AssertionFailure() << "no layer ran";
  if (layers) *layers = seen;
  return ::testing::AssertionSuccess();
}

bool Bitwise(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

#ifndef TINYAI_TEST_MLP_TMAI
#define TINYAI_TEST_MLP_TMAI ""
#endif

// The dense model of models/mlp_residual.def and its reference.
class DenseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = TINYAI_TEST_MLP_TMAI;
    ASSERT_TRUE(tt::FileExists(path_)) << "'" << path_ << "' is missing: the build makes it (target mlp_residual_model)";
    ASSERT_TRUE(LoadDense(path_, &net_));
    ASSERT_EQ(net_.layers.size(), 8u);
    ASSERT_EQ(net_.input_dim, 32);
    in_bytes_ = static_cast<size_t>(net_.input_dim) * sizeof(float);
    int32_t width = 0;
    Reference(net_, net_.FileInputs(), std::vector<float>(static_cast<size_t>(net_.input_dim)), 1, &width);
    out_width_ = width;
    ASSERT_EQ(out_width_, 10);
    out_bytes_ = static_cast<size_t>(out_width_) * sizeof(float);
  }

  // A scheduler over the whole network.
  SchedPtr Whole(TinyAIMappedModel* m, TinyAIExecutionMode mode, size_t limit, const TinyAISchedulerConfig& cfg) {
    SchedPtr s = Make(m, mode, limit, &cfg);
    if (s) {
      EXPECT_EQ(tinyaiAddModelLayersToSchedule(s.get()), TINYAI_OK) << LastMessage();
    }
    return s;
  }

  // Prepares s, runs `rows` rows of seeded input and compares the output with
  // the reference; returns the output.
  std::vector<float> RunChecked(TinyAIForwardScheduler* s, int32_t rows, uint32_t seed, double rel = 1e-4) {
    std::vector<float> x = RandomInput(static_cast<size_t>(rows) * static_cast<size_t>(net_.input_dim), seed);
    std::vector<float> y(static_cast<size_t>(rows) * static_cast<size_t>(out_width_), NAN);
    EXPECT_TRUE(RunDense(s, x, &y));
    int32_t width = 0;
    EXPECT_TRUE(Close(Reference(net_, net_.FileInputs(), x, rows, &width), y, rel));
    return y;
  }

  std::string path_;
  DenseNet net_;
  size_t in_bytes_ = 0, out_bytes_ = 0;
  int32_t out_width_ = 0;
};

// ---- the language models ------------------------------------------------------------------

// BOS then ids spread over the vocabulary.
std::vector<int32_t> Sequence(int32_t vocab, size_t n) {
  std::vector<int32_t> ids = {1};
  for (size_t i = 1; i < n; ++i) ids.push_back(static_cast<int32_t>((i * 37 + 5) % static_cast<size_t>(vocab)));
  return ids;
}

// Evaluates ids through a prepared llama schedule (the scheduler's own pass
// driver, as tinyaiLLMEval uses it) and returns the last position's logits.
std::vector<float> EvalLogits(TinyAIForwardScheduler* s, const std::vector<int32_t>& ids) {
  tinyai::ForwardScheduler& impl = s->impl;
  EXPECT_NE(s->llama, nullptr);
  if (!s->llama) return {};
  tinyai::LlamaModel& llama = s->llama->model();
  llama.Reset();
  EXPECT_EQ(tinyai::EvalTokens(&impl, &llama, ids.data(), static_cast<int32_t>(ids.size())), TINYAI_OK)
      << LastMessage();
  const float* p = static_cast<const float*>(impl.OutputData(0));
  EXPECT_NE(p, nullptr);
  if (!p) return {};
  return std::vector<float>(p, p + llama.params().vocab_size);
}

// One text generation through tinyaiExecuteNextLayer.
struct TextRun {
  std::string text;
  TinyAIStatus status = TINYAI_ERR_INTERNAL;
  std::vector<int> layers;
  bool terminated = false;  // a NUL within the capacity
  bool overrun = false;     // bytes written past the capacity
  int last_layer = -2;      // what the final (false) call set
};

TextRun GenerateByLayer(TinyAIForwardScheduler* s, const std::string& prompt, size_t capacity) {
  TextRun r;
  std::vector<char> out(capacity + 64, 'X');
  int layer = -2;
  while (tinyaiExecuteNextLayer(s, prompt.c_str(), out.data(), &layer)) {
    r.layers.push_back(layer);
    if (r.layers.size() > 1000000) break;
  }
  r.last_layer = layer;
  r.status = tinyaiGetSchedulerStatus(s);
  r.terminated = std::memchr(out.data(), '\0', capacity) != nullptr;
  r.text = std::string(out.data(), r.terminated ? std::strlen(out.data()) : capacity);
  for (size_t i = capacity; i < out.size(); ++i) r.overrun = r.overrun || out[i] != 'X';
  return r;
}

// True when layers is whole repetitions of chain.
::testing::AssertionResult Cycles(const std::vector<int>& layers, const std::vector<int>& chain) {
  if (layers.empty() || layers.size() % chain.size() != 0) {
    return ::testing::AssertionFailure() << layers.size() << " layers run, not a multiple of " << chain.size();
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] != chain[i % chain.size()]) {
      return ::testing::AssertionFailure() << "call " << i << " ran layer " << layers[i] << ", expected "
                                           << chain[i % chain.size()];
    }
  }
  return ::testing::AssertionSuccess();
}

std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The synthetic model (always) and stories260K (when present).
class LlamaTest : public tt::SyntheticAndStoriesTest {
 protected:
  LLMPtr CreateLLM(TinyAIMappedModel* model, int32_t threads, bool debug) {
    TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
    cfg.threads = threads;
    cfg.debugExecution = debug;
    TinyAILLM* llm = nullptr;
    EXPECT_EQ(tinyaiCreateLLM(model, &cfg, &llm), TINYAI_OK) << LastMessage();
    return LLMPtr(llm);
  }

};


// =====================================================================================
// 1. Bad input
// =====================================================================================

// The cycle a GRAPH_CYCLE message names ("layer a -> b -> ... -> a"): checks
// it is closed, covers exactly `members`, and each layer depends on the next
// according to deps (layer -> its producers).
::testing::AssertionResult NamesCycle(const std::string& message, const std::set<int>& members,
                                      const std::map<int, std::set<int>>& deps) {
  std::smatch m;
  static const std::regex kCycle("layer ([0-9]+(?: -> [0-9]+)+)");
  if (!std::regex_search(message, m, kCycle)) return ::testing::AssertionFailure() << "no cycle in: " << message;
  std::vector<int> path;
  static const std::regex kNum("[0-9]+");
  const std::string list = m[1].str();
  for (auto it = std::sregex_iterator(list.begin(), list.end(), kNum); it != std::sregex_iterator(); ++it) {
    path.push_back(std::stoi(it->str()));
  }
  if (path.size() < 2 || path.front() != path.back()) {
    return ::testing::AssertionFailure() << "the cycle '" << list << "' is not closed";
  }
  const std::set<int> named(path.begin(), path.end() - 1);
  if (named != members || path.size() - 1 != members.size()) {
    return ::testing::AssertionFailure() << "the cycle '" << list << "' does not name exactly the layers in it";
  }
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    auto d = deps.find(path[i]);
    if (d == deps.end() || !d->second.count(path[i + 1])) {
      return ::testing::AssertionFailure() << "in '" << list << "', " << path[i] << " does not depend on " << path[i + 1];
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(SchedulerErrorsTest, CyclesFailPrepareNamingTheirLayers) {
  {
    SCOPED_TRACE("2-cycle: 10 <-> 20, fed by 5");
    SchedPtr s = Make(nullptr, TINYAI_EXEC_ADAPTIVE, 0);
    ASSERT_TRUE(s);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 5, -1, TINYAI_DEP_NONE, 256), TINYAI_OK) << LastMessage();
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 10, 5, TINYAI_DEP_SEQUENTIAL, 256), TINYAI_OK) << LastMessage();
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 10, 20, TINYAI_DEP_RESIDUAL, 256), TINYAI_OK) << LastMessage();
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 20, 10, TINYAI_DEP_SEQUENTIAL, 256), TINYAI_OK) << LastMessage();
    EXPECT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_ERR_GRAPH_CYCLE);
    EXPECT_LAST_ERROR(TINYAI_ERR_GRAPH_CYCLE, "cycle");
    EXPECT_TRUE(NamesCycle(LastMessage(), {10, 20}, {{10, {5, 20}}, {20, {10}}}));
    // Planning alone fails the same way.
    EXPECT_EQ(tinyaiPlanForwardPass(s.get()), TINYAI_ERR_GRAPH_CYCLE);
  }
  {
    SCOPED_TRACE("3-cycle: 31 -> 32 -> 33 -> 31, with a tail 40 after it");
    SchedPtr s = Make(nullptr, TINYAI_EXEC_MEMORY_OPT, 0);
    ASSERT_TRUE(s);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 1, -1, TINYAI_DEP_NONE, 128), TINYAI_OK);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 31, 1, TINYAI_DEP_SEQUENTIAL, 128), TINYAI_OK);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 31, 33, TINYAI_DEP_RESIDUAL, 128), TINYAI_OK);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 32, 31, TINYAI_DEP_ATTENTION, 128), TINYAI_OK);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 33, 32, TINYAI_DEP_SEQUENTIAL, 128), TINYAI_OK);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 40, 33, TINYAI_DEP_SEQUENTIAL, 128), TINYAI_OK);
    EXPECT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_ERR_GRAPH_CYCLE);
    EXPECT_LAST_ERROR(TINYAI_ERR_GRAPH_CYCLE, "cycle");
    EXPECT_TRUE(NamesCycle(LastMessage(), {31, 32, 33}, {{31, {1, 33}}, {32, {31}}, {33, {32}}, {40, {33}}}));
    EXPECT_FALSE(Contains(LastMessage(), "40")) << "40 is not in the cycle: " << LastMessage();
  }
}

TEST(SchedulerErrorsTest, SelfDependencyFailsAtAdd) {
  SchedPtr s = Make(nullptr, TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_TRUE(s);
  for (TinyAIDependencyType t : {TINYAI_DEP_SEQUENTIAL, TINYAI_DEP_RESIDUAL, TINYAI_DEP_ATTENTION}) {
    tinyaiClearLastError();
    EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), 7, 7, t, 64), TINYAI_ERR_GRAPH_CYCLE);
    EXPECT_LAST_ERROR(TINYAI_ERR_GRAPH_CYCLE, "layer 7 depends on itself");
  }
  // Nothing was added: the schedule is still empty.
  EXPECT_EQ(tinyaiPlanForwardPass(s.get()), TINYAI_ERR_MISUSE);
  EXPECT_LAST_ERROR(TINYAI_ERR_MISUSE, "empty");
}

TEST_F(DenseTest, LayerIndicesOutOfRange) {
  ModelPtr m = Open(path_);
  ASSERT_TRUE(m);
  ASSERT_EQ(tinyaiGetMappedLayerCount(m.get()), 8);
  SchedPtr s = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_TRUE(s);
  EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), 8, -1, TINYAI_DEP_NONE, 256), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "layer 8 is out of range");
  EXPECT_TRUE(Contains(LastMessage(), "8 layers")) << LastMessage();
  EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), -1, -1, TINYAI_DEP_NONE, 256), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "layer -1 is out of range");
  EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), 1000000, -1, TINYAI_DEP_NONE, 256), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "layer 1000000");
  // A producer out of range.
  EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), 1, 8, TINYAI_DEP_SEQUENTIAL, 256), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "dependsOn 8");
  EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), 1, -5, TINYAI_DEP_RESIDUAL, 256), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "dependsOn -5");
  EXPECT_EQ(tinyaiGetLayerOutputSize(m.get(), 8), 0u);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "layer 8");
  EXPECT_EQ(tinyaiGetLayerOutputSize(m.get(), -1), 0u);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "layer -1");

  // Without a model any index >= 0 is a layer, but not a negative one.
  SchedPtr p = Make(nullptr, TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_TRUE(p);
  EXPECT_EQ(tinyaiAddLayerToSchedule(p.get(), 123456, -1, TINYAI_DEP_NONE, 64), TINYAI_OK) << LastMessage();
  EXPECT_EQ(tinyaiAddLayerToSchedule(p.get(), -3, -1, TINYAI_DEP_NONE, 64), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "layer -3");
  EXPECT_EQ(tinyaiAddLayerToSchedule(p.get(), 3, -2, TINYAI_DEP_SEQUENTIAL, 64), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "dependsOn -2");
}

TEST(SchedulerErrorsTest, MissingDependencyNamesBothLayers) {
  SchedPtr s = Make(nullptr, TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_TRUE(s);
  ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 2, -1, TINYAI_DEP_NONE, 64), TINYAI_OK);
  ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 10, 2, TINYAI_DEP_SEQUENTIAL, 64), TINYAI_OK);
  ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 10, 3, TINYAI_DEP_RESIDUAL, 64), TINYAI_OK);  // 3 never comes
  EXPECT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_ERR_MISSING_DEPENDENCY);
  EXPECT_LAST_ERROR(TINYAI_ERR_MISSING_DEPENDENCY, "layer 10 depends on layer 3");
  EXPECT_TRUE(Contains(LastMessage(), "RESIDUAL")) << LastMessage();
  EXPECT_TRUE(Contains(LastMessage(), "never added")) << LastMessage();
}

// A dependency on a layer added later is satisfied by running that layer
// first; the result is the network of those two layers.
TEST_F(DenseTest, DependencyOnALayerAddedLaterRunsItFirst) {
  ModelPtr m = Open(path_);
  ASSERT_TRUE(m);
  const size_t row = tinyaiGetLayerOutputSize(m.get(), 0);
  ASSERT_EQ(row, 64u * sizeof(float));
  TinyAISchedulerConfig cfg = Config(3);
  SchedPtr s = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0, &cfg);
  ASSERT_TRUE(s);
  // b0_fc1 (layer 1) reads fc_in (layer 0), which is added after it.
  ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 1, 0, TINYAI_DEP_SEQUENTIAL, row), TINYAI_OK) << LastMessage();
  ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 0, -1, TINYAI_DEP_NONE, row), TINYAI_OK) << LastMessage();
  ASSERT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK) << LastMessage();
  EXPECT_EQ(ReportOf(s.get()).layerCount, 2);
  std::vector<float> x = RandomInput(3u * 32u, 5);
  std::vector<float> y(3u * 64u, NAN);
  std::vector<int> order;
  ASSERT_TRUE(RunDense(s.get(), x, &y, &order));
  EXPECT_EQ(order, (std::vector<int>{0, 1}));
  std::vector<std::vector<int32_t>> wiring(8);
  wiring[0] = {-1};
  wiring[1] = {0};
  int32_t width = 0;
  EXPECT_TRUE(Close(Reference(net_, wiring, x, 3, &width), y, 1e-4));
  EXPECT_EQ(width, 64);
}

TEST(SchedulerErrorsTest, OutputSizeZeroAndOverflow) {
  SchedPtr s = Make(nullptr, TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_TRUE(s);
  EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), 4, -1, TINYAI_DEP_NONE, 0), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "layer 4: outputSize is 0");
#if SIZE_MAX > 0xFFFFFFFFu
  const uint64_t max = uint64_t{1} << 48;
  EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), 4, -1, TINYAI_DEP_NONE, static_cast<size_t>(max + 1)),
            TINYAI_ERR_OVERFLOW);
  EXPECT_LAST_ERROR(TINYAI_ERR_OVERFLOW, std::to_string(max + 1));
  EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), 4, -1, TINYAI_DEP_NONE, SIZE_MAX), TINYAI_ERR_OVERFLOW);
  EXPECT_LAST_ERROR(TINYAI_ERR_OVERFLOW, std::to_string(static_cast<unsigned long long>(SIZE_MAX)));
  // 2^48 itself is accepted, and plans for one row.
  EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), 4, -1, TINYAI_DEP_NONE, static_cast<size_t>(max)), TINYAI_OK)
      << LastMessage();
  EXPECT_EQ(tinyaiPlanForwardPass(s.get()), TINYAI_OK) << LastMessage();
  EXPECT_GE(ReportOf(s.get()).arenaBytes, max);
#else
  // 32-bit size_t: every outputSize is below the planner's 2^48 bound, so
  // SIZE_MAX is accepted and planned (planning allocates nothing), but no
  // arena of 4 GiB fits the address space: preparing must fail, not allocate
  // the size truncated to 32 bits.
  EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), 4, -1, TINYAI_DEP_NONE, SIZE_MAX), TINYAI_OK) << LastMessage();
  EXPECT_EQ(tinyaiPlanForwardPass(s.get()), TINYAI_OK) << LastMessage();
  EXPECT_GE(ReportOf(s.get()).arenaBytes, uint64_t{SIZE_MAX});
  EXPECT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_ERR_OVERFLOW);
  EXPECT_LAST_ERROR(TINYAI_ERR_OVERFLOW, "address space");
#endif
}

// Rows x outputSize overflowing 64 bits fails at prepare (planning only).
TEST(SchedulerErrorsTest, RowsTimesOutputSizeOverflowAtPrepare) {
#if SIZE_MAX <= 0xFFFFFFFFu
  GTEST_SKIP() << "32-bit size_t: an outputSize (below 2^32) times rows (below 2^31) cannot overflow 64 bits; "
                  "OutputSizeZeroAndOverflow checks an arena beyond the address space";
#else
  const uint64_t size = uint64_t{1} << 48;
  SchedPtr s = Make(nullptr, TINYAI_EXEC_MEMORY_OPT, 0);
  ASSERT_TRUE(s);
  ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 0, -1, TINYAI_DEP_NONE, static_cast<size_t>(size)), TINYAI_OK);
  ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 1, 0, TINYAI_DEP_SEQUENTIAL, static_cast<size_t>(size)), TINYAI_OK);
  ASSERT_EQ(tinyaiSetScheduleBatchSize(s.get(), 1 << 20), TINYAI_OK) << LastMessage();
  EXPECT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_ERR_OVERFLOW);
  EXPECT_LAST_ERROR(TINYAI_ERR_OVERFLOW, "1048576 rows");
  // The same through the batch-size search.
  SchedPtr b = Make(nullptr, TINYAI_EXEC_MEMORY_OPT, size_t{1} << 40);
  ASSERT_TRUE(b);
  ASSERT_EQ(tinyaiAddLayerToSchedule(b.get(), 0, -1, TINYAI_DEP_NONE, static_cast<size_t>(size)), TINYAI_OK);
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiCalculateOptimalBatchSize(b.get(), 0, 0, 1 << 20), -1);
  EXPECT_LAST_ERROR(TINYAI_ERR_OVERFLOW, "overflows");
#endif
}

TEST(SchedulerErrorsTest, DependencyTypesAndModesAreChecked) {
  SchedPtr s = Make(nullptr, TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_TRUE(s);
  ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 0, -1, TINYAI_DEP_NONE, 64), TINYAI_OK);
  // NONE with a producer.
  EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), 1, 0, TINYAI_DEP_NONE, 64), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "TINYAI_DEP_NONE takes dependsOn -1");
  EXPECT_TRUE(Contains(LastMessage(), "not 0")) << LastMessage();
  // A type without a producer.
  for (TinyAIDependencyType t : {TINYAI_DEP_SEQUENTIAL, TINYAI_DEP_RESIDUAL, TINYAI_DEP_ATTENTION}) {
    EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), 1, -1, t, 64), TINYAI_ERR_INVALID_ARGUMENT);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "dependsOn -1");
  }
  // Values outside the enums.
  EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), 1, 0, static_cast<TinyAIDependencyType>(4), 64),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "dependency type 4");
  EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), 1, 0, static_cast<TinyAIDependencyType>(-1), 64),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "dependency type -1");
  for (int mode : {4, -1, 99}) {
    tinyaiClearLastError();
    EXPECT_EQ(tinyaiCreateForwardScheduler(nullptr, static_cast<TinyAIExecutionMode>(mode), 0), nullptr);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "execution mode " + std::to_string(mode));
    EXPECT_STREQ(tinyaiExecutionModeName(static_cast<TinyAIExecutionMode>(mode)), "?");
  }
  EXPECT_STREQ(tinyaiExecutionModeName(TINYAI_EXEC_NORMAL), "NORMAL");
  EXPECT_STREQ(tinyaiExecutionModeName(TINYAI_EXEC_MEMORY_OPT), "MEMORY_OPT");
  EXPECT_STREQ(tinyaiExecutionModeName(TINYAI_EXEC_STREAMING), "STREAMING");
  EXPECT_STREQ(tinyaiExecutionModeName(TINYAI_EXEC_ADAPTIVE), "ADAPTIVE");
  // The rejected adds left the one good layer: it plans.
  EXPECT_EQ(tinyaiPlanForwardPass(s.get()), TINYAI_OK) << LastMessage();
  EXPECT_EQ(ReportOf(s.get()).layerCount, 1);
}

// A failure at add or at prepare (the graph is checked as a whole there).
::testing::AssertionResult FailsAtAddOrPrepare(TinyAIForwardScheduler* s, int layer, int dep, TinyAIDependencyType t,
                                               size_t size, TinyAIStatus code, const std::string& needle) {
  TinyAIStatus st = tinyaiAddLayerToSchedule(s, layer, dep, t, size);
  if (st == TINYAI_OK) st = tinyaiPrepareForwardPass(s);
  if (st != code) {
    return ::testing::AssertionFailure() << tinyaiStatusString(st) << " instead of " << tinyaiStatusString(code)
                                         << ": " << LastMessage();
  }
  if (!Contains(LastMessage(), needle)) return ::testing::AssertionFailure() << "lacks '" << needle << "': " << LastMessage();
  return ::testing::AssertionSuccess();
}

TEST(SchedulerErrorsTest, OutputSizeChangeAndDuplicateDependency) {
  {
    SchedPtr s = Make(nullptr, TINYAI_EXEC_ADAPTIVE, 0);
    ASSERT_TRUE(s);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 5, -1, TINYAI_DEP_NONE, 64), TINYAI_OK);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 6, -1, TINYAI_DEP_NONE, 96), TINYAI_OK);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 10, 5, TINYAI_DEP_SEQUENTIAL, 64), TINYAI_OK);
    EXPECT_TRUE(FailsAtAddOrPrepare(s.get(), 10, 6, TINYAI_DEP_RESIDUAL, 128, TINYAI_ERR_INVALID_ARGUMENT,
                                    "layer 10 was added with outputSize 64 and then 128"));
  }
  {
    SchedPtr s = Make(nullptr, TINYAI_EXEC_ADAPTIVE, 0);
    ASSERT_TRUE(s);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 5, -1, TINYAI_DEP_NONE, 64), TINYAI_OK);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 10, 5, TINYAI_DEP_SEQUENTIAL, 64), TINYAI_OK);
    EXPECT_TRUE(FailsAtAddOrPrepare(s.get(), 10, 5, TINYAI_DEP_RESIDUAL, 64, TINYAI_ERR_INVALID_ARGUMENT,
                                    "layer 10 depends on layer 5 twice"));
  }
  {
    SchedPtr s = Make(nullptr, TINYAI_EXEC_ADAPTIVE, 0);
    ASSERT_TRUE(s);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 5, -1, TINYAI_DEP_NONE, 64), TINYAI_OK);
    EXPECT_TRUE(FailsAtAddOrPrepare(s.get(), 5, -1, TINYAI_DEP_NONE, 64, TINYAI_ERR_INVALID_ARGUMENT,
                                    "layer 5 reads the scheduler's input twice"));
  }
}

TEST(SchedulerErrorsTest, ExecuteBeforePrepareAndAddAfterPrepareAreMisuse) {
  SchedPtr s = Make(nullptr, TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_TRUE(s);
  ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 0, -1, TINYAI_DEP_NONE, 64), TINYAI_OK);
  EXPECT_EQ(tinyaiGetSchedulerStatus(s.get()), TINYAI_OK);
  float in[16] = {0}, out[16] = {0};
  int layer = 99;
  EXPECT_FALSE(tinyaiExecuteNextLayer(s.get(), in, out, &layer));
  EXPECT_EQ(layer, -1);
  EXPECT_EQ(tinyaiGetSchedulerStatus(s.get()), TINYAI_ERR_MISUSE);
  EXPECT_LAST_ERROR(TINYAI_ERR_MISUSE, "before tinyaiPrepareForwardPass");
  EXPECT_EQ(tinyaiGetSchedulerMemoryUsage(s.get()), 0u);
  EXPECT_EQ(tinyaiGetSchedulerPeakMemoryUsage(s.get()), 0u);

  ASSERT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK) << LastMessage();
  EXPECT_GT(tinyaiGetSchedulerMemoryUsage(s.get()), 0u);
  EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), 1, 0, TINYAI_DEP_SEQUENTIAL, 64), TINYAI_ERR_MISUSE);
  EXPECT_LAST_ERROR(TINYAI_ERR_MISUSE, "layer 1 added after the schedule was prepared");
  EXPECT_EQ(tinyaiSetScheduleBatchSize(s.get(), 4), TINYAI_ERR_MISUSE);
  EXPECT_LAST_ERROR(TINYAI_ERR_MISUSE, "batch size");
  // Planning alone also closes the schedule.
  SchedPtr p = Make(nullptr, TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_TRUE(p);
  ASSERT_EQ(tinyaiAddLayerToSchedule(p.get(), 0, -1, TINYAI_DEP_NONE, 64), TINYAI_OK);
  ASSERT_EQ(tinyaiPlanForwardPass(p.get()), TINYAI_OK);
  EXPECT_EQ(tinyaiAddLayerToSchedule(p.get(), 1, 0, TINYAI_DEP_SEQUENTIAL, 64), TINYAI_ERR_MISUSE);
  EXPECT_LAST_ERROR(TINYAI_ERR_MISUSE, "after the schedule was prepared");
  // An empty schedule cannot be prepared.
  SchedPtr e = Make(nullptr, TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_TRUE(e);
  EXPECT_EQ(tinyaiPrepareForwardPass(e.get()), TINYAI_ERR_MISUSE);
  EXPECT_LAST_ERROR(TINYAI_ERR_MISUSE, "empty");
}

TEST_F(DenseTest, ModelLayerOutputSizeMustMatch) {
  ModelPtr m = Open(path_);
  ASSERT_TRUE(m);
  EXPECT_EQ(tinyaiGetLayerOutputSize(m.get(), 0), 256u);
  EXPECT_EQ(tinyaiGetLayerOutputSize(m.get(), 7), 40u);
  SchedPtr s = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_TRUE(s);
  EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), 0, -1, TINYAI_DEP_NONE, 255), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "layer 0");
  EXPECT_TRUE(Contains(LastMessage(), "256")) << LastMessage();
  EXPECT_TRUE(Contains(LastMessage(), "255")) << LastMessage();
  EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), 7, 6, TINYAI_DEP_SEQUENTIAL, 256), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "layer 7");
  EXPECT_TRUE(Contains(LastMessage(), "40")) << LastMessage();
  // The generation settings are for language models.
  TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
  EXPECT_EQ(tinyaiSetSchedulerGenerateParams(s.get(), &gp), TINYAI_ERR_UNSUPPORTED);
  EXPECT_LAST_ERROR(TINYAI_ERR_UNSUPPORTED, "not a language model");
}

TEST_F(LlamaTest, ModelLayerOutputSizeMustMatch) {
  ModelPtr m = Open(synthetic_);
  ASSERT_TRUE(m);
  const tinyai::LlamaShape shape = tt::TinyShape();
  const size_t row = static_cast<size_t>(shape.dim) * sizeof(float);
  const size_t logits = static_cast<size_t>(shape.vocab_size) * sizeof(float);
  ASSERT_EQ(tinyaiGetMappedLayerCount(m.get()), shape.layers + 2);
  EXPECT_EQ(tinyaiGetLayerOutputSize(m.get(), 0), row);
  EXPECT_EQ(tinyaiGetLayerOutputSize(m.get(), 1), row);
  EXPECT_EQ(tinyaiGetLayerOutputSize(m.get(), shape.layers + 1), logits);
  SchedPtr s = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_TRUE(s);
  EXPECT_EQ(tinyaiAddLayerToSchedule(s.get(), shape.layers + 1, shape.layers, TINYAI_DEP_SEQUENTIAL, row),
            TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "layer " + std::to_string(shape.layers + 1));
  EXPECT_TRUE(Contains(LastMessage(), std::to_string(logits))) << LastMessage();
  EXPECT_TRUE(Contains(LastMessage(), std::to_string(row))) << LastMessage();
}

// The llama chain, built by hand on the 2-block synthetic model (layers 0
// embedding, 1-2 blocks, 3 output).
TEST_F(LlamaTest, ScheduleOutOfItsChainIsUnsupported) {
  ModelPtr m = Open(synthetic_);
  ASSERT_TRUE(m);
  const size_t row = tinyaiGetLayerOutputSize(m.get(), 1);
  const size_t logits = tinyaiGetLayerOutputSize(m.get(), 3);
  ASSERT_GT(row, 0u);
  ASSERT_GT(logits, 0u);
  struct Add {
    int layer, dep;
    TinyAIDependencyType type;
  };
  struct Case {
    const char* what;
    std::vector<Add> adds;
    TinyAIStatus code;
    std::string needle;
  };
  const TinyAIDependencyType N = TINYAI_DEP_NONE, S = TINYAI_DEP_SEQUENTIAL, A = TINYAI_DEP_ATTENTION,
                             R = TINYAI_DEP_RESIDUAL;
  const std::vector<Case> cases = {
      {"the chain by hand runs", {{0, -1, N}, {1, 0, A}, {2, 1, A}, {3, 2, S}}, TINYAI_OK, ""},
      {"a block skipped", {{0, -1, N}, {1, 0, A}, {3, 1, S}}, TINYAI_ERR_UNSUPPORTED, "layer 3 is out of place"},
      {"block 2 on the embedding too", {{0, -1, N}, {1, 0, A}, {2, 0, A}, {3, 2, S}}, TINYAI_ERR_UNSUPPORTED,
       "layer 2 must depend on the layer before it"},
      {"block 2 with a second producer", {{0, -1, N}, {1, 0, A}, {2, 1, A}, {2, 0, R}, {3, 2, S}},
       TINYAI_ERR_UNSUPPORTED, "layer 2 has more than one dependency"},
      {"no output layer", {{0, -1, N}, {1, 0, A}, {2, 1, A}}, TINYAI_ERR_UNSUPPORTED, "the schedule has 3"},
      {"the embedding not first", {{1, -1, N}, {2, 1, A}, {3, 2, S}}, TINYAI_ERR_UNSUPPORTED, "layer 1"},
      // The same producer twice is caught by the graph check before the chain's.
      {"block 1 on the embedding twice", {{0, -1, N}, {1, 0, A}, {1, 0, S}, {2, 1, A}, {3, 2, S}},
       TINYAI_ERR_INVALID_ARGUMENT, "layer 1 depends on layer 0 twice"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    SchedPtr s = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0);
    ASSERT_TRUE(s);
    for (const Add& a : c.adds) {
      ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), a.layer, a.dep, a.type, a.layer == 3 ? logits : row), TINYAI_OK)
          << LastMessage();
    }
    tinyaiClearLastError();
    EXPECT_EQ(tinyaiPrepareForwardPass(s.get()), c.code) << LastMessage();
    if (c.code != TINYAI_OK) {
      EXPECT_LAST_ERROR(c.code, c.needle);
      // Asked again, to prepare or to size a batch, the schedule fails the
      // same way: never as a half-built graph (the capi fuzzer found
      // TINYAI_ERR_INTERNAL "activation graph planned before Finish()").
      tinyaiClearLastError();
      EXPECT_EQ(tinyaiCalculateOptimalBatchSize(s.get(), 4, 4, 8), -1);
      EXPECT_LAST_ERROR(c.code, c.needle);
      EXPECT_EQ(tinyaiPrepareForwardPass(s.get()), c.code);
      EXPECT_LAST_ERROR(c.code, c.needle);
    }
  }
}

TEST_F(DenseTest, MismatchedWidthsAreInvalid) {
  ModelPtr m = Open(path_);
  ASSERT_TRUE(m);
  {
    // The head (64 floats in) reading the 32-float network input.
    SchedPtr s = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0);
    ASSERT_TRUE(s);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 7, -1, TINYAI_DEP_NONE, 40), TINYAI_OK) << LastMessage();
    EXPECT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_ERR_INVALID_ARGUMENT);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "layer 7 takes 64 floats per row");
    EXPECT_TRUE(Contains(LastMessage(), "the network's input gives 32")) << LastMessage();
  }
  {
    // b0_fc1 (64 in) reading the head (10 out).
    SchedPtr s = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0);
    ASSERT_TRUE(s);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 0, -1, TINYAI_DEP_NONE, 256), TINYAI_OK);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 7, 0, TINYAI_DEP_SEQUENTIAL, 40), TINYAI_OK);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 1, 7, TINYAI_DEP_SEQUENTIAL, 256), TINYAI_OK);
    EXPECT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_ERR_INVALID_ARGUMENT);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "layer 1 takes 64 floats per row");
    EXPECT_TRUE(Contains(LastMessage(), "layer 7 gives 10")) << LastMessage();
  }
}

TEST(SchedulerErrorsTest, NullSchedulerEverywhere) {
  auto expect_null = [](const char* call) {
    EXPECT_EQ(tinyaiGetLastError(), TINYAI_ERR_INVALID_ARGUMENT) << call << ": " << LastMessage();
    EXPECT_TRUE(Contains(LastMessage(), "NULL")) << call << ": " << LastMessage();
  };
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiAddLayerToSchedule(nullptr, 0, -1, TINYAI_DEP_NONE, 64), TINYAI_ERR_INVALID_ARGUMENT);
  expect_null("tinyaiAddLayerToSchedule");
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiAddModelLayersToSchedule(nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  expect_null("tinyaiAddModelLayersToSchedule");
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiSetScheduleBatchSize(nullptr, 2), TINYAI_ERR_INVALID_ARGUMENT);
  expect_null("tinyaiSetScheduleBatchSize");
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiPlanForwardPass(nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  expect_null("tinyaiPlanForwardPass");
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiPrepareForwardPass(nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  expect_null("tinyaiPrepareForwardPass");
  tinyaiClearLastError();
  float buf[4] = {0};
  int layer = 42;
  EXPECT_FALSE(tinyaiExecuteNextLayer(nullptr, buf, buf, &layer));
  expect_null("tinyaiExecuteNextLayer");
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiGetSchedulerStatus(nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  expect_null("tinyaiGetSchedulerStatus");
  EXPECT_EQ(tinyaiGetSchedulerMemoryUsage(nullptr), 0u);
  EXPECT_EQ(tinyaiGetSchedulerPeakMemoryUsage(nullptr), 0u);
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiCalculateOptimalBatchSize(nullptr, 16, 16, 8), -1);
  expect_null("tinyaiCalculateOptimalBatchSize");
  tinyaiClearLastError();
  TinyAISchedulerReport r;
  r.structSize = sizeof r;
  EXPECT_EQ(tinyaiGetSchedulerReport(nullptr, &r), TINYAI_ERR_INVALID_ARGUMENT);
  expect_null("tinyaiGetSchedulerReport");
  tinyaiClearLastError();
  char text[16];
  size_t needed = 7;
  EXPECT_EQ(tinyaiDumpActivationDag(nullptr, text, sizeof text, &needed), TINYAI_ERR_INVALID_ARGUMENT);
  expect_null("tinyaiDumpActivationDag");
  tinyaiClearLastError();
  TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
  EXPECT_EQ(tinyaiSetSchedulerGenerateParams(nullptr, &gp), TINYAI_ERR_INVALID_ARGUMENT);
  expect_null("tinyaiSetSchedulerGenerateParams");
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiGetLLMScheduler(nullptr), nullptr);
  expect_null("tinyaiGetLLMScheduler");
  tinyaiClearLastError();
  EXPECT_EQ(tinyaiGetLayerOutputSize(nullptr, 0), 0u);
  expect_null("tinyaiGetLayerOutputSize");
  tinyaiDestroyForwardScheduler(nullptr);  // a no-op

  // NULL out-parameters on a real scheduler.
  SchedPtr s = Make(nullptr, TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_TRUE(s);
  ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 0, -1, TINYAI_DEP_NONE, 64), TINYAI_OK);
  ASSERT_EQ(tinyaiPlanForwardPass(s.get()), TINYAI_OK);
  EXPECT_EQ(tinyaiGetSchedulerReport(s.get(), nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  r.structSize = sizeof r + 1;
  EXPECT_EQ(tinyaiGetSchedulerReport(s.get(), &r), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "structSize");
  EXPECT_EQ(tinyaiDumpActivationDag(s.get(), text, sizeof text, nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiDumpActivationDag(s.get(), nullptr, 16, &needed), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiSetSchedulerGenerateParams(s.get(), nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  SchedPtr u = Make(nullptr, TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_TRUE(u);
  EXPECT_EQ(tinyaiSetScheduleBatchSize(u.get(), 0), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "batch size 0");
  EXPECT_EQ(tinyaiAddModelLayersToSchedule(u.get()), TINYAI_ERR_UNSUPPORTED);
  EXPECT_LAST_ERROR(TINYAI_ERR_UNSUPPORTED, "no model");
}

TEST_F(LlamaTest, BadConfigsAreRejected) {
  ModelPtr m = Open(synthetic_);
  ASSERT_TRUE(m);
  const int32_t seq_len = tt::TinyShape().seq_len;
  {
    TinyAISchedulerConfig c = Config();
    c.structSize = sizeof c + 8;
    tinyaiClearLastError();
    EXPECT_EQ(tinyaiCreateForwardSchedulerWithConfig(m.get(), TINYAI_EXEC_ADAPTIVE, 0, &c), nullptr);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "structSize is " + std::to_string(sizeof c + 8));
  }
  {
    TinyAISchedulerConfig c = Config();
    c.maxShapeCount = 2;
    c.maxShapes[0] = {16, 32};
    c.maxShapes[1] = {0, 0};
    tinyaiClearLastError();
    EXPECT_EQ(tinyaiCreateForwardSchedulerWithConfig(m.get(), TINYAI_EXEC_ADAPTIVE, 0, &c), nullptr);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "maxShapes[1]");
    EXPECT_TRUE(Contains(LastMessage(), "0 rows")) << LastMessage();
  }
  {
    TinyAISchedulerConfig c = Config();
    c.maxShapeCount = TINYAI_MAX_SHAPES + 1;
    for (TinyAIMaxShape& sh : c.maxShapes) sh = {1, 0};
    tinyaiClearLastError();
    EXPECT_EQ(tinyaiCreateForwardSchedulerWithConfig(m.get(), TINYAI_EXEC_ADAPTIVE, 0, &c), nullptr);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "maxShapeCount 9");
  }
  {
    // Past the runtime's positions: refused. Past the model's seq_len alone
    // it runs (RoPE extrapolates; the tools warn).
    TinyAISchedulerConfig c = Config();
    c.contextLength = 1048577;
    tinyaiClearLastError();
    EXPECT_EQ(tinyaiCreateForwardSchedulerWithConfig(m.get(), TINYAI_EXEC_ADAPTIVE, 0, &c), nullptr);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "contextLength 1048577");
    c.contextLength = seq_len + 1;
    SchedPtr past = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0, &c);
    EXPECT_TRUE(past) << LastMessage();
  }
  {
    // A max shape attending to more positions than the context holds.
    TinyAISchedulerConfig c = Config();
    c.contextLength = 32;
    c.maxShapeCount = 1;
    c.maxShapes[0] = {4, 48};
    SchedPtr s = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0, &c);
    ASSERT_TRUE(s);
    ASSERT_EQ(tinyaiAddModelLayersToSchedule(s.get()), TINYAI_OK) << LastMessage();
    EXPECT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_ERR_INVALID_ARGUMENT);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "maxShapes[0] attends to 48 positions");
    EXPECT_TRUE(Contains(LastMessage(), "holds 32")) << LastMessage();
  }
  {
    TinyAISchedulerConfig c = Config();
    c.threads = -1;
    EXPECT_EQ(tinyaiCreateForwardSchedulerWithConfig(m.get(), TINYAI_EXEC_ADAPTIVE, 0, &c), nullptr);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "threads -1");
    c = Config();
    c.batchSize = 0;
    EXPECT_EQ(tinyaiCreateForwardSchedulerWithConfig(m.get(), TINYAI_EXEC_ADAPTIVE, 0, &c), nullptr);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "batchSize 0");
  }
  // The defaults.
  const TinyAISchedulerConfig d = tinyaiCreateDefaultSchedulerConfig();
  EXPECT_EQ(d.structSize, sizeof d);
  EXPECT_EQ(d.threads, 1);
  EXPECT_EQ(d.batchSize, 1);
  EXPECT_EQ(d.outputCapacity, 1024u);
  EXPECT_FALSE(d.debugExecution);
}

TEST_F(DenseTest, ReportAndDumpNeedAPlanAndSizeTheBuffer) {
  ModelPtr m = Open(path_);
  ASSERT_TRUE(m);
  SchedPtr s = Whole(m.get(), TINYAI_EXEC_ADAPTIVE, 0, Config(4));
  ASSERT_TRUE(s);
  TinyAISchedulerReport r;
  r.structSize = sizeof r;
  EXPECT_EQ(tinyaiGetSchedulerReport(s.get(), &r), TINYAI_ERR_MISUSE);
  EXPECT_LAST_ERROR(TINYAI_ERR_MISUSE, "not been planned");
  size_t needed = 12345;
  char small[32];
  EXPECT_EQ(tinyaiDumpActivationDag(s.get(), small, sizeof small, &needed), TINYAI_ERR_MISUSE);
  EXPECT_LAST_ERROR(TINYAI_ERR_MISUSE, "prepared");

  ASSERT_EQ(tinyaiPlanForwardPass(s.get()), TINYAI_OK) << LastMessage();
  std::memset(small, 'X', sizeof small);
  needed = 0;
  EXPECT_EQ(tinyaiDumpActivationDag(s.get(), small, sizeof small, &needed), TINYAI_ERR_BUFFER_TOO_SMALL);
  EXPECT_LAST_ERROR(TINYAI_ERR_BUFFER_TOO_SMALL, std::to_string(needed));
  EXPECT_GT(needed, sizeof small);
  EXPECT_EQ(small[sizeof small - 1], '\0') << "a truncated dump is NUL-terminated";
  EXPECT_TRUE(StartsWith(small, "# mode:")) << small;
  std::vector<char> buf(needed, 'X');
  size_t again = 0;
  ASSERT_EQ(tinyaiDumpActivationDag(s.get(), buf.data(), buf.size(), &again), TINYAI_OK) << LastMessage();
  EXPECT_EQ(again, needed);
  const std::string dump(buf.data());
  EXPECT_EQ(dump.size() + 1, needed);
  EXPECT_TRUE(StartsWith(dump, "# mode: NORMAL")) << dump.substr(0, 80);
  EXPECT_TRUE(Contains(dump, "activation_dag:"));
  EXPECT_EQ(dump.compare(0, sizeof small - 1, small), 0) << "the truncated dump is a prefix of the whole";
  // One byte short fails again.
  EXPECT_EQ(tinyaiDumpActivationDag(s.get(), buf.data(), needed - 1, &again), TINYAI_ERR_BUFFER_TOO_SMALL);
  // The report works after planning too, and without a prepare nothing is held.
  r = ReportOf(s.get());
  EXPECT_EQ(r.layerCount, 8);
  EXPECT_EQ(r.memoryUsage, 0u);
}

TEST(SchedulerErrorsTest, PlanningOnlySchedulesDoNotExecute) {
  SchedPtr s = Make(nullptr, TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_TRUE(s);
  ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 0, -1, TINYAI_DEP_NONE, 64), TINYAI_OK);
  ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 1, 0, TINYAI_DEP_SEQUENTIAL, 64), TINYAI_OK);
  ASSERT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK) << LastMessage();
  float in[64] = {0}, out[64] = {0};
  int layer = 5;
  EXPECT_FALSE(tinyaiExecuteNextLayer(s.get(), in, out, &layer));
  EXPECT_EQ(layer, -1);
  EXPECT_EQ(tinyaiGetSchedulerStatus(s.get()), TINYAI_ERR_UNSUPPORTED);
  EXPECT_LAST_ERROR(TINYAI_ERR_UNSUPPORTED, "no model");
  const TinyAISchedulerReport r = ReportOf(s.get());
  EXPECT_EQ(r.mode, TINYAI_EXEC_NORMAL);
  EXPECT_EQ(r.weightBytes, 0u);
  EXPECT_EQ(r.kvCacheBytes, 0u);
  EXPECT_EQ(tinyaiGetSchedulerMemoryUsage(s.get()), r.arenaBytes + r.tableBytes);
}

// Limits: NORMAL where only MEMORY_OPT fits, every mode below the minimum,
// and the minimum itself.
TEST_F(DenseTest, LimitsNameTheModeAndTheMinimum) {
  const int32_t batch = 5;
  const TinyAISchedulerConfig cfg = Config(batch);
  ModelPtr m = Open(path_);
  ASSERT_TRUE(m);
  SchedPtr probe = Whole(m.get(), TINYAI_EXEC_NORMAL, 0, cfg);
  ASSERT_TRUE(probe);
  ASSERT_EQ(tinyaiPlanForwardPass(probe.get()), TINYAI_OK) << LastMessage();
  const TinyAISchedulerReport r = ReportOf(probe.get());
  const uint64_t normal = Need(r, true), memopt = Need(r, false), minimum = r.minimumMemoryLimit;
  std::printf("dense, batch %d: NORMAL needs %llu, MEMORY_OPT %llu, the minimum is %llu\n", batch,
              static_cast<unsigned long long>(normal), static_cast<unsigned long long>(memopt),
              static_cast<unsigned long long>(minimum));
  ASSERT_LT(memopt, normal);
  ASSERT_LT(minimum, memopt);
  EXPECT_EQ(r.rowsPerPass, batch);

  {
    SCOPED_TRACE("NORMAL under a limit only MEMORY_OPT fits");
    SchedPtr s = Whole(m.get(), TINYAI_EXEC_NORMAL, memopt, cfg);
    ASSERT_TRUE(s);
    EXPECT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_ERR_RESOURCE_EXHAUSTED);
    EXPECT_LAST_ERROR(TINYAI_ERR_RESOURCE_EXHAUSTED, "NORMAL");
    EXPECT_TRUE(Contains(LastMessage(), std::to_string(normal))) << "names what NORMAL needs: " << LastMessage();
    EXPECT_TRUE(Contains(LastMessage(), std::to_string(memopt))) << "names the limit: " << LastMessage();
  }
  {
    SCOPED_TRACE("MEMORY_OPT at exactly its need");
    ModelPtr m2 = Open(path_);
    ASSERT_TRUE(m2);
    SchedPtr s = Whole(m2.get(), TINYAI_EXEC_MEMORY_OPT, memopt, cfg);
    ASSERT_TRUE(s);
    ASSERT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK) << LastMessage();
    EXPECT_EQ(ReportOf(s.get()).mode, TINYAI_EXEC_MEMORY_OPT);
    RunChecked(s.get(), batch, 21);
    EXPECT_LE(tinyaiGetSchedulerPeakMemoryUsage(s.get()), memopt);
  }
  for (TinyAIExecutionMode mode : kModes) {
    SCOPED_TRACE(std::string("below the minimum: ") + tinyaiExecutionModeName(mode));
    SchedPtr s = Whole(m.get(), mode, minimum - 1, cfg);
    ASSERT_TRUE(s);
    tinyaiClearLastError();
    EXPECT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_ERR_RESOURCE_EXHAUSTED);
    EXPECT_LAST_ERROR(TINYAI_ERR_RESOURCE_EXHAUSTED, "below this model's minimum");
    EXPECT_TRUE(Contains(LastMessage(), std::to_string(minimum))) << LastMessage();
  }
  for (TinyAIExecutionMode mode : {TINYAI_EXEC_STREAMING, TINYAI_EXEC_ADAPTIVE}) {
    SCOPED_TRACE(std::string("at the minimum: ") + tinyaiExecutionModeName(mode));
    ModelPtr m2 = Open(path_);
    ASSERT_TRUE(m2);
    SchedPtr s = Whole(m2.get(), mode, minimum, cfg);
    ASSERT_TRUE(s);
    ASSERT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK) << LastMessage();
    const TinyAISchedulerReport q = ReportOf(s.get());
    EXPECT_EQ(q.mode, TINYAI_EXEC_STREAMING);
    EXPECT_EQ(q.rowsPerPass, 1);
    EXPECT_EQ(q.minimumMemoryLimit, minimum);
    EXPECT_TRUE(StartsWith(q.reason, "STREAMING")) << q.reason;
    std::vector<int> order;
    std::vector<float> x = RandomInput(static_cast<size_t>(batch) * 32u, 22);
    std::vector<float> y(static_cast<size_t>(batch) * 10u, NAN);
    ASSERT_TRUE(RunDense(s.get(), x, &y, &order));
    EXPECT_EQ(order.size(), 8u * batch) << "one pass of 8 layers per row";
    int32_t width = 0;
    EXPECT_TRUE(Close(Reference(net_, net_.FileInputs(), x, batch, &width), y, 1e-4));
    EXPECT_LE(tinyaiGetSchedulerPeakMemoryUsage(s.get()), minimum);
  }
}

// =====================================================================================
// 2. tinyaiCalculateOptimalBatchSize against brute force
// =====================================================================================

struct GraphAdd {
  int layer, dep;
  TinyAIDependencyType type;
  size_t size;
};

::testing::AssertionResult AddAll(TinyAIForwardScheduler* s, const std::vector<GraphAdd>& adds) {
  for (const GraphAdd& a : adds) {
    if (tinyaiAddLayerToSchedule(s, a.layer, a.dep, a.type, a.size) != TINYAI_OK) {
      return ::testing::AssertionFailure() << "add " << a.layer << ": " << LastMessage();
    }
  }
  return ::testing::AssertionSuccess();
}

// A chain of layers with residual skips (and now and then a second read of
// the input), outputs of a few hundred bytes to a few KB.
std::vector<GraphAdd> RandomGraph(std::mt19937* rng) {
  std::vector<GraphAdd> adds;
  const int n = 4 + static_cast<int>((*rng)() % 14);
  std::vector<size_t> size(static_cast<size_t>(n));
  for (size_t& s : size) s = 100 + (*rng)() % 4000;
  auto id = [](int i) { return 3 * i + 2; };
  adds.push_back({id(0), -1, TINYAI_DEP_NONE, size[0]});
  for (int i = 1; i < n; ++i) {
    const size_t sz = size[static_cast<size_t>(i)];
    adds.push_back({id(i), id(i - 1), (*rng)() % 5 == 0 ? TINYAI_DEP_ATTENTION : TINYAI_DEP_SEQUENTIAL, sz});
    if (i >= 2 && (*rng)() % 3 == 0) {
      adds.push_back({id(i), id(static_cast<int>((*rng)() % static_cast<uint32_t>(i - 1))), TINYAI_DEP_RESIDUAL, sz});
    }
    if ((*rng)() % 10 == 0) adds.push_back({id(i), -1, TINYAI_DEP_NONE, sz});
  }
  return adds;
}

// need(b) for b in 1..max_batch from fresh schedulers planned without a
// limit at batch b (index 0 unused).
template <class MakeScheduler>
std::vector<uint64_t> BruteForceNeeds(MakeScheduler make, bool normal, uint64_t in, uint64_t out, int max_batch) {
  std::vector<uint64_t> need(static_cast<size_t>(max_batch) + 1, 0);
  for (int b = 1; b <= max_batch; ++b) {
    SchedPtr s = make();
    if (!s) return {};
    EXPECT_EQ(tinyaiSetScheduleBatchSize(s.get(), b), TINYAI_OK) << LastMessage();
    EXPECT_EQ(tinyaiPlanForwardPass(s.get()), TINYAI_OK) << LastMessage();
    const TinyAISchedulerReport r = ReportOf(s.get());
    EXPECT_EQ(r.rowsPerPass, b);
    need[static_cast<size_t>(b)] = Need(r, normal) + static_cast<uint64_t>(b) * (in + out);
  }
  return need;
}

// The largest b with need(b) <= limit, or -1.
int Best(const std::vector<uint64_t>& need, uint64_t limit) {
  int best = -1;
  for (size_t b = 1; b < need.size(); ++b) {
    if (need[b] <= limit) best = static_cast<int>(b);
  }
  return best;
}

// Limits around the brute force's figures: below one row, exactly one row,
// exactly some needs, between needs, above them all.
std::vector<uint64_t> InterestingLimits(const std::vector<uint64_t>& need, std::mt19937* rng) {
  const uint64_t top = *std::max_element(need.begin() + 1, need.end());
  std::vector<uint64_t> limits = {need[1] - 1, need[1], need[2], top, top + 1000};
  for (int i = 0; i < 4; ++i) {
    const size_t b = 1 + (*rng)() % (need.size() - 1);
    limits.push_back(need[b]);
    limits.push_back(need[b] - 1);
    limits.push_back(need[1] + (*rng)() % (top - need[1] + 1));
  }
  return limits;
}

TEST_F(DenseTest, OptimalBatchMatchesBruteForce) {
  const int max_batch = 40;
  std::mt19937 rng(1234);
  for (TinyAIExecutionMode mode : {TINYAI_EXEC_MEMORY_OPT, TINYAI_EXEC_NORMAL}) {
    SCOPED_TRACE(tinyaiExecutionModeName(mode));
    const bool normal = mode == TINYAI_EXEC_NORMAL;
    ModelPtr m = Open(path_);
    ASSERT_TRUE(m);
    const std::vector<uint64_t> need = BruteForceNeeds(
        [&] {
          TinyAISchedulerConfig c = Config();
          SchedPtr s = Make(m.get(), mode, 0, &c);
          if (s) {
            EXPECT_EQ(tinyaiAddModelLayersToSchedule(s.get()), TINYAI_OK);
          }
          return s;
        },
        normal, in_bytes_, out_bytes_, max_batch);
    ASSERT_EQ(need.size(), static_cast<size_t>(max_batch) + 1);
    std::string answers;
    for (uint64_t limit : InterestingLimits(need, &rng)) {
      SCOPED_TRACE("limit " + std::to_string(limit));
      const int expect = Best(need, limit);
      answers += " " + std::to_string(expect);
      ModelPtr run_model = Open(path_);  // a fresh cache, so the peak is this run's
      ASSERT_TRUE(run_model);
      SchedPtr s = Whole(run_model.get(), mode, static_cast<size_t>(limit), Config());
      ASSERT_TRUE(s);
      tinyaiClearLastError();
      const int got = tinyaiCalculateOptimalBatchSize(s.get(), in_bytes_, out_bytes_, max_batch);
      EXPECT_EQ(got, expect) << LastMessage();
      if (expect < 0) {
        EXPECT_LAST_ERROR(TINYAI_ERR_RESOURCE_EXHAUSTED, "even a batch of 1 does not fit");
        EXPECT_TRUE(Contains(LastMessage(), std::to_string(need[1]))) << LastMessage();
        continue;
      }
      if (got < 1) continue;
      // Run at that batch inside the limit.
      ASSERT_EQ(tinyaiSetScheduleBatchSize(s.get(), got), TINYAI_OK) << LastMessage();
      ASSERT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK) << LastMessage();
      const TinyAISchedulerReport r = ReportOf(s.get());
      EXPECT_EQ(r.mode, mode);
      EXPECT_EQ(r.rowsPerPass, got);
      EXPECT_LE(Need(r, normal) + static_cast<uint64_t>(got) * (in_bytes_ + out_bytes_), limit);
      RunChecked(s.get(), got, static_cast<uint32_t>(got));
      EXPECT_LE(tinyaiGetSchedulerPeakMemoryUsage(s.get()), limit);
      EXPECT_LE(tinyaiGetSchedulerMemoryUsage(s.get()), tinyaiGetSchedulerPeakMemoryUsage(s.get()));
    }
    std::printf("dense, %s: need(1) %llu .. need(%d) %llu; batches for the limits tried:%s\n",
                tinyaiExecutionModeName(mode), static_cast<unsigned long long>(need[1]), max_batch,
                static_cast<unsigned long long>(need[static_cast<size_t>(max_batch)]), answers.c_str());
  }
}

TEST_F(DenseTest, OptimalBatchEdgeCases) {
  ModelPtr m = Open(path_);
  ASSERT_TRUE(m);
  {
    SchedPtr s = Whole(m.get(), TINYAI_EXEC_MEMORY_OPT, 1 << 20, Config());
    ASSERT_TRUE(s);
    tinyaiClearLastError();
    EXPECT_EQ(tinyaiCalculateOptimalBatchSize(s.get(), in_bytes_, out_bytes_, 0), -1);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "maxBatch 0");
    EXPECT_EQ(tinyaiCalculateOptimalBatchSize(s.get(), in_bytes_, out_bytes_, -3), -1);
    EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "maxBatch -3");
  }
  for (TinyAIExecutionMode mode : kModes) {
    SchedPtr s = Whole(m.get(), mode, 0, Config());
    ASSERT_TRUE(s);
    EXPECT_EQ(tinyaiCalculateOptimalBatchSize(s.get(), in_bytes_, out_bytes_, 77), 77) << LastMessage();
    EXPECT_EQ(tinyaiCalculateOptimalBatchSize(s.get(), in_bytes_, out_bytes_, 1), 1) << LastMessage();
  }
  {
    // The graph's own errors come through.
    SchedPtr s = Make(m.get(), TINYAI_EXEC_MEMORY_OPT, 1 << 20);
    ASSERT_TRUE(s);
    ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 2, 1, TINYAI_DEP_SEQUENTIAL, 256), TINYAI_OK);
    EXPECT_EQ(tinyaiCalculateOptimalBatchSize(s.get(), in_bytes_, out_bytes_, 8), -1);
    EXPECT_LAST_ERROR(TINYAI_ERR_MISSING_DEPENDENCY, "layer 2 depends on layer 1");
  }
}

TEST(OptimalBatchTest, PlanningOnlyRandomGraphsMatchBruteForce) {
  std::mt19937 rng(20240607);
  const int max_batch = 24;
  std::map<int, int> answers;  // batch -> times
  for (int g = 0; g < 40; ++g) {
    const std::vector<GraphAdd> adds = RandomGraph(&rng);
    const uint64_t in = rng() % 2048, out = rng() % 2048;
    for (TinyAIExecutionMode mode : {TINYAI_EXEC_MEMORY_OPT, TINYAI_EXEC_NORMAL}) {
      SCOPED_TRACE("graph " + std::to_string(g) + " (" + std::to_string(adds.size()) + " adds), " +
                   tinyaiExecutionModeName(mode));
      const std::vector<uint64_t> need = BruteForceNeeds(
          [&] {
            SchedPtr s = Make(nullptr, mode, 0);
            if (s) {
              EXPECT_TRUE(AddAll(s.get(), adds));
            }
            return s;
          },
          mode == TINYAI_EXEC_NORMAL, in, out, max_batch);
      ASSERT_EQ(need.size(), static_cast<size_t>(max_batch) + 1);
      for (uint64_t limit : InterestingLimits(need, &rng)) {
        SCOPED_TRACE("limit " + std::to_string(limit));
        SchedPtr s = Make(nullptr, mode, static_cast<size_t>(limit));
        ASSERT_TRUE(s);
        ASSERT_TRUE(AddAll(s.get(), adds));
        tinyaiClearLastError();
        const int got = tinyaiCalculateOptimalBatchSize(s.get(), static_cast<size_t>(in), static_cast<size_t>(out),
                                                        max_batch);
        const int expect = Best(need, limit);
        ASSERT_EQ(got, expect) << LastMessage();
        ++answers[got];
        if (got < 0) {
          EXPECT_LAST_ERROR(TINYAI_ERR_RESOURCE_EXHAUSTED, "even a batch of 1 does not fit");
          continue;
        }
        ASSERT_EQ(tinyaiSetScheduleBatchSize(s.get(), got), TINYAI_OK) << LastMessage();
        ASSERT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK) << LastMessage();
        EXPECT_EQ(ReportOf(s.get()).rowsPerPass, got);
        EXPECT_LE(tinyaiGetSchedulerPeakMemoryUsage(s.get()), limit);
      }
    }
  }
  std::string text;
  for (const auto& a : answers) text += " " + std::to_string(a.first) + "x" + std::to_string(a.second);
  std::printf("batch sizes found (batch x times):%s\n", text.c_str());
  EXPECT_GE(answers.size(), 10u) << "the limits should reach many different batch sizes";
}

// =====================================================================================
// 3. The dense network against a float64 reference
// =====================================================================================

TEST_F(DenseTest, OutputMatchesTheFloat64Reference) {
  for (int32_t threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    ModelPtr m = Open(path_);
    ASSERT_TRUE(m);
    SchedPtr s = Whole(m.get(), TINYAI_EXEC_ADAPTIVE, 0, Config(5, threads));
    ASSERT_TRUE(s);
    ASSERT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK) << LastMessage();
    const TinyAISchedulerReport r = ReportOf(s.get());
    EXPECT_EQ(r.layerCount, 8);
    EXPECT_EQ(r.rowsPerPass, 5);
    std::vector<float> x = RandomInput(5u * 32u, 7);
    std::vector<float> y(5u * 10u, NAN);
    std::vector<int> order;
    ASSERT_TRUE(RunDense(s.get(), x, &y, &order));
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
    int32_t width = 0;
    const std::vector<double> ref = Reference(net_, net_.FileInputs(), x, 5, &width);
    EXPECT_TRUE(Close(ref, y, 1e-4));
    // The rows differ (each row is its own sample).
    EXPECT_NE(std::vector<float>(y.begin(), y.begin() + 10), std::vector<float>(y.begin() + 10, y.begin() + 20));
  }
}

TEST_F(DenseTest, DebugExecutionIsBitwiseIdenticalAndRunsRepeat) {
  ModelPtr m = Open(path_);
  ASSERT_TRUE(m);
  SchedPtr planned = Whole(m.get(), TINYAI_EXEC_ADAPTIVE, 0, Config(5));
  TinyAISchedulerConfig dc = Config(5);
  dc.debugExecution = true;
  SchedPtr debug = Whole(m.get(), TINYAI_EXEC_ADAPTIVE, 0, dc);
  ASSERT_TRUE(planned && debug);
  ASSERT_EQ(tinyaiPrepareForwardPass(planned.get()), TINYAI_OK) << LastMessage();
  ASSERT_EQ(tinyaiPrepareForwardPass(debug.get()), TINYAI_OK) << LastMessage();
  const TinyAISchedulerReport rp = ReportOf(planned.get()), rd = ReportOf(debug.get());
  EXPECT_GT(rp.inPlaceCount, 0) << "the residual sums overwrite their first input";
  EXPECT_EQ(rd.inPlaceCount, 0);
  EXPECT_GE(rd.arenaBytes, rp.arenaBytes);
  const std::vector<float> a = RunChecked(planned.get(), 5, 8);
  const std::vector<float> b = RunChecked(debug.get(), 5, 8);
  EXPECT_TRUE(Bitwise(a, b)) << "debug execution differs from planned execution";
  // Running again gives the same output, bit for bit.
  const std::vector<float> c = RunChecked(planned.get(), 5, 8);
  EXPECT_TRUE(Bitwise(a, c)) << "a second run differs";
  // A run abandoned half way and restarted by preparing again.
  std::vector<float> x = RandomInput(5u * 32u, 8);
  std::vector<float> y(50, NAN);
  int layer = -1;
  ASSERT_TRUE(tinyaiExecuteNextLayer(planned.get(), x.data(), y.data(), &layer));
  ASSERT_TRUE(tinyaiExecuteNextLayer(planned.get(), x.data(), y.data(), &layer));
  EXPECT_EQ(layer, 1);
  ASSERT_EQ(tinyaiPrepareForwardPass(planned.get()), TINYAI_OK) << LastMessage();
  std::vector<int> order;
  ASSERT_TRUE(RunDense(planned.get(), x, &y, &order));
  EXPECT_EQ(order.size(), 8u) << "the restarted run begins at the first layer";
  EXPECT_TRUE(Bitwise(a, y));
}

TEST_F(DenseTest, StreamingSubBatchesGiveTheSameOutput) {
  const int32_t batch = 5;
  ModelPtr m = Open(path_);
  ASSERT_TRUE(m);
  SchedPtr full = Whole(m.get(), TINYAI_EXEC_NORMAL, 0, Config(batch));
  ASSERT_TRUE(full);
  ASSERT_EQ(tinyaiPrepareForwardPass(full.get()), TINYAI_OK) << LastMessage();
  const TinyAISchedulerReport rf = ReportOf(full.get());
  const std::vector<float> a = RunChecked(full.get(), batch, 9);
  const uint64_t memopt = Need(rf, false);
  // Limits between the minimum (1 row per pass) and MEMORY_OPT's need (all 5).
  std::set<int32_t> rows_seen;
  for (int k = 0; k <= 4; ++k) {
    const uint64_t limit = rf.minimumMemoryLimit + (memopt - 1 - rf.minimumMemoryLimit) * static_cast<uint64_t>(k) / 4;
    SCOPED_TRACE("limit " + std::to_string(limit));
    ModelPtr m2 = Open(path_);
    ASSERT_TRUE(m2);
    SchedPtr s = Whole(m2.get(), TINYAI_EXEC_STREAMING, static_cast<size_t>(limit), Config(batch));
    ASSERT_TRUE(s);
    ASSERT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK) << LastMessage();
    const TinyAISchedulerReport r = ReportOf(s.get());
    EXPECT_EQ(r.mode, TINYAI_EXEC_STREAMING);
    EXPECT_GE(r.rowsPerPass, 1);
    EXPECT_LT(r.rowsPerPass, batch);
    rows_seen.insert(r.rowsPerPass);
    std::vector<float> x = RandomInput(static_cast<size_t>(batch) * 32u, 9);
    std::vector<float> y(static_cast<size_t>(batch) * 10u, NAN);
    std::vector<int> order;
    ASSERT_TRUE(RunDense(s.get(), x, &y, &order));
    const size_t passes = (batch + static_cast<size_t>(r.rowsPerPass) - 1) / static_cast<size_t>(r.rowsPerPass);
    EXPECT_EQ(order.size(), 8u * passes);
    EXPECT_TRUE(CloseF(a, y, 1e-5));
    EXPECT_LE(tinyaiGetSchedulerPeakMemoryUsage(s.get()), limit);
  }
  EXPECT_TRUE(rows_seen.count(1)) << "the minimum runs one row per pass";
  EXPECT_GE(rows_seen.size(), 2u) << "the limits should give several splits";
}

// The header: output receives "the outputs of layers no other layer reads,
// in layer order" - even when they were added in another order.
TEST_F(DenseTest, OutputsAreInLayerOrder) {
  ModelPtr m = Open(path_);
  ASSERT_TRUE(m);
  TinyAISchedulerConfig cfg = Config(2);
  SchedPtr s = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0, &cfg);
  ASSERT_TRUE(s);
  // fc_in, then b1_fc1 (layer 3) and b0_fc1 (layer 1) both reading it: two
  // outputs, added as 3 before 1.
  ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 0, -1, TINYAI_DEP_NONE, 256), TINYAI_OK);
  ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 3, 0, TINYAI_DEP_RESIDUAL, 256), TINYAI_OK);
  ASSERT_EQ(tinyaiAddLayerToSchedule(s.get(), 1, 0, TINYAI_DEP_SEQUENTIAL, 256), TINYAI_OK);
  ASSERT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK) << LastMessage();
  std::vector<float> x = RandomInput(2u * 32u, 10);
  std::vector<float> y(2u * 128u, NAN);
  std::vector<int> order;
  ASSERT_TRUE(RunDense(s.get(), x, &y, &order));
  EXPECT_EQ(order, (std::vector<int>{0, 3, 1})) << "layers run in the order added where dependencies allow";
  std::vector<std::vector<int32_t>> wiring(8);
  wiring[0] = {-1};
  wiring[1] = {0};
  wiring[3] = {0};
  int32_t width = 0;
  const std::vector<double> ref = Reference(net_, wiring, x, 2, &width);  // layer 1's then layer 3's, per row
  ASSERT_EQ(width, 128);
  // The same rows with the two outputs the other way round (the order added).
  std::vector<double> swapped(ref.size());
  for (size_t r = 0; r < 2; ++r) {
    std::copy(ref.begin() + static_cast<std::ptrdiff_t>(r * 128 + 64), ref.begin() + static_cast<std::ptrdiff_t>(r * 128 + 128),
              swapped.begin() + static_cast<std::ptrdiff_t>(r * 128));
    std::copy(ref.begin() + static_cast<std::ptrdiff_t>(r * 128), ref.begin() + static_cast<std::ptrdiff_t>(r * 128 + 64),
              swapped.begin() + static_cast<std::ptrdiff_t>(r * 128 + 64));
  }
  EXPECT_TRUE(Close(ref, y, 1e-4)) << "each row must hold layer 1's output, then layer 3's"
                                   << (Close(swapped, y, 1e-4) ? " (it holds layer 3's, then layer 1's: the order added)"
                                                               : "");
}

// =====================================================================================
// 4. The language model
// =====================================================================================

TEST_F(LlamaTest, DebugExecutionGivesBitwiseEqualLogits) {
  for (const std::string& path : Models()) {
    for (int32_t threads : {1, 2}) {
      SCOPED_TRACE(path + ", threads " + std::to_string(threads));
      ModelPtr m = Open(path);
      ASSERT_TRUE(m);
      LLMPtr planned = CreateLLM(m.get(), threads, false);
      LLMPtr debug = CreateLLM(m.get(), threads, true);
      ASSERT_TRUE(planned && debug);
      TinyAIModelInfo info;
      std::memset(&info, 0, sizeof info);
      info.structSize = sizeof info;
      ASSERT_EQ(tinyaiGetLLMModelInfo(planned.get(), &info), TINYAI_OK);
      std::vector<int32_t> ids;
      if (path == stories_) {
        const char* prompt = "Once upon a time, there was a little girl named Lily. She loved to play outside.";
        int32_t count = 0;
        tinyaiLLMTokenize(planned.get(), prompt, 1, nullptr, 0, &count);
        ids.resize(static_cast<size_t>(count));
        ASSERT_EQ(tinyaiLLMTokenize(planned.get(), prompt, 1, ids.data(), count, &count), TINYAI_OK);
      } else {
        ids = Sequence(info.vocabSize, 37);
      }
      ASSERT_GT(ids.size(), 16u) << "more than one prompt chunk";
      std::vector<float> a(static_cast<size_t>(info.vocabSize)), b(a.size());
      ASSERT_EQ(tinyaiLLMEval(planned.get(), ids.data(), static_cast<int32_t>(ids.size()), a.data()), TINYAI_OK)
          << LastMessage();
      ASSERT_EQ(tinyaiLLMEval(debug.get(), ids.data(), static_cast<int32_t>(ids.size()), b.data()), TINYAI_OK)
          << LastMessage();
      EXPECT_TRUE(Bitwise(a, b)) << "debug execution's logits differ";
      // And one more token on top.
      const int32_t next = 3;
      ASSERT_EQ(tinyaiLLMEval(planned.get(), &next, 1, a.data()), TINYAI_OK);
      ASSERT_EQ(tinyaiLLMEval(debug.get(), &next, 1, b.data()), TINYAI_OK);
      EXPECT_TRUE(Bitwise(a, b)) << "debug execution's decode logits differ";
    }
  }
}

// Two max shapes - the first decoding step (16 rows over 32 positions) and
// the last (1 row over the whole context) - against the default single
// shape (16 rows over the whole context).
TEST_F(LlamaTest, TwoMaxShapesGiveTheSameLogitsAndTheLargerArena) {
  for (const std::string& path : Models()) {
    SCOPED_TRACE(path);
    ModelPtr m = Open(path);
    ASSERT_TRUE(m);
    auto make = [&](std::vector<TinyAIMaxShape> shapes) {
      TinyAISchedulerConfig c = Config();
      c.maxShapeCount = static_cast<int32_t>(shapes.size());
      for (size_t i = 0; i < shapes.size(); ++i) c.maxShapes[i] = shapes[i];
      SchedPtr s = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0, &c);
      if (s) {
        EXPECT_EQ(tinyaiAddModelLayersToSchedule(s.get()), TINYAI_OK) << LastMessage();
      }
      return s;
    };
    SchedPtr single = make({});
    SchedPtr two = make({{16, 32}, {1, 0}});
    SchedPtr first = make({{16, 32}});
    SchedPtr last = make({{1, 0}});
    ASSERT_TRUE(single && two && first && last);
    ASSERT_EQ(tinyaiPrepareForwardPass(single.get()), TINYAI_OK) << LastMessage();
    ASSERT_EQ(tinyaiPrepareForwardPass(two.get()), TINYAI_OK) << LastMessage();
    ASSERT_EQ(tinyaiPlanForwardPass(first.get()), TINYAI_OK) << LastMessage();
    ASSERT_EQ(tinyaiPlanForwardPass(last.get()), TINYAI_OK) << LastMessage();
    const TinyAISchedulerReport rs = ReportOf(single.get()), rt = ReportOf(two.get()), rf = ReportOf(first.get()),
                                rl = ReportOf(last.get());
    std::printf("arena: single (16, full) %llu; two shapes %llu = max(%llu, %llu)\n",
                static_cast<unsigned long long>(rs.arenaBytes), static_cast<unsigned long long>(rt.arenaBytes),
                static_cast<unsigned long long>(rf.arenaBytes), static_cast<unsigned long long>(rl.arenaBytes));
    EXPECT_EQ(rs.shapeCount, 1);
    EXPECT_EQ(rt.shapeCount, 2);
    // The arena is the larger of the two shapes' plans. On these models the
    // peak step is not the attention's (whose scratch grows with the
    // context), so it equals the single shape's; what the shorter context
    // saves shows in the naive total, and a decoding pass runs in the far
    // smaller one-row plan.
    EXPECT_EQ(rt.arenaBytes, std::max(rf.arenaBytes, rl.arenaBytes));
    EXPECT_LE(rt.arenaBytes, rs.arenaBytes);
    EXPECT_LT(rt.naiveBytes, rs.naiveBytes);
    EXPECT_LT(rl.arenaBytes, rf.arenaBytes);
    // The two-shape dump lists both plans.
    EXPECT_EQ(Count(DumpOf(two.get()), "- shape:"), 2u);

    const int32_t vocab = two->llama->model().params().vocab_size;
    const std::vector<int32_t> ids = Sequence(vocab, 40);
    const std::vector<float> a = EvalLogits(single.get(), ids);
    const std::vector<float> b = EvalLogits(two.get(), ids);
    ASSERT_EQ(a.size(), static_cast<size_t>(vocab));
    EXPECT_TRUE(Bitwise(a, b)) << "two max shapes change the logits";
    EXPECT_TRUE(CloseF(a, b, 1e-5));
  }
}

TEST_F(LlamaTest, ExecuteNextLayerGeneratesTheGoldenText) {
  REQUIRE_STORIES();
  const std::string golden = tt::Env("TINYAI_SHARED_DIR") + "/golden/stories260K/greedy-01";
  const std::string prompt = ReadText(golden + ".prompt");
  std::string expected = ReadText(golden + ".expected");
  ASSERT_FALSE(prompt.empty()) << golden << ".prompt";
  ASSERT_FALSE(expected.empty()) << golden << ".expected";
  ASSERT_EQ(expected.back(), '\n');
  expected.pop_back();
  ModelPtr m = Open(stories_);
  ASSERT_TRUE(m);
  const int layers = tinyaiGetMappedLayerCount(m.get());
  ASSERT_EQ(layers, 7);
  std::vector<int> chain;
  for (int l = 0; l < layers; ++l) chain.push_back(l);
  // The pieces of text as the callback receives them (threads 1's run).
  std::vector<std::string> pieces;
  auto record = [](const char* piece, size_t len, void* user) {
    static_cast<std::vector<std::string>*>(user)->emplace_back(piece, len);
    return 0;
  };
  TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
  gp.steps = 256;
  gp.sampler.temperature = 0.0f;
  for (int32_t threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    TinyAISchedulerConfig cfg = Config(1, threads);
    cfg.outputCapacity = 8192;
    SchedPtr s = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0, &cfg);
    ASSERT_TRUE(s);
    TinyAIGenerateParams p = gp;
    if (threads == 1) {
      p.onText = record;
      p.user = &pieces;
    }
    ASSERT_EQ(tinyaiSetSchedulerGenerateParams(s.get(), &p), TINYAI_OK) << LastMessage();
    ASSERT_EQ(tinyaiAddModelLayersToSchedule(s.get()), TINYAI_OK) << LastMessage();
    ASSERT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK) << LastMessage();
    const TextRun r = GenerateByLayer(s.get(), prompt, cfg.outputCapacity);
    EXPECT_EQ(r.status, TINYAI_OK) << LastMessage();
    EXPECT_EQ(r.last_layer, -1);
    EXPECT_TRUE(r.terminated);
    EXPECT_FALSE(r.overrun);
    EXPECT_EQ(r.text, expected);
    EXPECT_TRUE(Cycles(r.layers, chain));
    // 256 positions: passes of the prompt in chunks, then one per generated
    // token (the golden text runs to the end).
    EXPECT_GE(r.layers.size() / chain.size(), 200u);
    if (threads != 1) continue;
    std::string joined;
    for (const std::string& piece : pieces) joined += piece;
    EXPECT_EQ(joined, expected) << "the callback receives the text piece by piece";
    // The next call starts a new generation, which gives the same text.
    pieces.clear();
    const TextRun again = GenerateByLayer(s.get(), prompt, cfg.outputCapacity);
    EXPECT_EQ(again.status, TINYAI_OK) << LastMessage();
    EXPECT_EQ(again.text, expected);
    EXPECT_EQ(again.layers, r.layers);
  }
  // Too small an output buffer: generation ends, cleanly, before the first
  // piece that would not fit whole (the header's contract), so the text is
  // the longest run of whole pieces that fits, NUL-terminated.
  ASSERT_FALSE(pieces.empty());
  gp.onText = record;
  for (size_t capacity : {size_t{1}, size_t{40}, size_t{41}, size_t{100}, expected.size()}) {
    SCOPED_TRACE("outputCapacity " + std::to_string(capacity));
    std::string fits;  // the whole pieces that fit with the NUL
    size_t whole = 0;
    for (const std::string& p : pieces) {
      if (fits.size() + p.size() + 1 > capacity) break;
      fits += p;
      ++whole;
    }
    std::vector<std::string> got_pieces;
    gp.user = &got_pieces;
    TinyAISchedulerConfig cfg = Config();
    cfg.outputCapacity = capacity;
    SchedPtr s = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0, &cfg);
    ASSERT_TRUE(s);
    ASSERT_EQ(tinyaiSetSchedulerGenerateParams(s.get(), &gp), TINYAI_OK);
    ASSERT_EQ(tinyaiAddModelLayersToSchedule(s.get()), TINYAI_OK);
    ASSERT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK) << LastMessage();
    const TextRun cut = GenerateByLayer(s.get(), prompt, capacity);
    if (whole == 0) {
      // Not even the first piece fits: a failure, not an empty success.
      EXPECT_EQ(cut.status, TINYAI_ERR_BUFFER_TOO_SMALL);
      EXPECT_NE(std::string(LastMessage()).find("cannot hold the text's first piece"), std::string::npos);
      EXPECT_TRUE(cut.terminated);
      EXPECT_EQ(cut.text, "");
      continue;
    }
    EXPECT_EQ(cut.status, TINYAI_OK) << LastMessage();
    EXPECT_EQ(cut.last_layer, -1);
    EXPECT_TRUE(cut.terminated);
    EXPECT_FALSE(cut.overrun);
    EXPECT_EQ(cut.text, fits);
    EXPECT_LT(cut.text.size(), capacity);
    EXPECT_EQ(got_pieces.size(), whole) << "the callback gets the pieces written, no more";
    if (capacity <= 100) {
      EXPECT_LT(cut.layers.size(), 7u * 100u) << "generation ends when the buffer is full";
    }
    if (!cut.layers.empty()) {
      EXPECT_TRUE(Cycles(cut.layers, chain));
    }
  }
}

// The same loop on the synthetic model, against tinyaiLLMGenerate.
TEST_F(LlamaTest, ExecuteNextLayerMatchesGenerate) {
  ModelPtr m = Open(synthetic_);
  ASSERT_TRUE(m);
  TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
  gp.steps = 48;
  gp.sampler.temperature = 0.0f;
  const char* prompt = "Once upon a time";
  std::string expected;
  {
    LLMPtr llm = CreateLLM(m.get(), 1, false);
    ASSERT_TRUE(llm);
    std::vector<char> out(4096);
    size_t len = 0;
    ASSERT_EQ(tinyaiLLMGenerate(llm.get(), prompt, &gp, out.data(), out.size(), &len, nullptr), TINYAI_OK)
        << LastMessage();
    expected.assign(out.data(), len);
  }
  ASSERT_FALSE(expected.empty());
  TinyAISchedulerConfig cfg = Config(1, 2);
  cfg.outputCapacity = 4096;
  SchedPtr s = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0, &cfg);
  ASSERT_TRUE(s);
  // Without settings a prompt is run with the defaults; set them first.
  ASSERT_EQ(tinyaiSetSchedulerGenerateParams(s.get(), &gp), TINYAI_OK);
  ASSERT_EQ(tinyaiAddModelLayersToSchedule(s.get()), TINYAI_OK);
  ASSERT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK) << LastMessage();
  const int layers = tinyaiGetMappedLayerCount(m.get());
  std::vector<int> chain;
  for (int l = 0; l < layers; ++l) chain.push_back(l);
  const TextRun r = GenerateByLayer(s.get(), prompt, cfg.outputCapacity);
  EXPECT_EQ(r.status, TINYAI_OK) << LastMessage();
  EXPECT_EQ(r.text, expected);
  EXPECT_TRUE(Cycles(r.layers, chain));
  // A NULL prompt fails the call.
  int layer = 0;
  std::vector<char> out(64);
  EXPECT_FALSE(tinyaiExecuteNextLayer(s.get(), nullptr, out.data(), &layer));
  EXPECT_EQ(tinyaiGetSchedulerStatus(s.get()), TINYAI_ERR_INVALID_ARGUMENT);
}

// =====================================================================================
// 5. Modes and memory on a model streamed in 64 KB row slices
// =====================================================================================

class ModesTest : public ::testing::Test {
 protected:
  static constexpr size_t kRowSlice = 64u << 10;

  void SetUp() override {
    tinyai::LlamaShape shape;
    shape.dim = 128;
    shape.hidden_dim = 384;
    shape.layers = 4;
    shape.heads = 4;
    shape.kv_heads = 4;
    shape.vocab_size = 512;
    shape.seq_len = 64;
    shape.seed = 5;
    ASSERT_FALSE(dir_.path().empty());
    path_ = dir_.File("modes.tmai");
    ASSERT_EQ(tt::WriteTinyModel(path_, shape), TINYAI_OK) << LastMessage();
  }

  SchedPtr Prepared(TinyAIMappedModel* m, TinyAIExecutionMode mode, size_t limit) {
    TinyAISchedulerConfig cfg = Config(1, 2);
    cfg.outputCapacity = 4096;
    SchedPtr s = Make(m, mode, limit, &cfg);
    if (!s) return s;
    TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
    gp.steps = 32;
    gp.sampler.temperature = 0.0f;
    EXPECT_EQ(tinyaiSetSchedulerGenerateParams(s.get(), &gp), TINYAI_OK) << LastMessage();
    EXPECT_EQ(tinyaiAddModelLayersToSchedule(s.get()), TINYAI_OK) << LastMessage();
    EXPECT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK) << LastMessage();
    return s;
  }

  std::string Generate(TinyAIForwardScheduler* s) {
    const TextRun r = GenerateByLayer(s, "Once upon a time", 4096);
    EXPECT_EQ(r.status, TINYAI_OK) << LastMessage();
    EXPECT_FALSE(r.text.empty());
    return r.text;
  }

  tt::TempDir dir_;
  std::string path_;
};

TEST_F(ModesTest, NormalLoadsEverySliceAtPrepareAndNeverAgain) {
  ModelPtr m = Open(path_, kRowSlice);
  ASSERT_TRUE(m);
  const int32_t slices = m->slices().slice_count();
  ASSERT_GT(slices, 40) << "the model should stream in many slices";
  const TinyAICacheStats before = tt::CacheStats(m.get());
  EXPECT_EQ(before.misses, 0u);
  SchedPtr s = Prepared(m.get(), TINYAI_EXEC_NORMAL, 0);
  ASSERT_TRUE(s);
  const TinyAISchedulerReport r = ReportOf(s.get());
  EXPECT_EQ(r.mode, TINYAI_EXEC_NORMAL);
  EXPECT_TRUE(StartsWith(r.reason, "NORMAL")) << r.reason;
  const TinyAICacheStats loaded = tt::CacheStats(m.get());
  EXPECT_EQ(loaded.misses, static_cast<uint64_t>(slices)) << "every slice loaded once at prepare";
  EXPECT_EQ(loaded.bytesLoaded, r.weightBytes);
  EXPECT_EQ(loaded.heldBytes, r.weightResidentBytes);
  EXPECT_EQ(loaded.evictions, 0u);
  EXPECT_EQ(tinyaiGetSchedulerMemoryUsage(s.get()), r.weightResidentBytes + r.arenaBytes + r.kvCacheBytes + r.tableBytes);
  Generate(s.get());
  const TinyAICacheStats after = tt::CacheStats(m.get());
  EXPECT_EQ(after.misses, loaded.misses) << "no load while generating";
  EXPECT_EQ(after.bytesLoaded, loaded.bytesLoaded);
  EXPECT_EQ(after.evictions, 0u);
  EXPECT_GT(after.hits, loaded.hits);
  EXPECT_EQ(tinyaiGetSchedulerPeakMemoryUsage(s.get()), tinyaiGetSchedulerMemoryUsage(s.get()));
}

TEST_F(ModesTest, LimitsPickTheModesAndTheTextIsTheSame) {
  uint64_t normal = 0, half = 0, minimum = 0, memopt = 0;
  {
    ModelPtr m = Open(path_, kRowSlice);
    ASSERT_TRUE(m);
    TinyAISchedulerConfig cfg = Config(1, 2);
    SchedPtr probe = Make(m.get(), TINYAI_EXEC_NORMAL, 0, &cfg);
    ASSERT_TRUE(probe);
    ASSERT_EQ(tinyaiAddModelLayersToSchedule(probe.get()), TINYAI_OK);
    ASSERT_EQ(tinyaiPlanForwardPass(probe.get()), TINYAI_OK) << LastMessage();
    const TinyAISchedulerReport r = ReportOf(probe.get());
    normal = Need(r, true);
    memopt = Need(r, false);
    half = r.arenaBytes + r.kvCacheBytes + r.tableBytes + r.weightResidentBytes / 2;
    minimum = r.minimumMemoryLimit;
    std::printf("weights %llu resident in slices of at most %llu; NORMAL needs %llu, MEMORY_OPT %llu, half %llu, "
                "minimum %llu\n",
                static_cast<unsigned long long>(r.weightResidentBytes),
                static_cast<unsigned long long>(r.largestSliceBytes), static_cast<unsigned long long>(normal),
                static_cast<unsigned long long>(memopt), static_cast<unsigned long long>(half),
                static_cast<unsigned long long>(minimum));
    ASSERT_LE(r.largestSliceBytes, kRowSlice + 4096);
    ASSERT_LT(minimum, memopt);
    ASSERT_LT(memopt, half);
    ASSERT_LT(half, normal);
  }
  struct Case {
    TinyAIExecutionMode requested;
    uint64_t limit;
    TinyAIExecutionMode expect;
  };
  const Case cases[] = {
      {TINYAI_EXEC_NORMAL, 0, TINYAI_EXEC_NORMAL},
      {TINYAI_EXEC_MEMORY_OPT, half, TINYAI_EXEC_MEMORY_OPT},
      {TINYAI_EXEC_STREAMING, minimum, TINYAI_EXEC_STREAMING},
      {TINYAI_EXEC_ADAPTIVE, normal, TINYAI_EXEC_NORMAL},
      {TINYAI_EXEC_ADAPTIVE, half, TINYAI_EXEC_MEMORY_OPT},
      {TINYAI_EXEC_ADAPTIVE, minimum, TINYAI_EXEC_STREAMING},
  };
  std::string text;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(tinyaiExecutionModeName(c.requested)) + " at " + std::to_string(c.limit));
    ModelPtr m = Open(path_, kRowSlice);
    ASSERT_TRUE(m);
    SchedPtr s = Prepared(m.get(), c.requested, static_cast<size_t>(c.limit));
    ASSERT_TRUE(s);
    const TinyAISchedulerReport r = ReportOf(s.get());
    EXPECT_EQ(r.requestedMode, c.requested);
    EXPECT_EQ(r.mode, c.expect);
    EXPECT_TRUE(StartsWith(r.reason, tinyaiExecutionModeName(c.expect))) << r.reason;
    EXPECT_EQ(r.rowsPerPass, c.expect == TINYAI_EXEC_STREAMING ? 1 : 32);  // a prompt pass: 32 tokens
    const std::string t = Generate(s.get());
    if (text.empty()) text = t;
    EXPECT_EQ(t, text) << "the text differs from NORMAL's";
    const TinyAICacheStats cs = tt::CacheStats(m.get());
    const size_t peak = tinyaiGetSchedulerPeakMemoryUsage(s.get());
    EXPECT_LE(tinyaiGetSchedulerMemoryUsage(s.get()), peak);
    EXPECT_GE(peak, r.arenaBytes + r.kvCacheBytes + r.tableBytes);
    if (c.limit != 0) {
      EXPECT_LE(peak, c.limit);
    }
    if (c.expect == TINYAI_EXEC_NORMAL) {
      EXPECT_EQ(cs.evictions, 0u);
    } else {
      EXPECT_GT(cs.evictions, 0u) << "the weights do not fit: they must stream";
      EXPECT_LT(cs.peakHeldBytes, r.weightResidentBytes);
    }
  }
}

// =====================================================================================
// 6. Reports and the activation DAG
// =====================================================================================

void ExpectPlanReport(const TinyAIForwardScheduler* s, bool debug) {
  const TinyAISchedulerReport r = ReportOf(s);
  EXPECT_EQ(r.atLowerBound, 1) << r.planNote;
  EXPECT_STREQ(r.planNote, "");
  EXPECT_GE(r.arenaBytes, r.lowerBoundBytes);
  EXPECT_GT(r.naiveBytes, r.arenaBytes);
  EXPECT_GT(r.lowerBoundBytes, 0u);
  EXPECT_GT(r.opCount, r.layerCount - 1);
  EXPECT_GE(r.bufferCount, 1);
  if (debug) {
    EXPECT_EQ(r.inPlaceCount, 0);
  }
  EXPECT_EQ(r.memoryUsage, tinyaiGetSchedulerMemoryUsage(s));
  EXPECT_EQ(r.peakMemoryUsage, tinyaiGetSchedulerPeakMemoryUsage(s));
  const std::string dump = DumpOf(s);
  EXPECT_TRUE(StartsWith(dump, std::string("# mode: ") + tinyaiExecutionModeName(r.mode))) << dump.substr(0, 80);
  EXPECT_EQ(Count(dump, "- step:"), static_cast<size_t>(r.opCount));
  EXPECT_EQ(Count(dump, "- shape:"), static_cast<size_t>(r.shapeCount));
  EXPECT_TRUE(Contains(dump, debug ? "execution_mode: debug" : "execution_mode: planned"));
}

TEST_F(LlamaTest, ReportsReachTheLowerBound) {
  for (const std::string& path : Models()) {
    SCOPED_TRACE(path);
    ModelPtr m = Open(path);
    ASSERT_TRUE(m);
    const int layers = tinyaiGetMappedLayerCount(m.get());
    LLMPtr planned = CreateLLM(m.get(), 2, false);
    LLMPtr debug = CreateLLM(m.get(), 2, true);
    ASSERT_TRUE(planned && debug);
    const TinyAIForwardScheduler* ps = tinyaiGetLLMScheduler(planned.get());
    const TinyAIForwardScheduler* ds = tinyaiGetLLMScheduler(debug.get());
    ASSERT_NE(ps, nullptr);
    ASSERT_NE(ds, nullptr);
    {
      SCOPED_TRACE("planned");
      ExpectPlanReport(ps, false);
      const TinyAISchedulerReport r = ReportOf(ps);
      EXPECT_EQ(r.layerCount, layers);
      EXPECT_GT(r.inPlaceCount, 0);
      EXPECT_GT(r.kvCacheBytes, 0u);
    }
    {
      SCOPED_TRACE("debug");
      ExpectPlanReport(ds, true);
      EXPECT_EQ(ReportOf(ds).opCount, ReportOf(ps).opCount);
    }
    // The LLM's own accounting agrees with its scheduler's.
    TinyAIModelInfo info;
    std::memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    ASSERT_EQ(tinyaiGetLLMModelInfo(planned.get(), &info), TINYAI_OK);
    EXPECT_EQ(info.activationBytes, ReportOf(ps).arenaBytes);
    EXPECT_EQ(info.kvCacheBytes, ReportOf(ps).kvCacheBytes);
    // A scheduler of its own, with two shapes, too.
    TinyAISchedulerConfig cfg = Config();
    cfg.maxShapeCount = 2;
    cfg.maxShapes[0] = {16, 32};
    cfg.maxShapes[1] = {1, 0};
    SchedPtr s = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0, &cfg);
    ASSERT_TRUE(s);
    ASSERT_EQ(tinyaiAddModelLayersToSchedule(s.get()), TINYAI_OK);
    ASSERT_EQ(tinyaiPlanForwardPass(s.get()), TINYAI_OK) << LastMessage();
    SCOPED_TRACE("two shapes");
    ExpectPlanReport(s.get(), false);
  }
}

TEST_F(DenseTest, ReportsReachTheLowerBound) {
  for (bool debug : {false, true}) {
    for (int32_t batch : {1, 5, 32}) {
      SCOPED_TRACE(std::string(debug ? "debug" : "planned") + ", batch " + std::to_string(batch));
      ModelPtr m = Open(path_);
      ASSERT_TRUE(m);
      TinyAISchedulerConfig cfg = Config(batch);
      cfg.debugExecution = debug;
      SchedPtr s = Whole(m.get(), TINYAI_EXEC_ADAPTIVE, 0, cfg);
      ASSERT_TRUE(s);
      ASSERT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK) << LastMessage();
      ExpectPlanReport(s.get(), debug);
      const TinyAISchedulerReport r = ReportOf(s.get());
      EXPECT_EQ(r.layerCount, 8);
      EXPECT_EQ(r.opCount, 11) << "8 layers and 3 residual sums";
      EXPECT_EQ(r.kvCacheBytes, 0u);
      EXPECT_GT(r.weightBytes, 0u);
      if (!debug) {
        EXPECT_GT(r.inPlaceCount, 0);
      }
    }
  }
}

}  // namespace

// =====================================================================================
// 7. What a new user and an attacker found (the review of the C API's promises)
// =====================================================================================

// The guide's loop with a 64-byte buffer: declared with the setter, nothing
// is written past it; a failed call leaves an empty string, not garbage.
TEST_F(LlamaTest, ExecuteNextLayerKeepsToTheDeclaredOutputCapacity) {
  ModelPtr m = Open(synthetic_);
  ASSERT_TRUE(m);
  EXPECT_EQ(tinyaiCreateDefaultSchedulerConfig().outputCapacity, 1024u) << "the guide's char output[1024]";
  SchedPtr s = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_TRUE(s);
  TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
  gp.maxNewTokens = 200;  // far more text than 64 bytes
  ASSERT_EQ(tinyaiSetSchedulerGenerateParams(s.get(), &gp), TINYAI_OK);
  ASSERT_EQ(tinyaiAddModelLayersToSchedule(s.get()), TINYAI_OK);
  ASSERT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK) << LastMessage();
  EXPECT_EQ(tinyaiSetSchedulerOutputCapacity(s.get(), 0), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tinyaiSetSchedulerOutputCapacity(nullptr, 64), TINYAI_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(tinyaiSetSchedulerOutputCapacity(s.get(), 64), TINYAI_OK);
  const TextRun r = GenerateByLayer(s.get(), "Once upon a time", 64);
  EXPECT_EQ(r.status, TINYAI_OK) << LastMessage();
  EXPECT_FALSE(r.overrun) << "bytes written past the 64 declared";
  EXPECT_TRUE(r.terminated);
  EXPECT_FALSE(r.text.empty());
  // Set between generations only.
  char out[64];
  int layer = 0;
  ASSERT_TRUE(tinyaiExecuteNextLayer(s.get(), "Once", out, &layer));
  EXPECT_EQ(tinyaiSetSchedulerOutputCapacity(s.get(), 128), TINYAI_ERR_MISUSE);
  while (tinyaiExecuteNextLayer(s.get(), "Once", out, &layer)) {
  }
  // A config of 0 cannot hold the NUL.
  TinyAISchedulerConfig zero = tinyaiCreateDefaultSchedulerConfig();
  zero.outputCapacity = 0;
  EXPECT_EQ(tinyaiCreateForwardSchedulerWithConfig(m.get(), TINYAI_EXEC_ADAPTIVE, 0, &zero), nullptr);
  EXPECT_LAST_ERROR(TINYAI_ERR_INVALID_ARGUMENT, "outputCapacity 0");

  // Failures write an empty string where the guide prints the text.
  SchedPtr unprepared = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_TRUE(unprepared);
  std::memset(out, '#', sizeof out);
  EXPECT_FALSE(tinyaiExecuteNextLayer(unprepared.get(), "Once", out, &layer));
  EXPECT_EQ(tinyaiGetSchedulerStatus(unprepared.get()), TINYAI_ERR_MISUSE);
  EXPECT_EQ(out[0], '\0');
  EXPECT_EQ(layer, -1);
  std::memset(out, '#', sizeof out);
  EXPECT_FALSE(tinyaiExecuteNextLayer(s.get(), nullptr, out, &layer));
  EXPECT_EQ(tinyaiGetSchedulerStatus(s.get()), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(out[0], '\0');
  // A prompt longer than the context: the run fails at its start.
  std::string huge(100000, 'a');
  std::memset(out, '#', sizeof out);
  EXPECT_FALSE(tinyaiExecuteNextLayer(s.get(), huge.c_str(), out, &layer));
  EXPECT_EQ(tinyaiGetSchedulerStatus(s.get()), TINYAI_ERR_CONTEXT_OVERFLOW);
  EXPECT_EQ(out[0], '\0');
}

// The largest row slice is named by the tensor that fills it, not by the
// small norm that happens to come first in it.
TEST_F(LlamaTest, TheLargestRowSliceIsNamedByItsLargestTensor) {
  ModelPtr m = Open(synthetic_);
  ASSERT_TRUE(m);
  SchedPtr s = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 1000);
  ASSERT_TRUE(s);
  ASSERT_EQ(tinyaiAddModelLayersToSchedule(s.get()), TINYAI_OK);
  EXPECT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_ERR_RESOURCE_EXHAUSTED);
  const std::string message = LastMessage();
  EXPECT_TRUE(Contains(message, "largest row slice")) << message;
  EXPECT_FALSE(Contains(message, "norm'")) << "a norm of a few hundred bytes names a slice of kilobytes: " << message;
  // The slice the memory report names is the one the message names.
  TinyAIMemoryReport est;
  std::memset(&est, 0, sizeof est);
  est.structSize = sizeof est;
  ASSERT_EQ(tinyaiEstimateLLMMemory(m.get(), nullptr, &est), TINYAI_OK) << LastMessage();
  EXPECT_TRUE(Contains(message, std::string("'") + est.largestSliceTensor + "'")) << message;
  EXPECT_EQ(std::string(est.largestSliceTensor).find("norm"), std::string::npos) << est.largestSliceTensor;
}

TEST_F(ModesTest, RequestedMemoryOptSaysItWasRequestedNotThatTheWeightsDoNotFit) {
  ModelPtr m = Open(path_, kRowSlice);
  ASSERT_TRUE(m);
  for (size_t limit : {size_t{0}, size_t{100u << 20}}) {
    SCOPED_TRACE("limit " + std::to_string(limit));
    SchedPtr s = Make(m.get(), TINYAI_EXEC_MEMORY_OPT, limit);
    ASSERT_TRUE(s);
    ASSERT_EQ(tinyaiAddModelLayersToSchedule(s.get()), TINYAI_OK);
    ASSERT_EQ(tinyaiPlanForwardPass(s.get()), TINYAI_OK) << LastMessage();
    const std::string reason = ReportOf(s.get()).reason;
    EXPECT_TRUE(StartsWith(reason, "MEMORY_OPT (requested)")) << reason;
    EXPECT_TRUE(Contains(reason, "would fit")) << reason;
    EXPECT_FALSE(Contains(reason, "do not fit")) << reason;
    EXPECT_FALSE(Contains(reason, "limit of 0.00")) << reason;
  }
  SchedPtr s = Make(m.get(), TINYAI_EXEC_STREAMING, 0);
  ASSERT_TRUE(s);
  ASSERT_EQ(tinyaiAddModelLayersToSchedule(s.get()), TINYAI_OK);
  ASSERT_EQ(tinyaiPlanForwardPass(s.get()), TINYAI_OK) << LastMessage();
  const std::string reason = ReportOf(s.get()).reason;
  EXPECT_TRUE(Contains(reason, "no memory limit")) << reason;
}

// A schedule of the first layers counts only their weights, as the header
// says (weightBytes: "decoded weights of the scheduled layers").
TEST_F(DenseTest, APartialScheduleCountsOnlyItsLayersWeights) {
  ModelPtr m = Open(path_);
  ASSERT_TRUE(m);
  SchedPtr whole = Whole(m.get(), TINYAI_EXEC_NORMAL, 0, Config());
  ASSERT_TRUE(whole);
  ASSERT_EQ(tinyaiPlanForwardPass(whole.get()), TINYAI_OK) << LastMessage();
  const TinyAISchedulerReport all = ReportOf(whole.get());
  SchedPtr part = Make(m.get(), TINYAI_EXEC_NORMAL, 0);
  ASSERT_TRUE(part);
  uint64_t expected = 0;
  for (int l = 0; l < 2; ++l) {
    ASSERT_EQ(tinyaiAddLayerToSchedule(part.get(), l, l - 1, l == 0 ? TINYAI_DEP_NONE : TINYAI_DEP_SEQUENTIAL,
                                       tinyaiGetLayerOutputSize(m.get(), l)), TINYAI_OK) << LastMessage();
    const TinyAILayerDescriptor* d = tinyaiGetLayerDescriptor(m.get(), l);
    ASSERT_NE(d, nullptr);
    expected += d->decodedSize;
  }
  ASSERT_EQ(tinyaiPrepareForwardPass(part.get()), TINYAI_OK) << LastMessage();
  const TinyAISchedulerReport r = ReportOf(part.get());
  EXPECT_EQ(r.weightBytes, expected);
  EXPECT_LT(r.weightBytes, all.weightBytes);
  EXPECT_LT(r.weightResidentBytes, all.weightResidentBytes);
  // NORMAL loaded those layers only.
  EXPECT_EQ(tt::CacheStats(m.get()).bytesLoaded, expected);
}

// The largest int as the maximum batch returns promptly (it never did).
TEST_F(DenseTest, OptimalBatchAtTheLargestIntReturns) {
  ModelPtr m = Open(path_);
  ASSERT_TRUE(m);
  for (size_t limit : {size_t{1} << 20, size_t{64} << 20}) {
    SchedPtr s = Whole(m.get(), TINYAI_EXEC_MEMORY_OPT, limit, Config());
    ASSERT_TRUE(s);
    const int best = tinyaiCalculateOptimalBatchSize(s.get(), in_bytes_, out_bytes_, INT32_MAX);
    ASSERT_GT(best, 0) << LastMessage();
    // It is the largest that fits: one more does not.
    const int again = tinyaiCalculateOptimalBatchSize(s.get(), in_bytes_, out_bytes_, best);
    EXPECT_EQ(again, best);
    EXPECT_LT(best, INT32_MAX);
  }
}

// Under a limit every batch fits (SIZE_MAX, or inputs and outputs of 0
// bytes under a large one), maxBatch INT_MAX itself is the answer. Found by
// tinyai_capi_fuzz (UBSan: a signed overflow): the bisection's next batch
// after INT_MAX wrapped to INT_MIN and the search never ended, as did the
// few batches tried above its answer.
TEST_F(DenseTest, OptimalBatchAtTheLargestIntWhenEverythingFits) {
  ModelPtr m = Open(path_);
  ASSERT_TRUE(m);
  SchedPtr s = Whole(m.get(), TINYAI_EXEC_MEMORY_OPT, SIZE_MAX, Config());
  ASSERT_TRUE(s);
  if (sizeof(size_t) < 8) {
    // 4 GiB do not hold INT_MAX rows: the largest batch that fits, found
    // and returned all the same.
    const int best = tinyaiCalculateOptimalBatchSize(s.get(), 0, 0, INT32_MAX);
    EXPECT_GT(best, 0) << LastMessage();
    EXPECT_LT(best, INT32_MAX);
    EXPECT_EQ(tinyaiCalculateOptimalBatchSize(s.get(), 0, 0, best), best);
    return;
  }
  EXPECT_EQ(tinyaiCalculateOptimalBatchSize(s.get(), SIZE_MAX, SIZE_MAX, INT32_MAX), INT32_MAX) << LastMessage();
  EXPECT_EQ(tinyaiCalculateOptimalBatchSize(s.get(), 0, 0, INT32_MAX), INT32_MAX) << LastMessage();
  EXPECT_EQ(tinyaiCalculateOptimalBatchSize(s.get(), 0, 0, INT32_MAX - 3), INT32_MAX - 3) << LastMessage();
}

// Non-finite numbers are reported, never passed on silently: a language
// model with an infinite weight fails at its first token (it sampled token 0
// with OK before), and a dense network's NaN output is a status with the
// rows still written.
TEST_F(LlamaTest, AnInfiniteWeightFailsAtTheFirstTokenNotAsToken0) {
  tt::Bytes image;
  ASSERT_TRUE(tt::ReadFileBytes(synthetic_, &image));
  const int32_t t = tt::FindTensor(image, "blk.0.attn_q");
  ASSERT_GE(t, 0);
  const tinyai::tmai::TensorEntry e = tt::GetTensor(image, static_cast<uint32_t>(t));
  const float inf = std::numeric_limits<float>::infinity();
  std::memcpy(image.data() + e.offset + 4 * 7, &inf, 4);
  // Checksums re-sealed: the file is valid, its numbers are not.
  tt::PatchTensor(&image, static_cast<uint32_t>(t), [&](tinyai::tmai::TensorEntry& x) {
    x.checksum = tinyai::Crc32c(0, image.data() + x.offset, static_cast<size_t>(x.stored_size));
  });
  const std::string path = dir_.File("infinite.tmai");
  ASSERT_TRUE(tt::WriteFileBytes(path, image));
  ModelPtr m = Open(path);
  ASSERT_TRUE(m);
  LLMPtr llm = CreateLLM(m.get(), 1, false);
  ASSERT_TRUE(llm);
  const int32_t ids[] = {1, 40, 41};
  std::vector<float> logits(512);
  EXPECT_EQ(tinyaiLLMEval(llm.get(), ids, 3, logits.data()), TINYAI_ERR_NOT_FINITE);
  EXPECT_LAST_ERROR(TINYAI_ERR_NOT_FINITE, "after position 2 are not finite");
  EXPECT_EQ(tinyaiGetLLMPosition(llm.get()), 0) << "all or nothing";
  char text[256];
  size_t len = 0;
  EXPECT_EQ(tinyaiLLMGenerate(llm.get(), "ab", nullptr, text, sizeof text, &len, nullptr), TINYAI_ERR_NOT_FINITE);
  // Through the guide's loop too.
  SchedPtr s = Make(m.get(), TINYAI_EXEC_ADAPTIVE, 0);
  ASSERT_TRUE(s);
  ASSERT_EQ(tinyaiAddModelLayersToSchedule(s.get()), TINYAI_OK);
  ASSERT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK);
  const TextRun r = GenerateByLayer(s.get(), "ab", 1024);
  EXPECT_EQ(r.status, TINYAI_ERR_NOT_FINITE);
  EXPECT_EQ(r.text, "") << "a failed run leaves an empty string";
}

TEST_F(DenseTest, ANonFiniteOutputIsReportedWithTheRowsWritten) {
  ModelPtr m = Open(path_);
  ASSERT_TRUE(m);
  SchedPtr s = Whole(m.get(), TINYAI_EXEC_NORMAL, 0, Config(4));
  ASSERT_TRUE(s);
  ASSERT_EQ(tinyaiPrepareForwardPass(s.get()), TINYAI_OK) << LastMessage();
  std::vector<float> x = RandomInput(4 * static_cast<size_t>(net_.input_dim), 3);
  x[2 * static_cast<size_t>(net_.input_dim) + 5] = std::numeric_limits<float>::infinity();  // row 2
  std::vector<float> y(4 * static_cast<size_t>(out_width_), -7.0f);
  int layer = 0;
  while (tinyaiExecuteNextLayer(s.get(), x.data(), y.data(), &layer)) {
  }
  EXPECT_EQ(tinyaiGetSchedulerStatus(s.get()), TINYAI_ERR_NOT_FINITE);
  EXPECT_LAST_ERROR(TINYAI_ERR_NOT_FINITE, "the output of row 2");
  EXPECT_NE(y[0], -7.0f) << "the rows are written";
  bool row2 = false;
  for (int32_t c = 0; c < out_width_; ++c) row2 = row2 || !std::isfinite(y[2 * static_cast<size_t>(out_width_) + static_cast<size_t>(c)]);
  EXPECT_TRUE(row2);
  // Finite input runs clean again.
  x[2 * static_cast<size_t>(net_.input_dim) + 5] = 0.5f;
  EXPECT_TRUE(RunDense(s.get(), x, &y));
}
