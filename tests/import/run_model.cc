#include "import/run_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

#include "format/test_models.h"
#include "tinyai/tinyai.h"

namespace tinyai {
namespace testing {

OpenedModel::~OpenedModel() {
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
}

bool OpenedModel::Open(const std::string& path) {
  model = tinyaiOpenMappedModel(path.c_str(), nullptr);
  return model != nullptr && tinyaiCreateLLM(model, nullptr, &llm) == TINYAI_OK;
}

int32_t OpenedModel::vocab() const {
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  tinyaiGetLLMModelInfo(llm, &info);
  return info.vocabSize;
}

std::vector<float> LogitsOf(const std::string& path, const char* text) {
  OpenedModel m;
  EXPECT_TRUE(m.Open(path)) << path << ": " << LastMessage();
  if (m.llm == nullptr) return {};
  int32_t tokens[256];
  int32_t count = 0;
  EXPECT_EQ(tinyaiLLMTokenize(m.llm, text, 1, tokens, 256, &count), TINYAI_OK) << LastMessage();
  const size_t vocab = static_cast<size_t>(m.vocab());
  std::vector<float> out(vocab * static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) {
    EXPECT_EQ(tinyaiLLMEval(m.llm, tokens + i, 1, out.data() + vocab * static_cast<size_t>(i)), TINYAI_OK)
        << LastMessage();
  }
  return out;
}

void ExpectSameInPlace(const std::string& gguf, const std::string& converted, const char* text, double tolerance) {
  SCOPED_TRACE("read in place: " + gguf);
  EXPECT_EQ(TokensOf(gguf, text, true), TokensOf(converted, text, true));
  const std::vector<float> in_place = LogitsOf(gguf, text), want = LogitsOf(converted, text);
  ASSERT_EQ(in_place.size(), want.size());
  if (tolerance == 0.0) {
    EXPECT_TRUE(SameBits(in_place, want));
    return;
  }
  double worst = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(in_place[i] - want[i])));
  }
  EXPECT_LE(worst, tolerance);
}

void ExpectInPlaceAgrees(const std::string& gguf, const std::string& converted, double tolerance) {
  const TinyAIStatus s = OpenStatus(gguf);
  const std::string message = LastMessage();
  if (s == TINYAI_ERR_UNSUPPORTED && message.find("convert the file once (tinyai-convert --from gguf") != std::string::npos) {
    return;
  }
  EXPECT_EQ(s, TINYAI_OK) << gguf << " read in place: " << message;
  if (s == TINYAI_OK) ExpectSameInPlace(gguf, converted, "ab cd", tolerance);
  tinyaiClearLastError();
}

TinyAIStatus OpenStatus(const std::string& path) {
  tinyaiClearLastError();
  TinyAIMappedModel* model = tinyaiOpenMappedModel(path.c_str(), nullptr);
  if (model == nullptr) return tinyaiGetLastError();
  TinyAILLM* llm = nullptr;
  const TinyAIStatus s = tinyaiCreateLLM(model, nullptr, &llm);
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
  return s;
}

std::string Greedy(const std::string& path, const char* prompt, int32_t steps) {
  OpenedModel m;
  EXPECT_TRUE(m.Open(path)) << path << ": " << LastMessage();
  if (m.llm == nullptr) return "";
  TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
  params.steps = steps;
  params.sampler.temperature = 0.0f;
  std::vector<char> text(16384);
  size_t len = 0;
  EXPECT_EQ(tinyaiLLMGenerate(m.llm, prompt, &params, text.data(), text.size(), &len, nullptr), TINYAI_OK)
      << LastMessage();
  return std::string(text.data(), len);
}

std::vector<int32_t> TokensOf(const std::string& path, const char* text, bool add_special) {
  OpenedModel m;
  EXPECT_TRUE(m.Open(path)) << path << ": " << LastMessage();
  if (m.llm == nullptr) return {};
  int32_t count = 0;
  tinyaiLLMTokenize(m.llm, text, add_special ? 1 : 0, nullptr, 0, &count);
  std::vector<int32_t> ids(static_cast<size_t>(count));
  EXPECT_EQ(tinyaiLLMTokenize(m.llm, text, add_special ? 1 : 0, ids.data(), count, &count), TINYAI_OK) << LastMessage();
  return ids;
}

namespace {

// out[rows] = w[rows][cols] x.
void MatVec(const std::vector<float>& w, const std::vector<double>& x, size_t rows, std::vector<double>* out) {
  const size_t cols = x.size();
  out->assign(rows, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (size_t c = 0; c < cols; ++c) sum += static_cast<double>(w[r * cols + c]) * x[c];
    (*out)[r] = sum;
  }
}

std::vector<double> RmsNorm(const std::vector<double>& x, const std::vector<float>& w, double eps) {
  double ss = 0.0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<double>(w[i]) * x[i] * scale;
  return out;
}

}  // namespace

std::vector<double> ReferenceLogits(const LlamaSource& source, const std::vector<int32_t>& tokens) {
  const LlamaHyperParams& p = source.params;
  const size_t dim = static_cast<size_t>(p.dim), hidden = static_cast<size_t>(p.hidden_dim);
  const size_t heads = static_cast<size_t>(p.heads), kv_heads = static_cast<size_t>(p.kv_heads);
  const size_t hs = dim / heads, kv_dim = hs * kv_heads, vocab = static_cast<size_t>(p.vocab_size);
  const double eps = p.norm_eps, theta = p.rope_theta, factor = p.rope_linear_factor;
  const std::vector<float> embedding = source.tensor("token_embd");
  const std::vector<float> classifier = p.shared_classifier ? embedding : source.tensor("output");
  const std::vector<float> out_norm = source.tensor("output_norm");
  struct Block {
    std::vector<float> attn_norm, q, k, v, o, ffn_norm, gate, up, down;
    std::vector<float> q_bias, k_bias, v_bias;  // params.qkv_bias (Qwen2)
  };
  std::vector<Block> blocks(static_cast<size_t>(p.layers));
  for (size_t l = 0; l < blocks.size(); ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    blocks[l] = {source.tensor(b + "attn_norm"), source.tensor(b + "attn_q"),   source.tensor(b + "attn_k"),
                 source.tensor(b + "attn_v"),    source.tensor(b + "attn_out"), source.tensor(b + "ffn_norm"),
                 source.tensor(b + "ffn_gate"),  source.tensor(b + "ffn_up"),   source.tensor(b + "ffn_down")};
    if (p.qkv_bias) {
      blocks[l].q_bias = source.tensor(b + "attn_q_bias");
      blocks[l].k_bias = source.tensor(b + "attn_k_bias");
      blocks[l].v_bias = source.tensor(b + "attn_v_bias");
    }
  }
  // keys[l][t], values[l][t]: kv_dim each.
  std::vector<std::vector<std::vector<double>>> keys(blocks.size()), values(blocks.size());
  std::vector<double> logits;
  for (size_t t = 0; t < tokens.size(); ++t) {
    std::vector<double> x(dim);
    for (size_t i = 0; i < dim; ++i) x[i] = embedding[static_cast<size_t>(tokens[t]) * dim + i];
    for (size_t l = 0; l < blocks.size(); ++l) {
      const Block& b = blocks[l];
      std::vector<double> xb = RmsNorm(x, b.attn_norm, eps), q, k, v;
      MatVec(b.q, xb, dim, &q);
      MatVec(b.k, xb, kv_dim, &k);
      MatVec(b.v, xb, kv_dim, &v);
      for (size_t i = 0; i < b.q_bias.size() && i < q.size(); ++i) q[i] += b.q_bias[i];
      for (size_t i = 0; i < b.k_bias.size() && i < k.size(); ++i) k[i] += b.k_bias[i];
      for (size_t i = 0; i < b.v_bias.size() && i < v.size(); ++i) v[i] += b.v_bias[i];
      for (size_t i = 0; i < dim; i += 2) {
        const size_t pair = (i % hs) / 2;
        const double ff = source.rope_freq_factors.empty() ? 1.0 : source.rope_freq_factors[pair];
        const double angle = static_cast<double>(t) * std::pow(theta, -2.0 * static_cast<double>(pair) / hs) / ff / factor;
        const double c = std::cos(angle), s = std::sin(angle);
        for (std::vector<double>* vec : {&q, &k}) {
          if (i >= vec->size()) continue;
          const double a = (*vec)[i], bb = (*vec)[i + 1];
          (*vec)[i] = a * c - bb * s;
          (*vec)[i + 1] = a * s + bb * c;
        }
      }
      keys[l].push_back(k);
      values[l].push_back(v);
      std::vector<double> attended(dim, 0.0);
      for (size_t h = 0; h < heads; ++h) {
        const size_t kh = h / (heads / kv_heads);
        std::vector<double> scores(t + 1);
        double most = -std::numeric_limits<double>::infinity();
        for (size_t j = 0; j <= t; ++j) {
          double dot = 0.0;
          for (size_t i = 0; i < hs; ++i) dot += q[h * hs + i] * keys[l][j][kh * hs + i];
          scores[j] = dot / std::sqrt(static_cast<double>(hs));
          most = std::max(most, scores[j]);
        }
        double sum = 0.0;
        for (double& sc : scores) sum += (sc = std::exp(sc - most));
        for (size_t j = 0; j <= t; ++j) {
          for (size_t i = 0; i < hs; ++i) attended[h * hs + i] += scores[j] / sum * values[l][j][kh * hs + i];
        }
      }
      std::vector<double> o;
      MatVec(b.o, attended, dim, &o);
      for (size_t i = 0; i < dim; ++i) x[i] += o[i];
      xb = RmsNorm(x, b.ffn_norm, eps);
      std::vector<double> gate, up, down;
      MatVec(b.gate, xb, hidden, &gate);
      MatVec(b.up, xb, hidden, &up);
      for (size_t i = 0; i < hidden; ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      MatVec(b.down, gate, dim, &down);
      for (size_t i = 0; i < dim; ++i) x[i] += down[i];
    }
    std::vector<double> out;
    MatVec(classifier, RmsNorm(x, out_norm, eps), vocab, &out);
    logits.insert(logits.end(), out.begin(), out.end());
  }
  return logits;
}

double MaxDifference(const std::vector<float>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.empty()) return std::numeric_limits<double>::infinity();
  double most = 0.0;
  for (size_t i = 0; i < a.size(); ++i) most = std::max(most, std::fabs(static_cast<double>(a[i]) - b[i]));
  return most;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && !a.empty() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace testing
}  // namespace tinyai
