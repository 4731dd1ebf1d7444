#include "import/hf_vocab.h"

#include <sys/stat.h>

#include <string>
#include <vector>

#include "common/printable.h"
#include "common/status.h"
#include "format/limits.h"
#include "import/json.h"
#include "text/bpe_tokenizer.h"

namespace tinyai {

namespace {

constexpr size_t kMaxTokenizerJsonBytes = 64u << 20;     // Llama 3's: 9 MB
constexpr size_t kMaxTokenizerJsonValues = 16u << 20;    // Qwen2's merges as pairs: about 800,000
constexpr size_t kMaxTokenizerConfigBytes = 16u << 20;   // a few KB (a chat template)
constexpr size_t kMaxTokenizerConfigValues = 1u << 18;

// The pre-tokenizer regexes TinyAI runs (text/bpe_tokenizer.h), as
// tokenizer.json spells them.
constexpr char kLlama3Regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr char kQwen2Regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

std::string TypeOf(const nlohmann::json& j) {
  if (!j.is_object()) return "";
  auto t = j.find("type");
  return t != j.end() && t->is_string() ? t->get<std::string>() : "";
}

bool IsTrue(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

// GGUF's pre-tokenizer name for tokenizer.json's pre_tokenizer, or "".
std::string PreName(const nlohmann::json& pre) {
  const std::string type = TypeOf(pre);
  if (type == "ByteLevel") return IsTrue(pre, "use_regex") ? "gpt-2" : "";
  if (type != "Sequence") return "";
  auto list = pre.find("pretokenizers");
  if (list == pre.end() || !list->is_array() || list->size() != 2) return "";
  const nlohmann::json& first = (*list)[0];
  const nlohmann::json& second = (*list)[1];
  if (TypeOf(second) != "ByteLevel") return "";
  if (TypeOf(first) == "Digits" && IsTrue(first, "individual_digits") && IsTrue(second, "use_regex")) return "smollm";
  if (TypeOf(first) != "Split" || IsTrue(second, "use_regex")) return "";
  auto pattern = first.find("pattern");
  if (pattern == first.end() || !pattern->is_object()) return "";
  auto regex = pattern->find("Regex");
  if (regex == pattern->end() || !regex->is_string()) return "";
  const std::string& r = regex->get_ref<const std::string&>();
  return r == kLlama3Regex ? "llama-bpe" : r == kQwen2Regex ? "qwen2" : "";
}

// tokenizer_config.json's bos_token / eos_token: a string or {"content": ...}.
std::string SpecialText(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  return "";
}

}  // namespace

TinyAIStatus ReadHfByteLevelVocab(const std::string& tokenizer_json, const std::string& tokenizer_config,
                                  int32_t vocab_size, int64_t config_bos, int64_t config_eos, GgufVocab* v) {
  const char* path = tokenizer_json.c_str();
  nlohmann::json j;
  TINYAI_RETURN_IF_ERROR(ReadJsonFile(tokenizer_json, kMaxTokenizerJsonBytes, kMaxTokenizerJsonValues, &j));
  if (!j.is_object()) return SetError(TINYAI_ERR_BAD_FORMAT, "'%s' is %s, not a JSON object", path, JsonKind(j));
  auto model = j.find("model");
  if (model == j.end() || TypeOf(*model) != "BPE") {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': model type '%s'; TinyAI reads byte-level BPE tokenizers (type "
                    "BPE)", path, model == j.end() ? "(none)" : Printable(TypeOf(*model)).c_str());
  }
  v->byte_pairs = true;
  v->tokens.assign(static_cast<size_t>(vocab_size), std::string());
  v->types.assign(static_cast<size_t>(vocab_size), kBpeTokenUnused);
  auto vocab = model->find("vocab");
  if (vocab == model->end() || !vocab->is_object()) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': model.vocab is missing or not an object", path);
  }
  auto place = [&](const std::string& text, const nlohmann::json& id_value, int32_t type) -> TinyAIStatus {
    if (!id_value.is_number_unsigned() || id_value.get<uint64_t>() >= static_cast<uint64_t>(vocab_size)) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': token '%s' has id %s, outside config.json's vocab_size %d",
                      path, Printable(text).c_str(), id_value.dump().c_str(), vocab_size);
    }
    const size_t id = static_cast<size_t>(id_value.get<uint64_t>());
    v->tokens[id] = text;
    v->types[id] = type;
    return TINYAI_OK;
  };
  for (auto it = vocab->begin(); it != vocab->end(); ++it) TINYAI_RETURN_IF_ERROR(place(it.key(), it.value(), kBpeTokenNormal));
  auto added = j.find("added_tokens");
  if (added != j.end() && added->is_array()) {
    for (const nlohmann::json& a : *added) {
      auto content = a.find("content");
      auto id = a.find("id");
      if (!a.is_object() || content == a.end() || !content->is_string() || id == a.end()) {
        return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': an added token without content and id", path);
      }
      TINYAI_RETURN_IF_ERROR(place(content->get<std::string>(), *id,
                                   IsTrue(a, "special") ? kBpeTokenControl : kBpeTokenUserDefined));
    }
  }
  // Ids nobody names: unused padding up to the embedding's rows.
  for (size_t i = 0; i < v->tokens.size(); ++i) {
    if (v->tokens[i].empty()) v->tokens[i] = "[PAD" + std::to_string(i) + "]";
  }
  auto merges = model->find("merges");
  if (merges == model->end() || !merges->is_array()) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': model.merges is missing or not an array", path);
  }
  v->merges.reserve(merges->size());
  for (const nlohmann::json& m : *merges) {
    if (m.is_string()) {
      v->merges.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      v->merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    } else {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': merge %zu is %s; a merge is \"a b\" or [\"a\", \"b\"]", path,
                      v->merges.size(), JsonKind(m));
    }
  }
  // The normalizer: none, or NFC (Qwen2's).
  auto normalizer = j.find("normalizer");
  if (normalizer != j.end() && !normalizer->is_null()) {
    if (TypeOf(*normalizer) != "NFC") {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': normalizer '%s'; TinyAI runs byte-level BPE tokenizers with NFC "
                      "or no normalizer", path, Printable(TypeOf(*normalizer)).c_str());
    }
    v->nfc = true;
  }
  auto pre = j.find("pre_tokenizer");
  v->pre = pre == j.end() ? "" : PreName(*pre);
  if (v->pre.empty()) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': pre_tokenizer %s is none TinyAI runs (Llama 3's and Qwen2's Split "
                    "regexes with ByteLevel, SmolLM's digits with ByteLevel, GPT-2's ByteLevel)", path,
                    pre == j.end() ? "(none)" : Printable(pre->dump().substr(0, 120)).c_str());
  }

  // BOS, EOS, whether a text starts and ends with them (llama.cpp's
  // defaults for the pre-tokenizer, as for GGUF), the chat template.
  v->bos = config_bos;
  v->eos = config_eos;
  v->add_bos = v->pre == "llama-bpe";
  v->add_eos = false;
  struct stat st;
  if (!tokenizer_config.empty() && ::stat(tokenizer_config.c_str(), &st) == 0) {
    nlohmann::json c;
    TINYAI_RETURN_IF_ERROR(ReadJsonFile(tokenizer_config, kMaxTokenizerConfigBytes, kMaxTokenizerConfigValues, &c));
    if (!c.is_object()) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s' is %s, not a JSON object", tokenizer_config.c_str(), JsonKind(c));
    }
    for (const char* key : {"bos_token", "eos_token"}) {
      const std::string text = SpecialText(c, key);
      if (text.empty()) continue;
      int64_t id = -1;
      for (size_t i = 0; i < v->tokens.size() && id < 0; ++i) id = v->tokens[i] == text ? static_cast<int64_t>(i) : -1;
      if (id < 0) {
        return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': %s '%s' is not a token of '%s'", tokenizer_config.c_str(),
                        key, Printable(text).c_str(), path);
      }
      (key[0] == 'b' ? v->bos : v->eos) = id;
    }
    bool found = false;
    for (const char* key : {"add_bos_token", "add_eos_token"}) {
      auto it = c.find(key);
      if (it == c.end() || it->is_null()) continue;
      TINYAI_RETURN_IF_ERROR(JsonBool(c, key, tokenizer_config, key[4] == 'b' ? &v->add_bos : &v->add_eos, &found));
    }
    auto chat = c.find("chat_template");
    if (chat != c.end() && chat->is_string()) {
      v->chat_template = chat->get<std::string>();
    } else if (chat != c.end() && chat->is_array()) {  // named templates: the default one
      for (const nlohmann::json& t : *chat) {
        auto name = t.find("name");
        auto text = t.find("template");
        if (t.is_object() && name != t.end() && *name == "default" && text != t.end() && text->is_string()) {
          v->chat_template = text->get<std::string>();
        }
      }
    }
  }
  return CheckByteLevelVocab(path, v);
}

}  // namespace tinyai
