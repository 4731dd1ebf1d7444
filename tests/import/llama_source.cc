#include "import/llama_source.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

#include "format/tmai_reader.h"
#include "kernels/kernels.h"
#include "loader/mapped_model.h"
#include "tinyai/tinyai.h"

namespace tinyai {
namespace testing {

namespace {

std::vector<uint8_t> ReadAll(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  *ok = static_cast<bool>(in);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool Fail(std::string* error, const std::string& what) {
  *error = what;
  return false;
}

template <class T>
void Put(std::ofstream* out, const T& v) {
  out->write(reinterpret_cast<const char*>(&v), sizeof v);
}

}  // namespace

std::vector<TensorName> LlamaTensors(const LlamaHyperParams& p) {
  const uint64_t dim = p.dim, hidden = p.hidden_dim, kv_dim = p.kv_dim(), vocab = p.vocab_size;
  std::vector<TensorName> out;
  out.push_back({"token_embd", vocab, dim, true});
  struct Kind {
    const char* name;
    uint64_t rows, cols;
    bool matrix;
  };
  const Kind kinds[] = {{"attn_norm", 1, dim, false}, {"attn_q", dim, dim, true},        {"attn_k", kv_dim, dim, true},
                        {"attn_v", kv_dim, dim, true}, {"attn_out", dim, dim, true},     {"ffn_norm", 1, dim, false},
                        {"ffn_gate", hidden, dim, true}, {"ffn_down", dim, hidden, true}, {"ffn_up", hidden, dim, true}};
  for (const Kind& k : kinds) {
    for (int32_t l = 0; l < p.layers; ++l) {
      out.push_back({"blk." + std::to_string(l) + "." + k.name, k.rows, k.cols, k.matrix});
    }
  }
  if (p.qkv_bias) {
    const Kind biases[] = {{"attn_q_bias", 1, dim, false}, {"attn_k_bias", 1, kv_dim, false},
                           {"attn_v_bias", 1, kv_dim, false}};
    for (const Kind& k : biases) {
      for (int32_t l = 0; l < p.layers; ++l) {
        out.push_back({"blk." + std::to_string(l) + "." + k.name, k.rows, k.cols, k.matrix});
      }
    }
  }
  out.push_back({"output_norm", 1, dim, false});
  if (!p.shared_classifier) out.push_back({"output", vocab, dim, true});
  return out;
}

bool LoadLlama2c(const std::string& checkpoint, const std::string& tokenizer, LlamaSource* out, std::string* error) {
  bool ok = false;
  auto ckpt = std::make_shared<std::vector<uint8_t>>(ReadAll(checkpoint, &ok));
  if (!ok || ckpt->size() < 28) return Fail(error, "cannot read " + checkpoint);
  const std::vector<uint8_t> tok = ReadAll(tokenizer, &ok);
  if (!ok || tok.size() < 4) return Fail(error, "cannot read " + tokenizer);
  int32_t h[7];
  std::memcpy(h, ckpt->data(), sizeof h);
  LlamaSource s;
  LlamaHyperParams& p = s.params;
  p.dim = h[0];
  p.hidden_dim = h[1];
  p.layers = h[2];
  p.heads = h[3];
  p.kv_heads = h[4];
  p.shared_classifier = h[5] > 0;
  p.vocab_size = h[5] > 0 ? h[5] : -h[5];
  p.seq_len = h[6];
  if (p.dim <= 0 || p.heads <= 0 || p.kv_heads <= 0 || p.layers <= 0 || p.vocab_size <= 0 || p.hidden_dim <= 0) {
    return Fail(error, "bad header in " + checkpoint);
  }
  // Where each tensor starts (in floats after the header): llama2.c's order,
  // with the legacy RoPE tables before a separate classifier.
  auto offsets = std::make_shared<std::map<std::string, std::pair<uint64_t, uint64_t>>>();
  uint64_t at = 0;
  for (const TensorName& t : LlamaTensors(p)) {
    if (t.name == "output") at += static_cast<uint64_t>(p.seq_len) * static_cast<uint64_t>(p.head_size());
    (*offsets)[t.name] = {at, t.rows * t.cols};
    at += t.rows * t.cols;
  }
  if (at + (p.shared_classifier ? static_cast<uint64_t>(p.seq_len) * p.head_size() : 0) > (ckpt->size() - 28) / 4) {
    return Fail(error, "short checkpoint " + checkpoint);
  }
  s.tensor = [ckpt, offsets](const std::string& name) {
    std::vector<float> v;
    auto it = offsets->find(name);
    if (it == offsets->end()) return v;
    v.resize(it->second.second);
    std::memcpy(v.data(), ckpt->data() + 28 + it->second.first * 4, v.size() * 4);
    return v;
  };
  s.stored = [](const std::string&, int32_t*, std::vector<uint8_t>*) { return false; };
  s.keep = ckpt;

  // The tokenizer: int32 max length, then per token float score, int32 length, bytes.
  size_t q = 4;
  for (int32_t i = 0; i < p.vocab_size; ++i) {
    if (q + 8 > tok.size()) return Fail(error, "short tokenizer " + tokenizer);
    float score;
    int32_t len;
    std::memcpy(&score, tok.data() + q, 4);
    std::memcpy(&len, tok.data() + q + 4, 4);
    q += 8;
    if (len < 0 || q + static_cast<size_t>(len) > tok.size()) return Fail(error, "bad tokenizer " + tokenizer);
    s.pieces.emplace_back(reinterpret_cast<const char*>(tok.data() + q), static_cast<size_t>(len));
    s.scores.push_back(score);
    q += static_cast<size_t>(len);
  }
  s.name = "llama2.c checkpoint";
  *out = std::move(s);
  return true;
}

bool LoadTmai(const std::string& path, LlamaSource* out, std::string* error) {
  TinyAIMmapConfig config = tinyaiCreateDefaultMmapConfig();
  config.prefetchThreads = 0;
  TinyAIMappedModel* opened = tinyaiOpenMappedModel(path.c_str(), &config);
  if (opened == nullptr) return Fail(error, std::string("cannot open ") + path + ": " + tinyaiGetLastErrorMessage());
  std::shared_ptr<TinyAIMappedModel> model(opened, [](TinyAIMappedModel* m) { tinyaiCloseMappedModel(m); });
  const TmaiReader& r = model->reader();
  LlamaSource s;
  if (s.params.Load(r) != TINYAI_OK) return Fail(error, std::string("not a llama model: ") + tinyaiGetLastErrorMessage());
  StringView name;
  if (r.GetString("general.name", &name) == TINYAI_OK) s.name.assign(name.data, name.size);
  const MetaEntry* tokens = r.FindMeta("tokenizer.tokens");
  const MetaEntry* scores = r.FindMeta("tokenizer.scores");
  if (tokens == nullptr || scores == nullptr || tokens->count != scores->count) return Fail(error, "no tokenizer in " + path);
  std::vector<StringView> views(tokens->count);
  TmaiReader::GetStringArray(*tokens, views.data());
  for (const StringView& v : views) s.pieces.emplace_back(v.data, v.size);
  s.scores.resize(scores->count);
  TmaiReader::CopyFloatArray(*scores, s.scores.data());
  int64_t id = 0;
  if (r.GetInt("tokenizer.bos_id", &id) == TINYAI_OK) s.bos = static_cast<int32_t>(id);
  if (r.GetInt("tokenizer.eos_id", &id) == TINYAI_OK) s.eos = static_cast<int32_t>(id);

  // The tensor's stored bytes (rows in the file's layout) and dtype.
  auto raw = [model](const std::string& tensor_name, TinyAITensorInfo* info, std::vector<uint8_t>* bytes) {
    int t = -1;
    std::memset(info, 0, sizeof *info);
    info->structSize = sizeof *info;
    if (tinyaiFindMappedTensor(model.get(), tensor_name.c_str(), &t) != TINYAI_OK ||
        tinyaiGetMappedTensorInfo(model.get(), t, info) != TINYAI_OK) {
      return false;
    }
    const uint8_t* base = static_cast<const uint8_t*>(tinyaiGetLayerWeights(model.get(), info->layer));
    if (base == nullptr) return false;
    bytes->assign(base + info->offsetInLayer, base + info->offsetInLayer + info->decodedSize);
    tinyaiReleaseLayerWeights(model.get(), info->layer);
    return true;
  };
  s.tensor = [raw](const std::string& tensor_name) {
    std::vector<float> v;
    TinyAITensorInfo info;
    std::vector<uint8_t> bytes;
    if (!raw(tensor_name, &info, &bytes)) return v;
    const uint64_t cols = info.shape[info.nDims - 1];
    const uint64_t rows = cols == 0 ? 0 : (info.nDims == 2 ? info.shape[0] : 1);
    const kernels::WeightKernels* wk = kernels::WeightKernelsFor(kernels::Ref(), info.dtype);
    if (rows == 0 || (info.dtype != TINYAI_DTYPE_F32 && (wk == nullptr || wk->dequantize_row == nullptr))) return v;
    v.resize(rows * cols);
    const size_t row_bytes = bytes.size() / rows;
    for (uint64_t r = 0; r < rows; ++r) {
      if (info.dtype == TINYAI_DTYPE_F32) {
        std::memcpy(v.data() + r * cols, bytes.data() + r * row_bytes, cols * 4);
      } else {
        wk->dequantize_row(bytes.data() + r * row_bytes, v.data() + r * cols, cols);
      }
    }
    return v;
  };
  s.stored = [raw](const std::string& tensor_name, int32_t* dtype, std::vector<uint8_t>* bytes) {
    TinyAITensorInfo info;
    if (!raw(tensor_name, &info, bytes) || info.dtype == TINYAI_DTYPE_F32) return false;
    *dtype = info.dtype;
    return true;
  };
  s.keep = model;
  *out = std::move(s);
  return true;
}

bool WriteLlama2c(const LlamaSource& s, const std::string& checkpoint, const std::string& tokenizer,
                  std::string* error) {
  const LlamaHyperParams& p = s.params;
  {
    std::ofstream out(checkpoint, std::ios::binary);
    if (!out) return Fail(error, "cannot write " + checkpoint);
    const int32_t header[7] = {p.dim, p.hidden_dim, p.layers, p.heads, p.kv_heads,
                               p.shared_classifier ? p.vocab_size : -p.vocab_size, p.seq_len};
    out.write(reinterpret_cast<const char*>(header), sizeof header);
    // The legacy freq_cis_real and freq_cis_imag tables, after the final
    // norm (before a separate classifier).
    auto tables = [&] {
      const int32_t half = p.head_size() / 2;
      for (int part = 0; part < 2; ++part) {
        for (int32_t pos = 0; pos < p.seq_len; ++pos) {
          for (int32_t i = 0; i < half; ++i) {
            const double angle = pos * std::pow(static_cast<double>(p.rope_theta), -2.0 * i / (2.0 * half));
            Put(&out, static_cast<float>(part == 0 ? std::cos(angle) : std::sin(angle)));
          }
        }
      }
    };
    for (const TensorName& t : LlamaTensors(p)) {
      const std::vector<float> v = s.tensor(t.name);
      if (v.size() != t.rows * t.cols) return Fail(error, "no tensor " + t.name);
      out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
      if (t.name == "output_norm") tables();
    }
    if (!out) return Fail(error, "cannot write " + checkpoint);
  }
  std::ofstream out(tokenizer, std::ios::binary);
  if (!out) return Fail(error, "cannot write " + tokenizer);
  int32_t max_len = 0;
  for (const std::string& piece : s.pieces) max_len = std::max<int32_t>(max_len, static_cast<int32_t>(piece.size()));
  Put(&out, max_len);
  for (size_t i = 0; i < s.pieces.size(); ++i) {
    Put(&out, s.scores[i]);
    Put(&out, static_cast<int32_t>(s.pieces[i].size()));
    out.write(s.pieces[i].data(), static_cast<std::streamsize>(s.pieces[i].size()));
  }
  if (!out) return Fail(error, "cannot write " + tokenizer);
  return true;
}

int32_t TokenType(const LlamaSource& s, size_t id) {
  const std::string& piece = s.pieces[id];
  if (id == 0 && piece == "<unk>") return 2;
  if (static_cast<int32_t>(id) == s.bos || static_cast<int32_t>(id) == s.eos) return 3;
  if (piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>') return 6;
  return 1;
}

std::vector<std::string> SentencePiecePieces(const LlamaSource& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.pieces.size(); ++i) {
    std::string piece = s.pieces[i];
    if (piece == "\n<s>\n") piece = "<s>";
    if (piece == "\n</s>\n") piece = "</s>";
    std::string sp;
    for (char c : piece) sp += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
    out.push_back(sp);
  }
  return out;
}

}  // namespace testing
}  // namespace tinyai
