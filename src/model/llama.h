// The LLaMA forward pass over a mapped .tmai model: RMSNorm, RoPE,
// grouped-query attention with a KV cache, SwiGLU feed-forward, tied or
// separate classifier. Tokens are evaluated in chunks (prompt processing
// reads each weight once per chunk); every buffer is allocated in Init().
//
// Weights are reached layer by layer through the loader (Acquire/Release),
// so the weight cache decides residency, never this code.
#ifndef TINYAI_MODEL_LLAMA_H_
#define TINYAI_MODEL_LLAMA_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/thread_pool.h"
#include "kernels/kernels.h"
#include "loader/mapped_model.h"
#include "text/tokenizer.h"
#include "tinyai/llm.h"

namespace tinyai {

struct LlamaHyperParams {
  int32_t dim = 0;
  int32_t hidden_dim = 0;
  int32_t layers = 0;
  int32_t heads = 0;
  int32_t kv_heads = 0;
  int32_t vocab_size = 0;
  int32_t seq_len = 0;
  int32_t head_size = 0;
  int32_t kv_dim = 0;
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  bool shared_classifier = true;

  // Reads and checks the "llama.*" metadata of a model.
  TinyAIStatus Load(const TmaiReader& reader);
};

class LlamaModel {
 public:
  // Largest number of tokens evaluated together (prompt chunk).
  static constexpr int32_t kMaxChunk = 16;

  LlamaModel() = default;
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;
  ~LlamaModel();

  // kernels may be nullptr for the best table this CPU supports.
  TinyAIStatus Init(TinyAIMappedModel* model, const TinyAILLMConfig& config,
                    const kernels::KernelTable* kernels);

  // Evaluates tokens at positions position() .. position()+count-1. The
  // logits of the last token are then available from logits().
  TinyAIStatus Eval(const int32_t* tokens, int32_t count);
  void Reset() { position_ = 0; }

  int32_t position() const { return position_; }
  int32_t context_length() const { return context_; }
  const float* logits() const { return logits_.floats(); }
  float* mutable_logits() { return logits_.floats(); }
  const LlamaHyperParams& params() const { return hp_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  TinyAIMappedModel* mapped_model() const { return model_; }
  const kernels::KernelTable& kernel_table() const { return *k_; }
  int threads() const { return pool_.size(); }

  uint64_t weight_bytes() const { return weight_bytes_; }
  uint64_t kv_bytes() const { return kv_.bytes(); }
  uint64_t activation_bytes() const;
  // Weight bytes read from memory to evaluate one token at the end of a
  // context of `position` tokens (weights and the KV cache it attends to).
  uint64_t BytesPerToken(int32_t position) const;

 private:
  struct BlockTensors {
    int32_t layer = -1;  // loader layer index
    uint64_t attn_norm = 0, wq = 0, wk = 0, wv = 0, wo = 0, ffn_norm = 0, w1 = 0, w2 = 0, w3 = 0;
    // Adjacent in memory, so read as one matrix (one pass, one barrier).
    bool qkv_fused = false;
    bool gate_up_fused = false;
  };

  TinyAIStatus BindTensors();
  TinyAIStatus BindTokenizer();
  TinyAIStatus FindInLayer(int32_t layer, TinyAITensorRole role, uint64_t rows, uint64_t cols,
                           uint64_t* offset);
  TinyAIStatus AllocateBuffers();

  TinyAIStatus EvalChunk(const int32_t* tokens, int32_t n);
  TinyAIStatus Embed(const int32_t* tokens, int32_t n);
  TinyAIStatus Block(int32_t b, int32_t n);
  TinyAIStatus Classify(int32_t n);
  void Attention(int32_t layer, int32_t n);
  // Rotates pairs of vec by the angles in rope_ (one position).
  void Rope(float* vec, int32_t width) const;
  size_t AttentionStride() const { return static_cast<size_t>(context_ + 15) / 16 * 16; }
  // y[j*ldy + r] = w[r] . x[j*ldx ...] for r < rows, j < n, rows split
  // across threads.
  void MatMul(const float* w, const float* x, size_t ldx, float* y, size_t ldy, int32_t rows, int32_t cols,
              int32_t n);
  size_t qkv_width() const { return static_cast<size_t>(hp_.dim + 2 * hp_.kv_dim); }

  TinyAIMappedModel* model_ = nullptr;
  const kernels::KernelTable* k_ = nullptr;
  LlamaHyperParams hp_;
  int32_t context_ = 0;
  int32_t position_ = 0;
  ThreadPool pool_;

  int32_t embedding_layer_ = -1;
  uint64_t embedding_ = 0;
  int32_t output_layer_ = -1;
  uint64_t output_norm_ = 0;
  int32_t classifier_layer_ = -1;  // embedding layer when shared
  uint64_t classifier_ = 0;
  Array<BlockTensors> blocks_;
  uint64_t weight_bytes_ = 0;

  Array<StringView> pieces_;
  Array<float> scores_;
  Tokenizer tokenizer_;

  // Activations, kMaxChunk rows each: x residual stream, xb/xb2 [dim],
  // qkv [dim + 2 kv_dim], hb gate then up [2 hidden].
  AlignedBuffer x_, xb_, xb2_, qkv_, hb_, logits_;
  AlignedBuffer att_;   // one row of seq scores per thread
  AlignedBuffer rope_;  // cos/sin per pair for one position
  AlignedBuffer kv_;    // key cache then value cache: [layers][kv_heads][context][head_size] each
};

}  // namespace tinyai

#endif  // TINYAI_MODEL_LLAMA_H_
