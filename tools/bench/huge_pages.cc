#include "tools/bench/huge_pages.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "port/port.h"
#include "tools/common/cli.h"

namespace tinyai_tools {

HugePageBuffer::~HugePageBuffer() { tinyai::port::HugeRegionFree(data_, size_); }

bool HugePageBuffer::Allocate(size_t bytes) {
  if (data_ || bytes == 0) return false;
  data_ = static_cast<uint8_t*>(tinyai::port::HugeRegionReserve(bytes));
  if (!data_) return false;
  size_ = bytes;
  return true;
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
                       "cannot have " + std::to_string(size) + " bytes in huge pages for '" + path +
                           "': the OS gives no transparent huge pages, or no memory");
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
