// The platform seam. Each port (ports/<target>/) implements these link-time
// functions, and those common/seam.h declares (memory, threads, a clock:
// what common itself needs); the core calls nothing of the OS except
// through them.
#ifndef TINYAI_PORT_PORT_H_
#define TINYAI_PORT_PORT_H_

#include <cstddef>
#include <cstdint>

#include "common/seam.h"
#include "tinyai/status.h"

namespace tinyai {
namespace port {

// A read-only view of a whole file. handle is the port's own.
struct MappedFile {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  intptr_t handle = -1;
};

// Maps path read-only. Errors: TINYAI_ERR_FILE_NOT_FOUND, TINYAI_ERR_IO,
// TINYAI_ERR_TRUNCATED (the file is empty), TINYAI_ERR_UNSUPPORTED (no
// file system on this port). The message names the path and the OS error.
TinyAIStatus MapFile(const char* path, MappedFile* out);
void UnmapFile(MappedFile* file);  // resets *file; ok on an empty MappedFile

// A file opened for positional reads (the weight cache reads through it, so
// no weight byte is resident unless the cache holds it). handle is the port's.
struct File {
  intptr_t handle = -1;
  uint64_t size = 0;
  // A second handle for direct reads (EnableDirectReads), and the alignment
  // they need; -1 and 0 without one.
  intptr_t direct = -1;
  uint32_t direct_align = 0;
};
// Errors as MapFile().
TinyAIStatus OpenFile(const char* path, File* out);
void CloseFile(File* file);  // resets *file; ok on an unopened File
// Reads exactly size bytes at offset. TINYAI_ERR_IO names source and the OS
// error; a short read (the file shrank) is TINYAI_ERR_TRUNCATED.
TinyAIStatus ReadAt(const File& file, uint64_t offset, void* dst, size_t size, const char* source);

// Direct reads: from storage straight into the caller's memory, past the OS's
// page cache (Linux's O_DIRECT), so that streaming weights neither copies
// them twice nor fills a cache the memory limit would charge. Opens path
// (the file open as *file) again for them and sets file->direct_align, the
// alignment that their offset, size and memory must all have (the file
// system's, from statx; the page size where it does not say). False, and
// *file as it was, where the port, the file system (tmpfs, some FUSE or
// network ones) or the OS refuse them: reads stay buffered.
bool EnableDirectReads(const char* path, File* file);
// Reads [offset, offset + size) into dst with a direct read: offset, size
// and dst are multiples of file.direct_align; the range may run past the
// file's end by less than that (the read stops there). A file without direct
// reads, or a read the OS refuses (EINVAL), is read through ReadAt instead.
// Errors as ReadAt's.
TinyAIStatus ReadDirect(const File& file, uint64_t offset, void* dst, size_t size, const char* source);

// Output files: every file TinyAI writes (models, quantized and pruned models,
// sessions, persistent stores, the tools' DAG dumps) goes through these, so
// that a save never destroys or corrupts another file. BeginOutput checks
// the target and opens a temporary that only this save can reach, created in
// the target's directory (out->file takes WriteAt and ReadAt); CommitOutput
// syncs it and renames it over the target (a crash before leaves the target
// as it was); AbortOutput removes it. The rules (ports/posix/output_posix.cc):
//  - a regular file or nothing at path is replaced whole; a symbolic link to a
//    file replaces that file (the link stays); a character device (/dev/null)
//    is written in place (out->in_place; nothing is renamed);
//  - refused: a directory, FIFO, socket, block device or dangling link
//    (TINYAI_ERR_INVALID_ARGUMENT, TINYAI_ERR_FILE_NOT_FOUND for the link), a
//    file this process has open or mapped (a model being run, an input being
//    read: TINYAI_ERR_INVALID_ARGUMENT), a read-only file (TINYAI_ERR_IO);
//  - a missing directory is TINYAI_ERR_FILE_NOT_FOUND, any other failure
//    TINYAI_ERR_IO; every message names the path and the cause;
//  - a temporary left by a crash (where the file system has no unnamed files)
//    is named PATH.tinyai-PID-N.tmp.
// Ports without a file system answer TINYAI_ERR_UNSUPPORTED.
struct OutputFile {
  File file;              // positional writes and reads
  bool in_place = false;  // a device, written in place
  void* state = nullptr;  // the port's own
};
TinyAIStatus BeginOutput(const char* path, OutputFile* out);
TinyAIStatus WriteAt(const File& file, uint64_t offset, const void* src, size_t size, const char* name);
// Sets the written file's size (cuts what lies past it); a no-op in place.
TinyAIStatus SetOutputSize(const OutputFile& out, uint64_t size);
// Syncs and puts the file in place; on failure the temporary is removed and
// the target holds what it held. out is reset either way.
TinyAIStatus CommitOutput(OutputFile* out);
// Removes the temporary (the target holds what it held); ok on a reset out.
void AbortOutput(OutputFile* out);
// True when path names the file open as file (the same inode).
bool IsSameFile(const File& file, const char* path);

enum class Advice { kWillNeed, kDontNeed, kSequential, kRandom };
// Hints the OS about [data, data+size) of a mapping; rounds to pages. No-op
// where the port has no virtual memory.
void AdviseRange(const void* data, size_t size, Advice advice);

size_t PageSize();

// Resident set size of the process (0 if unknown): peak (VmHWM) and now.
uint64_t PeakRssBytes();
uint64_t CurrentRssBytes();

// Whole pages for large buffers that must go back to the OS when freed (the
// weight cache's slots): NULL on failure; PageFree takes the size given to
// PageAlloc. Contents are zero on ports with virtual memory, unspecified
// elsewhere.
void* PageAlloc(size_t size);
void PageFree(void* p, size_t size);  // NULL ok

// Address space for buffers that live at fixed offsets in it (the weight
// cache's row slices, when all of them may be resident at once), asked to be
// backed by huge pages (Linux's transparent huge pages) so that streaming
// them misses the TLB less. Pages are committed as they are written, a huge
// page (HugePageSize() bytes) at a time where one fits inside the region
// (which ends at size rounded up to a page, so nothing past it is ever
// committed); HugeRegionDiscard gives a range's memory back (it reads as
// zeros after); HugeRegionNoHuge makes later faults commit small pages only
// (a huge page would commit more than was written). HugeRegionReserve
// returns NULL when the port or the OS has no huge pages to ask for (THP
// "never"), and HugePageSize() is 0 there.
size_t HugePageSize();
void* HugeRegionReserve(size_t size);
void HugeRegionDiscard(void* p, size_t size);
void HugeRegionNoHuge(void* p, size_t size);
void HugeRegionFree(void* p, size_t size);  // the size given to HugeRegionReserve; NULL ok

// The memory bounds the system puts on this process: the memory cgroups
// (v1 or v2) it is in - its own and each ancestor up to the hierarchy's
// mount, found through /proc/self/cgroup and /proc/self/mountinfo - and
// /proc/meminfo's MemAvailable. Files are read under root ("" for the
// system's; tests give a directory laid out like it). Of the cgroups with a
// limit, the one with the least room (limit - usage + inactive page cache)
// is reported. TINYAI_ERR_UNSUPPORTED (not recorded) when the port has no
// such files; a cgroup file that cannot be read or parsed is skipped.
struct MemoryBounds {
  int cgroup_version = 0;          // 0: no cgroup limit found, else 1 or 2
  uint64_t cgroup_limit = 0;       // that cgroup's limit (v2: memory.max, or memory.high when lower)
  uint64_t cgroup_usage = 0;       // its usage now, page cache included
  uint64_t cgroup_reclaimable = 0; // its inactive page cache
  uint64_t system_available = 0;   // MemAvailable; 0: none read
  char cgroup_dir[256] = {0};      // the cgroup's directory ("..." and its end when longer)
};
TinyAIStatus ReadMemoryBounds(const char* root, MemoryBounds* out);

// A static arena: ports without a heap (ports/baremetal) serve every
// allocation from a region the caller gives them. Ports with a heap return
// TINYAI_ERR_UNSUPPORTED from SetArena and false from GetArenaStats.
struct ArenaStats {
  size_t size = 0;         // the region's bytes
  size_t used = 0;         // bytes of live allocations, headers included
  size_t peak = 0;         // high-water mark: the furthest offset ever reached
  uint64_t allocations = 0;  // allocations served
  uint64_t failures = 0;     // allocations refused
};
TinyAIStatus SetArena(void* base, size_t size);
// TINYAI_ERR_UNSUPPORTED on ports with a heap, TINYAI_ERR_MISUSE before
// SetArena (neither records an error).
TinyAIStatus GetArenaStats(ArenaStats* out);
// Sets the high-water mark (to measure a phase: lower it to the current top,
// run, read, restore the maximum).
void SetArenaPeak(size_t peak);
size_t ArenaTop();

// The caller's clock (ports without an OS clock); TINYAI_ERR_UNSUPPORTED on
// ports that have one.
TinyAIStatus SetClock(uint64_t (*now)(void));

}  // namespace port
}  // namespace tinyai

#endif  // TINYAI_PORT_PORT_H_
