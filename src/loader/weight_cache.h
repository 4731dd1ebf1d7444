// The weight cache: a hard cap on the bytes of weights held in memory.
//
// Entries are the row slices of a RowSliceTable (what the LLaMA runner
// streams) and whole layers (what tinyaiGetLayerWeights() returns). An entry
// is loaded on first use - read from the file into memory the cache owns,
// decoded when zstd-compressed, its tensors' CRC-32C checked the first time
// they are touched - and stays until room is needed; then the unpinned entry
// with the lowest keep score is evicted (cache_policy.h). Bytes held never
// exceed the cap: a load that cannot make room fails with
// TINYAI_ERR_RESOURCE_EXHAUSTED instead.
//
// Why owned buffers and not madvise on a mapping: a mapping's residency is
// the kernel's, not ours. Measured here (scripts/measure_mmap_residency.py on
// the 440 MB synthetic model, warm): touching one byte in each of 100 slices
// 1 MiB apart grew RSS by ~97 MiB, and reading 50 row slices of 1,000,000
// bytes (48 MiB of pages) grew it by ~142 MiB (+197%) - fault-around and
// large page-cache folios map far more than is touched, so a cap counted in
// touched bytes would not hold. Compressed tensors and ports without mmap
// need owned buffers anyway. With owned buffers the process's growth is what
// the cache counts (tests/model/memory_limit_test.cc: within 1% measured);
// in the huge-page region (slice_arena.h), a fault may commit a neighbour's
// range before its slice loads, never past the region, which the cap then
// holds.
// Slices of an image in memory (flash) are used in place and cost nothing.
//
// The cache is four parts, each in its own file:
//  - this one, the core: the cap, pins, stats and what to evict (the keep
//    score, cache_policy.h), under one lock;
//  - the slice arena (slice_arena.h): where an entry's memory comes from -
//    slots, buffers, the huge-page region - and the count of it the cap
//    bounds;
//  - the slice loader (slice_loader.h): read, CRC, zstd, then the row
//    transform the model was opened with (row_transform.h: dtype
//    conversion, the panel layout), outside the lock;
//  - the prefetch workers (prefetch_workers.h): Prefetch() queues an entry
//    for them; a worker loads it only if it can make room without evicting
//    anything the policy values more. With no workers (or no threads on the
//    port) a prefetch loads inline.
//
// Thread safety: every public member may be called from any thread. Loads
// run outside the lock, their entry marked as loading; a thread that needs
// an entry being loaded waits for it (a stall).
#ifndef TINYAI_LOADER_WEIGHT_CACHE_H_
#define TINYAI_LOADER_WEIGHT_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/sync.h"
#include "format/tmai_reader.h"
#include "loader/cache_policy.h"
#include "loader/prefetch_workers.h"
#include "loader/row_slices.h"
#include "loader/row_transform.h"
#include "loader/slice_arena.h"
#include "loader/slice_loader.h"
#include "loader/weight_source.h"
#include "tinyai/utils/mmap_loader.h"

namespace tinyai {

// The most the cache has held since the watch was added (a runner's own
// peak, when several share the cache).
struct PeakWatch {
  uint64_t peak = 0;
  PeakWatch* next = nullptr;
};

struct CacheStats {
  uint64_t hits = 0;           // uses that found the entry loaded (or being loaded)
  uint64_t misses = 0;         // uses that had to load it
  uint64_t bytes_read = 0;     // bytes read from the file or image (stored bytes, checksum passes included)
  uint64_t bytes_loaded = 0;   // bytes made resident (decoded)
  uint64_t evictions = 0;
  uint64_t prefetch_requests = 0;  // prefetches queued
  uint64_t prefetch_loads = 0;     // entries a prefetch loaded
  uint64_t prefetch_dropped = 0;   // prefetches skipped: no room without evicting something worth more
  uint64_t prefetch_hits = 0;      // uses served by a prefetch's load
  uint64_t stalls = 0;             // uses that waited for a load in flight
  uint64_t held_bytes = 0;         // memory held for weights now (within the cap)
  uint64_t peak_held_bytes = 0;
  uint64_t resident_bytes = 0;     // of which loaded entries
  uint64_t capacity = 0;           // the cap; 0 = none
  uint64_t bytes_read_direct = 0;  // of bytes_read, read past the OS's page cache
  uint64_t prefetch_workers = 0;   // workers taking loads now
};

class WeightCache {
 public:
  WeightCache() = default;
  WeightCache(const WeightCache&) = delete;
  WeightCache& operator=(const WeightCache&) = delete;
  ~WeightCache();

  // The reader, source and table must outlive the cache. transform
  // converts the table's transformed tensors as they load (its panels are
  // the table's already). Starts the prefetch workers.
  TinyAIStatus Init(const TmaiReader* reader, const WeightSource* source, const RowSliceTable* table,
                    const TinyAIMmapConfig& config, const RowTransform& transform);
  // Stops the workers (queued prefetches are dropped) and frees everything.
  void Shutdown();

  int32_t slice_entries() const { return table_->slice_count(); }
  // Entry ids: slices 0 .. slice_entries()-1, then one per layer.
  int32_t LayerEntry(int32_t layer) const { return table_->slice_count() + layer; }

  // Pins the entry, loading it first if needed; *data is its first byte.
  // Balanced by Release().
  TinyAIStatus Acquire(int32_t entry, const uint8_t** data);
  // TINYAI_ERR_MISUSE if the entry is not pinned.
  TinyAIStatus Release(int32_t entry);
  // Asks for the entry to be loaded ahead of use; never fails for lack of
  // room (the prefetch is dropped).
  TinyAIStatus Prefetch(int32_t entry);
  // Drops the prefetches queued and not yet started (a runner leaving: what
  // it asked for ahead would load into a cache nobody caps for it, and be
  // used by nobody).
  void DropQueuedPrefetches();
  // Priority of a layer's entry and its slices (cache_policy.h).
  void SetLayerPriority(int32_t layer, float priority);
  // Changes the cap, evicting down to it. TINYAI_ERR_RESOURCE_EXHAUSTED if
  // pinned entries alone exceed it (the cap is set anyway). On a static arena
  // it also carves the cap into slots, unless !carve (a runner leaving: the
  // next one to claim the cache carves for itself).
  TinyAIStatus SetCapacity(uint64_t bytes, bool carve = true);
  // Starts (AddPeakWatch: at what is held now) and ends a peak watch.
  void AddPeakWatch(PeakWatch* watch);
  void RemovePeakWatch(PeakWatch* watch);
  uint64_t WatchedPeak(const PeakWatch& watch) const;
  // Returns a watch's peak and starts it again at what is held now.
  uint64_t RestartPeakWatch(PeakWatch* watch);
  // Changes each time the cap is set (users sized on it re-read it).
  uint32_t capacity_epoch() const { return cap_epoch_.load(std::memory_order_acquire); }

  uint64_t held_bytes() const;
  CacheStats stats() const;
  void ResetStats();
  // Bytes of the cache's own bookkeeping and staging (not weights); with at
  // most `staging_sets` staging sets (0: as kept now; SliceLoader).
  uint64_t overhead_bytes(size_t staging_sets = 0) const;
  size_t staging_sets() const { return loader_.staging_sets(); }
  void KeepStaging(size_t sets) { loader_.KeepStaging(sets); }
  // Bytes an entry holds once loaded (0 when used in place).
  uint64_t EntryBytes(int32_t entry) const;
  bool adaptive() const { return config_.adaptiveCaching; }

  // Where conversions find what calibration measured of a tensor's inputs
  // (none by default).
  void UseCalibration(const void* owner, SliceLoader::CalibrationFn fn) { loader_.UseCalibration(owner, fn); }

  // An entry is pinned or being loaded (the model cannot be changed under it).
  bool AnyPinned() const;

  // Checks the cap invariant (tests): held <= cap, counters consistent.
  bool CheckInvariants() const;
  // The row slices live in the huge-page region (tests).
  bool huge_region() const {
    LockGuard lock(mutex_);
    return arena_.has_region();
  }

 private:
  enum State : uint8_t { kEmpty, kLoading, kResident };
  struct Entry {
    const uint8_t* data = nullptr;  // where the bytes are (the arena's memory, or in place)
    int32_t pins = 0;
    State state = kEmpty;
    bool queued = false;
    bool by_prefetch = false;  // the current load was a prefetch's
    bool in_place = false;     // takes no memory (UsedInPlace): loaded, it has none to give back
    float priority = 1.0f;
    EntryUse use;
  };

  // --- under mutex_ ---
  // Finds memory for entry (SliceArena), evicting as needed. For a
  // prefetch, *room is false (and OK returned) when making room would evict
  // something worth more.
  TinyAIStatus Reserve(UniqueLock& lock, int32_t entry, bool prefetch, bool* room);
  // The unpinned loaded entry with the lowest keep score (below below_score
  // when >= 0); entries of layers under minLayerCacheSize only if allow_small.
  int32_t PickVictim(double below_score, bool allow_small) const;
  void Evict(int32_t entry);
  double Score(int32_t entry) const;
  bool IsSmall(int32_t entry) const;
  uint64_t DecodedSize(int32_t entry) const;
  // Records the peak of what the arena holds (stats, watches).
  void NoteHeld();

  // Loads entry (marked kLoading, memory reserved) with the lock released
  // (SliceLoader), then marks it resident, or empty with its memory
  // returned on failure.
  TinyAIStatus LoadReserved(UniqueLock& lock, int32_t entry, bool prefetch);

  // Loads entry as a prefetch (worker threads or inline).
  // queued: from the workers' queue (skipped when dropped meanwhile).
  void PrefetchLoad(int32_t entry, bool queued = false);
  static void PrefetchEntry(void* self, int32_t entry);

  // Direct reads on or off for the cap now (TinyAIMmapConfig.directReads),
  // and the prefetch workers working when their count is automatic.
  void ChooseReads();
  // The automatic prefetch count: at most kAutoPrefetchMax workers, with
  // this many bytes of reads in flight while the cache streams (4 with the
  // default 1 MB row slices: on the Zen 5 host's disk, 1, 2 and 4 loaders
  // read at 2.1-4.1, 2.2-4.6 and 2.2-5.1 GB/s, docs/benchmarks.md).
  static constexpr uint64_t kAutoPrefetchInFlight = 4u << 20;

  const TmaiReader* reader_ = nullptr;
  const WeightSource* source_ = nullptr;
  uint64_t weight_bytes_ = 0;
  uint64_t direct_base_ = 0;  // the source's direct bytes at the last reset  // what every layer loaded whole holds: a cap below it streams
  const RowSliceTable* table_ = nullptr;
  TinyAIMmapConfig config_{};

  mutable Mutex mutex_;
  CondVar changed_;  // an entry finished (or failed) loading
  Array<Entry> entries_;
  SliceArena arena_;
  uint64_t capacity_ = 0;
  std::atomic<uint32_t> cap_epoch_{0};
  PeakWatch* watches_ = nullptr;
  uint64_t resident_ = 0;
  uint64_t tick_ = 0;
  int32_t loading_ = 0;
  CacheStats stats_;

  SliceLoader loader_;
  PrefetchWorkers workers_;
};

}  // namespace tinyai

#endif  // TINYAI_LOADER_WEIGHT_CACHE_H_
