// The LLaMA architecture's hyper-parameters and the metadata keys that hold
// them in a .tmai (docs/format.md, "llama"): one struct and one set of names
// for the runtime's reader (model/llama.cc), the builders that write models
// (src/import/) and every importer to come.
#ifndef TINYAI_FORMAT_LLAMA_PARAMS_H_
#define TINYAI_FORMAT_LLAMA_PARAMS_H_

#include <cstddef>
#include <cstdint>

#include "tinyai/status.h"

namespace tinyai {

class TmaiReader;

namespace llama_key {
constexpr const char kArchitecture[] = "llama";  // general.architecture
constexpr const char kDim[] = "llama.dim";
constexpr const char kHiddenDim[] = "llama.hidden_dim";
constexpr const char kLayers[] = "llama.layers";
constexpr const char kHeads[] = "llama.heads";
constexpr const char kKvHeads[] = "llama.kv_heads";
constexpr const char kVocabSize[] = "llama.vocab_size";
constexpr const char kSeqLen[] = "llama.seq_len";
constexpr const char kSharedClassifier[] = "llama.shared_classifier";
constexpr const char kNormEps[] = "llama.norm_eps";      // optional, default 1e-5
constexpr const char kRopeTheta[] = "llama.rope_theta";  // optional, default 10000
// Linear RoPE scaling (position interpolation): each rotary angle is
// position * frequency / factor, as llama.cpp's rope_freq_scale = 1 / factor.
// Optional, default 1 (no scaling); written only when it is not 1.
constexpr const char kRopeLinearFactor[] = "llama.rope_linear_factor";
// Per-frequency RoPE factors (Llama 3's scaling; GGUF's rope_freqs.weight):
// a float array of head_size / 2 values, each finite and positive; pair i's
// angle is position * frequency_i / factor_i (then the linear factor's
// scaling). Optional: absent, every factor is 1.
constexpr const char kRopeFreqFactors[] = "llama.rope_freq_factors";
// 1: every block has biases on q, k and v (tensors attn_q_bias, attn_k_bias,
// attn_v_bias; Qwen2), added before the rotary embedding. Optional,
// default 0; written only when 1.
constexpr const char kQkvBias[] = "llama.qkv_bias";
// 1: each head's rotary pairs are its halves, dimension i with i + head_size
// / 2 (GPT-NeoX's layout, llama.cpp's NEOX rope type: Qwen2), instead of
// neighbours 2i and 2i + 1. A GGUF file read in place says so; a conversion
// permutes q's and k's rows into neighbours instead. Optional, default 0.
constexpr const char kRopeNeox[] = "llama.rope_neox";
}  // namespace llama_key

// The linear RoPE factors the runtime runs: 1/65536 .. 65536 (real models
// use 2 .. 32; beyond the range an angle, or its reciprocal, leaves float).
inline bool RopeLinearFactorInRange(float v) { return v >= 1.0f / 65536.0f && v <= 65536.0f; }

struct LlamaHyperParams {
  int32_t dim = 0;
  int32_t hidden_dim = 0;
  int32_t layers = 0;
  int32_t heads = 0;
  int32_t kv_heads = 0;
  int32_t vocab_size = 0;
  int32_t seq_len = 0;
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  float rope_linear_factor = 1.0f;  // llama_key::kRopeLinearFactor: positions are divided by it
  bool shared_classifier = true;  // the classifier is the token embedding
  bool qkv_bias = false;          // llama_key::kQkvBias
  bool rope_neox = false;         // llama_key::kRopeNeox

  int32_t head_size() const { return heads > 0 ? dim / heads : 0; }
  int32_t kv_dim() const { return head_size() * kv_heads; }

  // Reads and checks the "llama.*" metadata of a model whose
  // general.architecture is "llama": TINYAI_ERR_BAD_FORMAT names a value
  // outside what the runtime runs (format/limits.h, RopeLinearFactorInRange)
  // or heads that do not divide dim evenly; TINYAI_ERR_UNSUPPORTED another
  // architecture.
  TinyAIStatus Load(const TmaiReader& reader);
};

// The integer hyper-parameters with their keys and the range the runtime
// runs (format/limits.h), in the order the format lists them.
struct LlamaDimField {
  const char* key;
  int32_t LlamaHyperParams::*field;
  int32_t min;
  int32_t max;
};
constexpr size_t kLlamaDimFields = 7;
extern const LlamaDimField kLlamaDims[kLlamaDimFields];

}  // namespace tinyai

#endif  // TINYAI_FORMAT_LLAMA_PARAMS_H_
