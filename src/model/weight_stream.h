// Weights streamed through the loader's weight cache in row slices, in the
// order a pass reads them (shared by every model runtime).
//
// A matrix product pins a window of slices, multiplies, and releases them,
// so a tensor larger than the cache (a 32,000-row classifier) passes through
// it in pieces and the cache, never this code, decides what stays resident.
// Slices ahead of the one in use are prefetched in the order a pass consumes
// them; the order is a cycle (after the last slice of a pass come the first
// of the next).
#ifndef TINYAI_MODEL_WEIGHT_STREAM_H_
#define TINYAI_MODEL_WEIGHT_STREAM_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/sparse.h"
#include "common/thread_pool.h"
#include "kernels/kernels.h"
#include "loader/mapped_model.h"
#include "scheduler/program.h"

namespace tinyai {

class WeightStream final : public ProgramWeights {
 public:
  WeightStream() = default;
  WeightStream(const WeightStream&) = delete;
  WeightStream& operator=(const WeightStream&) = delete;

  // Starts an empty sequence over model's row slices.
  TinyAIStatus Init(TinyAIMappedModel* model);
  // Appends the slices of tensor (those not already in the sequence), in the
  // order the pass reads them.
  void AddTensor(int32_t tensor);
  // Counts a tensor the pass reads outside the sequence (a row at a time,
  // like an embedding table): its slices count for NORMAL's preload and the
  // largest slice, but are not prefetched.
  void AddSideTensor(int32_t tensor);
  // The compute resources products run on; call before the first product.
  void Bind(ThreadPool* pool, const kernels::KernelTable* kernels) {
    pool_ = pool;
    k_ = kernels;
  }

  // Re-reads the cache's cap to size windows and prefetch lookahead (done
  // before a product whenever the cap has changed: another runner on the
  // model may change it).
  void UpdateStreaming() override;
  // Loads every slice the scheduled layers use (NORMAL mode; layers[l] != 0
  // for a scheduled layer, nullptr = all); fails with the cache's
  // TINYAI_ERR_RESOURCE_EXHAUSTED when they do not fit its cap.
  TinyAIStatus Preload(const uint8_t* layers) override;

  // What the slices of the scheduled layers (as for Preload) take.
  WeightTotals Sum(const uint8_t* layers) const override;
  // Names what slice holds: "tensor 'x'", or for a slice several small
  // tensors share, "tensor 'x' and 3 smaller ones of layer 'block.0'".
  void DescribeSlice(int32_t slice, char* out, size_t capacity) const override;
  // The tensor with the most bytes in slice (-1 for none).
  int32_t MainTensor(int32_t slice) const override;

  // y[j*ldy + r] = W[r] . x[j*ldx ...] for j < n, where W stacks the rows of
  // tensors[0..count) (all `cols` wide, each in its own dtype), rows split
  // across the pool's threads. When a tensor is of a grouped dtype, x is
  // quantized once into scratch, which holds InputScratchBytes per row of x.
  TinyAIStatus MatMul(const int32_t* tensors, int count, const float* x, size_t ldx, float* y, size_t ldy,
                      int32_t cols, int32_t n, void* scratch = nullptr, uint64_t scratch_bytes = 0);
  // The scratch MatMul needs per row of x for these tensors: the input of
  // cols values quantized in each form their dtypes take (0 for none).
  uint64_t InputScratchBytes(const int32_t* tensors, int count, int32_t cols) const;
  // Pins the slice holding a 1-D f32 tensor (a norm's weights, a bias).
  TinyAIStatus AcquireVector(int32_t tensor, const float** data, int32_t* slice);
  // Writes one row of a 2-D tensor (`cols` values) into out in fp32,
  // whatever its dtype (an embedding lookup).
  TinyAIStatus ReadRow(int32_t tensor, uint64_t row, float* out, size_t cols);
  void Release(int32_t slice) { model_->ReleaseSlice(slice); }
  // Marks the end of a pass: the next reads are the next cycle's.
  void NextPass() { ++pass_; }

  // Bytes of this object's tables.
  uint64_t bytes() const;

  // Called with every product's input before it is multiplied (calibration:
  // the mean square each weight column meets). nullptr stops it.
  using InputObserver = void (*)(void* user, const int32_t* tensors, int count, const float* x, size_t ldx,
                                 int32_t cols, int32_t n);
  void SetInputObserver(InputObserver observer, void* user) {
    observer_ = observer;
    observer_user_ = user;
  }

 private:
  struct Segment {
    const uint8_t* w;
    size_t row_bytes;
    const kernels::WeightKernels* ops;  // for the tensor's dtype
    size_t first;
    size_t rows;
    // Its rows [panels_first, panels_end) (from the segment's first) are
    // held in panels (common/panels.h); equal when none are.
    size_t panels_first, panels_end;
    // A block-sparse matrix (sparse.block != 0): w is a run of its bands
    // (row_bytes a band's bytes) and rows counts the output rows they give
    // (the last band of the matrix may give fewer than its block).
    SparseLayout sparse;
  };
  // Rows [a, b) of a segment (from its first) against the inputs; y points
  // at row a's output.
  static void MultiplyRows(const Segment& sg, size_t a, size_t b, const void* const* inputs, size_t ldx, float* y,
                           size_t ldy, size_t cols, int32_t n);
  // Output rows [a, b) of a block-sparse segment: whole bands straight to
  // y, a band the range cuts (or the matrix's short last band) computed
  // whole aside and the range's rows copied.
  static void MultiplySparse(const Segment& sg, size_t a, size_t b, const void* const* inputs, size_t ldx, float* y,
                             size_t ldy, size_t cols, int32_t n);
  static void MultiplyPanels(const Segment& sg, size_t a, size_t b, const void* x, float* y, size_t ldy, size_t cols,
                             int32_t n);
  // The products for tensor's dtype, or an error naming it.
  TinyAIStatus OpsFor(int32_t tensor, const kernels::WeightKernels** ops) const;
  void Count(int32_t slice) { counted_[static_cast<size_t>(slice)] = 1; }
  void PrefetchAfter(int32_t slice);
  void ReleasePinned(size_t count);
  // inputs[form]: the product's input in each InputForm it needs.
  void MultiplyWindow(size_t segments, const void* const* inputs, size_t ldx, float* y, size_t ldy, size_t cols,
                      int32_t n);
  uint32_t InputForms(const int32_t* tensors, int count) const;
  // Bytes per row of x the forms in the mask take quantized.
  static uint64_t FormsBytes(uint32_t forms, int32_t cols);
  // Quantizes the n rows of x in form into out, one after the other.
  void QuantizeInput(const float* x, size_t ldx, InputForm form, void* out, size_t cols, int32_t n);
  uint64_t SliceBytes(int32_t slice) const { return model_->slices().slice(slice).decoded_size; }

  TinyAIMappedModel* model_ = nullptr;
  ThreadPool* pool_ = nullptr;
  const kernels::KernelTable* k_ = nullptr;
  Array<int32_t> sequence_;        // slices in pass order
  size_t sequence_length_ = 0;
  Array<int32_t> sequence_index_;  // per slice: its place in sequence_, -1 if absent
  Array<uint8_t> counted_;         // per slice: counted in resident_bytes_
  Array<Segment> segments_;
  Array<int32_t> pinned_;
  uint64_t window_bytes_ = 0;      // pin at most this much per window (0 = no limit)
  uint64_t lookahead_bytes_ = 0;   // prefetch this far ahead
  uint64_t prefetched_until_ = 0;  // absolute sequence position prefetch has reached
  uint64_t pass_ = 0;              // passes done (absolute position = pass * length + index)
  uint32_t cap_epoch_ = 0;         // the cache cap the sizes above were made for
  InputObserver observer_ = nullptr;
  void* observer_user_ = nullptr;
};

}  // namespace tinyai

#endif  // TINYAI_MODEL_WEIGHT_STREAM_H_
