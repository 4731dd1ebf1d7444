#include "loader/mapped_model.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>

#include "common/format.h"
#include "common/memory.h"
#include "common/panels.h"
#include "common/status.h"
#include "common/struct_size.h"
#include "common/sync.h"
#include "format/gguf_format.h"
#include "format/gguf_index.h"
#include "loader/precision_plan.h"

using tinyai::LockGuard;
using tinyai::SetError;

namespace {

// Open models, so that closing one twice is reported instead of freeing
// freed memory.
tinyai::Mutex g_live_mutex;
TinyAIMappedModel* g_live_head = nullptr;

uint64_t LoadLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

namespace tinyai {

TinyAIMmapConfig DefaultMmapConfig() {
  TinyAIMmapConfig c;
  std::memset(&c, 0, sizeof c);
  c.structSize = sizeof c;
  c.maxCacheSize = 256u * 1024u * 1024u;
  c.minLayerCacheSize = 4u * 1024u;
  c.prefetchThreads = TINYAI_PREFETCH_THREADS_AUTO;
  c.prefetchEnabled = true;
  c.adaptiveCaching = true;
  c.verifyChecksums = true;
  c.rowSliceSize = 1u << 20;
  return c;
}

}  // namespace tinyai

TinyAIStatus TinyAIMappedModel::Open(const tinyai::ModelOrigin& origin, const TinyAIMmapConfig* config,
                                     const tinyai::RowTransform& transform, TinyAIMappedModel** out) {
  *out = nullptr;
  TinyAIMmapConfig cfg = tinyai::DefaultMmapConfig();
  TINYAI_RETURN_IF_ERROR(tinyai::ReadVersioned(config, &cfg, TINYAI_STRUCT_MIN(TinyAIMmapConfig, maxCacheSize),
                                               "tinyaiOpenMappedModel: config"));
  if (cfg.prefetchThreads < TINYAI_PREFETCH_THREADS_AUTO || cfg.prefetchThreads > 64) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "config.prefetchThreads is %d; allowed 0..64, or "
                    "TINYAI_PREFETCH_THREADS_AUTO (-1)", cfg.prefetchThreads);
  }
  if (cfg.directReads < -1 || cfg.directReads > 1) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "config.directReads is %d; allowed -1 (never), 0 (while the "
                    "weight cache streams) or 1 (always)", cfg.directReads);
  }
  if (cfg.rowSliceSize < 64) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "config.rowSliceSize is %zu; it must be at least 64 bytes",
                    cfg.rowSliceSize);
  }
  tinyai::MemScope scope(tinyai::kMemModel);
  const int64_t opened_at = tinyai::LedgerThreadBytes();
  TinyAIMappedModel* model = tinyai::New<TinyAIMappedModel>();
  if (!model) return tinyai::OutOfMemory("mapped model", sizeof(TinyAIMappedModel));
  model->transform_ = transform;
  TinyAIStatus s = model->Init(origin, cfg);
  if (s != TINYAI_OK) {
    tinyai::Delete(model);
    return s;
  }
  // What the model holds that overhead_bytes() does not list (the model
  // itself, its queues, the allocator's headers), as the ledger recorded it.
  const int64_t taken = tinyai::LedgerThreadBytes() - opened_at;
  const uint64_t listed = model->overhead_bytes();
  model->unlisted_ = taken > 0 && static_cast<uint64_t>(taken) > listed ? static_cast<uint64_t>(taken) - listed : 0;
  {
    LockGuard lock(g_live_mutex);
    model->next_live_ = g_live_head;
    g_live_head = model;
  }
  *out = model;
  tinyai::LedgerMark(TINYAI_MEMORY_STAGE_INDEX, -1);  // no lock held: the observer may call back
  return TINYAI_OK;
}

TinyAIStatus TinyAIMappedModel::Close(TinyAIMappedModel* model) {
  {
    LockGuard lock(g_live_mutex);
    TinyAIMappedModel** link = &g_live_head;
    while (*link && *link != model) link = &(*link)->next_live_;
    if (!*link) {
      return SetError(TINYAI_ERR_MISUSE,
                      "tinyaiCloseMappedModel: %p is not an open model (closed twice, or never opened)",
                      static_cast<void*>(model));
    }
    LockGuard users(model->users_mutex_);
    for (tinyai::ModelUser* u = model->users_; u; u = u->next) {
      if (u->busy.load()) {
        return SetError(TINYAI_ERR_MISUSE,
                        "tinyaiCloseMappedModel: a runner on '%s' is generating (called from its text callback?); the "
                        "model stays open", model->reader_.source());
      }
    }
    // Its users outlive it: every call on them now fails, destroying them is
    // safe. (A runner's peak watch goes with the cache.)
    for (tinyai::ModelUser* u = model->users_; u; u = u->next) u->orphaned.store(true);
    model->users_ = nullptr;
    *link = model->next_live_;
  }
  tinyai::Delete(model);
  tinyai::LedgerMark(TINYAI_MEMORY_STAGE_CLOSE, -1);
  return TINYAI_OK;
}

bool TinyAIMappedModel::IsOpen(const TinyAIMappedModel* model) {
  LockGuard lock(g_live_mutex);
  for (const TinyAIMappedModel* m = g_live_head; m; m = m->next_live_) {
    if (m == model) return true;
  }
  return false;
}

TinyAIMappedModel::~TinyAIMappedModel() { cache_.Shutdown(); }

TinyAIStatus TinyAIMappedModel::Init(const tinyai::ModelOrigin& origin, const TinyAIMmapConfig& config) {
  config_ = config;
  const char* path = origin.path;
  const void* data = origin.data;
  const uint64_t size = origin.size;
  const char* name = path ? path : origin.read ? "<read callback>" : "<memory image>";
  size_t name_len = std::strlen(name);
  TINYAI_RETURN_IF_ERROR(source_name_.Allocate(name_len + 1, "model path"));
  std::memcpy(source_name_.data(), name, name_len + 1);
  if (path || origin.read) {
    if (path) {
      TINYAI_RETURN_IF_ERROR(source_.OpenFile(path));
      if (config.directReads >= 0) source_.EnableDirect(path);
    } else {
      source_.UseCallback(origin.read, origin.user, size);
    }
    tinyai::LedgerMark(TINYAI_MEMORY_STAGE_OPEN, -1);
    TINYAI_RETURN_IF_ERROR(ReadIndex());
  } else {
    if (reinterpret_cast<uintptr_t>(data) % 64 != 0) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "model image at %p is not 64-byte aligned", data);
    }
    source_.UseMemory(static_cast<const uint8_t*>(data), size);
    tinyai::LedgerMark(TINYAI_MEMORY_STAGE_OPEN, -1);
    if (size >= 4 && std::memcmp(data, "GGUF", 4) == 0) {
      TINYAI_RETURN_IF_ERROR(ReadGgufIndex(static_cast<const uint8_t*>(data)));
    } else {
      TINYAI_RETURN_IF_ERROR(reader_.Parse(static_cast<const uint8_t*>(data), size, size, source_name_.data()));
    }
  }
  TINYAI_RETURN_IF_ERROR(BuildDescriptors());
  TINYAI_RETURN_IF_ERROR(BuildTable());
  return cache_.Init(&reader_, &source_, &table_, config_, transform_);
}

TinyAIStatus TinyAIMappedModel::BuildTable() {
  return table_.Build(reader_, source_, config_.rowSliceSize, source_.InPlace(0) ? 0 : transform_.panel_dtypes);
}

TinyAIStatus TinyAIMappedModel::ReadIndex() {
  // The header says how long the index is; the reader checks everything,
  // so a header too short or inconsistent to trust gets only its own bytes.
  const uint64_t file_size = source_.size();
  uint8_t header[tinyai::tmai::kHeaderSize] = {};
  const size_t head = file_size < sizeof header ? static_cast<size_t>(file_size) : sizeof header;
  TINYAI_RETURN_IF_ERROR(source_.Read(0, head, header, source_name_.data()));
  if (head >= 4 && std::memcmp(header, "GGUF", 4) == 0) return ReadGgufIndex(nullptr);
  uint64_t index_size = head;
  if (head == sizeof header) {
    uint64_t data_offset = LoadLe64(header + 64);
    if (data_offset > head && data_offset <= file_size) index_size = data_offset;
  }
  TINYAI_RETURN_IF_ERROR(index_.Allocate(static_cast<size_t>(index_size), "model index",
                                         tinyai::AlignedBuffer::kUninitialized));
  TINYAI_RETURN_IF_ERROR(source_.Read(0, static_cast<size_t>(index_size), static_cast<uint8_t*>(index_.data()), source_name_.data()));
  return reader_.Parse(static_cast<uint8_t*>(index_.data()), index_size, file_size, source_name_.data());
}

TinyAIStatus TinyAIMappedModel::ReadGgufIndex(const uint8_t* image) {
  // The header is read as far as the parser asks (twice as much each time:
  // a Llama 3 vocabulary makes it some megabytes); it is let go once the
  // index is built.
  const char* name = source_name_.data();
  const uint64_t file_size = source_.size();
  tinyai::AlignedBuffer head;
  uint64_t have = 0, want = image ? file_size : file_size < (256u << 10) ? file_size : (256u << 10);
  tinyai::gguf::HeaderView h;
  for (;;) {
    if (!image) {
      tinyai::AlignedBuffer more;
      TINYAI_RETURN_IF_ERROR(more.Allocate(static_cast<size_t>(want), "GGUF header", tinyai::AlignedBuffer::kUninitialized));
      if (have > 0) std::memcpy(more.data(), head.data(), static_cast<size_t>(have));
      TINYAI_RETURN_IF_ERROR(source_.Read(have, static_cast<size_t>(want - have), static_cast<uint8_t*>(more.data()) + have, name));
      head = static_cast<tinyai::AlignedBuffer&&>(more);
    }
    have = want;
    const uint8_t* bytes = image ? image : static_cast<const uint8_t*>(head.data());
    const TinyAIStatus s = tinyai::gguf::ParseHeader(bytes, have, file_size, name, &h);
    if (s == TINYAI_OK) break;
    if (h.wanted <= have) return s;
    // A bound on what a header may take (a 256k-token vocabulary with its
    // merges is some 20 MB): past it, a GGUF is refused, not read whole.
    constexpr uint64_t kMaxHeaderBytes = 256u << 20;
    if (h.wanted > kMaxHeaderBytes) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': the GGUF header (keys and tensor directory) runs past %llu MiB; "
                      "TinyAI reads headers of up to %llu MiB", name, static_cast<unsigned long long>(have >> 20),
                      static_cast<unsigned long long>(kMaxHeaderBytes >> 20));
    }
    want = h.wanted;
  }
  struct Reader {
    static TinyAIStatus Read(void* user, uint64_t offset, size_t size, void* dst) {
      const TinyAIMappedModel* m = static_cast<const TinyAIMappedModel*>(user);
      return m->source_.Read(offset, size, dst, m->source_name_.data());
    }
  };
  uint64_t index_size = 0;
  TINYAI_RETURN_IF_ERROR(tinyai::BuildGgufIndex(h, file_size, name, &Reader::Read, this, &index_, &index_size));
  return reader_.Parse(static_cast<const uint8_t*>(index_.data()), index_size, file_size, name, true);
}

TinyAIStatus TinyAIMappedModel::BuildDescriptors() {
  const auto layers = reader_.layers();
  constexpr size_t kNameCapacity = 24;  // "block.65535" and "dense.2147483647" fit
  // Filled again in place when precisions are applied: descriptors handed
  // out stay valid until the model is closed.
  if (descriptors_.size() != layers.size()) {
    TINYAI_RETURN_IF_ERROR(descriptors_.Allocate(layers.size(), "layer descriptors"));
    TINYAI_RETURN_IF_ERROR(layer_names_.Allocate(layers.size() * kNameCapacity, "layer names"));
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    const tinyai::tmai::LayerEntry& l = layers[i];
    TinyAILayerDescriptor& d = descriptors_[i];
    char* name = layer_names_.data() + i * kNameCapacity;
    d.structSize = sizeof d;
    d.index = static_cast<int32_t>(i);
    d.kind = static_cast<TinyAILayerKind>(l.kind);
    d.blockIndex = l.kind == TINYAI_LAYER_TRANSFORMER ? l.block_index : -1;
    d.firstTensor = static_cast<int32_t>(l.first_tensor);
    d.tensorCount = static_cast<int32_t>(l.tensor_count);
    d.fileOffset = l.offset;
    d.storedSize = l.stored_size;
    d.decodedSize = l.decoded_size;
    if (l.kind == TINYAI_LAYER_TRANSFORMER) {
      tinyai::Format(name, kNameCapacity, "block.%d", l.block_index);
    } else if (l.kind == TINYAI_LAYER_DENSE && l.block_index >= 0) {
      tinyai::Format(name, kNameCapacity, "dense.%d", l.block_index);
    } else {
      tinyai::Format(name, kNameCapacity, "%s", tinyaiLayerKindName(d.kind));
    }
    d.name = name;
  }
  return TINYAI_OK;
}

uint64_t TinyAIMappedModel::Calibration::bytes() const {
  uint64_t n = slot_of.size() * sizeof(int32_t) + (importance.size() + factor.size()) * sizeof(tinyai::Array<float>);
  for (const auto& a : importance) n += a.size() * sizeof(float);
  for (const auto& a : factor) n += a.size() * sizeof(float);
  return n;
}

TinyAIStatus TinyAIMappedModel::ApplyDTypes(const uint8_t* dtypes, Calibration* calibration, Calibration* replaced) {
  tinyai::Array<tinyai::TensorPlan> plan;
  TINYAI_RETURN_IF_ERROR(CurrentPlan(&plan));
  for (size_t t = 0; t < plan.size(); ++t) plan[t].dtype = dtypes[t];
  return ApplyPlan(plan.data(), calibration, replaced);
}

TinyAIStatus TinyAIMappedModel::ApplyPlan(const tinyai::TensorPlan* plan, Calibration* calibration,
                                          Calibration* replaced, bool keep_calibration) {
  {
    LockGuard lock(users_mutex_);
    if (users_ != nullptr) {
      return SetError(TINYAI_ERR_MISUSE, "'%s': an LLM or scheduler runs on this model; change its precisions or "
                      "pruning before creating one (or after destroying it)", reader_.source());
    }
  }
  if (cache_.AnyPinned()) {
    return SetError(TINYAI_ERR_MISUSE, "'%s': a layer's weights are pinned (tinyaiGetLayerWeights without "
                    "tinyaiReleaseLayerWeights); release them before changing precisions or pruning", reader_.source());
  }
  bool any = false;
  const auto file = reader_.file_tensors();
  for (size_t t = 0; t < file.size(); ++t) {
    any |= plan[t].dtype != file[t].dtype || (plan[t].block != 0 && !tinyai::tmai::IsBlockSparse(file[t]));
  }
  if (any && !transform_.converts()) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': the model was opened without a row codec (RowTransform); its "
                    "precisions and pruning cannot change", reader_.source());
  }
  tinyai::Array<tinyai::tmai::LayerEntry> layers;
  tinyai::Array<tinyai::tmai::TensorEntry> tensors;
  tinyai::Array<uint8_t> scores;
  if (any) {
    TINYAI_RETURN_IF_ERROR(tinyai::LayoutDirectory(reader_, plan, &layers, &tensors));
    TINYAI_RETURN_IF_ERROR(scores.Allocate(file.size(), "pruning scores"));
    for (size_t t = 0; t < file.size(); ++t) scores[t] = tinyai::tmai::IsBlockSparse(file[t]) ? 0 : plan[t].score;
  }
  cache_.Shutdown();
  auto use = [this](tinyai::Array<tinyai::tmai::LayerEntry>& l, tinyai::Array<tinyai::tmai::TensorEntry>& t) {
    reader_.UseDirectory(tinyai::Span<const tinyai::tmai::LayerEntry>(l.data(), l.size()),
                         tinyai::Span<const tinyai::tmai::TensorEntry>(t.data(), t.size()));
    TINYAI_RETURN_IF_ERROR(BuildDescriptors());
    TINYAI_RETURN_IF_ERROR(BuildTable());
    cache_.UseCalibration(this, &CalibrationFor);
    return cache_.Init(&reader_, &source_, &table_, config_, transform_);
  };
  // The cache reads the calibration and the scores as it converts: set
  // before it starts.
  Calibration old;
  if (!keep_calibration) {
    old = static_cast<Calibration&&>(calibration_);
    if (calibration) calibration_ = static_cast<Calibration&&>(*calibration);
  }
  tinyai::Array<uint8_t> old_scores = static_cast<tinyai::Array<uint8_t>&&>(prune_scores_);
  prune_scores_ = static_cast<tinyai::Array<uint8_t>&&>(scores);
  TinyAIStatus s = use(layers, tensors);
  if (s == TINYAI_OK) {
    dir_layers_ = static_cast<tinyai::Array<tinyai::tmai::LayerEntry>&&>(layers);
    dir_tensors_ = static_cast<tinyai::Array<tinyai::tmai::TensorEntry>&&>(tensors);
    if (replaced && !keep_calibration) *replaced = static_cast<Calibration&&>(old);
    return TINYAI_OK;
  }
  // Back to what it was (which built before).
  cache_.Shutdown();
  if (!keep_calibration) calibration_ = static_cast<Calibration&&>(old);
  prune_scores_ = static_cast<tinyai::Array<uint8_t>&&>(old_scores);
  (void)use(dir_layers_, dir_tensors_);
  return s;
}

tinyai::TensorCalibration TinyAIMappedModel::CalibrationOf(int32_t tensor) const {
  tinyai::TensorCalibration s;
  s.prune_score = PruneScoreOf(tensor);
  if (calibration_.slot_of.size() == 0 || calibration_.slot_of[static_cast<size_t>(tensor)] < 0) return s;
  const size_t slot = static_cast<size_t>(calibration_.slot_of[static_cast<size_t>(tensor)]);
  if (calibration_.importance[slot].size() > 0) s.importance = calibration_.importance[slot].data();
  if (calibration_.factor[slot].size() > 0) s.factor = calibration_.factor[slot].data();
  return s;
}

tinyai::TensorCalibration TinyAIMappedModel::CalibrationFor(const void* model, int32_t tensor) {
  return static_cast<const TinyAIMappedModel*>(model)->CalibrationOf(tensor);
}

uint64_t TinyAIMappedModel::overhead_bytes(size_t staging_sets) const {
  return dir_layers_.size() * sizeof(tinyai::tmai::LayerEntry) + calibration_.bytes() +
         dir_tensors_.size() * sizeof(tinyai::tmai::TensorEntry) + index_.bytes() + descriptors_.size() * sizeof(TinyAILayerDescriptor) + layer_names_.size() +
         table_.bytes() + cache_.overhead_bytes(staging_sets) + unlisted_;
}

TinyAIStatus TinyAIMappedModel::CheckLayer(int32_t layer, const char* call) const {
  if (layer < 0 || layer >= layer_count()) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: layer %d is out of range (the model has %d)", call,
                    layer, layer_count());
  }
  return TINYAI_OK;
}

TinyAIStatus TinyAIMappedModel::Acquire(int32_t layer, const uint8_t** data) {
  TINYAI_RETURN_IF_ERROR(CheckLayer(layer, "tinyaiGetLayerWeights"));
  return cache_.Acquire(cache_.LayerEntry(layer), data);
}

TinyAIStatus TinyAIMappedModel::Release(int32_t layer) {
  TINYAI_RETURN_IF_ERROR(CheckLayer(layer, "tinyaiReleaseLayerWeights"));
  TinyAIStatus s = cache_.Release(cache_.LayerEntry(layer));
  if (s != TINYAI_OK) return tinyai::AddErrorContext(s, "tinyaiReleaseLayerWeights: ");
  return s;
}

TinyAIStatus TinyAIMappedModel::Prefetch(int32_t layer) {
  TINYAI_RETURN_IF_ERROR(CheckLayer(layer, "tinyaiPrefetchLayerWeights"));
  return cache_.Prefetch(cache_.LayerEntry(layer));
}

TinyAIStatus TinyAIMappedModel::SetPriority(int32_t layer, float priority) {
  TINYAI_RETURN_IF_ERROR(CheckLayer(layer, "tinyaiSetLayerPriority"));
  if (!std::isfinite(priority) || priority < 0.0f) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiSetLayerPriority: priority %g must be finite and >= 0",
                    static_cast<double>(priority));
  }
  cache_.SetLayerPriority(layer, priority);
  return TINYAI_OK;
}

TinyAIStatus TinyAIMappedModel::AcquireRun(int32_t tensor, uint64_t row, RowRun* run) {
  const tinyai::TensorSpan* span = table_.Find(tensor, row);
  if (!span) {
    const tinyai::tmai::TensorEntry& e = reader_.tensors()[static_cast<size_t>(tensor)];
    if (table_.spans(tensor).empty()) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' uses codec %s, which this build cannot load",
                      source_name_.data(), e.name, tinyaiCodecName(static_cast<TinyAICodec>(e.codec)));
    }
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': row %llu of tensor '%s' is out of range", source_name_.data(),
                    static_cast<unsigned long long>(row), e.name);
  }
  const uint8_t* base = nullptr;
  TINYAI_RETURN_IF_ERROR(cache_.Acquire(span->slice, &base));
  run->data = base + span->offset;
  run->first = span->row_begin;
  run->end = span->row_end;
  table_.SpanPanels(tensor, *span, &run->panels_first, &run->panels_end);
  run->slice = span->slice;
  return TINYAI_OK;
}

TinyAIStatus TinyAIMappedModel::CopyRows(int32_t tensor, uint64_t row, uint64_t max_rows, uint8_t* out,
                                         uint64_t* rows) {
  RowRun run;
  TINYAI_RETURN_IF_ERROR(AcquireRun(tensor, row, &run));
  const uint64_t end = run.end - row < max_rows ? run.end : row + max_rows;
  const size_t rb = static_cast<size_t>(table_.row_bytes(tensor));
  for (uint64_t r = row; r < end; ++r) {
    uint8_t* to = out + (r - row) * rb;
    if (r >= run.panels_first && r < run.panels_end) {
      tinyai::UnpackPanelRow(run.data + (r - r % tinyai::kPanelRows - run.first) * rb, rb,
                             static_cast<size_t>(r % tinyai::kPanelRows), to);
    } else {
      std::memcpy(to, run.data + (r - run.first) * rb, rb);
    }
  }
  *rows = end - row;
  return cache_.Release(run.slice);
}

TinyAIStatus TinyAIMappedModel::AcquireRows(int32_t tensor, uint64_t row, const uint8_t** data, uint64_t* rows,
                                            int32_t* slice) {
  RowRun run;
  TINYAI_RETURN_IF_ERROR(AcquireRun(tensor, row, &run));
  if (row >= run.panels_first && row < run.panels_end) {
    (void)cache_.Release(run.slice);
    return SetError(TINYAI_ERR_INTERNAL, "'%s': row %llu of tensor '%s' is held in a panel, not as a row",
                    source_name_.data(), static_cast<unsigned long long>(row),
                    reader_.tensors()[static_cast<size_t>(tensor)].name);
  }
  *data = run.data + (row - run.first) * table_.row_bytes(tensor);
  *rows = (row < run.panels_first ? run.panels_first : run.end) - row;
  *slice = run.slice;
  return TINYAI_OK;
}

TinyAIStatus TinyAIMappedModel::TensorInfo(int32_t tensor, TinyAITensorInfo* out) const {
  const auto tensors = reader_.tensors();
  if (tensor < 0 || static_cast<size_t>(tensor) >= tensors.size()) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tensor %d is out of range (the model has %zu)", tensor,
                    tensors.size());
  }
  const tinyai::tmai::TensorEntry& t = tensors[static_cast<size_t>(tensor)];
  const tinyai::tmai::LayerEntry& l = reader_.layers()[t.layer];
  std::memset(out, 0, sizeof *out);
  out->structSize = sizeof *out;
  out->name = reader_.file_tensors()[static_cast<size_t>(tensor)].name;  // lives until close
  out->role = static_cast<TinyAITensorRole>(t.role);
  out->dtype = static_cast<TinyAIDType>(t.dtype);
  out->codec = static_cast<TinyAICodec>(t.codec);
  out->layer = t.layer;
  out->blockIndex = l.kind == TINYAI_LAYER_TRANSFORMER ? l.block_index : -1;
  out->nDims = t.ndims;
  out->elementCount = 1;
  for (int d = 0; d < t.ndims; ++d) {
    out->shape[d] = t.shape[d];
    out->elementCount *= t.shape[d];
  }
  out->offsetInLayer = t.decoded_offset;
  out->decodedSize = t.decoded_size;
  out->storedSize = t.stored_size;
  out->checksum = t.checksum;
  return TINYAI_OK;
}

TinyAIStatus TinyAIMappedModel::FindTensor(const char* name, int32_t* index) const {
  int32_t i = reader_.FindTensor(name);
  if (i < 0) return SetError(TINYAI_ERR_NOT_FOUND, "'%s': no tensor named '%s'", source_name_.data(), name);
  *index = i;
  return TINYAI_OK;
}
