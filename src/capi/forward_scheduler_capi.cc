// extern "C" shims of <tinyai/utils/forward_scheduler.h>.
#include <cstring>
#include <new>

#include "common/memory.h"
#include "common/status.h"
#include "scheduler/scheduler.h"
#include "tinyai/utils/forward_scheduler.h"

using tinyai::SetError;

namespace {

TinyAIStatus NullScheduler(const char* call) {
  return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: scheduler is NULL", call);
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
                                                               size_t memLimit, const TinyAISchedulerConfig* config) {
  TinyAISchedulerConfig cfg = tinyaiCreateDefaultSchedulerConfig();
  if (config) {
    if (config->structSize != sizeof cfg) {
      SetError(TINYAI_ERR_INVALID_ARGUMENT,
               "config.structSize is %u; create it with tinyaiCreateDefaultSchedulerConfig", config->structSize);
      return nullptr;
    }
    cfg = *config;
  }
  TinyAIForwardScheduler* s = tinyai::New<TinyAIForwardScheduler>();
  if (!s) {
    SetError(TINYAI_ERR_OUT_OF_MEMORY, "tinyaiCreateForwardScheduler: cannot allocate the scheduler");
    return nullptr;
  }
  if (s->impl.Init(model, mode, memLimit, cfg) != TINYAI_OK) {
    tinyai::Delete(s);
    return nullptr;
  }
  return s;
}

TinyAIForwardScheduler* tinyaiCreateForwardScheduler(TinyAIMappedModel* model, TinyAIExecutionMode mode,
                                                     size_t memLimit) {
  return tinyaiCreateForwardSchedulerWithConfig(model, mode, memLimit, nullptr);
}

void tinyaiDestroyForwardScheduler(TinyAIForwardScheduler* scheduler) { tinyai::Delete(scheduler); }

TinyAIStatus tinyaiAddLayerToSchedule(TinyAIForwardScheduler* scheduler, int layerIndex, int dependsOn,
                                      TinyAIDependencyType depType, size_t outputSize) {
  if (!scheduler) return NullScheduler("tinyaiAddLayerToSchedule");
  return scheduler->impl.AddLayer(layerIndex, dependsOn, depType, outputSize);
}

TinyAIStatus tinyaiAddModelLayersToSchedule(TinyAIForwardScheduler* scheduler) {
  if (!scheduler) return NullScheduler("tinyaiAddModelLayersToSchedule");
  return scheduler->impl.AddModelLayers();
}

TinyAIStatus tinyaiSetScheduleBatchSize(TinyAIForwardScheduler* scheduler, int batchSize) {
  if (!scheduler) return NullScheduler("tinyaiSetScheduleBatchSize");
  return scheduler->impl.SetBatchSize(batchSize);
}

TinyAIStatus tinyaiPlanForwardPass(TinyAIForwardScheduler* scheduler) {
  if (!scheduler) return NullScheduler("tinyaiPlanForwardPass");
  return scheduler->impl.Plan();
}

TinyAIStatus tinyaiPrepareForwardPass(TinyAIForwardScheduler* scheduler) {
  if (!scheduler) return NullScheduler("tinyaiPrepareForwardPass");
  return scheduler->impl.Prepare();
}

bool tinyaiExecuteNextLayer(TinyAIForwardScheduler* scheduler, const void* input, void* output, int* layerIndex) {
  if (!scheduler) {
    NullScheduler("tinyaiExecuteNextLayer");
    return false;
  }
  int32_t layer = -1;
  const bool ran = scheduler->impl.ExecuteNext(input, output, &layer);
  if (layerIndex) *layerIndex = ran ? layer : -1;
  return ran;
}

TinyAIStatus tinyaiGetSchedulerStatus(const TinyAIForwardScheduler* scheduler) {
  if (!scheduler) return NullScheduler("tinyaiGetSchedulerStatus");
  return scheduler->impl.status();
}

size_t tinyaiGetSchedulerMemoryUsage(const TinyAIForwardScheduler* scheduler) {
  return scheduler ? static_cast<size_t>(scheduler->impl.memory_usage()) : 0;
}

size_t tinyaiGetSchedulerPeakMemoryUsage(const TinyAIForwardScheduler* scheduler) {
  return scheduler ? static_cast<size_t>(scheduler->impl.peak_memory_usage()) : 0;
}

int tinyaiCalculateOptimalBatchSize(TinyAIForwardScheduler* scheduler, size_t inputSize, size_t outputSize,
                                    int maxBatch) {
  if (!scheduler) {
    NullScheduler("tinyaiCalculateOptimalBatchSize");
    return -1;
  }
  int32_t best = 0;
  if (scheduler->impl.OptimalBatch(inputSize, outputSize, maxBatch, &best) != TINYAI_OK) return -1;
  return best;
}

TinyAIStatus tinyaiGetSchedulerReport(const TinyAIForwardScheduler* scheduler, TinyAISchedulerReport* out) {
  if (!scheduler) return NullScheduler("tinyaiGetSchedulerReport");
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetSchedulerReport: out is NULL");
  if (out->structSize != sizeof *out) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetSchedulerReport: out->structSize is %u, expected %zu",
                    out->structSize, sizeof *out);
  }
  return scheduler->impl.Report(out);
}

TinyAIStatus tinyaiDumpActivationDag(const TinyAIForwardScheduler* scheduler, char* buf, size_t capacity,
                                     size_t* needed) {
  if (!scheduler) return NullScheduler("tinyaiDumpActivationDag");
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
  // A planning-free scheduler binds the model's runtime to ask it.
  tinyai::ForwardScheduler s;
  TinyAISchedulerConfig cfg = tinyaiCreateDefaultSchedulerConfig();
  if (s.Init(const_cast<TinyAIMappedModel*>(model), TINYAI_EXEC_ADAPTIVE, 0, cfg) != TINYAI_OK) return 0;
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
