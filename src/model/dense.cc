#include "model/dense.h"

#include <cmath>
#include <cstdio>

#include "common/format.h"
#include "common/status.h"
#include "format/limits.h"

namespace tinyai {

TinyAIStatus DenseModel::Bind(TinyAIMappedModel* model, ThreadPool* pool) {
  model_ = model;
  pool_ = pool;
  k_ = &kernels::Best();
  TINYAI_RETURN_IF_ERROR(spec_.Load(model->reader()));
  TINYAI_RETURN_IF_ERROR(stream_.Init(model));
  for (const DenseLayerSpec& l : spec_.layers()) {
    stream_.AddTensor(l.weight);
    if (l.bias >= 0) stream_.AddTensor(l.bias);
  }
  stream_.Bind(pool_, k_);
  return TINYAI_OK;
}

const DenseLayerSpec* DenseModel::LayerSpec(int32_t layer) const {
  // Every layer of a dense model is one, in order (DenseNetSpec::Load).
  const Span<const DenseLayerSpec> layers = spec_.layers();
  return layer >= 0 && static_cast<size_t>(layer) < layers.size() ? &layers[static_cast<size_t>(layer)] : nullptr;
}

TinyAIStatus DenseModel::OutputRowBytes(int32_t layer, uint64_t* bytes) const {
  const DenseLayerSpec* l = LayerSpec(layer);
  if (!l) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "'%s': layer %d is not a layer of this dense network",
                    model_->reader().source(), layer);
  }
  *bytes = static_cast<uint64_t>(l->out) * sizeof(float);
  return TINYAI_OK;
}

SizeRule DenseModel::InputSize() const {
  return SizeRule::Rows(static_cast<uint64_t>(spec_.input_dim()) * sizeof(float));
}

TinyAIStatus DenseModel::AddModelLayers(LayerGraph* graph) const {
  const Span<const DenseLayerSpec> layers = spec_.layers();
  const Span<const int32_t> inputs = spec_.inputs();
  for (size_t i = 0; i < layers.size(); ++i) {
    const DenseLayerSpec& l = layers[i];
    const uint64_t bytes = static_cast<uint64_t>(l.out) * sizeof(float);
    for (int32_t k = l.first_input; k < l.first_input + l.input_count; ++k) {
      const int32_t p = inputs[static_cast<size_t>(k)];
      if (p < 0) {
        TINYAI_RETURN_IF_ERROR(graph->Add(l.layer, -1, TINYAI_DEP_NONE, bytes, model_->layer_count()));
      } else {
        const TinyAIDependencyType type = p + 1 == static_cast<int32_t>(i) ? TINYAI_DEP_SEQUENTIAL : TINYAI_DEP_RESIDUAL;
        TINYAI_RETURN_IF_ERROR(graph->Add(l.layer, layers[static_cast<size_t>(p)].layer, type, bytes,
                                          model_->layer_count()));
      }
    }
  }
  return TINYAI_OK;
}

TinyAIStatus DenseModel::CheckSchedule(const LayerGraph& graph) const {
  for (int32_t n = 0; n < graph.node_count(); ++n) {
    const DenseLayerSpec* l = LayerSpec(graph.node(n).layer);
    for (const LayerDep& d : graph.deps(n)) {
      const int32_t from = d.producer < 0 ? -1 : graph.node(d.producer).layer;
      const int32_t width = from < 0 ? spec_.input_dim() : LayerSpec(from)->out;
      if (width != l->in) {
        char what[32];
        if (from < 0) tinyai::Format(what, sizeof what, "the network's input");
        else tinyai::Format(what, sizeof what, "layer %d", from);
        return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                        "'%s': layer %d takes %d floats per row, but its input from %s gives %d",
                        model_->reader().source(), l->layer, l->in, what, width);
      }
    }
  }
  return TINYAI_OK;
}

TinyAIStatus DenseModel::EmitLayer(const LayerGraph& graph, int32_t node, const int32_t* inputs, int32_t count,
                                   ActivationGraph* g, int32_t* output) {
  const DenseLayerSpec* l = LayerSpec(graph.node(node).layer);
  GraphOp op;
  op.layer = l->layer;
  op.node = graph.position(node);
  op.arg = static_cast<int32_t>(l - spec_.layers().data());
  TinyAIDependencyType types[limits::kMaxDenseInputs];
  const Span<const LayerDep> deps = graph.deps(node);
  int32_t x = inputs[0];
  if (count > 1) {
    if (count > limits::kMaxDenseInputs) {
      return SetError(TINYAI_ERR_UNSUPPORTED, "layer %d sums %d inputs (at most %d)", l->layer, count,
                      limits::kMaxDenseInputs);
    }
    for (int32_t i = 0; i < count; ++i) types[i] = deps[static_cast<size_t>(i)].type;
    TINYAI_RETURN_IF_ERROR(EmitSum(g, op, kSum, inputs, types, count,
                                   SizeRule::Rows(static_cast<uint64_t>(l->in) * sizeof(float)), &x));
  }
  op.kind = kDense;
  op.inputs[0] = x;
  op.input_count = 1;
  op.scratch = SizeRule::Rows(stream_.InputScratchBytes(&l->weight, 1, l->in));  // grouped weights' input
  return g->AddOp(op, SizeRule::Rows(static_cast<uint64_t>(l->out) * sizeof(float)), output);
}

void DenseModel::NameOp(const GraphOp& op, char* out, size_t capacity) const {
  tinyai::Format(out, capacity, "%s/%s", model_->descriptor(op.layer).name, op.kind == kSum ? "sum" : "dense");
}

TinyAIStatus DenseModel::RunOp(const GraphOp& op, const OpIo& io, const PassContext& pass) {
  const DenseLayerSpec& l = spec_.layers()[static_cast<size_t>(op.arg)];
  const size_t rows = static_cast<size_t>(pass.shape.rows);
  if (op.kind == kSum) {
    RunSum(op, io, rows * static_cast<size_t>(l.in), k_->add);
    return TINYAI_OK;
  }
  const size_t out = static_cast<size_t>(l.out);
  float* y = static_cast<float*>(io.output);
  TINYAI_RETURN_IF_ERROR(stream_.MatMul(&l.weight, 1, static_cast<const float*>(io.inputs[0]),
                                        static_cast<size_t>(l.in), y, out, l.in, pass.shape.rows, io.scratch,
                                        io.scratch_bytes));
  if (l.bias >= 0) {
    const float* b = nullptr;
    int32_t slice = -1;
    TINYAI_RETURN_IF_ERROR(stream_.AcquireVector(l.bias, &b, &slice));
    for (size_t r = 0; r < rows; ++r) k_->add(y + r * out, b, out);
    stream_.Release(slice);
  }
  float* end = y + rows * out;
  switch (l.activation) {
    case DenseActivation::kRelu:
      for (float* v = y; v < end; ++v) *v = *v > 0.0f ? *v : 0.0f;
      break;
    case DenseActivation::kTanh:
      for (float* v = y; v < end; ++v) *v = std::tanh(*v);
      break;
    case DenseActivation::kNone:
      break;
  }
  return TINYAI_OK;
}

ProgramMemory DenseModel::Memory() const {
  ProgramMemory m;
  m.tables = spec_.bytes() + stream_.bytes();
  return m;
}

}  // namespace tinyai
