#include "loader/weight_cache.h"

#include <cstdio>
#include <cstring>
#include <new>

#include "common/checked_math.h"
#include "common/crc32c.h"
#include "common/memory.h"
#include "common/panels.h"
#include "common/status.h"
#include "format/zstd_frames.h"

#if TINYAI_WITH_THREADS
#include <concurrentqueue/blockingconcurrentqueue.h>
#endif

namespace tinyai {

#if TINYAI_WITH_THREADS
class PrefetchQueue {
 public:
  moodycamel::BlockingConcurrentQueue<int32_t> queue;
};
#else
class PrefetchQueue {};
#endif

namespace {

constexpr int32_t kStopWorker = -1;
// The least a staging buffer holds: it also streams a compressed tensor's
// stored bytes through for their checksum, this much per read.
constexpr uint64_t kStagingMinBytes = 16u * 1024u;
// What a staging buffer holds when tensors are converted as they load: a
// run of stored rows and the same rows as fp32 (at least one row of each).
constexpr uint64_t kConvertStagingBytes = 16u * 1024u;
constexpr uint64_t kDataAlignmentSlack = 64;  // the fp32 rows start 64-aligned after the stored ones

uint64_t PageRound(uint64_t n) {
  const uint64_t page = port::PageSize();
  return (n + page - 1) / page * page;
}

}  // namespace

WeightCache::~WeightCache() { Shutdown(); }

TinyAIStatus WeightCache::Init(const TmaiReader* reader, const WeightSource* source, const RowSliceTable* table,
                               const TinyAIMmapConfig& config, const RowTransform& transform) {
  reader_ = reader;
  transform_ = transform;
  source_ = source;
  table_ = table;
  config_ = config;
  capacity_ = config.maxCacheSize;
  stopping_.store(false);
  stats_ = CacheStats();
  held_ = resident_ = tick_ = 0;
  loading_ = 0;
  slot_bytes_ = PageRound(table->max_decoded_bytes());
  port::ArenaStats arena;
  fixed_slots_ = port::GetArenaStats(&arena) == TINYAI_OK;
  const size_t tensor_count = reader->tensors().size();
  TINYAI_RETURN_IF_ERROR(entries_.Allocate(static_cast<size_t>(table->slice_count()) + reader->layers().size(),
                                           "weight cache entries"));
  TINYAI_RETURN_IF_ERROR(free_slots_.Allocate(static_cast<size_t>(table->slice_count()), "weight cache slots"));
  TINYAI_RETURN_IF_ERROR(verified_.Allocate(tensor_count, "checksum states"));
  has_zstd_ = false;
  for (size_t t = 0; t < tensor_count; ++t) {
    if (!config.verifyChecksums) verified_[t].store(1, std::memory_order_relaxed);
    if (reader->tensors()[t].codec == TINYAI_CODEC_ZSTD) has_zstd_ = true;
  }
  owned_slices_ = 0;
  for (int32_t i = 0; i < table->slice_count(); ++i) owned_slices_ += InPlace(i) ? 0 : 1;
  const bool converts = table->any_transformed();
  if (has_zstd_ || converts || table->any_panels()) {
    // What zstd costs: a decoding context (96 KiB) and a buffer of one
    // compressed slice (a frame is read and decoded a slice at a time; 16
    // KiB for the frames TinyAI writes) per thread that can decode at once:
    // one per prefetch worker, at least one; the thread that uses the model
    // shares them (a miss waits for one, at most a slice's decode). Tensors
    // converted as they load (ConvertRows) use the same buffers.
    size_t decoders = 1;
#if TINYAI_WITH_THREADS
    if (config.prefetchEnabled && config.prefetchThreads > 1) decoders = static_cast<size_t>(config.prefetchThreads);
#endif
    TINYAI_RETURN_IF_ERROR(staging_.Allocate(decoders, "staging buffers"));
    uint64_t bytes = 0;
    if (has_zstd_ && !source->InPlace(0)) {
      bytes = kStagingMinBytes;
      // Every frame of a tensor has its first frame's window (checked as it decodes).
      for (size_t t = 0; t < tensor_count; ++t) {
        const tmai::TensorEntry& e = reader->tensors()[t];
        if (e.codec != TINYAI_CODEC_ZSTD || table->spans(static_cast<int32_t>(t)).size() == 0) continue;
        const uint64_t* off = table->frame_offsets(static_cast<int32_t>(t));
        uint8_t head[18] = {};
        const uint64_t frame = off[1] - off[0];
        const size_t n = frame < sizeof head ? static_cast<size_t>(frame) : sizeof head;
        TINYAI_RETURN_IF_ERROR(source->Read(e.offset + off[0], n, head, reader->source()));
        const uint64_t bound = ZstdFrameBlockBound(head, n);
        if (bound > bytes) bytes = bound;
      }
    }
    if (converts) {
      if (bytes < kConvertStagingBytes) bytes = kConvertStagingBytes;
      for (size_t t = 0; t < tensor_count; ++t) {
        const int32_t ti = static_cast<int32_t>(t);
        if (!table->transformed(ti)) continue;
        const tmai::TensorEntry& e = reader->tensors()[t];
        const uint64_t row = kDataAlignmentSlack + table->stored_row_bytes(ti) + 4 * e.shape[e.ndims - 1];
        if (row > bytes) bytes = row;
      }
    }
    // Packing rows into panels copies one panel's rows aside first.
    for (size_t t = 0; t < tensor_count; ++t) {
      if (!table->panels(static_cast<int32_t>(t))) continue;
      const uint64_t panel = PanelBytes(static_cast<size_t>(table->row_bytes(static_cast<int32_t>(t))));
      if (panel > bytes) bytes = panel;
    }
    staging_bytes_ = static_cast<size_t>(PageRound(bytes));
    for (Staging& s : staging_) {
      if (has_zstd_) {
        s.decoder = New<ZstdDecoder>();
        if (!s.decoder) return SetError(TINYAI_ERR_OUT_OF_MEMORY, "cannot allocate a zstd decoder");
        TINYAI_RETURN_IF_ERROR(s.decoder->Init());
      }
      if (staging_bytes_ > 0) {
        s.buffer = static_cast<uint8_t*>(port::PageAlloc(staging_bytes_));
        if (!s.buffer) {
          return SetError(TINYAI_ERR_OUT_OF_MEMORY, "cannot allocate a %zu-byte staging buffer", staging_bytes_);
        }
      }
    }
  }
#if TINYAI_WITH_THREADS
  if (config.prefetchEnabled && config.prefetchThreads > 0) {
    queue_ = New<PrefetchQueue>();
    if (!queue_) return SetError(TINYAI_ERR_OUT_OF_MEMORY, "cannot allocate the prefetch queue");
    TINYAI_RETURN_IF_ERROR(workers_.Allocate(static_cast<size_t>(config.prefetchThreads), "prefetch workers"));
    for (port::Thread& t : workers_) TINYAI_RETURN_IF_ERROR(port::StartThread(&t, &WeightCache::WorkerMain, this));
  }
#endif
  return TINYAI_OK;
}

void WeightCache::Shutdown() {
#if TINYAI_WITH_THREADS
  if (queue_) {
    stopping_.store(true);
    // Workers skip what is still queued once stopping_ is set and exit at
    // their stop item; a worker mid-load finishes that load first.
    for (port::Thread& t : workers_) {
      if (t.started) queue_->queue.enqueue(kStopWorker);
    }
    for (port::Thread& t : workers_) port::JoinThread(&t);
    Delete(queue_);
    queue_ = nullptr;
  }
#endif
  for (Entry& e : entries_) {
    if (e.buffer && !InRegion(e.buffer)) {
      port::PageFree(e.buffer, e.in_slot ? static_cast<size_t>(slot_bytes_) : static_cast<size_t>(e.bytes));
    }
    e = Entry();
  }
  port::HugeRegionFree(region_, static_cast<size_t>(region_bytes_));
  region_ = nullptr;
  region_bytes_ = 0;
  region_decided_ = region_huge_ = false;
  offset_slice_ = 0;
  offset_bytes_ = 0;
  for (size_t i = 0; i < free_slot_count_; ++i) port::PageFree(free_slots_[i], static_cast<size_t>(slot_bytes_));
  free_slot_count_ = 0;
  for (Staging& s : staging_) {
    port::PageFree(s.buffer, staging_bytes_);
    Delete(s.decoder);
    s = Staging();
  }
  staging_ = Array<Staging>();
  staging_bytes_ = 0;
  entries_ = Array<Entry>();
  held_ = 0;
  resident_ = 0;
}

bool WeightCache::AnyPinned() const {
  LockGuard lock(mutex_);
  for (const Entry& e : entries_) {
    if (e.pins > 0 || e.state == kLoading) return true;
  }
  return false;
}

// ---- sizes and scores (under mutex_) ----

bool WeightCache::InPlace(int32_t entry) const {
  if (!source_->InPlace(0)) return false;
  if (entry < table_->slice_count()) return table_->slice(entry).frame < 0 && !table_->slice(entry).transform;
  const tmai::LayerEntry& l = reader_->layers()[static_cast<size_t>(entry - table_->slice_count())];
  for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
    if (reader_->tensors()[t].codec != TINYAI_CODEC_NONE || table_->transformed(static_cast<int32_t>(t))) return false;
  }
  return true;
}

uint64_t WeightCache::EntryBytes(int32_t entry) const {
  if (InPlace(entry)) return 0;
  if (entry < table_->slice_count()) {
    uint64_t decoded = table_->slice(entry).decoded_size;
    // Slices of at least half the largest share slots; smaller ones (a
    // layer's tail) get a buffer of their own size.
    return fixed_slots_ || decoded * 2 >= slot_bytes_ ? slot_bytes_ : PageRound(decoded);
  }
  return PageRound(reader_->layers()[static_cast<size_t>(entry - table_->slice_count())].decoded_size);
}

uint64_t WeightCache::DecodedSize(int32_t entry) const {
  if (entry < table_->slice_count()) return table_->slice(entry).decoded_size;
  return reader_->layers()[static_cast<size_t>(entry - table_->slice_count())].decoded_size;
}

bool WeightCache::IsSmall(int32_t entry) const {
  int32_t layer = entry < table_->slice_count() ? table_->slice(entry).layer : entry - table_->slice_count();
  return reader_->layers()[static_cast<size_t>(layer)].decoded_size < config_.minLayerCacheSize;
}

double WeightCache::Score(int32_t entry) const {
  const Entry& e = entries_[static_cast<size_t>(entry)];
  return KeepScore(e.use, e.priority, tick_, config_.adaptiveCaching);
}

int32_t WeightCache::PickVictim(double below, bool allow_small) const {
  int32_t victim = -1;
  double best = 0.0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (e.state != kResident || e.pins > 0 || !e.buffer) continue;
    const int32_t id = static_cast<int32_t>(i);
    if (!allow_small && IsSmall(id)) continue;  // not worth evicting, unless nothing else is left
    double s = Score(id);
    if (below >= 0.0 && s >= below) continue;
    if (victim < 0 || s < best || (s == best && e.bytes > entries_[static_cast<size_t>(victim)].bytes)) {
      victim = id;
      best = s;
    }
  }
  return victim;
}

void WeightCache::FreeMemory(Entry& e) {
  if (!e.buffer) return;
  if (InRegion(e.buffer)) {
    // Evicted, or its load failed: from now on the region's memory must be
    // what it holds.
    EndHugeFaults();
    port::HugeRegionDiscard(e.buffer, static_cast<size_t>(e.bytes));
    held_ -= e.bytes;
  } else if (e.in_slot) {
    free_slots_[free_slot_count_++] = e.buffer;
  } else {
    port::PageFree(e.buffer, static_cast<size_t>(e.bytes));
    held_ -= e.bytes;
  }
  e.buffer = nullptr;
  e.in_slot = false;
  e.bytes = 0;
}

void WeightCache::Evict(int32_t entry) {
  Entry& e = entries_[static_cast<size_t>(entry)];
  resident_ -= e.bytes;
  FreeMemory(e);
  e.state = kEmpty;
  e.data = nullptr;
  e.by_prefetch = false;
  e.use.pending = false;
  ++stats_.evictions;
}

void WeightCache::DecideRegion() {
  region_decided_ = true;
  if (fixed_slots_ || owned_slices_ == 0) return;
  const uint64_t huge = port::HugePageSize();
  if (huge == 0) return;
  const uint64_t total = RegionOffset(table_->slice_count());
  if (total == 0 || total > SIZE_MAX - 2 * huge) return;
  // A fault commits a whole huge page, more than the slice written: the cap
  // must hold the whole region (it ends at total: nothing past it commits).
  if (capacity_ != 0 && capacity_ < total) return;
  region_ = static_cast<uint8_t*>(port::HugeRegionReserve(static_cast<size_t>(total)));
  if (!region_) return;
  region_bytes_ = total;
  region_huge_ = true;
  KeepRegionUnderCap();  // a layer held already shares the cap
}

bool WeightCache::LayersHeld() const {
  for (size_t i = static_cast<size_t>(table_->slice_count()); i < entries_.size(); ++i) {
    if (entries_[i].buffer) return true;
  }
  return false;
}

uint64_t WeightCache::RegionOffset(int32_t slice) {
  // O(the distance from the last slice asked for), either way.
  for (; offset_slice_ < slice; ++offset_slice_) offset_bytes_ += EntryBytes(offset_slice_);
  while (offset_slice_ > slice) offset_bytes_ -= EntryBytes(--offset_slice_);
  return offset_bytes_;
}

void WeightCache::KeepRegionUnderCap() {
  if (region_huge_ && capacity_ != 0 && (capacity_ < region_bytes_ || LayersHeld())) EndHugeFaults();
}

void WeightCache::EndHugeFaults() {
  if (!region_huge_) return;
  region_huge_ = false;
  port::HugeRegionNoHuge(region_, static_cast<size_t>(region_bytes_));
  // The ranges of slices not loaded may sit in huge pages their neighbours
  // committed: give them back, so what is committed is what is held.
  uint64_t offset = 0;
  for (int32_t i = 0; i < table_->slice_count(); ++i) {
    const uint64_t bytes = EntryBytes(i);
    if (bytes > 0 && !entries_[static_cast<size_t>(i)].buffer) {
      port::HugeRegionDiscard(region_ + offset, static_cast<size_t>(bytes));
    }
    offset += bytes;
  }
}

void WeightCache::NoteHeld() {
  if (held_ > stats_.peak_held_bytes) stats_.peak_held_bytes = held_;
  for (PeakWatch* w = watches_; w; w = w->next) {
    if (held_ > w->peak) w->peak = held_;
  }
}

void WeightCache::AddPeakWatch(PeakWatch* watch) {
  LockGuard lock(mutex_);
  watch->peak = held_;
  watch->next = watches_;
  watches_ = watch;
}

void WeightCache::RemovePeakWatch(PeakWatch* watch) {
  LockGuard lock(mutex_);
  for (PeakWatch** link = &watches_; *link; link = &(*link)->next) {
    if (*link == watch) {
      *link = watch->next;
      return;
    }
  }
}

uint64_t WeightCache::RestartPeakWatch(PeakWatch* watch) {
  LockGuard lock(mutex_);
  const uint64_t peak = watch->peak;
  watch->peak = held_;
  return peak;
}

uint64_t WeightCache::WatchedPeak(const PeakWatch& watch) const {
  LockGuard lock(mutex_);
  return watch.peak;
}

namespace {

// "row slice 17 (tensor 'blk.3.attn_q' ...)" or "layer 'block.3'".
void Describe(const TmaiReader& reader, const RowSliceTable& table, int32_t entry, char* out, size_t size) {
  if (entry < table.slice_count()) {
    const RowSlice& b = table.slice(entry);
    std::snprintf(out, size, "row slice %d (of tensor '%s')", entry, reader.tensors()[static_cast<size_t>(b.tensor)].name);
  } else {
    const tmai::LayerEntry& l = reader.layers()[static_cast<size_t>(entry - table.slice_count())];
    if (l.kind == TINYAI_LAYER_TRANSFORMER) {
      std::snprintf(out, size, "layer %d ('block.%d')", entry - table.slice_count(), l.block_index);
    } else {
      std::snprintf(out, size, "layer %d ('%s')", entry - table.slice_count(),
                    tinyaiLayerKindName(static_cast<TinyAILayerKind>(l.kind)));
    }
  }
}

}  // namespace

TinyAIStatus WeightCache::Reserve(UniqueLock& lock, int32_t entry, bool prefetch, bool* room) {
  (void)lock;
  *room = true;
  Entry& e = entries_[static_cast<size_t>(entry)];
  const uint64_t need = EntryBytes(entry);
  if (need == 0) return TINYAI_OK;
  if (entry < table_->slice_count() && !region_decided_) DecideRegion();
  // A layer's buffer shares the cap with the region, which then may hold no
  // more than its slices do.
  if (entry >= table_->slice_count() && capacity_ != 0) EndHugeFaults();
  const bool in_region = region_ && entry < table_->slice_count();
  const bool slot = !in_region && entry < table_->slice_count() && need == slot_bytes_;
  if (capacity_ > 0 && need > capacity_) {
    if (prefetch) {
      *room = false;
      return TINYAI_OK;
    }
    char what[128];
    Describe(*reader_, *table_, entry, what, sizeof what);
    return SetError(TINYAI_ERR_RESOURCE_EXHAUSTED,
                    "'%s': %s needs %llu bytes, more than the weight cache's cap of %llu bytes", reader_->source(),
                    what, static_cast<unsigned long long>(need), static_cast<unsigned long long>(capacity_));
  }
  double below = -1.0;
  if (prefetch) {
    EntryUse u = e.use;
    u.pending = true;
    below = KeepScore(u, e.priority, tick_, config_.adaptiveCaching);
  }
  for (;;) {
    if (slot && free_slot_count_ > 0) {
      e.buffer = free_slots_[--free_slot_count_];
      e.in_slot = true;
      e.bytes = need;
      return TINYAI_OK;
    }
    if (in_region && (capacity_ == 0 || held_ + need <= capacity_)) {
      held_ += need;
      NoteHeld();
      e.buffer = region_ + RegionOffset(entry);
      e.in_slot = false;
      e.bytes = need;
      return TINYAI_OK;
    }
    if (capacity_ == 0 || held_ + need <= capacity_) {
      void* p = port::PageAlloc(static_cast<size_t>(need));
      if (!p) {
        return SetError(TINYAI_ERR_OUT_OF_MEMORY, "'%s': cannot allocate %llu bytes for weights", reader_->source(),
                        static_cast<unsigned long long>(need));
      }
      held_ += need;
      NoteHeld();
      e.buffer = static_cast<uint8_t*>(p);
      e.in_slot = slot;
      e.bytes = need;
      return TINYAI_OK;
    }
    if (free_slot_count_ > 0) {
      port::PageFree(free_slots_[--free_slot_count_], static_cast<size_t>(slot_bytes_));
      held_ -= slot_bytes_;
      continue;
    }
    int32_t victim = PickVictim(below, false);
    if (victim < 0 && !prefetch) victim = PickVictim(below, true);
    if (victim >= 0) {
      Evict(victim);
      continue;
    }
    if (prefetch) {
      *room = false;
      return TINYAI_OK;
    }
#if TINYAI_WITH_THREADS
    if (loading_ > 0) {  // a load in flight will end and become evictable
      changed_.wait(lock);
      continue;
    }
#endif
    uint64_t pinned = 0;
    for (const Entry& x : entries_) {
      if (x.pins > 0) pinned += x.bytes;
    }
    char what[128];
    Describe(*reader_, *table_, entry, what, sizeof what);
    return SetError(TINYAI_ERR_RESOURCE_EXHAUSTED,
                    "'%s': no room for %s (%llu bytes) under the weight cache's cap of %llu bytes: %llu bytes are "
                    "pinned and nothing else can be evicted",
                    reader_->source(), what, static_cast<unsigned long long>(need),
                    static_cast<unsigned long long>(capacity_), static_cast<unsigned long long>(pinned));
  }
}

// ---- public ----

TinyAIStatus WeightCache::Acquire(int32_t entry, const uint8_t** data) {
  UniqueLock lock(mutex_);
  Entry& e = entries_[static_cast<size_t>(entry)];
  const uint64_t now = ++tick_;
#if TINYAI_WITH_THREADS
  bool waited = false;
#endif
  for (;;) {
#if TINYAI_WITH_THREADS
    while (e.state == kLoading) {
      if (!waited) ++stats_.stalls;
      waited = true;
      changed_.wait(lock);
    }
#endif
    if (e.state == kResident) {
      ++stats_.hits;
      if (e.by_prefetch && e.use.pending) ++stats_.prefetch_hits;
      ++e.pins;
      RecordUse(&e.use, now);
      *data = e.data;
      return TINYAI_OK;
    }
    // Empty (or a load we waited for failed): load it here.
    ++stats_.misses;
    e.state = kLoading;
    bool room = true;
    TinyAIStatus s = Reserve(lock, entry, false, &room);
    if (s != TINYAI_OK) {
      e.state = kEmpty;
      changed_.notify_all();
      return s;
    }
    s = LoadReserved(lock, entry, false);
    if (s != TINYAI_OK) {
      changed_.notify_all();
      return s;
    }
    ++e.pins;
    RecordUse(&e.use, now);
    *data = e.data;
    changed_.notify_all();
    return TINYAI_OK;
  }
}

TinyAIStatus WeightCache::Release(int32_t entry) {
  LockGuard lock(mutex_);
  Entry& e = entries_[static_cast<size_t>(entry)];
  if (e.pins == 0) {
    char what[128];
    Describe(*reader_, *table_, entry, what, sizeof what);
    return SetError(TINYAI_ERR_MISUSE, "release of %s, which is not held (no matching get)", what);
  }
  --e.pins;
  return TINYAI_OK;
}

TinyAIStatus WeightCache::Prefetch(int32_t entry) {
  if (!config_.prefetchEnabled) return TINYAI_OK;
  {
    LockGuard lock(mutex_);
    Entry& e = entries_[static_cast<size_t>(entry)];
    if (e.state != kEmpty || e.queued) return TINYAI_OK;
    ++stats_.prefetch_requests;
#if TINYAI_WITH_THREADS
    if (queue_) {
      e.queued = true;
      if (!queue_->queue.enqueue(entry)) e.queued = false;  // the queue could not grow: drop it
      return TINYAI_OK;
    }
#endif
  }
  PrefetchLoad(entry);
  return TINYAI_OK;
}

void WeightCache::PrefetchLoad(int32_t entry) {
  UniqueLock lock(mutex_);
  Entry& e = entries_[static_cast<size_t>(entry)];
  e.queued = false;
  if (stopping_.load() || e.state != kEmpty) return;
  e.state = kLoading;
  bool room = true;
  if (Reserve(lock, entry, true, &room) != TINYAI_OK || !room) {
    e.state = kEmpty;
    ++stats_.prefetch_dropped;
    changed_.notify_all();
    return;
  }
  // On failure the use that follows loads again and reports the error.
  if (LoadReserved(lock, entry, true) == TINYAI_OK) {
    e.use.pending = true;
    ++stats_.prefetch_loads;
  }
  changed_.notify_all();
}

TinyAIStatus WeightCache::LoadReserved(UniqueLock& lock, int32_t entry, bool prefetch) {
  (void)lock;
  Entry& e = entries_[static_cast<size_t>(entry)];
  ++loading_;
  e.by_prefetch = prefetch;
  uint8_t* dst = e.buffer;
  const uint8_t* loaded = nullptr;
  uint64_t read = 0;
#if TINYAI_WITH_THREADS
  lock.unlock();
#endif
  TinyAIStatus s = Load(entry, dst, &loaded, &read);
#if TINYAI_WITH_THREADS
  lock.lock();
#endif
  --loading_;
  stats_.bytes_read += read;
  if (s != TINYAI_OK) {
    FreeMemory(e);
    e.state = kEmpty;
    e.by_prefetch = false;
    return s;
  }
  e.data = loaded;
  e.state = kResident;
  resident_ += e.bytes;
  stats_.bytes_loaded += DecodedSize(entry);
  return TINYAI_OK;
}

void WeightCache::WorkerMain(void* self) {
#if TINYAI_WITH_THREADS
  WeightCache* cache = static_cast<WeightCache*>(self);
  for (;;) {
    int32_t item = kStopWorker;
    cache->queue_->queue.wait_dequeue(item);
    if (item == kStopWorker) return;
    if (cache->stopping_.load()) continue;
    cache->PrefetchLoad(item);
  }
#else
  (void)self;
#endif
}

void WeightCache::SetLayerPriority(int32_t layer, float priority) {
  LockGuard lock(mutex_);
  entries_[static_cast<size_t>(LayerEntry(layer))].priority = priority;
  for (int32_t b = table_->layer_first_slice(layer); b < table_->layer_end_slice(layer); ++b) {
    entries_[static_cast<size_t>(b)].priority = priority;
  }
}

TinyAIStatus WeightCache::SetCapacity(uint64_t bytes, bool carve) {
  UniqueLock lock(mutex_);
  capacity_ = bytes;
  cap_epoch_.fetch_add(1, std::memory_order_acq_rel);
  if (bytes == 0) return TINYAI_OK;
  KeepRegionUnderCap();
  if (carve && fixed_slots_ && slot_bytes_ > 0) {
    // Slices used in place (an image in flash) never take one.
    uint64_t slots = bytes / slot_bytes_;
    if (slots > owned_slices_) slots = owned_slices_;
    while (held_ + slot_bytes_ <= slots * slot_bytes_) {
      void* p = port::PageAlloc(static_cast<size_t>(slot_bytes_));
      if (!p) return OutOfMemory("weight cache slot", static_cast<size_t>(slot_bytes_));
      free_slots_[free_slot_count_++] = static_cast<uint8_t*>(p);
      held_ += slot_bytes_;
      NoteHeld();
    }
  }
  while (held_ > capacity_) {
    if (free_slot_count_ > 0) {
      port::PageFree(free_slots_[--free_slot_count_], static_cast<size_t>(slot_bytes_));
      held_ -= slot_bytes_;
      continue;
    }
    int32_t victim = PickVictim(-1.0, true);
#if TINYAI_WITH_THREADS
    if (victim < 0 && loading_ > 0) {  // a load in flight (a prefetch) will end and become evictable
      changed_.wait(lock);
      continue;
    }
#endif
    if (victim < 0) {
      return SetError(TINYAI_ERR_RESOURCE_EXHAUSTED,
                      "'%s': cannot shrink the weight cache to %llu bytes: %llu bytes are in use", reader_->source(),
                      static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(held_));
    }
    Evict(victim);
  }
  return TINYAI_OK;
}

uint64_t WeightCache::held_bytes() const {
  LockGuard lock(mutex_);
  return held_;
}

CacheStats WeightCache::stats() const {
  LockGuard lock(mutex_);
  CacheStats s = stats_;
  s.held_bytes = held_;
  s.resident_bytes = resident_;
  s.capacity = capacity_;
  return s;
}

void WeightCache::ResetStats() {
  LockGuard lock(mutex_);
  stats_ = CacheStats();
  stats_.peak_held_bytes = held_;
}

uint64_t WeightCache::overhead_bytes() const {
  uint64_t b = entries_.size() * sizeof(Entry) + free_slots_.size() * sizeof(uint8_t*) + verified_.size();
  for (const Staging& s : staging_) b += staging_bytes_ + (s.decoder ? s.decoder->bytes() : 0);
  return b;
}

bool WeightCache::CheckInvariants() const {
  LockGuard lock(mutex_);
  if (capacity_ > 0 && held_ > capacity_) return false;
  uint64_t counted = free_slot_count_ * slot_bytes_, resident = 0;
  for (const Entry& e : entries_) {
    if (e.buffer) counted += e.in_slot ? slot_bytes_ : e.bytes;
    if (e.state == kResident) resident += e.bytes;
    if (e.pins < 0 || (e.pins > 0 && e.state != kResident)) return false;
  }
  return counted == held_ && resident == resident_;
}

// ---- loading (outside mutex_) ----

bool WeightCache::NeedsVerify(int32_t tensor) const {
  return verified_[static_cast<size_t>(tensor)].load(std::memory_order_acquire) == 0;
}

TinyAIStatus WeightCache::VerifyInMemory(int32_t tensor, const uint8_t* stored) {
  const tmai::TensorEntry& e = reader_->tensors()[static_cast<size_t>(tensor)];
  TINYAI_RETURN_IF_ERROR(reader_->CheckTensorChecksum(static_cast<uint32_t>(tensor),
                                                      Crc32c(0, stored, static_cast<size_t>(e.stored_size))));
  verified_[static_cast<size_t>(tensor)].store(1, std::memory_order_release);
  return TINYAI_OK;
}

TinyAIStatus WeightCache::GrabStaging(UniqueLock& lock, Staging** out) {
  (void)lock;
  for (;;) {
    for (Staging& s : staging_) {
      if (!s.busy) {
        s.busy = true;
        *out = &s;
        return TINYAI_OK;
      }
    }
#if TINYAI_WITH_THREADS
    changed_.wait(lock);
#else
    return SetError(TINYAI_ERR_INTERNAL, "no staging buffer free");
#endif
  }
}

TinyAIStatus WeightCache::VerifyStreaming(int32_t tensor, uint8_t* bounce, size_t bounce_size, uint64_t* bytes_read) {
  if (!NeedsVerify(tensor)) return TINYAI_OK;
  const tmai::TensorEntry& e = reader_->tensors()[static_cast<size_t>(tensor)];
  if (const uint8_t* p = source_->InPlace(e.offset)) {
    *bytes_read += e.stored_size;
    return VerifyInMemory(tensor, p);
  }
  Staging* st = nullptr;
  if (!bounce) {
    UniqueLock lock(mutex_);
    TINYAI_RETURN_IF_ERROR(GrabStaging(lock, &st));
    bounce = st->buffer;
    bounce_size = staging_bytes_;
  }
  uint32_t crc = 0;
  TinyAIStatus s = TINYAI_OK;
  for (uint64_t done = 0; done < e.stored_size && s == TINYAI_OK;) {
    size_t n = e.stored_size - done < bounce_size ? static_cast<size_t>(e.stored_size - done) : bounce_size;
    s = source_->Read(e.offset + done, n, bounce, reader_->source());
    if (s == TINYAI_OK) crc = Crc32c(crc, bounce, n);
    done += n;
    *bytes_read += n;
  }
  if (st) {
    UniqueLock lock(mutex_);
    st->busy = false;
    changed_.notify_all();
  }
  TINYAI_RETURN_IF_ERROR(s);
  TINYAI_RETURN_IF_ERROR(reader_->CheckTensorChecksum(static_cast<uint32_t>(tensor), crc));
  verified_[static_cast<size_t>(tensor)].store(1, std::memory_order_release);
  return TINYAI_OK;
}

TinyAIStatus WeightCache::DecodeFrame(int32_t tensor, int32_t frame, uint8_t* dst, uint64_t* bytes_read) {
  const tmai::TensorEntry& e = reader_->tensors()[static_cast<size_t>(tensor)];
  const uint64_t* off = table_->frame_offsets(tensor);
  const uint64_t at = e.offset + off[frame];
  const size_t size = static_cast<size_t>(off[frame + 1] - off[frame]);
  uint64_t first_row = 0, row_count = 0;
  TINYAI_RETURN_IF_ERROR(ZstdFrameRows(e, static_cast<uint32_t>(frame), &first_row, &row_count));
  Staging* st = nullptr;
  {
    UniqueLock lock(mutex_);
    TINYAI_RETURN_IF_ERROR(GrabStaging(lock, &st));
  }
  const uint8_t* src = source_->InPlace(at);
  const size_t capacity = static_cast<size_t>(row_count * table_->row_bytes(tensor));
  TinyAIStatus s = TINYAI_OK;
  if (src) {  // in memory: decoded in one call
    s = st->decoder->DecodeFrame(e, static_cast<uint32_t>(frame), src, size, dst, capacity, reader_->source());
  } else {  // read a zstd slice at a time through the staging buffer
    s = st->decoder->DecodeFrameStreaming(e, static_cast<uint32_t>(frame), &WeightCache::ReadSource, this, at, size,
                                          st->buffer, staging_bytes_, dst, capacity, reader_->source());
  }
  *bytes_read += size;
  UniqueLock lock(mutex_);
  st->busy = false;
  changed_.notify_all();
  return s;
}

TinyAIStatus WeightCache::ReadSource(void* self, uint64_t offset, size_t size, uint8_t* dst) {
  const WeightCache* c = static_cast<const WeightCache*>(self);
  return c->source_->Read(offset, size, dst, c->reader_->source());
}

TinyAIStatus WeightCache::Load(int32_t entry, uint8_t* dst, const uint8_t** data, uint64_t* bytes_read) {
  if (entry < table_->slice_count()) return LoadSlice(entry, dst, data, bytes_read);
  return LoadLayer(entry - table_->slice_count(), dst, data, bytes_read);
}

TinyAIStatus WeightCache::LoadSlice(int32_t slice, uint8_t* dst, const uint8_t** data, uint64_t* bytes_read) {
  TINYAI_RETURN_IF_ERROR(LoadSliceRows(slice, dst, data, bytes_read));
  if (!table_->any_panels() || *data != dst) return TINYAI_OK;  // bytes used in place stay as they are
  return PackPanels(slice, dst);
}

TinyAIStatus WeightCache::PackPanels(int32_t slice, uint8_t* dst) {
  const RowSlice& b = table_->slice(slice);
  const tmai::LayerEntry& layer = reader_->layers()[static_cast<size_t>(b.layer)];
  Staging* st = nullptr;
  for (uint32_t t = static_cast<uint32_t>(b.tensor); t < layer.first_tensor + layer.tensor_count; ++t) {
    const int32_t ti = static_cast<int32_t>(t);
    const Span<const TensorSpan> spans = table_->spans(ti);
    if (spans.size() > 0 && spans[0].slice > slice) break;  // this tensor and the rest start after the slice
    if (!table_->panels(ti)) continue;
    const size_t rb = static_cast<size_t>(table_->row_bytes(ti)), panel = PanelBytes(rb);
    for (const TensorSpan& span : spans) {
      if (span.slice != slice) continue;
      uint64_t first = 0, end = 0;
      table_->SpanPanels(ti, span, &first, &end);
      if (first == end) continue;
      if (!st) {
        UniqueLock lock(mutex_);
        TINYAI_RETURN_IF_ERROR(GrabStaging(lock, &st));
      }
      uint8_t* at = dst + span.offset + (first - span.row_begin) * rb;
      for (uint64_t r = first; r < end; r += kPanelRows, at += panel) {
        std::memcpy(st->buffer, at, panel);
        PackPanel(st->buffer, rb, at);
      }
    }
  }
  if (st) {
    UniqueLock lock(mutex_);
    st->busy = false;
    changed_.notify_all();
  }
  return TINYAI_OK;
}

TinyAIStatus WeightCache::LoadSliceRows(int32_t slice, uint8_t* dst, const uint8_t** data, uint64_t* bytes_read) {
  const RowSlice& b = table_->slice(slice);
  if (b.transform) {
    const tmai::TensorEntry& e = reader_->tensors()[static_cast<size_t>(b.tensor)];
    const uint64_t srb = table_->stored_row_bytes(b.tensor);
    TINYAI_RETURN_IF_ERROR(VerifyStreaming(b.tensor, nullptr, 0, bytes_read));
    TINYAI_RETURN_IF_ERROR(ConvertRows(b.tensor, (b.stored_offset - e.offset) / srb, b.stored_size / srb, dst, bytes_read));
    *data = dst;
    return TINYAI_OK;
  }
  if (b.frame >= 0) {
    TINYAI_RETURN_IF_ERROR(VerifyStreaming(b.tensor, nullptr, 0, bytes_read));
    TINYAI_RETURN_IF_ERROR(DecodeFrame(b.tensor, b.frame, dst, bytes_read));
    *data = dst;
    return TINYAI_OK;
  }
  const uint64_t begin = b.stored_offset, end = b.stored_offset + b.stored_size;
  const tmai::LayerEntry& layer = reader_->layers()[static_cast<size_t>(b.layer)];
  const uint32_t last = layer.first_tensor + layer.tensor_count;
  // Tensors only partly in this slice are checked by streaming them once
  // through the slice's own buffer, before it is filled.
  const size_t bounce = static_cast<size_t>(EntryBytes(slice));
  for (uint32_t t = static_cast<uint32_t>(b.tensor); t < last; ++t) {
    const tmai::TensorEntry& e = reader_->tensors()[t];
    if (e.offset >= end) break;
    if (e.codec != TINYAI_CODEC_NONE || !NeedsVerify(static_cast<int32_t>(t))) continue;
    if (e.offset < begin || e.offset + e.stored_size > end) {
      TINYAI_RETURN_IF_ERROR(VerifyStreaming(static_cast<int32_t>(t), dst, bounce, bytes_read));
    }
  }
  const uint8_t* p = source_->InPlace(begin);
  if (!p) {
    TINYAI_RETURN_IF_ERROR(source_->Read(begin, static_cast<size_t>(b.stored_size), dst, reader_->source()));
    p = dst;
  }
  *bytes_read += b.stored_size;
  for (uint32_t t = static_cast<uint32_t>(b.tensor); t < last; ++t) {
    const tmai::TensorEntry& e = reader_->tensors()[t];
    if (e.offset >= end) break;
    if (e.codec != TINYAI_CODEC_NONE || !NeedsVerify(static_cast<int32_t>(t))) continue;
    if (e.offset >= begin && e.offset + e.stored_size <= end) {
      TINYAI_RETURN_IF_ERROR(VerifyInMemory(static_cast<int32_t>(t), p + (e.offset - begin)));
    }
  }
  *data = p;
  return TINYAI_OK;
}

TinyAIStatus WeightCache::LoadLayer(int32_t layer, uint8_t* dst, const uint8_t** data, uint64_t* bytes_read) {
  const tmai::LayerEntry& l = reader_->layers()[static_cast<size_t>(layer)];
  const int32_t entry = LayerEntry(layer);
  if (InPlace(entry)) {
    const uint8_t* p = source_->InPlace(l.offset);
    for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
      const tmai::TensorEntry& e = reader_->tensors()[t];
      if (NeedsVerify(static_cast<int32_t>(t))) TINYAI_RETURN_IF_ERROR(VerifyInMemory(static_cast<int32_t>(t), p + (e.offset - l.offset)));
    }
    *bytes_read += l.stored_size;
    *data = p;
    return TINYAI_OK;
  }
  for (uint32_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
    const tmai::TensorEntry& e = reader_->tensors()[t];
    uint8_t* out = dst + e.decoded_offset;
    if (table_->transformed(static_cast<int32_t>(t))) {
      TINYAI_RETURN_IF_ERROR(VerifyStreaming(static_cast<int32_t>(t), nullptr, 0, bytes_read));
      TINYAI_RETURN_IF_ERROR(ConvertRows(static_cast<int32_t>(t), 0, table_->rows(static_cast<int32_t>(t)), out, bytes_read));
    } else if (e.codec == TINYAI_CODEC_NONE) {
      TINYAI_RETURN_IF_ERROR(source_->Read(e.offset, static_cast<size_t>(e.stored_size), out, reader_->source()));
      *bytes_read += e.stored_size;
      if (NeedsVerify(static_cast<int32_t>(t))) TINYAI_RETURN_IF_ERROR(VerifyInMemory(static_cast<int32_t>(t), out));
    } else if (e.codec == TINYAI_CODEC_ZSTD) {
      TINYAI_RETURN_IF_ERROR(VerifyStreaming(static_cast<int32_t>(t), nullptr, 0, bytes_read));
      const uint32_t frames = ZstdFrameCount(e);
      const uint64_t row_bytes = table_->row_bytes(static_cast<int32_t>(t));
      for (uint32_t f = 0; f < frames; ++f) {
        uint64_t first_row = 0, rows = 0;
        TINYAI_RETURN_IF_ERROR(ZstdFrameRows(e, f, &first_row, &rows));
        TINYAI_RETURN_IF_ERROR(DecodeFrame(static_cast<int32_t>(t), static_cast<int32_t>(f), out + first_row * row_bytes,
                                           bytes_read));
      }
    } else {
      return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': tensor '%s' uses codec %s, which this build cannot load",
                      reader_->source(), e.name, tinyaiCodecName(static_cast<TinyAICodec>(e.codec)));
    }
  }
  *data = dst;
  return TINYAI_OK;
}

TinyAIStatus WeightCache::ConvertRows(int32_t tensor, uint64_t first_row, uint64_t rows, uint8_t* dst,
                                      uint64_t* bytes_read) {
  const tmai::TensorEntry& stored = reader_->file_tensors()[static_cast<size_t>(tensor)];
  const tmai::TensorEntry& e = reader_->tensors()[static_cast<size_t>(tensor)];
  const size_t cols = static_cast<size_t>(e.shape[e.ndims - 1]);
  const uint64_t srb = table_->stored_row_bytes(tensor), rb = table_->row_bytes(tensor);
  const RowDecoder decode =
      stored.dtype == TINYAI_DTYPE_F32 || !transform_.decoder ? nullptr : transform_.decoder(stored.dtype);
  if ((stored.dtype != TINYAI_DTYPE_F32 && decode == nullptr) || !transform_.encode_rows) {
    return SetError(TINYAI_ERR_INTERNAL, "'%s': tensor '%s' is %s, which cannot be converted", reader_->source(),
                    stored.name, tinyaiDTypeName(static_cast<TinyAIDType>(stored.dtype)));
  }
  Staging* st = nullptr;
  {
    UniqueLock lock(mutex_);
    TINYAI_RETURN_IF_ERROR(GrabStaging(lock, &st));
  }
  // A run of stored rows, then the same rows as fp32, 64-aligned.
  uint64_t chunk = (staging_bytes_ - kDataAlignmentSlack) / (srb + 4 * cols);
  if (chunk == 0) chunk = 1;  // Init sized the buffer for one row
  TinyAIStatus s = TINYAI_OK;
  for (uint64_t r = 0; r < rows && s == TINYAI_OK;) {
    const uint64_t n = rows - r < chunk ? rows - r : chunk;
    const uint64_t at = stored.offset + (first_row + r) * srb;
    const uint8_t* p = source_->InPlace(at);
    if (!p) {
      s = source_->Read(at, static_cast<size_t>(n * srb), st->buffer, reader_->source());
      if (s != TINYAI_OK) break;
      p = st->buffer;
    }
    *bytes_read += n * srb;
    const float* x = reinterpret_cast<const float*>(p);
    if (decode) {
      float* f = reinterpret_cast<float*>(st->buffer + AlignUp(chunk * srb, kDataAlignmentSlack));
      for (uint64_t i = 0; i < n; ++i) decode(p + i * srb, f + i * cols, cols);
      x = f;
    }
    s = transform_.encode_rows(e.dtype, x, static_cast<size_t>(n), cols, dst + r * rb,
                               calibration_ ? calibration_(calibration_owner_, tensor) : TensorCalibration());
    if (s != TINYAI_OK) {
      char what[160];
      std::snprintf(what, sizeof what, "'%s': converting tensor '%s' to %s: ", reader_->source(), e.name,
                    tinyaiDTypeName(static_cast<TinyAIDType>(e.dtype)));
      s = AddErrorContext(s, "%s", what);
    }
    r += n;
  }
  UniqueLock lock(mutex_);
  st->busy = false;
  changed_.notify_all();
  return s;
}

}  // namespace tinyai
