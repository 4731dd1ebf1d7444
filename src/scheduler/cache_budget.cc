#include "scheduler/cache_budget.h"

#include "common/status.h"

namespace tinyai {
namespace {

// The least non-zero of a and b (0 = no cap).
uint64_t Tighter(uint64_t a, uint64_t b) { return a == 0 ? b : b == 0 ? a : (a < b ? a : b); }

// The model's users are runners (BindRunner binds every one).
const RunnerLink* AsRunner(const ModelUser* u) { return static_cast<const RunnerLink*>(u); }

}  // namespace

void BindRunner(TinyAIMappedModel* model, RunnerLink* runner) {
  model->WithUsers([&](ModelUser*& users) {
    runner->next = users;
    users = runner;
  });
}

void UnbindRunner(TinyAIMappedModel* model, RunnerLink* runner) {
  model->WithUsers([&](ModelUser*& users) {
    ModelUser** link = &users;
    while (*link && *link != runner) link = &(*link)->next;
    if (!*link) return;
    *link = runner->next;
    if (!runner->claimed) return;
    model->cache().RemovePeakWatch(&runner->peak);
    model->cache().DropQueuedPrefetches();
    uint64_t cap = model->config().maxCacheSize;
    for (const ModelUser* u = users; u; u = u->next) {
      if (AsRunner(u)->claimed) cap = Tighter(cap, AsRunner(u)->allows);
    }
    // Never below what the remaining runners hold; no slots carved for a cap
    // no runner claims (on a static arena that would take room as it is given back).
    model->cache().SetCapacity(cap, /*carve=*/false);
  });
}

uint64_t SharedCacheCap(const TinyAIMappedModel& model, const RunnerLink* runner, const char** source) {
  return model.WithUsers([&](const ModelUser* users) {
    uint64_t cap = model.config().maxCacheSize;
    const char* from = "maxCacheSize";
    for (const ModelUser* u = users; u; u = u->next) {
      const RunnerLink* r = AsRunner(u);
      if (r == runner || !r->claimed || Tighter(cap, r->floor) == cap) continue;
      cap = r->floor;
      from = "another runner's memory limit";
    }
    if (source) *source = from;
    return cap;
  });
}

TinyAIStatus ClaimCache(TinyAIMappedModel* model, RunnerLink* runner, uint64_t allows, uint64_t floor, uint64_t needs,
                        const char* mode) {
  return model->WithUsers([&](ModelUser*& users) {
    const uint64_t max_cache = model->config().maxCacheSize;
    if (floor == 0 || (allows != 0 && floor > allows)) floor = allows;
    // What the runners need is checked against the least the cap will ever be.
    uint64_t least = Tighter(max_cache, floor);
    uint64_t cap = Tighter(max_cache, allows);
    for (const ModelUser* u = users; u; u = u->next) {
      const RunnerLink* r = AsRunner(u);
      if (r == runner || !r->claimed) continue;
      cap = Tighter(cap, r->allows);
      least = Tighter(least, r->floor);
    }
    if (least != 0 && needs > least) {
      return SetError(TINYAI_ERR_RESOURCE_EXHAUSTED,
                      "'%s': this runner (%s) needs %llu bytes of weights in the model's weight cache, which the other "
                      "runners on the model and maxCacheSize cap at %llu", model->reader().source(), mode,
                      static_cast<unsigned long long>(needs), static_cast<unsigned long long>(least));
    }
    for (const ModelUser* u = users; u; u = u->next) {
      const RunnerLink* r = AsRunner(u);
      if (r == runner || !r->claimed || least == 0 || r->needs <= least) continue;
      return SetError(TINYAI_ERR_RESOURCE_EXHAUSTED,
                      "'%s': the runners on a model share its weight cache, whose cap is the least any of their memory "
                      "limits allows: this runner's limit leaves it %llu bytes, but another runner on the model (%s) "
                      "needs %llu; create this one first, or give the other a memory limit or a streaming mode",
                      model->reader().source(), static_cast<unsigned long long>(least), r->mode,
                      static_cast<unsigned long long>(r->needs));
    }
    runner->allows = allows;
    runner->floor = floor;
    runner->needs = needs;
    runner->mode = mode;
    const TinyAIStatus s = model->cache().SetCapacity(cap);
    if (!runner->claimed) model->cache().AddPeakWatch(&runner->peak);
    runner->claimed = true;
    return s;
  });
}

}  // namespace tinyai
