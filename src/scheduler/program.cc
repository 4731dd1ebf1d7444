#include "scheduler/program.h"

#include <cstring>

#include "common/status.h"

namespace tinyai {

TinyAIStatus NoModelLayers() {
  return SetError(TINYAI_ERR_UNSUPPORTED, "this scheduler has no model whose layers it could add");
}

TinyAIStatus EmitSum(ActivationGraph* g, const GraphOp& base, int32_t sum_kind, const int32_t* inputs,
                     const TinyAIDependencyType* types, int32_t count, const SizeRule& size, int32_t* out) {
  if (count < 1) return SetError(TINYAI_ERR_INTERNAL, "layer %d: a sum of no inputs", base.layer);
  int32_t acc = inputs[0];
  bool acc_overwritable = types[0] != TINYAI_DEP_ATTENTION;
  int32_t i = 1;
  while (i < count) {
    GraphOp op = base;
    op.kind = sum_kind;
    op.scratch = SizeRule();
    op.inputs[0] = acc;
    op.input_count = 1;
    while (i < count && op.input_count < kMaxOpInputs) op.inputs[op.input_count++] = inputs[i++];
    op.in_place = acc_overwritable ? 0 : -1;
    TINYAI_RETURN_IF_ERROR(g->AddOp(op, size, &acc));
    acc_overwritable = true;  // a partial sum is the layer's own
  }
  *out = acc;
  return TINYAI_OK;
}

void RunSum(const GraphOp& op, const OpIo& io, size_t floats, void (*add)(float* y, const float* x, size_t n)) {
  float* out = static_cast<float*>(io.output);
  if (out != io.inputs[0]) std::memcpy(out, io.inputs[0], floats * sizeof(float));
  for (int i = 1; i < op.input_count; ++i) add(out, static_cast<const float*>(io.inputs[i]), floats);
}

}  // namespace tinyai
