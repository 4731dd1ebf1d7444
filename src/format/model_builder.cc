#include "format/model_builder.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <sys/stat.h>

#include "common/array.h"
#include "common/checked_math.h"
#include "common/half.h"
#include "common/status.h"
#include "format/limits.h"
#include "format/tmai_reader.h"
#include "format/tmai_writer.h"
#include "loader/mapped_model.h"
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
    TINYAI_RETURN_IF_ERROR(w->WriteValues(chunk.data(), m));
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
  // Pieces so far, for the duplicate test: a hash set keeps the whole
  // vocabulary linear (a scan of every earlier piece made it quadratic).
  std::unordered_set<std::string> seen(pieces->begin(), pieces->end());
  pieces->reserve(static_cast<size_t>(vocab));
  scores->reserve(static_cast<size_t>(vocab));
  int32_t rank = 0;
  while (static_cast<int32_t>(pieces->size()) < vocab) {
    std::string syl = std::string(kOnsets[SplitMix64(&rng) % 16]) + kVowels[SplitMix64(&rng) % 8] +
                      kCodas[SplitMix64(&rng) % 8];
    std::string piece = (rank % 2 == 0 ? " " : "") + syl;
    ++rank;
    if (seen.count(piece)) {
      // Keep every piece unique: syllables hold no digits, so the rank
      // suffix makes it a piece no other has.
      piece += std::to_string(rank);
    }
    seen.insert(piece);
    pieces->push_back(piece);
    scores->push_back(-static_cast<float>(rank));
  }
}

// The smallest vocabulary of a synthetic model: <unk>, BOS, EOS, 256 byte
// pieces and the dummy prefix.
constexpr int32_t kMinSyntheticVocab = 260;

// ---- Dense networks ----

constexpr uint64_t kMaxDenseWidth = limits::kMaxDenseWidth;  // floats per row of any layer's input or output

bool IsDenseActivation(const std::string& a) { return a == "none" || a == "relu" || a == "tanh"; }

bool IsLayerNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
}

// Digits only (no sign, no spaces), at most max.
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

// Each layer name of def and the first layer that has it (one hash lookup
// per name keeps a definition of many layers linear).
using DenseNameIndex = std::unordered_map<std::string, size_t>;
DenseNameIndex IndexDenseNames(const DenseNetDef& def) {
  DenseNameIndex index;
  index.reserve(def.layers.size());
  for (size_t l = 0; l < def.layers.size(); ++l) index.emplace(def.layers[l].name, l);
  return index;
}

// Layer l of def, checked against the others: a valid unique name, a width,
// an activation, and inputs that name the network input or earlier layers,
// each at most once, at most limits::kMaxDenseInputs of them, all of one
// width. Fills *producers (layer indices, -1 for the network input) and *in
// (the input width); on failure returns false with *why.
bool ResolveDenseLayer(const DenseNetDef& def, const DenseNameIndex& index, size_t l,
                       std::vector<int32_t>* producers, int32_t* in, std::string* why) {
  const DenseLayerDef& d = def.layers[l];
  const std::string quoted = "'" + d.name + "'";
  if (d.name.empty()) {
    *why = "a layer needs a name";
    return false;
  }
  for (char c : d.name) {
    if (!IsLayerNameChar(c)) {
      *why = "layer name " + quoted + " may hold only letters, digits, '_', '-' and '.'";
      return false;
    }
  }
  if (d.name == "input") {
    *why = "'input' names the network input; it cannot name a layer";
    return false;
  }
  const auto first = index.find(d.name);
  if (first != index.end() && first->second < l) {
    *why = "duplicate layer name " + quoted + " (layer " + std::to_string(first->second) + " has it)";
    return false;
  }
  if (d.out <= 0 || static_cast<uint64_t>(d.out) > kMaxDenseWidth) {
    *why = "layer " + quoted + ": out=" + std::to_string(d.out) + " is not in 1.." + std::to_string(kMaxDenseWidth);
    return false;
  }
  if (!d.activation.empty() && !IsDenseActivation(d.activation)) {
    *why = "layer " + quoted + ": unknown activation '" + d.activation + "' (none, relu or tanh)";
    return false;
  }
  producers->clear();
  std::vector<std::string> names = d.inputs;
  if (names.empty()) names.push_back(l == 0 ? std::string("input") : def.layers[l - 1].name);
  *in = 0;
  std::string first_input;
  for (const std::string& n : names) {
    int32_t p = -2;
    if (n == "input") {
      p = -1;
    } else {
      const auto it = index.find(n);
      if (it != index.end()) p = static_cast<int32_t>(it->second);
      if (p == -2) {
        *why = "layer " + quoted + ": input '" + n + "' names no layer";
        return false;
      }
      if (static_cast<size_t>(p) >= l) {
        *why = "layer " + quoted + ": input '" + n + "' is " +
               (static_cast<size_t>(p) == l ? std::string("the layer itself") : "a later layer (layer " + std::to_string(p) + ")") +
               "; a layer reads only the input and earlier layers";
        return false;
      }
    }
    for (size_t k = 0; k < producers->size(); ++k) {
      if ((*producers)[k] == p) {
        *why = "layer " + quoted + ": input '" + n + "' is named twice; each input at most once (to add a layer's "
               "output twice, give it a layer of its own)";
        return false;
      }
    }
    if (producers->size() >= static_cast<size_t>(limits::kMaxDenseInputs)) {
      *why = "layer " + quoted + ": " + std::to_string(names.size()) + " inputs; a layer sums at most " +
             std::to_string(limits::kMaxDenseInputs);
      return false;
    }
    const int32_t width = p < 0 ? def.input_dim : def.layers[static_cast<size_t>(p)].out;
    if (producers->empty()) {
      *in = width;
      first_input = n;
    } else if (width != *in) {
      *why = "layer " + quoted + ": inputs of different widths: '" + first_input + "' is " + std::to_string(*in) +
             " wide, '" + n + "' " + std::to_string(width);
      return false;
    }
    producers->push_back(p);
  }
  return true;
}

// The network's output (the layers no later layer reads, concatenated) is at
// most limits::kMaxDenseOutputWidth floats wide, as the runtime requires.
bool CheckDenseOutputWidth(const DenseNetDef& def, const std::vector<std::vector<int32_t>>& producers,
                           std::string* why) {
  std::vector<bool> read(def.layers.size(), false);
  for (const std::vector<int32_t>& ps : producers) {
    for (int32_t p : ps) {
      if (p >= 0) read[static_cast<size_t>(p)] = true;
    }
  }
  int64_t width = 0;
  for (size_t l = 0; l < def.layers.size(); ++l) width += read[l] ? 0 : def.layers[l].out;
  if (width > limits::kMaxDenseOutputWidth) {
    *why = "the network's output (the layers no later layer reads) is " + std::to_string(width) +
           " floats wide; at most " + std::to_string(limits::kMaxDenseOutputWidth);
    return false;
  }
  return true;
}

// The whole definition (for definitions built in code); *producers and *ins
// receive each layer's resolution.
TinyAIStatus CheckDenseDefinition(const DenseNetDef& def, std::vector<std::vector<int32_t>>* producers,
                                  std::vector<int32_t>* ins) {
  if (def.input_dim <= 0 || static_cast<uint64_t>(def.input_dim) > kMaxDenseWidth) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "dense network: input %d is not in 1..%llu", def.input_dim,
                    static_cast<unsigned long long>(kMaxDenseWidth));
  }
  if (def.layers.empty() || def.layers.size() > limits::kMaxDenseLayers) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "dense network: %zu layers; it needs 1..%u", def.layers.size(),
                    limits::kMaxDenseLayers);
  }
  producers->assign(def.layers.size(), std::vector<int32_t>());
  ins->assign(def.layers.size(), 0);
  const DenseNameIndex index = IndexDenseNames(def);
  for (size_t l = 0; l < def.layers.size(); ++l) {
    std::string why;
    if (!ResolveDenseLayer(def, index, l, &(*producers)[l], &(*ins)[l], &why)) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "dense network: layer %zu: %s", l, why.c_str());
    }
  }
  std::string why;
  if (!CheckDenseOutputWidth(def, *producers, &why)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "dense network: %s", why.c_str());
  }
  return TINYAI_OK;
}

}  // namespace

bool SameFile(const char* a, const char* b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

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

TinyAIStatus CheckWriteOptions(const WriteOptions& options) {
  if (options.matrix_dtype != TINYAI_DTYPE_F32 && options.matrix_dtype != TINYAI_DTYPE_F16) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "matrices can be written as f32 or f16, not %s",
                    tinyaiDTypeName(options.matrix_dtype));
  }
  return TINYAI_OK;
}

void DeclareLlamaTensors(TmaiWriter* w, const LlamaShape& s, const TensorReshape& reshape, TinyAIDType matrix_dtype) {
  const uint64_t dim = static_cast<uint64_t>(s.dim), hidden = static_cast<uint64_t>(s.hidden_dim);
  const uint64_t kv_dim = dim * static_cast<uint64_t>(s.kv_heads) / static_cast<uint64_t>(s.heads);
  const uint64_t vocab = static_cast<uint64_t>(s.vocab_size);
  auto add = [&](const std::string& name, TinyAITensorRole role, std::vector<uint64_t> shape) {
    if (reshape) reshape(name, &shape);
    w->AddTensor(name, role, shape.size() == 2 ? matrix_dtype : TINYAI_DTYPE_F32, shape);
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
  // What the runtime runs (format/limits.h; model/llama.cc refuses the same).
  struct Field {
    const char* key;
    int32_t value, min, max;
  } fields[] = {
      {"llama.dim", s.dim, 1, limits::kMaxLlamaDim},
      {"llama.hidden_dim", s.hidden_dim, 1, limits::kMaxLlamaHiddenDim},
      {"llama.layers", s.layers, 1, limits::kMaxLlamaLayers},
      {"llama.heads", s.heads, 1, limits::kMaxLlamaHeads},
      {"llama.kv_heads", s.kv_heads, 1, limits::kMaxLlamaHeads},
      {"llama.vocab_size", s.vocab_size, limits::kMinVocab, limits::kMaxVocab},
      {"llama.seq_len", s.seq_len, 1, limits::kMaxSeqLen},
  };
  for (const Field& f : fields) {
    if (f.value < f.min || f.value > f.max) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "%s %d is outside what the runtime runs (%d..%d)", f.key, f.value, f.min,
                      f.max);
    }
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

TinyAIStatus ParseSyntheticSpec(const std::string& spec, LlamaShape* out) {
  LlamaShape s;
  s.kv_heads = -1;
  std::unordered_set<std::string> seen;
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
    static const char* kKeys[] = {"dim", "hidden", "layers", "heads", "kv_heads", "vocab", "seq_len", "seed", "shared"};
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                      "unknown spec key '%s' (dim, hidden, layers, heads, kv_heads, vocab, seq_len, seed, shared)",
                      key.c_str());
    }
    if (!seen.insert(key).second) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "spec key '%s' is given twice", key.c_str());
    // Digits only; every key but seed is an int32 (the limits are checked
    // by CheckShape, naming the field), shared is 0 or 1.
    const uint64_t max = key == "seed" ? UINT64_MAX : key == "shared" ? 1 : static_cast<uint64_t>(INT32_MAX);
    uint64_t v = 0;
    if (!ParseDecimal(value, max, &v)) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "spec value '%s' for '%s' is not a number in 0..%llu",
                      value.c_str(), key.c_str(), static_cast<unsigned long long>(max));
    }
    int32_t iv = static_cast<int32_t>(v);
    if (key == "dim") s.dim = iv;
    else if (key == "hidden") s.hidden_dim = iv;
    else if (key == "layers") s.layers = iv;
    else if (key == "heads") s.heads = iv;
    else if (key == "kv_heads") s.kv_heads = iv;
    else if (key == "vocab") s.vocab_size = iv;
    else if (key == "seq_len") s.seq_len = iv;
    else if (key == "seed") s.seed = v;
    else s.shared_classifier = v != 0;
  }
  if (s.kv_heads < 0) s.kv_heads = s.heads;
  TINYAI_RETURN_IF_ERROR(CheckShape(s, true));
  *out = s;
  return TINYAI_OK;
}

TinyAIStatus WriteSyntheticModel(const LlamaShape& s, const char* outPath, const WriteOptions& options,
                                 TmaiWriteStats* stats) {
  TINYAI_RETURN_IF_ERROR(CheckShape(s, true));
  TINYAI_RETURN_IF_ERROR(CheckWriteOptions(options));
  TmaiWriter w;
  w.SetCompression(options.codec, options.level);
  AddLlamaMetadata(&w, s, "llama", "synthetic", "tinyai-convert --synthetic");
  w.AddMetaInt("general.seed", static_cast<int64_t>(s.seed));
  std::vector<std::string> pieces;
  std::vector<float> scores;
  SyntheticTokenizer(s.vocab_size, s.seed, &pieces, &scores);
  TINYAI_RETURN_IF_ERROR(CheckTokenizerPieces(pieces, scores));
  AddTokenizerMetadata(&w, pieces, scores);
  DeclareLlamaTensors(&w, s, nullptr, options.matrix_dtype);
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
  TINYAI_RETURN_IF_ERROR(CheckWriteOptions(options));
  // Writing over an input would truncate the mapped checkpoint under the
  // reader (SIGBUS) and destroy it: refuse before anything is written.
  const char* inputs[] = {checkpointPath, tokenizerPath};
  const char* what[] = {"checkpoint", "tokenizer"};
  for (int i = 0; i < 2; ++i) {
    if (SameFile(outPath, inputs[i])) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "the output '%s' is the %s '%s' (the same file); refusing to overwrite an input",
                      outPath, what[i], inputs[i]);
    }
  }
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
  const TinyAIStatus shape_status = CheckShape(s, false);
  if (shape_status == TINYAI_ERR_UNSUPPORTED) {
    // A llama2.c shape, beyond what the runtime runs (format/limits.h).
    return AddErrorContext(shape_status, "'%s': ", checkpointPath);
  }
  if (shape_status != TINYAI_OK) {
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
  AddLlamaMetadata(&w, s, "llama", options.name.empty() ? "llama2.c checkpoint" : options.name,
                   "tinyai-convert --from llama2c");
  std::vector<std::string> pieces;
  std::vector<float> scores;
  for (int32_t i = 0; i < s.vocab_size; ++i) {
    pieces.emplace_back(vocab_data.pieces[static_cast<size_t>(i)].data, vocab_data.pieces[static_cast<size_t>(i)].size);
    scores.push_back(vocab_data.scores[static_cast<size_t>(i)]);
  }
  // A piece the runtime refuses (an empty one, which llama2.c files can
  // hold) is refused here, before anything is written.
  ts = CheckTokenizerPieces(pieces, scores);
  if (ts != TINYAI_OK) return AddErrorContext(ts, "'%s': ", tokenizerPath);
  AddTokenizerMetadata(&w, pieces, scores);
  DeclareLlamaTensors(&w, s, nullptr, options.matrix_dtype);
  TINYAI_RETURN_IF_ERROR(w.Open(outPath));
  auto put = [&](uint64_t offset, uint64_t count) { return w.WriteValues(f + offset, static_cast<size_t>(count)); };
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

namespace {

// The input model's tensors are read through the loader with this cap on
// its weight cache, so converting holds one row block at a time, not a model.
constexpr uint64_t kReencodeCacheCap = 64u << 20;

void CopyMetadata(const TmaiReader& r, const WriteOptions& options, TmaiWriter* w) {
  for (const MetaEntry& m : r.metadata()) {
    const std::string key(m.key.data, m.key.size);
    switch (m.type) {
      case tmai::kMetaInt:
        w->AddMetaInt(key, m.int_value);
        break;
      case tmai::kMetaFloat:
        w->AddMetaFloat(key, m.float_value);
        break;
      case tmai::kMetaString:
        w->AddMetaString(key, key == "general.name" && !options.name.empty()
                                  ? options.name
                                  : std::string(reinterpret_cast<const char*>(m.payload), m.count));
        break;
      case tmai::kMetaFloatArray: {
        std::vector<float> v(m.count);
        if (m.count > 0) TmaiReader::CopyFloatArray(m, v.data());
        w->AddMetaFloatArray(key, v);
        break;
      }
      case tmai::kMetaStringArray: {
        std::vector<StringView> views(m.count);
        if (m.count > 0) TmaiReader::GetStringArray(m, views.data());
        std::vector<std::string> v;
        v.reserve(m.count);
        for (const StringView& sv : views) v.emplace_back(sv.data, sv.size);
        w->AddMetaStringArray(key, v);
        break;
      }
      default:
        break;  // the reader refuses other types
    }
  }
}

}  // namespace

TinyAIStatus ReencodeModel(const char* inPath, const char* outPath, const WriteOptions& options, bool keep_dtypes,
                           TmaiWriteStats* stats) {
  TINYAI_RETURN_IF_ERROR(CheckWriteOptions(options));
  if (SameFile(outPath, inPath)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "the output '%s' is the input '%s' (the same file); refusing to overwrite an input", outPath, inPath);
  }
  TinyAIMmapConfig cfg = tinyaiCreateDefaultMmapConfig();
  cfg.maxCacheSize = static_cast<size_t>(kReencodeCacheCap);
  TinyAIMappedModel* model = tinyaiOpenMappedModel(inPath, &cfg);
  if (model == nullptr) return tinyaiGetLastError();
  struct Close {
    TinyAIMappedModel* m;
    ~Close() { tinyaiCloseMappedModel(m); }
  } close{model};
  const TmaiReader& r = model->reader();
  const auto tensors = r.tensors();
  auto dtype_of = [&](const tmai::TensorEntry& e) {
    const bool matrix = e.ndims == 2 && (e.dtype == TINYAI_DTYPE_F32 || e.dtype == TINYAI_DTYPE_F16);
    return matrix && !keep_dtypes ? options.matrix_dtype : static_cast<TinyAIDType>(e.dtype);
  };
  TmaiWriter w;
  w.SetCompression(options.codec, options.level);
  CopyMetadata(r, options, &w);
  if (!options.name.empty() && r.FindMeta("general.name") == nullptr) w.AddMetaString("general.name", options.name);
  for (const tmai::LayerEntry& l : r.layers()) {
    w.AddLayer(static_cast<TinyAILayerKind>(l.kind), l.block_index);
    for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
      const tmai::TensorEntry& e = tensors[t];
      w.AddTensor(e.name, static_cast<TinyAITensorRole>(e.role), dtype_of(e),
                  std::vector<uint64_t>(e.shape, e.shape + e.ndims));
    }
  }
  TINYAI_RETURN_IF_ERROR(w.Open(outPath));
  std::vector<float> values;
  for (const tmai::LayerEntry& l : r.layers()) {
    for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
      const tmai::TensorEntry& e = tensors[t];
      const int32_t tensor = static_cast<int32_t>(t);
      const uint64_t rows = model->blocks().rows(tensor), row_bytes = model->blocks().row_bytes(tensor);
      const bool same = dtype_of(e) == e.dtype;
      for (uint64_t row = 0; row < rows;) {
        const uint8_t* p = nullptr;
        uint64_t got = 0;
        int32_t block = -1;
        TINYAI_RETURN_IF_ERROR(model->AcquireRows(tensor, row, &p, &got, &block));
        const size_t bytes = static_cast<size_t>(got * row_bytes);
        TinyAIStatus s;
        if (same) {
          s = w.Write(p, bytes);
        } else if (e.dtype == TINYAI_DTYPE_F32) {
          values.resize(bytes / sizeof(float));
          std::memcpy(values.data(), p, bytes);
          s = w.WriteValues(values.data(), values.size());
        } else {  // f16 to f32
          values.resize(bytes / 2);
          for (size_t i = 0; i < values.size(); ++i) {
            uint16_t h;
            std::memcpy(&h, p + 2 * i, sizeof h);
            values[i] = HalfToFloat(h);
          }
          s = w.WriteValues(values.data(), values.size());
        }
        const TinyAIStatus released = model->ReleaseBlock(block);
        TINYAI_RETURN_IF_ERROR(s);
        TINYAI_RETURN_IF_ERROR(released);
        row += got;
      }
    }
  }
  TINYAI_RETURN_IF_ERROR(w.Finish());
  if (stats) *stats = w.stats();
  return TINYAI_OK;
}

TinyAIStatus ParseDenseDefinition(const std::string& text, DenseNetDef* out) {
  DenseNetDef def;
  bool have_name = false, have_input = false, have_seed = false;
  std::vector<int> layer_lines;  // the line of each layer
  int line_no = 0;
  size_t pos = 0;
  auto fail = [&](const std::string& why) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "line %d: %s", line_no, why.c_str());
  };
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::vector<std::string> tokens;
    for (size_t i = 0; i < line.size();) {
      if (std::isspace(static_cast<unsigned char>(line[i]))) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
      tokens.push_back(line.substr(i, j - i));
      i = j;
    }
    if (tokens.empty()) continue;
    const std::string& directive = tokens[0];
    if (directive == "name") {
      if (have_name) return fail("'name' is given twice");
      if (tokens.size() != 2) return fail("'name' takes one word, got " + std::to_string(tokens.size() - 1));
      def.name = tokens[1];
      have_name = true;
    } else if (directive == "input" || directive == "seed") {
      bool& seen = directive == "input" ? have_input : have_seed;
      if (seen) return fail("'" + directive + "' is given twice");
      if (tokens.size() != 2) return fail("'" + directive + "' takes one number, got " + std::to_string(tokens.size() - 1) + " values");
      uint64_t v = 0;
      if (directive == "input") {
        if (!ParseDecimal(tokens[1], kMaxDenseWidth, &v) || v == 0) {
          return fail("input '" + tokens[1] + "' is not a number in 1.." + std::to_string(kMaxDenseWidth));
        }
        def.input_dim = static_cast<int32_t>(v);
      } else {
        if (!ParseDecimal(tokens[1], UINT64_MAX, &v)) return fail("seed '" + tokens[1] + "' is not a number");
        def.seed = v;
      }
      seen = true;
    } else if (directive == "layer") {
      if (!have_input) return fail("missing 'input' before the first layer (say 'input N': floats per input row)");
      if (tokens.size() < 2 || tokens[1].find('=') != std::string::npos) return fail("'layer' needs a name before its keys");
      DenseLayerDef d;
      d.name = tokens[1];
      d.activation = "none";
      bool have_out = false, have_act = false, have_bias = false, have_inputs = false;
      for (size_t t = 2; t < tokens.size(); ++t) {
        const std::string& item = tokens[t];
        size_t eq = item.find('=');
        if (eq == std::string::npos) return fail("layer '" + d.name + "': '" + item + "' is not key=value");
        const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
        bool* seen = key == "out" ? &have_out : key == "act" ? &have_act : key == "bias" ? &have_bias
                   : key == "inputs" ? &have_inputs : nullptr;
        if (!seen) return fail("layer '" + d.name + "': unknown key '" + key + "' (out, act, inputs, bias)");
        if (*seen) return fail("layer '" + d.name + "': '" + key + "' is given twice");
        *seen = true;
        if (key == "out") {
          uint64_t v = 0;
          if (!ParseDecimal(value, kMaxDenseWidth, &v) || v == 0) {
            return fail("layer '" + d.name + "': out '" + value + "' is not a number in 1.." + std::to_string(kMaxDenseWidth));
          }
          d.out = static_cast<int32_t>(v);
        } else if (key == "act") {
          if (!IsDenseActivation(value)) {
            return fail("layer '" + d.name + "': unknown activation '" + value + "' (none, relu or tanh)");
          }
          d.activation = value;
        } else if (key == "bias") {
          if (value != "0" && value != "1") return fail("layer '" + d.name + "': bias '" + value + "' is not 0 or 1");
          d.bias = value == "1";
        } else {
          size_t p = 0;
          while (true) {
            size_t comma = value.find(',', p);
            if (comma == std::string::npos) comma = value.size();
            std::string name = value.substr(p, comma - p);
            if (name.empty()) return fail("layer '" + d.name + "': inputs '" + value + "' has an empty name");
            d.inputs.push_back(name);
            if (comma == value.size()) break;
            p = comma + 1;
          }
        }
      }
      if (!have_out) return fail("layer '" + d.name + "' has no out=N");
      def.layers.push_back(d);
      layer_lines.push_back(line_no);
    } else {
      return fail("unknown directive '" + directive + "' (name, input, seed, layer)");
    }
  }
  if (line_no == 0) line_no = 1;
  if (!have_input) return fail("missing 'input' (floats per input row)");
  if (def.layers.empty()) return fail("the definition has no layers");
  if (def.layers.size() > limits::kMaxDenseLayers) {
    return fail("the definition has " + std::to_string(def.layers.size()) + " layers; at most " +
                std::to_string(limits::kMaxDenseLayers));
  }
  const DenseNameIndex index = IndexDenseNames(def);
  std::vector<std::vector<int32_t>> producers(def.layers.size());
  for (size_t l = 0; l < def.layers.size(); ++l) {
    int32_t in = 0;
    std::string why;
    if (!ResolveDenseLayer(def, index, l, &producers[l], &in, &why)) {
      line_no = layer_lines[l];
      return fail(why);
    }
  }
  std::string why;
  if (!CheckDenseOutputWidth(def, producers, &why)) return fail(why);
  *out = def;
  return TINYAI_OK;
}

TinyAIStatus WriteDenseModel(const DenseNetDef& def, const char* outPath, const WriteOptions& options,
                             TmaiWriteStats* stats) {
  std::vector<std::vector<int32_t>> producers;
  std::vector<int32_t> ins;
  TINYAI_RETURN_IF_ERROR(CheckDenseDefinition(def, &producers, &ins));
  TINYAI_RETURN_IF_ERROR(CheckWriteOptions(options));
  TmaiWriter w;
  w.SetCompression(options.codec, options.level);
  w.AddMetaString("general.architecture", "dense");
  if (!def.name.empty()) w.AddMetaString("general.name", def.name);
  w.AddMetaString("general.source", "tinyai-convert --dense");
  w.AddMetaInt("general.seed", static_cast<int64_t>(def.seed));
  w.AddMetaInt("dense.input_dim", def.input_dim);
  w.AddMetaInt("dense.layers", static_cast<int64_t>(def.layers.size()));
  for (size_t l = 0; l < def.layers.size(); ++l) {
    const DenseLayerDef& d = def.layers[l];
    const std::string p = "dense." + std::to_string(l) + ".";
    std::string inputs;
    for (int32_t q : producers[l]) inputs += (inputs.empty() ? "" : ",") + std::to_string(q);
    w.AddMetaString(p + "activation", d.activation.empty() ? std::string("none") : d.activation);
    w.AddMetaString(p + "inputs", inputs);
    w.AddMetaString(p + "name", d.name);
  }
  for (size_t l = 0; l < def.layers.size(); ++l) {
    const DenseLayerDef& d = def.layers[l];
    const std::string p = "dense." + std::to_string(l) + ".";
    w.AddLayer(TINYAI_LAYER_DENSE, static_cast<int32_t>(l));
    w.AddTensor(p + "weight", TINYAI_ROLE_DENSE_WEIGHT, options.matrix_dtype,
                {static_cast<uint64_t>(d.out), static_cast<uint64_t>(ins[l])});
    if (d.bias) w.AddTensor(p + "bias", TINYAI_ROLE_DENSE_BIAS, TINYAI_DTYPE_F32, {static_cast<uint64_t>(d.out)});
  }
  TINYAI_RETURN_IF_ERROR(w.Open(outPath));
  uint64_t rng = def.seed;
  for (size_t l = 0; l < def.layers.size(); ++l) {
    const DenseLayerDef& d = def.layers[l];
    const uint64_t out = static_cast<uint64_t>(d.out), in = static_cast<uint64_t>(ins[l]);
    TINYAI_RETURN_IF_ERROR(WriteRandom(&w, out * in, std::sqrt(3.0f / static_cast<float>(in)), 0.0f, &rng));
    if (d.bias) TINYAI_RETURN_IF_ERROR(WriteRandom(&w, out, 0.1f, 0.0f, &rng));
  }
  TINYAI_RETURN_IF_ERROR(w.Finish());
  if (stats) *stats = w.stats();
  return TINYAI_OK;
}

}  // namespace tinyai
