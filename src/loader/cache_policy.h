// What the weight cache evicts. Every entry has a keep score
//
//     score = priority / (1 + distance)
//
// where distance is how many accesses away its next use is thought to be,
// and the entry with the lowest score goes first (ties: the larger entry).
//
// Plain LRU (adaptiveCaching off): distance is the entry's age, the accesses
// since its last use. On a cycle longer than the cache - the decode loop,
// which touches every slice once per token in the same order - this is the
// worst policy there is: the slice evicted is always the one needed soonest,
// and nothing ever hits.
//
// Adaptive (the default) learns each entry's reuse interval and predicts the
// next use at last use + interval, so distance = predicted - now. The
// interval is the longer of the last two gaps between uses: a slice touched
// twice in a row within one pass (a norm and the matrix rows packed after it)
// has gaps of 1 and a whole cycle, and the cycle is what predicts its next
// use. On a cycle the slice just used is predicted
// furthest away and is evicted first, and the cache keeps the slices needed
// next: Belady's choice, learned from one pass. An entry whose prediction
// has passed without a use (the pattern changed) falls back to its age, as
// in LRU. An entry brought in ahead of use by prefetch and not used yet is
// treated as needed now (distance 0) unless a prediction says otherwise, so a
// prefetch is not thrown away before its use.
//
// A prefetch may only evict an entry scored below the one it loads, so
// reading ahead never pushes out what will be used sooner.
#ifndef TINYAI_LOADER_CACHE_POLICY_H_
#define TINYAI_LOADER_CACHE_POLICY_H_

#include <cstdint>

namespace tinyai {

struct EntryUse {
  uint64_t last_use = 0;  // access tick of the last use; 0 = never used
  uint64_t interval = 0;  // the longer of the last two gaps between uses; 0 = unknown
  uint64_t last_gap = 0;  // the latest gap
  bool pending = false;   // loaded ahead of use and not used since
};

inline uint64_t PredictedDistance(const EntryUse& u, uint64_t now, bool adaptive) {
  if (adaptive && u.interval > 0 && u.last_use > 0) {
    uint64_t predicted = u.last_use + u.interval;
    if (predicted >= now) return predicted - now;
  }
  if (u.pending) return 0;
  return now > u.last_use ? now - u.last_use : 0;
}

inline double KeepScore(const EntryUse& u, float priority, uint64_t now, bool adaptive) {
  return static_cast<double>(priority) / (1.0 + static_cast<double>(PredictedDistance(u, now, adaptive)));
}

// Records a use at tick now.
inline void RecordUse(EntryUse* u, uint64_t now) {
  if (u->last_use > 0 && now > u->last_use) {
    const uint64_t gap = now - u->last_use;
    u->interval = gap > u->last_gap ? gap : u->last_gap;
    u->last_gap = gap;
  }
  u->last_use = now;
  u->pending = false;
}

}  // namespace tinyai

#endif  // TINYAI_LOADER_CACHE_POLICY_H_
