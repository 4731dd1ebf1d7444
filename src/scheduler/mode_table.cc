#include "scheduler/mode_table.h"

#include "common/checked_math.h"

namespace tinyai {

namespace {

constexpr ModeStrategy kTable[kModeStrategies] = {
    {TINYAI_EXEC_NORMAL, "NORMAL", true, false},
    {TINYAI_EXEC_MEMORY_OPT, "MEMORY_OPT", false, false},
    {TINYAI_EXEC_STREAMING, "STREAMING", false, true},
};

uint64_t Sat(uint64_t a, uint64_t b) {
  uint64_t s = 0;
  return CheckedAdd(a, b, &s) ? s : UINT64_MAX;
}

}  // namespace

const ModeStrategy& Strategy(int32_t i) { return kTable[i < 0 ? 0 : i >= kModeStrategies ? kModeStrategies - 1 : i]; }

int32_t StrategyOf(TinyAIExecutionMode mode) {
  for (int32_t i = 0; i < kModeStrategies; ++i) {
    if (kTable[i].mode == mode) return i;
  }
  return -1;
}

uint64_t StrategyWeights(const ModeStrategy& s, const ModeNeeds& n) {
  return s.all_weights ? n.all_weights : n.largest_slice;
}

uint64_t StrategyNeeds(const ModeStrategy& s, const ModeNeeds& n) {
  return Sat(Sat(StrategyWeights(s, n), s.fewer_rows ? n.arena_one : n.arena_full), n.rest);
}

bool StrategyFits(const ModeStrategy& s, const ModeNeeds& n) {
  return (n.limit == 0 || StrategyNeeds(s, n) <= n.limit) && (n.cache_cap == 0 || StrategyWeights(s, n) <= n.cache_cap);
}

ModeChoice ChooseStrategy(const ModeNeeds& n, TinyAIExecutionMode requested) {
  ModeChoice c;
  const int32_t only = StrategyOf(requested);
  const int32_t first = only < 0 ? 0 : only, last = only < 0 ? kModeStrategies - 1 : only;
  for (int32_t i = first; i <= last; ++i) {
    if (StrategyFits(kTable[i], n)) {
      c.chosen = i;
      return c;
    }
    if (c.refused < 0) {
      c.refused = i;
      c.cache_cap = n.cache_cap != 0 && StrategyWeights(kTable[i], n) > n.cache_cap;
    }
  }
  return c;
}

}  // namespace tinyai
