#include "model/llama.h"

#include <cmath>
#include <cstring>

#include "common/checked_math.h"
#include "common/status.h"

namespace tinyai {
namespace {

// Rows per parallel share of a matrix product: keeps shares cache-line sized.
constexpr size_t kRowGrain = 16;

TinyAIStatus ReadDim(const TmaiReader& r, const char* key, int32_t min, int32_t max, int32_t* out) {
  int64_t v = 0;
  TINYAI_RETURN_IF_ERROR(r.GetInt(key, &v));
  if (v < min || v > max) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': metadata '%s' is %lld; allowed %d..%d", r.source(), key,
                    static_cast<long long>(v), min, max);
  }
  *out = static_cast<int32_t>(v);
  return TINYAI_OK;
}

}  // namespace

TinyAIStatus LlamaHyperParams::Load(const TmaiReader& r) {
  StringView arch;
  TINYAI_RETURN_IF_ERROR(r.GetString("general.architecture", &arch));
  if (arch.size != 5 || std::memcmp(arch.data, "llama", 5) != 0) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': architecture '%.*s' is not supported (expected 'llama')",
                    r.source(), static_cast<int>(arch.size), arch.data);
  }
  constexpr int32_t kMax = 1 << 20;
  TINYAI_RETURN_IF_ERROR(ReadDim(r, "llama.dim", 1, kMax, &dim));
  TINYAI_RETURN_IF_ERROR(ReadDim(r, "llama.hidden_dim", 1, kMax, &hidden_dim));
  TINYAI_RETURN_IF_ERROR(ReadDim(r, "llama.layers", 1, 4096, &layers));
  TINYAI_RETURN_IF_ERROR(ReadDim(r, "llama.heads", 1, 4096, &heads));
  TINYAI_RETURN_IF_ERROR(ReadDim(r, "llama.kv_heads", 1, 4096, &kv_heads));
  TINYAI_RETURN_IF_ERROR(ReadDim(r, "llama.vocab_size", 1, 1 << 24, &vocab_size));
  TINYAI_RETURN_IF_ERROR(ReadDim(r, "llama.seq_len", 1, kMax, &seq_len));
  int32_t shared = 1;
  TINYAI_RETURN_IF_ERROR(ReadDim(r, "llama.shared_classifier", 0, 1, &shared));
  shared_classifier = shared != 0;
  if (r.FindMeta("llama.norm_eps")) TINYAI_RETURN_IF_ERROR(r.GetFloat("llama.norm_eps", &norm_eps));
  if (r.FindMeta("llama.rope_theta")) TINYAI_RETURN_IF_ERROR(r.GetFloat("llama.rope_theta", &rope_theta));
  if (!(norm_eps > 0.0f && norm_eps < 1.0f) || !(rope_theta > 1.0f && std::isfinite(rope_theta))) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': norm_eps %g or rope_theta %g is out of range", r.source(),
                    static_cast<double>(norm_eps), static_cast<double>(rope_theta));
  }
  if (dim % heads != 0 || heads % kv_heads != 0 || (dim / heads) % 2 != 0) {
    return SetError(TINYAI_ERR_BAD_FORMAT,
                    "'%s': dim %d, heads %d, kv_heads %d do not divide into even-sized heads", r.source(), dim,
                    heads, kv_heads);
  }
  head_size = dim / heads;
  kv_dim = head_size * kv_heads;
  return TINYAI_OK;
}

LlamaModel::~LlamaModel() = default;

TinyAIStatus LlamaModel::Init(TinyAIMappedModel* model, const TinyAILLMConfig& config,
                              const kernels::KernelTable* kernels) {
  model_ = model;
  k_ = kernels ? kernels : &kernels::Best();
  TINYAI_RETURN_IF_ERROR(hp_.Load(model->reader()));
  if (config.contextLength < 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "contextLength %d is negative", config.contextLength);
  }
  context_ = config.contextLength == 0 ? hp_.seq_len : config.contextLength;
  if (context_ > hp_.seq_len) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "contextLength %d exceeds the model's seq_len %d", context_,
                    hp_.seq_len);
  }
  if (config.threads < 0 || config.threads > 256) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "threads %d is out of range 0..256", config.threads);
  }
  int threads = config.threads == 0 ? port::CpuCount() : config.threads;
  TINYAI_RETURN_IF_ERROR(BindTensors());
  TINYAI_RETURN_IF_ERROR(BindTokenizer());
  TINYAI_RETURN_IF_ERROR(pool_.Start(threads));
  TINYAI_RETURN_IF_ERROR(AllocateBuffers());
  TINYAI_RETURN_IF_ERROR(BuildSequence());
  position_ = 0;
  return TINYAI_OK;
}

TinyAIStatus LlamaModel::FindInLayer(int32_t layer, TinyAITensorRole role, uint64_t rows, uint64_t cols,
                                     int32_t* tensor) {
  const TinyAILayerDescriptor& d = model_->descriptor(layer);
  const auto tensors = model_->reader().tensors();
  for (int32_t t = d.firstTensor; t < d.firstTensor + d.tensorCount; ++t) {
    const tmai::TensorEntry& e = tensors[static_cast<size_t>(t)];
    if (e.role != role) continue;
    if (e.codec != TINYAI_CODEC_NONE && e.codec != TINYAI_CODEC_ZSTD) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' is stored with codec %s, which this runner cannot read",
                      model_->reader().source(), e.name, tinyaiCodecName(static_cast<TinyAICodec>(e.codec)));
    }
    if (e.dtype != TINYAI_DTYPE_F32) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' is %s; this runner computes in f32",
                      model_->reader().source(), e.name, tinyaiDTypeName(static_cast<TinyAIDType>(e.dtype)));
    }
    bool ok = cols == 0 ? (e.ndims == 1 && e.shape[0] == rows)
                        : (e.ndims == 2 && e.shape[0] == rows && e.shape[1] == cols);
    if (!ok) {
      return SetError(TINYAI_ERR_BAD_FORMAT,
                      "'%s': tensor '%s' has shape [%llu, %llu], expected [%llu, %llu] from the hyper-parameters",
                      model_->reader().source(), e.name, static_cast<unsigned long long>(e.shape[0]),
                      static_cast<unsigned long long>(e.shape[1]), static_cast<unsigned long long>(rows),
                      static_cast<unsigned long long>(cols));
    }
    *tensor = t;
    weight_bytes_ += e.decoded_size;
    return TINYAI_OK;
  }
  return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': layer '%s' has no %s tensor", model_->reader().source(), d.name,
                  tinyaiTensorRoleName(role));
}

TinyAIStatus LlamaModel::BindTensors() {
  TINYAI_RETURN_IF_ERROR(blocks_.Allocate(static_cast<size_t>(hp_.layers), "block table"));
  weight_bytes_ = 0;
  int32_t seen_blocks = 0;
  int32_t embedding_layer = -1, output_layer = -1;
  const uint64_t dim = static_cast<uint64_t>(hp_.dim), hidden = static_cast<uint64_t>(hp_.hidden_dim);
  const uint64_t kv_dim = static_cast<uint64_t>(hp_.kv_dim), vocab = static_cast<uint64_t>(hp_.vocab_size);
  for (int32_t l = 0; l < model_->layer_count(); ++l) {
    const TinyAILayerDescriptor& d = model_->descriptor(l);
    switch (d.kind) {
      case TINYAI_LAYER_EMBEDDING:
        embedding_layer = l;
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_TOKEN_EMBEDDING, vocab, dim, &embedding_));
        break;
      case TINYAI_LAYER_TRANSFORMER: {
        if (d.blockIndex != seen_blocks || d.blockIndex >= hp_.layers) {
          return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': transformer layer %d is block %d, expected block %d of %d",
                          model_->reader().source(), l, d.blockIndex, seen_blocks, hp_.layers);
        }
        BlockTensors& b = blocks_[static_cast<size_t>(seen_blocks++)];
        b.layer = l;
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_ATTN_NORM, dim, 0, &b.attn_norm));
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_ATTN_Q, dim, dim, &b.wq));
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_ATTN_K, kv_dim, dim, &b.wk));
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_ATTN_V, kv_dim, dim, &b.wv));
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_ATTN_OUT, dim, dim, &b.wo));
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_FFN_NORM, dim, 0, &b.ffn_norm));
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_FFN_GATE, hidden, dim, &b.w1));
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_FFN_DOWN, dim, hidden, &b.w2));
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_FFN_UP, hidden, dim, &b.w3));
        break;
      }
      case TINYAI_LAYER_OUTPUT:
        output_layer = l;
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_OUTPUT_NORM, dim, 0, &output_norm_));
        if (!hp_.shared_classifier) {
          TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_CLASSIFIER, vocab, dim, &classifier_));
        }
        break;
      default:
        return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': layer %d (%s) has no place in a llama model",
                        model_->reader().source(), l, tinyaiLayerKindName(d.kind));
    }
  }
  if (embedding_layer < 0 || output_layer < 0 || seen_blocks != hp_.layers) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': expected an embedding, %d blocks and an output layer; found %s%d blocks%s",
                    model_->reader().source(), hp_.layers, embedding_layer < 0 ? "no embedding, " : "", seen_blocks,
                    output_layer < 0 ? ", no output" : "");
  }
  if (hp_.shared_classifier) classifier_ = embedding_;
  return TINYAI_OK;
}

TinyAIStatus LlamaModel::BindTokenizer() {
  const TmaiReader& r = model_->reader();
  const MetaEntry* tokens = r.FindMeta("tokenizer.tokens");
  const MetaEntry* scores = r.FindMeta("tokenizer.scores");
  if (!tokens || !scores || tokens->type != tmai::kMetaStringArray || scores->type != tmai::kMetaFloatArray) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': tokenizer.tokens / tokenizer.scores are missing or mistyped",
                    r.source());
  }
  if (tokens->count != static_cast<uint32_t>(hp_.vocab_size) || scores->count != tokens->count) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': tokenizer has %u pieces and %u scores for a vocabulary of %d",
                    r.source(), tokens->count, scores->count, hp_.vocab_size);
  }
  TINYAI_RETURN_IF_ERROR(pieces_.Allocate(tokens->count, "tokenizer pieces"));
  TINYAI_RETURN_IF_ERROR(scores_.Allocate(scores->count, "tokenizer scores"));
  TmaiReader::GetStringArray(*tokens, pieces_.data());
  TmaiReader::CopyFloatArray(*scores, scores_.data());
  int64_t bos = 1, eos = 2, max_len = 0;
  if (r.FindMeta("tokenizer.bos_id")) TINYAI_RETURN_IF_ERROR(r.GetInt("tokenizer.bos_id", &bos));
  if (r.FindMeta("tokenizer.eos_id")) TINYAI_RETURN_IF_ERROR(r.GetInt("tokenizer.eos_id", &eos));
  if (r.FindMeta("tokenizer.max_token_length")) {
    TINYAI_RETURN_IF_ERROR(r.GetInt("tokenizer.max_token_length", &max_len));
  }
  if (bos < 0 || bos >= hp_.vocab_size || eos < 0 || eos >= hp_.vocab_size || max_len < 0 || max_len > 65536) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': bos %lld, eos %lld or max_token_length %lld is impossible",
                    r.source(), static_cast<long long>(bos), static_cast<long long>(eos),
                    static_cast<long long>(max_len));
  }
  return tokenizer_.Init(Span<const StringView>(pieces_.data(), pieces_.size()),
                         Span<const float>(scores_.data(), scores_.size()), static_cast<int32_t>(bos),
                         static_cast<int32_t>(eos), static_cast<uint32_t>(max_len));
}

namespace {

// Sizes of the runner's buffers; one formula for EstimateMemory and
// AllocateBuffers.
struct BufferSizes {
  size_t x = 0, qkv = 0, hb = 0, logits = 0, att = 0, rope = 0;
  uint64_t kv = 0;
  uint64_t activations() const { return 3 * static_cast<uint64_t>(x) + qkv + hb + logits + att + rope; }
};

size_t AttentionStrideFor(int32_t context) { return static_cast<size_t>(context + 15) / 16 * 16; }

TinyAIStatus SizeBuffers(const LlamaHyperParams& hp, int32_t context, int threads, BufferSizes* out) {
  const size_t c = LlamaModel::kMaxChunk, dim = static_cast<size_t>(hp.dim), hidden = static_cast<size_t>(hp.hidden_dim);
  out->x = c * dim * sizeof(float);
  out->qkv = c * (dim + 2 * static_cast<size_t>(hp.kv_dim)) * sizeof(float);
  out->hb = c * 2 * hidden * sizeof(float);
  out->logits = static_cast<size_t>(hp.vocab_size) * sizeof(float);
  // Attention scores: one context-long row per thread, rows 64 bytes apart.
  out->att = AttentionStrideFor(context) * static_cast<size_t>(threads) * sizeof(float);
  out->rope = static_cast<size_t>(hp.head_size) * sizeof(float);
  if (!CheckedMul(static_cast<uint64_t>(hp.layers) * 2u * static_cast<uint64_t>(context),
                  static_cast<uint64_t>(hp.kv_dim) * sizeof(float), &out->kv) ||
      out->kv > SIZE_MAX) {
    return SetError(TINYAI_ERR_OVERFLOW, "KV cache for %d layers x %d positions overflows", hp.layers, context);
  }
  return TINYAI_OK;
}

}  // namespace

TinyAIStatus LlamaModel::EstimateMemory(const TinyAIMappedModel& model, int32_t context, int threads,
                                        LlamaMemory* out) {
  LlamaHyperParams hp;
  TINYAI_RETURN_IF_ERROR(hp.Load(model.reader()));
  if (context <= 0 || context > hp.seq_len) context = hp.seq_len;
  if (threads <= 0) threads = 1;
  BufferSizes b;
  TINYAI_RETURN_IF_ERROR(SizeBuffers(hp, context, threads, &b));
  const uint64_t vocab = static_cast<uint64_t>(hp.vocab_size);
  const uint64_t blocks = static_cast<uint64_t>(model.blocks().block_count());
  *out = LlamaMemory();
  out->activations = b.activations();
  out->kv = b.kv;
  out->tokenizer = vocab * (sizeof(StringView) + sizeof(float) + sizeof(int32_t));
  out->sampler = vocab * 8;  // ProbIndex: a float and an id
  out->runner = static_cast<uint64_t>(hp.layers) * sizeof(BlockTensors) +
                blocks * (2 * sizeof(int32_t) + sizeof(Segment) + sizeof(int32_t));
  return TINYAI_OK;
}

TinyAIStatus LlamaModel::PlanMemory(const TinyAIMappedModel& model, int32_t context, int threads,
                                    LlamaMemoryPlan* out) {
  *out = LlamaMemoryPlan();
  TINYAI_RETURN_IF_ERROR(EstimateMemory(model, context, threads, &out->runner));
  out->loader = model.overhead_bytes();
  out->fixed = out->runner.total() + out->loader;
  const int32_t largest = model.blocks().largest_block();
  if (largest >= 0) {
    out->largest_block = model.cache().EntryBytes(largest);
    out->largest_tensor = model.blocks().block(largest).tensor;
  }
  out->minimum_limit = out->fixed + out->largest_block;
  return TINYAI_OK;
}

TinyAIStatus LlamaMemoryPlan::CheckLimit(const TinyAIMappedModel& model, uint64_t limit, int32_t context) const {
  if (limit == 0 || limit >= minimum_limit) return TINYAI_OK;
  const char* tensor = largest_tensor >= 0 ? model.reader().tensors()[static_cast<size_t>(largest_tensor)].name : "-";
  return SetError(TINYAI_ERR_RESOURCE_EXHAUSTED,
                  "memory limit of %llu bytes is below this model's minimum of %llu: tensor '%s' streams in row "
                  "blocks of %llu bytes, on top of %llu bytes of KV cache (context %d), %llu of activations and "
                  "scratch and %llu of tables",
                  static_cast<unsigned long long>(limit), static_cast<unsigned long long>(minimum_limit), tensor,
                  static_cast<unsigned long long>(largest_block), static_cast<unsigned long long>(runner.kv), context,
                  static_cast<unsigned long long>(runner.activations),
                  static_cast<unsigned long long>(runner.tokenizer + runner.sampler + runner.runner + loader));
}

TinyAIStatus LlamaModel::AllocateBuffers() {
  BufferSizes b;
  TINYAI_RETURN_IF_ERROR(SizeBuffers(hp_, context_, pool_.size(), &b));
  TINYAI_RETURN_IF_ERROR(x_.Allocate(b.x, "activations x"));
  TINYAI_RETURN_IF_ERROR(xb_.Allocate(b.x, "activations xb"));
  TINYAI_RETURN_IF_ERROR(xb2_.Allocate(b.x, "activations xb2"));
  TINYAI_RETURN_IF_ERROR(qkv_.Allocate(b.qkv, "activations qkv"));
  TINYAI_RETURN_IF_ERROR(hb_.Allocate(b.hb, "activations hb"));
  TINYAI_RETURN_IF_ERROR(logits_.Allocate(b.logits, "logits"));
  TINYAI_RETURN_IF_ERROR(att_.Allocate(b.att, "attention scores"));
  // Not zero-filled: attention reads only positions already written, and
  // untouched pages of a large cache stay uncommitted until used.
  TINYAI_RETURN_IF_ERROR(kv_.Allocate(static_cast<size_t>(b.kv), "KV cache", AlignedBuffer::kUninitialized));
  TINYAI_RETURN_IF_ERROR(rope_.Allocate(b.rope, "rope table"));
  return EstimateMemory(*model_, context_, pool_.size(), &memory_);
}

TinyAIStatus LlamaModel::BuildSequence() {
  const RowBlockTable& table = model_->blocks();
  const size_t block_count = static_cast<size_t>(table.block_count());
  TINYAI_RETURN_IF_ERROR(sequence_.Allocate(block_count, "block sequence"));
  TINYAI_RETURN_IF_ERROR(sequence_index_.Allocate(block_count, "block sequence index"));
  TINYAI_RETURN_IF_ERROR(segments_.Allocate(block_count, "matmul window"));
  TINYAI_RETURN_IF_ERROR(pinned_.Allocate(block_count, "pinned blocks"));
  for (int32_t& i : sequence_index_) i = -1;
  size_t n = 0;
  auto add = [&](int32_t tensor) {
    for (const TensorSpan& sp : table.spans(tensor)) {
      if (sequence_index_[static_cast<size_t>(sp.block)] >= 0) continue;
      sequence_index_[static_cast<size_t>(sp.block)] = static_cast<int32_t>(n);
      sequence_[n++] = sp.block;
    }
  };
  for (const BlockTensors& b : blocks_) {
    const int32_t order[] = {b.attn_norm, b.wq, b.wk, b.wv, b.wo, b.ffn_norm, b.w1, b.w3, b.w2};
    for (int32_t t : order) add(t);
  }
  add(output_norm_);
  add(classifier_);
  sequence_length_ = n;
  UpdateStreaming();
  return TINYAI_OK;
}

void LlamaModel::UpdateStreaming() {
  const uint64_t cap = model_->cache().stats().capacity;
  // With a cap, a window pins at most a quarter of it and prefetch reads up
  // to another quarter ahead, leaving half for what the policy keeps.
  window_bytes_ = cap / 4;
  lookahead_bytes_ = cap == 0 ? (32u << 20) : cap / 4;
  prefetched_until_ = 0;
}

uint64_t LlamaModel::activation_bytes() const { return memory_.activations; }

size_t LlamaModel::AttentionStride() const { return AttentionStrideFor(context_); }

uint64_t LlamaModel::BytesPerToken(int32_t position) const {
  uint64_t kv = static_cast<uint64_t>(hp_.layers) * 2u * static_cast<uint64_t>(position) *
                static_cast<uint64_t>(hp_.kv_dim) * sizeof(float);
  uint64_t row = static_cast<uint64_t>(hp_.dim) * sizeof(float);
  uint64_t table = static_cast<uint64_t>(hp_.vocab_size) * row;
  // Every weight is read once, except the embedding table, of which one row
  // is read, unless it doubles as the classifier.
  uint64_t weights = weight_bytes_ - table + row + (hp_.shared_classifier ? table : 0);
  return weights + kv;
}

void LlamaModel::ReleasePinned(size_t count) {
  for (size_t i = 0; i < count; ++i) model_->ReleaseBlock(pinned_[i]);
}

void LlamaModel::PrefetchAfter(int32_t block) {
  const int32_t idx = sequence_index_[static_cast<size_t>(block)];
  if (idx < 0 || sequence_length_ == 0) return;
  const uint64_t len = sequence_length_;
  const uint64_t at = pass_ * len + static_cast<uint64_t>(idx);
  if (prefetched_until_ < at + 1) prefetched_until_ = at + 1;
  uint64_t ahead = 0;
  for (uint64_t j = at + 1; j < prefetched_until_; ++j) ahead += BlockBytes(sequence_[j % len]);
  // The sequence is a cycle: after the classifier come the next token's blocks.
  while (ahead < lookahead_bytes_ && prefetched_until_ < at + len) {
    const int32_t b = sequence_[prefetched_until_ % len];
    model_->PrefetchBlock(b);
    ahead += BlockBytes(b);
    ++prefetched_until_;
  }
}

TinyAIStatus LlamaModel::AcquireVector(int32_t tensor, const float** data, int32_t* block) {
  const uint8_t* p = nullptr;
  uint64_t rows = 0;
  TINYAI_RETURN_IF_ERROR(model_->AcquireRows(tensor, 0, &p, &rows, block));
  PrefetchAfter(*block);
  *data = reinterpret_cast<const float*>(p);
  return TINYAI_OK;
}

TinyAIStatus LlamaModel::MatMul(const int32_t* tensors, int count, const float* x, size_t ldx, float* y, size_t ldy,
                                int32_t cols, int32_t n) {
  const RowBlockTable& table = model_->blocks();
  size_t out_row = 0;  // output row of the cursor's row
  int k = 0;
  uint64_t row = 0;
  while (k < count) {
    // Pin a window: at least one block, then more while under the budget.
    size_t segs = 0;
    uint64_t bytes = 0;
    while (k < count && (segs == 0 || window_bytes_ == 0 || bytes < window_bytes_)) {
      const uint8_t* p = nullptr;
      uint64_t avail = 0;
      int32_t block = -1;
      TinyAIStatus s = model_->AcquireRows(tensors[k], row, &p, &avail, &block);
      if (s != TINYAI_OK) {
        ReleasePinned(segs);
        return s;
      }
      PrefetchAfter(block);
      pinned_[segs] = block;
      segments_[segs] = Segment{reinterpret_cast<const float*>(p), out_row, static_cast<size_t>(avail)};
      ++segs;
      bytes += BlockBytes(block);
      row += avail;
      out_row += static_cast<size_t>(avail);
      if (row == table.rows(tensors[k])) {
        ++k;
        row = 0;
      }
    }
    MultiplyWindow(segs, x, ldx, y, ldy, static_cast<size_t>(cols), n);
    ReleasePinned(segs);
  }
  return TINYAI_OK;
}

void LlamaModel::MultiplyWindow(size_t segs, const float* x, size_t ldx, float* y, size_t ldy, size_t cols,
                                int32_t n) {
  const kernels::KernelTable& k = *k_;
  const Segment* seg = segments_.data();
  const size_t first = seg[0].first;
  const size_t total = seg[segs - 1].first + seg[segs - 1].rows - first;
  pool_.ParallelFor(total, kRowGrain, [&](size_t begin, size_t end, int) {
    size_t i = 0;
    for (size_t r = first + begin; r < first + end;) {
      while (r >= seg[i].first + seg[i].rows) ++i;
      const size_t in_seg = r - seg[i].first;
      size_t count = seg[i].first + seg[i].rows - r;
      if (count > first + end - r) count = first + end - r;
      const float* w = seg[i].w + in_seg * cols;
      if (n == 1) {
        k.matvec(w, cols, x, y + r, count, cols);
      } else {
        k.matmul(w, cols, x, ldx, y + r, ldy, count, cols, static_cast<size_t>(n));
      }
      r += count;
    }
  });
}

void LlamaModel::Rope(float* vec, int32_t width) const {
  const float* cs = rope_.floats();
  const int32_t hs = hp_.head_size;
  for (int32_t i = 0; i < width; i += 2) {
    int32_t pair = (i % hs) / 2;
    float fcr = cs[2 * pair], fci = cs[2 * pair + 1];
    float v0 = vec[i], v1 = vec[i + 1];
    vec[i] = v0 * fcr - v1 * fci;
    vec[i + 1] = v0 * fci + v1 * fcr;
  }
}

TinyAIStatus LlamaModel::Eval(const int32_t* tokens, int32_t count) {
  if (count < 0 || (count > 0 && !tokens)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "eval: %d tokens at %p", count, static_cast<const void*>(tokens));
  }
  if (count > context_ - position_) {
    return SetError(TINYAI_ERR_CONTEXT_OVERFLOW,
                    "%d tokens do not fit: %d of the context's %d positions are used", count, position_, context_);
  }
  for (int32_t i = 0; i < count; ++i) {
    if (tokens[i] < 0 || tokens[i] >= hp_.vocab_size) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "token %d at index %d is outside the vocabulary (0..%d)",
                      tokens[i], i, hp_.vocab_size - 1);
    }
  }
  // All or nothing: a failure in a later chunk (a layer that fails its
  // checksum on first load) leaves the position where it was.
  const int32_t start = position_;
  for (int32_t done = 0; done < count;) {
    int32_t n = count - done < kMaxChunk ? count - done : kMaxChunk;
    TinyAIStatus s = EvalChunk(tokens + done, n);
    if (s != TINYAI_OK) {
      position_ = start;
      return s;
    }
    done += n;
  }
  return TINYAI_OK;
}

TinyAIStatus LlamaModel::EvalChunk(const int32_t* tokens, int32_t n) {
  TINYAI_RETURN_IF_ERROR(Embed(tokens, n));
  for (int32_t b = 0; b < hp_.layers; ++b) TINYAI_RETURN_IF_ERROR(Block(b, n));
  TINYAI_RETURN_IF_ERROR(Classify(n));
  position_ += n;
  ++pass_;
  return TINYAI_OK;
}

TinyAIStatus LlamaModel::Embed(const int32_t* tokens, int32_t n) {
  const size_t dim = static_cast<size_t>(hp_.dim);
  for (int32_t i = 0; i < n; ++i) {
    const uint8_t* row = nullptr;
    uint64_t rows = 0;
    int32_t block = -1;
    TINYAI_RETURN_IF_ERROR(model_->AcquireRows(embedding_, static_cast<uint64_t>(tokens[i]), &row, &rows, &block));
    std::memcpy(x_.floats() + static_cast<size_t>(i) * dim, row, dim * sizeof(float));
    TINYAI_RETURN_IF_ERROR(model_->ReleaseBlock(block));
  }
  return TINYAI_OK;
}

TinyAIStatus LlamaModel::Block(int32_t b, int32_t n) {
  const BlockTensors& bt = blocks_[static_cast<size_t>(b)];
  const kernels::KernelTable& k = *k_;
  const int32_t dim = hp_.dim, kv_dim = hp_.kv_dim, hidden = hp_.hidden_dim;
  const size_t d = static_cast<size_t>(dim), kvd = static_cast<size_t>(kv_dim), h = static_cast<size_t>(hidden);
  const size_t qkv_w = qkv_width();
  float* x = x_.floats();
  float* xb = xb_.floats();
  float* qkv = qkv_.floats();
  float* hb = hb_.floats();
  float* kcache = kv_.floats() + static_cast<size_t>(b) * static_cast<size_t>(context_) * kvd;
  float* vcache = kcache + static_cast<size_t>(hp_.layers) * static_cast<size_t>(context_) * kvd;

  // Attention: q, k, v as one stacked matrix, then RoPE, then the cache.
  const float* norm = nullptr;
  int32_t norm_block = -1;
  TINYAI_RETURN_IF_ERROR(AcquireVector(bt.attn_norm, &norm, &norm_block));
  for (int32_t i = 0; i < n; ++i) k.rmsnorm(x + i * d, norm, xb + i * d, d, hp_.norm_eps);
  TINYAI_RETURN_IF_ERROR(model_->ReleaseBlock(norm_block));
  const int32_t qkv_tensors[] = {bt.wq, bt.wk, bt.wv};
  TINYAI_RETURN_IF_ERROR(MatMul(qkv_tensors, 3, xb, d, qkv, qkv_w, dim, n));
  for (int32_t i = 0; i < n; ++i) {
    const int32_t pos = position_ + i;
    float* cs = rope_.floats();
    for (int32_t pair = 0; pair < hp_.head_size / 2; ++pair) {
      float freq = 1.0f / powf(hp_.rope_theta, static_cast<float>(2 * pair) / static_cast<float>(hp_.head_size));
      float val = static_cast<float>(pos) * freq;
      cs[2 * pair] = cosf(val);
      cs[2 * pair + 1] = sinf(val);
    }
    float* row = qkv + static_cast<size_t>(i) * qkv_w;
    Rope(row, dim);
    Rope(row + d, kv_dim);
    // Cache layout per layer: [kv_head][position][head_size], so attention
    // streams each head's keys and values contiguously.
    const size_t hs = static_cast<size_t>(hp_.head_size), ctx = static_cast<size_t>(context_);
    for (size_t kh = 0; kh < static_cast<size_t>(hp_.kv_heads); ++kh) {
      const size_t at = (kh * ctx + static_cast<size_t>(pos)) * hs;
      std::memcpy(kcache + at, row + d + kh * hs, hs * sizeof(float));
      std::memcpy(vcache + at, row + d + kvd + kh * hs, hs * sizeof(float));
    }
  }
  Attention(b, n);
  TINYAI_RETURN_IF_ERROR(MatMul(&bt.wo, 1, xb2_.floats(), d, xb, d, dim, n));
  for (int32_t i = 0; i < n; ++i) k.add(x + i * d, xb + i * d, d);

  // Feed-forward: gate and up as one stacked matrix, SwiGLU, down.
  TINYAI_RETURN_IF_ERROR(AcquireVector(bt.ffn_norm, &norm, &norm_block));
  for (int32_t i = 0; i < n; ++i) k.rmsnorm(x + i * d, norm, xb + i * d, d, hp_.norm_eps);
  TINYAI_RETURN_IF_ERROR(model_->ReleaseBlock(norm_block));
  const int32_t gate_up[] = {bt.w1, bt.w3};
  TINYAI_RETURN_IF_ERROR(MatMul(gate_up, 2, xb, d, hb, 2 * h, dim, n));
  for (int32_t i = 0; i < n; ++i) k.swiglu(hb + i * 2 * h, hb + i * 2 * h + h, h);
  TINYAI_RETURN_IF_ERROR(MatMul(&bt.w2, 1, hb, 2 * h, xb, d, hidden, n));
  for (int32_t i = 0; i < n; ++i) k.add(x + i * d, xb + i * d, d);
  return TINYAI_OK;
}

void LlamaModel::Attention(int32_t b, int32_t n) {
  const kernels::KernelTable& k = *k_;
  const size_t kv_dim = static_cast<size_t>(hp_.kv_dim), d = static_cast<size_t>(hp_.dim);
  const size_t hs = static_cast<size_t>(hp_.head_size);
  const int32_t heads = hp_.heads, kv_mul = hp_.heads / hp_.kv_heads;
  const float* kcache = kv_.floats() + static_cast<size_t>(b) * static_cast<size_t>(context_) * kv_dim;
  const float* vcache = kcache + static_cast<size_t>(hp_.layers) * static_cast<size_t>(context_) * kv_dim;
  const float scale = 1.0f / sqrtf(static_cast<float>(hs));
  const size_t att_stride = AttentionStride();
  const int32_t base_pos = position_;
  const float* qkv = qkv_.floats();
  const size_t qkv_w = qkv_width();
  float* out = xb2_.floats();
  float* att_all = att_.floats();
  pool_.ParallelFor(static_cast<size_t>(n) * static_cast<size_t>(heads), 1, [&](size_t begin, size_t end, int t) {
    float* att = att_all + static_cast<size_t>(t) * att_stride;
    for (size_t item = begin; item < end; ++item) {
      const int32_t i = static_cast<int32_t>(item / static_cast<size_t>(heads));
      const int32_t h = static_cast<int32_t>(item % static_cast<size_t>(heads));
      const size_t len = static_cast<size_t>(base_pos + i + 1);
      const float* qh = qkv + static_cast<size_t>(i) * qkv_w + static_cast<size_t>(h) * hs;
      const size_t head_base = static_cast<size_t>(h / kv_mul) * static_cast<size_t>(context_) * hs;
      k.matvec(kcache + head_base, hs, qh, att, len, hs);
      for (size_t t = 0; t < len; ++t) att[t] *= scale;
      k.softmax(att, len);
      k.vecmat(att, vcache + head_base, hs, out + static_cast<size_t>(i) * d + static_cast<size_t>(h) * hs, len, hs);
    }
  });
}

TinyAIStatus LlamaModel::Classify(int32_t n) {
  const size_t d = static_cast<size_t>(hp_.dim);
  float* last = x_.floats() + static_cast<size_t>(n - 1) * d;
  const float* norm = nullptr;
  int32_t norm_block = -1;
  TINYAI_RETURN_IF_ERROR(AcquireVector(output_norm_, &norm, &norm_block));
  k_->rmsnorm(last, norm, last, d, hp_.norm_eps);
  TINYAI_RETURN_IF_ERROR(model_->ReleaseBlock(norm_block));
  return MatMul(&classifier_, 1, last, d, logits_.floats(), static_cast<size_t>(hp_.vocab_size), hp_.dim, 1);
}

}  // namespace tinyai
