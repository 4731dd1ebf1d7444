// The bare-metal port: no file system, no threads, no heap. Every allocation
// comes from the caller's static arena (tinyaiSetStaticArena), models come
// from memory or a read callback, and the clock is the caller's.
//
// The arena is one run of blocks from its start to the top, each a 16-byte
// header (its size and whether it is free) followed by its bytes. An
// allocation takes the first free block it fits (splitting off the rest, and
// any gap its alignment leaves in front), else grows the top; a free merges
// with free neighbours and lowers the top when it ends there. Deterministic:
// the same calls in the same order reach the same high-water mark, which is
// what tinyaiEstimateStaticArena measures.
#include <cstdio>
#include <cstring>

#include "common/format.h"
#include "common/status.h"
#include "port/port.h"

// Under AddressSanitizer the arena is poisoned except for the bytes of live
// allocations, so an overrun into a header or a free block is reported as
// it would be on the heap.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TINYAI_ARENA_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TINYAI_ARENA_ASAN 1
#endif
#if TINYAI_ARENA_ASAN
#include <sanitizer/asan_interface.h>
#define TINYAI_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define TINYAI_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define TINYAI_POISON(p, n) ((void)(p), (void)(n))
#define TINYAI_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace tinyai {
namespace port {
namespace {

constexpr size_t kGranule = 16;  // block sizes and addresses are multiples of this
constexpr size_t kHeader = 16;

struct Block {
  size_t size;  // bytes of the block, header included; a multiple of kGranule
  size_t free;  // 1 when free
};

struct Arena {
  unsigned char* base = nullptr;
  size_t size = 0;
  size_t top = 0;  // offset of the end of the last block
  ArenaStats stats;
};
Arena g_arena;
uint64_t (*g_clock)(void) = nullptr;

size_t RoundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

// Headers are read and written only through these (poisoned in between).
Block Get(size_t offset) {
  Block b;
  TINYAI_UNPOISON(g_arena.base + offset, kHeader);
  std::memcpy(&b, g_arena.base + offset, sizeof b);
  TINYAI_POISON(g_arena.base + offset, kHeader);
  return b;
}
void Put(size_t offset, size_t size, bool free) {
  const Block b = {size, free ? size_t{1} : size_t{0}};
  TINYAI_UNPOISON(g_arena.base + offset, kHeader);
  std::memcpy(g_arena.base + offset, &b, sizeof b);
  TINYAI_POISON(g_arena.base + offset, kHeader);
}

// Where a payload of alignment align starts in a block at offset: the first
// aligned address at least a header in.
size_t PayloadOffset(size_t offset, size_t align) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(g_arena.base);
  const uintptr_t p = RoundUp(base + offset + kHeader, align);
  return static_cast<size_t>(p - base);
}

// Makes [offset, offset+bytes) a block of its own, taken, out of the free
// block at from (of from_size bytes, reaching at least offset+bytes); the
// gap in front and the rest behind stay free.
void Take(size_t from, size_t from_size, size_t offset, size_t bytes) {
  if (offset > from) Put(from, offset - from, true);
  const size_t end = offset + bytes;
  if (end < from + from_size) Put(end, from + from_size - end, true);
  Put(offset, bytes, false);
}

// The payload of a new block of size requested bytes at offset.
void* Payload(size_t offset, size_t size) {
  unsigned char* p = g_arena.base + offset + kHeader;
  TINYAI_UNPOISON(p, size);
  return p;
}

void* Allocate(size_t align, size_t size) {
  if (!g_arena.base || size == 0) return nullptr;
  if (align < kGranule) align = kGranule;
  if (size > g_arena.size) {
    ++g_arena.stats.failures;
    return nullptr;
  }
  const size_t payload = RoundUp(size, kGranule);
  // First fit among the free blocks.
  size_t last = 0;
  for (size_t off = 0; off < g_arena.top;) {
    const Block b = Get(off);
    last = off;
    if (b.free) {
      const size_t start = PayloadOffset(off, align) - kHeader;
      if (start + kHeader + payload <= off + b.size) {
        Take(off, b.size, start, kHeader + payload);
        g_arena.stats.used += kHeader + payload;
        ++g_arena.stats.allocations;
        return Payload(start, size);
      }
    }
    off += b.size;
  }
  // Grow the top (into a free last block if there is one).
  size_t from = g_arena.top;
  if (g_arena.top > 0 && Get(last).free) from = last;
  const size_t start = PayloadOffset(from, align) - kHeader;
  const size_t end = start + kHeader + payload;
  if (end > g_arena.size || end < start) {
    ++g_arena.stats.failures;
    return nullptr;
  }
  if (start > from) Put(from, start - from, true);
  Put(start, kHeader + payload, false);
  g_arena.top = end;
  if (end > g_arena.stats.peak) g_arena.stats.peak = end;
  g_arena.stats.used += kHeader + payload;
  ++g_arena.stats.allocations;
  return Payload(start, size);
}

void Release(void* p) {
  if (!p || !g_arena.base) return;
  const size_t offset = static_cast<size_t>(static_cast<unsigned char*>(p) - g_arena.base) - kHeader;
  const size_t size = Get(offset).size;
  Put(offset, size, true);
  TINYAI_POISON(g_arena.base + offset + kHeader, size - kHeader);
  g_arena.stats.used -= size;
  // Merge runs of free blocks; the top comes down over a free last block.
  size_t last = 0;
  bool last_free = false;
  for (size_t off = 0; off < g_arena.top;) {
    Block b = Get(off);
    if (b.free) {
      size_t next = off + b.size;
      while (next < g_arena.top && Get(next).free) next += Get(next).size;
      if (next - off != b.size) Put(off, next - off, true);
      b.size = next - off;
    }
    last = off;
    last_free = b.free != 0;
    off += b.size;
  }
  if (g_arena.top > 0 && last_free) g_arena.top = last;
}

}  // namespace

TinyAIStatus MapFile(const char* path, MappedFile* out) {
  *out = MappedFile();
  return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': the bare-metal port has no file system; open the model from "
                  "memory or through a read callback", path);
}
void UnmapFile(MappedFile* file) { *file = MappedFile(); }

TinyAIStatus OpenFile(const char* path, File* out) {
  *out = File();
  return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': the bare-metal port has no file system; open the model from "
                  "memory or through a read callback", path);
}
void CloseFile(File* file) { *file = File(); }

TinyAIStatus ReadAt(const File& file, uint64_t offset, void* dst, size_t size, const char* source) {
  return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': the bare-metal port has no file system", source);
}

bool EnableDirectReads(const char*, File*) { return false; }
TinyAIStatus ReadDirect(const File& file, uint64_t offset, void* dst, size_t size, const char* source) {
  return ReadAt(file, offset, dst, size, source);
}

TinyAIStatus BeginOutput(const char* path, OutputFile* out) {
  *out = OutputFile();
  return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': the bare-metal port has no file system; save through a write "
                  "callback (tinyaiSaveMappedModelTo)", path ? path : "(null)");
}
TinyAIStatus WriteAt(const File& file, uint64_t offset, const void* src, size_t size, const char* name) {
  return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': the bare-metal port has no file system", name);
}
TinyAIStatus SetOutputSize(const OutputFile& out, uint64_t size) {
  return SetError(TINYAI_ERR_UNSUPPORTED, "the bare-metal port has no file system");
}
TinyAIStatus CommitOutput(OutputFile* out) {
  *out = OutputFile();
  return SetError(TINYAI_ERR_UNSUPPORTED, "the bare-metal port has no file system");
}
void AbortOutput(OutputFile* out) { *out = OutputFile(); }
bool IsSameFile(const File& file, const char* path) { return false; }

void AdviseRange(const void* data, size_t size, Advice advice) {}

size_t PageSize() { return kGranule; }
int CpuCount() { return 1; }
uint64_t MonotonicNanos() { return g_clock ? g_clock() : 0; }

// The arena is the whole of memory: its high-water mark is the peak.
uint64_t PeakRssBytes() { return g_arena.stats.peak; }
uint64_t CurrentRssBytes() { return g_arena.stats.used; }
void ReadProcessMemory(ProcessMemory* out) {
  *out = ProcessMemory();
  if (!g_arena.base) return;
  out->known = true;
  out->rss = out->anon = g_arena.stats.used;
  out->peak = g_arena.stats.peak;
}

void* AlignedAlloc(size_t alignment, size_t size) { return Allocate(alignment, size); }
void AlignedFree(void* p) { Release(p); }
void* PageAlloc(size_t size) { return Allocate(kGranule, size); }

// No virtual memory: no huge pages (the weight cache takes slots).
size_t HugePageSize() { return 0; }
void* HugeRegionReserve(size_t size) { return nullptr; }
void HugeRegionDiscard(void* p, size_t size) {}
void HugeRegionNoHuge(void* p, size_t size) {}
void HugeRegionFree(void* p, size_t size) {}
void PageFree(void* p, size_t size) { Release(p); }

void DescribeMemory(char* out, size_t capacity) {
  if (capacity == 0) return;
  if (!g_arena.base) {
    tinyai::Format(out, capacity, " (no static arena: call tinyaiSetStaticArena first)");
    return;
  }
  size_t largest = g_arena.size - g_arena.top;
  for (size_t off = 0; off < g_arena.top;) {
    const Block b = Get(off);
    if (b.free && b.size > largest) largest = b.size;
    off += b.size;
  }
  tinyai::Format(out, capacity, " (static arena of %zu bytes: %zu in use, largest free block %zu)",
                g_arena.size, g_arena.stats.used, largest > kHeader ? largest - kHeader : 0);
}

TinyAIStatus SetArena(void* base, size_t size) {
  if (g_arena.base && g_arena.stats.used != 0) {
    return SetError(TINYAI_ERR_MISUSE, "tinyaiSetStaticArena: the current arena still holds %zu bytes; close "
                    "the models and destroy the LLMs first", g_arena.stats.used);
  }
  if (!base && size == 0) {  // detach
    if (g_arena.base) TINYAI_UNPOISON(g_arena.base, g_arena.size);
    g_arena = Arena();
    return TINYAI_OK;
  }
  if (!base) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiSetStaticArena: arena is NULL");
  if (reinterpret_cast<uintptr_t>(base) % kGranule != 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiSetStaticArena: arena %p is not %zu-byte aligned", base,
                    kGranule);
  }
  if (size < 64) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiSetStaticArena: %zu bytes is below 64", size);
  if (g_arena.base) TINYAI_UNPOISON(g_arena.base, g_arena.size);
  g_arena = Arena();
  g_arena.base = static_cast<unsigned char*>(base);
  g_arena.size = size / kGranule * kGranule;
  TINYAI_POISON(g_arena.base, g_arena.size);
  g_arena.stats.size = size;
  return TINYAI_OK;
}

TinyAIStatus GetArenaStats(ArenaStats* out) {
  *out = g_arena.stats;
  return g_arena.base ? TINYAI_OK : TINYAI_ERR_MISUSE;
}

void SetArenaPeak(size_t peak) { g_arena.stats.peak = peak; }
size_t ArenaTop() { return g_arena.top; }

TinyAIStatus SetClock(uint64_t (*now)(void)) {
  g_clock = now;
  return TINYAI_OK;
}

// No OS to ask: the caller's arena is the bound (tinyaiSetStaticArena).
TinyAIStatus ReadMemoryBounds(const char* root, MemoryBounds* out) { return TINYAI_ERR_UNSUPPORTED; }

TinyAIStatus StartThread(Thread* thread, void (*fn)(void*), void* arg) {
  return SetError(TINYAI_ERR_UNSUPPORTED, "the bare-metal port has no threads");
}
void JoinThread(Thread* thread) {}

}  // namespace port
}  // namespace tinyai
