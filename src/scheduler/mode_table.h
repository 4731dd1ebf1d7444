// The forward scheduler's modes as an ordered table of strategies: what each
// holds (every weight, or one row slice at a time), how many rows a pass
// takes (all, or as many as fit), and a pure function that picks the first
// one, from the most resident, whose bytes fit the limit and the weight
// cache's cap. ForwardScheduler::ChooseMode() measures the numbers (the
// plans of the arena) and applies the choice; the choice itself is tested on
// numbers alone (tests/scheduler/mode_table_test.cc).
#ifndef TINYAI_SCHEDULER_MODE_TABLE_H_
#define TINYAI_SCHEDULER_MODE_TABLE_H_

#include <cstdint>

#include "tinyai/utils/forward_scheduler.h"

namespace tinyai {

// What a plan measured, in bytes (0 for limit and cache_cap: none).
struct ModeNeeds {
  uint64_t limit = 0;          // the runner's memory limit
  uint64_t cache_cap = 0;      // the weight cache's cap (maxCacheSize, or a sharing runner's)
  uint64_t all_weights = 0;    // every weight resident
  uint64_t largest_slice = 0;  // the largest row slice
  uint64_t arena_full = 0;     // the activation arena for a whole pass's rows
  uint64_t arena_one = 0;      // for one row per pass
  uint64_t rest = 0;           // KV cache and tables
};

struct ModeStrategy {
  TinyAIExecutionMode mode;
  const char* name;
  bool all_weights;  // holds every weight resident (else one row slice at a time)
  bool fewer_rows;   // may take fewer rows per pass, down to one (else a whole pass's)
};

// Most resident first: NORMAL, MEMORY_OPT, STREAMING.
constexpr int32_t kModeStrategies = 3;
const ModeStrategy& Strategy(int32_t i);
// The index of mode's strategy; -1 for ADAPTIVE (any of them).
int32_t StrategyOf(TinyAIExecutionMode mode);

// The weights a strategy holds at once, and its least limit (with its least
// arena: full rows, or one).
uint64_t StrategyWeights(const ModeStrategy& s, const ModeNeeds& n);
uint64_t StrategyNeeds(const ModeStrategy& s, const ModeNeeds& n);
// Its bytes fit the limit and its weights the cache's cap.
bool StrategyFits(const ModeStrategy& s, const ModeNeeds& n);

struct ModeChoice {
  int32_t chosen = -1;   // the strategy that runs; -1 when none of those allowed fits
  int32_t refused = -1;  // the first allowed strategy that did not fit (-1: the first fitted)
  bool cache_cap = false;  // the refused one's weights exceed the cache's cap (named first, limit or not)
};

// The first strategy of the requested mode's (ADAPTIVE: all of them, in
// order; any other mode: its own) whose needs fit.
ModeChoice ChooseStrategy(const ModeNeeds& n, TinyAIExecutionMode requested);

// STREAMING's rows per pass: the most in 1..full_rows whose arena
// (arena(rows), non-decreasing in rows) fits beside one row slice; 0 when
// not even one row fits. arena returns false when it cannot plan (the
// search stops there, returning 0; the caller's error stands).
template <typename ArenaFor>
int32_t MostRowsThatFit(const ModeNeeds& n, int32_t full_rows, ArenaFor arena) {
  const ModeStrategy& streaming = Strategy(kModeStrategies - 1);
  auto fits = [&](uint64_t a) {
    ModeNeeds m = n;
    m.arena_one = a;
    return StrategyFits(streaming, m);
  };
  uint64_t a = 0;
  if (full_rows < 1 || !arena(1, &a) || !fits(a)) return 0;
  int32_t lo = 1, hi = full_rows;
  while (lo < hi) {
    const int32_t mid = static_cast<int32_t>(lo + (static_cast<int64_t>(hi) - lo + 1) / 2);
    if (!arena(mid, &a)) return 0;
    if (fits(a)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

}  // namespace tinyai

#endif  // TINYAI_SCHEDULER_MODE_TABLE_H_
