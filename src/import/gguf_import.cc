#include "import/gguf_import.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/half.h"
#include "common/printable.h"
#include "common/status.h"
#include "format/limits.h"
#include "format/tmai_writer.h"
#include "format/gguf_index.h"
#include "import/gguf.h"
#include "import/gguf_vocab.h"
#include "port/port.h"

namespace tinyai {

namespace {

// A GGUF tensor TinyAI reads, and where it goes.
struct Planned {
  std::string tmai;  // the .tmai name (DeclareLlamaTensors')
  const gguf::TensorInfo* info = nullptr;
  TinyAIDType dtype = TINYAI_DTYPE_F32;  // as stored in the .tmai
  // q and k of a NEOX-rotary file (Qwen2): the heads whose rows (a bias's
  // values) are permuted into LLaMA's interleaved pairs.
  int32_t rotary_heads = 0;
};

// The .tmai dtype a GGUF tensor of `type` becomes (a matrix, or a norm: 1-D),
// or -1 when TinyAI does not read that type: the runtime's rule
// (format/gguf_index.h); BF16 and F16 norms are widened to f32 here.
int32_t DTypeFor(uint32_t type, bool matrix) {
  bool widened = false;
  return GgufTensorDType(type, matrix, &widened);
}

// Reads an integer hyper-parameter: required unless fallback >= 0.
TinyAIStatus Hyper(const gguf::File& f, const std::string& key, int64_t fallback, int32_t* out) {
  bool found = false;
  uint64_t v = 0;
  TINYAI_RETURN_IF_ERROR(f.GetUint(key, INT32_MAX, &v, &found));
  if (!found) {
    if (fallback < 0) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': no key '%s'", f.source.c_str(), key.c_str());
    v = static_cast<uint64_t>(fallback);
  }
  *out = static_cast<int32_t>(v);
  return TINYAI_OK;
}

// Copies a tensor's bytes to the writer a chunk at a time, releasing each
// chunk of the mapping after it is written (the pages a conversion reads
// once need not stay resident).
TinyAIStatus CopyBytes(TmaiWriter* w, const uint8_t* p, uint64_t bytes) {
  constexpr uint64_t kChunk = 8u << 20;
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = bytes - done < kChunk ? bytes - done : kChunk;
    TINYAI_RETURN_IF_ERROR(w->Write(p + done, static_cast<size_t>(n)));
    port::AdviseRange(p + done, static_cast<size_t>(n), port::Advice::kDontNeed);
    done += n;
  }
  return TINYAI_OK;
}

// Widens `count` 16-bit values (F16 or BF16) to f32, a chunk at a time.
TinyAIStatus WidenHalves(TmaiWriter* w, const uint8_t* p, uint64_t count, bool bf16) {
  constexpr uint64_t kChunk = 1u << 20;
  std::vector<float> buffer(static_cast<size_t>(count < kChunk ? count : kChunk));
  for (uint64_t done = 0; done < count;) {
    const uint64_t n = count - done < kChunk ? count - done : kChunk;
    for (uint64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, p + 2 * (done + i), 2);
      if (bf16) {
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(&buffer[static_cast<size_t>(i)], &bits, 4);
      } else {
        buffer[static_cast<size_t>(i)] = HalfToFloat(h);
      }
    }
    TINYAI_RETURN_IF_ERROR(w->Write(buffer.data(), static_cast<size_t>(n) * sizeof(float)));
    port::AdviseRange(p + 2 * done, static_cast<size_t>(n) * 2, port::Advice::kDontNeed);
    done += n;
  }
  return TINYAI_OK;
}

// Writes a NEOX-rotary tensor (q or k: rows; its bias: values) in LLaMA's
// interleaved order: output row r of a head of n is the file's row r / 2
// (r even: the first halves) or n / 2 + r / 2 (r odd), as hf_import does
// for Hugging Face's layout. A row of a matrix moves whole, whatever its
// dtype (block rows are independent).
TinyAIStatus WriteInterleaved(TmaiWriter* w, const gguf::TensorInfo& t, const uint8_t* p, int32_t heads, bool widen) {
  const bool vector = t.n_dims == 1;
  const uint64_t rows = vector ? t.dims[0] : t.rows(), per_row = vector ? 1 : t.dims[0];
  const uint64_t row_bytes = t.bytes / rows, head = rows / static_cast<uint64_t>(heads);
  for (uint64_t r = 0; r < rows; ++r) {
    const uint64_t h = r / head, k = r % head;
    const uint8_t* row = p + (h * head + (k % 2) * (head / 2) + k / 2) * row_bytes;
    if (widen) {
      TINYAI_RETURN_IF_ERROR(WidenHalves(w, row, per_row, t.type == gguf::kBF16));
    } else {
      TINYAI_RETURN_IF_ERROR(w->Write(row, static_cast<size_t>(row_bytes)));
    }
  }
  port::AdviseRange(p, static_cast<size_t>(t.bytes), port::Advice::kDontNeed);
  return TINYAI_OK;
}

// A scalar number of the file (any integer or float type; a bool as 0 or
// 1): false for a string or an array.
bool ScalarNumber(const gguf::File& f, const gguf::Value& v, double* out) {
  const uint8_t* p = f.data + v.offset;
  auto read = [p](auto x) {
    std::memcpy(&x, p, sizeof x);
    return static_cast<double>(x);
  };
  switch (v.type) {
    case gguf::kUint8: *out = read(uint8_t{}); return true;
    case gguf::kInt8: *out = read(int8_t{}); return true;
    case gguf::kUint16: *out = read(uint16_t{}); return true;
    case gguf::kInt16: *out = read(int16_t{}); return true;
    case gguf::kUint32: *out = read(uint32_t{}); return true;
    case gguf::kInt32: *out = read(int32_t{}); return true;
    case gguf::kUint64: *out = read(uint64_t{}); return true;
    case gguf::kInt64: *out = read(int64_t{}); return true;
    case gguf::kFloat32: *out = read(float{}); return true;
    case gguf::kFloat64: *out = read(double{}); return true;
    case gguf::kBool: *out = p[0] != 0 ? 1.0 : 0.0; return true;
    default: return false;
  }
}

// Linear RoPE scaling, read as llama.cpp reads it (src/llama-model.cpp,
// load_hparams; src/llama-context.cpp): the type is llama.rope.scaling.type,
// and "linear" when that key is missing - llama.cpp's default, so a factor
// without a type scales linearly; the factor is llama.rope.scaling.factor,
// else the older llama.rope.scale_linear, and 0 or no factor is no scaling
// (rope_freq_scale = 1); type "none" never scales ("never scale if scaling
// type is none"), whatever the factor. The angle of position p is then that
// of p / factor (rope_freq_scale = 1 / factor), which the runtime computes
// (llama.rope_linear_factor). Other types (yarn, longrope, ...) change the
// frequencies themselves: refused by name.
TinyAIStatus ReadRopeScaling(const gguf::File& f, const char* path, const std::string& a, float* factor) {
  std::string type = "linear";
  bool has_type = false, has_factor = false, has_linear = false;
  TINYAI_RETURN_IF_ERROR(f.GetString(a + "rope.scaling.type", &type, &has_type));
  float scaling = 0.0f, linear = 0.0f;
  TINYAI_RETURN_IF_ERROR(f.GetFloat(a + "rope.scaling.factor", &scaling, &has_factor));
  TINYAI_RETURN_IF_ERROR(f.GetFloat(a + "rope.scale_linear", &linear, &has_linear));
  if (has_factor && has_linear && scaling != linear) {
    // llama.cpp would take the first: a file that says both, differently, is refused.
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': %srope.scaling.factor %g and %srope.scale_linear %g disagree", path,
                    a.c_str(), static_cast<double>(scaling), a.c_str(), static_cast<double>(linear));
  }
  const float value = has_factor ? scaling : linear;
  const std::string key_name = a + (has_factor ? "rope.scaling.factor" : "rope.scale_linear");
  const char* key = key_name.c_str();
  *factor = 1.0f;
  if (type == "none") return TINYAI_OK;
  if (type != "linear") {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': rope scaling '%s' (llama.rope.scaling.type) changes the rotary "
                    "frequencies themselves; TinyAI runs linear rope scaling or none", path, Printable(type).c_str());
  }
  if (!(value >= 0.0f) || !std::isfinite(value)) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': %s is %g; a rope scaling factor is positive (0: none)", path, key,
                    static_cast<double>(value));
  }
  if (value == 0.0f) return TINYAI_OK;
  if (!RopeLinearFactorInRange(value)) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': %s is %g; the runtime runs linear rope scaling factors of "
                    "1/65536 .. 65536", path, key, static_cast<double>(value));
  }
  *factor = value;
  return TINYAI_OK;
}

// Every "llama.*" key of a file, accounted for: read (the hyper-parameters
// and the rope scaling above), known not to change what a LLaMA model
// computes, or checked to hold the value TinyAI computes with. A key that
// would change the numbers otherwise is refused by name
// (TINYAI_ERR_UNSUPPORTED), and so is a key TinyAI does not know: it may
// change them, and an import never ignores what it cannot honour.
TinyAIStatus CheckLlamaKeys(const gguf::File& f, const char* path, const std::string& a, const LlamaHyperParams& s) {
  for (const gguf::KeyValue& kv : f.kvs) {
    if (kv.key.compare(0, a.size(), a) != 0) continue;
    const std::string rest = kv.key.substr(a.size());
    // The rules the runtime's in-place reader follows too (format/gguf_index.h).
    const GgufLlamaKey* known = FindGgufLlamaKey(rest.data(), rest.size());
    if (known == nullptr) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': key '%s' is not one TinyAI knows: it may change what the model "
                      "computes, and an import never ignores what it cannot honour", path,
                      Printable(kv.key).c_str());
    }
    if (known->rule == GgufLlamaKey::kRead || known->rule == GgufLlamaKey::kNoEffect) continue;
    double v = 0.0;
    if (!ScalarNumber(f, kv.value, &v)) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' is not a number", path, kv.key.c_str());
    }
    const double want = known->rule == GgufLlamaKey::kHeadSize ? static_cast<double>(s.head_size())
                        : known->rule == GgufLlamaKey::kOne || known->rule == GgufLlamaKey::kTrue ? 1.0 : 0.0;
    if (v != want) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': %s is %g: %s, which TinyAI's LLaMA does not compute (it runs "
                      "the model as if it were %g)", path, kv.key.c_str(), v, known->what, want);
    }
  }
  // How the rotary pairs are laid out: llama.cpp's converters write GGUF's
  // interleaved layout, which TinyAI reads.
  std::string layout;
  bool found = false;
  TINYAI_RETURN_IF_ERROR(f.GetString(a + "tensor_data_layout", &layout, &found));
  if (found && layout != "Meta AI original pth" && layout != "reference") {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': llama.tensor_data_layout '%s'; TinyAI reads the layout llama.cpp's "
                    "converters write ('Meta AI original pth', 'reference')", path, Printable(layout).c_str());
  }
  return TINYAI_OK;
}

}  // namespace

TinyAIStatus ConvertGguf(const char* ggufPath, const char* outPath, LlamaHyperParams* paramsOut,
                         const WriteOptions& options, TmaiWriteStats* stats) {
  TINYAI_RETURN_IF_ERROR(CheckImportOptions(options, "GGUF"));
  TINYAI_RETURN_IF_ERROR(RefuseOutputIsInput(outPath, ggufPath));
  port::MappedFile mapped;
  TINYAI_RETURN_IF_ERROR(port::MapFile(ggufPath, &mapped));
  struct Unmap {
    port::MappedFile* f;
    ~Unmap() { port::UnmapFile(f); }
  } unmap{&mapped};
  gguf::File f;
  TINYAI_RETURN_IF_ERROR(gguf::Parse(mapped.data, mapped.size, ggufPath, &f));

  std::string arch;
  bool found = false;
  TINYAI_RETURN_IF_ERROR(f.GetString("general.architecture", &arch, &found));
  if (!found) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': no key 'general.architecture'", ggufPath);
  // Qwen2 is LLaMA with biases on q, k and v and the rotary embedding over
  // each head's halves (llama.cpp's NEOX rope type), which the import turns
  // into LLaMA's interleaved pairs by permuting q's and k's rows.
  if (arch != "llama" && arch != "qwen2") {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': architecture '%s'; TinyAI imports 'llama' and 'qwen2' GGUF files",
                    ggufPath, Printable(arch).c_str());
  }
  const bool qwen2 = arch == "qwen2";
  const std::string a = arch + ".";  // the hyper-parameters' keys
  // One file of a split model (llama.cpp's gguf-split) holds some of its tensors.
  uint64_t splits = 1;
  TINYAI_RETURN_IF_ERROR(f.GetUint("split.count", UINT32_MAX, &splits, &found));
  if (found && splits > 1) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': one of %llu files of a split model (split.count); merge them "
                    "first (llama.cpp's llama-gguf-split --merge)", ggufPath, static_cast<unsigned long long>(splits));
  }
  LlamaHyperParams s;
  TINYAI_RETURN_IF_ERROR(Hyper(f, a + "embedding_length", -1, &s.dim));
  TINYAI_RETURN_IF_ERROR(Hyper(f, a + "feed_forward_length", -1, &s.hidden_dim));
  TINYAI_RETURN_IF_ERROR(Hyper(f, a + "block_count", -1, &s.layers));
  TINYAI_RETURN_IF_ERROR(Hyper(f, a + "context_length", -1, &s.seq_len));
  TINYAI_RETURN_IF_ERROR(Hyper(f, a + "attention.head_count", -1, &s.heads));
  TINYAI_RETURN_IF_ERROR(Hyper(f, a + "attention.head_count_kv", s.heads, &s.kv_heads));
  // The RMSNorm epsilon changes every activation: llama.cpp requires the
  // key (GGUF's specification lists it as required), and so does TinyAI
  // rather than guess one.
  TINYAI_RETURN_IF_ERROR(f.GetFloat(a + "attention.layer_norm_rms_epsilon", &s.norm_eps, &found));
  if (!found) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': no key '%sattention.layer_norm_rms_epsilon' (the RMSNorm "
                    "epsilon, which llama.cpp requires too)", ggufPath, a.c_str());
  }
  TINYAI_RETURN_IF_ERROR(f.GetFloat(a + "rope.freq_base", &s.rope_theta, &found));
  if (!(s.norm_eps > 0.0f) || !std::isfinite(s.norm_eps) || !(s.rope_theta > 0.0f) || !std::isfinite(s.rope_theta)) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': RMS epsilon %g and rope frequency base %g must be positive and "
                    "finite", ggufPath, static_cast<double>(s.norm_eps), static_cast<double>(s.rope_theta));
  }
  TINYAI_RETURN_IF_ERROR(ReadRopeScaling(f, ggufPath, a, &s.rope_linear_factor));
  // Llama 3's per-frequency factors (llama.cpp's LLM_TENSOR_ROPE_FREQS):
  // head_size / 2 floats that divide each pair's frequency, recorded as
  // llama.rope_freq_factors.
  std::vector<float> rope_factors;
  const gguf::TensorInfo* rope_freqs = f.FindTensor("rope_freqs.weight");
  if (rope_freqs != nullptr) {
    const uint64_t pairs = s.heads > 0 ? static_cast<uint64_t>(s.dim / s.heads / 2) : 0;
    if (rope_freqs->type != gguf::kF32 || rope_freqs->n_dims != 1 || rope_freqs->dims[0] != pairs || pairs == 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor 'rope_freqs.weight' is %s [%llu]; the rope frequency "
                      "factors are F32 [%llu] (half a head)", ggufPath, gguf::TypeName(rope_freqs->type),
                      static_cast<unsigned long long>(rope_freqs->dims[0]), static_cast<unsigned long long>(pairs));
    }
    rope_factors.resize(static_cast<size_t>(pairs));
    std::memcpy(rope_factors.data(), mapped.data + rope_freqs->offset, rope_factors.size() * sizeof(float));
    for (size_t i = 0; i < rope_factors.size(); ++i) {
      if (!(rope_factors[i] > 0.0f) || !std::isfinite(rope_factors[i])) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': rope_freqs.weight[%zu] is %g; a frequency factor is positive "
                        "and finite", ggufPath, i, static_cast<double>(rope_factors[i]));
      }
    }
  }

  // The vocabulary (import/gguf_vocab.h).
  GgufVocab vocab_read;
  TINYAI_RETURN_IF_ERROR(ReadGgufVocab(f, &vocab_read));
  const std::vector<std::string>& pieces = vocab_read.tokens;
  s.vocab_size = static_cast<int32_t>(pieces.size());
  int32_t vocab_key = 0;
  TINYAI_RETURN_IF_ERROR(Hyper(f, a + "vocab_size", s.vocab_size, &vocab_key));
  if (vocab_key != s.vocab_size) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': %svocab_size is %d but tokenizer.ggml.tokens has %d", ggufPath,
                    a.c_str(), vocab_key, s.vocab_size);
  }

  // The tensors, checked against the shape.
  const gguf::TensorInfo* embedding = f.FindTensor("token_embd.weight");
  if (embedding != nullptr && embedding->n_dims == 2 && embedding->dims[1] != pieces.size()) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': the vocabulary has %zu tokens but 'token_embd.weight' has %llu rows",
                    ggufPath, pieces.size(), static_cast<unsigned long long>(embedding->dims[1]));
  }
  s.shared_classifier = f.FindTensor("output.weight") == nullptr;
  s.qkv_bias = qwen2;
  TINYAI_RETURN_IF_ERROR(CheckImportedShape(s, ggufPath));
  TINYAI_RETURN_IF_ERROR(CheckLlamaKeys(f, ggufPath, a, s));
  bool has_rope_dims = false;
  uint64_t rope_dims = 0;
  TINYAI_RETURN_IF_ERROR(f.GetUint(a + "rope.dimension_count", UINT32_MAX, &rope_dims, &has_rope_dims));
  if (has_rope_dims && rope_dims != static_cast<uint64_t>(s.head_size())) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': rotary embeddings over %llu of each head's %d dimensions; TinyAI "
                    "rotates whole heads", ggufPath, static_cast<unsigned long long>(rope_dims), s.head_size());
  }
  const uint64_t dim = static_cast<uint64_t>(s.dim), hidden = static_cast<uint64_t>(s.hidden_dim);
  const uint64_t kv_dim = static_cast<uint64_t>(s.kv_dim()), vocab = static_cast<uint64_t>(s.vocab_size);
  std::vector<Planned> plan;
  auto want = [&](const std::string& gguf_name, const std::string& tmai_name, uint64_t rows, uint64_t cols,
                  bool matrix) -> TinyAIStatus {
    const gguf::TensorInfo* t = f.FindTensor(gguf_name);
    if (t == nullptr) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': no tensor '%s'", ggufPath, gguf_name.c_str());
    const uint32_t n_dims = matrix ? 2 : 1;
    if (t->n_dims != n_dims || t->dims[0] != cols || (matrix && t->dims[1] != rows)) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' is %u-dimensional [%llu, %llu]; this model's is [%llu%s%s]",
                      ggufPath, gguf_name.c_str(), t->n_dims, static_cast<unsigned long long>(t->dims[0]),
                      static_cast<unsigned long long>(t->dims[1]), static_cast<unsigned long long>(cols),
                      matrix ? ", " : "", matrix ? std::to_string(rows).c_str() : "");
    }
    const int32_t dtype = DTypeFor(t->type, matrix);
    if (dtype < 0) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' is %s; TinyAI imports F32, F16, BF16, Q8_0, Q4_0, "
                      "IQ4_NL, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K%s (requantize with llama.cpp's llama-quantize to one "
                      "of them, e.g. Q4_K_M, or convert from F16)", ggufPath, gguf_name.c_str(), gguf::TypeName(t->type), matrix ? "" : " (norms: F32, F16, BF16)");
    }
    Planned p;
    p.tmai = tmai_name;
    p.info = t;
    p.dtype = static_cast<TinyAIDType>(dtype);
    plan.push_back(p);
    return TINYAI_OK;
  };
  TINYAI_RETURN_IF_ERROR(want("token_embd.weight", "token_embd", vocab, dim, true));
  for (int32_t l = 0; l < s.layers; ++l) {
    const std::string g = "blk." + std::to_string(l) + ".", t = g;
    TINYAI_RETURN_IF_ERROR(want(g + "attn_norm.weight", t + "attn_norm", 1, dim, false));
    TINYAI_RETURN_IF_ERROR(want(g + "attn_q.weight", t + "attn_q", dim, dim, true));
    TINYAI_RETURN_IF_ERROR(want(g + "attn_k.weight", t + "attn_k", kv_dim, dim, true));
    TINYAI_RETURN_IF_ERROR(want(g + "attn_v.weight", t + "attn_v", kv_dim, dim, true));
    if (qwen2) {
      plan[plan.size() - 3].rotary_heads = s.heads;
      plan[plan.size() - 2].rotary_heads = s.kv_heads;
      TINYAI_RETURN_IF_ERROR(want(g + "attn_q.bias", t + "attn_q_bias", 1, dim, false));
      plan.back().rotary_heads = s.heads;
      TINYAI_RETURN_IF_ERROR(want(g + "attn_k.bias", t + "attn_k_bias", 1, kv_dim, false));
      plan.back().rotary_heads = s.kv_heads;
      TINYAI_RETURN_IF_ERROR(want(g + "attn_v.bias", t + "attn_v_bias", 1, kv_dim, false));
    }
    TINYAI_RETURN_IF_ERROR(want(g + "attn_output.weight", t + "attn_out", dim, dim, true));
    TINYAI_RETURN_IF_ERROR(want(g + "ffn_norm.weight", t + "ffn_norm", 1, dim, false));
    TINYAI_RETURN_IF_ERROR(want(g + "ffn_gate.weight", t + "ffn_gate", hidden, dim, true));
    TINYAI_RETURN_IF_ERROR(want(g + "ffn_up.weight", t + "ffn_up", hidden, dim, true));
    TINYAI_RETURN_IF_ERROR(want(g + "ffn_down.weight", t + "ffn_down", dim, hidden, true));
  }
  TINYAI_RETURN_IF_ERROR(want("output_norm.weight", "output_norm", 1, dim, false));
  if (!s.shared_classifier) TINYAI_RETURN_IF_ERROR(want("output.weight", "output", vocab, dim, true));
  if (plan.size() + (rope_freqs != nullptr ? 1 : 0) != f.tensors.size()) {
    for (const gguf::TensorInfo& t : f.tensors) {
      bool used = &t == rope_freqs;
      for (const Planned& p : plan) used |= p.info == &t;
      if (!used) {
        return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' is not part of a LLaMA model TinyAI runs",
                        ggufPath, Printable(t.name).c_str());
      }
    }
  }

  TmaiWriter w;
  w.SetCompression(options.codec, options.level);
  std::string name = options.name;
  if (name.empty()) TINYAI_RETURN_IF_ERROR(f.GetString("general.name", &name, &found));
  if (name.empty()) name = "GGUF import";
  AddLlamaMetadata(&w, s, llama_key::kArchitecture, name, "gguf", ggufPath, rope_factors);
  AddVocabMetadata(&w, vocab_read);
  DeclareLlamaTensors(&w, s, nullptr, TINYAI_DTYPE_F32, [&](const std::string& n) {
    for (const Planned& p : plan) {
      if (p.tmai == n) return p.dtype;
    }
    return TINYAI_DTYPE_F32;
  });
  TINYAI_RETURN_IF_ERROR(w.Open(outPath));
  for (const Planned& p : plan) {
    const gguf::TensorInfo& t = *p.info;
    const uint8_t* bytes = mapped.data + t.offset;
    const bool widen = (t.type == gguf::kF16 && p.dtype == TINYAI_DTYPE_F32) || t.type == gguf::kBF16;
    if (p.rotary_heads > 0) {
      TINYAI_RETURN_IF_ERROR(WriteInterleaved(&w, t, bytes, p.rotary_heads, widen));
    } else if (widen) {
      TINYAI_RETURN_IF_ERROR(WidenHalves(&w, bytes, t.dims[0] * t.rows(), t.type == gguf::kBF16));
    } else {
      TINYAI_RETURN_IF_ERROR(CopyBytes(&w, bytes, t.bytes));
    }
  }
  TINYAI_RETURN_IF_ERROR(w.Finish());
  if (paramsOut) *paramsOut = s;
  if (stats) *stats = w.stats();
  return TINYAI_OK;
}

}  // namespace tinyai
