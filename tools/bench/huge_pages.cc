#include "tools/bench/huge_pages.h"

#include <cstdint>
#include <cstdio>

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
  // A regular file: its size, known before reading, bounds what is read.
  InputFile in(path, "the model '" + path + "'", "it is read whole into memory: its size is the bound");
  if (in.size() == 0) throw RuntimeError(TINYAI_ERR_TRUNCATED, "the model '" + path + "' is empty (0 bytes)");
  if (in.size() > SIZE_MAX) {
    throw RuntimeError(TINYAI_ERR_UNSUPPORTED, "the model '" + path + "' is more than this address space holds");
  }
  const size_t size = static_cast<size_t>(in.size());
  if (!buffer->Allocate(size)) {
    throw RuntimeError(TINYAI_ERR_OUT_OF_MEMORY,
                       "cannot have " + std::to_string(size) + " bytes in huge pages for '" + path +
                           "': the OS gives no transparent huge pages, or no memory");
  }
  size_t done = 0;
  while (done < size) {
    const size_t chunk = size - done < (size_t{64} << 20) ? size - done : (size_t{64} << 20);
    const size_t n = in.Read(reinterpret_cast<char*>(buffer->data()) + done, chunk);
    if (n == 0) {
      throw RuntimeError(TINYAI_ERR_TRUNCATED, "the model '" + path + "' ended after " + std::to_string(done) +
                                                   " of its " + std::to_string(size) + " bytes; was it changed?");
    }
    done += n;
  }
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
