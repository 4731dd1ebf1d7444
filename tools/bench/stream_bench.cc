// tinyai-bench-stream: a decode's weight stream through the kernels against
// a plain read of the same bytes, in one process, alternated round by round.
//
//   tinyai-bench-stream [--dtype D]... [--threads N] [--rounds R] [--mib M] [--scale S] [--kernels NAME]
//
// Per dtype it lays out the ~1B shape's layers (q, k, v, o 2048 x 2048 and
// 256 x 2048, gate and up 5632 x 2048, down 2048 x 5632) as the weight cache
// holds them (rows, or panels where the table multiplies panels; --scale S
// divides both sides of every matrix by S, for tests), enough
// layers to fill M MiB (default 512: past every cache), and times two passes
// over them on N threads (default 2), each matrix split in N contiguous
// parts with a barrier after it, as a decode's loops are: the table's
// matrix-vector product (the input quantized once per matrix, as a product
// does), and a read of the same bytes (loads as wide as the table's,
// summed), each round after an untimed read, the two in turns first.
// Their ratio is what the kernel leaves of the bandwidth the
// same split reaches at the same minute: tinyai-bench's bandwidth_fraction
// compares a decode with the best of 14 probe runs, taken before and after,
// which a host whose memory bandwidth swings from minute to minute (the Zen 5
// host: 34-64 GB/s) moves more than any kernel change. Attention, norms and
// the pool's loops are not in it: tinyai-bench measures those.
//
// Output: one line per dtype and pass, median GB/s and each round's, then
// the ratio of the medians and each round's ratio.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "common/groups.h"
#include "common/half.h"
#include "common/panels.h"
#include "kernels/kernels.h"
#include "quant/quantize.h"
#include "tinyai/types.h"
#include "tools/common/args.h"
#include "tools/common/cli.h"

namespace {

using tinyai::kernels::KernelTable;
using tinyai::kernels::WeightKernels;

constexpr const char* kTool = "tinyai-bench-stream";
volatile uint64_t g_sink = 0;

struct Shape {
  size_t rows, cols;
};
const Shape kLayer[] = {{2048, 2048}, {256, 2048}, {256, 2048}, {2048, 2048}, {5632, 2048}, {5632, 2048}, {2048, 5632}};

size_t RowBytes(int32_t dtype, size_t cols) {
  if (dtype == TINYAI_DTYPE_F32) return cols * 4;
  if (dtype == TINYAI_DTYPE_F16) return cols * 2;
  return tinyai::GroupedRowBytes(dtype, cols);
}

// One matrix of random values in [-1, 1) in dtype's rows (panels when
// `panels`): what every layer's copy holds.
std::vector<uint8_t> Encode(int32_t dtype, const Shape& s, bool panels) {
  std::vector<float> v(s.rows * s.cols);
  std::mt19937 rng(static_cast<uint32_t>(s.rows * 31 + s.cols));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& f : v) f = dist(rng);
  const size_t rb = RowBytes(dtype, s.cols);
  std::vector<uint8_t> out(s.rows * rb);
  if (dtype == TINYAI_DTYPE_F32) {
    std::memcpy(out.data(), v.data(), out.size());
  } else if (dtype == TINYAI_DTYPE_F16) {
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t h = tinyai::FloatToHalf(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  } else {
    const TinyAIStatus st = tinyai::quant::EncodeRows(dtype, v.data(), s.rows, s.cols, out.data(), nullptr);
    if (st != TINYAI_OK) {
      throw tinyai_tools::RuntimeError(st, std::string("cannot encode ") +
                                               tinyaiDTypeName(static_cast<TinyAIDType>(dtype)) + " rows");
    }
    if (panels) {
      std::vector<uint8_t> rows = out;
      for (size_t p = 0; p < s.rows / tinyai::kPanelRows; ++p) {
        tinyai::PackPanel(rows.data() + p * tinyai::PanelBytes(rb), rb, out.data() + p * tinyai::PanelBytes(rb));
      }
    }
  }
  return out;
}

// A spinning barrier for the pass's threads.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void Wait() {
    const int phase = phase_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) == n_ - 1) {
      arrived_.store(0, std::memory_order_relaxed);
      phase_.store(phase + 1, std::memory_order_release);
    } else {
      while (phase_.load(std::memory_order_acquire) == phase) {
      }
    }
  }

 private:
  const int n_;
  std::atomic<int> arrived_{0}, phase_{0};
};

// Sums [p, p + bytes): in 64-byte loads for the AVX-512 tables, 32-byte
// loads for the AVX2 one (the widths their kernels load), 8-byte words
// otherwise. Four independent sums.
uint64_t ReadWords(const uint8_t* p, size_t bytes, size_t i, uint64_t sum) {
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    sum += w;
  }
  return sum;
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx512f"))) uint64_t Read512(const uint8_t* p, size_t bytes) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  size_t i = 0;
  for (; i + 256 <= bytes; i += 256) {
    a = _mm512_add_epi64(a, _mm512_loadu_si512(p + i));
    b = _mm512_add_epi64(b, _mm512_loadu_si512(p + i + 64));
    c = _mm512_add_epi64(c, _mm512_loadu_si512(p + i + 128));
    d = _mm512_add_epi64(d, _mm512_loadu_si512(p + i + 192));
  }
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a, b), _mm512_add_epi64(c, d)));
  uint64_t sum = 0;
  for (uint64_t v : lanes) sum += v;
  return ReadWords(p, bytes, i, sum);
}

__attribute__((target("avx2"))) uint64_t Read256(const uint8_t* p, size_t bytes) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  size_t i = 0;
  for (; i + 128 <= bytes; i += 128) {
    a = _mm256_add_epi64(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_add_epi64(b, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    c = _mm256_add_epi64(c, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    d = _mm256_add_epi64(d, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d)));
  return ReadWords(p, bytes, i, lanes[0] + lanes[1] + lanes[2] + lanes[3]);
}
#endif

using ReadFn = uint64_t (*)(const uint8_t*, size_t);

uint64_t ReadPortable(const uint8_t* p, size_t bytes) { return ReadWords(p, bytes, 0, 0); }

ReadFn ReadFor(const KernelTable& t) {
#if defined(__x86_64__) || defined(__i386__)
  if (std::strncmp(t.name, "avx512", 6) == 0) return &Read512;
  if (std::strncmp(t.name, "avx2", 4) == 0) return &Read256;
#endif
  return &ReadPortable;
}

struct Stream {
  int32_t dtype;
  size_t scale;
  bool panels;
  size_t layers, bytes;
  std::vector<size_t> offset;  // of each matrix of a layer
  uint8_t* data = nullptr;
};

bool Build(const WeightKernels& k, int32_t dtype, size_t min_bytes, size_t scale, Stream* s) {
  s->dtype = dtype;
  s->scale = scale;
  s->panels = k.matvec_panels != nullptr;
  size_t layer = 0;
  for (const Shape& m : kLayer) {
    s->offset.push_back(layer);
    layer += m.rows / scale * RowBytes(dtype, m.cols / scale);
  }
  s->layers = (min_bytes + layer - 1) / layer;
  s->bytes = s->layers * layer;
  s->data = static_cast<uint8_t*>(std::aligned_alloc(64, (s->bytes + 63) / 64 * 64));
  if (s->data == nullptr) return false;
  for (size_t i = 0; i < sizeof kLayer / sizeof kLayer[0]; ++i) {
    const std::vector<uint8_t> m = Encode(dtype, {kLayer[i].rows / scale, kLayer[i].cols / scale}, s->panels);
    for (size_t l = 0; l < s->layers; ++l) std::memcpy(s->data + l * layer + s->offset[i], m.data(), m.size());
  }
  return true;
}

// One pass over the stream on `threads` threads; returns GB/s.
double Pass(const KernelTable& t, const Stream& s, int threads, bool kernel) {
  const WeightKernels& k = t.weights[s.dtype];
  const size_t layer = s.bytes / s.layers, nm = sizeof kLayer / sizeof kLayer[0];
  const ReadFn read = ReadFor(t);
  Barrier barrier(threads);
  std::atomic<uint64_t> sums{0};
  auto run = [&](int id) {
    std::vector<float> x(5632), y(5632);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 201) / 100.0f - 1.0f;
    std::vector<uint8_t> q(tinyai::QuantizedInputBytes(tinyai::kInputInt16, 5632) + 64);
    uint64_t local = 0;
    for (size_t l = 0; l < s.layers; ++l) {
      for (size_t i = 0; i < nm; ++i) {
        const Shape m = {kLayer[i].rows / s.scale, kLayer[i].cols / s.scale};
        const size_t rb = RowBytes(s.dtype, m.cols), unit = s.panels ? tinyai::kPanelRows : 1;
        const size_t units = m.rows / unit, per = (units + threads - 1) / threads;
        const size_t a = std::min(units, per * id), b = std::min(units, a + per);
        const uint8_t* w = s.data + l * layer + s.offset[i] + a * unit * rb;
        if (!kernel) {
          if (a < b) local += read(w, (b - a) * unit * rb);
        } else if (a < b) {
          if (k.input == tinyai::kInputF32) {
            k.matvec(w, rb, x.data(), y.data(), b - a, m.cols);
          } else {
            if (k.input == tinyai::kInputInt8) {
              t.quantize_input(x.data(), m.cols, reinterpret_cast<tinyai::InputGroup*>(q.data()));
            } else {
              t.quantize_input16(x.data(), m.cols, reinterpret_cast<tinyai::InputGroup16*>(q.data()));
            }
            if (s.panels) k.matvec_panels(w, rb, q.data(), y.data(), b - a, m.cols);
            else k.matvec_q(w, rb, q.data(), y.data(), b - a, m.cols);
          }
          local += static_cast<uint64_t>(y[0] != 0.0f);
        }
        barrier.Wait();
      }
    }
    sums += local;
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int id = 1; id < threads; ++id) workers.emplace_back(run, id);
  run(0);
  for (std::thread& w : workers) w.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  g_sink = sums.load();  // the sums are used: the reads and products stay
  return static_cast<double>(s.bytes) / seconds / 1e9;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

constexpr const char* kUsage =
    "usage: tinyai-bench-stream [--dtype D]... [--threads N] [--rounds R] [--mib M] [--scale S] [--kernels NAME]\n"
    "  --dtype D      as tinyai-convert names them (default: f32 f16 q8_g32 q4_g32 q4nl_g32)\n"
    "  --threads N    threads splitting each matrix, 1..64 (default 2)\n"
    "  --rounds R     rounds, each a kernel pass and a read pass per dtype, 1..100 (default 5)\n"
    "  --mib M        layers enough for M MiB per dtype, 1..65536 (default 512)\n"
    "  --scale S      every matrix S times smaller on both sides: 1, 2, 4 or 8 (default 1; the\n"
    "                 super-block dtypes need rows of whole blocks of 256: 1 or 2)\n"
    "  --kernels NAME a kernel table (default: the best this CPU runs; TINYAI_KERNELS also picks)\n";

const char* Name(int32_t dtype) { return tinyaiDTypeName(static_cast<TinyAIDType>(dtype)); }

int Run(int argc, char** argv) {
  namespace tt = tinyai_tools;
  std::vector<int32_t> dtypes;
  int threads = 2, rounds = 5, mib = 512, scale = 1;
  const KernelTable* table = &tinyai::kernels::Best();
  tt::Args args;
  args.Flag({"--dtype"}, [&](const std::string&, const char* v) { dtypes.push_back(tt::ParseDtype(v)); });
  args.Flag({"--threads"}, [&](const std::string& f, const char* v) { threads = tt::ParseInt32(f, v, 1, 64); });
  args.Flag({"--rounds"}, [&](const std::string& f, const char* v) { rounds = tt::ParseInt32(f, v, 1, 100); });
  args.Flag({"--mib"}, [&](const std::string& f, const char* v) { mib = tt::ParseInt32(f, v, 1, 65536); });
  args.Flag({"--scale"}, [&](const std::string& f, const char* v) {
    scale = tt::ParseInt32(f, v, 1, 8);
    if ((scale & (scale - 1)) != 0) throw tt::UsageError("--scale " + std::string(v) + ": give 1, 2, 4 or 8");
  });
  args.Flag({"--kernels"}, [&](const std::string&, const char* v) {
    const KernelTable* all[16];
    const size_t n = std::min<size_t>(tinyai::kernels::AvailableTables(all, 16), 16);
    std::string names;
    for (size_t j = 0; j < n; ++j) {
      if (std::strcmp(all[j]->name, v) == 0) {
        table = all[j];
        return;
      }
      names += std::string(j ? ", " : "") + all[j]->name;
    }
    throw tt::UsageError(std::string("no kernel table '") + v + "' on this CPU (it runs: " + names + ")");
  });
  std::vector<std::string> positional;
  int exit_code = 0;
  if (!args.Parse(argc, argv, kTool, kUsage, &positional, &exit_code)) return exit_code;
  if (!positional.empty()) throw tt::UsageError("unexpected argument " + positional[0]);
  if (dtypes.empty()) {
    dtypes = {TINYAI_DTYPE_F32, TINYAI_DTYPE_F16, TINYAI_DTYPE_Q8_G32, TINYAI_DTYPE_Q4_G32, TINYAI_DTYPE_Q4NL_G32};
  }
  std::vector<Stream> streams(dtypes.size());
  for (size_t d = 0; d < dtypes.size(); ++d) {
    const WeightKernels& k = table->weights[dtypes[d]];
    if (k.matvec == nullptr && k.matvec_q == nullptr) {
      throw tt::UsageError(std::string("table ") + table->name + " has no products for " + Name(dtypes[d]));
    }
    if (tinyai::IsSuperBlockDType(dtypes[d]) && (5632 / scale) % 256 != 0) {
      throw tt::UsageError(std::string(Name(dtypes[d])) + " rows hold whole blocks of 256 values: --scale " +
                           std::to_string(scale) + " leaves rows of " + std::to_string(5632 / scale) +
                           "; give --scale 1 or 2");
    }
    if (!Build(k, dtypes[d], static_cast<size_t>(mib) << 20, static_cast<size_t>(scale), &streams[d])) {
      throw tt::RuntimeError(TINYAI_ERR_OUT_OF_MEMORY, "cannot allocate " + std::to_string(mib) + " MiB for " +
                                                           Name(dtypes[d]) + "; give a smaller --mib");
    }
  }
  std::vector<std::vector<double>> kernel(dtypes.size()), read(dtypes.size());
  for (int r = 0; r < rounds; ++r) {
    for (size_t d = 0; d < dtypes.size(); ++d) {
      // An untimed read first: on the Zen 5 VM a page left alone for some
      // seconds is slow to reach again (the first pass over a dtype built
      // 15 s before read 1.5-3.4 GB/s, the next 40), with no page fault in
      // the guest. Then the two passes, in turns first.
      Pass(*table, streams[d], threads, false);
      const bool kernel_first = r % 2 == 0;
      const double first = Pass(*table, streams[d], threads, kernel_first);
      const double second = Pass(*table, streams[d], threads, !kernel_first);
      kernel[d].push_back(kernel_first ? first : second);
      read[d].push_back(kernel_first ? second : first);
    }
  }
  std::printf("%s: table %s, %d threads, %d rounds\n", kTool, table->name, threads, rounds);
  for (size_t d = 0; d < dtypes.size(); ++d) {
    const Stream& s = streams[d];
    std::printf("%-9s %s, %zu layers, %.0f MB\n", tinyaiDTypeName(static_cast<TinyAIDType>(s.dtype)),
                s.panels ? "panels" : "rows", s.layers, s.bytes / 1e6);
    std::printf("  kernel %6.1f GB/s  (", Median(kernel[d]));
    for (double g : kernel[d]) std::printf(" %.1f", g);
    std::printf(" )\n  read   %6.1f GB/s  (", Median(read[d]));
    for (double g : read[d]) std::printf(" %.1f", g);
    std::vector<double> ratio;
    for (size_t r = 0; r < kernel[d].size(); ++r) ratio.push_back(kernel[d][r] / read[d][r]);
    std::printf(" )\n  kernel / read %.2f  (", Median(kernel[d]) / Median(read[d]));
    for (double q : ratio) std::printf(" %.2f", q);
    std::printf(" )\n");
  }
  for (Stream& s : streams) std::free(s.data);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tinyai_tools::Main(kTool, kUsage, [&] { return Run(argc, argv); });
}
