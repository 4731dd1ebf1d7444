#include "tools/bench/bandwidth_probe.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "common/array.h"
#include "common/thread_pool.h"
#include "kernels/kernels.h"
#include "tools/bench/huge_pages.h"

namespace tinyai_tools {

BandwidthResult MeasureReadBandwidth(int threads, size_t bytes, int runs, bool huge) {
  BandwidthResult r;
  r.threads = threads;
  r.bytes = bytes;
  const tinyai::kernels::KernelTable& k = tinyai::kernels::Best();
  r.kernels = k.name;
  tinyai::AlignedBuffer buf;
  HugePageBuffer huge_buf;
  float* data = nullptr;
  if (huge) {
    if (!huge_buf.Allocate(bytes)) return r;
    data = reinterpret_cast<float*>(huge_buf.data());
  } else {
    if (buf.Allocate(bytes, "bandwidth probe") != TINYAI_OK) return r;
    data = buf.floats();
  }
  const size_t n = bytes / sizeof(float);
  const uint64_t huge_before = huge ? HugePageBytes() : 0;
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>(i & 7) * 0.125f;
  if (huge) {
    const uint64_t after = HugePageBytes();
    r.huge_page_bytes = after > huge_before ? after - huge_before : 0;
    if (r.huge_page_bytes > bytes) r.huge_page_bytes = bytes;
  }
  tinyai::ThreadPool pool;
  if (pool.Start(threads) != TINYAI_OK) return r;
  std::vector<double> sinks(static_cast<size_t>(threads) * 16);
  std::vector<double> gbps;
  for (int run = 0; run < runs; ++run) {
    auto t0 = std::chrono::steady_clock::now();
    // dot(a, a) streams a once: both operands hit the same cache lines.
    pool.ParallelFor(n, 4096, n, [&](size_t begin, size_t end, int t) {
      sinks[static_cast<size_t>(t) * 16] += k.dot(data + begin, data + begin, end - begin);
    });
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gbps.push_back(static_cast<double>(bytes) / s / 1e9);
  }
  std::sort(gbps.begin(), gbps.end());
  r.best_gbps = gbps.back();
  r.median_gbps = gbps[gbps.size() / 2];
  volatile double keep = sinks[0];
  (void)keep;
  return r;
}

BandwidthResult MeasureReadBandwidthInChild(int threads, size_t bytes, int runs, bool huge) {
  BandwidthResult r;
  int fds[2];
  if (pipe(fds) != 0) return r;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    BandwidthResult child = MeasureReadBandwidth(threads, bytes, runs, huge);
    ssize_t n = write(fds[1], &child, sizeof child);
    _exit(n == static_cast<ssize_t>(sizeof child) ? 0 : 1);
  }
  close(fds[1]);
  if (pid > 0) {
    BandwidthResult got;
    if (read(fds[0], &got, sizeof got) == static_cast<ssize_t>(sizeof got)) r = got;
    waitpid(pid, nullptr, 0);
  }
  close(fds[0]);
  r.kernels = tinyai::kernels::Best().name;  // the child's pointer means nothing here
  return r;
}

}  // namespace tinyai_tools
