#include "scheduler/batch_loop.h"

#include <cstring>

#include "common/finite.h"
#include "common/status.h"
#include "scheduler/scheduler.h"

namespace tinyai {

void BatchLoop::Cancel() {
  if (running_ && sched_->in_pass()) sched_->AbortPass();
  running_ = false;
}

TinyAIStatus BatchLoop::BeginPass() {
  const int32_t batch = sched_->batch_size();
  const int32_t rows = sched_->rows_per_pass();
  pass_ = PassContext();
  pass_.shape.rows = batch - done_ < rows ? batch - done_ : rows;
  pass_.shape.context = 0;
  pass_.row_offset = done_;
  const uint64_t row_bytes = sched_->program()->InputSize().per_row;
  return sched_->BeginPass(pass_, static_cast<const uint8_t*>(input_) + static_cast<size_t>(row_bytes) * done_);
}

void BatchLoop::CopyOutputs() {
  const ActivationGraph& act = sched_->graph();
  uint64_t row_bytes = 0;
  for (int32_t t : act.outputs()) row_bytes += act.tensors()[static_cast<size_t>(t)].size.per_row;
  uint8_t* out = static_cast<uint8_t*>(output_);
  uint64_t at = 0;
  for (size_t k = 0; k < act.outputs().size(); ++k) {
    const uint64_t width = act.tensors()[static_cast<size_t>(act.outputs()[k])].size.per_row;
    const uint8_t* src = static_cast<const uint8_t*>(sched_->OutputData(k));
    for (int32_t r = 0; r < pass_.shape.rows; ++r) {
      std::memcpy(out + (static_cast<uint64_t>(pass_.row_offset + r) * row_bytes + at), src + r * width, width);
    }
    at += width;
  }
}

TinyAIStatus BatchLoop::CheckOutputs() const {
  const ActivationGraph& act = sched_->graph();
  for (size_t k = 0; k < act.outputs().size(); ++k) {
    const uint64_t width = act.tensors()[static_cast<size_t>(act.outputs()[k])].size.per_row / sizeof(float);
    const float* rows = static_cast<const float*>(sched_->OutputData(k));
    size_t at = 0;
    if (CheckFinite(rows, static_cast<size_t>(width) * static_cast<size_t>(pass_.shape.rows), &at) != TINYAI_OK) {
      return SetError(TINYAI_ERR_NOT_FINITE,
                      "the output of row %d (output %zu, column %zu) is %g: the weights hold NaN or infinity, the "
                      "input does, or the layers overflow", pass_.row_offset + static_cast<int32_t>(at / width), k,
                      static_cast<size_t>(at % width), static_cast<double>(rows[at]));
    }
  }
  return TINYAI_OK;
}

bool BatchLoop::Next(const void* input, void* output, size_t, int32_t* layer, TinyAIStatus* status) {
  if (!running_) {
    if (!input || !output) {
      *status = SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiExecuteNextLayer: %s is NULL", input ? "output" : "input");
      return false;
    }
    input_ = input;
    output_ = output;
    done_ = 0;
    running_ = true;
  }
  if (!sched_->in_pass()) {
    if (done_ >= sched_->batch_size()) {
      running_ = false;
      *status = TINYAI_OK;
      return false;
    }
    *status = BeginPass();
    if (*status != TINYAI_OK) {
      running_ = false;
      return false;
    }
  }
  *status = sched_->StepNode(layer);
  if (*status != TINYAI_OK) {
    running_ = false;
    return false;
  }
  if (!sched_->in_pass()) {
    CopyOutputs();
    *status = CheckOutputs();
    done_ += pass_.shape.rows;
    if (*status != TINYAI_OK) {  // the rows are written; the caller learns they are not numbers
      running_ = false;
      return false;
    }
  }
  return true;
}

}  // namespace tinyai
