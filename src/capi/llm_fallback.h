// The LLM's fallback chain (TinyAILLMConfig.fallback): when a configuration
// does not plan within its memory limit or the weight cache's cap, the
// caller's steps are applied in order, each on top of the last, until one
// level plans; every level tried is logged. Only planning happens here
// (tables, no weights, KV cache or arena), so a chain that ends without a
// fit fails before any work.
#ifndef TINYAI_CAPI_LLM_FALLBACK_H_
#define TINYAI_CAPI_LLM_FALLBACK_H_

#include <cstddef>
#include <cstdint>

#include "tinyai/llm.h"

namespace tinyai {

class ForwardScheduler;
class LlamaRuntime;

struct FallbackRun {
  int32_t level = 0;  // steps applied
  size_t staging_sets = 0;  // the prefetch step's: the model's staging sets to keep (0: as they are)
  char log[1024] = {0};
  size_t used = 0;
  void Add(const char* format, ...)
#if defined(__GNUC__)
      __attribute__((format(printf, 2, 3)))
#endif
      ;
};

// Plans an LLM of model with cfg into s (tinyaiCreateLLM's plan).
using LLMPlanner = TinyAIStatus (*)(ForwardScheduler* s, TinyAIMappedModel* model, const TinyAILLMConfig& cfg,
                                    LlamaRuntime** llama);

// cfg.fallback: known steps, each once; INVALID_ARGUMENT naming the entry.
TinyAIStatus CheckFallback(const TinyAILLMConfig& cfg, const char* call);

// Plans *cfg with plan; when it is refused for memory (RESOURCE_EXHAUSTED:
// the memory limit or the weight cache's cap) and cfg has a chain, applies
// its steps until a level plans and leaves *cfg at that level. When none
// does, returns the last level's error, its message naming the steps tried.
// Other errors return at once. The thread's last error is the caller's
// after a fit.
TinyAIStatus PlanWithFallback(TinyAIMappedModel* model, TinyAILLMConfig* cfg, LLMPlanner plan, FallbackRun* run);

}  // namespace tinyai

#endif  // TINYAI_CAPI_LLM_FALLBACK_H_
