#include "import/gguf_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "common/half.h"
#include "tinyai/types.h"

namespace tinyai {
namespace testing {

namespace {

// GGUF value types (docs/gguf.md).
constexpr uint32_t kUint32 = 4, kInt32 = 5, kFloat32 = 6, kString = 8, kArray = 9;

template <class T>
void Put(std::vector<uint8_t>* out, T v) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(&v);
  out->insert(out->end(), p, p + sizeof v);
}

void PutString(std::vector<uint8_t>* out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

void GgufWriter::AddUint32(const std::string& key, uint32_t v) {
  std::vector<uint8_t> b;
  Put(&b, kUint32);
  Put(&b, v);
  kvs_.emplace_back(key, b);
}

void GgufWriter::AddInt32(const std::string& key, int32_t v) {
  std::vector<uint8_t> b;
  Put(&b, kInt32);
  Put(&b, v);
  kvs_.emplace_back(key, b);
}

void GgufWriter::AddFloat32(const std::string& key, float v) {
  std::vector<uint8_t> b;
  Put(&b, kFloat32);
  Put(&b, v);
  kvs_.emplace_back(key, b);
}

void GgufWriter::AddString(const std::string& key, const std::string& v) {
  std::vector<uint8_t> b;
  Put(&b, kString);
  PutString(&b, v);
  kvs_.emplace_back(key, b);
}

void GgufWriter::AddStrings(const std::string& key, const std::vector<std::string>& v) {
  std::vector<uint8_t> b;
  Put(&b, kArray);
  Put(&b, kString);
  Put<uint64_t>(&b, v.size());
  for (const std::string& s : v) PutString(&b, s);
  kvs_.emplace_back(key, b);
}

void GgufWriter::AddFloats(const std::string& key, const std::vector<float>& v) {
  std::vector<uint8_t> b;
  Put(&b, kArray);
  Put(&b, kFloat32);
  Put<uint64_t>(&b, v.size());
  for (float f : v) Put(&b, f);
  kvs_.emplace_back(key, b);
}

void GgufWriter::AddInt32s(const std::string& key, const std::vector<int32_t>& v) {
  std::vector<uint8_t> b;
  Put(&b, kArray);
  Put(&b, kInt32);
  Put<uint64_t>(&b, v.size());
  for (int32_t i : v) Put(&b, i);
  kvs_.emplace_back(key, b);
}

void GgufWriter::RemoveKeys(const std::string& prefix) {
  kvs_.erase(std::remove_if(kvs_.begin(), kvs_.end(),
                            [&prefix](const std::pair<std::string, std::vector<uint8_t>>& kv) {
                              return kv.first.compare(0, prefix.size(), prefix) == 0;
                            }),
             kvs_.end());
}

void GgufWriter::AddRaw(const std::string& key, uint32_t type, const std::vector<uint8_t>& value) {
  std::vector<uint8_t> b;
  Put(&b, type);
  b.insert(b.end(), value.begin(), value.end());
  kvs_.emplace_back(key, b);
}

void GgufWriter::AddTensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type,
                           const std::vector<uint8_t>& data) {
  tensors_.push_back(Tensor{name, dims, type, data.size(), [data] { return data; }});
}

void GgufWriter::AddTensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type, uint64_t bytes,
                           std::function<std::vector<uint8_t>()> data) {
  tensors_.push_back(Tensor{name, dims, type, bytes, std::move(data)});
}

bool GgufWriter::ReplaceTensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type,
                               const std::vector<uint8_t>& data) {
  for (Tensor& t : tensors_) {
    if (t.name == name) {
      t = Tensor{name, dims, type, data.size(), [data] { return data; }};
      return true;
    }
  }
  return false;
}

std::vector<uint8_t> GgufWriter::Header(uint32_t version, uint64_t alignment, std::vector<uint64_t>* offsets) const {
  std::vector<uint8_t> out = {'G', 'G', 'U', 'F'};
  Put(&out, version);
  Put<uint64_t>(&out, tensors_.size());
  const bool write_alignment = alignment != 32;
  Put<uint64_t>(&out, kvs_.size() + (write_alignment ? 1 : 0));
  for (const auto& kv : kvs_) {
    PutString(&out, kv.first);
    out.insert(out.end(), kv.second.begin(), kv.second.end());
  }
  if (write_alignment) {
    PutString(&out, "general.alignment");
    Put(&out, kUint32);
    Put(&out, static_cast<uint32_t>(alignment));
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(&out, t.name);
    Put<uint32_t>(&out, static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) Put(&out, d);
    Put(&out, t.type);
    uint64_t at = offset;
    for (const auto& o : overrides_) {
      if (o.first == offsets->size()) at = o.second;
    }
    Put(&out, at);
    offsets->push_back(offset);  // where the data goes, whatever the file says
    offset = AlignUp(offset + t.bytes, alignment);
  }
  out.resize(AlignUp(out.size(), alignment), 0);
  return out;
}

std::vector<uint8_t> GgufWriter::Finish(uint32_t version, uint64_t alignment) const {
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> out = Header(version, alignment, &offsets);
  const size_t data = out.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    out.resize(data + offsets[i], 0);
    const std::vector<uint8_t> bytes = tensors_[i].data();
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  return out;
}

bool GgufWriter::WriteFile(const std::string& path, uint32_t version, uint64_t alignment) const {
  std::vector<uint64_t> offsets;
  const std::vector<uint8_t> header = Header(version, alignment, &offsets);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
  uint64_t at = 0;
  for (size_t i = 0; i < tensors_.size() && out; ++i) {
    const std::vector<char> pad(offsets[i] - at, 0);
    out.write(pad.data(), static_cast<std::streamsize>(pad.size()));
    const std::vector<uint8_t> bytes = tensors_[i].data();
    if (bytes.size() != tensors_[i].bytes) return false;
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    at = offsets[i] + bytes.size();
  }
  return static_cast<bool>(out);
}

std::vector<uint8_t> EncodeQ8_0(const float* x, size_t rows, size_t cols) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < rows * cols / 32; ++b) {
    const float* v = x + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(v[j]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    Put<uint16_t>(&out, FloatToHalf(d));
    for (int j = 0; j < 32; ++j) out.push_back(static_cast<uint8_t>(static_cast<int8_t>(std::round(v[j] * id))));
  }
  return out;
}

std::vector<uint8_t> EncodeQ4_0(const float* x, size_t rows, size_t cols) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < rows * cols / 32; ++b) {
    const float* v = x + b * 32;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; ++j) {
      if (amax < std::fabs(v[j])) {
        amax = std::fabs(v[j]);
        max = v[j];
      }
    }
    const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    Put<uint16_t>(&out, FloatToHalf(d));
    for (int j = 0; j < 16; ++j) {
      const int lo = static_cast<int8_t>(v[j] * id + 8.5f), hi = static_cast<int8_t>(v[16 + j] * id + 8.5f);
      out.push_back(static_cast<uint8_t>((lo < 15 ? lo : 15) | (hi < 15 ? hi : 15) << 4));
    }
  }
  return out;
}

float DecodeQ8_0(const uint8_t* block, int j) {
  uint16_t d;
  std::memcpy(&d, block, 2);
  return HalfToFloat(d) * static_cast<float>(static_cast<int8_t>(block[2 + j]));
}

float DecodeQ4_0(const uint8_t* block, int j) {
  uint16_t d;
  std::memcpy(&d, block, 2);
  const uint8_t byte = block[2 + (j % 16)];
  const int code = j < 16 ? (byte & 15) : (byte >> 4);
  return HalfToFloat(d) * static_cast<float>(code - 8);
}

std::vector<uint8_t> EncodeF16(const float* x, size_t n) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i < n; ++i) Put<uint16_t>(&out, FloatToHalf(x[i]));
  return out;
}

std::vector<uint8_t> EncodeF32(const float* x, size_t n) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(x);
  return std::vector<uint8_t>(p, p + n * sizeof(float));
}

std::vector<uint8_t> EncodeBF16(const float* x, size_t n) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
      bits |= 0x00400000u;  // a NaN stays a (quiet) NaN
    } else {
      bits += 0x7fffu + ((bits >> 16) & 1u);  // to nearest, ties to even
    }
    Put<uint16_t>(&out, static_cast<uint16_t>(bits >> 16));
  }
  return out;
}

namespace {

// GPT-2's bytes_to_unicode: the printable bytes stand for themselves, the
// others for U+0100 onwards in byte order.
std::string ByteForm(int b) {
  auto printable = [](int i) { return (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255); };
  int cp = b;
  if (!printable(b)) {
    int n = 0;
    for (int i = 0; i < b; ++i) n += printable(i) ? 0 : 1;
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

}  // namespace

ByteLevelVocab::ByteLevelVocab(int32_t size) {
  for (int b = 0; b < 256; ++b) Add(ByteForm(b), 1);
  for (const std::string& m : merges) {
    const size_t space = m.find(' ');
    Add(m.substr(0, space) + m.substr(space + 1), 1);
  }
  Add("cat", 1);
  bos = Add("<|begin_of_text|>", 3);
  eos = Add("<|end_of_text|>", 3);
  eot = Add("<|eot_id|>", 3);
  im_end = Add("<|im_end|>", 4);  // user-defined in the file: llama.cpp makes it a control token
  tool = Add("<tool>", 4);
  im_start = Add("<|im_start|>", 3);
  while (static_cast<int32_t>(tokens.size()) < size) Add("[PAD" + std::to_string(tokens.size()) + "]", 5);
}

int32_t ByteLevelVocab::Add(const std::string& t, int32_t type) {
  tokens.push_back(t);
  types.push_back(type);
  return static_cast<int32_t>(tokens.size() - 1);
}

int32_t ByteLevelVocab::Id(const std::string& t) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] == t) return static_cast<int32_t>(i);
  }
  return -1;
}

void ByteLevelVocab::Write(GgufWriter* w, const std::string& pre) const {
  w->RemoveKeys("tokenizer.");
  w->AddString("tokenizer.ggml.model", "gpt2");
  w->AddStrings("tokenizer.ggml.tokens", tokens);
  w->AddInt32s("tokenizer.ggml.token_type", types);
  w->AddStrings("tokenizer.ggml.merges", merges);
  if (!pre.empty()) w->AddString("tokenizer.ggml.pre", pre);
  w->AddUint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(bos));
  w->AddUint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(eos));
}

bool GgufFromSource(const LlamaSource& s, const GgufModelOptions& options, GgufWriter* out, std::string* error) {
  const LlamaHyperParams& p = s.params;
  GgufWriter& w = *out;
  const std::string a = options.qwen2 ? "qwen2." : "llama.";
  w.AddString("general.architecture", options.qwen2 ? "qwen2" : "llama");
  w.AddString("general.name", s.name);
  w.AddUint32(a + "context_length", static_cast<uint32_t>(p.seq_len));
  w.AddUint32(a + "embedding_length", static_cast<uint32_t>(p.dim));
  w.AddUint32(a + "block_count", static_cast<uint32_t>(p.layers));
  w.AddUint32(a + "feed_forward_length", static_cast<uint32_t>(p.hidden_dim));
  w.AddUint32(a + "rope.dimension_count", static_cast<uint32_t>(p.head_size()));
  w.AddUint32(a + "attention.head_count", static_cast<uint32_t>(p.heads));
  w.AddUint32(a + "attention.head_count_kv", static_cast<uint32_t>(p.kv_heads));
  w.AddFloat32(a + "attention.layer_norm_rms_epsilon", p.norm_eps);
  w.AddFloat32(a + "rope.freq_base", p.rope_theta);
  if (p.rope_linear_factor != 1.0f) {  // as llama.cpp's converters write linear scaling
    w.AddString(a + "rope.scaling.type", "linear");
    w.AddFloat32(a + "rope.scaling.factor", p.rope_linear_factor);
  }
  w.AddString("tokenizer.ggml.model", "llama");
  w.AddStrings("tokenizer.ggml.tokens", SentencePiecePieces(s));
  w.AddFloats("tokenizer.ggml.scores", s.scores);
  if (options.token_types) {
    std::vector<int32_t> types;
    for (size_t i = 0; i < s.pieces.size(); ++i) types.push_back(TokenType(s, i));
    w.AddInt32s("tokenizer.ggml.token_type", types);
  }
  w.AddUint32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(s.bos));
  w.AddUint32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(s.eos));
  w.AddUint32("tokenizer.ggml.unknown_token_id", 0);

  // GGUF's names and order: the embedding, each block's tensors, the final norm, the classifier.
  std::vector<std::pair<std::string, TensorName>> order;
  const std::vector<TensorName> tensors = LlamaTensors(p);
  auto find = [&](const std::string& name) {
    for (const TensorName& t : tensors) {
      if (t.name == name) return t;
    }
    return TensorName{name, 0, 0, false};
  };
  order.emplace_back("token_embd.weight", find("token_embd"));
  const char* const kinds[][2] = {{"attn_norm", "attn_norm"}, {"attn_q", "attn_q"},     {"attn_k", "attn_k"},
                                  {"attn_v", "attn_v"},       {"attn_out", "attn_output"}, {"ffn_norm", "ffn_norm"},
                                  {"ffn_gate", "ffn_gate"},   {"ffn_up", "ffn_up"},     {"ffn_down", "ffn_down"}};
  for (int32_t l = 0; l < p.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    for (const auto& k : kinds) order.emplace_back(b + k[1] + ".weight", find(b + k[0]));
    if (options.qwen2) {
      for (const char* k : {"attn_q", "attn_k", "attn_v"}) order.emplace_back(b + k + ".bias", find(b + k + "_bias"));
    }
  }
  order.emplace_back("output_norm.weight", find("output_norm"));
  if (!p.shared_classifier) order.emplace_back("output.weight", find("output"));

  for (const auto& entry : order) {
    const TensorName t = entry.second;
    if (t.rows == 0) return *error = "no tensor " + t.name, false;
    const std::vector<uint64_t> dims = t.matrix ? std::vector<uint64_t>{t.cols, t.rows} : std::vector<uint64_t>{t.cols};
    uint32_t type = t.matrix ? options.matrix_type : options.norm_type;
    if (type == GgufModelOptions::kStored) {
      int32_t dtype = TINYAI_DTYPE_F32;
      std::vector<uint8_t> bytes;
      if (!s.stored(t.name, &dtype, &bytes)) dtype = TINYAI_DTYPE_F32;
      switch (dtype) {
        case TINYAI_DTYPE_F32: type = kGgmlF32; break;
        case TINYAI_DTYPE_F16: type = kGgmlF16; break;
        case TINYAI_DTYPE_Q8_G32: type = kGgmlQ8_0; break;
        case TINYAI_DTYPE_Q4_G32: type = kGgmlQ4_0; break;
        case TINYAI_DTYPE_Q4NL_G32: type = kGgmlIQ4_NL; break;
        case TINYAI_DTYPE_Q5_G32: type = 6; break;   // Q5_0
        case TINYAI_DTYPE_Q5M_G32: type = 7; break;  // Q5_1
        case TINYAI_DTYPE_Q4_K: type = 12; break;
        case TINYAI_DTYPE_Q5_K: type = 13; break;
        case TINYAI_DTYPE_Q6_K: type = 14; break;
        default: return *error = "tensor " + t.name + " has a dtype GGUF does not store", false;
      }
      const uint64_t block = type >= 12 && type <= 14 ? 256 : 32;
      if (type != kGgmlF32 && type != kGgmlF16 && t.cols % block != 0) {
        return *error = "tensor " + t.name + ": rows of " + std::to_string(t.cols) + " values in blocks of " +
                        std::to_string(block), false;
      }
      if (type != kGgmlF32) {  // read again when written: one tensor in memory at a time
        const LlamaSource* source = &s;
        const std::string name = t.name;
        w.AddTensor(entry.first, dims, type, bytes.size(), [source, name] {
          int32_t dtype = 0;
          std::vector<uint8_t> again;
          source->stored(name, &dtype, &again);
          return again;
        });
        continue;
      }
    }
    if ((type == kGgmlQ8_0 || type == kGgmlQ4_0) && t.cols % 32 != 0) type = kGgmlF32;
    const uint64_t n = t.rows * t.cols;
    const uint64_t bytes = type == kGgmlQ8_0   ? n / 32 * 34
                           : type == kGgmlQ4_0 ? n / 32 * 18
                           : type == kGgmlF16 || type == kGgmlBF16 ? 2 * n
                                                                    : 4 * n;
    const LlamaSource* source = &s;
    // Qwen2's q and k (weights and biases) in the NEOX layout: file row j of
    // a head of n is the source's (interleaved) row 2j (j < n / 2) or
    // 2(j - n / 2) + 1.
    const bool attn_q = entry.first.find("attn_q.") != std::string::npos;
    const int32_t neox_heads = !options.qwen2                                          ? 0
                               : attn_q                                                ? p.heads
                               : entry.first.find("attn_k.") != std::string::npos ? p.kv_heads
                                                                                       : 0;
    if (neox_heads > 0 && type != kGgmlF32 && type != kGgmlF16) return *error = "qwen2: F32 or F16 q and k", false;
    w.AddTensor(entry.first, dims, type, bytes, [source, t, type, neox_heads] {
      std::vector<float> v = source->tensor(t.name);
      if (v.size() != t.rows * t.cols) return std::vector<uint8_t>();
      if (neox_heads > 0) {
        const bool vector = t.rows == 1;
        const uint64_t rows = vector ? t.cols : t.rows, each = vector ? 1 : t.cols;
        const uint64_t head = rows / static_cast<uint64_t>(neox_heads);
        std::vector<float> neox(v.size());
        for (uint64_t j = 0; j < rows; ++j) {
          const uint64_t h = j / head, k = j % head;
          const uint64_t from = h * head + (k < head / 2 ? 2 * k : 2 * (k - head / 2) + 1);
          std::copy(v.begin() + static_cast<std::ptrdiff_t>(from * each),
                    v.begin() + static_cast<std::ptrdiff_t>((from + 1) * each),
                    neox.begin() + static_cast<std::ptrdiff_t>(j * each));
        }
        v.swap(neox);
      }
      return type == kGgmlQ8_0   ? EncodeQ8_0(v.data(), t.rows, t.cols)
             : type == kGgmlQ4_0 ? EncodeQ4_0(v.data(), t.rows, t.cols)
             : type == kGgmlF16  ? EncodeF16(v.data(), v.size())
             : type == kGgmlBF16 ? EncodeBF16(v.data(), v.size())
                                 : EncodeF32(v.data(), v.size());
    });
  }
  return true;
}

}  // namespace testing
}  // namespace tinyai
