#include "model/runtime.h"

#include <cstring>

#include "common/memory.h"
#include "common/status.h"
#include "model/dense.h"
#include "port/port.h"
#include "scheduler/batch_loop.h"

namespace tinyai {

LlamaRuntime::LlamaRuntime(ForwardScheduler* sched) : session_(sched, &model_), loop_(&session_) {
  loop_.params = DefaultGenerateParams();
}

void LlamaRuntime::Destroy() { Delete(this); }

bool LlamaRuntime::TextLoop::Next(const void* input, void* output, size_t output_capacity, int32_t* layer,
                                  TinyAIStatus* status) {
  if (!running_) {
    if (!input) {
      *status = SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiExecuteNextLayer: input (the prompt) is NULL");
      return false;
    }
    TextSink sink(params.onText, params.user, static_cast<char*>(output), output ? output_capacity : 0);
    *status = session_->Start(static_cast<const char*>(input), params, sink, /*stop_when_full=*/true);
    if (*status != TINYAI_OK) return false;
    running_ = true;
  }
  bool finished = false;
  *status = session_->Step(layer, &finished);
  if (*status != TINYAI_OK) {
    Cancel();
    return false;
  }
  if (finished) {
    *status = session_->Finish(nullptr);
    running_ = false;
    return false;
  }
  return true;
}

void LlamaRuntime::TextLoop::Cancel() {
  session_->Cancel();
  running_ = false;
}

class DenseRuntime final : public ModelRuntime {
 public:
  explicit DenseRuntime(ForwardScheduler* sched) : loop_(sched) {}
  LayerProgram* program() override { return &model_; }
  ExecutionLoop* loop() override { return &loop_; }
  void Destroy() override { Delete(this); }
  DenseModel& model() { return model_; }

 private:
  DenseModel model_;
  BatchLoop loop_;
};

namespace {

bool Is(StringView s, const char* name) {
  return s.size == std::strlen(name) && std::memcmp(s.data, name, s.size) == 0;
}

}  // namespace

TinyAIStatus InitScheduler(ForwardScheduler* sched, TinyAIMappedModel* model, TinyAIExecutionMode mode,
                           uint64_t limit, const TinyAISchedulerConfig& config, LlamaRuntime** llama) {
  if (llama) *llama = nullptr;
  TINYAI_RETURN_IF_ERROR(sched->Init(model, mode, limit, config));
  if (!model) return TINYAI_OK;
  const int threads = config.threads == 0 ? port::CpuCount() : config.threads;
  StringView arch;
  TINYAI_RETURN_IF_ERROR(model->reader().GetString("general.architecture", &arch));
  if (Is(arch, "llama")) {
    LlamaRuntime* rt = New<LlamaRuntime>(sched);
    if (!rt) return SetError(TINYAI_ERR_OUT_OF_MEMORY, "cannot allocate the llama runtime");
    sched->Adopt(rt);
    KvOptions kv;
    kv.type = config.kvType;
    kv.window = config.kvWindow;
    kv.sinks = config.kvSinks;
    kv.growable = config.kvGrowable;
    TINYAI_RETURN_IF_ERROR(rt->model().Bind(model, config.contextLength, threads, sched->pool(), kv));
    if (llama) *llama = rt;
    return TINYAI_OK;
  }
  if (Is(arch, "dense")) {
    DenseRuntime* rt = New<DenseRuntime>(sched);
    if (!rt) return SetError(TINYAI_ERR_OUT_OF_MEMORY, "cannot allocate the dense runtime");
    sched->Adopt(rt);
    return rt->model().Bind(model, sched->pool());
  }
  return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': architecture '%.*s' has no runtime (expected 'llama' or 'dense')",
                  model->reader().source(), static_cast<int>(arch.size), arch.data);
}

}  // namespace tinyai
