#include "import/hf_import.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#if TINYAI_WITH_SENTENCEPIECE
#include <sentencepiece_processor.h>
#endif

#include "common/half.h"
#include "common/printable.h"
#include "common/status.h"
#include "format/tmai_writer.h"
#include "import/hf_vocab.h"
#include "import/json.h"
#include "import/safetensors.h"
#include "port/port.h"
#include "text/tokenizer.h"

namespace tinyai {

bool SentencePieceAvailable() { return TINYAI_WITH_SENTENCEPIECE != 0; }

namespace {

constexpr size_t kMaxConfigBytes = 1u << 20;  // config.json: about 1 KB in practice
constexpr size_t kMaxConfigValues = 1u << 14;
constexpr size_t kMaxIndexBytes = 16u << 20;  // the index: about 1 KB per 10 tensors
constexpr size_t kMaxIndexValues = 1u << 18;  // two a tensor: a 4,096-layer LLaMA has about 37,000
constexpr uint64_t kMaxTokenizerBytes = 64u << 20;  // LLaMA's tokenizer.model: 0.5 MB
constexpr size_t kMaxTokenizerConfigBytes = 16u << 20;  // tokenizer_config.json: a few KB (a chat template)
constexpr size_t kMaxTokenizerConfigValues = 1u << 18;

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string BaseName(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string Folder(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

bool EndsWith(const std::string& s, const char* tail) {
  const size_t n = std::strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

// path with symbolic links, "." and ".." resolved; false (errno set) when
// it does not resolve.
bool RealPath(const std::string& path, std::string* out) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) return false;
  *out = real;
  std::free(real);
  return true;
}

bool Under(const std::string& path, const std::string& root) {
  return path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
         (root == "/" || path[root.size()] == '/');
}

// Where the importer reads `name` of the checkpoint's folder from, when it
// picks the file itself (a shard the index names, model.safetensors, the
// index, config.json, tokenizer.model, tokenizer_config.json): the file,
// its symbolic links followed, must lie inside the folder - or, in the
// Hugging Face hub's cache, where a snapshot folder .../snapshots/REV holds
// links to .../blobs/HASH, inside that repository's blobs folder. A file
// that leads elsewhere is refused (TINYAI_ERR_OUT_OF_BOUNDS, naming it and
// where it leads): a checkpoint never makes TinyAI read a file the user did
// not give it. A file that does not exist passes (the open that follows
// says so). *path is folder/name.
TinyAIStatus ResolveInside(const std::string& folder, const std::string& name, const char* what, std::string* path) {
  const std::string given = folder + "/" + name;
  *path = given;
  std::string root, real;
  if (!RealPath(folder, &root)) {
    return SetError(errno == ENOENT ? TINYAI_ERR_FILE_NOT_FOUND : TINYAI_ERR_IO, "'%s': cannot resolve the "
                    "checkpoint's folder: %s", folder.c_str(), std::strerror(errno));
  }
  if (!RealPath(given, &real)) {
    if (errno == ENOENT || errno == ENOTDIR) return TINYAI_OK;
    return SetError(TINYAI_ERR_IO, "'%s': cannot resolve %s: %s", given.c_str(), what, std::strerror(errno));
  }
  if (Under(real, root)) return TINYAI_OK;
  const std::string parent = Folder(root);
  std::string blobs;
  if (BaseName(parent) == "snapshots" && RealPath(Folder(parent) + "/blobs", &blobs) && Under(real, blobs)) {
    return TINYAI_OK;
  }
  return SetError(TINYAI_ERR_OUT_OF_BOUNDS, "'%s': %s '%s' leads to '%s', outside the checkpoint's folder '%s': "
                  "TinyAI reads only the checkpoint's own files (a symbolic link out of its folder is refused)",
                  folder.c_str(), what, Printable(name).c_str(), real.c_str(), root.c_str());
}

// One weights file, mapped and parsed.
struct Shard {
  std::string name;  // as the index names it (the file's name)
  std::string path;
  port::MappedFile map;
  safetensors::File file;
  ~Shard() { port::UnmapFile(&map); }
};

// Where the weights are: the shards and each tensor's.
struct Weights {
  std::vector<std::unique_ptr<Shard>> shards;
  std::map<std::string, std::pair<const Shard*, const safetensors::Tensor*>> tensors;
};

TinyAIStatus OpenShard(const std::string& path, const std::string& name, Weights* w) {
  std::unique_ptr<Shard> shard(new Shard());
  shard->name = name;
  shard->path = path;
  TINYAI_RETURN_IF_ERROR(port::MapFile(path.c_str(), &shard->map));
  TINYAI_RETURN_IF_ERROR(safetensors::Parse(shard->map.data, shard->map.size, shard->map.size, path, &shard->file));
  // The header's pages were read once; the data is read tensor by tensor.
  port::AdviseRange(shard->map.data, static_cast<size_t>(shard->file.data_offset), port::Advice::kDontNeed);
  w->shards.push_back(std::move(shard));
  return TINYAI_OK;
}

// The weights of inPath: a folder, a .safetensors file or an index .json.
TinyAIStatus OpenWeights(const std::string& in, std::string* folder, std::string* index_path, Weights* w) {
  std::string& index = *index_path;
  if (IsDirectory(in)) {
    *folder = in;
    if (Exists(in + "/model.safetensors.index.json")) {
      TINYAI_RETURN_IF_ERROR(ResolveInside(in, "model.safetensors.index.json", "the index", &index));
    } else if (Exists(in + "/model.safetensors")) {
      std::string path;
      TINYAI_RETURN_IF_ERROR(ResolveInside(in, "model.safetensors", "the weights", &path));
      TINYAI_RETURN_IF_ERROR(OpenShard(path, "model.safetensors", w));
    } else {
      return SetError(TINYAI_ERR_FILE_NOT_FOUND, "'%s' holds neither model.safetensors nor "
                      "model.safetensors.index.json", in.c_str());
    }
  } else if (EndsWith(in, ".json")) {
    *folder = Folder(in);
    index = in;
  } else {
    *folder = Folder(in);
    TINYAI_RETURN_IF_ERROR(OpenShard(in, BaseName(in), w));
  }
  if (!index.empty()) {
    nlohmann::json j;
    TINYAI_RETURN_IF_ERROR(ReadJsonFile(index, kMaxIndexBytes, kMaxIndexValues, &j));
    if (!j.is_object()) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s' is %s, not a JSON object", index.c_str(), JsonKind(j));
    auto map = j.find("weight_map");
    if (map == j.end() || !map->is_object()) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': no weight_map object", index.c_str());
    }
    std::map<std::string, std::string> wanted;  // tensor -> shard
    std::map<std::string, bool> files;
    for (auto it = map->begin(); it != map->end(); ++it) {
      if (!it.value().is_string()) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': weight_map '%s' is %s, not a file name", index.c_str(),
                        Printable(it.key()).c_str(), JsonKind(it.value()));
      }
      const std::string& file = it.value().get_ref<const std::string&>();
      if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos ||
          file.find('\0') != std::string::npos) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': weight_map '%s' names '%s', not a file in the checkpoint's folder",
                        index.c_str(), Printable(it.key()).c_str(), Printable(file).c_str());
      }
      wanted[it.key()] = file;
      files[file] = true;
    }
    for (const auto& f : files) {
      std::string path;
      TINYAI_RETURN_IF_ERROR(ResolveInside(*folder, f.first, "the shard", &path));
      TINYAI_RETURN_IF_ERROR(OpenShard(path, f.first, w));
    }
    for (const auto& shard : w->shards) {
      for (const safetensors::Tensor& t : shard->file.tensors) {
        auto it = wanted.find(t.name);
        if (it == wanted.end() || it->second != shard->name) {
          return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' is in %s, which the index '%s' %s", shard->path.c_str(),
                          Printable(t.name).c_str(), shard->name.c_str(), index.c_str(),
                          it == wanted.end() ? "does not name" : ("places in " + it->second).c_str());
        }
      }
    }
    for (const auto& t : wanted) {
      bool found = false;
      for (const auto& shard : w->shards) found |= shard->name == t.second && shard->file.Find(t.first) != nullptr;
      if (!found) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' is not in %s", index.c_str(),
                        Printable(t.first).c_str(), t.second.c_str());
      }
    }
  }
  for (const auto& shard : w->shards) {
    for (const safetensors::Tensor& t : shard->file.tensors) {
      auto inserted = w->tensors.emplace(t.name, std::make_pair(shard.get(), &t));
      if (!inserted.second) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "tensor '%s' is in both '%s' and '%s'", Printable(t.name).c_str(),
                        inserted.first->second.first->path.c_str(), shard->path.c_str());
      }
    }
  }
  return TINYAI_OK;
}

// The hyper-parameters from config.json.
struct Config {
  LlamaHyperParams params;
  bool tied = false;
  bool has_bos = false, has_eos = false;
  uint64_t bos = 0, eos = 0;
  std::string name;
  std::vector<float> rope_freq_factors;  // rope_scaling llama3's, per pair (empty: none)
};

// config.json's rope_scaling, as transformers reads it
// (modeling_rope_utils.py): null or absent, or rope_type (older files:
// type) "default", is no scaling; "linear" divides positions by its factor
// (LlamaLinearScalingRotaryEmbedding), which the runtime computes
// (llama.rope_linear_factor); "llama3" scales each frequency by its
// wavelength (transformers' _compute_llama3_parameters, as llama.cpp's
// converter writes rope_freqs.weight), recorded per pair as
// llama.rope_freq_factors; the other types (dynamic, yarn, longrope) change
// the frequencies in ways the runtime does not compute: refused by name.
TinyAIStatus ReadRopeScaling(const nlohmann::json& j, const std::string& path, const LlamaHyperParams& s, float* factor,
                             std::vector<float>* freq_factors) {
  *factor = 1.0f;
  freq_factors->clear();
  auto scaling = j.find("rope_scaling");
  if (scaling == j.end() || scaling->is_null()) return TINYAI_OK;
  if (!scaling->is_object()) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': rope_scaling is %s, not an object or null", path.c_str(),
                    JsonKind(*scaling));
  }
  std::string type;
  bool found = false;
  TINYAI_RETURN_IF_ERROR(JsonString(*scaling, "rope_type", path, &type, &found));
  if (!found) TINYAI_RETURN_IF_ERROR(JsonString(*scaling, "type", path, &type, &found));
  if (!found) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': rope_scaling has no rope_type", path.c_str());
  if (type == "default") return TINYAI_OK;
  if (type == "llama3") {
    float f = 0.0f, low = 0.0f, high = 0.0f, original = 0.0f;
    TINYAI_RETURN_IF_ERROR(JsonFloat(*scaling, "factor", path, &f, nullptr));
    TINYAI_RETURN_IF_ERROR(JsonFloat(*scaling, "low_freq_factor", path, &low, nullptr));
    TINYAI_RETURN_IF_ERROR(JsonFloat(*scaling, "high_freq_factor", path, &high, nullptr));
    TINYAI_RETURN_IF_ERROR(JsonFloat(*scaling, "original_max_position_embeddings", path, &original, nullptr));
    if (!(f >= 1.0f) || !(low > 0.0f) || !(high > low) || !(original >= 1.0f) || !std::isfinite(f) ||
        !std::isfinite(high) || !std::isfinite(original) || s.heads <= 0 || s.dim % s.heads != 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': rope_scaling llama3 with factor %g, low_freq_factor %g, "
                      "high_freq_factor %g, original_max_position_embeddings %g: it needs factor >= 1, 0 < low < high "
                      "and a context of at least 1", path.c_str(), static_cast<double>(f), static_cast<double>(low),
                      static_cast<double>(high), static_cast<double>(original));
    }
    const int32_t hs = s.dim / s.heads;
    const double low_wavelen = original / low, high_wavelen = original / high;
    for (int32_t i = 0; i < hs / 2; ++i) {
      const double freq = 1.0 / std::pow(static_cast<double>(s.rope_theta), 2.0 * i / hs);
      const double wavelen = 2.0 * 3.14159265358979323846 / freq;
      double v = 1.0;
      if (wavelen > low_wavelen) {
        v = f;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (original / wavelen - low) / (high - low);
        v = 1.0 / ((1.0 - smooth) / f + smooth);
      }
      freq_factors->push_back(static_cast<float>(v));
    }
    return TINYAI_OK;
  }
  if (type != "linear") {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': rope_scaling '%s' changes the rotary frequencies themselves; "
                    "TinyAI runs linear rope scaling or none", path.c_str(), Printable(type).c_str());
  }
  float value = 0.0f;
  TINYAI_RETURN_IF_ERROR(JsonFloat(*scaling, "factor", path, &value, nullptr));
  if (!RopeLinearFactorInRange(value)) {
    return SetError(value > 0.0f ? TINYAI_ERR_UNSUPPORTED : TINYAI_ERR_BAD_FORMAT, "'%s': rope_scaling's factor is "
                    "%g; the runtime runs linear rope scaling factors of 1/65536 .. 65536", path.c_str(),
                    static_cast<double>(value));
  }
  *factor = value;
  return TINYAI_OK;
}

TinyAIStatus ReadConfig(const std::string& path, Config* c) {
  nlohmann::json j;
  TINYAI_RETURN_IF_ERROR(ReadJsonFile(path, kMaxConfigBytes, kMaxConfigValues, &j));
  if (!j.is_object()) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s' is %s, not a JSON object", path.c_str(), JsonKind(j));
  std::string model_type;
  bool found = false;
  TINYAI_RETURN_IF_ERROR(JsonString(j, "model_type", path, &model_type, &found));
  // Qwen2 is LLaMA with biases on q, k and v (Qwen2ForCausalLM).
  c->params.qkv_bias = found && model_type == "qwen2";
  bool llama = found && (model_type == "llama" || model_type == "qwen2");
  auto arch = j.find("architectures");
  if (!found && arch != j.end() && arch->is_array()) {
    for (const nlohmann::json& a : *arch) llama |= a.is_string() && a.get_ref<const std::string&>() == "LlamaForCausalLM";
  }
  if (!llama) {
    // Qwen2 runs from GGUF files (gguf_import.h), which carry its
    // byte-level BPE vocabulary too.
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': model_type '%s'; TinyAI imports LLaMA and Qwen2 checkpoints "
                    "(model_type \"llama\", \"qwen2\")", path.c_str(), found ? Printable(model_type).c_str() : "(none)");
  }
  LlamaHyperParams& s = c->params;
  struct Field {
    const char* key;
    int32_t* out;
    bool required;
  };
  uint64_t v = 0;
  const Field fields[] = {{"hidden_size", &s.dim, true},
                          {"intermediate_size", &s.hidden_dim, true},
                          {"num_hidden_layers", &s.layers, true},
                          {"num_attention_heads", &s.heads, true},
                          {"num_key_value_heads", &s.kv_heads, false},
                          {"max_position_embeddings", &s.seq_len, true},
                          {"vocab_size", &s.vocab_size, true}};
  s.kv_heads = -1;
  for (const Field& f : fields) {
    auto it = j.find(f.key);
    if (!f.required && (it == j.end() || it->is_null())) continue;  // num_key_value_heads: null or absent is heads
    TINYAI_RETURN_IF_ERROR(JsonUint(j, f.key, INT32_MAX, path, &v));
    *f.out = static_cast<int32_t>(v);
  }
  if (s.kv_heads < 0) s.kv_heads = s.heads;
  s.norm_eps = 1e-6f;
  TINYAI_RETURN_IF_ERROR(JsonFloat(j, "rms_norm_eps", path, &s.norm_eps, &found));
  s.rope_theta = 10000.0f;
  TINYAI_RETURN_IF_ERROR(JsonFloat(j, "rope_theta", path, &s.rope_theta, &found));
  if (!(s.norm_eps > 0.0f) || !(s.rope_theta > 0.0f)) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': rms_norm_eps %g and rope_theta %g must be positive", path.c_str(),
                    static_cast<double>(s.norm_eps), static_cast<double>(s.rope_theta));
  }
  TINYAI_RETURN_IF_ERROR(JsonBool(j, "tie_word_embeddings", path, &c->tied, &found));
  std::string act = "silu";
  TINYAI_RETURN_IF_ERROR(JsonString(j, "hidden_act", path, &act, &found));
  if (act != "silu") {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': hidden_act '%s'; TinyAI's LLaMA runs SwiGLU (silu)", path.c_str(),
                    Printable(act).c_str());
  }
  bool window = false;
  TINYAI_RETURN_IF_ERROR(JsonBool(j, "use_sliding_window", path, &window, &found));
  if (window) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': use_sliding_window is true; TinyAI's attention is over the whole "
                    "context", path.c_str());
  }
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    bool bias = false;
    TINYAI_RETURN_IF_ERROR(JsonBool(j, key, path, &bias, &found));
    if (bias) return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': %s is true; TinyAI's LLaMA has no biases", path.c_str(), key);
  }
  TINYAI_RETURN_IF_ERROR(ReadRopeScaling(j, path, s, &s.rope_linear_factor, &c->rope_freq_factors));
  // A quantized checkpoint (bitsandbytes, GPTQ, AWQ, ...) stores other
  // tensors under other names; refused by name before its tensors are.
  auto quantized = j.find("quantization_config");
  if (quantized != j.end() && !quantized->is_null()) {
    std::string method = "?";
    if (quantized->is_object()) TINYAI_RETURN_IF_ERROR(JsonString(*quantized, "quant_method", path, &method, &found));
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': quantization_config is set (quant_method '%s'): a quantized "
                    "checkpoint; TinyAI imports F32, F16 and BF16 weights", path.c_str(), Printable(method).c_str());
  }
  if (s.heads > 0 && s.dim % s.heads == 0) {
    TINYAI_RETURN_IF_ERROR(JsonUint(j, "head_dim", INT32_MAX, path, &v, &found));
    if (found && v != static_cast<uint64_t>(s.dim / s.heads)) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': head_dim %llu is not hidden_size / num_attention_heads (%d)",
                      path.c_str(), static_cast<unsigned long long>(v), s.dim / s.heads);
    }
  }
  TINYAI_RETURN_IF_ERROR(JsonUint(j, "bos_token_id", INT32_MAX, path, &c->bos, &c->has_bos));
  TINYAI_RETURN_IF_ERROR(JsonUint(j, "eos_token_id", INT32_MAX, path, &c->eos, &c->has_eos));
  TINYAI_RETURN_IF_ERROR(JsonString(j, "_name_or_path", path, &c->name, &found));
  return TINYAI_OK;
}

// Texts whose encoding by TinyAI's tokenizer must equal SentencePiece's:
// words, spaces (a model that collapses or strips them normalizes), digits,
// punctuation, a line break, accents, CJK and an emoji (byte fallback).
const char* const kProbeTexts[] = {
    "Hello world",
    "Once upon a time, there was a little girl named Lily.",
    "  two  spaces,\tand a tab",
    "12345 + 678 = 7023",
    "line one\nline two",
    "caf\xC3\xA9 na\xC3\xAFve \xC3\xBC" "ber",
    "\xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x98\x80 <s> </s>",
};

// The vocabulary from tokenizer.model.
struct Vocabulary {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  int32_t bos = 1, eos = 2;
};

TinyAIStatus ReadTokenizer(const std::string& path, Vocabulary* v) {
#if TINYAI_WITH_SENTENCEPIECE
  port::File f;
  TINYAI_RETURN_IF_ERROR(port::OpenFile(path.c_str(), &f));
  if (f.size > kMaxTokenizerBytes) {
    port::CloseFile(&f);
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': %llu bytes; TinyAI reads tokenizer models up to %llu bytes",
                    path.c_str(), static_cast<unsigned long long>(f.size),
                    static_cast<unsigned long long>(kMaxTokenizerBytes));
  }
  std::string bytes(static_cast<size_t>(f.size), '\0');
  TinyAIStatus rs = bytes.empty() ? TINYAI_OK : port::ReadAt(f, 0, &bytes[0], bytes.size(), path.c_str());
  port::CloseFile(&f);
  TINYAI_RETURN_IF_ERROR(rs);
  sentencepiece::SentencePieceProcessor sp;
  const auto loaded = sp.LoadFromSerializedProto(bytes);
  if (!loaded.ok()) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': SentencePiece cannot load it: %s", path.c_str(),
                    loaded.ToString().c_str());
  }
  const int n = sp.GetPieceSize();
  for (int id = 0; id < n; ++id) {
    std::string piece = sp.IdToPiece(id);
    SpacesFromSentencePiece(&piece);
    v->pieces.push_back(piece);
    v->scores.push_back(sp.GetScore(id));
  }
  v->bos = sp.bos_id();
  v->eos = sp.eos_id();
  if (v->bos < 0 || v->eos < 0 || v->bos >= n || v->eos >= n) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': BOS %d or EOS %d is not a token (%d tokens)", path.c_str(), v->bos,
                    v->eos, n);
  }
  TinyAIStatus ts = CheckTokenizerPieces(v->pieces, v->scores);
  if (ts != TINYAI_OK) return AddErrorContext(ts, "'%s': ", path.c_str());
  TINYAI_RETURN_IF_ERROR(CheckBytePieces(path.c_str(), v->pieces));
  // TinyAI's tokenizer over these pieces must encode as SentencePiece does.
  std::vector<StringView> views;
  size_t longest = 0;
  for (const std::string& p : v->pieces) {
    views.push_back(StringView{p.data(), p.size()});
    longest = p.size() > longest ? p.size() : longest;
  }
  Tokenizer tok;
  TinyAIStatus is = tok.Init(Span<const StringView>(views.data(), views.size()),
                             Span<const float>(v->scores.data(), v->scores.size()), v->bos, v->eos,
                             static_cast<uint32_t>(longest));
  if (is != TINYAI_OK) return AddErrorContext(is, "'%s': ", path.c_str());
  for (const char* text : kProbeTexts) {
    std::vector<int> want;
    const auto encoded = sp.Encode(text, &want);
    std::vector<int32_t> got(std::strlen(text) * 4 + 8);
    size_t count = 0;
    TinyAIStatus es = encoded.ok() ? tok.Encode(text, false, false, got.data(), got.size(), &count) : TINYAI_ERR_INTERNAL;
    got.resize(es == TINYAI_OK ? count : 0);
    bool same = es == TINYAI_OK && got.size() == want.size();
    for (size_t i = 0; same && i < got.size(); ++i) same = got[i] == want[i];
    if (!same) {
      // Both lists from a few tokens before the first difference.
      size_t first = 0;
      while (first < got.size() && first < want.size() && got[first] == want[first]) ++first;
      const size_t from = first > 3 ? first - 3 : 0;
      auto list = [from](const auto& ids) {
        std::string s = from > 0 ? "... " : "";
        for (size_t i = from; i < ids.size() && i < from + 10; ++i) s += (i > from ? " " : "") + std::to_string(ids[i]);
        return ids.size() > from + 10 ? s + " ..." : s;
      };
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': SentencePiece encodes \"%s\" as [%s], TinyAI's tokenizer (BPE by "
                      "piece scores, as llama2.c's) as [%s]: a unigram model, or one that normalizes its text, is not "
                      "one TinyAI reproduces", path.c_str(), text, list(want).c_str(), list(got).c_str());
    }
  }
  return TINYAI_OK;
#else
  (void)v;
  return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': this build reads no SentencePiece tokenizer.model (built without "
                  "libsentencepiece; convert on a machine whose build has it)", path.c_str());
#endif
}

// tokenizer_config.json, when the checkpoint has one: whether a text starts
// with BOS and ends with EOS (add_bos_token, add_eos_token; transformers'
// LlamaTokenizer defaults, BOS yes and EOS no, without the file or a key),
// recorded for the runtime to follow; add_prefix_space false (no dummy
// prefix, which TinyAI's tokenizer always adds) is refused.
TinyAIStatus ReadTokenizerConfig(const std::string& path, bool* add_bos, bool* add_eos) {
  if (!Exists(path)) return TINYAI_OK;
  nlohmann::json j;
  TINYAI_RETURN_IF_ERROR(ReadJsonFile(path, kMaxTokenizerConfigBytes, kMaxTokenizerConfigValues, &j));
  if (!j.is_object()) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s' is %s, not a JSON object", path.c_str(), JsonKind(j));
  struct Flag {
    const char* key;
    bool* out;
  };
  bool prefix = true;
  for (const Flag& f : {Flag{"add_bos_token", add_bos}, Flag{"add_eos_token", add_eos}, Flag{"add_prefix_space", &prefix}}) {
    auto it = j.find(f.key);
    if (it == j.end() || it->is_null()) continue;  // null: the tokenizer's default
    bool found = false;
    TINYAI_RETURN_IF_ERROR(JsonBool(j, f.key, path, f.out, &found));
  }
  if (!prefix) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': add_prefix_space is false; TinyAI's tokenizer always adds the "
                    "dummy-prefix space (as LLaMA's SentencePiece model does)", path.c_str());
  }
  return TINYAI_OK;
}

// A tensor TinyAI reads, where it is and what it becomes.
struct Planned {
  std::string tmai;
  std::string hf;
  const Shard* shard = nullptr;
  const safetensors::Tensor* t = nullptr;
  TinyAIDType dtype = TINYAI_DTYPE_F32;
  int32_t rotary_heads = 0;  // q_proj, k_proj: the heads whose rows are permuted back
};

// Writes p's rows in the .tmai's order and dtype, a chunk of rows at a time,
// releasing the source pages a chunk read.
TinyAIStatus WriteTensor(TmaiWriter* w, const Planned& p) {
  const safetensors::Tensor& t = *p.t;
  // A bias of q or k (Qwen2) is permuted value by value: rows of one.
  const bool values = t.shape.size() == 1 && p.rotary_heads > 0;
  const uint64_t cols = values ? 1 : t.shape.back(), rows = t.shape.size() == 2 ? t.shape[0] : values ? t.shape[0] : 1;
  const uint64_t in_each = safetensors::DTypeBytes(t.dtype), in_row = cols * in_each;
  const uint64_t out_each = p.dtype == TINYAI_DTYPE_F16 ? 2 : 4, out_row = cols * out_each;
  const uint8_t* base = p.shard->map.data + t.offset;
  const uint64_t head = p.rotary_heads > 0 ? rows / static_cast<uint64_t>(p.rotary_heads) : 0;
  // Row r of the output (the interleaved rotary layout: pairs 2i, 2i + 1) is
  // Hugging Face's row i (first halves) or head / 2 + i (second halves) of
  // the same head.
  auto source = [&](uint64_t r) {
    if (head == 0) return r;
    const uint64_t h = r / head, k = r % head;
    return h * head + (k % 2) * (head / 2) + k / 2;
  };
  const uint64_t per = out_row >= (4u << 20) ? 1 : (4u << 20) / out_row;
  std::vector<uint8_t> buffer(static_cast<size_t>((per < rows ? per : rows) * out_row));
  uint64_t released = 0;  // source rows before this are no longer needed
  for (uint64_t r0 = 0; r0 < rows; r0 += per) {
    const uint64_t n = rows - r0 < per ? rows - r0 : per;
    for (uint64_t i = 0; i < n; ++i) {
      const uint8_t* in = base + source(r0 + i) * in_row;
      uint8_t* out = buffer.data() + i * out_row;
      if (t.dtype == "BF16") {
        for (uint64_t c = 0; c < cols; ++c) {
          uint16_t b;
          std::memcpy(&b, in + 2 * c, 2);
          const uint32_t bits = static_cast<uint32_t>(b) << 16;
          std::memcpy(out + 4 * c, &bits, 4);
        }
      } else if (t.dtype == "F16" && p.dtype == TINYAI_DTYPE_F32) {
        for (uint64_t c = 0; c < cols; ++c) {
          uint16_t h;
          std::memcpy(&h, in + 2 * c, 2);
          const float f = HalfToFloat(h);
          std::memcpy(out + 4 * c, &f, 4);
        }
      } else {
        std::memcpy(out, in, static_cast<size_t>(in_row));
      }
    }
    TINYAI_RETURN_IF_ERROR(w->Write(buffer.data(), static_cast<size_t>(n * out_row)));
    // Rows [released, r0 + n) of the source are done once the chunk ends on
    // a head's end (the rows of whole heads are the same in both orders):
    // their pages need not stay resident.
    if (head == 0 || (r0 + n) % head == 0 || r0 + n == rows) {
      port::AdviseRange(base + released * in_row, static_cast<size_t>((r0 + n - released) * in_row),
                        port::Advice::kDontNeed);
      released = r0 + n;
    }
  }
  return TINYAI_OK;
}

}  // namespace

TinyAIStatus ConvertSafetensors(const char* inPath, const char* outPath, LlamaHyperParams* paramsOut,
                                const WriteOptions& options, TmaiWriteStats* stats) {
  TINYAI_RETURN_IF_ERROR(CheckImportOptions(options, "safetensors"));
  std::string folder, index;
  Weights weights;
  TINYAI_RETURN_IF_ERROR(OpenWeights(inPath, &folder, &index, &weights));
  for (const auto& shard : weights.shards) TINYAI_RETURN_IF_ERROR(RefuseOutputIsInput(outPath, shard->path.c_str()));
  std::string config_path, tokenizer_path, tokenizer_config_path, tokenizer_json_path;
  TINYAI_RETURN_IF_ERROR(ResolveInside(folder, "config.json", "the configuration", &config_path));
  TINYAI_RETURN_IF_ERROR(ResolveInside(folder, "tokenizer.model", "the tokenizer", &tokenizer_path));
  TINYAI_RETURN_IF_ERROR(ResolveInside(folder, "tokenizer.json", "the tokenizer", &tokenizer_json_path));
  TINYAI_RETURN_IF_ERROR(ResolveInside(folder, "tokenizer_config.json", "the tokenizer's configuration",
                                       &tokenizer_config_path));
  for (const std::string& p : {config_path, tokenizer_path, tokenizer_config_path, tokenizer_json_path, index}) {
    if (!p.empty()) TINYAI_RETURN_IF_ERROR(RefuseOutputIsInput(outPath, p.c_str()));
  }
  Config config;
  TINYAI_RETURN_IF_ERROR(ReadConfig(config_path, &config));
  LlamaHyperParams& s = config.params;
  s.shared_classifier = config.tied;
  TINYAI_RETURN_IF_ERROR(CheckImportedShape(s, config_path.c_str()));

  // A SentencePiece tokenizer.model, or (Llama 3, Qwen2, SmolLM) a
  // byte-level BPE tokenizer.json (import/hf_vocab.h).
  GgufVocab bpe;
  const bool byte_pairs = !Exists(tokenizer_path) && Exists(tokenizer_json_path);
  if (byte_pairs) {
    TINYAI_RETURN_IF_ERROR(ReadHfByteLevelVocab(tokenizer_json_path, tokenizer_config_path, s.vocab_size,
                                                config.has_bos ? static_cast<int64_t>(config.bos) : -1,
                                                config.has_eos ? static_cast<int64_t>(config.eos) : -1, &bpe));
  }
  Vocabulary vocab;
  bool add_bos = true, add_eos = false;
  if (!byte_pairs) {
    TINYAI_RETURN_IF_ERROR(ReadTokenizer(tokenizer_path, &vocab));
    if (vocab.pieces.size() != static_cast<size_t>(s.vocab_size)) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s' has %zu tokens but '%s' says vocab_size %d", tokenizer_path.c_str(),
                      vocab.pieces.size(), config_path.c_str(), s.vocab_size);
    }
    if ((config.has_bos && config.bos != static_cast<uint64_t>(vocab.bos)) ||
        (config.has_eos && config.eos != static_cast<uint64_t>(vocab.eos))) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s' has BOS %d and EOS %d but '%s' says %llu and %llu",
                      tokenizer_path.c_str(), vocab.bos, vocab.eos, config_path.c_str(),
                      static_cast<unsigned long long>(config.has_bos ? config.bos : vocab.bos),
                      static_cast<unsigned long long>(config.has_eos ? config.eos : vocab.eos));
    }
    TINYAI_RETURN_IF_ERROR(ReadTokenizerConfig(tokenizer_config_path, &add_bos, &add_eos));
  }

  // The tensors, checked against the shape.
  const uint64_t dim = static_cast<uint64_t>(s.dim), hidden = static_cast<uint64_t>(s.hidden_dim);
  const uint64_t kv_dim = static_cast<uint64_t>(s.kv_dim()), vocab_rows = static_cast<uint64_t>(s.vocab_size);
  std::vector<Planned> plan;
  auto want = [&](const std::string& hf, const std::string& tmai, uint64_t rows, uint64_t cols, bool matrix,
                  int32_t rotary_heads) -> TinyAIStatus {
    auto it = weights.tensors.find(hf);
    if (it == weights.tensors.end()) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': no tensor '%s'", inPath, hf.c_str());
    }
    const safetensors::Tensor& t = *it->second.second;
    const bool shape_ok = matrix ? t.shape.size() == 2 && t.shape[0] == rows && t.shape[1] == cols
                                 : t.shape.size() == 1 && t.shape[0] == cols;
    if (!shape_ok) {
      std::string got;
      for (uint64_t d : t.shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' is [%s]; this model's is [%s%s]",
                      it->second.first->path.c_str(), hf.c_str(), got.c_str(),
                      matrix ? (std::to_string(rows) + ", ").c_str() : "", std::to_string(cols).c_str());
    }
    if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16") {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' is %s; TinyAI imports F32, F16 and BF16 tensors",
                      it->second.first->path.c_str(), hf.c_str(), Printable(t.dtype).c_str());
    }
    Planned p;
    p.tmai = tmai;
    p.hf = hf;
    p.shard = it->second.first;
    p.t = &t;
    p.dtype = t.dtype == "F16" && matrix ? TINYAI_DTYPE_F16 : TINYAI_DTYPE_F32;
    p.rotary_heads = rotary_heads;
    plan.push_back(p);
    return TINYAI_OK;
  };
  if (weights.tensors.count("model.embed_tokens.weight") != 0) {
    const safetensors::Tensor& e = *weights.tensors["model.embed_tokens.weight"].second;
    if (e.shape.size() == 2 && e.shape[0] != vocab_rows) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': the vocabulary has %d tokens but 'model.embed_tokens.weight' has "
                      "%llu rows", inPath, s.vocab_size, static_cast<unsigned long long>(e.shape[0]));
    }
  }
  TINYAI_RETURN_IF_ERROR(want("model.embed_tokens.weight", "token_embd", vocab_rows, dim, true, 0));
  for (int32_t l = 0; l < s.layers; ++l) {
    const std::string g = "model.layers." + std::to_string(l) + ".", t = "blk." + std::to_string(l) + ".";
    TINYAI_RETURN_IF_ERROR(want(g + "input_layernorm.weight", t + "attn_norm", 1, dim, false, 0));
    TINYAI_RETURN_IF_ERROR(want(g + "self_attn.q_proj.weight", t + "attn_q", dim, dim, true, s.heads));
    TINYAI_RETURN_IF_ERROR(want(g + "self_attn.k_proj.weight", t + "attn_k", kv_dim, dim, true, s.kv_heads));
    TINYAI_RETURN_IF_ERROR(want(g + "self_attn.v_proj.weight", t + "attn_v", kv_dim, dim, true, 0));
    if (s.qkv_bias) {
      TINYAI_RETURN_IF_ERROR(want(g + "self_attn.q_proj.bias", t + "attn_q_bias", 1, dim, false, s.heads));
      TINYAI_RETURN_IF_ERROR(want(g + "self_attn.k_proj.bias", t + "attn_k_bias", 1, kv_dim, false, s.kv_heads));
      TINYAI_RETURN_IF_ERROR(want(g + "self_attn.v_proj.bias", t + "attn_v_bias", 1, kv_dim, false, 0));
    }
    TINYAI_RETURN_IF_ERROR(want(g + "self_attn.o_proj.weight", t + "attn_out", dim, dim, true, 0));
    TINYAI_RETURN_IF_ERROR(want(g + "post_attention_layernorm.weight", t + "ffn_norm", 1, dim, false, 0));
    TINYAI_RETURN_IF_ERROR(want(g + "mlp.gate_proj.weight", t + "ffn_gate", hidden, dim, true, 0));
    TINYAI_RETURN_IF_ERROR(want(g + "mlp.up_proj.weight", t + "ffn_up", hidden, dim, true, 0));
    TINYAI_RETURN_IF_ERROR(want(g + "mlp.down_proj.weight", t + "ffn_down", dim, hidden, true, 0));
  }
  TINYAI_RETURN_IF_ERROR(want("model.norm.weight", "output_norm", 1, dim, false, 0));
  if (!s.shared_classifier) TINYAI_RETURN_IF_ERROR(want("lm_head.weight", "output", vocab_rows, dim, true, 0));
  for (const auto& t : weights.tensors) {
    bool used = false;
    for (const Planned& p : plan) used |= p.hf == t.first;
    // Tied embeddings: a saved lm_head is the embedding again. Older
    // checkpoints save the rotary frequencies, which TinyAI computes.
    const bool ignored = (s.shared_classifier && t.first == "lm_head.weight") ||
                         EndsWith(t.first, ".self_attn.rotary_emb.inv_freq");
    if (!used && !ignored) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' is not part of a LLaMA model TinyAI runs",
                      t.second.first->path.c_str(), Printable(t.first).c_str());
    }
  }

  TmaiWriter w;
  w.SetCompression(options.codec, options.level);
  std::string name = options.name;
  if (name.empty()) name = config.name.empty() ? BaseName(folder == "." ? std::string(inPath) : folder) : config.name;
  AddLlamaMetadata(&w, s, llama_key::kArchitecture, name, "safetensors", BaseName(inPath).c_str(),
                   config.rope_freq_factors);
  if (byte_pairs) {
    AddVocabMetadata(&w, bpe);
  } else {
    AddTokenizerMetadata(&w, vocab.pieces, vocab.scores, vocab.bos, vocab.eos, add_bos, add_eos);
  }
  DeclareLlamaTensors(&w, s, nullptr, TINYAI_DTYPE_F32, [&](const std::string& n) {
    for (const Planned& p : plan) {
      if (p.tmai == n) return p.dtype;
    }
    return TINYAI_DTYPE_F32;
  });
  TINYAI_RETURN_IF_ERROR(w.Open(outPath));
  for (const Planned& p : plan) TINYAI_RETURN_IF_ERROR(WriteTensor(&w, p));
  TINYAI_RETURN_IF_ERROR(w.Finish());
  if (paramsOut) *paramsOut = s;
  if (stats) *stats = w.stats();
  return TINYAI_OK;
}

}  // namespace tinyai
