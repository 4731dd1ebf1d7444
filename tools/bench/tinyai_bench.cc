// tinyai-bench: prompt-processing and decode speed, time to first token and
// peak RSS of a model, beside the effective weight bandwidth and the
// machine's measured memory read bandwidth; under a memory limit or cache
// cap, what the weight cache read from storage per decoded token.
//   tinyai-bench -m MODEL.tmai [-t THREADS] [--prompt N] [--gen N] [-c|--context N]
//                [--mem-limit SIZE] [--cache SIZE] [--no-prefetch] [--prefetch-threads N]
//                [--lru] [--kv-type T] [--fallback STEPS] [--no-probe] [--huge-pages] [--json]
//                [--memory-report FILE] [--memory-trace FILE]
//   tinyai-bench --probe [-t THREADS] [--huge-pages] [--json]
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "port/port.h"
#include "tinyai/tinyai.h"
#include "tools/bench/bandwidth_probe.h"
#include "tools/bench/huge_pages.h"
#include "tools/common/cli.h"
#include "tools/common/memory_report.h"
#include "tools/eval/compare.h"

namespace {

const char kTool[] = "tinyai-bench";

const char kUsage[] =
    "usage: tinyai-bench -m MODEL.tmai [-t THREADS] [--prompt N] [--gen N] [-c|--context N]\n"
    "                    [--mem-limit SIZE] [--cache SIZE] [--no-prefetch] [--prefetch-threads N]\n"
    "                    [--lru] [--kv-type T] [--fallback STEPS] [--no-probe] [--probe-mib M] [--huge-pages]\n"
    "                    [--json] [--memory-report FILE] [--memory-trace FILE]\n"
    "       tinyai-bench --probe [-t THREADS] [--probe-mib M] [--huge-pages] [--json]\n"
    "       tinyai-bench -h | --help | --version\n"
    "  -m MODEL.tmai     the model (a llama .tmai)\n"
    "  -t THREADS        compute threads, 0..256 (default 0 = one per core)\n"
    "  --prompt N        prompt tokens for prompt processing and time to first token, 1..1048576 (default 128)\n"
    "  --gen N           tokens decoded one at a time, 1..1048576 (default 128)\n"
    "  -c, --context N   tokens the KV cache holds, 0..1048576 (default 0 = the model's seq_len)\n"
    "  --mem-limit SIZE  bound everything TinyAI holds (weights, KV, activations, tables), e.g. 232M\n"
    "                    or auto: what this process's memory cgroup (else MemAvailable) leaves, less\n"
    "                    16 MiB for the process (default: no limit)\n"
    "  --cache SIZE      cap only the weight cache, e.g. 16M (default: no cap unless --mem-limit)\n"
    "  --prefetch-threads N  background loaders, 0..64 (default 1; 0 = load ahead inline)\n"
    "  --no-prefetch     no loading ahead\n"
    "  --lru             plain LRU eviction instead of the adaptive policy\n"
    "  --fallback STEPS  when it does not fit --mem-limit: the steps to take, as tinyai-generate --fallback\n"
    "  --kv-type T       how the KV cache stores keys and values: f32 (default), f16, int8, or auto\n"
    "                    (the most precise that reaches the best mode within --mem-limit)\n"
    "  --no-probe        skip the memory bandwidth probe (its 1 GiB buffer would not fit a memory cgroup)\n"
    "  --probe           measure the machine's memory read bandwidth only (no model)\n"
    "  --probe-mib M     buffer of the bandwidth probe in MiB, 16..65536 (default 1024)\n"
    "  --huge-pages      read the model into anonymous memory in transparent huge pages (Linux's\n"
    "                    MADV_HUGEPAGE) and run it from there, the probe's buffer too; the report\n"
    "                    says how many bytes the kernel gave in huge pages (default: the model opened\n"
    "                    from its file, its weights read into the weight cache)\n"
    "  --json            one JSON object on stdout\n"
    "  --memory-report FILE  write where memory went as JSON: TinyAI's account by category (recorded\n"
    "                    at each allocation) beside the OS's RSS (anonymous and file) at open, index,\n"
    "                    plan, warm-up, every 16 tokens and close; peak_bytes and peak_rss_bytes\n"
    "  --memory-trace FILE  the same at every token as CSV, for tinyai-memplot FILE -o FILE.svg\n"
    "  -h, --help        this help; --version: the library's version\n"
    "SIZE: bytes, or with K, M or G, with or without B or iB (binary, decimals allowed:\n"
    "1.5M = 1.5MB = 1.5MiB = 1572864 bytes), at least 1.\n"
    "Exit status: 0 success, 1 runtime error (\"tinyai-bench: STATUS: message\" on stderr), 2 usage error.\n";

// The probe's buffer in MiB: at most 64 GiB, and what a size_t holds.
constexpr int32_t kMaxProbeMib = SIZE_MAX >> 20 < 65536 ? static_cast<int32_t>(SIZE_MAX >> 21) : 65536;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct BenchOptions {
  int threads = 0, prompt_n = 128, gen_n = 128, context = 0;
  uint64_t mem_limit = 0;  // TinyAILLMConfig.memoryLimit; 0 = none
  TinyAIKVType kv_type = TINYAI_KV_F32;
  TinyAIFallback fallback[TINYAI_MAX_FALLBACK_STEPS] = {};
  TinyAIMmapConfig mmap{};
  bool huge_pages = false;  // the model read into huge pages (huge_pages.h), not mapped
};

// Cache counters over one phase (the difference of two snapshots).
struct CacheDelta {
  uint64_t hits = 0, misses = 0, bytes_read = 0, evictions = 0, prefetch_loads = 0, prefetch_dropped = 0,
           prefetch_hits = 0, stalls = 0;
};

CacheDelta Diff(const TinyAICacheStats& a, const TinyAICacheStats& b) {
  CacheDelta d;
  d.hits = b.hits - a.hits;
  d.misses = b.misses - a.misses;
  d.bytes_read = b.bytesRead - a.bytesRead;
  d.evictions = b.evictions - a.evictions;
  d.prefetch_loads = b.prefetchLoads - a.prefetchLoads;
  d.prefetch_dropped = b.prefetchDropped - a.prefetchDropped;
  d.prefetch_hits = b.prefetchHits - a.prefetchHits;
  d.stalls = b.stalls - a.stalls;
  return d;
}

struct ModelFigures {
  TinyAIModelInfo info{};
  int prompt_n = 0, gen_n = 0;
  double pp_tps = 0, decode_tps = 0, ttft_ms = 0;
  double open_ms = 0;    // tinyaiOpenMappedModel: the index read and checked (a GGUF's built)
  double runner_ms = 0;  // tinyaiCreateLLM: with no cap, every weight loaded (and a .tmai's checked)
  uint64_t bytes_per_token = 0;  // at the mean decode position
  double effective_gbps = 0;
  uint64_t peak_rss = 0, weights_resident = 0;
  CacheDelta prompt_cache, decode_cache;  // prompt phase (after warm-up) and decode phase
  double read_bytes_per_token = 0;        // decode_cache.bytes_read / decoded tokens
  double read_gbps = 0;                   // decode_cache.bytes_read / decode seconds
  TinyAIMemoryReport mem{};               // at the end of the run
  uint64_t model_bytes = 0, huge_page_bytes = 0;  // --huge-pages: the file, and what the kernel gave
  uint64_t process_huge_page_bytes = 0;            // the process's AnonHugePages at the run's end
};

// The embedding table's bytes in memory (its tensors of that role).
uint64_t EmbeddingBytes(const TinyAIMappedModel* model) {
  uint64_t bytes = 0;
  const int n = tinyaiGetMappedTensorCount(model);
  for (int i = 0; i < n; ++i) {
    TinyAITensorInfo t{};
    t.structSize = sizeof t;
    tinyai_tools::Check(tinyaiGetMappedTensorInfo(model, i, &t));
    if (t.role == TINYAI_ROLE_TOKEN_EMBEDDING) bytes += t.decodedSize;
  }
  return bytes;
}

// Bytes read from memory to decode one token at position pos: every weight
// once, except the embedding table (one row) unless it is also the classifier,
// plus the keys and values attended to (the KV cache's bytes per position,
// whatever its type).
// table: the embedding table's bytes in memory, whatever its dtype (a q4
// table is not vocab x dim floats).
uint64_t BytesPerToken(const TinyAIModelInfo& m, uint64_t table, double pos) {
  const uint64_t row = m.vocabSize > 0 ? table / static_cast<uint64_t>(m.vocabSize) : 0;
  uint64_t weights = m.weightBytes - table + row + (m.sharedClassifier ? table : 0);
  const double kv_per_position = m.contextLength > 0 ? static_cast<double>(m.kvCacheBytes) / m.contextLength : 0.0;
  return weights + static_cast<uint64_t>(pos * kv_per_position);
}

// Runs the benchmark; a failure throws its status (tinyai_tools::RuntimeError)
// after the handles are closed.
void BenchModel(const std::string& path, const BenchOptions& o, ModelFigures* f) {
  TinyAIMmapConfig mc = o.mmap;
  // Declared before the model, so it outlives it.
  tinyai_tools::HugePageBuffer image;
  tinyai_tools::ModelHandle model_handle;
  const double opened_at = Now();
  if (o.huge_pages) {
    const uint64_t before = tinyai_tools::HugePageBytes();
    tinyai_tools::ReadFileIntoHugePages(path, &image);
    const uint64_t after = tinyai_tools::HugePageBytes();
    f->model_bytes = image.size();
    // The last page may reach past the file's end: count the file's bytes.
    f->huge_page_bytes = after > before ? after - before : 0;
    if (f->huge_page_bytes > f->model_bytes) f->huge_page_bytes = f->model_bytes;
    model_handle.reset(tinyaiOpenMappedModelFromMemory(image.data(), image.size(), &mc));
    if (!model_handle) tinyai_tools::ThrowLastError(tinyaiGetLastError());
  } else {
    model_handle = tinyai_tools::OpenModel(path, &mc);
  }
  TinyAIMappedModel* model = model_handle.get();
  const double created_at = Now();
  f->open_ms = (created_at - opened_at) * 1e3;
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  cfg.threads = o.threads;
  cfg.contextLength = o.context;
  cfg.memoryLimit = static_cast<size_t>(o.mem_limit);
  cfg.kvType = o.kv_type;
  for (int i = 0; i < TINYAI_MAX_FALLBACK_STEPS; ++i) cfg.fallback[i] = o.fallback[i];
  tinyai_tools::LLMHandle llm_handle = tinyai_tools::CreateLLM(model, cfg, kTool);
  TinyAILLM* llm = llm_handle.get();
  f->runner_ms = (Now() - created_at) * 1e3;
  tinyai_tools::SayFallback(kTool, llm);
  tinyai_tools::SayLLMWarning(kTool, llm);
  TinyAIStatus s = TINYAI_OK;
  f->info.structSize = sizeof f->info;
  tinyaiGetLLMModelInfo(llm, &f->info);
  const int ctx = f->info.contextLength;
  int prompt_n = o.prompt_n, gen_n = o.gen_n;
  if (prompt_n + gen_n > ctx) {
    prompt_n = ctx / 2;
    gen_n = ctx - prompt_n;
  }
  f->prompt_n = prompt_n;
  f->gen_n = gen_n;
  std::vector<float> logits(static_cast<size_t>(f->info.vocabSize));
  // A made-up text as the model starts one: BOS first when it adds BOS
  // (tokenizer.add_bos), then random tokens.
  uint64_t rng = 12345;
  const std::vector<int32_t> tokens = tinyai_tools::RandomText(llm, prompt_n, &rng);
  TinyAISamplerConfig greedy = tinyaiCreateDefaultSamplerConfig();
  greedy.temperature = 0.0f;
  TinyAICacheStats c0, c1, c2;
  c0.structSize = c1.structSize = c2.structSize = sizeof(TinyAICacheStats);
  // Warm-up: every weight is touched once, so the figures are steady-state
  // (without a cap every weight is then resident; with one, the cache holds
  // what its policy keeps).
  s = tinyaiLLMEval(llm, tokens.data(), prompt_n < 8 ? prompt_n : 8, logits.data());
  if (s == TINYAI_OK) s = tinyaiResetLLM(llm);
  int32_t next = 0;
  if (s == TINYAI_OK) s = tinyaiGetMappedModelCacheStats(model, &c0);
  double t0 = Now();
  if (s == TINYAI_OK) s = tinyaiLLMEval(llm, tokens.data(), prompt_n, logits.data());
  double t1 = Now();
  if (s == TINYAI_OK) s = tinyaiLLMSample(llm, logits.data(), &greedy, &rng, &next);
  double t2 = Now();
  if (s == TINYAI_OK) s = tinyaiGetMappedModelCacheStats(model, &c1);
  // The decode phase is timed from just after the snapshot.
  const double t2d = Now();
  for (int i = 0; i < gen_n && s == TINYAI_OK; ++i) {
    s = tinyaiLLMEval(llm, &next, 1, logits.data());
    if (s == TINYAI_OK) s = tinyaiLLMSample(llm, logits.data(), &greedy, &rng, &next);
  }
  double t3 = Now();
  if (s == TINYAI_OK) s = tinyaiGetMappedModelCacheStats(model, &c2);
  f->mem.structSize = sizeof f->mem;
  if (s == TINYAI_OK) s = tinyaiGetLLMMemoryReport(llm, &f->mem);
  tinyai_tools::Check(s);
  f->pp_tps = prompt_n / (t1 - t0);
  f->ttft_ms = (t2 - t0) * 1e3;
  f->decode_tps = gen_n / (t3 - t2d);
  f->bytes_per_token = BytesPerToken(f->info, EmbeddingBytes(model), prompt_n + gen_n / 2.0);
  f->effective_gbps = static_cast<double>(f->bytes_per_token) * f->decode_tps / 1e9;
  f->prompt_cache = Diff(c0, c1);
  f->decode_cache = Diff(c1, c2);
  f->read_bytes_per_token = static_cast<double>(f->decode_cache.bytes_read) / gen_n;
  f->read_gbps = static_cast<double>(f->decode_cache.bytes_read) / (t3 - t2d) / 1e9;
  f->weights_resident = tinyaiGetMappedModelMemoryUsage(model);
  f->peak_rss = tinyaiGetProcessPeakRss();
  f->process_huge_page_bytes = tinyai_tools::HugePageBytes();
}

void PrintCacheJson(const char* name, const CacheDelta& d) {
  std::printf(",\"%s\":{\"hits\":%" PRIu64 ",\"misses\":%" PRIu64 ",\"bytes_read\":%" PRIu64
              ",\"evictions\":%" PRIu64 ",\"prefetch_loads\":%" PRIu64 ",\"prefetch_dropped\":%" PRIu64
              ",\"prefetch_hits\":%" PRIu64 ",\"stalls\":%" PRIu64 "}",
              name, d.hits, d.misses, d.bytes_read, d.evictions, d.prefetch_loads, d.prefetch_dropped,
              d.prefetch_hits, d.stalls);
}

double Fraction(double a, double b) { return b > 0 ? a / b : 0.0; }

int Run(int argc, char** argv) {
  namespace tt = tinyai_tools;
  std::string model, report_path, trace_path;
  bool json = false, probe_only = false, probe = true;
  int probe_mib = 1024;
  BenchOptions o;
  o.mmap = tinyaiCreateDefaultMmapConfig();
  // The library's default caps the weight cache (256 MB); the benchmark
  // measures the whole model unless a cap or limit is asked for.
  o.mmap.maxCacheSize = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw tinyai_tools::UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "-m") model = value();
    else if (a == "-t") o.threads = tt::ParseThreads(a, value());
    else if (a == "--prompt") o.prompt_n = tt::ParseInt32(a, value(), 1, tinyai::limits::kMaxSeqLen);
    else if (a == "--gen") o.gen_n = tt::ParseInt32(a, value(), 1, tinyai::limits::kMaxSeqLen);
    else if (a == "--context" || a == "-c") o.context = tt::ParseContext(a, value());
    else if (a == "--mem-limit") o.mem_limit = tt::ParseMemLimit(a, value());
    else if (a == "--cache") o.mmap.maxCacheSize = tt::ParseByteLimit(a, value());
    else if (a == "--prefetch-threads") o.mmap.prefetchThreads = tt::ParsePrefetchThreads(a, value());
    else if (a == "--no-prefetch") o.mmap.prefetchEnabled = false;
    else if (a == "--lru") o.mmap.adaptiveCaching = false;
    else if (a == "--kv-type") o.kv_type = tt::ParseKvType(a, value());
    else if (a == "--fallback") tt::ParseFallback(a, value(), o.fallback);
    else if (a == "--probe-mib") probe_mib = tt::ParseInt32(a, value(), 16, kMaxProbeMib);
    else if (a == "--no-probe") probe = false;
    else if (a == "--huge-pages") o.huge_pages = true;
    else if (a == "--json") json = true;
    else if (a == "--memory-report") report_path = value();
    else if (a == "--memory-trace") trace_path = value();
    else if (a == "--probe") probe_only = true;
    else if (a == "-h" || a == "--help") { std::fputs(kUsage, stdout); return 0; }
    else if (a == "--version") return tt::PrintVersion(kTool);
    else throw tt::UsageError("unknown argument " + a);
  }
  if (!probe_only && model.empty()) throw tt::UsageError("-m MODEL or --probe is required");
  if (probe_only && !model.empty()) throw tt::UsageError("--probe measures the machine alone; drop -m MODEL");
  if (probe_only) probe = true;
  if (probe_only && (!report_path.empty() || !trace_path.empty())) {
    throw tt::UsageError("--memory-report and --memory-trace record a model's run; --probe runs none");
  }
  tt::SayMemLimit(kTool);
  const int cores = tinyai::port::CpuCount();
  if (o.threads <= 0) o.threads = cores;
  const int threads = o.threads;

  // The probe always uses every core: it measures the machine, not the run.
  // A shared machine's bandwidth drifts with its neighbours, so the probe
  // brackets the model run and the better result is the figure. The probe
  // before the run happens in a child process, so its 1 GiB buffer never
  // counts in this process's peak RSS.
  const size_t probe_bytes = static_cast<size_t>(probe_mib) << 20;
  tinyai_tools::BandwidthResult bw;
  if (!probe_only && probe) bw = tinyai_tools::MeasureReadBandwidthInChild(cores, probe_bytes, 7, o.huge_pages);
  ModelFigures f;
  if (!probe_only) {
    // Around the model only: the probe's buffer is the tool's, not TinyAI's.
    tt::MemoryRecorder recorder(kTool, report_path, trace_path, {model});
    recorder.Note("model", tt::JsonString(model));
    recorder.Note("mem_limit", std::to_string(o.mem_limit));
    BenchModel(model, o, &f);
    recorder.Note("prompt_tokens", std::to_string(f.prompt_n));
    recorder.Note("generated_tokens", std::to_string(f.gen_n));
    recorder.Finish();
  }
  tinyai_tools::BandwidthResult same = bw;
  if (probe) {
    tinyai_tools::BandwidthResult after = tinyai_tools::MeasureReadBandwidth(cores, probe_bytes, 7, o.huge_pages);
    if (after.best_gbps > bw.best_gbps) bw = after;
    // What the run's own thread count can pull (one core cannot saturate memory).
    same = bw;
    if (!probe_only && threads != cores) {
      same = tinyai_tools::MeasureReadBandwidth(threads, probe_bytes, 7, o.huge_pages);
    }
  }
  const bool capped = !probe_only && (f.mem.memoryLimit > 0 || f.mem.weightCacheCap > 0);
  if (json) {
    std::printf("{\"kernels\":\"%s\",\"cores\":%d,\"memory_read_gbps\":%.2f,\"memory_read_gbps_median\":%.2f",
                probe ? bw.kernels : tinyai::kernels::Best().name, cores, bw.best_gbps, bw.median_gbps);
    std::printf(",\"huge_pages\":%s", o.huge_pages ? "true" : "false");
    if (o.huge_pages && probe) std::printf(",\"probe_huge_page_bytes\":%" PRIu64, bw.huge_page_bytes);
    if (o.huge_pages && !probe_only) {
      std::printf(",\"model_file_bytes\":%" PRIu64 ",\"model_huge_page_bytes\":%" PRIu64, f.model_bytes,
                  f.huge_page_bytes);
    }
    if (!probe_only) {
      std::printf(",\"model\":%s,\"threads\":%d,\"prompt_tokens\":%d,\"gen_tokens\":%d,\"weights_bytes\":%" PRIu64
                  ",\"pp_tokens_per_s\":%.2f,\"decode_tokens_per_s\":%.2f,\"ttft_ms\":%.2f,\"open_ms\":%.2f,\"runner_ms\":%.2f,\"bytes_per_token\":%" PRIu64
                  ",\"effective_gbps\":%.2f,\"bandwidth_fraction\":%.3f,\"memory_read_gbps_same_threads\":%.2f"
                  ",\"bandwidth_fraction_same_threads\":%.3f,\"peak_rss_bytes\":%" PRIu64
                  ",\"weights_resident_bytes\":%" PRIu64 ",\"huge_page_bytes\":%" PRIu64,
                  tt::JsonString(model).c_str(), threads, f.prompt_n, f.gen_n, f.info.weightBytes, f.pp_tps, f.decode_tps, f.ttft_ms, f.open_ms, f.runner_ms,
                  f.bytes_per_token, f.effective_gbps, Fraction(f.effective_gbps, bw.best_gbps), same.best_gbps,
                  Fraction(f.effective_gbps, same.best_gbps), f.peak_rss, f.weights_resident,
                  f.process_huge_page_bytes);
      std::printf(",\"kv_type\":\"%s\"", tinyaiKVTypeName(f.info.kvType));
      std::printf(",\"context\":%d,\"mem_limit_bytes\":%" PRIu64 ",\"cache_cap_bytes\":%" PRIu64
                  ",\"minimum_limit_bytes\":%" PRIu64 ",\"prefetch\":%s,\"prefetch_threads\":%d,\"adaptive\":%s"
                  ",\"read_bytes_per_token\":%.0f,\"read_gbps\":%.3f,\"accounted_peak_bytes\":%" PRIu64
                  ",\"accounted_weights_peak_bytes\":%" PRIu64 ",\"kv_bytes\":%" PRIu64
                  ",\"activation_bytes\":%" PRIu64 ",\"other_bytes\":%" PRIu64,
                  f.info.contextLength, static_cast<uint64_t>(f.mem.memoryLimit), static_cast<uint64_t>(f.mem.weightCacheCap),
                  static_cast<uint64_t>(f.mem.minimumMemoryLimit), o.mmap.prefetchEnabled ? "true" : "false",
                  o.mmap.prefetchThreads, o.mmap.adaptiveCaching ? "true" : "false", f.read_bytes_per_token,
                  f.read_gbps, static_cast<uint64_t>(f.mem.peakTotalBytes),
                  static_cast<uint64_t>(f.mem.weightPeakBytes), static_cast<uint64_t>(f.mem.kvCacheBytes),
                  static_cast<uint64_t>(f.mem.activationBytes), static_cast<uint64_t>(f.mem.otherBytes));
      PrintCacheJson("decode_cache", f.decode_cache);
      PrintCacheJson("prompt_cache", f.prompt_cache);
    }
    std::printf("}\n");
  } else {
    if (probe) {
      std::printf("memory read bandwidth: %.2f GB/s best, %.2f median (%d cores, %s, %d MiB buffer", bw.best_gbps,
                  bw.median_gbps, cores, bw.kernels, probe_mib);
      if (o.huge_pages) std::printf(", %.1f MiB of it in huge pages", tinyai_tools::Mib(bw.huge_page_bytes));
      std::printf(")\n");
    } else {
      std::printf("memory read bandwidth: not measured (--no-probe)\n");
    }
    if (!probe_only) {
      std::printf("model %s: %.1f MiB of weights, %d threads, context %d, %s KV cache\n", model.c_str(),
                  tinyai_tools::Mib(f.info.weightBytes), threads, f.info.contextLength, tinyaiKVTypeName(f.info.kvType));
      if (o.huge_pages) {
        std::printf("  model read into memory: %.1f MiB of the file's %.1f MiB in huge pages\n",
                    tinyai_tools::Mib(f.huge_page_bytes), tinyai_tools::Mib(f.model_bytes));
      }
      if (capped) {
        std::printf("  memory limit %s, weight cache cap %s (least --mem-limit for these options %s), prefetch %s "
                    "(%d threads), %s\n",
                    f.mem.memoryLimit ? (std::to_string(f.mem.memoryLimit) + " bytes").c_str() : "none",
                    f.mem.weightCacheCap ? (std::to_string(f.mem.weightCacheCap) + " bytes").c_str() : "none",
                    tinyai_tools::LimitText(f.mem.minimumMemoryLimit).c_str(), o.mmap.prefetchEnabled ? "on" : "off",
                    o.mmap.prefetchThreads, o.mmap.adaptiveCaching ? "adaptive" : "LRU");
      }
      std::printf("  prompt processing  %8.2f tokens/s (%d tokens)\n", f.pp_tps, f.prompt_n);
      std::printf("  time to first token %7.2f ms\n", f.ttft_ms);
      std::printf("  open                %7.2f ms (the model), runner %.2f ms\n", f.open_ms, f.runner_ms);
      std::printf("  decode             %8.2f tokens/s (%d tokens)\n", f.decode_tps, f.gen_n);
      if (probe) {
        std::printf("  effective bandwidth %7.2f GB/s = %.1f MiB/token x tokens/s (%.0f%% of measured; %.0f%% of %.2f GB/s "
                    "that %d thread(s) can read)\n",
                    f.effective_gbps, tinyai_tools::Mib(f.bytes_per_token), 100.0 * Fraction(f.effective_gbps, bw.best_gbps),
                    100.0 * Fraction(f.effective_gbps, same.best_gbps), same.best_gbps, threads);
      } else {
        std::printf("  effective bandwidth %7.2f GB/s = %.1f MiB/token x tokens/s\n", f.effective_gbps,
                    tinyai_tools::Mib(f.bytes_per_token));
      }
      const CacheDelta& d = f.decode_cache;
      std::printf("  read from storage  %8.2f MiB/token while decoding (%.3f GB/s)\n",
                  tinyai_tools::Mib(static_cast<uint64_t>(f.read_bytes_per_token)), f.read_gbps);
      std::printf("  decode cache: %" PRIu64 " hits, %" PRIu64 " misses, %" PRIu64 " evictions, prefetch %" PRIu64
                  " loads / %" PRIu64 " hits / %" PRIu64 " dropped, %" PRIu64 " stalls\n",
                  d.hits, d.misses, d.evictions, d.prefetch_loads, d.prefetch_hits, d.prefetch_dropped, d.stalls);
      std::printf("  peak RSS           %8.1f MiB (weights resident %.1f MiB; %.1f MiB of memory in huge pages)\n",
                  tinyai_tools::Mib(f.peak_rss), tinyai_tools::Mib(f.weights_resident),
                  tinyai_tools::Mib(f.process_huge_page_bytes));
      std::printf("  TinyAI accounted peak %5.1f MiB: weights %.1f MiB, KV cache %.1f MiB, activations %.2f MiB, "
                  "tables %.2f MiB\n",
                  tinyai_tools::Mib(f.mem.peakTotalBytes), tinyai_tools::Mib(f.mem.weightPeakBytes),
                  tinyai_tools::Mib(f.mem.kvCacheBytes), tinyai_tools::Mib(f.mem.activationBytes),
                  tinyai_tools::Mib(f.mem.otherBytes));
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tinyai_tools::Main(kTool, kUsage, [&] { return Run(argc, argv); });
}
