// The LLaMA forward pass over a mapped .tmai model, as a program of the
// forward scheduler: RMSNorm, RoPE, grouped-query attention with a KV cache,
// SwiGLU feed-forward, tied or separate classifier.
//
// Each model layer becomes operators of the activation graph (see
// EmitLayer): the embedding writes the residual stream x; a transformer block
// normalises it, projects q, k and v (one stacked matrix), rotates q and k
// and stores k and v in the cache, attends, projects back and adds to x in
// place, then does the same for the feed-forward (gate and up stacked,
// SwiGLU in place, down, add); the output layer normalises the last row and
// classifies it. The scheduler places every one of those tensors, and the
// attention scores (scratch), in its arena; this class owns the weights'
// binding, the KV cache, the tokenizer and the sampler.
//
// Weights are streamed through the loader's weight cache in row slices
// (model/weight_stream.h), in the order a token consumes them.
#ifndef TINYAI_MODEL_LLAMA_H_
#define TINYAI_MODEL_LLAMA_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/thread_pool.h"
#include "kernels/kernels.h"
#include "format/llama_params.h"
#include "kv/kv_cache.h"
#include "loader/mapped_model.h"
#include "model/weight_stream.h"
#include "scheduler/program.h"
#include "text/sampler.h"
#include "text/chat_template.h"
#include "text/text_tokenizer.h"
#include "tinyai/llm.h"

namespace tinyai {


// How a model's KV cache stores and keeps positions (kv/kv_cache.h).
struct KvOptions {
  int32_t type = TINYAI_KV_F32;  // a TinyAIKVType
  int32_t window = 0;            // 0: the cache holds the context
  int32_t sinks = 0;
  int32_t growable = 0;          // 1: chunks taken as positions are reached
};

// What TINYAI_KV_AUTO chooses among, most precise first.
constexpr int32_t kKvAutoTypes[] = {TINYAI_KV_F32, TINYAI_KV_F16, TINYAI_KV_INT8};
constexpr int32_t kKvAutoTypeCount = 3;

class LlamaModel final : public LayerProgram {
 public:
  // Largest number of tokens a pass takes by default (a prompt chunk): every
  // pass reads all the weights once, so more tokens per pass read fewer
  // bytes per token (the 110M f32 prompt on an AVX-512 host: 16 tokens 560
  // tokens/s, 32 tokens 710), for a larger arena (0.34 -> 0.69 MiB there).
  // Under a limit STREAMING takes fewer.
  static constexpr int32_t kMaxChunk = 32;

  LlamaModel() = default;
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;
  ~LlamaModel() { LedgerKvTouched(-static_cast<int64_t>(kv_touched_)); }

  // Binds the model's tensors and tokenizer for a KV cache of `context`
  // positions (0 = the model's seq_len; with a window in `kv`, the longest
  // prompt, while the cache holds the sinks and the window); allocates only
  // tables. Products run on pool, which will have `threads` threads when
  // operators run (the attention scores are sized by it), with the best
  // kernels this CPU has.
  TinyAIStatus Bind(TinyAIMappedModel* model, int32_t context, int threads, ThreadPool* pool,
                    const KvOptions& kv = KvOptions());

  // ---- LayerProgram ----
  TinyAIStatus OutputRowBytes(int32_t layer, uint64_t* bytes) const override;
  SizeRule InputSize() const override { return SizeRule::Rows(sizeof(int32_t)); }
  TinyAIStatus CheckSchedule(const LayerGraph& graph) const override;
  TinyAIStatus EmitLayer(const LayerGraph& graph, int32_t node, const int32_t* inputs, int32_t count,
                         ActivationGraph* g, int32_t* output) override;
  void NameOp(const GraphOp& op, char* out, size_t capacity) const override;
  TinyAIStatus RunOp(const GraphOp& op, const OpIo& io, const PassContext& pass) override;
  TinyAIStatus BeginPass(const PassContext& pass) override;
  void EndPass(const PassContext& pass) override;
  WeightStream* weights() override { return &stream_; }
  ProgramMemory Memory() const override;
  uint64_t PersistentHeld() const override { return kv_.held(); }
  uint64_t PersistentFor(const PassContext& pass) const override {
    return kv_.HeldAfter(pass.position + pass.shape.rows);
  }
  uint64_t PersistentPeak() const override { return kv_.peak(); }
  TinyAIStatus AllocateState() override;
  // With TINYAI_KV_AUTO the KV cache's types, most precise first, for the
  // scheduler to choose among; otherwise the one asked for.
  int32_t PersistentOptions() const override { return kv_auto_ ? kKvAutoTypeCount : 1; }
  TinyAIStatus UsePersistentOption(int32_t option) override;
  void NamePersistentOption(int32_t option, char* out, size_t capacity) const override;
  // Positions a query attends to at most (the cache's slots): the context,
  // or with a window the sinks and the window.
  int32_t context_length() const override { return context_; }
  // Positions a text may reach: the context, or without end with a window.
  int32_t max_positions() const { return kv_.max_positions(); }
  // The longest prompt: the context (with a window, contextLength still).
  int32_t prompt_capacity() const { return prompt_capacity_; }
  // The attention context of a pass of n rows from position pos (its
  // PassShape::context): the positions its last row attends to.
  int32_t PassSpan(int32_t pos, int32_t n) const {
    const int64_t span = static_cast<int64_t>(pos) + n;
    return span > context_ ? context_ : static_cast<int32_t>(span);
  }
  // The rows of the next pass from position pos (at most `most`, what
  // the scheduler's plans allow there: MaxRows): with a window, at most the
  // kMaxChunk positions its ring has room for, and the plans are asked at
  // position 0 (a pass attends to at most the cache's slots anywhere).
  int32_t PlanPosition(int32_t pos) const { return kv_.windowed() ? 0 : pos; }
  int32_t PassRows(int32_t most) const { return kv_.windowed() && most > kMaxChunk ? kMaxChunk : most; }
  const KvCache& kv_cache() const { return kv_; }
  KvCache* mutable_kv_cache() { return &kv_; }

  // The model's chain of layers.
  TinyAIStatus AddModelLayers(LayerGraph* graph) const override;
  // A prompt chunk: up to kMaxChunk tokens per pass.
  int32_t DefaultRows(int32_t) const override { return context_ < kMaxChunk ? context_ : kMaxChunk; }
  // Empties the cache (a growable one gives its chunks back).
  void Reset() override {
    position_ = 0;
    MemScope scope(kMemKv);
    kv_.Release();
    if (kv_.growable()) {  // its chunks are given back: nothing written stays
      LedgerKvTouched(-static_cast<int64_t>(kv_touched_));
      kv_touched_ = 0;
    }
  }
  int32_t position() const { return position_; }
  void set_position(int32_t p) { position_ = p; }
  const LlamaHyperParams& params() const { return hp_; }
  // The embedding table's bytes in memory, and whether it is the classifier too.
  uint64_t embedding_bytes() const {
    return embedding_ < 0 ? 0 : model_->reader().tensors()[static_cast<size_t>(embedding_)].decoded_size;
  }
  bool shared_classifier() const { return classifier_ == embedding_; }
  const TextTokenizer& tokenizer() const { return tokenizer_; }
  const ChatTemplate& chat_template() const { return chat_; }
  Sampler& sampler() { return sampler_; }
  TinyAIMappedModel* mapped_model() const { return model_; }
  const kernels::KernelTable& kernel_table() const { return *k_; }

  uint64_t weight_bytes() const { return weight_bytes_; }
  uint64_t kv_bytes() const { return kv_.bytes(); }
  // Weight bytes read from memory to evaluate one token at the end of a
  // context of `position` tokens (weights and the KV cache it attends to).
  uint64_t BytesPerToken(int32_t position) const;

 private:
  // Operators of the graph (GraphOp::kind); GraphOp::arg is the block.
  enum Op : int32_t {
    kEmbed, kAttnNorm, kQkv, kRope, kAttention, kAttnOut, kAttnAdd,
    kFfnNorm, kGateUp, kSwiglu, kDown, kFfnAdd, kFinalNorm, kClassify
  };
  // Tensor indices of one transformer block.
  struct BlockTensors {
    int32_t layer = -1;  // loader layer index
    int32_t attn_norm = -1, attn_q = -1, attn_k = -1, attn_v = -1, attn_out = -1;
    int32_t q_bias = -1, k_bias = -1, v_bias = -1;  // llama.qkv_bias
    int32_t ffn_norm = -1, ffn_gate = -1, ffn_down = -1, ffn_up = -1;
  };

  TinyAIStatus BindTensors();
  TinyAIStatus BindTokenizer();
  TinyAIStatus BindSentencePiece(int32_t bos, int32_t eos, uint32_t max_len, bool add_bos, bool add_eos);
  TinyAIStatus BindBytePairs(int32_t bos, int32_t eos, bool add_bos, bool add_eos);
  TinyAIStatus FindInLayer(int32_t layer, TinyAITensorRole role, uint64_t rows, uint64_t cols, int32_t* tensor);
  // The block a layer is, or -1.
  int32_t BlockOf(int32_t layer) const;

  TinyAIStatus Embed(const int32_t* tokens, float* x, int32_t n);
  TinyAIStatus Norm(int32_t tensor, const float* x, float* out, int32_t n);
  TinyAIStatus Rope(int32_t block, float* qkv, float* cs, const PassContext& pass);
  void Attention(int32_t block, const float* qkv, float* out, float* scores, size_t scores_bytes,
                 const PassContext& pass);
  // cos and sin of each rotary pair's angle at a position (negative: the
  // inverse rotation).
  void RopeTable(int32_t position, float* cs) const;
  TinyAIStatus BindRopeFactors();
  // Scratch each attention thread has besides its row of scores.
  size_t AttentionThreadBytes() const;
  void Rotate(float* vec, int32_t width, const float* cs) const;
  size_t qkv_width() const { return static_cast<size_t>(hp_.dim + 2 * hp_.kv_dim()); }

  TinyAIMappedModel* model_ = nullptr;
  ThreadPool* pool_ = nullptr;
  int threads_ = 1;
  const kernels::KernelTable* k_ = nullptr;
  LlamaHyperParams hp_;
  // llama.rope_freq_factors' floats in the model's index (head_size / 2,
  // checked at Bind), or nullptr.
  const uint8_t* rope_factors_ = nullptr;
  int32_t context_ = 0;          // slots of the KV cache: positions attended at most
  int32_t prompt_capacity_ = 0;  // contextLength
  int32_t position_ = 0;
  // The KV rows written at least once (their pages are resident), as told
  // to the ledger: the most any position has reached.
  void NoteKvTouched();
  uint64_t kv_touched_ = 0;

  int32_t embedding_ = -1;  // tensor indices
  int32_t output_norm_ = -1;
  int32_t classifier_ = -1;  // the embedding when shared
  int32_t embedding_layer_ = -1, output_layer_ = -1;
  Array<BlockTensors> blocks_;
  uint64_t weight_bytes_ = 0;
  WeightStream stream_;

  Array<StringView> pieces_;
  Array<float> scores_;
  TextTokenizer tokenizer_;
  ChatTemplate chat_;  // tokenizer.chat_template, the file's text
  Sampler sampler_;
  KvCache kv_;
  bool kv_auto_ = false;  // TINYAI_KV_AUTO: the scheduler chooses the type
};

}  // namespace tinyai

#endif  // TINYAI_MODEL_LLAMA_H_
