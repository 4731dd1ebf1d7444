#include "loader/slice_arena.h"

#include "common/ledger.h"
#include "common/status.h"
#include "port/port.h"

namespace tinyai {
namespace {

uint64_t PageRound(uint64_t n) {
  const uint64_t page = port::PageSize();
  return (n + page - 1) / page * page;
}

}  // namespace

TinyAIStatus SliceArena::Init(const TmaiReader* reader, const WeightSource* source, const RowSliceTable* table) {
  reader_ = reader;
  source_ = source;
  table_ = table;
  Unhold(held_);
  direct_slack_ = 2 * static_cast<uint64_t>(source->direct_align());
  slot_bytes_ = PageRound(table->max_decoded_bytes() + DirectSlack(table->max_decoded_bytes()));
  port::ArenaStats arena;
  fixed_slots_ = port::GetArenaStats(&arena) == TINYAI_OK;
  TINYAI_RETURN_IF_ERROR(memory_.Allocate(static_cast<size_t>(table->slice_count()) + reader->layers().size(),
                                          "weight cache memory"));
  TINYAI_RETURN_IF_ERROR(free_slots_.Allocate(static_cast<size_t>(table->slice_count()), "weight cache slots"));
  owned_slices_ = 0;
  for (int32_t i = 0; i < table->slice_count(); ++i) owned_slices_ += UsedInPlace(*table, *reader, *source, i) ? 0 : 1;
  return TINYAI_OK;
}

void SliceArena::Shutdown() {
  for (Memory& m : memory_) {
    if (m.buffer && !InRegion(m.buffer)) port::PageFree(m.buffer, static_cast<size_t>(m.bytes));
    m = Memory();
  }
  port::HugeRegionFree(region_, static_cast<size_t>(region_bytes_));
  region_ = nullptr;
  region_bytes_ = 0;
  region_decided_ = region_huge_ = false;
  offset_slice_ = 0;
  offset_bytes_ = 0;
  for (size_t i = 0; i < free_slot_count_; ++i) port::PageFree(free_slots_[i], static_cast<size_t>(slot_bytes_));
  free_slot_count_ = 0;
  memory_ = Array<Memory>();
  Unhold(held_);
}

uint64_t SliceArena::EntryBytes(int32_t entry) const {
  if (UsedInPlace(*table_, *reader_, *source_, entry)) return 0;
  if (entry < table_->slice_count()) {
    uint64_t decoded = table_->slice(entry).decoded_size;
    decoded += DirectSlack(decoded);
    // Slices of at least half the largest share slots; smaller ones (a
    // layer's tail) get a buffer of their own size.
    return fixed_slots_ || decoded * 2 >= slot_bytes_ ? slot_bytes_ : PageRound(decoded);
  }
  return PageRound(reader_->layers()[static_cast<size_t>(entry - table_->slice_count())].decoded_size);
}

bool SliceArena::TakeFreeSlot(int32_t entry) {
  if (free_slot_count_ == 0) return false;
  Memory& m = memory_[static_cast<size_t>(entry)];
  m.buffer = free_slots_[--free_slot_count_];
  m.bytes = slot_bytes_;
  return true;
}

void SliceArena::PlaceInRegion(int32_t entry, uint64_t bytes) {
  Memory& m = memory_[static_cast<size_t>(entry)];
  Hold(bytes);
  m.buffer = region_ + RegionOffset(entry);
  m.bytes = bytes;
}

TinyAIStatus SliceArena::Allocate(int32_t entry, uint64_t bytes, const char* source) {
  void* p = port::PageAlloc(static_cast<size_t>(bytes));
  if (!p) {
    return SetError(TINYAI_ERR_OUT_OF_MEMORY, "'%s': cannot allocate %llu bytes for weights", source,
                    static_cast<unsigned long long>(bytes));
  }
  Hold(bytes);
  Memory& m = memory_[static_cast<size_t>(entry)];
  m.buffer = static_cast<uint8_t*>(p);
  m.bytes = bytes;
  return TINYAI_OK;
}

bool SliceArena::ReleaseFreeSlot() {
  if (free_slot_count_ == 0) return false;
  port::PageFree(free_slots_[--free_slot_count_], static_cast<size_t>(slot_bytes_));
  Unhold(slot_bytes_);
  return true;
}

void SliceArena::Free(int32_t entry) {
  Memory& m = memory_[static_cast<size_t>(entry)];
  if (!m.buffer) return;
  if (InRegion(m.buffer)) {
    // Evicted, or its load failed: from now on the region's memory must be
    // what it holds.
    EndHugeFaults();
    port::HugeRegionDiscard(m.buffer, static_cast<size_t>(m.bytes));
    Unhold(m.bytes);
  } else if (InSlot(entry, m)) {
    free_slots_[free_slot_count_++] = m.buffer;
  } else {
    port::PageFree(m.buffer, static_cast<size_t>(m.bytes));
    Unhold(m.bytes);
  }
  m = Memory();
}

TinyAIStatus SliceArena::CarveSlots(uint64_t cap) {
  if (!fixed_slots_ || slot_bytes_ == 0) return TINYAI_OK;
  // Slices used in place (an image in flash) never take one.
  uint64_t slots = cap / slot_bytes_;
  if (slots > owned_slices_) slots = owned_slices_;
  while (held_ + slot_bytes_ <= slots * slot_bytes_) {
    void* p = port::PageAlloc(static_cast<size_t>(slot_bytes_));
    if (!p) return OutOfMemory("weight cache slot", static_cast<size_t>(slot_bytes_));
    free_slots_[free_slot_count_++] = static_cast<uint8_t*>(p);
    Hold(slot_bytes_);
  }
  return TINYAI_OK;
}

void SliceArena::DecideRegion(uint64_t capacity) {
  region_decided_ = true;
  if (fixed_slots_ || owned_slices_ == 0) return;
  const uint64_t huge = port::HugePageSize();
  if (huge == 0) return;
  const uint64_t total = RegionOffset(table_->slice_count());
  if (total == 0 || total > SIZE_MAX - 2 * huge) return;
  // A fault commits a whole huge page, more than the slice written: the cap
  // must hold the whole region (it ends at total: nothing past it commits).
  if (capacity != 0 && capacity < total) return;
  region_ = static_cast<uint8_t*>(port::HugeRegionReserve(static_cast<size_t>(total)));
  if (!region_) return;
  region_bytes_ = total;
  region_huge_ = true;
  KeepRegionUnderCap(capacity);  // a layer held already shares the cap
}

bool SliceArena::LayersHeld() const {
  for (size_t i = static_cast<size_t>(table_->slice_count()); i < memory_.size(); ++i) {
    if (memory_[i].buffer) return true;
  }
  return false;
}

uint64_t SliceArena::RegionOffset(int32_t slice) {
  // O(the distance from the last slice asked for), either way.
  for (; offset_slice_ < slice; ++offset_slice_) offset_bytes_ += EntryBytes(offset_slice_);
  while (offset_slice_ > slice) offset_bytes_ -= EntryBytes(--offset_slice_);
  return offset_bytes_;
}

void SliceArena::KeepRegionUnderCap(uint64_t cap) {
  if (region_huge_ && cap != 0 && (cap < region_bytes_ || LayersHeld())) EndHugeFaults();
}

void SliceArena::EndHugeFaults() {
  if (!region_huge_) return;
  region_huge_ = false;
  port::HugeRegionNoHuge(region_, static_cast<size_t>(region_bytes_));
  // The ranges of slices not loaded may sit in huge pages their neighbours
  // committed: give them back, so what is committed is what is held.
  uint64_t offset = 0;
  for (int32_t i = 0; i < table_->slice_count(); ++i) {
    const uint64_t bytes = EntryBytes(i);
    if (bytes > 0 && !memory_[static_cast<size_t>(i)].buffer) {
      port::HugeRegionDiscard(region_ + offset, static_cast<size_t>(bytes));
    }
    offset += bytes;
  }
}

bool SliceArena::Consistent() const {
  uint64_t counted = free_slot_count_ * slot_bytes_;
  for (const Memory& m : memory_) {
    if (m.buffer) counted += m.bytes;
  }
  return counted == held_;
}

uint64_t SliceArena::overhead_bytes() const {
  return memory_.size() * sizeof(Memory) + free_slots_.size() * sizeof(uint8_t*);
}

}  // namespace tinyai
