// The weight cache's cap when runners share a model: a budget decided here,
// beside the rest of each runner's budget (scheduler.h: a runner's memory
// limit split between its arena, its state and the weights), not in the
// loader, which only keeps the cap it is given.
//
// Runners on one model share its weight cache, whose cap is the least that
// maxCacheSize and every runner's memory limit allow, so each runner's limit
// holds however many share the weights; a runner whose limit would take the
// cache below what another runner needs (all its weights, in NORMAL mode)
// is refused. The model keeps the list of its runners (ModelUser,
// loader/mapped_model.h: closing it orphans them; their claims are read and
// changed under the list's lock).
#ifndef TINYAI_SCHEDULER_CACHE_BUDGET_H_
#define TINYAI_SCHEDULER_CACHE_BUDGET_H_

#include <cstdint>

#include "loader/mapped_model.h"
#include "loader/weight_cache.h"
#include "tinyai/status.h"

namespace tinyai {

// A runner bound to a model (a forward scheduler; every TinyAILLM has one)
// and its claim on the model's weight cache. Every user of a model is one:
// only BindRunner binds them.
struct RunnerLink : ModelUser {
  uint64_t allows = 0;    // the cap its memory limit leaves the cache (0 = no limit)
  uint64_t floor = 0;     // the least it will ever allow (below allows while a growable KV
                          // cache lends the weights its room); others are planned against it
  uint64_t needs = 0;     // the least cap it runs under
  const char* mode = "";  // its mode's name, for messages
  bool claimed = false;   // allows/needs are set (the runner is prepared)
  PeakWatch peak;         // the cache's peak since it claimed it
};

void BindRunner(TinyAIMappedModel* model, RunnerLink* runner);
// Unbinds; the cap rises to what the remaining runners allow.
void UnbindRunner(TinyAIMappedModel* model, RunnerLink* runner);
// The cap the cache may have at most for runner: maxCacheSize and every
// other claimed runner's allowance (0 = none). *source (may be null) gets
// what sets it: "maxCacheSize" or "another runner's memory limit".
uint64_t SharedCacheCap(const TinyAIMappedModel& model, const RunnerLink* runner, const char** source);
// Claims the cache for a prepared runner and sets the cap to the least any
// runner allows (its peak is watched from then on);
// TINYAI_ERR_RESOURCE_EXHAUSTED (nothing changed) when the least any runner
// will ever allow (their floors) is below what this or another runner
// needs. floor <= allows: the least this runner will allow (a growable KV
// cache's runner claims again as it grows, down to it).
TinyAIStatus ClaimCache(TinyAIMappedModel* model, RunnerLink* runner, uint64_t allows, uint64_t floor, uint64_t needs,
                        const char* mode);

}  // namespace tinyai

#endif  // TINYAI_SCHEDULER_CACHE_BUDGET_H_
