#include "format/model_builder.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/array.h"
#include "common/checked_math.h"
#include "common/status.h"
#include "format/tmai_writer.h"
#include "port/port.h"
#include "text/llama2c_tokenizer.h"

namespace tinyai {
namespace {

// Streams n floats uniform in [-bound, bound] (or all `fill` when bound is 0).
TinyAIStatus WriteRandom(TmaiWriter* w, uint64_t n, float bound, float fill, uint64_t* rng) {
  std::vector<float> chunk(1 << 16);
  while (n > 0) {
    size_t m = n < chunk.size() ? static_cast<size_t>(n) : chunk.size();
    for (size_t i = 0; i < m; ++i) {
      if (bound == 0.0f) {
        chunk[i] = fill;
      } else {
        float u = static_cast<float>(SplitMix64(rng) >> 40) * (1.0f / 16777216.0f);  // [0, 1)
        chunk[i] = (2.0f * u - 1.0f) * bound;
      }
    }
    TINYAI_RETURN_IF_ERROR(w->Write(chunk.data(), m * sizeof(float)));
    n -= m;
  }
  return TINYAI_OK;
}

// A tokenizer for synthetic models: <unk> <s> </s>, the 256 byte-fallback
// pieces, then lowercase syllables (with and without a leading space) so
// generated text is printable.
void SyntheticTokenizer(int32_t vocab, uint64_t seed, std::vector<std::string>* pieces, std::vector<float>* scores) {
  pieces->clear();
  scores->clear();
  pieces->push_back("<unk>");
  pieces->push_back("\n<s>\n");
  pieces->push_back("\n</s>\n");
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    pieces->push_back(buf);
  }
  for (size_t i = 0; i < pieces->size(); ++i) scores->push_back(0.0f);
  pieces->push_back(" ");  // the dummy prefix, as SentencePiece vocabularies have it
  scores->push_back(0.0f);
  static const char* kOnsets[] = {"b", "c", "d", "f", "g", "h", "l", "m", "n", "p", "r", "s", "t", "w", "th", "st"};
  static const char* kVowels[] = {"a", "e", "i", "o", "u", "ay", "ee", "oo"};
  static const char* kCodas[] = {"", "n", "t", "s", "r", "ng", "ll", "d"};
  uint64_t rng = seed ^ 0x5EEDull;
  std::vector<std::string> seen;
  int32_t rank = 0;
  while (static_cast<int32_t>(pieces->size()) < vocab) {
    std::string syl = std::string(kOnsets[SplitMix64(&rng) % 16]) + kVowels[SplitMix64(&rng) % 8] +
                      kCodas[SplitMix64(&rng) % 8];
    std::string piece = (rank % 2 == 0 ? " " : "") + syl;
    ++rank;
    bool dup = false;
    for (const std::string& p : *pieces) dup = dup || p == piece;
    if (dup) {
      piece += std::to_string(rank);  // keep every piece unique
    }
    pieces->push_back(piece);
    scores->push_back(-static_cast<float>(rank));
  }
}

long ParseLong(const std::string& v, bool* ok) {
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  *ok = !v.empty() && end && *end == '\0';
  return x;
}

}  // namespace

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void AddLlamaMetadata(TmaiWriter* w, const LlamaShape& s, const std::string& architecture, const std::string& name,
                      const std::string& source) {
  w->AddMetaString("general.architecture", architecture);
  w->AddMetaString("general.name", name);
  w->AddMetaString("general.source", source);
  w->AddMetaInt("llama.dim", s.dim);
  w->AddMetaInt("llama.hidden_dim", s.hidden_dim);
  w->AddMetaInt("llama.layers", s.layers);
  w->AddMetaInt("llama.heads", s.heads);
  w->AddMetaInt("llama.kv_heads", s.kv_heads);
  w->AddMetaInt("llama.vocab_size", s.vocab_size);
  w->AddMetaInt("llama.seq_len", s.seq_len);
  w->AddMetaInt("llama.shared_classifier", s.shared_classifier ? 1 : 0);
  w->AddMetaFloat("llama.norm_eps", 1e-5f);
  w->AddMetaFloat("llama.rope_theta", 10000.0f);
}

void AddTokenizerMetadata(TmaiWriter* w, const std::vector<std::string>& pieces, const std::vector<float>& scores) {
  size_t max_len = 0;
  for (const std::string& p : pieces) max_len = p.size() > max_len ? p.size() : max_len;
  w->AddMetaString("tokenizer.model", "llama2c-bpe");
  w->AddMetaStringArray("tokenizer.tokens", pieces);
  w->AddMetaFloatArray("tokenizer.scores", scores);
  w->AddMetaInt("tokenizer.bos_id", 1);
  w->AddMetaInt("tokenizer.eos_id", 2);
  w->AddMetaInt("tokenizer.max_token_length", static_cast<int64_t>(max_len));
}

void DeclareLlamaTensors(TmaiWriter* w, const LlamaShape& s, const TensorReshape& reshape) {
  const uint64_t dim = static_cast<uint64_t>(s.dim), hidden = static_cast<uint64_t>(s.hidden_dim);
  const uint64_t kv_dim = dim * static_cast<uint64_t>(s.kv_heads) / static_cast<uint64_t>(s.heads);
  const uint64_t vocab = static_cast<uint64_t>(s.vocab_size);
  auto add = [&](const std::string& name, TinyAITensorRole role, std::vector<uint64_t> shape) {
    if (reshape) reshape(name, &shape);
    w->AddTensor(name, role, TINYAI_DTYPE_F32, shape);
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

TinyAIStatus CheckShape(const LlamaShape& s, bool synthetic) {
  if (s.dim <= 0 || s.hidden_dim <= 0 || s.layers <= 0 || s.heads <= 0 || s.kv_heads <= 0 || s.vocab_size <= 0 ||
      s.seq_len <= 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "every dimension must be positive (dim %d hidden %d layers %d heads %d kv_heads %d vocab %d "
                    "seq_len %d)",
                    s.dim, s.hidden_dim, s.layers, s.heads, s.kv_heads, s.vocab_size, s.seq_len);
  }
  if (s.dim % s.heads != 0 || (s.dim / s.heads) % 2 != 0 || s.heads % s.kv_heads != 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "dim %d must split into %d even-sized heads, and kv_heads %d must divide heads", s.dim, s.heads,
                    s.kv_heads);
  }
  if (synthetic && s.vocab_size < 260) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "vocab %d is too small: a synthetic tokenizer needs >= 260 pieces",
                    s.vocab_size);
  }
  return TINYAI_OK;
}

TinyAIStatus ParseSyntheticSpec(const std::string& spec, LlamaShape* out) {
  LlamaShape s;
  s.kv_heads = -1;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "spec item '%s' has no '='", item.c_str());
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    bool ok = false;
    long v = ParseLong(value, &ok);
    if (!ok || v < 0 || v > (1L << 30)) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "spec value '%s' for '%s' is not a valid number", value.c_str(),
                      key.c_str());
    }
    int32_t iv = static_cast<int32_t>(v);
    if (key == "dim") s.dim = iv;
    else if (key == "hidden") s.hidden_dim = iv;
    else if (key == "layers") s.layers = iv;
    else if (key == "heads") s.heads = iv;
    else if (key == "kv_heads") s.kv_heads = iv;
    else if (key == "vocab") s.vocab_size = iv;
    else if (key == "seq_len") s.seq_len = iv;
    else if (key == "seed") s.seed = static_cast<uint64_t>(v);
    else if (key == "shared") s.shared_classifier = v != 0;
    else return SetError(TINYAI_ERR_INVALID_ARGUMENT, "unknown spec key '%s'", key.c_str());
  }
  if (s.kv_heads < 0) s.kv_heads = s.heads;
  TINYAI_RETURN_IF_ERROR(CheckShape(s, true));
  *out = s;
  return TINYAI_OK;
}

TinyAIStatus WriteSyntheticModel(const LlamaShape& s, const char* outPath, const WriteOptions& options,
                                 TmaiWriteStats* stats) {
  TINYAI_RETURN_IF_ERROR(CheckShape(s, true));
  TmaiWriter w;
  w.SetCompression(options.codec, options.level);
  AddLlamaMetadata(&w, s, "llama", "synthetic", "tinyai-convert --synthetic");
  w.AddMetaInt("general.seed", static_cast<int64_t>(s.seed));
  std::vector<std::string> pieces;
  std::vector<float> scores;
  SyntheticTokenizer(s.vocab_size, s.seed, &pieces, &scores);
  AddTokenizerMetadata(&w, pieces, scores);
  DeclareLlamaTensors(&w, s);
  TINYAI_RETURN_IF_ERROR(w.Open(outPath));

  uint64_t rng = s.seed;
  const uint64_t dim = static_cast<uint64_t>(s.dim), hidden = static_cast<uint64_t>(s.hidden_dim);
  const uint64_t kv_dim = dim * static_cast<uint64_t>(s.kv_heads) / static_cast<uint64_t>(s.heads);
  const uint64_t vocab = static_cast<uint64_t>(s.vocab_size);
  auto fan_in = [](uint64_t cols) { return std::sqrt(3.0f / static_cast<float>(cols)); };
  TINYAI_RETURN_IF_ERROR(WriteRandom(&w, vocab * dim, 1.0f, 0.0f, &rng));  // embedding rows ~ unit variance / 3
  for (int32_t l = 0; l < s.layers; ++l) {
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, dim, 0.0f, 1.0f, &rng));
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, dim * dim, fan_in(dim), 0.0f, &rng));
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, kv_dim * dim, fan_in(dim), 0.0f, &rng));
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, kv_dim * dim, fan_in(dim), 0.0f, &rng));
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, dim * dim, fan_in(dim), 0.0f, &rng));
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, dim, 0.0f, 1.0f, &rng));
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, hidden * dim, fan_in(dim), 0.0f, &rng));
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, hidden * dim, fan_in(dim), 0.0f, &rng));
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, dim * hidden, fan_in(hidden), 0.0f, &rng));
  }
  TINYAI_RETURN_IF_ERROR(WriteRandom(&w, dim, 0.0f, 1.0f, &rng));
  if (!s.shared_classifier) TINYAI_RETURN_IF_ERROR(WriteRandom(&w, vocab * dim, fan_in(dim), 0.0f, &rng));
  TINYAI_RETURN_IF_ERROR(w.Finish());
  if (stats) *stats = w.stats();
  return TINYAI_OK;
}

TinyAIStatus ConvertLlama2c(const char* checkpointPath, const char* tokenizerPath, const char* outPath,
                            LlamaShape* shapeOut, const WriteOptions& options, TmaiWriteStats* stats) {
  port::MappedFile ckpt;
  TINYAI_RETURN_IF_ERROR(port::MapFile(checkpointPath, &ckpt));
  struct Unmap {
    port::MappedFile* f;
    ~Unmap() { port::UnmapFile(f); }
  } unmap_ckpt{&ckpt};
  if (ckpt.size < 7 * sizeof(int32_t)) {
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': %llu bytes cannot hold a llama2.c header", checkpointPath,
                    static_cast<unsigned long long>(ckpt.size));
  }
  int32_t h[7];
  std::memcpy(h, ckpt.data, sizeof h);
  LlamaShape s;
  s.dim = h[0];
  s.hidden_dim = h[1];
  s.layers = h[2];
  s.heads = h[3];
  s.kv_heads = h[4];
  s.shared_classifier = h[5] > 0;
  s.vocab_size = h[5] > 0 ? h[5] : (h[5] == INT32_MIN ? 0 : -h[5]);
  s.seq_len = h[6];
  if (CheckShape(s, false) != TINYAI_OK) {
    return AddErrorContext(TINYAI_ERR_BAD_FORMAT, "'%s': not a llama2.c checkpoint: ", checkpointPath);
  }
  const uint64_t dim = static_cast<uint64_t>(s.dim), hidden = static_cast<uint64_t>(s.hidden_dim);
  const uint64_t L = static_cast<uint64_t>(s.layers), vocab = static_cast<uint64_t>(s.vocab_size);
  const uint64_t kv_dim = dim * static_cast<uint64_t>(s.kv_heads) / static_cast<uint64_t>(s.heads);
  const uint64_t head_size = dim / static_cast<uint64_t>(s.heads);
  // Float offsets of each stacked tensor after the 28-byte header, computed
  // with overflow checks: the header is untrusted.
  bool overflow = false;
  uint64_t cursor = 0;
  auto next = [&](uint64_t a, uint64_t b, uint64_t c) {
    uint64_t at = cursor, n = 0;
    if (!CheckedMul(a, b, &n) || !CheckedMul(n, c, &n) || !CheckedAdd(cursor, n, &cursor)) overflow = true;
    return at;
  };
  const uint64_t o_emb = next(vocab, dim, 1), o_rms_att = next(L, dim, 1), o_wq = next(L, dim, dim);
  const uint64_t o_wk = next(L, kv_dim, dim), o_wv = next(L, kv_dim, dim), o_wo = next(L, dim, dim);
  const uint64_t o_rms_ffn = next(L, dim, 1), o_w1 = next(L, hidden, dim), o_w2 = next(L, dim, hidden);
  const uint64_t o_w3 = next(L, hidden, dim), o_rms_final = next(dim, 1, 1);
  next(static_cast<uint64_t>(s.seq_len), head_size, 1);  // legacy freq_cis real and imag halves
  const uint64_t o_cls = s.shared_classifier ? 0 : next(vocab, dim, 1);
  uint64_t expected = 0;
  if (overflow || !CheckedMul(cursor, 4, &expected) || !CheckedAdd(expected, 28, &expected)) {
    return SetError(TINYAI_ERR_OVERFLOW, "'%s': the header's shape (dim %d, hidden %d, layers %d) overflows 64-bit sizes",
                    checkpointPath, s.dim, s.hidden_dim, s.layers);
  }
  if (ckpt.size != expected) {
    return SetError(ckpt.size < expected ? TINYAI_ERR_TRUNCATED : TINYAI_ERR_BAD_FORMAT,
                    "'%s': a llama2.c checkpoint of this shape has %llu bytes, the file %llu", checkpointPath,
                    static_cast<unsigned long long>(expected), static_cast<unsigned long long>(ckpt.size));
  }
  const float* f = reinterpret_cast<const float*>(ckpt.data + 28);

  port::MappedFile tokfile;
  TINYAI_RETURN_IF_ERROR(port::MapFile(tokenizerPath, &tokfile));
  Unmap unmap_tok{&tokfile};
  Llama2cVocab vocab_data;
  TinyAIStatus ts = ParseLlama2cTokenizer(tokfile.data, static_cast<size_t>(tokfile.size), s.vocab_size, &vocab_data);
  if (ts != TINYAI_OK) return AddErrorContext(ts, "'%s': ", tokenizerPath);

  TmaiWriter w;
  w.SetCompression(options.codec, options.level);
  AddLlamaMetadata(&w, s, "llama", "llama2.c checkpoint", "tinyai-convert --from llama2c");
  std::vector<std::string> pieces;
  std::vector<float> scores;
  for (int32_t i = 0; i < s.vocab_size; ++i) {
    pieces.emplace_back(vocab_data.pieces[static_cast<size_t>(i)].data, vocab_data.pieces[static_cast<size_t>(i)].size);
    scores.push_back(vocab_data.scores[static_cast<size_t>(i)]);
  }
  AddTokenizerMetadata(&w, pieces, scores);
  DeclareLlamaTensors(&w, s);
  TINYAI_RETURN_IF_ERROR(w.Open(outPath));
  auto put = [&](uint64_t offset, uint64_t count) { return w.Write(f + offset, static_cast<size_t>(count * 4)); };
  TINYAI_RETURN_IF_ERROR(put(o_emb, vocab * dim));
  for (uint64_t l = 0; l < L; ++l) {
    TINYAI_RETURN_IF_ERROR(put(o_rms_att + l * dim, dim));
    TINYAI_RETURN_IF_ERROR(put(o_wq + l * dim * dim, dim * dim));
    TINYAI_RETURN_IF_ERROR(put(o_wk + l * kv_dim * dim, kv_dim * dim));
    TINYAI_RETURN_IF_ERROR(put(o_wv + l * kv_dim * dim, kv_dim * dim));
    TINYAI_RETURN_IF_ERROR(put(o_wo + l * dim * dim, dim * dim));
    TINYAI_RETURN_IF_ERROR(put(o_rms_ffn + l * dim, dim));
    TINYAI_RETURN_IF_ERROR(put(o_w1 + l * hidden * dim, hidden * dim));
    TINYAI_RETURN_IF_ERROR(put(o_w3 + l * hidden * dim, hidden * dim));
    TINYAI_RETURN_IF_ERROR(put(o_w2 + l * dim * hidden, dim * hidden));
  }
  TINYAI_RETURN_IF_ERROR(put(o_rms_final, dim));
  if (!s.shared_classifier) TINYAI_RETURN_IF_ERROR(put(o_cls, vocab * dim));
  TINYAI_RETURN_IF_ERROR(w.Finish());
  if (shapeOut) *shapeOut = s;
  if (stats) *stats = w.stats();
  return TINYAI_OK;
}

}  // namespace tinyai
