// extern "C" shims of <tinyai/utils/forward_scheduler.h>.
#include <cstring>
#include <new>

#include "common/live_list.h"
#include "common/memory.h"
#include "common/status.h"
#include "common/struct_size.h"
#include "capi/handles.h"
#include "model/runtime.h"
#include "scheduler/scheduler.h"
#include "tinyai/utils/forward_scheduler.h"

using tinyai::SetError;

namespace {

TinyAIStatus NullScheduler(const char* call) {
  return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: scheduler is NULL", call);
}

// Schedulers created and not yet destroyed.
tinyai::LiveList<TinyAIForwardScheduler> g_schedulers;

// NULL, or a runner that cannot take the call (its model closed; its own
// callback calling back, unless allow_busy): the status to return.
TinyAIStatus Check(const TinyAIForwardScheduler* s, const char* call, bool allow_busy = false) {
  if (!s) return NullScheduler(call);
  return s->impl.CheckUsable(call, allow_busy);
}

}  // namespace

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
  if (model && !TinyAIMappedModel::IsOpen(model)) {
    SetError(TINYAI_ERR_MISUSE, "tinyaiCreateForwardScheduler: %p is not an open model (closed already?)",
             static_cast<void*>(model));
    return nullptr;
  }
  TinyAIForwardScheduler* s = tinyai::New<TinyAIForwardScheduler>();
  if (!s) {
    SetError(TINYAI_ERR_OUT_OF_MEMORY, "tinyaiCreateForwardScheduler: cannot allocate the scheduler");
    return nullptr;
  }
  if (tinyai::InitScheduler(&s->impl, model, mode, memoryLimit, cfg, &s->llama) != TINYAI_OK) {
    tinyai::Delete(s);
    return nullptr;
  }
  g_schedulers.Add(s);
  return s;
}

TinyAIForwardScheduler* tinyaiCreateForwardScheduler(TinyAIMappedModel* model, TinyAIExecutionMode mode,
                                                     size_t memoryLimit) {
  return tinyaiCreateForwardSchedulerWithConfig(model, mode, memoryLimit, nullptr);
}

void tinyaiDestroyForwardScheduler(TinyAIForwardScheduler* scheduler) {
  if (!scheduler) return;
  if (!g_schedulers.Contains(scheduler)) {
    SetError(TINYAI_ERR_MISUSE, "tinyaiDestroyForwardScheduler: %p is not a live scheduler (destroyed twice, or an "
             "LLM's, which tinyaiDestroyLLM destroys)", static_cast<void*>(scheduler));
    return;
  }
  if (scheduler->impl.link().busy.load()) {
    SetError(TINYAI_ERR_MISUSE, "tinyaiDestroyForwardScheduler: called from the scheduler's own text callback; it "
             "stays alive");
    return;
  }
  g_schedulers.Remove(scheduler);
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
  if (Check(scheduler, "tinyaiExecuteNextLayer") != TINYAI_OK) {
    if (scheduler && output && scheduler->impl.writes_text() && !scheduler->impl.link().busy.load()) {
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
  if (!scheduler || Check(scheduler, "tinyaiGetSchedulerMemoryUsage", true) != TINYAI_OK) return 0;
  return static_cast<size_t>(scheduler->impl.memory_usage());
}

size_t tinyaiGetSchedulerPeakMemoryUsage(const TinyAIForwardScheduler* scheduler) {
  if (!scheduler || Check(scheduler, "tinyaiGetSchedulerPeakMemoryUsage", true) != TINYAI_OK) return 0;
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
  if (!model) {
    SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetLayerOutputSize: model is NULL");
    return 0;
  }
  if (!TinyAIMappedModel::IsOpen(model)) {
    SetError(TINYAI_ERR_MISUSE, "tinyaiGetLayerOutputSize: %p is not an open model", static_cast<const void*>(model));
    return 0;
  }
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
