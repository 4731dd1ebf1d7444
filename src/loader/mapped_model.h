// The model behind <tinyai/utils/mmap_loader.h>: a validated .tmai index and
// a capped weight cache (loader/weight_cache.h) over the file's data, or over
// an image in memory.
//
// Files are read with positional reads into memory the cache owns (see
// weight_cache.h for why not a mapping); only the index is read at open.
// Two ways in: whole layers (the C API's tinyaiGetLayerWeights) and row
// slices (the runners, which stream tensors larger than the cache).
#ifndef TINYAI_LOADER_MAPPED_MODEL_H_
#define TINYAI_LOADER_MAPPED_MODEL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/memory.h"
#include "common/sync.h"
#include "format/tmai_reader.h"
#include "loader/row_slices.h"
#include "loader/precision_plan.h"
#include "loader/row_transform.h"
#include "loader/weight_cache.h"
#include "loader/weight_source.h"
#include "tinyai/utils/mmap_loader.h"

namespace tinyai {

// The loader's defaults (what tinyaiCreateDefaultMmapConfig returns).
TinyAIMmapConfig DefaultMmapConfig();

// Something that runs on a model and may outlive it: a runner (a forward
// scheduler; every TinyAILLM has one). Closing the model orphans its users:
// every later call on them is TINYAI_ERR_MISUSE, and destroying them is
// still safe. How runners share the model's weight cache is decided above
// the loader (scheduler/cache_budget.h, which binds them).
struct ModelUser {
  std::atomic<bool> orphaned{false};  // its model was closed
  std::atomic<bool> busy{false};      // in a call that runs the caller's callbacks
  ModelUser* next = nullptr;
};

}  // namespace tinyai

struct TinyAIMappedModel {
 public:
  // transform (loader/row_transform.h: the panel layout, the row codec) is
  // the caller's decision: the C API hands the models' one
  // (model/weight_transform.h). The model keeps a copy.
  static TinyAIStatus Open(const tinyai::ModelOrigin& origin, const TinyAIMmapConfig* config,
                           const tinyai::RowTransform& transform, TinyAIMappedModel** out);
  // Closes a model Open() returned; TINYAI_ERR_MISUSE (and nothing freed) for
  // a pointer that is not an open model, e.g. one closed already, or while a
  // runner on it is in a call (its text callback closing the model). Its
  // users are orphaned (ModelUser).
  static TinyAIStatus Close(TinyAIMappedModel* model);

  const tinyai::TmaiReader& reader() const { return reader_; }
  const TinyAIMmapConfig& config() const { return config_; }
  int32_t layer_count() const { return static_cast<int32_t>(descriptors_.size()); }
  const TinyAILayerDescriptor& descriptor(int32_t layer) const { return descriptors_[static_cast<size_t>(layer)]; }
  uint64_t file_size() const { return source_.size(); }
  const tinyai::WeightSource& source() const { return source_; }

  // Whole layers: pins the layer, loading it first if needed.
  TinyAIStatus Acquire(int32_t layer, const uint8_t** data);
  // Unpins; TINYAI_ERR_MISUSE if the layer is not pinned.
  TinyAIStatus Release(int32_t layer);
  TinyAIStatus Prefetch(int32_t layer);
  TinyAIStatus SetPriority(int32_t layer, float priority);
  size_t MemoryUsage() const { return static_cast<size_t>(cache_.held_bytes()); }

  // Row slices: pins the slice holding `row` of tensor; *data points at that
  // row and *rows says how many rows of the tensor follow it in the slice.
  // Release with ReleaseSlice(*slice).
  // Rows held in panels (common/panels.h; RowSliceTable::panels) are not
  // rows: for them TINYAI_ERR_INTERNAL; a run of plain rows ends before them.
  TinyAIStatus AcquireRows(int32_t tensor, uint64_t row, const uint8_t** data, uint64_t* rows, int32_t* slice);
  // The rows of tensor in the slice holding `row`, as the cache holds them:
  // pins the slice (release with ReleaseSlice(run->slice)).
  struct RowRun {
    const uint8_t* data = nullptr;  // the bytes of row `first`
    uint64_t first = 0, end = 0;    // tensor rows [first, end)
    // Of those, [panels_first, panels_end) lie in panels of kPanelRows rows
    // (both multiples of it; equal when none): the panel holding row r
    // starts at data + (r - r % kPanelRows - first) * row_bytes. A plain
    // row r is at data + (r - first) * row_bytes.
    uint64_t panels_first = 0, panels_end = 0;
    int32_t slice = -1;
  };
  TinyAIStatus AcquireRun(int32_t tensor, uint64_t row, RowRun* run);
  // Copies rows of tensor from `row` in the row layout (panels unpacked)
  // into out: *rows of them, at least one and at most max_rows (> 0), up to
  // the end of row's slice. out holds max_rows rows.
  TinyAIStatus CopyRows(int32_t tensor, uint64_t row, uint64_t max_rows, uint8_t* out, uint64_t* rows);
  TinyAIStatus ReleaseSlice(int32_t slice) { return cache_.Release(slice); }
  void PrefetchSlice(int32_t slice) { cache_.Prefetch(slice); }
  const tinyai::RowSliceTable& slices() const { return table_; }
  tinyai::WeightCache& cache() { return cache_; }
  const tinyai::WeightCache& cache() const { return cache_; }

  // Bytes the model holds besides weights: the index, slice tables, cache
  // bookkeeping and staging, and what the recording allocator found held
  // at open beyond those (the model itself, its queues, headers).
  // (staging_sets: as if the cache kept at most that many staging sets; 0:
  // as it keeps now.)
  uint64_t overhead_bytes(size_t staging_sets = 0) const;

  TinyAIStatus TensorInfo(int32_t tensor, TinyAITensorInfo* out) const;
  // Index of the tensor called name, or TINYAI_ERR_NOT_FOUND.
  TinyAIStatus FindTensor(const char* name, int32_t* index) const;

  // Runs tensor t at dtypes[t] from now on (loader/precision_plan.h resolved
  // and checked them): the runtime directory is laid out again, the slice
  // table rebuilt and the weight cache started afresh (what it held is
  // dropped; its cap is maxCacheSize). TINYAI_ERR_MISUSE, nothing changed,
  // while a runner is bound or an entry is pinned; TINYAI_ERR_UNSUPPORTED
  // when a dtype changes and the model was opened with a transform that
  // does not convert.
  // What calibration measured, per slot (an input: the tensors one
  // product reads share a slot), as TensorCalibration hands it on.
  struct Calibration {
    tinyai::Array<int32_t> slot_of;                  // per tensor: its slot, -1 for none
    tinyai::Array<tinyai::Array<float>> importance;  // per slot: cols values, or none
    tinyai::Array<tinyai::Array<float>> factor;      // per slot: cols x cols, or none
    uint64_t bytes() const;
  };
  // calibration (may be null) is moved into the model, which holds it
  // until the next ApplyDTypes (dropped if this one fails: the model keeps
  // the one it had). The one it replaces is moved to *replaced when given
  // (so a caller can put it back), else dropped.
  TinyAIStatus ApplyDTypes(const uint8_t* dtypes, Calibration* calibration = nullptr, Calibration* replaced = nullptr);
  // As ApplyDTypes for a whole plan (loader/precision_plan.h): dtypes and
  // the blocks of matrices pruned as they load. ApplyDTypes keeps each
  // tensor's pruning; this replaces it. keep_calibration: calibration is
  // ignored and the model's own kept (nothing moves to *replaced).
  TinyAIStatus ApplyPlan(const tinyai::TensorPlan* plan, Calibration* calibration = nullptr,
                         Calibration* replaced = nullptr, bool keep_calibration = false);
  // The plan the model runs now.
  TinyAIStatus CurrentPlan(tinyai::Array<tinyai::TensorPlan>* plan) const {
    return tinyai::CurrentPlan(reader_, prune_scores_.size() ? prune_scores_.data() : nullptr, plan);
  }
  // How tensor's blocks are chosen as it loads (quant::PruneScore; 0 when
  // it is not pruned as it loads).
  uint8_t PruneScoreOf(int32_t tensor) const {
    return prune_scores_.size() ? prune_scores_[static_cast<size_t>(tensor)] : 0;
  }
  // What ApplyDTypes' calibration gave tensor (nulls for none).
  tinyai::TensorCalibration CalibrationOf(int32_t tensor) const;
  // What the model was opened with.
  const tinyai::RowTransform& transform() const { return transform_; }

  // TINYAI_ERR_INVALID_ARGUMENT naming the call when layer is out of range.
  TinyAIStatus CheckLayer(int32_t layer, const char* call) const;

  // True when model is a model Open() returned and Close() has not closed.
  static bool IsOpen(const TinyAIMappedModel* model);

  // ---- users (ModelUser above) ----
  // Runs f(users) with the users' lock held and returns what it returns:
  // users is the head of the list of bound users (linked by next), which f
  // may change (bind, unbind); Close and ApplyDTypes wait meanwhile.
  template <class F>
  auto WithUsers(F&& f) {
    tinyai::LockGuard lock(users_mutex_);
    return f(users_);
  }
  template <class F>
  auto WithUsers(F&& f) const {
    tinyai::LockGuard lock(users_mutex_);
    return f(static_cast<const tinyai::ModelUser*>(users_));
  }

 private:
  uint64_t unlisted_ = 0;  // see overhead_bytes()
  template <class T, class... Args>
  friend T* tinyai::New(Args&&... args);
  template <class T>
  friend void tinyai::Delete(T* p);
  TinyAIMappedModel() = default;
  ~TinyAIMappedModel();
  TinyAIStatus Init(const tinyai::ModelOrigin& origin, const TinyAIMmapConfig& config);
  // The slice table over the runtime directory: panels as the transform
  // asks, where the cache owns the bytes (a source used in place is never
  // rewritten).
  TinyAIStatus BuildTable();
  TinyAIStatus ReadIndex();
  // A GGUF file (image: its bytes in memory, or nullptr to read them):
  // the index built for it (format/gguf_index.h) into index_.
  TinyAIStatus ReadGgufIndex(const uint8_t* image);
  TinyAIStatus BuildDescriptors();
  static tinyai::TensorCalibration CalibrationFor(const void* model, int32_t tensor);

  TinyAIMmapConfig config_{};
  tinyai::RowTransform transform_;
  tinyai::Array<char> source_name_;  // path for messages
  tinyai::WeightSource source_;
  tinyai::AlignedBuffer index_;  // the file's index (files only; an image is parsed in place)
  tinyai::TmaiReader reader_;
  tinyai::Array<TinyAILayerDescriptor> descriptors_;
  tinyai::Array<char> layer_names_;
  // The runtime directory when precisions are applied (reader_ uses it).
  tinyai::Array<tinyai::tmai::LayerEntry> dir_layers_;
  tinyai::Array<tinyai::tmai::TensorEntry> dir_tensors_;
  Calibration calibration_;  // CalibrationOf
  tinyai::Array<uint8_t> prune_scores_;  // per tensor, PruneScoreOf (empty: none pruned as it loads)
  tinyai::RowSliceTable table_;
  tinyai::WeightCache cache_;
  TinyAIMappedModel* next_live_ = nullptr;  // the registry of open models
  mutable tinyai::Mutex users_mutex_;
  tinyai::ModelUser* users_ = nullptr;
};

#endif  // TINYAI_LOADER_MAPPED_MODEL_H_
