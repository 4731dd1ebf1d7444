#include "import/builder.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "common/groups.h"
#include "common/printable.h"
#include "common/status.h"
#include "format/limits.h"
#include "format/llama_params.h"
#include "format/tmai_writer.h"

namespace tinyai {

// Streams n floats uniform in [-bound, bound] (or all `fill` when bound is 0).
// Nothing is allocated: a model of tens of thousands of tiny tensors made a
// 256 KiB buffer per tensor, which cost 40 s under AddressSanitizer (page
// faults and its allocator's madvise) against 0.2 s in release.
TinyAIStatus WriteRandom(TmaiWriter* w, uint64_t n, float bound, float fill, uint64_t* rng) {
  float chunk[2048];
  while (n > 0) {
    const size_t m = n < 2048 ? static_cast<size_t>(n) : 2048;
    for (size_t i = 0; i < m; ++i) {
      if (bound == 0.0f) {
        chunk[i] = fill;
      } else {
        float u = static_cast<float>(SplitMix64(rng) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
        chunk[i] = (2.0f * u - 1.0f) * bound;
      }
    }
    TINYAI_RETURN_IF_ERROR(w->WriteValues(chunk, m));
    n -= m;
  }
  return TINYAI_OK;
}

bool ParseDecimal(const std::string& v, uint64_t max, uint64_t* out) {
  if (v.empty() || v.size() > 20) return false;
  uint64_t x = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (x > (UINT64_MAX - d) / 10) return false;
    x = x * 10 + d;
  }
  if (x > max) return false;
  *out = x;
  return true;
}

bool SameFile(const char* a, const char* b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

TinyAIStatus RefuseOutputIsInput(const char* out, const char* in) {
  if (!SameFile(out, in)) return TINYAI_OK;
  return SetError(TINYAI_ERR_INVALID_ARGUMENT, "the output '%s' is the input '%s' (the same file); refusing to "
                  "overwrite an input", out, in);
}

TinyAIStatus CheckImportOptions(const WriteOptions& options, const char* format) {
  TINYAI_RETURN_IF_ERROR(CheckWriteOptions(options));
  if (options.matrix_dtype == TINYAI_DTYPE_F32) return TINYAI_OK;
  return SetError(TINYAI_ERR_INVALID_ARGUMENT, "a %s import keeps each tensor's own dtype (asked for %s): convert the "
                  "result with tinyai-quantize", format, tinyaiDTypeName(options.matrix_dtype));
}

void AddSourceMetadata(TmaiWriter* w, const std::string& format, const char* path) {
  w->AddMetaString("general.source", "tinyai-convert --" + std::string(format == "synthetic" || format == "dense" ? "" : "from ") + format);
  w->AddMetaString("general.source_format", format);
  if (path != nullptr) {
    const char* slash = std::strrchr(path, '/');
    w->AddMetaString("general.source_file", slash ? slash + 1 : path);
  }
}

TinyAIStatus CheckImportedShape(const LlamaHyperParams& shape, const char* source) {
  const TinyAIStatus s = CheckShape(shape, false);
  if (s == TINYAI_OK) return TINYAI_OK;
  // A shape the runtime refuses is the file's fault, not the caller's.
  const TinyAIStatus code = s == TINYAI_ERR_INVALID_ARGUMENT ? TINYAI_ERR_BAD_FORMAT : s;
  const std::string message = tinyaiGetLastErrorMessage();
  return SetError(code, "'%s': %s", source, message.c_str());
}

void SpacesFromSentencePiece(std::string* piece) {
  for (size_t at = piece->find("\xE2\x96\x81"); at != std::string::npos; at = piece->find("\xE2\x96\x81", at + 1)) {
    piece->replace(at, 3, " ");
  }
}

TinyAIStatus CheckBytePieces(const char* source, const std::vector<std::string>& pieces) {
  static const char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const size_t id = static_cast<size_t>(b) + 3;
    const std::string want = std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
    if (id >= pieces.size() || pieces[id] != want) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': token %zu is '%s', not the byte piece '%s': TinyAI's tokenizer "
                      "needs the 256 byte pieces <0x00>..<0xFF> at ids 3..258 (LLaMA's SentencePiece layout)",
                      source, id, id < pieces.size() ? Printable(pieces[id]).c_str() : "(none)", want.c_str());
    }
  }
  return TINYAI_OK;
}

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void AddLlamaMetadata(TmaiWriter* w, const LlamaHyperParams& s, const std::string& architecture, const std::string& name,
                      const std::string& source_format, const char* source_path,
                      const std::vector<float>& rope_freq_factors) {
  w->AddMetaString("general.architecture", architecture);
  w->AddMetaString("general.name", name);
  AddSourceMetadata(w, source_format, source_path);
  for (const LlamaDimField& f : kLlamaDims) w->AddMetaInt(f.key, s.*f.field);
  w->AddMetaInt(llama_key::kSharedClassifier, s.shared_classifier ? 1 : 0);
  if (s.qkv_bias) w->AddMetaInt(llama_key::kQkvBias, 1);
  w->AddMetaFloat(llama_key::kNormEps, s.norm_eps);
  w->AddMetaFloat(llama_key::kRopeTheta, s.rope_theta);
  // Written only when it scales: a model without it runs unscaled (and the
  // files of every other model stay as they were).
  if (s.rope_linear_factor != 1.0f) w->AddMetaFloat(llama_key::kRopeLinearFactor, s.rope_linear_factor);
  if (!rope_freq_factors.empty()) w->AddMetaFloatArray(llama_key::kRopeFreqFactors, rope_freq_factors);
}

void AddTokenizerMetadata(TmaiWriter* w, const std::vector<std::string>& pieces, const std::vector<float>& scores,
                          int64_t bos, int64_t eos, bool add_bos, bool add_eos) {
  size_t max_len = 0;
  for (const std::string& p : pieces) max_len = p.size() > max_len ? p.size() : max_len;
  w->AddMetaString("tokenizer.model", "llama2c-bpe");
  w->AddMetaStringArray("tokenizer.tokens", pieces);
  w->AddMetaFloatArray("tokenizer.scores", scores);
  w->AddMetaInt("tokenizer.bos_id", bos);
  w->AddMetaInt("tokenizer.eos_id", eos);
  w->AddMetaInt("tokenizer.max_token_length", static_cast<int64_t>(max_len));
  // The defaults (BOS added, EOS not) are not written.
  if (!add_bos) w->AddMetaInt("tokenizer.add_bos", 0);
  if (add_eos) w->AddMetaInt("tokenizer.add_eos", 1);
}

TinyAIStatus CheckWriteOptions(const WriteOptions& options) {
  if (options.matrix_dtype != TINYAI_DTYPE_F32 && options.matrix_dtype != TINYAI_DTYPE_F16 &&
      GroupBytes(options.matrix_dtype) == 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "matrices can be written as f32, f16, q8_g32, q4_g32, q4nl_g32, q4_k, q5_k, q6_k, q5_g32 or "
                    "q5m_g32, not %s (dtype %d)",
                    tinyaiDTypeName(options.matrix_dtype), static_cast<int>(options.matrix_dtype));
  }
  return TINYAI_OK;
}

void UseRowEncoder(TmaiWriter* w, const WriteOptions& options) {
  std::vector<quant::EncodeError>* errors = options.errors;
  // Rows are encoded on several threads: the errors are added under a lock.
  auto lock = std::make_shared<std::mutex>();
  w->SetRowEncoder([errors, lock](int32_t tensor, int32_t dtype, const float* row, size_t cols, uint8_t* out) {
    quant::EncodeError e;
    const TinyAIStatus s = quant::EncodeRows(dtype, row, 1, cols, out, errors != nullptr ? &e : nullptr);
    if (s == TINYAI_OK && errors != nullptr) {
      std::lock_guard<std::mutex> hold(*lock);
      if (errors->size() <= static_cast<size_t>(tensor)) errors->resize(static_cast<size_t>(tensor) + 1);
      (*errors)[static_cast<size_t>(tensor)].Add(e);
    }
    return s;
  });
}

void DeclareLlamaTensors(TmaiWriter* w, const LlamaHyperParams& s, const TensorReshape& reshape, TinyAIDType matrix_dtype,
                         const TensorDType& dtype_of) {
  const uint64_t dim = static_cast<uint64_t>(s.dim), hidden = static_cast<uint64_t>(s.hidden_dim);
  const uint64_t kv_dim = dim * static_cast<uint64_t>(s.kv_heads) / static_cast<uint64_t>(s.heads);
  const uint64_t vocab = static_cast<uint64_t>(s.vocab_size);
  auto add = [&](const std::string& name, TinyAITensorRole role, std::vector<uint64_t> shape) {
    if (reshape) reshape(name, &shape);
    w->AddTensor(name, role, dtype_of ? dtype_of(name) : shape.size() == 2 ? matrix_dtype : TINYAI_DTYPE_F32, shape);
  };
  w->AddLayer(TINYAI_LAYER_EMBEDDING, -1);
  add("token_embd", TINYAI_ROLE_TOKEN_EMBEDDING, {vocab, dim});
  for (int32_t l = 0; l < s.layers; ++l) {
    std::string p = "blk." + std::to_string(l) + ".";
    w->AddLayer(TINYAI_LAYER_TRANSFORMER, l);
    add(p + "attn_norm", TINYAI_ROLE_ATTN_NORM, {dim});
    add(p + "attn_q", TINYAI_ROLE_ATTN_Q, {dim, dim});
    add(p + "attn_k", TINYAI_ROLE_ATTN_K, {kv_dim, dim});
    add(p + "attn_v", TINYAI_ROLE_ATTN_V, {kv_dim, dim});
    if (s.qkv_bias) {
      add(p + "attn_q_bias", TINYAI_ROLE_ATTN_Q_BIAS, {dim});
      add(p + "attn_k_bias", TINYAI_ROLE_ATTN_K_BIAS, {kv_dim});
      add(p + "attn_v_bias", TINYAI_ROLE_ATTN_V_BIAS, {kv_dim});
    }
    add(p + "attn_out", TINYAI_ROLE_ATTN_OUT, {dim, dim});
    add(p + "ffn_norm", TINYAI_ROLE_FFN_NORM, {dim});
    add(p + "ffn_gate", TINYAI_ROLE_FFN_GATE, {hidden, dim});
    add(p + "ffn_up", TINYAI_ROLE_FFN_UP, {hidden, dim});
    add(p + "ffn_down", TINYAI_ROLE_FFN_DOWN, {dim, hidden});
  }
  w->AddLayer(TINYAI_LAYER_OUTPUT, -1);
  add("output_norm", TINYAI_ROLE_OUTPUT_NORM, {dim});
  if (!s.shared_classifier) add("output", TINYAI_ROLE_CLASSIFIER, {vocab, dim});
}

TinyAIStatus CheckShape(const LlamaHyperParams& s, bool synthetic) {
  if (s.dim <= 0 || s.hidden_dim <= 0 || s.layers <= 0 || s.heads <= 0 || s.kv_heads <= 0 || s.vocab_size <= 0 ||
      s.seq_len <= 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "every dimension must be positive (dim %d hidden %d layers %d heads %d kv_heads %d vocab %d "
                    "seq_len %d)",
                    s.dim, s.hidden_dim, s.layers, s.heads, s.kv_heads, s.vocab_size, s.seq_len);
  }
  // What the runtime runs (the ranges LlamaHyperParams::Load refuses outside).
  for (const LlamaDimField& f : kLlamaDims) {
    const int32_t value = s.*f.field;
    if (value < f.min || value > f.max) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "%s %d is outside what the runtime runs (%d..%d)", f.key, value, f.min,
                      f.max);
    }
  }
  if (!limits::NormEpsInRange(s.norm_eps) || !limits::RopeThetaInRange(s.rope_theta)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "norm_eps %g or rope_theta %g is outside what the runtime runs "
                    "(0 < norm_eps < 1, rope_theta > 1 and finite)", static_cast<double>(s.norm_eps),
                    static_cast<double>(s.rope_theta));
  }
  if (!RopeLinearFactorInRange(s.rope_linear_factor)) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "a linear RoPE scaling factor of %g is outside what the runtime runs "
                    "(1/65536 .. 65536)", static_cast<double>(s.rope_linear_factor));
  }
  if (s.dim % s.heads != 0 || (s.dim / s.heads) % 2 != 0 || s.heads % s.kv_heads != 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "dim %d must split into %d even-sized heads, and kv_heads %d must divide heads", s.dim, s.heads,
                    s.kv_heads);
  }
  if (synthetic && s.vocab_size < kMinSyntheticVocab) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "vocab %d is too small: a synthetic tokenizer needs >= %d pieces",
                    s.vocab_size, kMinSyntheticVocab);
  }
  return TINYAI_OK;
}

TinyAIStatus CheckTokenizerPieces(const std::vector<std::string>& pieces, const std::vector<float>& scores) {
  if (pieces.size() != scores.size()) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "tokenizer: %zu pieces but %zu scores", pieces.size(), scores.size());
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].empty() || pieces[i].size() > limits::kMaxPieceBytes) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER,
                      "tokenizer: token %zu has a piece of %zu bytes; the runtime needs 1..%u bytes", i,
                      pieces[i].size(), limits::kMaxPieceBytes);
    }
    if (!std::isfinite(scores[i])) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "tokenizer: token %zu has a non-finite score %g", i,
                      static_cast<double>(scores[i]));
    }
  }
  return TINYAI_OK;
}

}  // namespace tinyai
