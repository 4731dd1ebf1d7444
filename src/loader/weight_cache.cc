#include "loader/weight_cache.h"

#include <cstdio>

#include "common/format.h"
#include "common/status.h"

namespace tinyai {

WeightCache::~WeightCache() { Shutdown(); }

TinyAIStatus WeightCache::Init(const TmaiReader* reader, const WeightSource* source, const RowSliceTable* table,
                               const TinyAIMmapConfig& config, const RowTransform& transform) {
  reader_ = reader;
  table_ = table;
  config_ = config;
  capacity_ = config.maxCacheSize;
  stats_ = CacheStats();
  resident_ = tick_ = 0;
  loading_ = 0;
  TINYAI_RETURN_IF_ERROR(entries_.Allocate(static_cast<size_t>(table->slice_count()) + reader->layers().size(),
                                           "weight cache entries"));
  TINYAI_RETURN_IF_ERROR(arena_.Init(reader, source, table));
  for (size_t i = 0; i < entries_.size(); ++i) {
    entries_[i].in_place = arena_.EntryBytes(static_cast<int32_t>(i)) == 0;
  }
  source_ = source;
  direct_base_ = source->direct_bytes();
  weight_bytes_ = 0;
  for (size_t i = 0; i < reader->layers().size(); ++i) {
    weight_bytes_ += arena_.EntryBytes(table->slice_count() + static_cast<int32_t>(i));
  }
  ChooseReads();
  TINYAI_RETURN_IF_ERROR(loader_.Init(reader, source, table, config, transform));
  if (config.prefetchEnabled && config.prefetchThreads != 0) {
    const int threads = config.prefetchThreads == TINYAI_PREFETCH_THREADS_AUTO ? kAutoPrefetchMax : config.prefetchThreads;
    TINYAI_RETURN_IF_ERROR(workers_.Start(threads, &WeightCache::PrefetchEntry, this));
    ChooseReads();
  }
  return TINYAI_OK;
}

void WeightCache::ChooseReads() {
  // Under a cap below the weights, evicted bytes come back from storage
  // every cycle: the OS's cache of them would only copy them twice and hold
  // memory the limit charges.
  const bool streams = capacity_ != 0 && capacity_ < weight_bytes_;
  const int mode = config_.directReads;
  source_->UseDirect(mode > 0 || (mode == 0 && streams));
  // The automatic prefetch count: one loader while the weights fit; while
  // they stream, enough for kAutoPrefetchInFlight bytes of reads in flight
  // (storage answers several reads at once faster than one at a time).
  if (config_.prefetchThreads == TINYAI_PREFETCH_THREADS_AUTO && workers_.running()) {
    int n = 1;
    if (streams) {
      const uint64_t slot = arena_.slot_bytes() > 0 ? arena_.slot_bytes() : 1;
      const uint64_t want = (kAutoPrefetchInFlight + slot - 1) / slot;
      n = want > static_cast<uint64_t>(kAutoPrefetchMax) ? kAutoPrefetchMax : static_cast<int>(want);
    }
    workers_.SetActive(n);
  }
}

void WeightCache::Shutdown() {
  // Workers skip what is still queued and exit; a worker mid-load finishes
  // that load first.
  workers_.Stop();
  arena_.Shutdown();
  loader_.Shutdown();
  entries_ = Array<Entry>();
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
    if (e.state != kResident || e.pins > 0 || e.in_place) continue;
    const int32_t id = static_cast<int32_t>(i);
    if (!allow_small && IsSmall(id)) continue;  // not worth evicting, unless nothing else is left
    double s = Score(id);
    if (below >= 0.0 && s >= below) continue;
    if (victim < 0 || s < best || (s == best && arena_.bytes(id) > arena_.bytes(victim))) {
      victim = id;
      best = s;
    }
  }
  return victim;
}

void WeightCache::Evict(int32_t entry) {
  Entry& e = entries_[static_cast<size_t>(entry)];
  resident_ -= arena_.bytes(entry);
  arena_.Free(entry);
  e.state = kEmpty;
  e.data = nullptr;
  e.by_prefetch = false;
  e.use.pending = false;
  ++stats_.evictions;
}

void WeightCache::NoteHeld() {
  const uint64_t held = arena_.held();
  if (held > stats_.peak_held_bytes) stats_.peak_held_bytes = held;
  for (PeakWatch* w = watches_; w; w = w->next) {
    if (held > w->peak) w->peak = held;
  }
}

void WeightCache::AddPeakWatch(PeakWatch* watch) {
  LockGuard lock(mutex_);
  watch->peak = arena_.held();
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
  watch->peak = arena_.held();
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
    tinyai::Format(out, size, "row slice %d (of tensor '%s')", entry, reader.tensors()[static_cast<size_t>(b.tensor)].name);
  } else {
    const tmai::LayerEntry& l = reader.layers()[static_cast<size_t>(entry - table.slice_count())];
    if (l.kind == TINYAI_LAYER_TRANSFORMER) {
      tinyai::Format(out, size, "layer %d ('block.%d')", entry - table.slice_count(), l.block_index);
    } else {
      tinyai::Format(out, size, "layer %d ('%s')", entry - table.slice_count(),
                    tinyaiLayerKindName(static_cast<TinyAILayerKind>(l.kind)));
    }
  }
}

}  // namespace

TinyAIStatus WeightCache::Reserve(UniqueLock& lock, int32_t entry, bool prefetch, bool* room) {
  (void)lock;
  *room = true;
  Entry& e = entries_[static_cast<size_t>(entry)];
  const uint64_t need = arena_.EntryBytes(entry);
  if (need == 0) return TINYAI_OK;
  if (entry < table_->slice_count() && !arena_.region_decided()) arena_.DecideRegion(capacity_);
  // A layer's buffer shares the cap with the region, which then may hold no
  // more than its slices do.
  if (entry >= table_->slice_count() && capacity_ != 0) arena_.EndHugeFaults();
  const bool in_region = arena_.has_region() && entry < table_->slice_count();
  const bool slot = !in_region && entry < table_->slice_count() && need == arena_.slot_bytes();
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
    if (slot && arena_.TakeFreeSlot(entry)) return TINYAI_OK;
    if (capacity_ == 0 || arena_.held() + need <= capacity_) {
      if (in_region) {
        arena_.PlaceInRegion(entry, need);
      } else {
        TINYAI_RETURN_IF_ERROR(arena_.Allocate(entry, need, reader_->source()));
      }
      NoteHeld();
      return TINYAI_OK;
    }
    if (arena_.ReleaseFreeSlot()) continue;
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
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].pins > 0) pinned += arena_.bytes(static_cast<int32_t>(i));
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
    if (workers_.running()) {
      e.queued = true;
      if (!workers_.Enqueue(entry)) e.queued = false;  // the queue could not grow: drop it
      return TINYAI_OK;
    }
  }
  PrefetchLoad(entry);
  return TINYAI_OK;
}

void WeightCache::DropQueuedPrefetches() {
  LockGuard lock(mutex_);
  for (Entry& e : entries_) {
    if (!e.queued) continue;
    e.queued = false;
    ++stats_.prefetch_dropped;
  }
}

void WeightCache::PrefetchLoad(int32_t entry, bool queued) {
  UniqueLock lock(mutex_);
  Entry& e = entries_[static_cast<size_t>(entry)];
  if (queued && !e.queued) return;  // dropped while it waited
  e.queued = false;
  if (workers_.stopping() || e.state != kEmpty) return;
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
  uint8_t* dst = arena_.buffer(entry);
  const size_t dst_bytes = static_cast<size_t>(arena_.bytes(entry));
  const uint8_t* loaded = nullptr;
  uint64_t read = 0;
#if TINYAI_WITH_THREADS
  lock.unlock();
#endif
  TinyAIStatus s = loader_.Load(entry, dst, dst_bytes, &loaded, &read);
#if TINYAI_WITH_THREADS
  lock.lock();
#endif
  --loading_;
  stats_.bytes_read += read;
  if (s != TINYAI_OK) {
    arena_.Free(entry);
    e.state = kEmpty;
    e.by_prefetch = false;
    return s;
  }
  e.data = loaded;
  e.state = kResident;
  resident_ += arena_.bytes(entry);
  stats_.bytes_loaded += DecodedSize(entry);
  return TINYAI_OK;
}

void WeightCache::PrefetchEntry(void* self, int32_t entry) {
  static_cast<WeightCache*>(self)->PrefetchLoad(entry, true);
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
  ChooseReads();
  if (bytes == 0) return TINYAI_OK;
  arena_.KeepRegionUnderCap(capacity_);
  if (carve) {
    const TinyAIStatus carved = arena_.CarveSlots(bytes);
    NoteHeld();
    TINYAI_RETURN_IF_ERROR(carved);
  }
  while (arena_.held() > capacity_) {
    if (arena_.ReleaseFreeSlot()) continue;
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
                      static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(arena_.held()));
    }
    Evict(victim);
  }
  return TINYAI_OK;
}

uint64_t WeightCache::held_bytes() const {
  LockGuard lock(mutex_);
  return arena_.held();
}

CacheStats WeightCache::stats() const {
  LockGuard lock(mutex_);
  CacheStats s = stats_;
  s.held_bytes = arena_.held();
  s.resident_bytes = resident_;
  s.capacity = capacity_;
  s.bytes_read_direct = source_->direct_bytes() - direct_base_;
  s.prefetch_workers = workers_.running() ? static_cast<uint64_t>(workers_.active()) : 0;
  return s;
}

void WeightCache::ResetStats() {
  LockGuard lock(mutex_);
  stats_ = CacheStats();
  stats_.peak_held_bytes = arena_.held();
  direct_base_ = source_->direct_bytes();
}

uint64_t WeightCache::overhead_bytes(size_t staging_sets) const {
  return entries_.size() * sizeof(Entry) + arena_.overhead_bytes() + loader_.overhead_bytes(staging_sets);
}

uint64_t WeightCache::EntryBytes(int32_t entry) const { return arena_.EntryBytes(entry); }

bool WeightCache::CheckInvariants() const {
  LockGuard lock(mutex_);
  if (capacity_ > 0 && arena_.held() > capacity_) return false;
  uint64_t resident = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (e.state == kResident) resident += arena_.bytes(static_cast<int32_t>(i));
    if (e.pins < 0 || (e.pins > 0 && e.state != kResident)) return false;
  }
  return arena_.Consistent() && resident == resident_;
}

}  // namespace tinyai
