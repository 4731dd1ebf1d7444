// The runtimes of the architectures TinyAI runs, and the factory that picks
// one for a model: the scheduler (scheduler/scheduler.h) runs programs and
// knows no model by name; this is where a model's architecture becomes a
// program and a loop.
//
//   "llama"  LlamaRuntime: LlamaModel, its text session, and the guide's
//            loop generating text from a prompt (tinyaiExecuteNextLayer).
//   "dense"  DenseModel, and the guide's loop over rows of a batch
//            (scheduler/batch_loop.h).
#ifndef TINYAI_MODEL_RUNTIME_H_
#define TINYAI_MODEL_RUNTIME_H_

#include <cstddef>
#include <cstdint>

#include "loader/mapped_model.h"
#include "model/generate.h"
#include "model/llama.h"
#include "scheduler/program.h"
#include "scheduler/scheduler.h"
#include "tinyai/llm.h"

namespace tinyai {

// A language model: its program, its text session, and the guide's loop,
// which generates text from the prompt given as input into output (a
// NUL-terminated string of up to output_capacity bytes, ending before a
// piece that would not fit) with the generation settings set on it.
class LlamaRuntime final : public ModelRuntime {
 public:
  explicit LlamaRuntime(ForwardScheduler* sched);

  LayerProgram* program() override { return &model_; }
  ExecutionLoop* loop() override { return &loop_; }
  void Destroy() override;

  LlamaModel& model() { return model_; }
  const LlamaModel& model() const { return model_; }
  TextSession& session() { return session_; }
  // The settings of the guide's loop (tinyaiSetSchedulerGenerateParams).
  TinyAIGenerateParams* generate_params() { return &loop_.params; }

 private:
  class TextLoop final : public ExecutionLoop {
   public:
    explicit TextLoop(TextSession* session) : session_(session) {}
    TinyAIStatus Reserve() override { return session_->Reserve(); }
    bool Next(const void* input, void* output, size_t output_capacity, int32_t* layer,
              TinyAIStatus* status) override;
    void Cancel() override;
    bool running() const override { return running_; }
    bool writes_text() const override { return true; }

    TinyAIGenerateParams params;

   private:
    TextSession* session_;
    bool running_ = false;
  };

  LlamaModel model_;
  TextSession session_;
  TextLoop loop_;
};

// Init()s sched for model (nullptr: planning only) and, with a model, binds
// and hands it the runtime of the model's general.architecture; *llama (when
// not null) gets the language model's runtime, or nullptr. TINYAI_ERR_UNSUPPORTED
// names an architecture without one.
TinyAIStatus InitScheduler(ForwardScheduler* sched, TinyAIMappedModel* model, TinyAIExecutionMode mode,
                           uint64_t limit, const TinyAISchedulerConfig& config, LlamaRuntime** llama = nullptr);

}  // namespace tinyai

#endif  // TINYAI_MODEL_RUNTIME_H_
