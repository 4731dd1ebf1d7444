// The LLaMA forward pass over a mapped .tmai model: RMSNorm, RoPE,
// grouped-query attention with a KV cache, SwiGLU feed-forward, tied or
// separate classifier. Tokens are evaluated in chunks (prompt processing
// reads each weight once per chunk); every buffer is allocated in Init().
//
// Weights are streamed through the loader's weight cache in row blocks: a
// matrix product pins a window of blocks, multiplies, and releases them, so
// a tensor larger than the cache (a 32,000-row classifier) passes through it
// in pieces and the cache, never this code, decides what stays resident.
// Blocks ahead of the one in use are prefetched in the order a token
// consumes them.
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

// Memory a runner holds besides weights; the least memory limit is this plus
// the loader's overhead plus the largest row block.
struct LlamaMemory {
  uint64_t activations = 0;  // activation rows, logits, attention scores, RoPE table
  uint64_t kv = 0;           // the KV cache (reserved; pages are committed as positions fill)
  uint64_t tokenizer = 0;    // pieces, scores, lookup index
  uint64_t sampler = 0;      // top-p scratch
  uint64_t runner = 0;       // block sequence and window tables
  uint64_t total() const { return activations + kv + tokenizer + sampler + runner; }
};

// The memory a runner needs, and the least limit it can run under: the
// runner's own buffers, the loader's overhead, and one largest row block.
struct LlamaMemoryPlan {
  LlamaMemory runner;
  uint64_t loader = 0;         // index, block tables, cache bookkeeping and staging
  uint64_t fixed = 0;          // runner.total() + loader
  uint64_t largest_block = 0;  // bytes the cache needs for the largest row block
  int32_t largest_tensor = -1; // a tensor in that block
  uint64_t minimum_limit = 0;  // fixed + largest_block

  // TINYAI_ERR_RESOURCE_EXHAUSTED naming the tensor, the bytes and the limit
  // when limit (non-zero) is below minimum_limit.
  TinyAIStatus CheckLimit(const TinyAIMappedModel& model, uint64_t limit, int32_t context) const;
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

  // What a runner for model with this context and thread count holds
  // besides weights (the same arithmetic Init allocates by).
  static TinyAIStatus EstimateMemory(const TinyAIMappedModel& model, int32_t context, int threads, LlamaMemory* out);
  const LlamaMemory& memory() const { return memory_; }
  static TinyAIStatus PlanMemory(const TinyAIMappedModel& model, int32_t context, int threads, LlamaMemoryPlan* out);
  // Re-reads the cache's cap to size prefetch lookahead and windows; call
  // after changing it.
  void UpdateStreaming();

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
  // Tensor indices of one transformer block.
  struct BlockTensors {
    int32_t layer = -1;  // loader layer index
    int32_t attn_norm = -1, wq = -1, wk = -1, wv = -1, wo = -1, ffn_norm = -1, w1 = -1, w2 = -1, w3 = -1;
  };
  // Rows of one pinned block inside a matrix product: rows [first, first +
  // rows) of the product's output, weights from w.
  struct Segment {
    const float* w;
    size_t first;
    size_t rows;
  };

  TinyAIStatus BindTensors();
  TinyAIStatus BindTokenizer();
  TinyAIStatus FindInLayer(int32_t layer, TinyAITensorRole role, uint64_t rows, uint64_t cols, int32_t* tensor);
  TinyAIStatus AllocateBuffers();
  TinyAIStatus BuildSequence();

  TinyAIStatus EvalChunk(const int32_t* tokens, int32_t n);
  TinyAIStatus Embed(const int32_t* tokens, int32_t n);
  TinyAIStatus Block(int32_t b, int32_t n);
  TinyAIStatus Classify(int32_t n);
  void Attention(int32_t layer, int32_t n);
  // Rotates pairs of vec by the angles in rope_ (one position).
  void Rope(float* vec, int32_t width) const;
  size_t AttentionStride() const;
  // y[j*ldy + r] = W[r] . x[j*ldx ...] for j < n, where W stacks the rows of
  // tensors[0..count) (all `cols` wide): streams them through the cache in
  // windows of pinned blocks, rows split across threads.
  TinyAIStatus MatMul(const int32_t* tensors, int count, const float* x, size_t ldx, float* y, size_t ldy,
                      int32_t cols, int32_t n);
  void MultiplyWindow(size_t segments, const float* x, size_t ldx, float* y, size_t ldy, size_t cols, int32_t n);
  // Pins the block holding a 1-D tensor (a norm's weights).
  TinyAIStatus AcquireVector(int32_t tensor, const float** data, int32_t* block);
  // Queues prefetches for the blocks after `block` in the order a token
  // reads them, up to the lookahead.
  void PrefetchAfter(int32_t block);
  void ReleasePinned(size_t count);
  size_t qkv_width() const { return static_cast<size_t>(hp_.dim + 2 * hp_.kv_dim); }
  uint64_t BlockBytes(int32_t block) const { return model_->blocks().block(block).decoded_size; }

  TinyAIMappedModel* model_ = nullptr;
  const kernels::KernelTable* k_ = nullptr;
  LlamaHyperParams hp_;
  int32_t context_ = 0;
  int32_t position_ = 0;
  ThreadPool pool_;

  int32_t embedding_ = -1;  // tensor indices
  int32_t output_norm_ = -1;
  int32_t classifier_ = -1;  // the embedding when shared
  Array<BlockTensors> blocks_;
  uint64_t weight_bytes_ = 0;
  LlamaMemory memory_;

  // Streaming: the row blocks one token reads, in order (classifier last),
  // each block's place in it (-1 if absent), and the window being multiplied.
  Array<int32_t> sequence_;
  size_t sequence_length_ = 0;
  Array<int32_t> sequence_index_;
  Array<Segment> segments_;
  Array<int32_t> pinned_;
  uint64_t window_bytes_ = 0;     // pin at most this much per window (0 = no limit)
  uint64_t lookahead_bytes_ = 0;  // prefetch this far ahead
  uint64_t prefetched_until_ = 0;  // absolute sequence position prefetch has reached
  uint64_t pass_ = 0;             // tokens-chunks evaluated (absolute position = pass * length + index)

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
