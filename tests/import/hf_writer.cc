#include "import/hf_writer.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "import/gguf_writer.h"

namespace tinyai {
namespace testing {

namespace {

// ---- protobuf's wire format (developers.google.com/protocol-buffers/docs/encoding)

void Varint(std::vector<uint8_t>* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<uint8_t>(v));
}

void Key(std::vector<uint8_t>* out, uint32_t field, uint32_t wire) { Varint(out, (field << 3) | wire); }

void Int(std::vector<uint8_t>* out, uint32_t field, int64_t v) {  // int32, enum, bool: varint (negatives sign-extended)
  Key(out, field, 0);
  Varint(out, static_cast<uint64_t>(v));
}

void Bytes(std::vector<uint8_t>* out, uint32_t field, const void* data, size_t n) {
  Key(out, field, 2);
  Varint(out, n);
  const uint8_t* p = static_cast<const uint8_t*>(data);
  out->insert(out->end(), p, p + n);
}

void Float(std::vector<uint8_t>* out, uint32_t field, float v) {
  Key(out, field, 5);
  uint8_t b[4];
  std::memcpy(b, &v, 4);
  out->insert(out->end(), b, b + 4);
}

std::string JsonEscaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string Float9(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

// Meta's (and llama2.c's) interleaved rotary rows to Hugging Face's: HF row
// h * head + c * head / 2 + i holds Meta row h * head + 2 * i + c.
std::vector<float> ToHfRotary(const std::vector<float>& meta, uint64_t rows, uint64_t cols, uint64_t heads) {
  std::vector<float> hf(meta.size());
  const uint64_t head = rows / heads;
  for (uint64_t h = 0; h < heads; ++h) {
    for (uint64_t i = 0; i < head / 2; ++i) {
      for (uint64_t c = 0; c < 2; ++c) {
        std::memcpy(hf.data() + (h * head + c * head / 2 + i) * cols, meta.data() + (h * head + 2 * i + c) * cols,
                    cols * sizeof(float));
      }
    }
  }
  return hf;
}

}  // namespace

std::string SafetensorsHeader(const std::vector<SafetensorsEntry>& entries,
                              const std::vector<std::pair<std::string, std::string>>& metadata,
                              const std::string& extra) {
  std::string h = "{";
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    for (size_t i = 0; i < metadata.size(); ++i) {
      h += (i ? "," : "") + std::string("\"") + JsonEscaped(metadata[i].first) + "\":\"" + JsonEscaped(metadata[i].second) + "\"";
    }
    h += "}";
  }
  uint64_t at = 0;
  for (const SafetensorsEntry& e : entries) {
    if (h.size() > 1) h += ",";
    h += "\"" + JsonEscaped(e.name) + "\":{\"dtype\":\"" + e.dtype + "\",\"shape\":[";
    for (size_t i = 0; i < e.shape.size(); ++i) h += (i ? "," : "") + std::to_string(e.shape[i]);
    h += "],\"data_offsets\":[" + std::to_string(at) + "," + std::to_string(at + e.bytes) + "]}";
    at += e.bytes;
  }
  h += extra + "}";
  while ((8 + h.size()) % 8 != 0) h += ' ';  // as the reference writer pads
  return h;
}

std::vector<uint8_t> SafetensorsBytes(const std::vector<SafetensorsEntry>& entries) {
  const std::string h = SafetensorsHeader(entries);
  std::vector<uint8_t> out(8 + h.size());
  const uint64_t n = h.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, h.data(), h.size());
  for (const SafetensorsEntry& e : entries) {
    const std::vector<uint8_t> d = e.data();
    const size_t at = out.size();
    out.resize(at + d.size());
    if (!d.empty()) std::memcpy(out.data() + at, d.data(), d.size());
  }
  return out;
}

bool WriteSafetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries) {
  const std::string h = SafetensorsHeader(entries);
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = h.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const SafetensorsEntry& e : entries) {
    const std::vector<uint8_t> d = e.data();
    if (d.size() != e.bytes) return false;
    out.write(reinterpret_cast<const char*>(d.data()), static_cast<std::streamsize>(d.size()));
  }
  return static_cast<bool>(out);
}

std::vector<uint8_t> TokenizerModel(const LlamaSource& s, const TokenizerModelOptions& o) {
  std::vector<uint8_t> model;
  const std::vector<std::string> pieces = SentencePiecePieces(s);
  for (size_t i = 0; i < pieces.size(); ++i) {
    std::vector<uint8_t> piece;
    Bytes(&piece, 1, pieces[i].data(), pieces[i].size());
    Float(&piece, 2, s.scores[i]);
    Int(&piece, 3, TokenType(s, i));
    Bytes(&model, 1, piece.data(), piece.size());
  }
  std::vector<uint8_t> trainer;
  Int(&trainer, 3, o.model_type);
  Int(&trainer, 4, static_cast<int64_t>(pieces.size()));
  Int(&trainer, 35, o.byte_fallback ? 1 : 0);
  Int(&trainer, 40, 0);
  Int(&trainer, 41, s.bos);
  Int(&trainer, 42, s.eos);
  Int(&trainer, 43, -1);
  Bytes(&model, 2, trainer.data(), trainer.size());
  std::vector<uint8_t> normalizer;
  Bytes(&normalizer, 1, "identity", 8);
  Int(&normalizer, 3, 1);  // add_dummy_prefix
  Int(&normalizer, 4, o.remove_extra_whitespaces ? 1 : 0);
  Int(&normalizer, 5, 1);  // escape_whitespaces
  Bytes(&model, 3, normalizer.data(), normalizer.size());
  return model;
}

std::string HfName(const std::string& tmai) {
  if (tmai == "token_embd") return "model.embed_tokens.weight";
  if (tmai == "output_norm") return "model.norm.weight";
  if (tmai == "output") return "lm_head.weight";
  const size_t dot = tmai.find('.', 4);
  const std::string layer = tmai.substr(4, dot - 4);
  std::string kind = tmai.substr(dot + 1);
  // Qwen2's biases: attn_q_bias -> self_attn.q_proj.bias.
  const bool bias = kind.size() > 5 && kind.compare(kind.size() - 5, 5, "_bias") == 0;
  if (bias) kind.resize(kind.size() - 5);
  const char* hf = kind == "attn_norm"  ? "input_layernorm"
                   : kind == "attn_q"   ? "self_attn.q_proj"
                   : kind == "attn_k"   ? "self_attn.k_proj"
                   : kind == "attn_v"   ? "self_attn.v_proj"
                   : kind == "attn_out" ? "self_attn.o_proj"
                   : kind == "ffn_norm" ? "post_attention_layernorm"
                   : kind == "ffn_gate" ? "mlp.gate_proj"
                   : kind == "ffn_up"   ? "mlp.up_proj"
                                        : "mlp.down_proj";
  return "model.layers." + layer + "." + hf + (bias ? ".bias" : ".weight");
}

std::vector<SafetensorsEntry> HfEntries(const LlamaSource& s, const HfOptions& o) {
  const LlamaHyperParams& p = s.params;
  // The tensors, then in transformers' order: the embedding, each layer's, the norm, lm_head.
  std::vector<SafetensorsEntry> entries;
  const uint64_t each = o.dtype == "F32" ? 4 : 2;
  for (const TensorName& t : LlamaTensors(p)) {
    SafetensorsEntry e;
    e.name = HfName(t.name);
    e.dtype = o.dtype;
    e.shape = t.matrix ? std::vector<uint64_t>{t.rows, t.cols} : std::vector<uint64_t>{t.cols};
    e.bytes = t.rows * t.cols * each;
    auto ends = [&t](const char* suffix) {
      const size_t n = std::strlen(suffix);
      return t.name.size() > n && t.name.compare(t.name.size() - n, n, suffix) == 0;
    };
    const bool q = ends(".attn_q") || ends(".attn_q_bias"), k = ends(".attn_k") || ends(".attn_k_bias");
    const uint64_t heads = q ? p.heads : k ? p.kv_heads : 0;
    const LlamaSource* source = &s;
    const std::string dtype = o.dtype, name = t.name;
    const bool permute = o.permute;
    // A bias is permuted value by value.
    const uint64_t rows = t.matrix ? t.rows : t.cols, cols = t.matrix ? t.cols : 1;
    e.data = [source, dtype, name, heads, permute, rows, cols] {
      std::vector<float> v = source->tensor(name);
      if (v.size() != rows * cols) return std::vector<uint8_t>();  // WriteSafetensors fails on the size
      if (heads > 0 && permute) v = ToHfRotary(v, rows, cols, heads);
      return dtype == "F32" ? EncodeF32(v.data(), v.size())
             : dtype == "F16" ? EncodeF16(v.data(), v.size())
                              : EncodeBF16(v.data(), v.size());
    };
    entries.push_back(std::move(e));
  }
  // Layers as transformers orders them: embedding first, then by layer.
  std::vector<SafetensorsEntry> ordered;
  ordered.push_back(entries[0]);
  for (int32_t l = 0; l < p.layers; ++l) {
    const std::string prefix = "model.layers." + std::to_string(l) + ".";
    for (const SafetensorsEntry& e : entries) {
      if (e.name.compare(0, prefix.size(), prefix) == 0) ordered.push_back(e);
    }
  }
  for (const SafetensorsEntry& e : entries) {
    if (e.name == "model.norm.weight" || e.name == "lm_head.weight") ordered.push_back(e);
  }
  return ordered;
}

bool WriteHfCheckpoint(const LlamaSource& s, const HfOptions& o, const std::string& dir, std::string* error) {
  if (o.dtype != "F32" && o.dtype != "F16" && o.dtype != "BF16") return *error = "dtype " + o.dtype, false;
  const LlamaHyperParams& p = s.params;
  {
    std::ofstream config(dir + "/config.json");
    config << "{\n  \"architectures\": [\"" << (p.qkv_bias ? "Qwen2ForCausalLM" : "LlamaForCausalLM")
           << "\"],\n  \"model_type\": \"" << (p.qkv_bias ? "qwen2" : "llama") << "\",\n"
           << "  \"hidden_size\": " << p.dim << ",\n  \"intermediate_size\": " << p.hidden_dim << ",\n"
           << "  \"num_hidden_layers\": " << p.layers << ",\n  \"num_attention_heads\": " << p.heads << ",\n"
           << "  \"num_key_value_heads\": " << p.kv_heads << ",\n  \"max_position_embeddings\": " << p.seq_len << ",\n"
           << "  \"vocab_size\": " << p.vocab_size << ",\n  \"rms_norm_eps\": " << Float9(p.norm_eps) << ",\n"
           << "  \"rope_theta\": " << Float9(p.rope_theta) << ",\n  \"hidden_act\": \"silu\",\n"
           << "  \"tie_word_embeddings\": " << (p.shared_classifier ? "true" : "false") << ",\n"
           << "  \"bos_token_id\": " << s.bos << ",\n  \"eos_token_id\": " << s.eos << ",\n"
           << "  \"rope_scaling\": "
           << (p.rope_linear_factor != 1.0f ? "{\"rope_type\": \"linear\", \"factor\": " + Float9(p.rope_linear_factor) + "}"
                                             : std::string("null"))
           << ",\n  \"torch_dtype\": \""
           << (o.dtype == "F32" ? "float32" : o.dtype == "F16" ? "float16" : "bfloat16") << "\",\n"
           << "  \"_name_or_path\": \"" << JsonEscaped(s.name) << "\"" << (o.config_extra.empty() ? "" : ",\n  ")
           << o.config_extra << "\n}\n";
    if (!config) return *error = "cannot write " + dir + "/config.json", false;
  }
  {
    const std::vector<uint8_t> tok = TokenizerModel(s, o.tokenizer);
    std::ofstream out(dir + "/tokenizer.model", std::ios::binary);
    out.write(reinterpret_cast<const char*>(tok.data()), static_cast<std::streamsize>(tok.size()));
    if (!out) return *error = "cannot write " + dir + "/tokenizer.model", false;
  }
  const std::vector<SafetensorsEntry> ordered = HfEntries(s, o);
  if (o.shards <= 1) {
    if (!WriteSafetensors(dir + "/model.safetensors", ordered)) return *error = "cannot write model.safetensors", false;
    return true;
  }
  // Shards of about equal size, and the index naming each tensor's.
  uint64_t total = 0;
  for (const SafetensorsEntry& e : ordered) total += e.bytes;
  std::vector<std::vector<SafetensorsEntry>> shards(static_cast<size_t>(o.shards));
  uint64_t at = 0;
  for (const SafetensorsEntry& e : ordered) {
    size_t k = static_cast<size_t>(at * static_cast<uint64_t>(o.shards) / (total + 1));
    shards[k].push_back(e);
    at += e.bytes;
  }
  std::string index = "{\n  \"metadata\": {\"total_size\": " + std::to_string(total) + "},\n  \"weight_map\": {\n";
  bool first = true;
  for (size_t k = 0; k < shards.size(); ++k) {
    char file[64];
    std::snprintf(file, sizeof file, "model-%05zu-of-%05d.safetensors", k + 1, o.shards);
    if (!WriteSafetensors(dir + "/" + file, shards[k])) return *error = std::string("cannot write ") + file, false;
    for (const SafetensorsEntry& e : shards[k]) {
      index += std::string(first ? "" : ",\n") + "    \"" + e.name + "\": \"" + file + "\"";
      first = false;
    }
  }
  index += "\n  }\n}\n";
  std::ofstream out(dir + "/model.safetensors.index.json");
  out << index;
  if (!out) return *error = "cannot write the index", false;
  return true;
}

}  // namespace testing
}  // namespace tinyai
