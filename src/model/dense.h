// A dense network (model/dense_spec.h) as a program of the forward
// scheduler: each layer is y = act(W x + b), its input the sum of the
// outputs it depends on (a sum operator when there are several, overwriting
// the first in place at its last use), its weights streamed through the
// loader's cache in row slices like a language model's.
#ifndef TINYAI_MODEL_DENSE_H_
#define TINYAI_MODEL_DENSE_H_

#include <cstddef>
#include <cstdint>

#include "common/thread_pool.h"
#include "kernels/kernels.h"
#include "loader/mapped_model.h"
#include "model/dense_spec.h"
#include "model/weight_stream.h"
#include "scheduler/program.h"

namespace tinyai {

class DenseModel final : public LayerProgram {
 public:
  DenseModel() = default;
  DenseModel(const DenseModel&) = delete;
  DenseModel& operator=(const DenseModel&) = delete;
  ~DenseModel() = default;

  // Reads the network's description and binds its tensors (tables only).
  TinyAIStatus Bind(TinyAIMappedModel* model, ThreadPool* pool);

  // ---- LayerProgram ----
  TinyAIStatus OutputRowBytes(int32_t layer, uint64_t* bytes) const override;
  SizeRule InputSize() const override;
  TinyAIStatus CheckSchedule(const LayerGraph& graph) const override;
  TinyAIStatus EmitLayer(const LayerGraph& graph, int32_t node, const int32_t* inputs, int32_t count,
                         ActivationGraph* g, int32_t* output) override;
  void NameOp(const GraphOp& op, char* out, size_t capacity) const override;
  TinyAIStatus RunOp(const GraphOp& op, const OpIo& io, const PassContext& pass) override;
  void EndPass(const PassContext& pass) override { stream_.NextPass(); }
  WeightStream* weights() override { return &stream_; }
  ProgramMemory Memory() const override;
  TinyAIStatus AllocateState() override { return TINYAI_OK; }
  int32_t context_length() const override { return 0; }

  // Adds every layer with the inputs the file names: the network's input as
  // TINYAI_DEP_NONE, the layer just before as SEQUENTIAL, others as RESIDUAL.
  TinyAIStatus AddModelLayers(LayerGraph* graph) const override;

  const DenseNetSpec& spec() const { return spec_; }

 private:
  enum Op : int32_t { kSum, kDense };
  // The spec's layer for a file layer, or nullptr.
  const DenseLayerSpec* LayerSpec(int32_t layer) const;

  TinyAIMappedModel* model_ = nullptr;
  ThreadPool* pool_ = nullptr;
  const kernels::KernelTable* k_ = nullptr;
  DenseNetSpec spec_;
  WeightStream stream_;
};

}  // namespace tinyai

#endif  // TINYAI_MODEL_DENSE_H_
