#include "model/llama.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/checked_math.h"
#include "common/fmath.h"
#include "common/format.h"
#include "common/ledger.h"
#include "common/printable.h"
#include "common/status.h"
#include "format/limits.h"
#include "model/generate.h"
#include "model/runtime.h"

namespace tinyai {
TinyAIStatus LlamaModel::Bind(TinyAIMappedModel* model, int32_t context, int threads, ThreadPool* pool,
                              const KvOptions& kv) {
  model_ = model;
  pool_ = pool;
  threads_ = threads < 1 ? 1 : threads;
  k_ = &kernels::Best();
  TINYAI_RETURN_IF_ERROR(hp_.Load(model->reader()));
  TINYAI_RETURN_IF_ERROR(BindRopeFactors());
  if (context < 0) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "contextLength %d is negative", context);
  prompt_capacity_ = context == 0 ? hp_.seq_len : context;
  // A context past seq_len runs: positions past it were never trained, and
  // RoPE extrapolates to them (what that costs is the model's: the
  // tools warn, docs/tools.md gives it measured).
  if (prompt_capacity_ > limits::kMaxSeqLen) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "contextLength %d exceeds the runtime's %d positions",
                    static_cast<int>(prompt_capacity_), static_cast<int>(limits::kMaxSeqLen));
  }
  if (kv.window < 0 || kv.sinks < 0 || (kv.window == 0 && kv.sinks != 0) ||
      (kv.window > 0 && static_cast<int64_t>(kv.window) + kv.sinks > limits::kMaxSeqLen)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "kvWindow %d and kvSinks %d: a window of 1..%d positions with its "
                    "sinks, sinks only with a window", static_cast<int>(kv.window), static_cast<int>(kv.sinks),
                    static_cast<int>(limits::kMaxSeqLen));
  }
  if (kv.growable != 0 && kv.growable != 1) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "kvGrowable %d: 0 (the cache taken whole) or 1 (taken as positions "
                    "are reached)", static_cast<int>(kv.growable));
  }
  // With a window the cache holds the sinks and the window, and a query
  // attends to at most that many positions; a text runs on past them.
  context_ = kv.window > 0 ? kv.sinks + kv.window : prompt_capacity_;
  KvShape shape;
  shape.layers = hp_.layers;
  shape.kv_heads = hp_.kv_heads;
  shape.head_size = hp_.head_size();
  shape.context = context_;
  shape.window = kv.window;
  shape.sinks = kv.sinks;
  shape.growable = kv.growable == 1;
  shape.pass_rows = kMaxChunk;  // EvalTokens and TextSession split a windowed text's passes to this
  // TINYAI_KV_AUTO: the scheduler chooses among kKvAutoTypes; until it
  // does, the most precise one this target can size.
  kv_auto_ = kv.type == TINYAI_KV_AUTO;
  shape.type = kv_auto_ ? kKvAutoTypes[0] : kv.type;
  SavedError before;
  SaveLastError(&before);
  TinyAIStatus sized = kv_.Init(shape);
  for (int32_t i = 1; kv_auto_ && sized == TINYAI_ERR_OVERFLOW && i < kKvAutoTypeCount; ++i) {
    shape.type = kKvAutoTypes[i];
    sized = kv_.Init(shape);
  }
  TINYAI_RETURN_IF_ERROR(sized);
  RestoreLastError(before);
  TINYAI_RETURN_IF_ERROR(BindTensors());
  TINYAI_RETURN_IF_ERROR(BindTokenizer());
  // The order a token reads its weights: the blocks' in turn, then the
  // output's; the embedding is read a row at a time.
  TINYAI_RETURN_IF_ERROR(stream_.Init(model_));
  for (const BlockTensors& b : blocks_) {
    const int32_t order[] = {b.attn_norm, b.attn_q, b.attn_k,   b.attn_v,   b.q_bias,  b.k_bias,
                             b.v_bias,    b.attn_out, b.ffn_norm, b.ffn_gate, b.ffn_up, b.ffn_down};
    for (int32_t t : order) {
      if (t >= 0) stream_.AddTensor(t);
    }
  }
  stream_.AddTensor(output_norm_);
  stream_.AddTensor(classifier_);
  stream_.AddSideTensor(embedding_);
  stream_.Bind(pool_, k_);
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
    // Matrices may be any dtype the kernels multiply; norm weights stay f32.
    if (cols == 0 ? e.dtype != TINYAI_DTYPE_F32 : kernels::WeightKernelsFor(*k_, e.dtype) == nullptr) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' is %s; %s", model_->reader().source(), e.name,
                      tinyaiDTypeName(static_cast<TinyAIDType>(e.dtype)),
                      cols == 0 ? "vectors (norm weights, biases) must be f32" : "the kernels have no products for it");
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
  embedding_layer_ = output_layer_ = -1;
  const uint64_t dim = static_cast<uint64_t>(hp_.dim), hidden = static_cast<uint64_t>(hp_.hidden_dim);
  const uint64_t kv_dim = static_cast<uint64_t>(hp_.kv_dim()), vocab = static_cast<uint64_t>(hp_.vocab_size);
  for (int32_t l = 0; l < model_->layer_count(); ++l) {
    const TinyAILayerDescriptor& d = model_->descriptor(l);
    switch (d.kind) {
      case TINYAI_LAYER_EMBEDDING:
        embedding_layer_ = l;
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
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_ATTN_Q, dim, dim, &b.attn_q));
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_ATTN_K, kv_dim, dim, &b.attn_k));
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_ATTN_V, kv_dim, dim, &b.attn_v));
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_ATTN_OUT, dim, dim, &b.attn_out));
        if (hp_.qkv_bias) {
          TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_ATTN_Q_BIAS, dim, 0, &b.q_bias));
          TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_ATTN_K_BIAS, kv_dim, 0, &b.k_bias));
          TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_ATTN_V_BIAS, kv_dim, 0, &b.v_bias));
        }
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_FFN_NORM, dim, 0, &b.ffn_norm));
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_FFN_GATE, hidden, dim, &b.ffn_gate));
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_FFN_DOWN, dim, hidden, &b.ffn_down));
        TINYAI_RETURN_IF_ERROR(FindInLayer(l, TINYAI_ROLE_FFN_UP, hidden, dim, &b.ffn_up));
        break;
      }
      case TINYAI_LAYER_OUTPUT:
        output_layer_ = l;
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
  if (embedding_layer_ < 0 || output_layer_ < 0 || seen_blocks != hp_.layers) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': expected an embedding, %d blocks and an output layer; found %s%d blocks%s",
                    model_->reader().source(), hp_.layers, embedding_layer_ < 0 ? "no embedding, " : "", seen_blocks,
                    output_layer_ < 0 ? ", no output" : "");
  }
  if (hp_.shared_classifier) classifier_ = embedding_;
  return TINYAI_OK;
}

TinyAIStatus LlamaModel::BindRopeFactors() {
  const TmaiReader& r = model_->reader();
  const MetaEntry* e = r.FindMeta(llama_key::kRopeFreqFactors);
  rope_factors_ = nullptr;
  if (e == nullptr) return TINYAI_OK;
  const uint32_t pairs = static_cast<uint32_t>(hp_.head_size() / 2);
  if (e->type != tmai::kMetaFloatArray || e->count != pairs) {
    return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': %s is not an array of %u floats (one per pair of a head's %d "
                    "dimensions)", r.source(), llama_key::kRopeFreqFactors, pairs, hp_.head_size());
  }
  for (uint32_t i = 0; i < pairs; ++i) {
    float v;
    std::memcpy(&v, e->payload + 4 * i, sizeof v);
    if (!(v > 0.0f) || !std::isfinite(v)) {
      return SetError(TINYAI_ERR_BAD_FORMAT, "'%s': %s[%u] is %g; a rope frequency factor is positive and finite",
                      r.source(), llama_key::kRopeFreqFactors, i, static_cast<double>(v));
    }
  }
  rope_factors_ = e->payload;
  return TINYAI_OK;
}

TinyAIStatus LlamaModel::BindTokenizer() {
  MemScope scope(kMemText);
  const TmaiReader& r = model_->reader();
  StringView kind{"llama2c-bpe", 11};
  if (r.FindMeta("tokenizer.model")) TINYAI_RETURN_IF_ERROR(r.GetString("tokenizer.model", &kind));
  auto is = [&kind](const char* name) { return kind.size == std::strlen(name) && std::memcmp(kind.data, name, kind.size) == 0; };
  const bool byte_pairs = is("gpt2");
  if (!byte_pairs && !is("llama2c-bpe")) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tokenizer.model '%s'; TinyAI runs 'llama2c-bpe' (SentencePiece "
                    "with byte fallback) and 'gpt2' (byte-level BPE)", r.source(), Printable(kind).c_str());
  }
  const MetaEntry* tokens = r.FindMeta("tokenizer.tokens");
  if (!tokens || tokens->type != tmai::kMetaStringArray) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': tokenizer.tokens is missing or not a string array", r.source());
  }
  if (tokens->count != static_cast<uint32_t>(hp_.vocab_size)) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': tokenizer has %u tokens for a vocabulary of %d", r.source(),
                    tokens->count, hp_.vocab_size);
  }
  TINYAI_RETURN_IF_ERROR(pieces_.Allocate(tokens->count, "tokenizer pieces"));
  TmaiReader::GetStringArray(*tokens, pieces_.data());
  // BOS, EOS and whether prompts start and end with them (docs/format.md):
  // the model was trained so, and runs differently otherwise. A byte-level
  // BPE vocabulary may have neither (-1), and adds BOS only when told.
  int64_t bos = byte_pairs ? -1 : 1, eos = byte_pairs ? -1 : 2, max_len = 0;
  if (r.FindMeta("tokenizer.bos_id")) TINYAI_RETURN_IF_ERROR(r.GetInt("tokenizer.bos_id", &bos));
  if (r.FindMeta("tokenizer.eos_id")) TINYAI_RETURN_IF_ERROR(r.GetInt("tokenizer.eos_id", &eos));
  if (r.FindMeta("tokenizer.max_token_length")) {
    TINYAI_RETURN_IF_ERROR(r.GetInt("tokenizer.max_token_length", &max_len));
  }
  const int64_t least = byte_pairs ? -1 : 0;
  if (bos < least || bos >= hp_.vocab_size || eos < least || eos >= hp_.vocab_size || max_len < 0 ||
      max_len > static_cast<int64_t>(limits::kMaxPieceBytes)) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER,
                    "'%s': bos %lld, eos %lld or max_token_length %lld is impossible (ids %lld..%d, length 0..%u)",
                    r.source(), static_cast<long long>(bos), static_cast<long long>(eos),
                    static_cast<long long>(max_len), static_cast<long long>(least), hp_.vocab_size - 1,
                    limits::kMaxPieceBytes);
  }
  int64_t add[2] = {byte_pairs ? 0 : 1, 0};
  const char* const add_keys[2] = {"tokenizer.add_bos", "tokenizer.add_eos"};
  for (int i = 0; i < 2; ++i) {
    if (r.FindMeta(add_keys[i])) TINYAI_RETURN_IF_ERROR(r.GetInt(add_keys[i], &add[i]));
    if (add[i] != 0 && add[i] != 1) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "'%s': %s is %lld; it is 0 or 1", r.source(), add_keys[i],
                      static_cast<long long>(add[i]));
    }
  }
  TinyAIStatus s = byte_pairs ? BindBytePairs(static_cast<int32_t>(bos), static_cast<int32_t>(eos), add[0] != 0,
                                              add[1] != 0)
                              : BindSentencePiece(static_cast<int32_t>(bos), static_cast<int32_t>(eos),
                                                  static_cast<uint32_t>(max_len), add[0] != 0, add[1] != 0);
  if (s != TINYAI_OK) return AddErrorContext(s, "'%s': ", r.source());
  // The chat template (GGUF's tokenizer.chat_template), recognized now and
  // refused only when a chat turn is asked for.
  StringView chat;
  if (r.FindMeta("tokenizer.chat_template")) TINYAI_RETURN_IF_ERROR(r.GetString("tokenizer.chat_template", &chat));
  chat_.Init(chat);
  return TINYAI_OK;
}

TinyAIStatus LlamaModel::BindSentencePiece(int32_t bos, int32_t eos, uint32_t max_len, bool add_bos,
                                           bool add_eos) {
  const TmaiReader& r = model_->reader();
  const MetaEntry* scores = r.FindMeta("tokenizer.scores");
  if (!scores || scores->type != tmai::kMetaFloatArray || scores->count != pieces_.size()) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "tokenizer.scores is missing, mistyped or not one per token (%zu)",
                    pieces_.size());
  }
  TINYAI_RETURN_IF_ERROR(scores_.Allocate(scores->count, "tokenizer scores"));
  TmaiReader::CopyFloatArray(*scores, scores_.data());
  // Pieces have 1..max_token_length bytes, or 1..kMaxPieceBytes without it
  // (Init refuses an empty or longer piece, naming the token).
  const uint32_t piece_limit = max_len > 0 ? max_len : limits::kMaxPieceBytes;
  return tokenizer_.InitSentencePiece(Span<const StringView>(pieces_.data(), pieces_.size()),
                                      Span<const float>(scores_.data(), scores_.size()), bos, eos, piece_limit,
                                      add_bos, add_eos);
}

// A float array of token ids or types (the format has no integer arrays;
// float32 holds every id below 2^24 exactly, and kMaxVocab is 2^24) as
// int32, refusing a value that is no integer in [lo, hi].
static TinyAIStatus IntsOfFloats(const TmaiReader& r, const char* key, int32_t lo, int32_t hi, Array<int32_t>* out) {
  const MetaEntry* e = r.FindMeta(key);
  if (e == nullptr) return out->Allocate(0, key);
  if (e->type != tmai::kMetaFloatArray) return SetError(TINYAI_ERR_BAD_TOKENIZER, "%s is not a float array", key);
  Array<float> values;
  TINYAI_RETURN_IF_ERROR(values.Allocate(e->count, key));
  TmaiReader::CopyFloatArray(*e, values.data());
  TINYAI_RETURN_IF_ERROR(out->Allocate(e->count, key));
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    if (!(v >= static_cast<float>(lo) && v <= static_cast<float>(hi)) || v != static_cast<float>(static_cast<int32_t>(v))) {
      return SetError(TINYAI_ERR_BAD_TOKENIZER, "%s[%zu] is %g; it is an integer in %d..%d", key, i,
                      static_cast<double>(v), static_cast<int>(lo), static_cast<int>(hi));
    }
    (*out)[i] = static_cast<int32_t>(v);
  }
  return TINYAI_OK;
}

TinyAIStatus LlamaModel::BindBytePairs(int32_t bos, int32_t eos, bool add_bos, bool add_eos) {
  const TmaiReader& r = model_->reader();
  BpeVocab v;
  v.tokens = Span<const StringView>(pieces_.data(), pieces_.size());
  // The merges and types are Init's to read: it keeps its own tables.
  const MetaEntry* merges = r.FindMeta("tokenizer.merges");
  if (!merges || merges->type != tmai::kMetaStringArray) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "tokenizer.merges is missing or not a string array (a 'gpt2' "
                    "tokenizer needs its merges)");
  }
  Array<StringView> merge_lines;
  TINYAI_RETURN_IF_ERROR(merge_lines.Allocate(merges->count, "tokenizer merges"));
  TmaiReader::GetStringArray(*merges, merge_lines.data());
  v.merges = Span<const StringView>(merge_lines.data(), merge_lines.size());
  Array<int32_t> types, eog;
  TINYAI_RETURN_IF_ERROR(IntsOfFloats(r, "tokenizer.token_types", kBpeTokenNormal, kBpeTokenByte, &types));
  TINYAI_RETURN_IF_ERROR(IntsOfFloats(r, "tokenizer.eog_ids", 0, hp_.vocab_size - 1, &eog));
  v.types = Span<const int32_t>(types.data(), types.size());
  StringView pre;
  if (!r.FindMeta("tokenizer.pre")) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "no tokenizer.pre: a 'gpt2' tokenizer names its pre-tokenizer");
  }
  TINYAI_RETURN_IF_ERROR(r.GetString("tokenizer.pre", &pre));
  char pre_name[64];
  if (pre.size >= sizeof pre_name) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "tokenizer.pre '%s' is no pre-tokenizer TinyAI knows", Printable(pre).c_str());
  }
  std::memcpy(pre_name, pre.data, pre.size);
  pre_name[pre.size] = '\0';
  v.pre = pre_name;
  int64_t nfc = 0;
  if (r.FindMeta("tokenizer.nfc")) TINYAI_RETURN_IF_ERROR(r.GetInt("tokenizer.nfc", &nfc));
  if (nfc != 0 && nfc != 1) {
    return SetError(TINYAI_ERR_BAD_TOKENIZER, "tokenizer.nfc is %lld; it is 0 or 1", static_cast<long long>(nfc));
  }
  v.nfc = nfc != 0;
  v.bos = bos;
  v.eos = eos;
  v.add_bos = add_bos;
  v.add_eos = add_eos;
  return tokenizer_.InitBytePairs(v, Span<const int32_t>(eog.data(), eog.size()));
}

TinyAIStatus LlamaModel::UsePersistentOption(int32_t option) {
  if (option < 0 || option >= PersistentOptions()) {
    return SetError(TINYAI_ERR_INTERNAL, "KV option %d of %d", static_cast<int>(option),
                    static_cast<int>(PersistentOptions()));
  }
  if (!kv_auto_) return TINYAI_OK;
  KvShape shape = kv_.shape();
  shape.type = kKvAutoTypes[option];
  return kv_.Init(shape);
}

void LlamaModel::NamePersistentOption(int32_t option, char* out, size_t capacity) const {
  KvShape shape = kv_.shape();
  if (kv_auto_ && option >= 0 && option < PersistentOptions()) shape.type = kKvAutoTypes[option];
  uint64_t bytes = 0;
  (void)KvCache::Bytes(shape, &bytes);  // a shape Init took
  tinyai::Format(out, capacity, "%s KV cache (%.2f MiB)", KvCache::TypeName(shape.type),
                static_cast<double>(bytes) / (1024.0 * 1024.0));
}

ProgramMemory LlamaModel::Memory() const {
  const uint64_t vocab = static_cast<uint64_t>(hp_.vocab_size);
  ProgramMemory m;
  m.persistent = kv_.bytes();
  // The runtime object this model lives in (its tokenizer's fixed part
  // among it); tokenizer pieces, scores and lookup tables; sampler scratch;
  // block and streaming tables.
  m.tables = sizeof(LlamaRuntime) + vocab * sizeof(StringView) + scores_.size() * sizeof(float) + tokenizer_.table_bytes() +
             vocab * sizeof(ProbIndex) +
             static_cast<uint64_t>(hp_.layers) * sizeof(BlockTensors) + stream_.bytes() +
             TextSession::ReserveBytes(*this);
  return m;
}

TinyAIStatus LlamaModel::AllocateState() {
  // Not zero-filled: attention reads only positions already written, and
  // untouched pages of a large cache stay uncommitted until used.
  {
    MemScope scope(kMemKv);
    TINYAI_RETURN_IF_ERROR(kv_.Allocate());
  }
  MemScope scope(kMemText);
  return sampler_.Init(static_cast<size_t>(hp_.vocab_size));
}

void LlamaModel::NoteKvTouched() {
  const int32_t slots = kv_.slots();
  if (slots <= 0) return;
  const uint64_t touched = kv_.bytes() / static_cast<uint64_t>(slots) * static_cast<uint64_t>(kv_.SlotsUsed(position_));
  if (touched <= kv_touched_) return;
  LedgerKvTouched(static_cast<int64_t>(touched - kv_touched_));
  kv_touched_ = touched;
}

uint64_t LlamaModel::BytesPerToken(int32_t position) const {
  // The keys and values attended to: every position so far, or the sinks and the window.
  const uint64_t attended = kv_.windowed() && position > context_ ? static_cast<uint64_t>(context_)
                                                                   : static_cast<uint64_t>(position);
  uint64_t kv = static_cast<uint64_t>(hp_.layers) * 2u * attended * static_cast<uint64_t>(hp_.kv_heads) *
                kv_.row_bytes();
  // The embedding table's bytes and one row of it, as the file stores them.
  const uint64_t row = model_->slices().row_bytes(embedding_);
  const uint64_t table = static_cast<uint64_t>(hp_.vocab_size) * row;
  // Every weight is read once, except the embedding table, of which one row
  // is read, unless it doubles as the classifier.
  uint64_t weights = weight_bytes_ - table + row + (hp_.shared_classifier ? table : 0);
  return weights + kv;
}

int32_t LlamaModel::BlockOf(int32_t layer) const {
  for (size_t b = 0; b < blocks_.size(); ++b) {
    if (blocks_[b].layer == layer) return static_cast<int32_t>(b);
  }
  return -1;
}

// ---- the schedule ----

TinyAIStatus LlamaModel::OutputRowBytes(int32_t layer, uint64_t* bytes) const {
  const uint64_t row = static_cast<uint64_t>(hp_.dim) * sizeof(float);
  if (layer == embedding_layer_ || BlockOf(layer) >= 0) {
    *bytes = row;
  } else if (layer == output_layer_) {
    *bytes = static_cast<uint64_t>(hp_.vocab_size) * sizeof(float);
  } else {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': layer %d is not a layer of this llama model",
                    model_->reader().source(), layer);
  }
  return TINYAI_OK;
}

TinyAIStatus LlamaModel::AddModelLayers(LayerGraph* graph) const {
  uint64_t bytes = 0;
  TINYAI_RETURN_IF_ERROR(OutputRowBytes(embedding_layer_, &bytes));
  TINYAI_RETURN_IF_ERROR(graph->Add(embedding_layer_, -1, TINYAI_DEP_NONE, bytes, model_->layer_count()));
  int32_t prev = embedding_layer_;
  // Each block reads the residual stream throughout its attention.
  for (const BlockTensors& b : blocks_) {
    TINYAI_RETURN_IF_ERROR(graph->Add(b.layer, prev, TINYAI_DEP_ATTENTION, bytes, model_->layer_count()));
    prev = b.layer;
  }
  TINYAI_RETURN_IF_ERROR(OutputRowBytes(output_layer_, &bytes));
  return graph->Add(output_layer_, prev, TINYAI_DEP_SEQUENTIAL, bytes, model_->layer_count());
}

TinyAIStatus LlamaModel::CheckSchedule(const LayerGraph& graph) const {
  const char* source = model_->reader().source();
  const int32_t expected = hp_.layers + 2;
  Span<const int32_t> order = graph.order();
  auto chain_error = [&](const char* what, int32_t layer) {
    return SetError(TINYAI_ERR_UNSUPPORTED,
                    "'%s': a llama model runs as its chain of layers (embedding %d, blocks %d..%d each on the one "
                    "before, output %d on the last block); layer %d %s",
                    source, embedding_layer_, blocks_[0].layer, blocks_[blocks_.size() - 1].layer, output_layer_,
                    layer, what);
  };
  for (int32_t i = 0; i < graph.node_count(); ++i) {
    const int32_t node = order[static_cast<size_t>(i)];
    const int32_t layer = graph.node(node).layer;
    Span<const LayerDep> deps = graph.deps(node);
    const int32_t want = i == 0 ? embedding_layer_ : i <= hp_.layers ? blocks_[static_cast<size_t>(i - 1)].layer
                                                                      : i == hp_.layers + 1 ? output_layer_ : -1;
    if (layer != want) return chain_error(want < 0 ? "is one layer too many" : "is out of place", layer);
    if (deps.size() != 1) return chain_error("has more than one dependency", layer);
    const int32_t producer = deps[0].producer < 0 ? -1 : graph.node(deps[0].producer).layer;
    const int32_t want_producer = i == 0 ? -1 : graph.node(order[static_cast<size_t>(i - 1)]).layer;
    if (producer != want_producer) {
      return chain_error(i == 0 ? "must read the scheduler's input (TINYAI_DEP_NONE)"
                                : "must depend on the layer before it in the chain",
                         layer);
    }
  }
  if (graph.node_count() != expected) {
    return SetError(TINYAI_ERR_UNSUPPORTED,
                    "'%s': a llama model runs as its whole chain of %d layers (embedding, %d blocks, output); the "
                    "schedule has %d",
                    source, expected, hp_.layers, graph.node_count());
  }
  return TINYAI_OK;
}

TinyAIStatus LlamaModel::EmitLayer(const LayerGraph& graph, int32_t node, const int32_t* inputs, int32_t count,
                                   ActivationGraph* g, int32_t* output) {
  const int32_t layer = graph.node(node).layer;
  const uint64_t f = sizeof(float);
  const uint64_t dim = static_cast<uint64_t>(hp_.dim) * f;
  GraphOp op;
  op.layer = layer;
  op.node = graph.position(node);
  op.input_count = 1;
  // One operator: kind, input, in-place input (or -1), scratch, output size.
  auto add = [&](int32_t kind, int32_t in, bool in_place, const SizeRule& scratch, const SizeRule& out_size,
                 int32_t* out) {
    op.kind = kind;
    op.inputs[0] = in;
    op.in_place = in_place ? 0 : -1;
    op.scratch = scratch;
    return g->AddOp(op, out_size, out);
  };
  const SizeRule none;
  if (count != 1) return SetError(TINYAI_ERR_INTERNAL, "llama layer %d has %d inputs", layer, count);
  if (layer == embedding_layer_) return add(kEmbed, inputs[0], false, none, SizeRule::Rows(dim), output);
  if (layer == output_layer_) {
    // Not in place: the normalised last row is one row, while the residual
    // stream it would extend is all of them, live beside the logits.
    int32_t last = -1;
    TINYAI_RETURN_IF_ERROR(add(kFinalNorm, inputs[0], false, none, SizeRule::Fixed(dim), &last));
    return add(kClassify, last, false, SizeRule::Fixed(stream_.InputScratchBytes(&classifier_, 1, hp_.dim)),
               SizeRule::Fixed(static_cast<uint64_t>(hp_.vocab_size) * f), output);
  }
  const int32_t b = BlockOf(layer);
  op.arg = b;
  // The block's tensors, named for what they hold (llama2.c's x, xb, q/k/v,
  // xb2, hb, hb2, ...): the residual stream comes in, is normalised for
  // attention, projected to queries, keys and values, rotated, attended,
  // projected back and added; then normalised for the feed-forward network,
  // projected to gate and up halves, gated (SwiGLU), projected down and added.
  const int32_t stream_in = inputs[0];
  int32_t attn_normed = -1, qkv = -1, qkv_rotated = -1, attended = -1, attn_projected = -1, stream_mid = -1;
  int32_t ffn_normed = -1, gate_up = -1, gated = -1, ffn_projected = -1;
  SizeRule rope_scratch = SizeRule::Fixed(static_cast<uint64_t>(hp_.head_size()) * f);  // cos, sin per pair
  SizeRule scores;  // one context-long row per thread, and each thread's scratch (AttentionThreadBytes)
  scores.per_context = static_cast<uint64_t>(threads_) * f;
  scores.context_round = 16;
  scores.fixed = static_cast<uint64_t>(threads_) * AttentionThreadBytes();
  TINYAI_RETURN_IF_ERROR(add(kAttnNorm, stream_in, false, none, SizeRule::Rows(dim), &attn_normed));
  // A product with grouped weights quantizes its input into scratch.
  const BlockTensors& bt = blocks_[static_cast<size_t>(b)];
  const int32_t qkv_tensors[] = {bt.attn_q, bt.attn_k, bt.attn_v}, gate_up_tensors[] = {bt.ffn_gate, bt.ffn_up};
  auto input_scratch = [&](const int32_t* tensors, int count, int32_t cols) {
    return SizeRule::Rows(stream_.InputScratchBytes(tensors, count, cols));
  };
  TINYAI_RETURN_IF_ERROR(add(kQkv, attn_normed, false, input_scratch(qkv_tensors, 3, hp_.dim),
                             SizeRule::Rows(qkv_width() * f), &qkv));
  TINYAI_RETURN_IF_ERROR(add(kRope, qkv, true, rope_scratch, SizeRule::Rows(qkv_width() * f), &qkv_rotated));
  TINYAI_RETURN_IF_ERROR(add(kAttention, qkv_rotated, false, scores, SizeRule::Rows(dim), &attended));
  TINYAI_RETURN_IF_ERROR(add(kAttnOut, attended, false, input_scratch(&bt.attn_out, 1, hp_.dim), SizeRule::Rows(dim),
                             &attn_projected));
  op.input_count = 2;
  op.inputs[1] = attn_projected;
  TINYAI_RETURN_IF_ERROR(add(kAttnAdd, stream_in, true, none, SizeRule::Rows(dim), &stream_mid));
  op.input_count = 1;
  const uint64_t hidden = static_cast<uint64_t>(hp_.hidden_dim) * f;
  TINYAI_RETURN_IF_ERROR(add(kFfnNorm, stream_mid, false, none, SizeRule::Rows(dim), &ffn_normed));
  TINYAI_RETURN_IF_ERROR(add(kGateUp, ffn_normed, false, input_scratch(gate_up_tensors, 2, hp_.dim),
                             SizeRule::Rows(2 * hidden), &gate_up));
  TINYAI_RETURN_IF_ERROR(add(kSwiglu, gate_up, true, none, SizeRule::Rows(hidden), &gated));
  TINYAI_RETURN_IF_ERROR(add(kDown, gated, false, input_scratch(&bt.ffn_down, 1, hp_.hidden_dim), SizeRule::Rows(dim),
                             &ffn_projected));
  op.input_count = 2;
  op.inputs[1] = ffn_projected;
  return add(kFfnAdd, stream_mid, true, none, SizeRule::Rows(dim), output);
}

void LlamaModel::NameOp(const GraphOp& op, char* out, size_t capacity) const {
  static const char* kNames[] = {"embed",  "attn_norm", "qkv",  "rope", "attention", "attn_out",   "attn_add",
                                 "ffn_norm", "gate_up", "swiglu", "down", "ffn_add",  "final_norm", "classify"};
  const char* name = op.kind >= 0 && op.kind <= kClassify ? kNames[op.kind] : "?";
  tinyai::Format(out, capacity, "%s/%s", model_->descriptor(op.layer).name, name);
}

TinyAIStatus LlamaModel::BeginPass(const PassContext& pass) {
  if (!kv_.growable()) return TINYAI_OK;
  MemScope scope(kMemKv);
  return kv_.Reserve(pass.position + pass.shape.rows);
}

void LlamaModel::EndPass(const PassContext& pass) {
  const int32_t previous = position_;
  position_ = pass.position + pass.shape.rows;
  stream_.NextPass();
  NoteKvTouched();
  LedgerTokens(previous, position_);
}

// ---- the operators ----

TinyAIStatus LlamaModel::RunOp(const GraphOp& op, const OpIo& io, const PassContext& pass) {
  const int32_t n = pass.shape.rows;
  const size_t dim = static_cast<size_t>(hp_.dim), hidden = static_cast<size_t>(hp_.hidden_dim);
  const float* in = static_cast<const float*>(io.inputs[0]);
  float* out = static_cast<float*>(io.output);
  const BlockTensors* bt = op.arg >= 0 && static_cast<size_t>(op.arg) < blocks_.size() ? &blocks_[static_cast<size_t>(op.arg)] : nullptr;
  switch (op.kind) {
    case kEmbed: {
      const int32_t* tokens = static_cast<const int32_t*>(io.inputs[0]);
      TINYAI_RETURN_IF_ERROR(Embed(tokens, out, n));
      for (int32_t i = 0; i < n; ++i) kv_.SetToken(pass.position + i, tokens[i]);  // what a session saves
      return TINYAI_OK;
    }
    case kAttnNorm:
      return Norm(bt->attn_norm, in, out, n);
    case kFfnNorm:
      return Norm(bt->ffn_norm, in, out, n);
    case kQkv: {
      const int32_t t[] = {bt->attn_q, bt->attn_k, bt->attn_v};
      return stream_.MatMul(t, 3, in, dim, out, qkv_width(), hp_.dim, n, io.scratch, io.scratch_bytes);
    }
    case kRope:
      if (out != in) std::memcpy(out, in, static_cast<size_t>(n) * qkv_width() * sizeof(float));
      return Rope(op.arg, out, static_cast<float*>(io.scratch), pass);
    case kAttention:
      Attention(op.arg, in, out, static_cast<float*>(io.scratch), static_cast<size_t>(io.scratch_bytes), pass);
      return TINYAI_OK;
    case kAttnOut:
      return stream_.MatMul(&bt->attn_out, 1, in, dim, out, dim, hp_.dim, n, io.scratch, io.scratch_bytes);
    case kAttnAdd:
    case kFfnAdd:
      // The residual stream: out = x + branch (out is x itself unless in debug mode).
      if (out != in) std::memcpy(out, in, static_cast<size_t>(n) * dim * sizeof(float));
      k_->add(out, static_cast<const float*>(io.inputs[1]), static_cast<size_t>(n) * dim);
      return TINYAI_OK;
    case kGateUp: {
      const int32_t t[] = {bt->ffn_gate, bt->ffn_up};
      return stream_.MatMul(t, 2, in, dim, out, 2 * hidden, hp_.dim, n, io.scratch, io.scratch_bytes);
    }
    case kSwiglu:
      // Row i: gate at in + 2hi, up after it; the result goes to out + hi.
      // In place (out == in) each row's result lands on rows already used,
      // never on a gate or up not yet read.
      for (int32_t i = 0; i < n; ++i) {
        float* row_out = out + static_cast<size_t>(i) * hidden;
        const float* gate = in + static_cast<size_t>(i) * 2 * hidden;
        if (row_out != gate) std::memmove(row_out, gate, hidden * sizeof(float));
        k_->swiglu(row_out, gate + hidden, hidden);
      }
      return TINYAI_OK;
    case kDown:
      return stream_.MatMul(&bt->ffn_down, 1, in, hidden, out, dim, hp_.hidden_dim, n, io.scratch, io.scratch_bytes);
    case kFinalNorm:
      if (!pass.output) return TINYAI_OK;
      return Norm(output_norm_, in + static_cast<size_t>(n - 1) * dim, out, 1);
    case kClassify:
      if (!pass.output) return TINYAI_OK;  // a prompt's pass before its last: no logits are read
      return stream_.MatMul(&classifier_, 1, in, dim, out, static_cast<size_t>(hp_.vocab_size), hp_.dim, 1, io.scratch,
                            io.scratch_bytes);
  }
  return SetError(TINYAI_ERR_INTERNAL, "llama operator %d is unknown", op.kind);
}

TinyAIStatus LlamaModel::Embed(const int32_t* tokens, float* x, int32_t n) {
  const size_t dim = static_cast<size_t>(hp_.dim);
  for (int32_t i = 0; i < n; ++i) {
    TINYAI_RETURN_IF_ERROR(stream_.ReadRow(embedding_, static_cast<uint64_t>(tokens[i]), x + static_cast<size_t>(i) * dim, dim));
  }
  return TINYAI_OK;
}

TinyAIStatus LlamaModel::Norm(int32_t tensor, const float* x, float* out, int32_t n) {
  const size_t d = static_cast<size_t>(hp_.dim);
  const float* w = nullptr;
  int32_t slice = -1;
  TINYAI_RETURN_IF_ERROR(stream_.AcquireVector(tensor, &w, &slice));
  for (int32_t i = 0; i < n; ++i) k_->rmsnorm(x + static_cast<size_t>(i) * d, w, out + static_cast<size_t>(i) * d, d, hp_.norm_eps);
  stream_.Release(slice);
  return TINYAI_OK;
}

void LlamaModel::Rotate(float* vec, int32_t width, const float* cs) const {
  const int32_t hs = hp_.head_size();
  if (hp_.rope_neox) {  // pairs (i, i + hs / 2) of each head (llama.rope_neox)
    const int32_t half = hs / 2;
    for (int32_t h = 0; h < width; h += hs) {
      float* head = vec + h;
      for (int32_t pair = 0; pair < half; ++pair) {
        const float fcr = cs[2 * pair], fci = cs[2 * pair + 1];
        const float v0 = head[pair], v1 = head[pair + half];
        head[pair] = v0 * fcr - v1 * fci;
        head[pair + half] = v0 * fci + v1 * fcr;
      }
    }
    return;
  }
  for (int32_t i = 0; i < width; i += 2) {
    int32_t pair = (i % hs) / 2;
    float fcr = cs[2 * pair], fci = cs[2 * pair + 1];
    float v0 = vec[i], v1 = vec[i + 1];
    vec[i] = v0 * fcr - v1 * fci;
    vec[i + 1] = v0 * fci + v1 * fcr;
  }
}

TinyAIStatus LlamaModel::Rope(int32_t b, float* qkv, float* cs, const PassContext& pass) {
  const size_t d = static_cast<size_t>(hp_.dim), kvd = static_cast<size_t>(hp_.kv_dim());
  // The pass's positions have room (BeginPass reserved a growable cache's
  // chunks; slots are taken from 0 up, so the last one tells).
  int32_t run = 0;
  const int32_t last = pass.position + pass.shape.rows - 1;
  if (kv_.Rows(false, b, 0, kv_.Slot(last), &run) == nullptr) {
    return SetError(TINYAI_ERR_INTERNAL, "KV cache: position %d has no room (its pass was not reserved)",
                    static_cast<int>(last));
  }
  const BlockTensors& bt = blocks_[static_cast<size_t>(b)];
  if (bt.q_bias >= 0) {
    // Qwen2's biases (llama.qkv_bias), added before the rotation.
    const int32_t biases[3] = {bt.q_bias, bt.k_bias, bt.v_bias};
    const size_t offsets[3] = {0, d, d + kvd}, widths[3] = {d, kvd, kvd};
    for (int j = 0; j < 3; ++j) {
      const float* w = nullptr;
      int32_t slice = -1;
      TINYAI_RETURN_IF_ERROR(stream_.AcquireVector(biases[j], &w, &slice));
      for (int32_t i = 0; i < pass.shape.rows; ++i) {
        float* part = qkv + static_cast<size_t>(i) * qkv_width() + offsets[j];
        for (size_t c = 0; c < widths[j]; ++c) part[c] += w[c];
      }
      stream_.Release(slice);
    }
  }
  for (int32_t i = 0; i < pass.shape.rows; ++i) {
    RopeTable(pass.position + i, cs);
    float* row = qkv + static_cast<size_t>(i) * qkv_width();
    Rotate(row, hp_.dim, cs);
    Rotate(row + d, hp_.kv_dim(), cs);
    // Every key and value of the pass is stored before any of its queries
    // attends (kv/kv_cache.h: a window's ring has room for a whole pass).
    kv_.Store(b, pass.position + i, row + d, row + d + kvd);
  }
  return TINYAI_OK;
}

void LlamaModel::RopeTable(int32_t position, float* cs) const {
  // Linear RoPE scaling (llama.rope_linear_factor): the angle of position p
  // is that of p / factor, as llama.cpp scales it (theta * rope_freq_scale,
  // rope_freq_scale = 1 / factor). A factor of 1 multiplies by exactly 1.
  const float freq_scale = 1.0f / hp_.rope_linear_factor;
  for (int32_t pair = 0; pair < hp_.head_size() / 2; ++pair) {
    // TinyAI's own pow, cos and sin (common/fmath.h): the same table whatever
    // the target's C library.
    float freq = 1.0f / fmath::PowF(hp_.rope_theta, static_cast<float>(2 * pair) / static_cast<float>(hp_.head_size()));
    if (rope_factors_ != nullptr) {  // Llama 3's per-frequency scaling (llama.rope_freq_factors)
      float factor;
      std::memcpy(&factor, rope_factors_ + 4 * static_cast<size_t>(pair), sizeof factor);
      freq /= factor;
    }
    float val = static_cast<float>(position) * freq * freq_scale;
    fmath::CosSinF(val, &cs[2 * pair], &cs[2 * pair + 1]);
  }
}

size_t LlamaModel::AttentionThreadBytes() const {
  // Beside each thread's row of scores: with a window, a query rotated for
  // the sinks and its table; the cache's scratch for a quantized type.
  const size_t sink = kv_.windowed() ? AlignUp(static_cast<size_t>(hp_.head_size()) * 2 * sizeof(float), 64) : 0;
  return sink + AlignUp(kv_.ScratchBytes(), 64);
}

void LlamaModel::Attention(int32_t b, const float* qkv, float* out, float* scores, size_t scores_bytes,
                           const PassContext& pass) {
  const kernels::KernelTable& k = *k_;
  const size_t d = static_cast<size_t>(hp_.dim), hs = static_cast<size_t>(hp_.head_size());
  const int32_t heads = hp_.heads, kv_mul = hp_.heads / hp_.kv_heads;
  const float scale = 1.0f / sqrtf(static_cast<float>(hs));
  // Each thread's row of scores (the plan sized them for its largest
  // context: a row holds every key a query attends to), then its scratch.
  const size_t threads = static_cast<size_t>(pool_->size()), extra = AttentionThreadBytes();
  const size_t stride = (scores_bytes - threads * extra) / sizeof(float) / threads;
  uint8_t* extras = reinterpret_cast<uint8_t*>(scores + stride * threads);
  const size_t qkv_w = qkv_width();
  // Each (row, head) item reads its keys and values: about 2 * keys * head_size multiply-adds.
  const uint64_t work = static_cast<uint64_t>(pass.shape.rows) * static_cast<uint64_t>(heads) * 2u *
                        static_cast<uint64_t>(pass.shape.context) * hs;
  pool_->ParallelFor(static_cast<size_t>(pass.shape.rows) * static_cast<size_t>(heads), 1, work,
                     [&](size_t begin, size_t end, int t) {
    float* att = scores + static_cast<size_t>(t) * stride;
    uint8_t* mine = extras + static_cast<size_t>(t) * extra;
    float* q_sink = reinterpret_cast<float*>(mine);  // used with a window only
    float* cs = q_sink + hs;
    uint8_t* kv_scratch = mine + (kv_.windowed() ? AlignUp(hs * 2 * sizeof(float), 64) : 0);
    for (size_t item = begin; item < end; ++item) {
      const int32_t i = static_cast<int32_t>(item / static_cast<size_t>(heads));
      const int32_t h = static_cast<int32_t>(item % static_cast<size_t>(heads));
      const int32_t kh = h / kv_mul, position = pass.position + i;
      const float* qh = qkv + static_cast<size_t>(i) * qkv_w + static_cast<size_t>(h) * hs;
      // The keys this query sees, in position order: every one so far, or
      // the sinks and the window (which depend on the position alone, not
      // on how positions were split into passes).
      KvSpan spans[3];
      const int32_t count = kv_.Visible(position, spans);
      size_t len = 0;
      for (int32_t s = 0; s < count; ++s) {
        const float* q = qh;
        if (spans[s].sink) {  // the sinks, as seen from the cache position (kv/kv_cache.h)
          std::memcpy(q_sink, qh, hs * sizeof(float));
          RopeTable(kv_.SinkQueryPosition() - position, cs);
          Rotate(q_sink, static_cast<int32_t>(hs), cs);
          q = q_sink;
        }
        // In runs of contiguous rows (a growable cache's chunks).
        for (int32_t slot = spans[s].slot, end = spans[s].slot + spans[s].count, run = 0; slot < end; slot += run) {
          const uint8_t* keys = kv_.Rows(false, b, kh, slot, &run);
          run = run < end - slot ? run : end - slot;
          kv_.Scores(keys, run, q, att + len, kv_scratch);
          len += static_cast<size_t>(run);
        }
      }
      for (size_t j = 0; j < len; ++j) att[j] *= scale;
      k.softmax(att, len);
      float* o = out + static_cast<size_t>(i) * d + static_cast<size_t>(h) * hs;
      size_t at = 0;
      bool first = true;
      for (int32_t s = 0; s < count; ++s) {
        for (int32_t slot = spans[s].slot, end = spans[s].slot + spans[s].count, run = 0; slot < end; slot += run) {
          const uint8_t* values = kv_.Rows(true, b, kh, slot, &run);
          run = run < end - slot ? run : end - slot;
          kv_.Accumulate(values, run, att + at, o, first, kv_scratch);
          first = false;
          at += static_cast<size_t>(run);
        }
      }
    }
  });
}
}  // namespace tinyai
