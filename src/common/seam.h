// What common itself needs of the platform: memory (common/memory.h,
// common/array.h), threads and a clock (common/thread_pool.h). Declared
// here, at the bottom of the core, so that common depends on nothing but
// itself and the public headers; defined by the port, like the rest of the
// platform seam (src/port/port.h, which includes this header: a port
// implements both). Link-time functions, as every port function is.
#ifndef TINYAI_COMMON_SEAM_H_
#define TINYAI_COMMON_SEAM_H_

#include <cstddef>
#include <cstdint>

#include "tinyai/status.h"

namespace tinyai {
namespace port {

// Every allocation of the core: NULL on failure; AlignedFree takes NULL.
void* AlignedAlloc(size_t alignment, size_t size);
void AlignedFree(void* p);

// Appends to an out-of-memory message what the port knows of its memory,
// e.g. " (static arena: 1024 of 4096 bytes free, ...)"; "" when nothing.
void DescribeMemory(char* out, size_t capacity);

// The process's memory as the OS sees it (the recording allocator's
// snapshots put it beside TinyAI's account). known false: the port cannot
// tell (the fields are 0). A port without an OS reports its arena.
struct ProcessMemory {
  bool known = false;
  uint64_t rss = 0;   // resident now
  uint64_t anon = 0;  // of which anonymous
  uint64_t file = 0;  // of which file-backed (and shared memory)
  uint64_t peak = 0;  // the resident set's peak
};
void ReadProcessMemory(ProcessMemory* out);

int CpuCount();
uint64_t MonotonicNanos();

// Threads (ports without threads return TINYAI_ERR_UNSUPPORTED).
struct Thread {
  uintptr_t handle = 0;
  bool started = false;
};
TinyAIStatus StartThread(Thread* thread, void (*fn)(void*), void* arg);
void JoinThread(Thread* thread);  // no-op for a thread that never started

}  // namespace port
}  // namespace tinyai

#endif  // TINYAI_COMMON_SEAM_H_
