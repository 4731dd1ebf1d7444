// POSIX port: mmap for files, /proc and getrusage for memory figures.
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/status.h"
#include "port/port.h"

namespace tinyai {
namespace port {

namespace {

// Opens path read-only and checks it is a non-empty regular file.
TinyAIStatus OpenRegular(const char* path, int* fd_out, uint64_t* size_out) {
  // O_NONBLOCK: a FIFO or device must not block the open; it is refused below.
  int fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return SetError(TINYAI_ERR_FILE_NOT_FOUND, "'%s': no such file", path);
    }
    return SetError(TINYAI_ERR_IO, "'%s': cannot open: %s", path, strerror(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return SetError(TINYAI_ERR_IO, "'%s': cannot stat: %s", path, strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return SetError(TINYAI_ERR_IO, "'%s': not a regular file", path);
  }
  if (st.st_size == 0) {
    ::close(fd);
    return SetError(TINYAI_ERR_TRUNCATED, "'%s': file is empty (0 bytes)", path);
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > SIZE_MAX) {
    ::close(fd);
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': %llu bytes do not fit this address space", path,
                    static_cast<unsigned long long>(size));
  }
  *fd_out = fd;
  *size_out = size;
  return TINYAI_OK;
}

}  // namespace

TinyAIStatus MapFile(const char* path, MappedFile* out) {
  *out = MappedFile();
  int fd = -1;
  uint64_t size = 0;
  TINYAI_RETURN_IF_ERROR(OpenRegular(path, &fd, &size));
  void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    return SetError(TINYAI_ERR_IO, "'%s': cannot map %llu bytes: %s", path,
                    static_cast<unsigned long long>(size), strerror(err));
  }
  out->data = static_cast<const uint8_t*>(p);
  out->size = size;
  out->handle = 0;
  return TINYAI_OK;
}

TinyAIStatus OpenFile(const char* path, File* out) {
  *out = File();
  int fd = -1;
  uint64_t size = 0;
  TINYAI_RETURN_IF_ERROR(OpenRegular(path, &fd, &size));
  // Reads are positional and the cache decides what stays: the kernel's
  // readahead past a block would only fill the page cache.
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  out->handle = fd;
  out->size = size;
  return TINYAI_OK;
}

void CloseFile(File* file) {
  if (file->handle >= 0) ::close(static_cast<int>(file->handle));
  if (file->direct >= 0) ::close(static_cast<int>(file->direct));
  *file = File();
}

bool EnableDirectReads(const char* path, File* file) {
#ifdef O_DIRECT
  if (file->handle < 0 || file->direct >= 0) return file->direct >= 0;
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_DIRECT);
  if (fd < 0) return false;  // EINVAL: the file system has no direct reads
  // The same file as the buffered handle (not one renamed over it since).
  struct stat a, b;
  if (::fstat(fd, &b) != 0 || ::fstat(static_cast<int>(file->handle), &a) != 0 || a.st_dev != b.st_dev ||
      a.st_ino != b.st_ino) {
    ::close(fd);
    return false;
  }
  uint32_t align = static_cast<uint32_t>(PageSize());
#if defined(STATX_DIOALIGN)
  struct statx sx;
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN)) {
    if (sx.stx_dio_offset_align == 0) {  // the file system says: none for this file
      ::close(fd);
      return false;
    }
    align = sx.stx_dio_offset_align > sx.stx_dio_mem_align ? sx.stx_dio_offset_align : sx.stx_dio_mem_align;
    if (align < 512) align = 512;
  }
#endif
  file->direct = fd;
  file->direct_align = align;
  return true;
#else
  (void)path;
  (void)file;
  return false;
#endif
}

TinyAIStatus ReadDirect(const File& file, uint64_t offset, void* dst, size_t size, const char* source) {
  const uint64_t align = file.direct_align;
  const uint64_t want = offset >= file.size ? 0 : (file.size - offset < size ? file.size - offset : size);
  if (file.direct < 0 || align == 0 || offset % align || size % align ||
      reinterpret_cast<uintptr_t>(dst) % align) {
    return ReadAt(file, offset, dst, static_cast<size_t>(want), source);
  }
  uint8_t* out = static_cast<uint8_t*>(dst);
  uint64_t done = 0;
  while (done < want) {
    ssize_t n = ::pread(static_cast<int>(file.direct), out + done, static_cast<size_t>(size - done),
                        static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      // Refused after all (a file system that takes the open but not this
      // read): the rest goes through the page cache.
      if (errno == EINVAL) return ReadAt(file, offset + done, out + done, static_cast<size_t>(want - done), source);
      return SetError(TINYAI_ERR_IO, "'%s': cannot read %zu bytes at offset %llu: %s", source, size,
                      static_cast<unsigned long long>(offset), strerror(errno));
    }
    if (n == 0) {
      return SetError(TINYAI_ERR_TRUNCATED, "'%s': file ends before offset %llu (+%llu bytes); was it changed?",
                      source, static_cast<unsigned long long>(offset + done),
                      static_cast<unsigned long long>(want - done));
    }
    done += static_cast<uint64_t>(n);
    // A short read that is not a multiple of the alignment ends at the
    // file's end; the next read would be misaligned.
    if (done < want && done % align) {
      return ReadAt(file, offset + done, out + done, static_cast<size_t>(want - done), source);
    }
  }
  return TINYAI_OK;
}

TinyAIStatus ReadAt(const File& file, uint64_t offset, void* dst, size_t size, const char* source) {
  uint8_t* out = static_cast<uint8_t*>(dst);
  while (size > 0) {
    ssize_t n = ::pread(static_cast<int>(file.handle), out, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return SetError(TINYAI_ERR_IO, "'%s': cannot read %zu bytes at offset %llu: %s", source, size,
                      static_cast<unsigned long long>(offset), strerror(errno));
    }
    if (n == 0) {
      return SetError(TINYAI_ERR_TRUNCATED, "'%s': file ends before offset %llu (+%zu bytes); was it changed?",
                      source, static_cast<unsigned long long>(offset), size);
    }
    out += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return TINYAI_OK;
}

TinyAIStatus WriteAt(const File& file, uint64_t offset, const void* src, size_t size, const char* name) {
  const uint8_t* in = static_cast<const uint8_t*>(src);
  while (size > 0) {
    ssize_t n = ::pwrite(static_cast<int>(file.handle), in, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return SetError(TINYAI_ERR_IO, "'%s': cannot write %zu bytes at offset %llu: %s", name, size,
                      static_cast<unsigned long long>(offset), strerror(errno));
    }
    in += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return TINYAI_OK;
}

bool IsSameFile(const File& file, const char* path) {
  struct stat a, b;
  if (file.handle < 0 || ::fstat(static_cast<int>(file.handle), &a) != 0 || ::stat(path, &b) != 0) return false;
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

void UnmapFile(MappedFile* file) {
  if (file->data) ::munmap(const_cast<uint8_t*>(file->data), static_cast<size_t>(file->size));
  *file = MappedFile();
}

void AdviseRange(const void* data, size_t size, Advice advice) {
  if (!data || size == 0) return;
  uintptr_t page = PageSize();
  uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  uintptr_t end = reinterpret_cast<uintptr_t>(data) + size;
  int how = MADV_NORMAL;
  switch (advice) {
    case Advice::kWillNeed: how = MADV_WILLNEED; break;
    case Advice::kDontNeed: how = MADV_DONTNEED; break;
    case Advice::kSequential: how = MADV_SEQUENTIAL; break;
    case Advice::kRandom: how = MADV_RANDOM; break;
  }
  ::madvise(reinterpret_cast<void*>(begin), end - begin, how);
}

size_t PageSize() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

int CpuCount() {
  // The CPUs this process may run on (taskset, cpusets), not all online ones:
  // more compute threads than that only wait on each other.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

uint64_t MonotonicNanos() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {

// Reads a "Key:   N kB" line of /proc/self/status; 0 if absent.
uint64_t ProcStatusKb(const char* key) {
  FILE* f = ::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  size_t keylen = strlen(key);
  uint64_t kb = 0;
  while (::fgets(line, sizeof line, f)) {
    if (strncmp(line, key, keylen) == 0 && line[keylen] == ':') {
      kb = strtoull(line + keylen + 1, nullptr, 10);
      break;
    }
  }
  ::fclose(f);
  return kb;
}

}  // namespace

uint64_t PeakRssBytes() {
  uint64_t kb = ProcStatusKb("VmHWM");
  if (kb == 0) {
    struct rusage ru;
    if (::getrusage(RUSAGE_SELF, &ru) == 0) kb = static_cast<uint64_t>(ru.ru_maxrss);
  }
  return kb * 1024;
}

uint64_t CurrentRssBytes() { return ProcStatusKb("VmRSS") * 1024; }

void ReadProcessMemory(ProcessMemory* out) {
  *out = ProcessMemory();
  FILE* f = ::fopen("/proc/self/status", "r");
  if (!f) return;
  char line[256];
  uint64_t shmem = 0;
  while (::fgets(line, sizeof line, f)) {
    uint64_t* field = nullptr;
    size_t keylen = 0;
    static const struct {
      const char* key;
      int which;
    } kKeys[] = {{"VmRSS", 0}, {"RssAnon", 1}, {"RssFile", 2}, {"RssShmem", 3}, {"VmHWM", 4}};
    for (const auto& k : kKeys) {
      keylen = strlen(k.key);
      if (strncmp(line, k.key, keylen) == 0 && line[keylen] == ':') {
        field = k.which == 0 ? &out->rss : k.which == 1 ? &out->anon : k.which == 2 ? &out->file
                : k.which == 3 ? &shmem : &out->peak;
        break;
      }
    }
    if (field) *field = strtoull(line + keylen + 1, nullptr, 10) * 1024;
  }
  ::fclose(f);
  out->file += shmem;
  out->known = out->rss > 0;
}

void* AlignedAlloc(size_t alignment, size_t size) {
  void* p = nullptr;
  if (::posix_memalign(&p, alignment, size) != 0) return nullptr;
  return p;
}

void AlignedFree(void* p) { ::free(p); }

void DescribeMemory(char* out, size_t capacity) {
  if (capacity > 0) out[0] = '\0';
}

TinyAIStatus SetArena(void* base, size_t size) {
  return SetError(TINYAI_ERR_UNSUPPORTED, "the posix port allocates from the heap; a static arena needs the "
                  "baremetal port (TINYAI_PORT=baremetal)");
}
TinyAIStatus GetArenaStats(ArenaStats* out) { return TINYAI_ERR_UNSUPPORTED; }
void SetArenaPeak(size_t peak) {}
size_t ArenaTop() { return 0; }
TinyAIStatus SetClock(uint64_t (*now)(void)) {
  return SetError(TINYAI_ERR_UNSUPPORTED, "the posix port uses the OS's monotonic clock");
}

void* PageAlloc(size_t size) {
  if (size == 0) return nullptr;
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void PageFree(void* p, size_t size) {
  if (p) ::munmap(p, size);
}

#if defined(__linux__) && defined(MADV_HUGEPAGE)
namespace {

// Larger huge pages (512 MiB under 64 KiB base pages) would commit far more
// than a slice at a time: not asked for.
constexpr size_t kMaxHugePage = size_t{32} << 20;

// A file's first line, "" if it cannot be read.
void ReadLine(const char* path, char* out, size_t capacity) {
  out[0] = '\0';
  FILE* f = fopen(path, "r");
  if (!f) return;
  if (!fgets(out, static_cast<int>(capacity), f)) out[0] = '\0';
  fclose(f);
}

// The PMD huge page's size when transparent huge pages can be asked for
// (THP "always" or "madvise"), else 0.
size_t ReadHugePageSize() {
  char text[128];
  ReadLine("/sys/kernel/mm/transparent_hugepage/enabled", text, sizeof text);
  if (text[0] == '\0' || strstr(text, "[never]") != nullptr) return 0;
  ReadLine("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", text, sizeof text);
  char* end = nullptr;
  const unsigned long long size = strtoull(text, &end, 10);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // A power of two, more than a page and not too large.
  if (end == text || size <= page || size > kMaxHugePage || (size & (size - 1)) != 0) return 0;
  return static_cast<size_t>(size);
}

// The region's length: whole pages, not whole huge pages, so its last
// partial huge page can never be faulted in as one (committing memory past
// what the caller asked for).
size_t RegionLength(size_t size) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (size + page - 1) / page * page;
}

}  // namespace

size_t HugePageSize() {
  static const size_t size = ReadHugePageSize();
  return size;
}

void* HugeRegionReserve(size_t size) {
  const size_t huge = HugePageSize();
  if (huge == 0 || size == 0 || size > SIZE_MAX - 2 * huge) return nullptr;
  const size_t length = RegionLength(size);
  // Map a huge page more, start at a huge page boundary, trim both ends.
  char* map = static_cast<char*>(
      ::mmap(nullptr, length + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (map == MAP_FAILED) return nullptr;
  char* start = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(map) + huge - 1) & ~(uintptr_t{huge} - 1));
  if (start > map) ::munmap(map, static_cast<size_t>(start - map));
  char* end = map + length + huge;
  if (start + length < end) ::munmap(start + length, static_cast<size_t>(end - (start + length)));
  if (::madvise(start, length, MADV_HUGEPAGE) != 0) {
    ::munmap(start, length);
    return nullptr;
  }
  return start;
}

void HugeRegionDiscard(void* p, size_t size) {
  if (!p || size == 0 || ::madvise(p, size, MADV_DONTNEED) == 0) return;
  // Refused for locked pages (mlockall): unlock the range and ask again.
  ::munlock(p, size);
  ::madvise(p, size, MADV_DONTNEED);
}

void HugeRegionNoHuge(void* p, size_t size) {
  if (p && size > 0) ::madvise(p, RegionLength(size), MADV_NOHUGEPAGE);
}

void HugeRegionFree(void* p, size_t size) {
  if (p) ::munmap(p, RegionLength(size));
}
#else
size_t HugePageSize() { return 0; }
void* HugeRegionReserve(size_t size) { return nullptr; }
void HugeRegionDiscard(void* p, size_t size) {}
void HugeRegionNoHuge(void* p, size_t size) {}
void HugeRegionFree(void* p, size_t size) {}
#endif

}  // namespace port
}  // namespace tinyai

#include <pthread.h>

namespace tinyai {
namespace port {
namespace {

struct ThreadStart {
  void (*fn)(void*);
  void* arg;
};

void* ThreadMain(void* p) {
  ThreadStart start = *static_cast<ThreadStart*>(p);
  ::free(p);
  start.fn(start.arg);
  return nullptr;
}

}  // namespace

TinyAIStatus StartThread(Thread* thread, void (*fn)(void*), void* arg) {
  ThreadStart* start = static_cast<ThreadStart*>(::malloc(sizeof(ThreadStart)));
  if (!start) return SetError(TINYAI_ERR_OUT_OF_MEMORY, "cannot allocate a thread start block");
  start->fn = fn;
  start->arg = arg;
  pthread_t tid;
  int rc = ::pthread_create(&tid, nullptr, ThreadMain, start);
  if (rc != 0) {
    ::free(start);
    return SetError(TINYAI_ERR_RESOURCE_EXHAUSTED, "cannot start a thread: %s", strerror(rc));
  }
  thread->handle = static_cast<uintptr_t>(tid);
  thread->started = true;
  return TINYAI_OK;
}

void JoinThread(Thread* thread) {
  if (!thread->started) return;
  ::pthread_join(static_cast<pthread_t>(thread->handle), nullptr);
  thread->started = false;
}

}  // namespace port
}  // namespace tinyai
