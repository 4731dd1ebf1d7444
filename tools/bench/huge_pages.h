// Memory in transparent huge pages (Linux's madvise(MADV_HUGEPAGE)), so
// tinyai-bench --huge-pages can measure what 2 MiB pages are worth against
// 4 KiB ones: a decode streams every weight once a token, and on a virtual
// machine each TLB miss walks two page tables. The kernel may refuse the
// request (THP "never", no free 2 MiB frames); HugePageBytes() says what it
// gave.
#ifndef TINYAI_TOOLS_BENCH_HUGE_PAGES_H_
#define TINYAI_TOOLS_BENCH_HUGE_PAGES_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace tinyai_tools {

class HugePageBuffer {
 public:
  HugePageBuffer() = default;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;
  ~HugePageBuffer();

  // bytes of anonymous memory at a huge page boundary, huge pages asked for
  // (port::HugeRegionReserve, as the weight cache's region); false when the
  // memory cannot be had or the OS has no huge pages to ask for.
  bool Allocate(size_t bytes);
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Reads the file at path into buffer (allocated to its size); throws a
// RuntimeError naming the file on failure.
void ReadFileIntoHugePages(const std::string& path, HugePageBuffer* buffer);

// AnonHugePages of this process (/proc/self/smaps_rollup) in bytes; 0 when
// unknown.
uint64_t HugePageBytes();

}  // namespace tinyai_tools

#endif  // TINYAI_TOOLS_BENCH_HUGE_PAGES_H_
