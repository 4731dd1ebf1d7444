// extern "C" shims of <tinyai/utils/forward_scheduler.h>.
#include <cstring>
#include <new>

#include "common/live_list.h"
#include "common/memory.h"
#include "common/status.h"
#include "common/struct_size.h"
#include "capi/handles.h"
#include "capi/llm_internal.h"
#include "model/runtime.h"
#include "scheduler/scheduler.h"
#include "tinyai/utils/forward_scheduler.h"

using tinyai::SetError;

namespace {

// Schedulers created and not yet destroyed, every LLM's own among them.
tinyai::LiveList<TinyAIForwardScheduler> g_schedulers;

// NULL, a pointer that is not a live scheduler, or a runner that cannot
// take the call (its model closed; its own callback calling back, unless
// allow_busy): the status to return.
TinyAIStatus Check(const TinyAIForwardScheduler* s, const char* call, bool allow_busy = false) {
  TINYAI_RETURN_IF_ERROR(tinyai::capi::CheckSchedulerHandle(s, call));
  return s->impl.CheckUsable(call, allow_busy);
}

}  // namespace

namespace tinyai {
namespace capi {

void AddScheduler(TinyAIForwardScheduler* scheduler) { g_schedulers.Add(scheduler); }

void RemoveScheduler(const TinyAIForwardScheduler* scheduler) { g_schedulers.Remove(scheduler); }

bool IsLiveScheduler(const TinyAIForwardScheduler* scheduler) { return g_schedulers.Contains(scheduler); }

TinyAIStatus CheckSchedulerHandle(const TinyAIForwardScheduler* scheduler, const char* call) {
  if (!scheduler) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: scheduler is NULL", call);
  if (!IsLiveScheduler(scheduler)) {
    return NotLive(call, scheduler, "a live scheduler", "destroyed already (an LLM's, with its LLM), or never created");
  }
  return TINYAI_OK;
}

}  // namespace capi
}  // namespace tinyai

extern "C" {

const char* tinyaiExecutionModeName(TinyAIExecutionMode mode) {
  switch (mode) {
    case TINYAI_EXEC_NORMAL: return "NORMAL";
    case TINYAI_EXEC_MEMORY_OPT: return "MEMORY_OPT";
    case TINYAI_EXEC_STREAMING: return "STREAMING";
    case TINYAI_EXEC_ADAPTIVE: return "ADAPTIVE";
  }
  return "?";
}

TinyAISchedulerConfig tinyaiCreateDefaultSchedulerConfig(void) {
  TinyAISchedulerConfig c;
  std::memset(&c, 0, sizeof c);
  c.structSize = sizeof c;
  c.threads = 1;
  c.batchSize = 1;
  c.contextLength = 0;
  c.maxShapeCount = 0;
  c.debugExecution = false;
  c.outputCapacity = 1024;
  return c;
}

TinyAIForwardScheduler* tinyaiCreateForwardSchedulerWithConfig(TinyAIMappedModel* model, TinyAIExecutionMode mode,
                                                               size_t memoryLimit,
                                                               const TinyAISchedulerConfig* config) {
  TinyAISchedulerConfig cfg = tinyaiCreateDefaultSchedulerConfig();
  if (tinyai::ReadVersioned(config, &cfg, TINYAI_STRUCT_MIN(TinyAISchedulerConfig, threads),
                            "tinyaiCreateForwardSchedulerWithConfig: config") != TINYAI_OK) {
    return nullptr;
  }
  // NULL: a schedule that only plans (layers added by hand).
  if (model && tinyai::capi::CheckModel(model, "tinyaiCreateForwardSchedulerWithConfig") != TINYAI_OK) return nullptr;
  TinyAIForwardScheduler* s = tinyai::New<TinyAIForwardScheduler>();
  if (!s) {
    SetError(TINYAI_ERR_OUT_OF_MEMORY, "tinyaiCreateForwardScheduler: cannot allocate the scheduler");
    return nullptr;
  }
  // (No set_created_at: layers are added by hand before Prepare, with
  // whatever else the caller allocates on this thread meanwhile.)
  s->impl.set_runner_bytes(tinyai::RunnerHandleBytes());
  if (tinyai::InitScheduler(&s->impl, model, mode, memoryLimit, cfg, &s->llama) != TINYAI_OK) {
    tinyai::Delete(s);
    return nullptr;
  }
  tinyai::capi::AddScheduler(s);
  return s;
}

TinyAIForwardScheduler* tinyaiCreateForwardScheduler(TinyAIMappedModel* model, TinyAIExecutionMode mode,
                                                     size_t memoryLimit) {
  if (model && tinyai::capi::CheckModel(model, "tinyaiCreateForwardScheduler") != TINYAI_OK) return nullptr;
  return tinyaiCreateForwardSchedulerWithConfig(model, mode, memoryLimit, nullptr);
}

void tinyaiDestroyForwardScheduler(TinyAIForwardScheduler* scheduler) {
  if (!scheduler) return;
  if (tinyai::capi::CheckSchedulerHandle(scheduler, "tinyaiDestroyForwardScheduler") != TINYAI_OK) return;
  if (scheduler->in_llm) {
    SetError(TINYAI_ERR_MISUSE, "tinyaiDestroyForwardScheduler: %p is an LLM's (tinyaiGetLLMScheduler), not a live "
             "scheduler of its own; tinyaiDestroyLLM destroys it", static_cast<void*>(scheduler));
    return;
  }
  if (scheduler->impl.link().busy.load()) {
    SetError(TINYAI_ERR_MISUSE, "tinyaiDestroyForwardScheduler: called from the scheduler's own text callback; it "
             "stays alive");
    return;
  }
  tinyai::capi::RemoveScheduler(scheduler);
  tinyai::Delete(scheduler);
}

TinyAIStatus tinyaiSetSchedulerOutputCapacity(TinyAIForwardScheduler* scheduler, size_t capacity) {
  TINYAI_RETURN_IF_ERROR(Check(scheduler, "tinyaiSetSchedulerOutputCapacity"));
  return scheduler->impl.SetOutputCapacity(capacity);
}

TinyAIStatus tinyaiAddLayerToSchedule(TinyAIForwardScheduler* scheduler, int layerIndex, int dependsOn,
                                      TinyAIDependencyType depType, size_t outputSize) {
  TINYAI_RETURN_IF_ERROR(Check(scheduler, "tinyaiAddLayerToSchedule"));
  return scheduler->impl.AddLayer(layerIndex, dependsOn, depType, outputSize);
}

TinyAIStatus tinyaiAddModelLayersToSchedule(TinyAIForwardScheduler* scheduler) {
  TINYAI_RETURN_IF_ERROR(Check(scheduler, "tinyaiAddModelLayersToSchedule"));
  return scheduler->impl.AddModelLayers();
}

TinyAIStatus tinyaiSetScheduleBatchSize(TinyAIForwardScheduler* scheduler, int batchSize) {
  TINYAI_RETURN_IF_ERROR(Check(scheduler, "tinyaiSetScheduleBatchSize"));
  return scheduler->impl.SetBatchSize(batchSize);
}

TinyAIStatus tinyaiPlanForwardPass(TinyAIForwardScheduler* scheduler) {
  TINYAI_RETURN_IF_ERROR(Check(scheduler, "tinyaiPlanForwardPass"));
  return scheduler->impl.Plan();
}

TinyAIStatus tinyaiPrepareForwardPass(TinyAIForwardScheduler* scheduler) {
  TINYAI_RETURN_IF_ERROR(Check(scheduler, "tinyaiPrepareForwardPass"));
  return scheduler->impl.Prepare();
}

bool tinyaiExecuteNextLayer(TinyAIForwardScheduler* scheduler, const void* input, void* output, int* layerIndex) {
  if (layerIndex) *layerIndex = -1;
  if (tinyai::capi::CheckSchedulerHandle(scheduler, "tinyaiExecuteNextLayer") != TINYAI_OK) return false;
  if (scheduler->impl.CheckUsable("tinyaiExecuteNextLayer") != TINYAI_OK) {
    if (output && scheduler->impl.writes_text() && !scheduler->impl.link().busy.load()) {
      static_cast<char*>(output)[0] = '\0';  // the guide prints output after the loop
    }
    return false;
  }
  tinyai::BusyScope busy(scheduler->impl.link());
  int32_t layer = -1;
  const bool ran = scheduler->impl.ExecuteNext(input, output, &layer);
  if (layerIndex) *layerIndex = ran ? layer : -1;
  return ran;
}

TinyAIStatus tinyaiGetSchedulerStatus(const TinyAIForwardScheduler* scheduler) {
  TINYAI_RETURN_IF_ERROR(Check(scheduler, "tinyaiGetSchedulerStatus", true));
  return scheduler->impl.status();
}

size_t tinyaiGetSchedulerMemoryUsage(const TinyAIForwardScheduler* scheduler) {
  if (Check(scheduler, "tinyaiGetSchedulerMemoryUsage", true) != TINYAI_OK) return 0;
  return static_cast<size_t>(scheduler->impl.memory_usage());
}

size_t tinyaiGetSchedulerPeakMemoryUsage(const TinyAIForwardScheduler* scheduler) {
  if (Check(scheduler, "tinyaiGetSchedulerPeakMemoryUsage", true) != TINYAI_OK) return 0;
  return static_cast<size_t>(scheduler->impl.peak_memory_usage());
}

int tinyaiCalculateOptimalBatchSize(TinyAIForwardScheduler* scheduler, size_t inputSize, size_t outputSize,
                                    int maxBatch) {
  if (Check(scheduler, "tinyaiCalculateOptimalBatchSize") != TINYAI_OK) return -1;
  int32_t best = 0;
  if (scheduler->impl.OptimalBatch(inputSize, outputSize, maxBatch, &best) != TINYAI_OK) return -1;
  return best;
}

TinyAIStatus tinyaiGetSchedulerReport(const TinyAIForwardScheduler* scheduler, TinyAISchedulerReport* out) {
  TINYAI_RETURN_IF_ERROR(Check(scheduler, "tinyaiGetSchedulerReport", true));
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetSchedulerReport: out is NULL");
  TINYAI_RETURN_IF_ERROR(tinyai::CheckOutputSize(out, TINYAI_STRUCT_MIN(TinyAISchedulerReport, requestedMode),
                                                  "tinyaiGetSchedulerReport: out"));
  TinyAISchedulerReport full;
  TINYAI_RETURN_IF_ERROR(scheduler->impl.Report(&full));
  tinyai::WriteVersioned(full, out);
  return TINYAI_OK;
}

TinyAIStatus tinyaiDumpActivationDag(const TinyAIForwardScheduler* scheduler, char* buf, size_t capacity,
                                     size_t* needed) {
  TINYAI_RETURN_IF_ERROR(Check(scheduler, "tinyaiDumpActivationDag", true));
  if (!needed || (capacity > 0 && !buf)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiDumpActivationDag: %s is NULL", needed ? "buf" : "needed");
  }
  return scheduler->impl.DumpDag(buf, capacity, needed);
}

size_t tinyaiGetLayerOutputSize(const TinyAIMappedModel* model, int layerIndex) {
  if (tinyai::capi::CheckModel(model, "tinyaiGetLayerOutputSize") != TINYAI_OK) return 0;
  // A planning-free scheduler binds the model's runtime to ask it.
  tinyai::ForwardScheduler s;
  TinyAISchedulerConfig cfg = tinyaiCreateDefaultSchedulerConfig();
  if (tinyai::InitScheduler(&s, const_cast<TinyAIMappedModel*>(model), TINYAI_EXEC_ADAPTIVE, 0, cfg) != TINYAI_OK) {
    return 0;
  }
  if (layerIndex < 0 || layerIndex >= model->layer_count()) {
    SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetLayerOutputSize: layer %d is out of range: the model has %d layers",
             layerIndex, model->layer_count());
    return 0;
  }
  uint64_t bytes = 0;
  if (s.program()->OutputRowBytes(layerIndex, &bytes) != TINYAI_OK) return 0;
  return static_cast<size_t>(bytes);
}

}  // extern "C"
