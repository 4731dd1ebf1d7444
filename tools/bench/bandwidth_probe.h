// The machine's memory read bandwidth, measured by streaming a buffer far
// larger than the caches with the widest SIMD loads this CPU has, on every
// core at once; best of several runs.
#ifndef TINYAI_TOOLS_BENCH_BANDWIDTH_PROBE_H_
#define TINYAI_TOOLS_BENCH_BANDWIDTH_PROBE_H_

#include <cstddef>
#include <cstdint>

namespace tinyai_tools {

struct BandwidthResult {
  double best_gbps = 0;   // 1e9 bytes per second
  double median_gbps = 0;
  int threads = 0;
  size_t bytes = 0;       // buffer size
  const char* kernels = "";
  uint64_t huge_page_bytes = 0;  // of the buffer, when huge pages were asked for
};

// huge: the buffer in transparent huge pages (huge_pages.h), as a model read
// with tinyai-bench --huge-pages is; a zero result if they cannot be asked for.
BandwidthResult MeasureReadBandwidth(int threads, size_t bytes, int runs, bool huge = false);

// The same, run in a forked child so the buffer never adds to this process's
// peak RSS. Falls back to a zero result if the child cannot run.
BandwidthResult MeasureReadBandwidthInChild(int threads, size_t bytes, int runs, bool huge = false);

}  // namespace tinyai_tools

#endif  // TINYAI_TOOLS_BENCH_BANDWIDTH_PROBE_H_
