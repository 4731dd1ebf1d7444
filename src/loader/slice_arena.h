// The memory the weight cache (loader/weight_cache.h) holds its entries in,
// and the count of it that the cache's cap bounds. The arena says where an
// entry goes and what that takes; the cache decides when to make room and
// what to evict.
//
// Memory is taken in slots of the largest slice's size, kept for reuse when
// their slice is evicted (counted as held: a reused slot needs no page
// faults), and given back to the OS when a layer-sized buffer needs room.
// Slices of less than half a slot (a layer's tail) and layers get buffers of
// their own size. On a static arena (ports without a heap) the cap is carved
// into slots when it is set (at most one per slice that is not used in
// place), and every row slice takes one: loading a slice then never
// allocates.
//
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
// Entries used in place (an image in flash) take nothing. Not thread-safe:
// the cache calls it under its lock.
#ifndef TINYAI_LOADER_SLICE_ARENA_H_
#define TINYAI_LOADER_SLICE_ARENA_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/ledger.h"
#include "format/tmai_reader.h"
#include "loader/row_slices.h"
#include "loader/weight_source.h"

namespace tinyai {

class SliceArena {
 public:
  SliceArena() = default;
  SliceArena(const SliceArena&) = delete;
  SliceArena& operator=(const SliceArena&) = delete;
  ~SliceArena() { Shutdown(); }

  // Entries as UsedInPlace() numbers them (loader/row_slices.h). The
  // reader, source and table must outlive the arena.
  TinyAIStatus Init(const TmaiReader* reader, const WeightSource* source, const RowSliceTable* table);
  // Frees everything (the region, slots, buffers).
  void Shutdown();

  // Bytes an entry holds once loaded (0 when used in place).
  uint64_t EntryBytes(int32_t entry) const;
  uint64_t slot_bytes() const { return slot_bytes_; }
  // Memory held for weights now: entries' memory and free slots.
  uint64_t held() const { return held_; }
  // An entry's memory (nullptr when it has none) and its bytes.
  uint8_t* buffer(int32_t entry) const { return memory_[static_cast<size_t>(entry)].buffer; }
  uint64_t bytes(int32_t entry) const { return memory_[static_cast<size_t>(entry)].bytes; }

  // The huge-page region of the row slices: decided at the first slice's
  // reservation, when the cap (0 = none) is known.
  bool region_decided() const { return region_decided_; }
  void DecideRegion(uint64_t capacity);
  bool has_region() const { return region_ != nullptr; }

  // Ways to give entry memory of `bytes` (its EntryBytes()):
  // a free slot (false when none is free);
  bool TakeFreeSlot(int32_t entry);
  // its range of the region;
  void PlaceInRegion(int32_t entry, uint64_t bytes);
  // a buffer of its own (a slot when bytes is a slot's size and the entry a
  // slice). source names the model in the out-of-memory message.
  TinyAIStatus Allocate(int32_t entry, uint64_t bytes, const char* source);
  // Gives a free slot back to the OS; false when none is free.
  bool ReleaseFreeSlot();
  // Takes entry's memory back: a slot goes to the free slots (still held),
  // a range of the region back to the OS (and later faults there take small
  // pages), a buffer of its own is freed. No-op without memory.
  void Free(int32_t entry);
  // On a static arena: free slots up to what cap holds (at most one per
  // slice not used in place). A no-op elsewhere.
  TinyAIStatus CarveSlots(uint64_t cap);
  // Ends huge faults in the region (EndHugeFaults) when the cap no longer
  // holds it whole: a cap below it, or a layer's buffer beside it.
  void KeepRegionUnderCap(uint64_t cap);
  // Once the region's memory must be exactly what it holds (a slice
  // evicted, a cap below it, a layer sharing the cap): later faults commit
  // small pages, and the ranges of slices not loaded, which huge pages their
  // neighbours took may have committed, are given back.
  void EndHugeFaults();

  // Checks held() against the memory counted entry by entry (tests).
  bool Consistent() const;
  // Bytes of the arena's own bookkeeping.
  uint64_t overhead_bytes() const;

 private:
  struct Memory {
    uint8_t* buffer = nullptr;  // nullptr: none
    uint64_t bytes = 0;
  };
  bool InRegion(const uint8_t* buffer) const {
    return region_ && buffer >= region_ && buffer < region_ + region_bytes_;
  }
  // A slice's memory is a slot when it has a slot's size outside the region
  // (every slice on a static arena; a buffer of a slot's size becomes a
  // free slot when its slice is evicted).
  bool InSlot(int32_t entry, const Memory& m) const {
    return entry < table_->slice_count() && m.bytes == slot_bytes_ && !InRegion(m.buffer);
  }
  // Where slice's range starts in the region: the bytes of the slices before
  // it, counted from the last slice asked for (slices load in order, so this
  // is O(1) a load in a decode).
  uint64_t RegionOffset(int32_t slice);
  bool LayersHeld() const;

  const TmaiReader* reader_ = nullptr;
  const WeightSource* source_ = nullptr;
  const RowSliceTable* table_ = nullptr;
  uint64_t slot_bytes_ = 0;
  // A direct read fills whole blocks around a slice's bytes: up to a block
  // before them and one after. Slices of at least 8 times that keep the
  // room (an eighth more at most); smaller ones are read buffered.
  uint64_t direct_slack_ = 0;
  uint64_t DirectSlack(uint64_t decoded) const { return decoded >= 8 * direct_slack_ ? direct_slack_ : 0; }
  // On a static arena every row slice takes a slot (see above).
  bool fixed_slots_ = false;
  // The huge-page region (DecideRegion); nullptr when the slices take slots
  // and buffers of their own. (The small members first, in fixed_slots_'
  // padding: a static arena holds this object.)
  bool region_decided_ = false;
  bool region_huge_ = false;  // faults may still commit huge pages
  int32_t offset_slice_ = 0;  // RegionOffset's cursor: slice offset_slice_ starts at offset_bytes_
  // Row slices that need memory of their own (not used in place): the most
  // slots a static arena is carved into.
  uint64_t owned_slices_ = 0;
  uint8_t* region_ = nullptr;
  uint64_t region_bytes_ = 0;
  uint64_t offset_bytes_ = 0;
  // held_ and the ledger's weights together.
  void Hold(uint64_t bytes) {
    held_ += bytes;
    LedgerPages(kMemWeights, bytes, true);
  }
  void Unhold(uint64_t bytes) {
    held_ -= bytes;
    LedgerPages(kMemWeights, bytes, false);
  }
  uint64_t held_ = 0;
  Array<Memory> memory_;  // per entry
  Array<uint8_t*> free_slots_;
  size_t free_slot_count_ = 0;
};

}  // namespace tinyai

#endif  // TINYAI_LOADER_SLICE_ARENA_H_
