#include "tools/bench/huge_pages.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "tools/common/cli.h"

namespace tinyai_tools {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

HugePageBuffer::~HugePageBuffer() {
  if (map_) ::munmap(map_, map_bytes_);
}

bool HugePageBuffer::Allocate(size_t bytes) {
#ifdef MADV_HUGEPAGE
  if (map_ || bytes == 0 || bytes > SIZE_MAX - 2 * kHugePage) return false;
  const size_t rounded = (bytes + kHugePage - 1) & ~(kHugePage - 1);
  map_bytes_ = rounded + kHugePage;
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    return false;
  }
  const uintptr_t start = (reinterpret_cast<uintptr_t>(map_) + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
  data_ = reinterpret_cast<uint8_t*>(start);
  size_ = bytes;
  // A request: the kernel may still back the range with small pages.
  ::madvise(data_, rounded, MADV_HUGEPAGE);
  return true;
#else
  (void)bytes;
  return false;
#endif
}

void ReadFileIntoHugePages(const std::string& path, HugePageBuffer* buffer) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw RuntimeError(TINYAI_ERR_IO, "cannot open '" + path + "': " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    throw RuntimeError(TINYAI_ERR_IO, "cannot read '" + path + "': not a regular, non-empty file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (!buffer->Allocate(size)) {
    ::close(fd);
    throw RuntimeError(TINYAI_ERR_OUT_OF_MEMORY,
                       "cannot map " + std::to_string(size) + " bytes in huge pages for '" + path + "'");
  }
  size_t done = 0;
  while (done < size) {
    const size_t chunk = size - done < (size_t{64} << 20) ? size - done : (size_t{64} << 20);
    const ssize_t n = ::pread(fd, buffer->data() + done, chunk, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "the file ended early";
      ::close(fd);
      throw RuntimeError(TINYAI_ERR_IO, "cannot read '" + path + "': " + why);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

uint64_t HugePageBytes() {
  std::FILE* f = std::fopen("/proc/self/smaps_rollup", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kib = 0;
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f)) found = std::sscanf(line, "AnonHugePages: %llu kB", &kib) == 1;
  std::fclose(f);
  return found ? static_cast<uint64_t>(kib) * 1024 : 0;
}

}  // namespace tinyai_tools
