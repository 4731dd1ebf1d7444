#include "format/gguf_index.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/checked_math.h"
#include "common/printable.h"
#include "common/status.h"
#include "format/limits.h"
#include "format/llama_params.h"
#include "format/tmai_format.h"
#include "common/bpe_names.h"
#include "tinyai/types.h"

namespace tinyai {

namespace {

using gguf::HeaderView;
using gguf::KeyView;
using gguf::TensorView;

bool Equals(StringView a, const char* b) {
  const size_t n = std::strlen(b);
  return a.size == n && std::memcmp(a.data, b, n) == 0;
}

template <class T>
T Read(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

constexpr GgufLlamaKey kLlamaKeys[] = {
    {"vocab_size", GgufLlamaKey::kRead, ""},
    {"context_length", GgufLlamaKey::kRead, ""},
    {"embedding_length", GgufLlamaKey::kRead, ""},
    {"feed_forward_length", GgufLlamaKey::kRead, ""},
    {"block_count", GgufLlamaKey::kRead, ""},
    {"attention.head_count", GgufLlamaKey::kRead, ""},
    {"attention.head_count_kv", GgufLlamaKey::kRead, ""},
    {"attention.layer_norm_rms_epsilon", GgufLlamaKey::kRead, ""},
    {"rope.freq_base", GgufLlamaKey::kRead, ""},
    {"rope.dimension_count", GgufLlamaKey::kRead, ""},
    {"rope.scaling.type", GgufLlamaKey::kRead, ""},
    {"rope.scaling.factor", GgufLlamaKey::kRead, ""},
    {"rope.scale_linear", GgufLlamaKey::kRead, ""},
    {"tensor_data_layout", GgufLlamaKey::kRead, ""},
    // YaRN's original context (the other types do not read it) and a flag
    // saying the model was fine-tuned scaled.
    {"rope.scaling.original_context_length", GgufLlamaKey::kNoEffect, ""},
    {"rope.scaling.finetuned", GgufLlamaKey::kNoEffect, ""},
    {"attention.key_length", GgufLlamaKey::kHeadSize, "query and key heads of another size than embedding_length / head_count"},
    {"attention.value_length", GgufLlamaKey::kHeadSize, "value heads of another size than embedding_length / head_count"},
    {"expert_count", GgufLlamaKey::kZero, "a mixture of experts"},
    {"expert_used_count", GgufLlamaKey::kZero, "a mixture of experts"},
    {"expert_shared_count", GgufLlamaKey::kZero, "a mixture of experts"},
    {"attention.clamp_kqv", GgufLlamaKey::kZero, "queries, keys and values clamped to that bound"},
    {"attention.max_alibi_bias", GgufLlamaKey::kZero, "ALiBi attention biases"},
    {"attention.scale", GgufLlamaKey::kZero, "attention scores scaled by that factor instead of 1/sqrt(head size)"},
    {"attention.sliding_window", GgufLlamaKey::kZero, "sliding-window attention"},
    {"attn_logit_softcapping", GgufLlamaKey::kZero, "attention scores soft-capped"},
    {"final_logit_softcapping", GgufLlamaKey::kZero, "logits soft-capped"},
    {"pooling_type", GgufLlamaKey::kZero, "pooled embeddings instead of logits"},
    {"logit_scale", GgufLlamaKey::kOne, "logits scaled by that factor"},
    {"residual_scale", GgufLlamaKey::kOne, "residual branches scaled by that factor"},
    {"embedding_scale", GgufLlamaKey::kOne, "embeddings scaled by that factor"},
    {"rope.scaling.attn_factor", GgufLlamaKey::kOne, "rotary embeddings scaled in magnitude by that factor"},
    {"attention.causal", GgufLlamaKey::kTrue, "attention that is not causal"},
    {"use_parallel_residual", GgufLlamaKey::kFalse, "attention and feed-forward blocks in parallel"},
};

// Typed reads of the header's keys; messages name the key and the file.
class Keys {
 public:
  Keys(const HeaderView& h, const char* source) : h_(h), src_(source) {}
  const char* src() const { return src_; }
  const KeyView* Find(const char* key) const { return h_.Find(key); }

  TinyAIStatus Uint(const char* key, uint64_t max, uint64_t* out, bool* found) const {
    const KeyView* k = Find(key);
    *found = k != nullptr;
    if (!k) return TINYAI_OK;
    int64_t v = 0;
    if (!gguf::IsInteger(k->type)) return WrongType(*k, "an integer");
    if (!gguf::ReadInteger(k->value, k->type, &v) || v < 0 || static_cast<uint64_t>(v) > max) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' is out of range (0..%llu)", src_, key,
                      static_cast<unsigned long long>(max));
    }
    *out = static_cast<uint64_t>(v);
    return TINYAI_OK;
  }
  // A required integer, or `fallback` when it is >= 0 and the key absent.
  TinyAIStatus Dim(const char* key, int64_t fallback, int32_t* out) const {
    bool found = false;
    uint64_t v = 0;
    TINYAI_RETURN_IF_ERROR(Uint(key, INT32_MAX, &v, &found));
    if (!found) {
      if (fallback < 0) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': no key '%s'", src_, key);
      v = static_cast<uint64_t>(fallback);
    }
    *out = static_cast<int32_t>(v);
    return TINYAI_OK;
  }
  TinyAIStatus Int(const char* key, int64_t* out, bool* found) const {
    const KeyView* k = Find(key);
    *found = k != nullptr;
    if (!k) return TINYAI_OK;
    if (!gguf::IsInteger(k->type)) return WrongType(*k, "an integer");
    if (!gguf::ReadInteger(k->value, k->type, out)) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' is out of range", src_, key);
    }
    return TINYAI_OK;
  }
  TinyAIStatus Float(const char* key, float* out, bool* found) const {
    const KeyView* k = Find(key);
    *found = k != nullptr;
    if (!k) return TINYAI_OK;
    if (k->type == gguf::kFloat32) {
      *out = Read<float>(k->value);
    } else if (k->type == gguf::kFloat64) {
      const double d = Read<double>(k->value);
      if (!(std::fabs(d) <= 3.4028234663852886e38)) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' (%g) is not a finite float", src_, key, d);
      }
      *out = static_cast<float>(d);
    } else {
      return WrongType(*k, "a float");
    }
    return TINYAI_OK;
  }
  TinyAIStatus String(const char* key, StringView* out, bool* found) const {
    const KeyView* k = Find(key);
    *found = k != nullptr;
    if (!k) return TINYAI_OK;
    if (k->type != gguf::kString) return WrongType(*k, "a string");
    out->size = static_cast<size_t>(Read<uint64_t>(k->value));
    out->data = reinterpret_cast<const char*>(k->value + 8);
    return TINYAI_OK;
  }
  // A bool key: *out keeps its default when the key is absent.
  TinyAIStatus Bool(const char* key, bool* out) const {
    const KeyView* k = Find(key);
    if (!k) return TINYAI_OK;
    if (k->type != gguf::kBool) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' is not a bool", src_, key);
    *out = k->value[0] != 0;
    return TINYAI_OK;
  }
  // An array of elem_type (kString, kFloat32, or any integer when
  // elem_type is kInt64) of at most max elements.
  TinyAIStatus Array(const char* key, uint32_t elem_type, uint64_t max, const KeyView** out) const {
    const KeyView* k = Find(key);
    *out = nullptr;
    if (!k) return TINYAI_OK;
    const bool ok = k->type == gguf::kArray &&
                    (elem_type == gguf::kInt64 ? gguf::IsInteger(k->elem_type) : k->elem_type == elem_type);
    if (!ok) {
      return WrongType(*k, elem_type == gguf::kString ? "an array of strings"
                           : elem_type == gguf::kFloat32 ? "an array of float32" : "an array of integers");
    }
    if (k->count > max) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': key '%s' holds %llu values; TinyAI reads at most %llu", src_, key,
                      static_cast<unsigned long long>(k->count), static_cast<unsigned long long>(max));
    }
    *out = k;
    return TINYAI_OK;
  }

 private:
  TinyAIStatus WrongType(const KeyView& k, const char* wanted) const {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' is %s%s, not %s", src_, Printable(k.key).c_str(),
                    k.type == gguf::kArray ? "array of " : "",
                    gguf::ValueTypeName(k.type == gguf::kArray ? k.elem_type : k.type), wanted);
  }
  const HeaderView& h_;
  const char* src_;
};

// The strings of an array key, walked in order (Parse checked their bounds).
class StringWalk {
 public:
  explicit StringWalk(const KeyView* k) : p_(k ? k->value : nullptr) {}
  StringView Next() {
    StringView s;
    s.size = static_cast<size_t>(Read<uint64_t>(p_));
    s.data = reinterpret_cast<const char*>(p_ + 8);
    p_ += 8 + s.size;
    return s;
  }

 private:
  const uint8_t* p_;
};

// SentencePiece's word boundary U+2581, which TinyAI's tokenizer reads as a
// space (as the converters write it).
constexpr char kBoundary[] = "\xE2\x96\x81";

size_t SpacedLength(StringView s) {
  size_t n = s.size;
  for (size_t i = 0; i + 3 <= s.size; ++i) {
    if (std::memcmp(s.data + i, kBoundary, 3) == 0) {
      n -= 2;
      i += 2;
    }
  }
  return n;
}

// The .tmai metadata section (docs/format.md): measured with out == nullptr,
// then written.
class MetaSink {
 public:
  explicit MetaSink(uint8_t* out) : out_(out) { size_ = 4; }
  uint64_t size() const { return size_; }
  void Finish() {
    if (out_) std::memcpy(out_, &count_, 4);
  }
  void Int(const char* key, int64_t v) {
    Key(key, tmai::kMetaInt);
    Put(&v, 8);
  }
  void Float(const char* key, float v) {
    Key(key, tmai::kMetaFloat);
    Put(&v, 4);
  }
  void String(const char* key, StringView v) {
    Key(key, tmai::kMetaString);
    U32(static_cast<uint32_t>(v.size));
    Put(v.data, v.size);
  }
  void String(const char* key, const char* v) { String(key, StringView{v, std::strlen(v)}); }
  void Floats(const char* key, uint32_t count, const float* v) {
    Key(key, tmai::kMetaFloatArray);
    U32(count);
    Put(v, size_t{count} * 4);
  }
  void BeginFloats(const char* key, uint32_t count) {
    Key(key, tmai::kMetaFloatArray);
    U32(count);
  }
  void FloatElement(float v) { Put(&v, 4); }
  void BeginStrings(const char* key, uint32_t count) {
    Key(key, tmai::kMetaStringArray);
    U32(count);
  }
  // A string element, U+2581 written as a space when spaced.
  void StringElement(StringView s, bool spaced) {
    if (!spaced) {
      U32(static_cast<uint32_t>(s.size));
      Put(s.data, s.size);
      return;
    }
    U32(static_cast<uint32_t>(SpacedLength(s)));
    for (size_t i = 0; i < s.size; ++i) {
      if (i + 3 <= s.size && std::memcmp(s.data + i, kBoundary, 3) == 0) {
        Put(" ", 1);
        i += 2;
      } else {
        Put(s.data + i, 1);
      }
    }
  }

 private:
  void Key(const char* key, uint8_t type) {
    const uint16_t n = static_cast<uint16_t>(std::strlen(key));
    Put(&n, 2);
    Put(key, n);
    Put(&type, 1);
    ++count_;
  }
  void U32(uint32_t v) { Put(&v, 4); }
  void Put(const void* p, size_t n) {
    if (out_ && n) std::memcpy(out_ + size_, p, n);
    size_ += n;
  }
  uint8_t* out_;
  uint64_t size_ = 0;
  uint32_t count_ = 0;
};

// What the metadata is made of, read and checked once.
struct Plan {
  LlamaHyperParams hp;
  bool qwen2 = false;
  StringView name{"", 0};
  Array<float> rope_factors;  // rope_pairs values
  uint32_t rope_pairs = 0;
  // Vocabulary.
  bool byte_pairs = false;
  const KeyView* tokens = nullptr;
  const KeyView* scores = nullptr;
  const KeyView* types = nullptr;
  const KeyView* merges = nullptr;
  StringView pre{"", 0};
  StringView chat_template{"", 0};
  int64_t bos = -1, eos = -1;
  int32_t eog[2] = {-1, -1};
  bool add_bos = true, add_eos = false, nfc = false;
  size_t max_token_length = 0;
};

TinyAIStatus ReadRopeScaling(const Keys& k, const char* a, float* factor) {
  char key_type[96], key_factor[96], key_linear[96];
  std::snprintf(key_type, sizeof key_type, "%srope.scaling.type", a);
  std::snprintf(key_factor, sizeof key_factor, "%srope.scaling.factor", a);
  std::snprintf(key_linear, sizeof key_linear, "%srope.scale_linear", a);
  StringView type{"linear", 6};
  bool has_type = false, has_factor = false, has_linear = false;
  TINYAI_RETURN_IF_ERROR(k.String(key_type, &type, &has_type));
  if (!has_type) type = StringView{"linear", 6};
  float scaling = 0.0f, linear = 0.0f;
  TINYAI_RETURN_IF_ERROR(k.Float(key_factor, &scaling, &has_factor));
  TINYAI_RETURN_IF_ERROR(k.Float(key_linear, &linear, &has_linear));
  if (has_factor && has_linear && scaling != linear) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': %s %g and %s %g disagree", k.src(), key_factor,
                    static_cast<double>(scaling), key_linear, static_cast<double>(linear));
  }
  const float value = has_factor ? scaling : linear;
  const char* key = has_factor ? key_factor : key_linear;
  *factor = 1.0f;
  if (Equals(type, "none")) return TINYAI_OK;
  if (!Equals(type, "linear")) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': rope scaling '%s' (%s) changes the rotary frequencies themselves; "
                    "TinyAI runs linear rope scaling or none", k.src(), Printable(type).c_str(), key_type);
  }
  if (!(value >= 0.0f) || !std::isfinite(value)) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': %s is %g; a rope scaling factor is positive (0: none)", k.src(), key,
                    static_cast<double>(value));
  }
  if (value == 0.0f) return TINYAI_OK;
  if (!RopeLinearFactorInRange(value)) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': %s is %g; the runtime runs linear rope scaling factors of "
                    "1/65536 .. 65536", k.src(), key, static_cast<double>(value));
  }
  *factor = value;
  return TINYAI_OK;
}

// Every "<arch>." key accounted for (GgufLlamaKey).
TinyAIStatus CheckLlamaKeys(const HeaderView& h, const Keys& k, const char* a, const LlamaHyperParams& s) {
  const size_t prefix = std::strlen(a);
  for (const KeyView& kv : h.keys) {
    if (kv.key.size < prefix || std::memcmp(kv.key.data, a, prefix) != 0) continue;
    const GgufLlamaKey* known = FindGgufLlamaKey(kv.key.data + prefix, kv.key.size - prefix);
    if (known == nullptr) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': key '%s' is not one TinyAI knows: it may change what the model "
                      "computes, and TinyAI never ignores what it cannot honour", k.src(), Printable(kv.key).c_str());
    }
    if (known->rule == GgufLlamaKey::kRead || known->rule == GgufLlamaKey::kNoEffect) continue;
    double v = 0.0;
    int64_t i = 0;
    if (gguf::IsInteger(kv.type) && gguf::ReadInteger(kv.value, kv.type, &i)) {
      v = static_cast<double>(i);
    } else if (kv.type == gguf::kFloat32) {
      v = Read<float>(kv.value);
    } else if (kv.type == gguf::kFloat64) {
      v = Read<double>(kv.value);
    } else if (kv.type == gguf::kBool) {
      v = kv.value[0] != 0 ? 1.0 : 0.0;
    } else {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' is not a number", k.src(), Printable(kv.key).c_str());
    }
    const double want = known->rule == GgufLlamaKey::kHeadSize ? static_cast<double>(s.head_size())
                        : known->rule == GgufLlamaKey::kOne || known->rule == GgufLlamaKey::kTrue ? 1.0 : 0.0;
    if (v != want) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': %s is %g: %s, which TinyAI's LLaMA does not compute (it runs "
                      "the model as if it were %g)", k.src(), Printable(kv.key).c_str(), v, known->what, want);
    }
  }
  char key[96];
  std::snprintf(key, sizeof key, "%stensor_data_layout", a);
  StringView layout;
  bool found = false;
  TINYAI_RETURN_IF_ERROR(k.String(key, &layout, &found));
  if (found && !Equals(layout, "Meta AI original pth") && !Equals(layout, "reference")) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': %s '%s'; TinyAI reads the layout llama.cpp's converters write "
                    "('Meta AI original pth', 'reference')", k.src(), key, Printable(layout).c_str());
  }
  std::snprintf(key, sizeof key, "%srope.dimension_count", a);
  uint64_t rope_dims = 0;
  TINYAI_RETURN_IF_ERROR(k.Uint(key, UINT32_MAX, &rope_dims, &found));
  if (found && rope_dims != static_cast<uint64_t>(s.head_size())) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': rotary embeddings over %llu of each head's %d dimensions; TinyAI "
                    "rotates whole heads", k.src(), static_cast<unsigned long long>(rope_dims), s.head_size());
  }
  return TINYAI_OK;
}

TinyAIStatus TokenIdKey(const Keys& k, const char* key, uint64_t vocab, int64_t* out) {
  bool found = false;
  TINYAI_RETURN_IF_ERROR(k.Int(key, out, &found));
  if (!found) {
    *out = -1;
    return TINYAI_OK;
  }
  if (*out < 0 || static_cast<uint64_t>(*out) >= vocab) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': %s is %lld, not a token (%llu tokens)", k.src(), key,
                    static_cast<long long>(*out), static_cast<unsigned long long>(vocab));
  }
  return TINYAI_OK;
}

TinyAIStatus ReadVocab(const Keys& k, Plan* p) {
  const char* src = k.src();
  StringView model;
  bool found = false;
  TINYAI_RETURN_IF_ERROR(k.String("tokenizer.ggml.model", &model, &found));
  if (!found) return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': no key 'tokenizer.ggml.model'", src);
  if (!Equals(model, "llama") && !Equals(model, "gpt2")) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tokenizer '%s'; TinyAI reads SentencePiece vocabularies "
                    "(tokenizer.ggml.model 'llama') and byte-level BPE ('gpt2')", src, Printable(model).c_str());
  }
  p->byte_pairs = Equals(model, "gpt2");
  TINYAI_RETURN_IF_ERROR(k.String("tokenizer.chat_template", &p->chat_template, &found));
  TINYAI_RETURN_IF_ERROR(k.Array("tokenizer.ggml.tokens", gguf::kString, limits::kMaxVocab, &p->tokens));
  if (!p->tokens) return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': no key 'tokenizer.ggml.tokens'", src);
  const uint64_t n = p->tokens->count;
  {
    StringWalk walk(p->tokens);
    for (uint64_t i = 0; i < n; ++i) {
      const StringView t = walk.Next();
      if (t.size > UINT32_MAX / 2) return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': token %llu is too long", src,
                                                  static_cast<unsigned long long>(i));
      const size_t len = p->byte_pairs ? t.size : SpacedLength(t);
      if (len > p->max_token_length) p->max_token_length = len;
    }
  }
  TINYAI_RETURN_IF_ERROR(k.Array("tokenizer.ggml.token_type", gguf::kInt64, limits::kMaxVocab, &p->types));
  if (p->types && p->types->count != n) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': %llu token types for %llu tokens", src,
                    static_cast<unsigned long long>(p->types->count), static_cast<unsigned long long>(n));
  }
  const uint64_t each = p->types ? gguf::ScalarBytes(p->types->elem_type) : 0;
  auto type_of = [&](uint64_t i) {
    int64_t v = -1;
    if (!gguf::ReadInteger(p->types->value + i * each, p->types->elem_type, &v)) v = -1;
    return v;
  };
  if (!p->byte_pairs) {
    bool add_space = true;
    TINYAI_RETURN_IF_ERROR(k.Bool("tokenizer.ggml.add_space_prefix", &add_space));
    if (!add_space) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tokenizer.ggml.add_space_prefix is false; TinyAI's tokenizer "
                      "always adds the dummy-prefix space (as LLaMA's SentencePiece model does)", src);
    }
    TINYAI_RETURN_IF_ERROR(k.Array("tokenizer.ggml.scores", gguf::kFloat32, limits::kMaxVocab, &p->scores));
    if (!p->scores) return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': no key 'tokenizer.ggml.scores'", src);
    if (p->scores->count != n) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': %llu tokens but %llu scores", src,
                      static_cast<unsigned long long>(n), static_cast<unsigned long long>(p->scores->count));
    }
    p->bos = 1;
    p->eos = 2;
    TINYAI_RETURN_IF_ERROR(k.Int("tokenizer.ggml.bos_token_id", &p->bos, &found));
    TINYAI_RETURN_IF_ERROR(k.Int("tokenizer.ggml.eos_token_id", &p->eos, &found));
    if (p->bos < 0 || p->eos < 0 || static_cast<uint64_t>(p->bos) >= n || static_cast<uint64_t>(p->eos) >= n) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': BOS %lld or EOS %lld is not a token (%llu tokens)", src,
                      static_cast<long long>(p->bos), static_cast<long long>(p->eos), static_cast<unsigned long long>(n));
    }
    p->add_bos = true;
    p->add_eos = false;
    TINYAI_RETURN_IF_ERROR(k.Bool("tokenizer.ggml.add_bos_token", &p->add_bos));
    TINYAI_RETURN_IF_ERROR(k.Bool("tokenizer.ggml.add_eos_token", &p->add_eos));
    // The byte pieces where TinyAI's tokenizer looks for them, and the
    // token types, when given, saying so.
    static const char kHex[] = "0123456789ABCDEF";
    StringWalk walk(p->tokens);
    for (uint64_t id = 0; id < n; ++id) {
      const StringView t = walk.Next();
      const bool byte_piece = id >= 3 && id <= 258;
      if (byte_piece) {
        const char want[7] = {'<', '0', 'x', kHex[(id - 3) >> 4], kHex[(id - 3) & 15], '>', '\0'};
        if (!Equals(t, want)) {
          return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': token %llu is '%s', not the byte piece '%s': TinyAI's "
                          "tokenizer needs the 256 byte pieces <0x00>..<0xFF> at ids 3..258 (LLaMA's SentencePiece "
                          "layout)", src, static_cast<unsigned long long>(id), Printable(t).c_str(), want);
        }
      }
      if (p->types && (type_of(id) == kBpeTokenByte) != byte_piece) {
        return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': token %llu ('%s') has token type %lld; the byte pieces, and "
                        "only they, have type 6", src, static_cast<unsigned long long>(id), Printable(t).c_str(),
                        static_cast<long long>(type_of(id)));
      }
    }
    if (n < 259) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': %llu tokens; TinyAI's tokenizer needs the 256 byte pieces at ids "
                      "3..258 (LLaMA's SentencePiece layout)", src, static_cast<unsigned long long>(n));
    }
    return TINYAI_OK;
  }
  TINYAI_RETURN_IF_ERROR(k.String("tokenizer.ggml.pre", &p->pre, &found));
  if (!found) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': no key 'tokenizer.ggml.pre': a byte-level BPE vocabulary names "
                    "its pre-tokenizer (llama-bpe, qwen2, smollm, gpt-2, ...); convert the model with a recent "
                    "llama.cpp convert_hf_to_gguf.py", src);
  }
  char pre_name[64] = {};
  if (p->pre.size >= sizeof pre_name || std::memchr(p->pre.data, '\0', p->pre.size)) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tokenizer.ggml.pre '%s' is not a pre-tokenizer TinyAI knows", src,
                    Printable(p->pre).c_str());
  }
  std::memcpy(pre_name, p->pre.data, p->pre.size);
  BpePre pre;
  const TinyAIStatus known = BpePreFromName(pre_name, &pre);
  if (known != TINYAI_OK) return AddErrorContext(known, "'%s': tokenizer.ggml.pre: ", src);
  if (p->types) {
    for (uint64_t i = 0; i < n; ++i) {
      const int64_t t = type_of(i);
      if (t < kBpeTokenNormal || t > kBpeTokenByte) {
        return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': token %llu has token type %lld; types are 1..6", src,
                        static_cast<unsigned long long>(i), static_cast<long long>(t));
      }
    }
  }
  TINYAI_RETURN_IF_ERROR(k.Array("tokenizer.ggml.merges", gguf::kString, limits::kMaxBpeMerges, &p->merges));
  if (!p->merges) return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': no key 'tokenizer.ggml.merges'", src);
  TINYAI_RETURN_IF_ERROR(TokenIdKey(k, "tokenizer.ggml.bos_token_id", n, &p->bos));
  TINYAI_RETURN_IF_ERROR(TokenIdKey(k, "tokenizer.ggml.eos_token_id", n, &p->eos));
  int64_t eot = -1, eom = -1;
  TINYAI_RETURN_IF_ERROR(TokenIdKey(k, "tokenizer.ggml.eot_token_id", n, &eot));
  TINYAI_RETURN_IF_ERROR(TokenIdKey(k, "tokenizer.ggml.eom_token_id", n, &eom));
  p->eog[0] = static_cast<int32_t>(eot);
  p->eog[1] = static_cast<int32_t>(eom);
  // llama.cpp's defaults: Llama 3's pre-tokenizers add BOS, the others not.
  p->add_bos = pre == BpePre::kLlama3;
  p->add_eos = false;
  TINYAI_RETURN_IF_ERROR(k.Bool("tokenizer.ggml.add_bos_token", &p->add_bos));
  TINYAI_RETURN_IF_ERROR(k.Bool("tokenizer.ggml.add_eos_token", &p->add_eos));
  p->nfc = pre == BpePre::kQwen2;
  return TINYAI_OK;
}

TinyAIStatus ReadModel(const HeaderView& h, const Keys& k, GgufReadFn read, void* user, Plan* p) {
  const char* src = k.src();
  StringView arch;
  bool found = false;
  TINYAI_RETURN_IF_ERROR(k.String("general.architecture", &arch, &found));
  if (!found) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': no key 'general.architecture'", src);
  // Qwen2 is LLaMA with biases on q, k and v and its rotary pairs each
  // head's halves (llama.cpp's NEOX rope type): llama.rope_neox.
  if (!Equals(arch, "llama") && !Equals(arch, "qwen2")) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': architecture '%s'; TinyAI runs 'llama' and 'qwen2' GGUF files",
                    src, Printable(arch).c_str());
  }
  p->qwen2 = Equals(arch, "qwen2");
  const char* a = p->qwen2 ? "qwen2." : "llama.";
  uint64_t splits = 1;
  TINYAI_RETURN_IF_ERROR(k.Uint("split.count", UINT32_MAX, &splits, &found));
  if (found && splits > 1) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': one of %llu files of a split model (split.count); merge them "
                    "first (llama.cpp's llama-gguf-split --merge)", src, static_cast<unsigned long long>(splits));
  }
  TINYAI_RETURN_IF_ERROR(k.String("general.name", &p->name, &found));
  LlamaHyperParams& s = p->hp;
  char key[96];
  struct {
    const char* name;
    int32_t LlamaHyperParams::*field;
  } dims[] = {{"embedding_length", &LlamaHyperParams::dim},
              {"feed_forward_length", &LlamaHyperParams::hidden_dim},
              {"block_count", &LlamaHyperParams::layers},
              {"context_length", &LlamaHyperParams::seq_len},
              {"attention.head_count", &LlamaHyperParams::heads}};
  for (const auto& d : dims) {
    std::snprintf(key, sizeof key, "%s%s", a, d.name);
    TINYAI_RETURN_IF_ERROR(k.Dim(key, -1, &(s.*d.field)));
  }
  std::snprintf(key, sizeof key, "%sattention.head_count_kv", a);
  TINYAI_RETURN_IF_ERROR(k.Dim(key, s.heads, &s.kv_heads));
  std::snprintf(key, sizeof key, "%sattention.layer_norm_rms_epsilon", a);
  TINYAI_RETURN_IF_ERROR(k.Float(key, &s.norm_eps, &found));
  if (!found) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': no key '%s' (the RMSNorm epsilon, which llama.cpp requires too)",
                    src, key);
  }
  std::snprintf(key, sizeof key, "%srope.freq_base", a);
  TINYAI_RETURN_IF_ERROR(k.Float(key, &s.rope_theta, &found));
  if (!found) s.rope_theta = 10000.0f;
  if (!limits::NormEpsInRange(s.norm_eps) || !limits::RopeThetaInRange(s.rope_theta)) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': norm_eps %g or rope_theta %g is outside what the runtime runs", src,
                    static_cast<double>(s.norm_eps), static_cast<double>(s.rope_theta));
  }
  TINYAI_RETURN_IF_ERROR(ReadRopeScaling(k, a, &s.rope_linear_factor));
  if (s.heads <= 0 || s.dim % s.heads != 0 || (s.dim / s.heads) % 2 != 0 || s.kv_heads <= 0 ||
      s.heads % s.kv_heads != 0) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': dim %d, heads %d, kv_heads %d do not divide into even-sized heads",
                    src, s.dim, s.heads, s.kv_heads);
  }
  TINYAI_RETURN_IF_ERROR(CheckLlamaKeys(h, k, a, s));
  TINYAI_RETURN_IF_ERROR(ReadVocab(k, p));
  s.vocab_size = static_cast<int32_t>(p->tokens->count);
  // The runtime's limits (format/limits.h), before anything is sized by them.
  for (const LlamaDimField& f : kLlamaDims) {
    const int32_t v = s.*f.field;
    if (v < f.min || v > f.max) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': %s would be %d; the runtime runs %d..%d", src, f.key, v, f.min,
                      f.max);
    }
  }
  int32_t vocab_key = 0;
  std::snprintf(key, sizeof key, "%svocab_size", a);
  TINYAI_RETURN_IF_ERROR(k.Dim(key, s.vocab_size, &vocab_key));
  if (vocab_key != s.vocab_size) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': %s is %d but tokenizer.ggml.tokens has %d", src, key, vocab_key,
                    s.vocab_size);
  }
  s.shared_classifier = h.FindTensor("output.weight") == nullptr;
  s.qkv_bias = p->qwen2;
  // Llama 3's per-frequency factors (rope_freqs.weight), as metadata.
  if (const TensorView* rf = h.FindTensor("rope_freqs.weight")) {
    const uint64_t pairs = static_cast<uint64_t>(s.head_size() / 2);
    if (rf->type != gguf::kF32 || rf->n_dims != 1 || rf->dims[0] != pairs || pairs == 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor 'rope_freqs.weight' is %s [%llu]; the rope frequency "
                      "factors are F32 [%llu] (half a head)", src, gguf::TypeName(rf->type),
                      static_cast<unsigned long long>(rf->dims[0]), static_cast<unsigned long long>(pairs));
    }
    TINYAI_RETURN_IF_ERROR(p->rope_factors.Allocate(static_cast<size_t>(pairs), "rope frequency factors"));
    TINYAI_RETURN_IF_ERROR(read(user, rf->offset, static_cast<size_t>(pairs * 4), p->rope_factors.data()));
    for (uint64_t i = 0; i < pairs; ++i) {
      if (!(p->rope_factors[i] > 0.0f) || !std::isfinite(p->rope_factors[i])) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': rope_freqs.weight[%llu] is %g; a frequency factor is positive "
                        "and finite", src, static_cast<unsigned long long>(i), static_cast<double>(p->rope_factors[i]));
      }
    }
    p->rope_pairs = static_cast<uint32_t>(pairs);
  }
  return TINYAI_OK;
}

void EmitMetadata(const Plan& p, MetaSink* m) {
  const LlamaHyperParams& s = p.hp;
  m->String("general.architecture", llama_key::kArchitecture);
  m->String("general.name", p.name.size ? p.name : StringView{"gguf", 4});
  m->String("general.source_format", "gguf");
  m->String("general.source", "the GGUF file, read in place");
  for (const LlamaDimField& f : kLlamaDims) m->Int(f.key, s.*f.field);
  m->Int(llama_key::kSharedClassifier, s.shared_classifier ? 1 : 0);
  if (s.qkv_bias) m->Int(llama_key::kQkvBias, 1);
  if (p.qwen2) m->Int(llama_key::kRopeNeox, 1);
  m->Float(llama_key::kNormEps, s.norm_eps);
  m->Float(llama_key::kRopeTheta, s.rope_theta);
  if (s.rope_linear_factor != 1.0f) m->Float(llama_key::kRopeLinearFactor, s.rope_linear_factor);
  if (p.rope_pairs > 0) m->Floats(llama_key::kRopeFreqFactors, p.rope_pairs, p.rope_factors.data());
  if (p.chat_template.size > 0) m->String("tokenizer.chat_template", p.chat_template);
  const uint32_t n = static_cast<uint32_t>(p.tokens->count);
  m->String("tokenizer.model", p.byte_pairs ? "gpt2" : "llama2c-bpe");
  m->BeginStrings("tokenizer.tokens", n);
  StringWalk walk(p.tokens);
  for (uint32_t i = 0; i < n; ++i) m->StringElement(walk.Next(), !p.byte_pairs);
  m->Int("tokenizer.max_token_length", static_cast<int64_t>(p.max_token_length));
  if (!p.byte_pairs) {
    m->Floats("tokenizer.scores", n, reinterpret_cast<const float*>(p.scores->value));
    m->Int("tokenizer.bos_id", p.bos);
    m->Int("tokenizer.eos_id", p.eos);
    if (!p.add_bos) m->Int("tokenizer.add_bos", 0);
    if (p.add_eos) m->Int("tokenizer.add_eos", 1);
    return;
  }
  if (p.types) {
    const uint64_t each = gguf::ScalarBytes(p.types->elem_type);
    StringWalk texts(p.tokens);
    m->BeginFloats("tokenizer.token_types", n);
    for (uint32_t i = 0; i < n; ++i) {
      int64_t t = 0;
      gguf::ReadInteger(p.types->value + i * each, p.types->elem_type, &t);
      const StringView text = texts.Next();
      if (GgufControlByText(text.data, text.size)) t = kBpeTokenControl;
      m->FloatElement(static_cast<float>(t));
    }
  }
  const uint32_t merges = static_cast<uint32_t>(p.merges->count);
  m->BeginStrings("tokenizer.merges", merges);
  StringWalk mw(p.merges);
  for (uint32_t i = 0; i < merges; ++i) m->StringElement(mw.Next(), false);
  m->String("tokenizer.pre", p.pre);
  if (p.nfc) m->Int("tokenizer.nfc", 1);
  if (p.bos >= 0) m->Int("tokenizer.bos_id", p.bos);
  if (p.eos >= 0) m->Int("tokenizer.eos_id", p.eos);
  const uint32_t eogs = (p.eog[0] >= 0 ? 1u : 0u) + (p.eog[1] >= 0 ? 1u : 0u);
  if (eogs > 0) {
    m->BeginFloats("tokenizer.eog_ids", eogs);
    for (int32_t id : p.eog) {
      if (id >= 0) m->FloatElement(static_cast<float>(id));
    }
  }
  m->Int("tokenizer.add_bos", p.add_bos ? 1 : 0);
  if (p.add_eos) m->Int("tokenizer.add_eos", 1);
}

// Where a GGUF tensor goes: its layer (0 the embedding, 1 + b block b, the
// last the output) and role; layer -1 for rope_freqs.weight (metadata).
TinyAIStatus Place(const TensorView& t, const Plan& p, const char* src, int32_t* layer, uint16_t* role,
                   bool* matrix) {
  struct Part {
    const char* suffix;
    uint16_t role;
    bool matrix;
    bool qwen2_only;
  };
  static const Part kBlock[] = {
      {"attn_norm.weight", TINYAI_ROLE_ATTN_NORM, false, false},
      {"attn_q.weight", TINYAI_ROLE_ATTN_Q, true, false},
      {"attn_k.weight", TINYAI_ROLE_ATTN_K, true, false},
      {"attn_v.weight", TINYAI_ROLE_ATTN_V, true, false},
      {"attn_output.weight", TINYAI_ROLE_ATTN_OUT, true, false},
      {"ffn_norm.weight", TINYAI_ROLE_FFN_NORM, false, false},
      {"ffn_gate.weight", TINYAI_ROLE_FFN_GATE, true, false},
      {"ffn_down.weight", TINYAI_ROLE_FFN_DOWN, true, false},
      {"ffn_up.weight", TINYAI_ROLE_FFN_UP, true, false},
      {"attn_q.bias", TINYAI_ROLE_ATTN_Q_BIAS, false, true},
      {"attn_k.bias", TINYAI_ROLE_ATTN_K_BIAS, false, true},
      {"attn_v.bias", TINYAI_ROLE_ATTN_V_BIAS, false, true},
  };
  const int32_t blocks = p.hp.layers;
  *layer = -2;
  if (Equals(t.name, "rope_freqs.weight")) {
    *layer = -1;
    return TINYAI_OK;
  }
  if (Equals(t.name, "token_embd.weight")) {
    *layer = 0, *role = TINYAI_ROLE_TOKEN_EMBEDDING, *matrix = true;
  } else if (Equals(t.name, "output_norm.weight")) {
    *layer = blocks + 1, *role = TINYAI_ROLE_OUTPUT_NORM, *matrix = false;
  } else if (Equals(t.name, "output.weight")) {
    *layer = blocks + 1, *role = TINYAI_ROLE_CLASSIFIER, *matrix = true;
  } else if (t.name.size > 4 && std::memcmp(t.name.data, "blk.", 4) == 0) {
    size_t i = 4;
    uint64_t b = 0;
    while (i < t.name.size && i < 12 && t.name.data[i] >= '0' && t.name.data[i] <= '9') {
      b = b * 10 + static_cast<uint64_t>(t.name.data[i] - '0');
      ++i;
    }
    if (i > 4 && i < t.name.size && t.name.data[i] == '.' && b < static_cast<uint64_t>(blocks)) {
      const StringView rest{t.name.data + i + 1, t.name.size - i - 1};
      for (const Part& part : kBlock) {
        if (Equals(rest, part.suffix) && (!part.qwen2_only || p.qwen2)) {
          *layer = 1 + static_cast<int32_t>(b), *role = part.role, *matrix = part.matrix;
        }
      }
    }
  }
  if (*layer == -2) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' is not part of a LLaMA model", src,
                    Printable(t.name).c_str());
  }
  return TINYAI_OK;
}

}  // namespace

int32_t GgufTensorDType(uint32_t type, bool matrix, bool* widened) {
  *widened = false;
  switch (type) {
    case gguf::kF32: return TINYAI_DTYPE_F32;
    case gguf::kBF16: *widened = true; return TINYAI_DTYPE_F32;
    case gguf::kF16:
      *widened = !matrix;
      return matrix ? TINYAI_DTYPE_F16 : TINYAI_DTYPE_F32;
    case gguf::kQ8_0: return matrix ? TINYAI_DTYPE_Q8_G32 : -1;
    case gguf::kQ4_0: return matrix ? TINYAI_DTYPE_Q4_G32 : -1;
    case gguf::kIQ4_NL: return matrix ? TINYAI_DTYPE_Q4NL_G32 : -1;
    case gguf::kQ5_0: return matrix ? TINYAI_DTYPE_Q5_G32 : -1;
    case gguf::kQ5_1: return matrix ? TINYAI_DTYPE_Q5M_G32 : -1;
    case gguf::kQ4_K: return matrix ? TINYAI_DTYPE_Q4_K : -1;
    case gguf::kQ5_K: return matrix ? TINYAI_DTYPE_Q5_K : -1;
    case gguf::kQ6_K: return matrix ? TINYAI_DTYPE_Q6_K : -1;
    default: return -1;
  }
}

bool GgufControlByText(const char* text, size_t size) {
  static const char* const kTexts[] = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>",
      "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
      "<fim-prefix>", "<fim-suffix>", "<fim-middle>", "<fim-pad>", "<fim_prefix>", "<fim_suffix>", "<fim_middle>",
      "<fim_pad>", "<PRE>", "<SUF>", "<MID>", "<reponame>", "<filename>"};
  for (const char* k : kTexts) {
    if (Equals(StringView{text, size}, k)) return true;
  }
  return false;
}

const GgufLlamaKey* FindGgufLlamaKey(const char* key, size_t size) {
  for (const GgufLlamaKey& k : kLlamaKeys) {
    if (Equals(StringView{key, size}, k.key)) return &k;
  }
  return nullptr;
}

TinyAIStatus BuildGgufIndex(const gguf::HeaderView& h, uint64_t file_size, const char* source, GgufReadFn read,
                            void* user, AlignedBuffer* index, uint64_t* index_size) {
  const Keys keys(h, source);
  Plan plan;
  TINYAI_RETURN_IF_ERROR(ReadModel(h, keys, read, user, &plan));
  const int32_t layer_count = plan.hp.layers + 2;

  // Each tensor's layer and role, then the tensors of each layer in file order.
  const size_t n = h.tensors.size();
  Array<int32_t> layer_of;
  Array<uint16_t> role_of;
  Array<uint32_t> order;
  TINYAI_RETURN_IF_ERROR(layer_of.Allocate(n, "GGUF tensor layers"));
  TINYAI_RETURN_IF_ERROR(role_of.Allocate(n, "GGUF tensor roles"));
  TINYAI_RETURN_IF_ERROR(order.Allocate(n, "GGUF tensor order"));
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    const TensorView& t = h.tensors[i];
    bool matrix = false;
    TINYAI_RETURN_IF_ERROR(Place(t, plan, source, &layer_of[i], &role_of[i], &matrix));
    if (layer_of[i] < 0) continue;
    bool widened = false;
    const int32_t dtype = GgufTensorDType(t.type, matrix, &widened);
    if (dtype < 0) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' is %s; TinyAI reads F32, F16, BF16, Q8_0, Q4_0, "
                      "IQ4_NL, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K%s (requantize with llama.cpp's llama-quantize to one "
                      "of them, e.g. Q4_K_M, or convert from F16)", source, Printable(t.name).c_str(),
                      gguf::TypeName(t.type), matrix ? "" : " (norms: F32, F16, BF16)");
    }
    if (widened) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' is %s, which TinyAI runs as F32: read in place it "
                      "cannot be widened; convert the file once (tinyai-convert --from gguf '%s' OUT.tmai)", source,
                      Printable(t.name).c_str(), gguf::TypeName(t.type), source);
    }
    if (t.n_dims != (matrix ? 2u : 1u)) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' is %u-dimensional; a %s is %d-dimensional", source,
                      Printable(t.name).c_str(), t.n_dims, matrix ? "matrix" : "vector", matrix ? 2 : 1);
    }
    if (t.name.size >= tmai::kTensorNameCapacity) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor name '%s' is longer than %u bytes; convert the file once "
                      "(tinyai-convert --from gguf '%s' OUT.tmai)", source, Printable(t.name).c_str(),
                      tmai::kTensorNameCapacity - 1, source);
    }
    if (t.offset % 32 != 0) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' starts at %llu, not a multiple of 32 "
                      "(general.alignment %llu): read in place its rows would be misaligned; convert the file once "
                      "(tinyai-convert --from gguf '%s' OUT.tmai)", source, Printable(t.name).c_str(),
                      static_cast<unsigned long long>(t.offset), static_cast<unsigned long long>(h.alignment), source);
    }
    order[kept++] = static_cast<uint32_t>(i);
  }
  const TensorView* ts = h.tensors.data();
  const int32_t* lo = layer_of.data();
  std::sort(order.begin(), order.begin() + kept, [ts, lo](uint32_t a, uint32_t b) {
    return lo[a] != lo[b] ? lo[a] < lo[b] : ts[a].offset < ts[b].offset;
  });

  Array<tmai::LayerEntry> layers;
  Array<tmai::TensorEntry> tensors;
  TINYAI_RETURN_IF_ERROR(layers.Allocate(static_cast<size_t>(layer_count), "in-place layer table"));
  TINYAI_RETURN_IF_ERROR(tensors.Allocate(kept, "in-place tensor directory"));
  std::memset(layers.data(), 0, layers.size() * sizeof(tmai::LayerEntry));
  if (kept > 0) std::memset(tensors.data(), 0, tensors.size() * sizeof(tmai::TensorEntry));
  size_t next = 0;
  for (int32_t l = 0; l < layer_count; ++l) {
    tmai::LayerEntry& le = layers[static_cast<size_t>(l)];
    le.kind = l == 0 ? TINYAI_LAYER_EMBEDDING : l == layer_count - 1 ? TINYAI_LAYER_OUTPUT : TINYAI_LAYER_TRANSFORMER;
    le.block_index = le.kind == TINYAI_LAYER_TRANSFORMER ? l - 1 : -1;
    le.first_tensor = static_cast<uint32_t>(next);
    uint64_t decoded = 0, end = 0;
    for (; next < kept && lo[order[next]] == l; ++next) {
      const TensorView& t = ts[order[next]];
      tmai::TensorEntry& e = tensors[next];
      bool matrix = t.n_dims == 2, widened = false;
      std::memcpy(e.name, t.name.data, t.name.size);
      e.role = role_of[order[next]];
      e.layer = static_cast<uint16_t>(l);
      e.dtype = static_cast<uint8_t>(GgufTensorDType(t.type, matrix, &widened));
      e.codec = TINYAI_CODEC_NONE;
      e.ndims = static_cast<uint8_t>(t.n_dims);
      e.shape[0] = matrix ? t.dims[1] : t.dims[0];
      if (matrix) e.shape[1] = t.dims[0];
      bool overflow = false;
      const uint64_t bytes = tmai::DecodedBytes(e.dtype, e.shape, e.ndims, &overflow);
      if (overflow || bytes != t.bytes) {
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': tensor '%s' holds %llu bytes; as %s it would need %llu", source,
                        Printable(t.name).c_str(), static_cast<unsigned long long>(t.bytes),
                        tinyaiDTypeName(static_cast<TinyAIDType>(e.dtype)), static_cast<unsigned long long>(bytes));
      }
      e.offset = t.offset;
      e.stored_size = e.decoded_size = t.bytes;
      decoded = AlignUp(decoded, tmai::kDataAlignment);
      e.decoded_offset = decoded;
      decoded += t.bytes;
      if (le.tensor_count == 0) le.offset = t.offset;
      end = t.offset + t.bytes;
      ++le.tensor_count;
    }
    if (le.tensor_count == 0) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': %s has no tensors", source,
                      l == 0 ? "the embedding ('token_embd.weight')" : l == layer_count - 1 ? "the output ('output_norm.weight')" : "a block");
    }
    le.stored_size = end - le.offset;
    le.decoded_size = decoded;
  }

  // The metadata, measured then written, and the index sealed around it.
  MetaSink measure(nullptr);
  EmitMetadata(plan, &measure);
  if (measure.size() > UINT32_MAX) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': its metadata takes %llu bytes; TinyAI's index holds at most 4 GiB",
                    source, static_cast<unsigned long long>(measure.size()));
  }
  Array<uint8_t> meta;
  TINYAI_RETURN_IF_ERROR(meta.Allocate(static_cast<size_t>(measure.size()), "in-place metadata"));
  MetaSink write(meta.data());
  EmitMetadata(plan, &write);
  write.Finish();
  const tmai::IndexLayout layout =
      tmai::LayOutIndex(meta.size(), layers.size(), tensors.size(), tmai::kDataAlignment);
  TINYAI_RETURN_IF_ERROR(index->Allocate(static_cast<size_t>(layout.data_offset), "in-place index",
                                         AlignedBuffer::kUninitialized));
  tmai::SealIndex(layout, meta.data(), layers.data(), static_cast<uint32_t>(layers.size()), tensors.data(),
                  static_cast<uint32_t>(tensors.size()), file_size, tmai::kVersionMajor, tmai::kVersionMinor,
                  static_cast<uint8_t*>(index->data()), tmai::kHeaderFlagInPlace);
  *index_size = layout.data_offset;
  return TINYAI_OK;
}

}  // namespace tinyai
