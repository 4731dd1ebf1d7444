#include "common/ledger.h"

#include <cstring>

#include "common/config.h"
#include "common/seam.h"

#if TINYAI_WITH_THREADS
#include <atomic>
#endif

namespace tinyai {
namespace {

#if TINYAI_WITH_THREADS
using Count = std::atomic<uint64_t>;
inline uint64_t Load(const Count& c) { return c.load(std::memory_order_relaxed); }
inline uint64_t Add(Count* c, uint64_t v) { return c->fetch_add(v, std::memory_order_relaxed) + v; }
inline void Sub(Count* c, uint64_t v) { c->fetch_sub(v, std::memory_order_relaxed); }
inline void Store(Count* c, uint64_t v) { c->store(v, std::memory_order_relaxed); }
inline void Raise(Count* c, uint64_t v) {
  uint64_t seen = c->load(std::memory_order_relaxed);
  while (seen < v && !c->compare_exchange_weak(seen, v, std::memory_order_relaxed)) {
  }
}
#else
using Count = uint64_t;
inline uint64_t Load(const Count& c) { return c; }
inline uint64_t Add(Count* c, uint64_t v) { return *c += v; }
inline void Sub(Count* c, uint64_t v) { *c -= v; }
inline void Store(Count* c, uint64_t v) { *c = v; }
inline void Raise(Count* c, uint64_t v) {
  if (*c < v) *c = v;
}
#endif

struct Ledger {
  Count bytes[kMemCategories];
  Count peak[kMemCategories];
  Count total;
  Count peak_total;
  Count stage_peak;
  Count headers;
  Count allocations;
  Count kv_touched;
};
Ledger g_ledger;  // zero-initialized: static storage

// The observer: set while no run is in flight (tinyaiSetMemoryObserver's
// contract), so read without a lock.
TinyAIMemoryObserver g_observer = nullptr;
void* g_observer_user = nullptr;
int32_t g_every_tokens = 0;

TINYAI_THREAD_LOCAL MemCategory t_category = kMemRuntime;
TINYAI_THREAD_LOCAL int64_t t_bytes = 0;

// What sits before each allocation (within the header's bytes, at its end).
struct Header {
  uint64_t size;      // the bytes taken from the port, header included
  uint32_t offset;    // from the port's pointer to the caller's
  uint8_t category;
  uint8_t pad[3];
};
static_assert(sizeof(Header) == 16, "the header fits the least alignment");

void Take(MemCategory c, uint64_t bytes) {
  Raise(&g_ledger.peak[c], Add(&g_ledger.bytes[c], bytes));
  const uint64_t total = Add(&g_ledger.total, bytes);
  Raise(&g_ledger.peak_total, total);
  Raise(&g_ledger.stage_peak, total);
}

void Give(MemCategory c, uint64_t bytes) {
  Sub(&g_ledger.bytes[c], bytes);
  Sub(&g_ledger.total, bytes);
}

}  // namespace

MemScope::MemScope(MemCategory category) : previous_(t_category) { t_category = category; }
MemScope::~MemScope() { t_category = previous_; }

MemCategory CurrentMemCategory() { return t_category; }

int64_t LedgerThreadBytes() { return t_bytes; }

void* LedgerAlloc(size_t alignment, size_t size) {
  const size_t head = alignment > sizeof(Header) ? alignment : sizeof(Header);
  if (size > SIZE_MAX - head) return nullptr;
  unsigned char* base = static_cast<unsigned char*>(port::AlignedAlloc(alignment, size + head));
  if (!base) return nullptr;
  unsigned char* user = base + head;
  Header h;
  std::memset(&h, 0, sizeof h);
  h.size = static_cast<uint64_t>(size + head);
  h.offset = static_cast<uint32_t>(head);
  h.category = t_category;
  std::memcpy(user - sizeof h, &h, sizeof h);
  Take(static_cast<MemCategory>(h.category), h.size);
  t_bytes += static_cast<int64_t>(h.size);
  Add(&g_ledger.headers, head);
  Add(&g_ledger.allocations, 1);
  return user;
}

void LedgerFree(void* p) {
  if (!p) return;
  unsigned char* user = static_cast<unsigned char*>(p);
  Header h;
  std::memcpy(&h, user - sizeof h, sizeof h);
  Give(static_cast<MemCategory>(h.category < kMemCategories ? h.category : kMemRuntime), h.size);
  t_bytes -= static_cast<int64_t>(h.size);
  Sub(&g_ledger.headers, h.offset);
  Sub(&g_ledger.allocations, 1);
  port::AlignedFree(user - h.offset);
}

void LedgerPages(MemCategory category, uint64_t bytes, bool add) {
  if (add) {
    Take(category, bytes);
  } else {
    Give(category, bytes);
  }
}

void LedgerKvTouched(int64_t delta) {
  if (delta >= 0) {
    Add(&g_ledger.kv_touched, static_cast<uint64_t>(delta));
  } else {
    Sub(&g_ledger.kv_touched, static_cast<uint64_t>(-delta));
  }
}

void ReadLedger(LedgerCounts* out) {
  for (int c = 0; c < kMemCategories; ++c) {
    out->bytes[c] = Load(g_ledger.bytes[c]);
    out->peak[c] = Load(g_ledger.peak[c]);
  }
  out->total = Load(g_ledger.total);
  out->peak_total = Load(g_ledger.peak_total);
  out->stage_peak = Load(g_ledger.stage_peak);
  out->header_bytes = Load(g_ledger.headers);
  out->allocations = Load(g_ledger.allocations);
  out->kv_touched = Load(g_ledger.kv_touched);
}

void ResetLedgerPeaks() {
  for (int c = 0; c < kMemCategories; ++c) Store(&g_ledger.peak[c], Load(g_ledger.bytes[c]));
  Store(&g_ledger.peak_total, Load(g_ledger.total));
  Store(&g_ledger.stage_peak, Load(g_ledger.total));
}

void FillMemorySnapshot(TinyAIMemoryStage stage, int64_t tokens, TinyAIMemorySnapshot* out) {
  LedgerCounts c;
  ReadLedger(&c);
  std::memset(out, 0, sizeof *out);
  out->structSize = sizeof *out;
  out->stage = stage;
  out->stageName = tinyaiMemoryStageName(stage);
  out->tokens = tokens;
  for (int i = 0; i < kMemCategories; ++i) {
    out->bytes[i] = c.bytes[i];
    out->peakBytes[i] = c.peak[i];
  }
  out->totalBytes = c.total;
  out->peakTotalBytes = c.peak_total;
  out->stagePeakBytes = c.stage_peak;
  out->headerBytes = c.header_bytes;
  out->allocations = c.allocations;
  out->kvReservedBytes = c.bytes[kMemKv];
  out->kvTouchedBytes = c.kv_touched < c.bytes[kMemKv] ? c.kv_touched : c.bytes[kMemKv];
  port::ProcessMemory pm;
  port::ReadProcessMemory(&pm);
  out->rssKnown = pm.known ? 1 : 0;
  out->rssBytes = pm.rss;
  out->rssAnonBytes = pm.anon;
  out->rssFileBytes = pm.file;
  out->peakRssBytes = pm.peak;
}

void LedgerMark(TinyAIMemoryStage stage, int64_t tokens) {
  TinyAIMemoryObserver observer = g_observer;
  if (observer) {
    TinyAIMemorySnapshot s;
    FillMemorySnapshot(stage, tokens, &s);
    observer(&s, g_observer_user);
  }
  Store(&g_ledger.stage_peak, Load(g_ledger.total));
}

void LedgerTokens(int64_t previous, int64_t position) {
  const int32_t every = g_every_tokens;
  if (!g_observer || every <= 0 || position <= previous) return;
  if (position / every != previous / every) LedgerMark(TINYAI_MEMORY_STAGE_TOKENS, position);
}

void SetLedgerObserver(TinyAIMemoryObserver observer, void* user, int32_t every_tokens) {
  g_observer = observer;
  g_observer_user = user;
  g_every_tokens = every_tokens;
  ResetLedgerPeaks();
}

}  // namespace tinyai

extern "C" {

const char* tinyaiMemoryCategoryName(TinyAIMemoryCategory category) {
  static const char* const kNames[] = {"runtime", "model", "weights", "kv", "activations", "scratch", "text"};
  const int i = static_cast<int>(category);
  return i >= 0 && i < TINYAI_MEMORY_CATEGORY_COUNT ? kNames[i] : "?";
}

const char* tinyaiMemoryStageName(TinyAIMemoryStage stage) {
  static const char* const kNames[] = {"now", "open", "index", "plan", "warmup", "first_token", "tokens", "close"};
  const int i = static_cast<int>(stage);
  return i >= 0 && i < TINYAI_MEMORY_STAGE_COUNT ? kNames[i] : "?";
}

}  // extern "C"
