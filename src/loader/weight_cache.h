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
// in the huge-page region below, a fault may commit a neighbour's range
// before its slice loads, never past the region, which the cap then holds.
// Slices of an image in memory (flash) are used in place and cost nothing.
//
// Memory is taken in slots of the largest slice's size, kept for reuse when
// their slice is evicted (counted as held: a reused slot needs no page
// faults), and given back to the OS when a layer-sized buffer needs room.
// Where every slice the cache must load fits the cap at once (no cap, or a
// cap of at least their bytes) and the OS has huge pages
// (port::HugeRegionReserve), the slices instead live at fixed offsets of one
// region asked to be in huge pages: a decode that streams them then misses
// the TLB less (docs/benchmarks.md, "Huge pages"). A huge page commits more
// than the slice whose fault took it, never more than the region, which the
// cap holds. Once that could break the cap - a slice evicted, a cap set
// below the region, a layer's buffer under a cap - later faults take small
// pages and the ranges of slices not loaded are given back
// (port::HugeRegionDiscard), as is an evicted slice's range.
//
// Prefetch: Prefetch() queues an entry for the worker threads (a moodycamel
// BlockingConcurrentQueue); a worker loads it only if it can make room
// without evicting anything the policy values more. With no workers (or no
// threads on the port) a prefetch loads inline.
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
#include "loader/row_slices.h"
#include "loader/row_transform.h"
#include "loader/weight_source.h"
#include "port/port.h"
#include "tinyai/utils/mmap_loader.h"

namespace tinyai {

class ZstdDecoder;
class PrefetchQueue;

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
  // Bytes of the cache's own bookkeeping and staging (not weights).
  uint64_t overhead_bytes() const;
  // Bytes an entry holds once loaded (0 when used in place).
  uint64_t EntryBytes(int32_t entry) const;
  bool adaptive() const { return config_.adaptiveCaching; }

  // Where ConvertRows finds what calibration measured of a tensor's
  // inputs (none by default); set before Init.
  using CalibrationFn = TensorCalibration (*)(const void* owner, int32_t tensor);
  void UseCalibration(const void* owner, CalibrationFn fn) {
    calibration_owner_ = owner;
    calibration_ = fn;
  }

  // An entry is pinned or being loaded (the model cannot be changed under it).
  bool AnyPinned() const;

  // Checks the cap invariant (tests): held <= cap, counters consistent.
  bool CheckInvariants() const;
  // The row slices live in the huge-page region (tests).
  bool huge_region() const {
    LockGuard lock(mutex_);
    return region_ != nullptr;
  }

 private:
  enum State : uint8_t { kEmpty, kLoading, kResident };
  struct Entry {
    const uint8_t* data = nullptr;  // where the bytes are (owned buffer or in place)
    uint8_t* buffer = nullptr;      // owned memory, nullptr when in place
    uint64_t bytes = 0;             // memory held (0 in place)
    int32_t pins = 0;
    State state = kEmpty;
    bool queued = false;
    bool in_slot = false;
    bool by_prefetch = false;  // the current load was a prefetch's
    float priority = 1.0f;
    EntryUse use;
  };
  struct Staging {
    uint8_t* buffer = nullptr;
    ZstdDecoder* decoder = nullptr;
    bool busy = false;
  };

  // --- under mutex_ ---
  // Finds memory for entry (a slot or an exact buffer), evicting as needed.
  // For a prefetch, *room is false (and OK returned) when making room would
  // evict something worth more.
  TinyAIStatus Reserve(UniqueLock& lock, int32_t entry, bool prefetch, bool* room);
  // The unpinned loaded entry with the lowest keep score (below below_score
  // when >= 0); entries of layers under minLayerCacheSize only if allow_small.
  int32_t PickVictim(double below_score, bool allow_small) const;
  void Evict(int32_t entry);
  void FreeMemory(Entry& e);
  double Score(int32_t entry) const;
  bool IsSmall(int32_t entry) const;
  uint64_t DecodedSize(int32_t entry) const;
  void NoteHeld();
  TinyAIStatus GrabStaging(UniqueLock& lock, Staging** out);
  // Reserves the huge-page region for the row slices if it should be (see
  // above); called at the first slice's reservation, when the cap is known.
  void DecideRegion();
  // Where slice's range starts in the region: the bytes of the slices before
  // it, counted from the last slice asked for (slices load in order, so this
  // is O(1) a load in a decode).
  uint64_t RegionOffset(int32_t slice);
  bool InRegion(const uint8_t* buffer) const {
    return region_ && buffer >= region_ && buffer < region_ + region_bytes_;
  }
  // Ends huge faults in the region (EndHugeFaults) when a cap no longer
  // holds it whole: a cap below it, or a layer's buffer beside it.
  void KeepRegionUnderCap();
  bool LayersHeld() const;
  // Once the region's memory must be exactly what it holds (a slice
  // evicted, a cap below it, a layer sharing the cap): later faults commit
  // small pages, and the ranges of slices not loaded, which huge pages their
  // neighbours took may have committed, are given back.
  void EndHugeFaults();

  // Loads entry (marked kLoading, memory reserved) with the lock released,
  // then marks it resident, or empty with its memory returned on failure.
  TinyAIStatus LoadReserved(UniqueLock& lock, int32_t entry, bool prefetch);

  // --- outside mutex_, entry marked kLoading ---
  TinyAIStatus Load(int32_t entry, uint8_t* dst, const uint8_t** data, uint64_t* bytes_read);
  TinyAIStatus LoadSlice(int32_t slice, uint8_t* dst, const uint8_t** data, uint64_t* bytes_read);
  TinyAIStatus LoadSliceRows(int32_t slice, uint8_t* dst, const uint8_t** data, uint64_t* bytes_read);
  // Puts the rows of dst (slice's bytes, loaded) that lie in panels into
  // the panel layout (common/panels.h), in place.
  TinyAIStatus PackPanels(int32_t slice, uint8_t* dst);
  TinyAIStatus LoadLayer(int32_t layer, uint8_t* dst, const uint8_t** data, uint64_t* bytes_read);
  // Reads a source's bytes (ZstdReadFn).
  static TinyAIStatus ReadSource(void* self, uint64_t offset, size_t size, uint8_t* dst);
  // Reads rows [first_row, first_row + rows) of tensor as the file stores
  // them and writes them to dst in its runtime dtype (RowSlice::transform).
  TinyAIStatus ConvertRows(int32_t tensor, uint64_t first_row, uint64_t rows, uint8_t* dst, uint64_t* bytes_read);
  // Reads and decodes a zstd frame of tensor t into dst.
  TinyAIStatus DecodeFrame(int32_t tensor, int32_t frame, uint8_t* dst, uint64_t* bytes_read);
  // Checks tensor t's CRC (once per tensor), reading its stored bytes through
  // bounce (bounce_size bytes) unless they are in place.
  TinyAIStatus VerifyStreaming(int32_t tensor, uint8_t* bounce, size_t bounce_size, uint64_t* bytes_read);
  TinyAIStatus VerifyInMemory(int32_t tensor, const uint8_t* stored);
  bool NeedsVerify(int32_t tensor) const;
  bool InPlace(int32_t entry) const;

  // Loads entry as a prefetch (worker threads or inline).
  void PrefetchLoad(int32_t entry);
  static void WorkerMain(void* self);

  const TmaiReader* reader_ = nullptr;
  const WeightSource* source_ = nullptr;
  const RowSliceTable* table_ = nullptr;
  TinyAIMmapConfig config_{};
  uint64_t slot_bytes_ = 0;
  // On a static arena (ports without a heap) the cap is carved into slots
  // when it is set (at most one per slice that is not used in place), and
  // every row slice takes one: loading a slice then never allocates.
  bool fixed_slots_ = false;
  // Row slices that need memory of their own (not used in place): the most
  // slots a static arena is carved into.
  uint64_t owned_slices_ = 0;
  bool has_zstd_ = false;
  // The huge-page region of the row slices (DecideRegion); nullptr when
  // they take slots and buffers of their own. (The small members first,
  // in has_zstd_'s padding: a static arena holds this object.)
  bool region_decided_ = false;
  bool region_huge_ = false;  // faults may still commit huge pages
  int32_t offset_slice_ = 0;  // RegionOffset's cursor: slice offset_slice_ starts at offset_bytes_
  uint8_t* region_ = nullptr;
  uint64_t region_bytes_ = 0;
  uint64_t offset_bytes_ = 0;

  mutable Mutex mutex_;
  CondVar changed_;  // an entry finished (or failed) loading, a staging buffer was released
  Array<Entry> entries_;
  Array<uint8_t*> free_slots_;
  size_t free_slot_count_ = 0;
  Array<Staging> staging_;
  size_t staging_bytes_ = 0;
  Array<std::atomic<uint8_t>> verified_;  // per tensor: CRC checked
  uint64_t capacity_ = 0;
  std::atomic<uint32_t> cap_epoch_{0};
  PeakWatch* watches_ = nullptr;
  uint64_t held_ = 0;
  uint64_t resident_ = 0;
  uint64_t tick_ = 0;
  int32_t loading_ = 0;
  CacheStats stats_;

  RowTransform transform_;
  const void* calibration_owner_ = nullptr;
  CalibrationFn calibration_ = nullptr;

  PrefetchQueue* queue_ = nullptr;
  Array<port::Thread> workers_;
  std::atomic<bool> stopping_{false};
};

}  // namespace tinyai

#endif  // TINYAI_LOADER_WEIGHT_CACHE_H_
