// The one set of limits a model must keep for the runtime to run it. Both
// sides check them from these constants: the converters and builders
// (format/model_builder.cc) refuse to write a model outside them, naming the
// field and the limit, and the reader and runtime (format/tmai_reader.cc,
// model/llama.cc, model/dense_spec.cc, text/tokenizer.cc through llama.cc)
// refuse a file outside them with a specific status. The tools bound their
// numbers with them too (tools/common/cli.h).
#ifndef TINYAI_FORMAT_LIMITS_H_
#define TINYAI_FORMAT_LIMITS_H_

#include <cstdint>

#include "format/tmai_format.h"

namespace tinyai {
namespace limits {

// ---- llama models (llama.* metadata) ----------------------------------------
constexpr int32_t kMaxLlamaDim = 1 << 20;        // llama.dim: 1 .. this
constexpr int32_t kMaxLlamaHiddenDim = 1 << 20;  // llama.hidden_dim: 1 .. this
constexpr int32_t kMaxLlamaLayers = 4096;        // llama.layers (transformer blocks): 1 .. this
constexpr int32_t kMaxLlamaHeads = 4096;         // llama.heads and llama.kv_heads: 1 .. this
constexpr int32_t kMaxSeqLen = 1 << 20;          // llama.seq_len: 1 .. this; the most context a tool takes
// llama.norm_eps: strictly between 0 and 1; llama.rope_theta: finite and
// above 1 (a base of 1 or less turns the rotary embedding off or inverts it).
inline bool NormEpsInRange(float v) { return v > 0.0f && v < 1.0f; }
inline bool RopeThetaInRange(float v) { return v > 1.0f && v <= 3.4028234663852886e38f; }
// llama.vocab_size: kMinVocab .. kMaxVocab. Ids 0, 1 (BOS) and 2 (EOS) must
// exist: the converters write tokenizer.bos_id 1 and tokenizer.eos_id 2.
constexpr int32_t kMinVocab = 3;
constexpr int32_t kMaxVocab = 1 << 24;
// A byte-level BPE vocabulary's merges (Llama 3 has 280,147).
constexpr int32_t kMaxBpeMerges = 1 << 24;

// ---- tokenizer (tokenizer.* metadata) ---------------------------------------
// Every piece has 1 .. kMaxPieceBytes bytes (tokenizer.max_token_length is at
// most this; without it, pieces are still bounded by it). Scores are finite.
constexpr uint32_t kMaxPieceBytes = 65536;

// ---- dense networks (dense.* metadata) -------------------------------------
constexpr int32_t kMaxDenseWidth = 1 << 24;                // dense.input_dim and every layer's out: 1 .. this
constexpr uint32_t kMaxDenseLayers = tmai::kMaxLayers;     // dense.layers: 1 .. this
constexpr int32_t kMaxDenseInputs = 64;                    // inputs one layer sums, each a different producer
constexpr int64_t kMaxDenseOutputWidth = INT32_MAX;        // the network's output: the sum of its output layers' out

}  // namespace limits
}  // namespace tinyai

#endif  // TINYAI_FORMAT_LIMITS_H_
