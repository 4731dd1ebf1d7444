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
#include "import/gguf.h"
#include "port/port.h"

namespace tinyai {

namespace {

// A GGUF tensor TinyAI reads, and where it goes.
struct Planned {
  std::string tmai;  // the .tmai name (DeclareLlamaTensors')
  const gguf::TensorInfo* info = nullptr;
  TinyAIDType dtype = TINYAI_DTYPE_F32;  // as stored in the .tmai
};

// The .tmai dtype a GGUF tensor of `type` becomes (a matrix, or a norm: 1-D),
// or -1 when TinyAI does not read that type.
int32_t DTypeFor(uint32_t type, bool matrix) {
  switch (type) {
    case gguf::kF32: return TINYAI_DTYPE_F32;
    case gguf::kBF16: return TINYAI_DTYPE_F32;  // widened exactly
    case gguf::kF16: return matrix ? TINYAI_DTYPE_F16 : TINYAI_DTYPE_F32;
    case gguf::kQ8_0: return matrix ? TINYAI_DTYPE_Q8_G32 : -1;
    case gguf::kQ4_0: return matrix ? TINYAI_DTYPE_Q4_G32 : -1;
    case gguf::kIQ4_NL: return matrix ? TINYAI_DTYPE_Q4NL_G32 : -1;
    default: return -1;
  }
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

// The byte pieces where TinyAI's tokenizer looks for them (CheckBytePieces);
// the token types, when given, must agree: one per token, type 6 (byte)
// exactly for those pieces.
TinyAIStatus CheckByteFallback(const gguf::File& f, const std::vector<std::string>& pieces) {
  TINYAI_RETURN_IF_ERROR(CheckBytePieces(f.source.c_str(), pieces));
  std::vector<int64_t> types;
  bool found = false;
  TINYAI_RETURN_IF_ERROR(f.GetInts("tokenizer.ggml.token_type", limits::kMaxVocab, &types, &found));
  if (!found) return TINYAI_OK;
  if (types.size() != pieces.size()) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': %zu token types for %zu tokens", f.source.c_str(), types.size(),
                    pieces.size());
  }
  constexpr int64_t kByte = 6;
  for (size_t id = 0; id < types.size(); ++id) {
    const bool byte_piece = id >= 3 && id <= 258;
    if ((types[id] == kByte) != byte_piece) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': token %zu ('%s') has token type %lld; the byte pieces, and "
                      "only they, have type 6", f.source.c_str(), id, Printable(pieces[id]).c_str(),
                      static_cast<long long>(types[id]));
    }
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
  if (arch != "llama") {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': architecture '%s'; TinyAI imports 'llama' GGUF files", ggufPath,
                    Printable(arch).c_str());
  }
  LlamaHyperParams s;
  TINYAI_RETURN_IF_ERROR(Hyper(f, "llama.embedding_length", -1, &s.dim));
  TINYAI_RETURN_IF_ERROR(Hyper(f, "llama.feed_forward_length", -1, &s.hidden_dim));
  TINYAI_RETURN_IF_ERROR(Hyper(f, "llama.block_count", -1, &s.layers));
  TINYAI_RETURN_IF_ERROR(Hyper(f, "llama.context_length", -1, &s.seq_len));
  TINYAI_RETURN_IF_ERROR(Hyper(f, "llama.attention.head_count", -1, &s.heads));
  TINYAI_RETURN_IF_ERROR(Hyper(f, "llama.attention.head_count_kv", s.heads, &s.kv_heads));
  TINYAI_RETURN_IF_ERROR(f.GetFloat("llama.attention.layer_norm_rms_epsilon", &s.norm_eps, &found));
  TINYAI_RETURN_IF_ERROR(f.GetFloat("llama.rope.freq_base", &s.rope_theta, &found));
  if (!(s.norm_eps > 0.0f) || !std::isfinite(s.norm_eps) || !(s.rope_theta > 0.0f) || !std::isfinite(s.rope_theta)) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': RMS epsilon %g and rope frequency base %g must be positive and "
                    "finite", ggufPath, static_cast<double>(s.norm_eps), static_cast<double>(s.rope_theta));
  }
  std::string scaling;
  TINYAI_RETURN_IF_ERROR(f.GetString("llama.rope.scaling.type", &scaling, &found));
  if (found && scaling != "none") {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': rope scaling '%s'; TinyAI runs unscaled rotary embeddings",
                    ggufPath, Printable(scaling).c_str());
  }
  if (f.FindTensor("rope_freqs.weight") != nullptr) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor 'rope_freqs.weight' (per-frequency rope factors); TinyAI "
                    "runs unscaled rotary embeddings", ggufPath);
  }

  // The vocabulary.
  std::string tokenizer_model;
  TINYAI_RETURN_IF_ERROR(f.GetString("tokenizer.ggml.model", &tokenizer_model, &found));
  if (!found) return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': no key 'tokenizer.ggml.model'", ggufPath);
  if (tokenizer_model != "llama") {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tokenizer '%s'; TinyAI imports SentencePiece vocabularies "
                    "(tokenizer.ggml.model 'llama')", ggufPath, Printable(tokenizer_model).c_str());
  }
  // TinyAI's tokenizer always adds SentencePiece's dummy prefix (a space
  // before the text); a vocabulary that does not would encode otherwise.
  bool add_space = true;
  const gguf::KeyValue* space_key = f.Find("tokenizer.ggml.add_space_prefix");
  if (space_key != nullptr) {
    if (space_key->value.type != gguf::kBool) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key 'tokenizer.ggml.add_space_prefix' is not a bool", ggufPath);
    }
    add_space = mapped.data[space_key->value.offset] != 0;
  }
  if (!add_space) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tokenizer.ggml.add_space_prefix is false; TinyAI's tokenizer "
                    "always adds the dummy-prefix space (as LLaMA's SentencePiece model does)", ggufPath);
  }
  std::vector<std::string> pieces;
  std::vector<float> scores;
  TINYAI_RETURN_IF_ERROR(f.GetStrings("tokenizer.ggml.tokens", limits::kMaxVocab, &pieces, &found));
  if (!found) return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': no key 'tokenizer.ggml.tokens'", ggufPath);
  TINYAI_RETURN_IF_ERROR(f.GetFloats("tokenizer.ggml.scores", limits::kMaxVocab, &scores, &found));
  if (!found) return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': no key 'tokenizer.ggml.scores'", ggufPath);
  if (scores.size() != pieces.size()) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': %zu tokens but %zu scores", ggufPath, pieces.size(), scores.size());
  }
  if (pieces.size() > static_cast<size_t>(INT32_MAX)) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': %zu tokens", ggufPath, pieces.size());
  }
  s.vocab_size = static_cast<int32_t>(pieces.size());
  int32_t vocab_key = 0;
  TINYAI_RETURN_IF_ERROR(Hyper(f, "llama.vocab_size", s.vocab_size, &vocab_key));
  if (vocab_key != s.vocab_size) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': llama.vocab_size is %d but tokenizer.ggml.tokens has %d", ggufPath,
                    vocab_key, s.vocab_size);
  }
  int64_t bos = 1, eos = 2;
  TINYAI_RETURN_IF_ERROR(f.GetInt("tokenizer.ggml.bos_token_id", &bos, &found));
  TINYAI_RETURN_IF_ERROR(f.GetInt("tokenizer.ggml.eos_token_id", &eos, &found));
  if (bos < 0 || eos < 0 || bos >= s.vocab_size || eos >= s.vocab_size) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': BOS %lld or EOS %lld is not a token (%d tokens)", ggufPath,
                    static_cast<long long>(bos), static_cast<long long>(eos), s.vocab_size);
  }
  for (std::string& p : pieces) SpacesFromSentencePiece(&p);
  TinyAIStatus ts = CheckTokenizerPieces(pieces, scores);
  if (ts != TINYAI_OK) return AddErrorContext(ts, "'%s': ", ggufPath);
  TINYAI_RETURN_IF_ERROR(CheckByteFallback(f, pieces));

  // The tensors, checked against the shape.
  const gguf::TensorInfo* embedding = f.FindTensor("token_embd.weight");
  if (embedding != nullptr && embedding->n_dims == 2 && embedding->dims[1] != pieces.size()) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': the vocabulary has %zu tokens but 'token_embd.weight' has %llu rows",
                    ggufPath, pieces.size(), static_cast<unsigned long long>(embedding->dims[1]));
  }
  s.shared_classifier = f.FindTensor("output.weight") == nullptr;
  TINYAI_RETURN_IF_ERROR(CheckImportedShape(s, ggufPath));
  bool has_rope_dims = false;
  uint64_t rope_dims = 0;
  TINYAI_RETURN_IF_ERROR(f.GetUint("llama.rope.dimension_count", UINT32_MAX, &rope_dims, &has_rope_dims));
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
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' is %s; TinyAI imports F32, F16, BF16, Q8_0, Q4_0 and "
                      "IQ4_NL%s (requantize with llama.cpp's llama-quantize --pure to Q8_0 or Q4_0, or convert from "
                      "F16)", ggufPath, gguf_name.c_str(), gguf::TypeName(t->type), matrix ? "" : " (norms: F32, F16, BF16)");
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
    TINYAI_RETURN_IF_ERROR(want(g + "attn_output.weight", t + "attn_out", dim, dim, true));
    TINYAI_RETURN_IF_ERROR(want(g + "ffn_norm.weight", t + "ffn_norm", 1, dim, false));
    TINYAI_RETURN_IF_ERROR(want(g + "ffn_gate.weight", t + "ffn_gate", hidden, dim, true));
    TINYAI_RETURN_IF_ERROR(want(g + "ffn_up.weight", t + "ffn_up", hidden, dim, true));
    TINYAI_RETURN_IF_ERROR(want(g + "ffn_down.weight", t + "ffn_down", dim, hidden, true));
  }
  TINYAI_RETURN_IF_ERROR(want("output_norm.weight", "output_norm", 1, dim, false));
  if (!s.shared_classifier) TINYAI_RETURN_IF_ERROR(want("output.weight", "output", vocab, dim, true));
  if (plan.size() != f.tensors.size()) {
    for (const gguf::TensorInfo& t : f.tensors) {
      bool used = false;
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
  AddLlamaMetadata(&w, s, llama_key::kArchitecture, name, "gguf", ggufPath);
  AddTokenizerMetadata(&w, pieces, scores, bos, eos);
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
    if (widen) {
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
