#include "import/gguf_vocab.h"

#include <cstring>

#include "common/printable.h"
#include "common/status.h"
#include "format/gguf_index.h"
#include "format/limits.h"
#include "import/builder.h"
#include "text/bpe_tokenizer.h"
#include "text/text_tokenizer.h"

namespace tinyai {

namespace {

// A bool key: *out keeps its default when the key is absent.
TinyAIStatus GetBool(const gguf::File& f, const char* key, bool* out) {
  const gguf::KeyValue* kv = f.Find(key);
  if (kv == nullptr) return TINYAI_OK;
  if (kv->value.type != gguf::kBool) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': key '%s' is not a bool", f.source.c_str(), key);
  }
  *out = f.data[kv->value.offset] != 0;
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

// An optional token id key: -1 when absent; refused outside the vocabulary.
TinyAIStatus TokenIdKey(const gguf::File& f, const char* key, size_t vocab, int64_t* out) {
  bool found = false;
  TINYAI_RETURN_IF_ERROR(f.GetInt(key, out, &found));
  if (!found) {
    *out = -1;
    return TINYAI_OK;
  }
  if (*out < 0 || static_cast<uint64_t>(*out) >= vocab) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': %s is %lld, not a token (%zu tokens)", f.source.c_str(), key,
                    static_cast<long long>(*out), vocab);
  }
  return TINYAI_OK;
}

TinyAIStatus ReadSentencePiece(const gguf::File& f, GgufVocab* v) {
  const char* path = f.source.c_str();
  bool found = false;
  // TinyAI's SentencePiece tokenizer always adds the dummy prefix (a space
  // before the text); a vocabulary that does not would encode otherwise.
  bool add_space = true;
  TINYAI_RETURN_IF_ERROR(GetBool(f, "tokenizer.ggml.add_space_prefix", &add_space));
  if (!add_space) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tokenizer.ggml.add_space_prefix is false; TinyAI's tokenizer "
                    "always adds the dummy-prefix space (as LLaMA's SentencePiece model does)", path);
  }
  TINYAI_RETURN_IF_ERROR(f.GetFloats("tokenizer.ggml.scores", limits::kMaxVocab, &v->scores, &found));
  if (!found) return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': no key 'tokenizer.ggml.scores'", path);
  if (v->scores.size() != v->tokens.size()) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': %zu tokens but %zu scores", path, v->tokens.size(),
                    v->scores.size());
  }
  v->bos = 1;
  v->eos = 2;
  TINYAI_RETURN_IF_ERROR(f.GetInt("tokenizer.ggml.bos_token_id", &v->bos, &found));
  TINYAI_RETURN_IF_ERROR(f.GetInt("tokenizer.ggml.eos_token_id", &v->eos, &found));
  const int64_t n = static_cast<int64_t>(v->tokens.size());
  if (v->bos < 0 || v->eos < 0 || v->bos >= n || v->eos >= n) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': BOS %lld or EOS %lld is not a token (%lld tokens)", path,
                    static_cast<long long>(v->bos), static_cast<long long>(v->eos), static_cast<long long>(n));
  }
  for (std::string& p : v->tokens) SpacesFromSentencePiece(&p);
  TinyAIStatus ts = CheckTokenizerPieces(v->tokens, v->scores);
  if (ts != TINYAI_OK) return AddErrorContext(ts, "'%s': ", path);
  return CheckByteFallback(f, v->tokens);
}

// Texts llama.cpp makes control tokens whatever the file says (the
// runtime's list, format/gguf_index.h).
bool ControlByText(const std::string& t) { return GgufControlByText(t.data(), t.size()); }

TinyAIStatus ReadBytePairs(const gguf::File& f, GgufVocab* v) {
  const char* path = f.source.c_str();
  bool found = false;
  TINYAI_RETURN_IF_ERROR(f.GetString("tokenizer.ggml.pre", &v->pre, &found));
  if (!found) {
    // llama.cpp falls back to GPT-2's regex with a warning; the model's own
    // may differ, so its ids would: refused.
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': no key 'tokenizer.ggml.pre': a byte-level BPE vocabulary names "
                    "its pre-tokenizer (llama-bpe, qwen2, smollm, gpt-2, ...); convert the model with a recent "
                    "llama.cpp convert_hf_to_gguf.py", path);
  }
  BpePre pre;
  TinyAIStatus known = BpePreFromName(v->pre.c_str(), &pre);
  if (known != TINYAI_OK) return AddErrorContext(known, "'%s': tokenizer.ggml.pre: ", path);
  std::vector<int64_t> types;
  TINYAI_RETURN_IF_ERROR(f.GetInts("tokenizer.ggml.token_type", limits::kMaxVocab, &types, &found));
  if (found && types.size() != v->tokens.size()) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': %zu token types for %zu tokens", path, types.size(),
                    v->tokens.size());
  }
  v->types.resize(types.size());
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] < kBpeTokenNormal || types[i] > kBpeTokenByte) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': token %zu ('%s') has token type %lld; types are 1..6", path,
                      i, Printable(v->tokens[i]).c_str(), static_cast<long long>(types[i]));
    }
    v->types[i] = static_cast<int32_t>(types[i]);
  }
  TINYAI_RETURN_IF_ERROR(f.GetStrings("tokenizer.ggml.merges", limits::kMaxBpeMerges, &v->merges, &found));
  if (!found) return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': no key 'tokenizer.ggml.merges'", path);
  const size_t n = v->tokens.size();
  TINYAI_RETURN_IF_ERROR(TokenIdKey(f, "tokenizer.ggml.bos_token_id", n, &v->bos));
  TINYAI_RETURN_IF_ERROR(TokenIdKey(f, "tokenizer.ggml.eos_token_id", n, &v->eos));
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    int64_t id = -1;
    TINYAI_RETURN_IF_ERROR(TokenIdKey(f, key, n, &id));
    if (id >= 0) v->eog.push_back(static_cast<int32_t>(id));
  }
  // llama.cpp's defaults: Llama 3's pre-tokenizers add BOS, the others not.
  v->add_bos = pre == BpePre::kLlama3;
  v->add_eos = false;
  TINYAI_RETURN_IF_ERROR(GetBool(f, "tokenizer.ggml.add_bos_token", &v->add_bos));
  TINYAI_RETURN_IF_ERROR(GetBool(f, "tokenizer.ggml.add_eos_token", &v->add_eos));
  v->nfc = pre == BpePre::kQwen2;
  return CheckByteLevelVocab(path, v);
}

std::vector<float> AsFloats(const std::vector<int32_t>& ints) {
  std::vector<float> out(ints.size());
  for (size_t i = 0; i < ints.size(); ++i) out[i] = static_cast<float>(ints[i]);
  return out;
}

}  // namespace

TinyAIStatus CheckByteLevelVocab(const char* path, GgufVocab* v) {
  for (size_t i = 0; i < v->types.size(); ++i) {
    if (ControlByText(v->tokens[i])) v->types[i] = kBpeTokenControl;
  }
  // The runtime's own checks, now rather than when the model is first run.
  const size_t n = v->tokens.size();
  std::vector<StringView> tokens(n), merges(v->merges.size());
  for (size_t i = 0; i < n; ++i) tokens[i] = StringView{v->tokens[i].data(), v->tokens[i].size()};
  for (size_t i = 0; i < merges.size(); ++i) merges[i] = StringView{v->merges[i].data(), v->merges[i].size()};
  BpeVocab bv;
  bv.tokens = Span<const StringView>(tokens.data(), tokens.size());
  bv.types = Span<const int32_t>(v->types.data(), v->types.size());
  bv.merges = Span<const StringView>(merges.data(), merges.size());
  bv.pre = v->pre.c_str();
  bv.bos = static_cast<int32_t>(v->bos);
  bv.eos = static_cast<int32_t>(v->eos);
  bv.add_bos = v->add_bos;
  bv.add_eos = v->add_eos;
  bv.nfc = v->nfc;
  TextTokenizer check;
  TinyAIStatus s = check.InitBytePairs(bv, Span<const int32_t>(v->eog.data(), v->eog.size()));
  if (s != TINYAI_OK) return AddErrorContext(s, "'%s': ", path);
  return TINYAI_OK;
}

TinyAIStatus ReadGgufVocab(const gguf::File& f, GgufVocab* v) {
  const char* path = f.source.c_str();
  std::string model;
  bool found = false;
  TINYAI_RETURN_IF_ERROR(f.GetString("tokenizer.ggml.model", &model, &found));
  if (!found) return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': no key 'tokenizer.ggml.model'", path);
  if (model != "llama" && model != "gpt2") {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tokenizer '%s'; TinyAI imports SentencePiece vocabularies "
                    "(tokenizer.ggml.model 'llama') and byte-level BPE ('gpt2')", path, Printable(model).c_str());
  }
  v->byte_pairs = model == "gpt2";
  TINYAI_RETURN_IF_ERROR(f.GetString("tokenizer.chat_template", &v->chat_template, &found));
  TINYAI_RETURN_IF_ERROR(f.GetStrings("tokenizer.ggml.tokens", limits::kMaxVocab, &v->tokens, &found));
  if (!found) return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': no key 'tokenizer.ggml.tokens'", path);
  if (v->tokens.size() > static_cast<size_t>(INT32_MAX)) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': %zu tokens", path, v->tokens.size());
  }
  // Whether a text starts with BOS and ends with EOS (llama.cpp's defaults
  // for a SentencePiece vocabulary: BOS yes, EOS no): recorded, and the
  // runtime follows them (tokenizer.add_bos, tokenizer.add_eos).
  if (!v->byte_pairs) {
    v->add_bos = true;
    v->add_eos = false;
    TINYAI_RETURN_IF_ERROR(GetBool(f, "tokenizer.ggml.add_bos_token", &v->add_bos));
    TINYAI_RETURN_IF_ERROR(GetBool(f, "tokenizer.ggml.add_eos_token", &v->add_eos));
    return ReadSentencePiece(f, v);
  }
  return ReadBytePairs(f, v);
}

void AddVocabMetadata(TmaiWriter* w, const GgufVocab& v) {
  if (!v.chat_template.empty()) w->AddMetaString("tokenizer.chat_template", v.chat_template);
  if (!v.byte_pairs) {
    AddTokenizerMetadata(w, v.tokens, v.scores, v.bos, v.eos, v.add_bos, v.add_eos);
    return;
  }
  size_t max_len = 0;
  for (const std::string& t : v.tokens) max_len = t.size() > max_len ? t.size() : max_len;
  w->AddMetaString("tokenizer.model", "gpt2");
  w->AddMetaStringArray("tokenizer.tokens", v.tokens);
  if (!v.types.empty()) w->AddMetaFloatArray("tokenizer.token_types", AsFloats(v.types));
  w->AddMetaStringArray("tokenizer.merges", v.merges);
  w->AddMetaString("tokenizer.pre", v.pre);
  if (v.nfc) w->AddMetaInt("tokenizer.nfc", 1);
  if (v.bos >= 0) w->AddMetaInt("tokenizer.bos_id", v.bos);
  if (v.eos >= 0) w->AddMetaInt("tokenizer.eos_id", v.eos);
  if (!v.eog.empty()) w->AddMetaFloatArray("tokenizer.eog_ids", AsFloats(v.eog));
  w->AddMetaInt("tokenizer.max_token_length", static_cast<int64_t>(max_len));
  // Written both ways: a 'gpt2' vocabulary's default is no BOS.
  w->AddMetaInt("tokenizer.add_bos", v.add_bos ? 1 : 0);
  if (v.add_eos) w->AddMetaInt("tokenizer.add_eos", 1);
}

}  // namespace tinyai
