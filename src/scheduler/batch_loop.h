// The guide's execution loop (tinyaiExecuteNextLayer) for programs that map
// rows to rows, such as a dense network: a run takes the schedule's batch of
// input rows, evaluates them in passes of the planned rows per pass, one
// layer per call, and writes every output row; output row r is every graph
// output's row r, in order. A run whose outputs are NaN or infinite ends with
// TINYAI_ERR_NOT_FINITE naming the first (the rows are written).
#ifndef TINYAI_SCHEDULER_BATCH_LOOP_H_
#define TINYAI_SCHEDULER_BATCH_LOOP_H_

#include <cstddef>
#include <cstdint>

#include "scheduler/program.h"

namespace tinyai {

class ForwardScheduler;

class BatchLoop final : public ExecutionLoop {
 public:
  explicit BatchLoop(ForwardScheduler* sched) : sched_(sched) {}

  bool Next(const void* input, void* output, size_t output_capacity, int32_t* layer, TinyAIStatus* status) override;
  void Cancel() override;
  bool running() const override { return running_; }
  bool writes_text() const override { return false; }

 private:
  TinyAIStatus BeginPass();
  void CopyOutputs();
  TinyAIStatus CheckOutputs() const;

  ForwardScheduler* sched_;
  bool running_ = false;
  int32_t done_ = 0;  // rows of the run finished
  PassContext pass_;  // the pass in progress, or the last
  const void* input_ = nullptr;
  void* output_ = nullptr;
};

}  // namespace tinyai

#endif  // TINYAI_SCHEDULER_BATCH_LOOP_H_
