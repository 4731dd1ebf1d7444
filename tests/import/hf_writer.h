// A Hugging Face LLaMA checkpoint written by the tests from a LLaMA model
// (import/llama_source.h), following the published formats, not TinyAI's
// readers: safetensors files (huggingface/safetensors: an 8-byte header
// length, a JSON header of {name: {dtype, shape, data_offsets}}, padded with
// spaces to 8 bytes, then the data), sharded with model.safetensors.index.json
// when asked, config.json with transformers' LlamaConfig keys, and a
// SentencePiece tokenizer.model (sentencepiece_model.proto's ModelProto in
// protobuf's wire format). q_proj and k_proj rows are permuted to Hugging
// Face's rotary layout, as transformers' convert_llama_weights_to_hf.py
// does: Meta -> HF is w.view(heads, head / 2, 2, cols).transpose(1, 2).
#ifndef TINYAI_TESTS_IMPORT_HF_WRITER_H_
#define TINYAI_TESTS_IMPORT_HF_WRITER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "import/llama_source.h"

namespace tinyai {
namespace testing {

// One tensor of a safetensors file: its bytes made when the file is written.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", ... as written
  std::vector<uint64_t> shape;
  uint64_t bytes = 0;
  std::function<std::vector<uint8_t>()> data;
};

// The header of entries laid out in order (with `metadata` as __metadata__
// when not empty); `extra` is inserted verbatim before the closing brace
// (malformed headers).
std::string SafetensorsHeader(const std::vector<SafetensorsEntry>& entries,
                              const std::vector<std::pair<std::string, std::string>>& metadata = {},
                              const std::string& extra = "");
// A whole file in memory, or streamed to path.
std::vector<uint8_t> SafetensorsBytes(const std::vector<SafetensorsEntry>& entries);
bool WriteSafetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries);

struct TokenizerModelOptions {
  int32_t model_type = 2;  // TrainerSpec.ModelType: 1 UNIGRAM, 2 BPE
  bool byte_fallback = true;
  bool remove_extra_whitespaces = false;  // LLaMA's tokenizer keeps them
};
// The source's vocabulary as a SentencePiece model (SentencePiecePieces'
// spelling; types as TokenType says).
std::vector<uint8_t> TokenizerModel(const LlamaSource& source, const TokenizerModelOptions& options = {});

struct HfOptions {
  std::string dtype = "F32";  // every tensor's: F32, F16 or BF16
  int shards = 1;             // 1: model.safetensors; more: model-0000i-of-0000N.safetensors and the index
  bool permute = true;        // q_proj / k_proj in Hugging Face's rotary layout (false: a broken converter)
  std::string config_extra;   // more "key": value pairs for config.json, e.g. "\"rope_scaling\": {...}"
  TokenizerModelOptions tokenizer;
};

// The weights' entries in transformers' order (the embedding, each layer's,
// the final norm, lm_head).
std::vector<SafetensorsEntry> HfEntries(const LlamaSource& source, const HfOptions& options);

// Writes dir/config.json, dir/tokenizer.model and the weights. False, with
// *error, when the source lacks a tensor or a file cannot be written.
bool WriteHfCheckpoint(const LlamaSource& source, const HfOptions& options, const std::string& dir, std::string* error);

// The Hugging Face name of a .tmai tensor ("blk.0.attn_q" ->
// "model.layers.0.self_attn.q_proj.weight").
std::string HfName(const std::string& tmai);

}  // namespace testing
}  // namespace tinyai

#endif  // TINYAI_TESTS_IMPORT_HF_WRITER_H_
