// tinyai-bench: prompt-processing and decode speed, time to first token and
// peak RSS of a model, beside the effective weight bandwidth and the
// machine's measured memory read bandwidth; under a memory limit or cache
// cap, what the weight cache read from storage per decoded token.
//   tinyai-bench [-m] MODEL [-t LIST] [-p LIST] [-n LIST] [-r N] [-c|--context N] [-o text|md|json|csv]
//                [--mem-limit SIZE] [--cache SIZE] [--no-prefetch] [--prefetch-threads N]
//                [--direct-reads auto|on|off]
//                [--lru] [--kv-type T] [--fallback STEPS] [--no-probe] [--huge-pages] [--json]
//                [--memory-report FILE] [--memory-trace FILE]
//   tinyai-bench --probe [--huge-pages] [-o FORMAT | --json]
#include <chrono>
#include <cmath>
#include <cstring>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "port/port.h"
#include "tinyai/tinyai.h"
#include "tools/bench/bandwidth_probe.h"
#include "tools/bench/huge_pages.h"
#include "tools/common/args.h"
#include "tools/common/cli.h"
#include "tools/common/memory_report.h"
#include "tools/eval/compare.h"

namespace {

const char kTool[] = "tinyai-bench";

const char kUsage[] =
    "usage: tinyai-bench [-m] MODEL [-t LIST] [-p LIST] [-n LIST] [-r N] [-c|--context N] [-o FORMAT]\n"
    "                    [--mem-limit SIZE] [--cache SIZE] [--no-prefetch] [--prefetch-threads N]\n"
    "                    [--direct-reads auto|on|off] [--lru] [--kv-type T] [--fallback STEPS] [--no-probe]\n"
    "                    [--probe-mib M] [--huge-pages] [--json] [--memory-report FILE] [--memory-trace FILE]\n"
    "       tinyai-bench --probe [--probe-mib M] [--huge-pages] [-o FORMAT | --json]\n"
    "       tinyai-bench -h | --help | --version\n"
    "  -m, --model MODEL  the model (a llama .tmai or GGUF file); the model alone, without -m, too\n"
    "  -t, --threads LIST compute threads, each 0..256 (default 0 = one per core)\n"
    "  -p, --prompt, --n-prompt LIST  prompt tokens for prompt processing and time to first token, each 1..1048576\n"
    "                     (default 128)\n"
    "  -n, --gen, --n-gen LIST  tokens decoded one at a time, each 1..1048576 (default 128)\n"
    "                     LIST: one value or several, comma-separated (-t 1,2 -p 32,64): a row for each\n"
    "                     combination. A prompt and generation longer than the context are refused (the\n"
    "                     defaults are cut to it, and that is said)\n"
    "  -r, --repetitions N  runs of each row, 1..1000 (default 1); the figures are then the mean ± the\n"
    "                     sample standard deviation (JSON: NAME, NAME_sd and NAME_samples). Each run opens\n"
    "                     the model, warms it up (the prompt once) and measures\n"
    "  -o, --output FORMAT  text (default: each row's figures), md (a markdown table, a row per test: ppN\n"
    "                     prompt, tgN decode), json (one object per row, one per line) or csv (a header,\n"
    "                     then a line per row)\n"
    "  --json             -o json\n"
    "  -c, --context N    tokens the KV cache holds, 0..1048576 (default 0 = the model's seq_len)\n"
    "  --mem-limit SIZE   bound everything TinyAI holds (weights, KV, activations, tables), e.g. 232M\n"
    "                     or auto: what this process's memory cgroup (else MemAvailable) leaves, less\n"
    "                     16 MiB for the process (default: no limit)\n"
    "  --cache SIZE       cap only the weight cache, e.g. 16M (default: no cap unless --mem-limit)\n"
    "  --prefetch-threads N  background loaders, 0..64 or auto (default auto: 1 while the\n"
    "                      weights fit, 4 while they stream; 0 = load ahead inline)\n"
    "  --no-prefetch      no loading ahead\n"
    "  --direct-reads M   read weights past the OS's page cache (O_DIRECT, where the file system allows):\n"
    "                     auto (default: while the cache streams, a cap below the weights), on or off\n"
    "  --lru              plain LRU eviction instead of the adaptive policy\n"
    "  --fallback STEPS   when it does not fit --mem-limit: the steps to take, as tinyai-generate --fallback\n"
    "  --kv-type T        how the KV cache stores keys and values: f32 (default), f16, int8, or auto\n"
    "                     (the most precise that reaches the best mode within --mem-limit)\n"
    "  --no-probe         skip the memory bandwidth probe\n"
    "  --probe            measure the machine's memory read bandwidth only (no model)\n"
    "  --probe-mib M      buffer of the bandwidth probe in MiB, 16..65536 (default 1024, made smaller to\n"
    "                     half of what the memory cgroup, else MemAvailable, leaves, and skipped with a note\n"
    "                     below 64 MiB; a size given that does not fit is refused)\n"
    "  --huge-pages       read the model into anonymous memory in transparent huge pages (Linux's\n"
    "                     MADV_HUGEPAGE) and run it from there, the probe's buffer too; the report\n"
    "                     says how many bytes the kernel gave in huge pages (default: the model opened\n"
    "                     from its file, its weights read into the weight cache)\n"
    "  --memory-report FILE  write where memory went as JSON: TinyAI's account by category (recorded\n"
    "                     at each allocation) beside the OS's RSS (anonymous and file) at open, index,\n"
    "                     plan, warm-up, every 16 tokens and close; peak_bytes and peak_rss_bytes (one\n"
    "                     row, -r 1)\n"
    "  --memory-trace FILE  the same at every token as CSV, for tinyai-memplot FILE -o FILE.svg\n"
    "  -h, --help         this help; --version: the library's version\n"
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
  bool prompt_given = false, gen_given = false;  // -p / -n on the command line (not cut to the context)
};

// Cache counters over one phase (the difference of two snapshots).
struct CacheDelta {
  uint64_t hits = 0, misses = 0, bytes_read = 0, bytes_read_direct = 0, evictions = 0, prefetch_loads = 0,
           prefetch_dropped = 0, prefetch_hits = 0, stalls = 0;
  uint64_t prefetch_workers = 0;  // at the end (not a difference)
};

CacheDelta Diff(const TinyAICacheStats& a, const TinyAICacheStats& b) {
  CacheDelta d;
  d.hits = b.hits - a.hits;
  d.misses = b.misses - a.misses;
  d.bytes_read = b.bytesRead - a.bytesRead;
  d.bytes_read_direct = b.bytesReadDirect - a.bytesReadDirect;
  d.evictions = b.evictions - a.evictions;
  d.prefetch_loads = b.prefetchLoads - a.prefetchLoads;
  d.prefetch_dropped = b.prefetchDropped - a.prefetchDropped;
  d.prefetch_hits = b.prefetchHits - a.prefetchHits;
  d.stalls = b.stalls - a.stalls;
  d.prefetch_workers = b.prefetchWorkers;
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
    // Given on the command line: refused, never cut. The defaults are cut
    // to the context, and that is said.
    const std::string need = "-p " + std::to_string(prompt_n) + " and -n " + std::to_string(gen_n) + " take " +
                             std::to_string(prompt_n + gen_n) + " positions; the context holds " +
                             std::to_string(ctx) + (o.context > 0 ? " (-c)" : " (the model's seq_len; -c sets it)");
    if (o.prompt_given || o.gen_given) {
      throw tinyai_tools::RuntimeError(TINYAI_ERR_CONTEXT_OVERFLOW,
                                       need + ": give a smaller -p or -n, or -c " + std::to_string(prompt_n + gen_n));
    }
    prompt_n = ctx / 2;
    gen_n = ctx - prompt_n;
    std::fprintf(stderr, "%s: by default %s: -p %d -n %d run instead\n", kTool, need.c_str(), prompt_n, gen_n);
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
  // Warm-up: the same prompt once, as llama-bench warms up, so the figures
  // are steady-state: every weight is touched (without a cap every weight is
  // then resident; with one, the cache holds what its policy keeps), and so
  // is every page of the KV cache and the pass's buffers the prompt writes.
  // Without it, the first writes to those pages were timed: on a 2-core VM
  // (Zen 5) a 128-token prompt of the 110M shape took 1.4-1.7x as long, the
  // kernel zeroing pages on the caller while the other thread waited.
  s = tinyaiLLMEval(llm, tokens.data(), prompt_n, logits.data());
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
              ",\"bytes_read_direct\":%" PRIu64 ",\"evictions\":%" PRIu64 ",\"prefetch_loads\":%" PRIu64
              ",\"prefetch_dropped\":%" PRIu64 ",\"prefetch_hits\":%" PRIu64 ",\"stalls\":%" PRIu64
              ",\"prefetch_workers\":%" PRIu64 "}",
              name, d.hits, d.misses, d.bytes_read, d.bytes_read_direct, d.evictions, d.prefetch_loads,
              d.prefetch_dropped, d.prefetch_hits, d.stalls, d.prefetch_workers);
}

double Fraction(double a, double b) { return b > 0 ? a / b : 0.0; }

// ---- Rows, repetitions and their spread ------------------------------------------------

// A comma-separated list of integers, each in [min, max] ("-t 1,2").
std::vector<int> ParseList(const std::string& flag, const std::string& v, int min, int max, const char* meaning = "") {
  std::vector<int> out;
  size_t at = 0;
  while (true) {
    const size_t comma = v.find(',', at);
    const std::string item = v.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    out.push_back(tinyai_tools::ParseInt32(flag, item.c_str(), min, max, meaning));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (out.size() > 64) throw tinyai_tools::UsageError(flag + ": at most 64 values");
  return out;
}

// Mean and sample standard deviation of one figure over the repetitions.
struct Spread {
  std::vector<double> samples;
  double mean() const {
    double sum = 0;
    for (double x : samples) sum += x;
    return samples.empty() ? 0.0 : sum / static_cast<double>(samples.size());
  }
  double sd() const {
    if (samples.size() < 2) return 0.0;
    const double m = mean();
    double sum = 0;
    for (double x : samples) sum += (x - m) * (x - m);
    return std::sqrt(sum / static_cast<double>(samples.size() - 1));
  }
};

// One combination of -t, -p and -n, run -r times.
struct Row {
  int threads = 0, prompt_n = 0, gen_n = 0;
  ModelFigures last;  // the last repetition (counts, memory, cache)
  Spread pp, decode, ttft, effective, read, open, runner;
  tinyai_tools::BandwidthResult same;  // what its thread count can read
};

std::string PlusMinus(const Spread& s, const char* format) {
  char a[64], b[64];
  std::snprintf(a, sizeof a, format, s.mean());
  if (s.samples.size() < 2) return a;
  std::snprintf(b, sizeof b, format, s.sd());
  return std::string(a) + " ± " + b;
}

void PrintSpreadJson(const char* name, const Spread& s) {
  std::printf(",\"%s\":%.3f,\"%s_sd\":%.3f,\"%s_samples\":[", name, s.mean(), name, s.sd(), name);
  for (size_t i = 0; i < s.samples.size(); ++i) std::printf("%s%.3f", i ? "," : "", s.samples[i]);
  std::printf("]");
}

// The bandwidth probe's buffer: what was asked for, fitted to the room the
// system leaves this process (its memory cgroup, else MemAvailable) - half
// of it, so the run beside it still fits. A probe that fits no buffer of at
// least kLeastProbeMib (a smaller one sits in the caches, and measures them)
// is skipped with a note; a size given with --probe-mib that does not fit is
// refused.
constexpr int kLeastProbeMib = 64;

struct ProbePlan {
  int mib = 1024;
  bool run = true;
  std::string note;  // why it was made smaller, or skipped
};

ProbePlan FitProbe(int asked_mib, bool given) {
  ProbePlan plan;
  plan.mib = asked_mib;
  TinyAIMemoryEnvironment env;
  std::memset(&env, 0, sizeof env);
  env.structSize = sizeof env;
  if (tinyaiDetectMemoryLimit(&env) != TINYAI_OK || env.roomBytes == 0) return plan;  // no bound known
  const uint64_t room_mib = static_cast<uint64_t>(env.roomBytes) >> 20;
  const uint64_t fits = room_mib / 2;
  if (static_cast<uint64_t>(asked_mib) <= fits) return plan;
  const std::string where = env.source == TINYAI_MEMORY_SOURCE_SYSTEM
                                ? "MemAvailable"
                                : std::string("the memory cgroup ") + env.cgroupPath;
  if (given) {
    throw tinyai_tools::RuntimeError(
        TINYAI_ERR_RESOURCE_EXHAUSTED,
        "--probe-mib " + std::to_string(asked_mib) + " does not fit: " + where + " leaves " +
            std::to_string(room_mib) + " MiB, and the probe takes at most half of it; give --probe-mib " +
            (fits >= kLeastProbeMib ? std::to_string(fits) + " or less" : std::string("... no size fits")) +
            ", or --no-probe");
  }
  if (fits < kLeastProbeMib) {
    plan.run = false;
    plan.note = "not measured: " + where + " leaves " + std::to_string(room_mib) + " MiB, and a probe of less than " +
                std::to_string(kLeastProbeMib) + " MiB (half of it at most) would measure the caches";
    return plan;
  }
  plan.mib = static_cast<int>(fits);
  plan.note = "a " + std::to_string(plan.mib) + " MiB buffer, half of the " + std::to_string(room_mib) + " MiB " +
              where + " leaves (" + std::to_string(asked_mib) + " MiB asked)";
  return plan;
}

enum class Format { kText, kMarkdown, kJson, kCsv };

Format ParseFormat(const std::string& flag, const std::string& v) {
  if (v == "text") return Format::kText;
  if (v == "md") return Format::kMarkdown;
  if (v == "json") return Format::kJson;
  if (v == "csv") return Format::kCsv;
  throw tinyai_tools::UsageError(flag + " takes text, md, json or csv, got '" + v + "'");
}

void PrintRowJson(const std::string& model, const Row& r, const BenchOptions& o, int repetitions, int cores,
                  const tinyai_tools::BandwidthResult& bw, bool probe) {
  namespace tt = tinyai_tools;
  const ModelFigures& f = r.last;
  std::printf("{\"kernels\":\"%s\",\"cores\":%d,\"memory_read_gbps\":%.2f,\"memory_read_gbps_median\":%.2f",
              probe ? bw.kernels : tinyai::kernels::Best().name, cores, bw.best_gbps, bw.median_gbps);
  std::printf(",\"huge_pages\":%s", o.huge_pages ? "true" : "false");
  if (o.huge_pages && probe) std::printf(",\"probe_huge_page_bytes\":%" PRIu64, bw.huge_page_bytes);
  if (o.huge_pages) {
    std::printf(",\"model_file_bytes\":%" PRIu64 ",\"model_huge_page_bytes\":%" PRIu64, f.model_bytes,
                f.huge_page_bytes);
  }
  std::printf(",\"model\":%s,\"threads\":%d,\"repetitions\":%d,\"prompt_tokens\":%d,\"gen_tokens\":%d"
              ",\"weights_bytes\":%" PRIu64,
              tt::JsonString(model).c_str(), r.threads, repetitions, f.prompt_n, f.gen_n, f.info.weightBytes);
  PrintSpreadJson("pp_tokens_per_s", r.pp);
  PrintSpreadJson("decode_tokens_per_s", r.decode);
  PrintSpreadJson("ttft_ms", r.ttft);
  PrintSpreadJson("open_ms", r.open);
  PrintSpreadJson("runner_ms", r.runner);
  PrintSpreadJson("effective_gbps", r.effective);
  std::printf(",\"bytes_per_token\":%" PRIu64 ",\"bandwidth_fraction\":%.3f,\"memory_read_gbps_same_threads\":%.2f"
              ",\"bandwidth_fraction_same_threads\":%.3f,\"peak_rss_bytes\":%" PRIu64
              ",\"weights_resident_bytes\":%" PRIu64 ",\"huge_page_bytes\":%" PRIu64,
              f.bytes_per_token, Fraction(r.effective.mean(), bw.best_gbps), r.same.best_gbps,
              Fraction(r.effective.mean(), r.same.best_gbps), f.peak_rss, f.weights_resident,
              f.process_huge_page_bytes);
  std::printf(",\"kv_type\":\"%s\",\"direct_reads\":\"%s\"", tinyaiKVTypeName(f.info.kvType),
              o.mmap.directReads > 0 ? "on" : o.mmap.directReads < 0 ? "off" : "auto");
  std::printf(",\"context\":%d,\"mem_limit_bytes\":%" PRIu64 ",\"cache_cap_bytes\":%" PRIu64
              ",\"minimum_limit_bytes\":%" PRIu64 ",\"prefetch\":%s,\"prefetch_threads\":%d,\"adaptive\":%s"
              ",\"read_bytes_per_token\":%.0f",
              f.info.contextLength, static_cast<uint64_t>(f.mem.memoryLimit),
              static_cast<uint64_t>(f.mem.weightCacheCap), static_cast<uint64_t>(f.mem.minimumMemoryLimit),
              o.mmap.prefetchEnabled ? "true" : "false", o.mmap.prefetchThreads,
              o.mmap.adaptiveCaching ? "true" : "false", f.read_bytes_per_token);
  PrintSpreadJson("read_gbps", r.read);
  std::printf(",\"accounted_peak_bytes\":%" PRIu64 ",\"accounted_weights_peak_bytes\":%" PRIu64
              ",\"kv_bytes\":%" PRIu64 ",\"activation_bytes\":%" PRIu64 ",\"other_bytes\":%" PRIu64,
              static_cast<uint64_t>(f.mem.peakTotalBytes), static_cast<uint64_t>(f.mem.weightPeakBytes),
              static_cast<uint64_t>(f.mem.kvCacheBytes), static_cast<uint64_t>(f.mem.activationBytes),
              static_cast<uint64_t>(f.mem.otherBytes));
  PrintCacheJson("decode_cache", f.decode_cache);
  PrintCacheJson("prompt_cache", f.prompt_cache);
  std::printf("}\n");
}

void PrintRowText(const std::string& model, const Row& r, const BenchOptions& o, int repetitions,
                  const tinyai_tools::BandwidthResult& bw, bool probe) {
  namespace tt = tinyai_tools;
  const ModelFigures& f = r.last;
  const bool capped = f.mem.memoryLimit > 0 || f.mem.weightCacheCap > 0;
  std::printf("model %s: %.1f MiB of weights, %d threads, context %d, %s KV cache, %s\n", model.c_str(),
              tt::Mib(f.info.weightBytes), r.threads, f.info.contextLength, tinyaiKVTypeName(f.info.kvType),
              repetitions > 1 ? (std::to_string(repetitions) + " runs: mean ± standard deviation").c_str()
                              : "1 run (-r N: the spread of N)");
  if (o.huge_pages) {
    std::printf("  model read into memory: %.1f MiB of the file's %.1f MiB in huge pages\n",
                tt::Mib(f.huge_page_bytes), tt::Mib(f.model_bytes));
  }
  if (capped) {
    std::printf("  memory limit %s, weight cache cap %s (least --mem-limit for these options %s), prefetch %s "
                "(%s threads), %s\n",
                f.mem.memoryLimit ? (std::to_string(f.mem.memoryLimit) + " bytes").c_str() : "none",
                f.mem.weightCacheCap ? (std::to_string(f.mem.weightCacheCap) + " bytes").c_str() : "none",
                tt::LimitText(f.mem.minimumMemoryLimit).c_str(), o.mmap.prefetchEnabled ? "on" : "off",
                o.mmap.prefetchThreads == TINYAI_PREFETCH_THREADS_AUTO
                    ? ("auto: " + std::to_string(f.decode_cache.prefetch_workers)).c_str()
                    : std::to_string(o.mmap.prefetchThreads).c_str(),
                o.mmap.adaptiveCaching ? "adaptive" : "LRU");
  }
  std::printf("  prompt processing  %s tokens/s (%d tokens)\n", PlusMinus(r.pp, "%.2f").c_str(), f.prompt_n);
  std::printf("  time to first token %s ms\n", PlusMinus(r.ttft, "%.2f").c_str());
  std::printf("  open               %s ms (the model), runner %s ms\n", PlusMinus(r.open, "%.2f").c_str(),
              PlusMinus(r.runner, "%.2f").c_str());
  std::printf("  decode             %s tokens/s (%d tokens)\n", PlusMinus(r.decode, "%.2f").c_str(), f.gen_n);
  const double eff = r.effective.mean();
  if (probe) {
    std::printf("  effective bandwidth %.2f GB/s = %.1f MiB/token x tokens/s (%.0f%% of measured; %.0f%% of %.2f "
                "GB/s that %d thread(s) can read)\n",
                eff, tt::Mib(f.bytes_per_token), 100.0 * Fraction(eff, bw.best_gbps),
                100.0 * Fraction(eff, r.same.best_gbps), r.same.best_gbps, r.threads);
  } else {
    std::printf("  effective bandwidth %.2f GB/s = %.1f MiB/token x tokens/s\n", eff, tt::Mib(f.bytes_per_token));
  }
  const CacheDelta& d = f.decode_cache;
  std::printf("  read from storage  %8.2f MiB/token while decoding (%s GB/s)\n",
              tt::Mib(static_cast<uint64_t>(f.read_bytes_per_token)), PlusMinus(r.read, "%.3f").c_str());
  std::printf("  decode cache: %" PRIu64 " hits, %" PRIu64 " misses, %" PRIu64 " evictions, prefetch %" PRIu64
              " loads / %" PRIu64 " hits / %" PRIu64 " dropped, %" PRIu64 " stalls, %.0f%% of reads direct\n",
              d.hits, d.misses, d.evictions, d.prefetch_loads, d.prefetch_hits, d.prefetch_dropped, d.stalls,
              d.bytes_read ? 100.0 * static_cast<double>(d.bytes_read_direct) / static_cast<double>(d.bytes_read) : 0.0);
  std::printf("  peak RSS           %8.1f MiB (weights resident %.1f MiB; %.1f MiB of memory in huge pages)\n",
              tt::Mib(f.peak_rss), tt::Mib(f.weights_resident), tt::Mib(f.process_huge_page_bytes));
  std::printf("  TinyAI accounted peak %5.1f MiB: weights %.1f MiB, KV cache %.1f MiB, activations %.2f MiB, "
              "tables %.2f MiB\n",
              tt::Mib(f.mem.peakTotalBytes), tt::Mib(f.mem.weightPeakBytes), tt::Mib(f.mem.kvCacheBytes),
              tt::Mib(f.mem.activationBytes), tt::Mib(f.mem.otherBytes));
}

// The file's base name, for tables.
std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int Run(int argc, char** argv) {
  namespace tt = tinyai_tools;
  std::string model, report_path, trace_path;
  bool probe_only = false, probe = true, probe_given = false;
  Format format = Format::kText;
  int probe_mib = 1024, repetitions = 1;
  std::vector<int> thread_list{0}, prompt_list{128}, gen_list{128};
  BenchOptions o;
  o.mmap = tinyaiCreateDefaultMmapConfig();
  // The library's default caps the weight cache (256 MB); the benchmark
  // measures the whole model unless a cap or limit is asked for.
  o.mmap.maxCacheSize = 0;
  std::vector<std::string> positional;
  tt::Args args;
  tt::AddModel(&args, &model);
  args.Flag({"-t", "--threads"}, [&](const std::string& f, const char* v) {
    thread_list = ParseList(f, v, 0, tt::kMaxThreads, "0 = one per core");
  });
  args.Flag({"-p", "--prompt", "--n-prompt"}, [&](const std::string& f, const char* v) {
    prompt_list = ParseList(f, v, 1, tinyai::limits::kMaxSeqLen);
    o.prompt_given = true;
  });
  args.Flag({"-n", "--gen", "--n-gen"}, [&](const std::string& f, const char* v) {
    gen_list = ParseList(f, v, 1, tinyai::limits::kMaxSeqLen);
    o.gen_given = true;
  });
  args.Flag({"-r", "--repetitions"}, [&](const std::string& f, const char* v) {
    repetitions = tt::ParseInt32(f, v, 1, 1000);
  });
  tt::AddContext(&args, &o.context);
  tt::AddMemLimit(&args, &o.mem_limit);
  args.Flag({"--cache"}, [&](const std::string& f, const char* v) { o.mmap.maxCacheSize = tt::ParseByteLimit(f, v); });
  args.Flag({"--prefetch-threads"}, [&](const std::string& f, const char* v) {
    o.mmap.prefetchThreads = tt::ParsePrefetchThreads(f, v);
  });
  args.On({"--no-prefetch"}, [&] { o.mmap.prefetchEnabled = false; });
  args.Flag({"--direct-reads"}, [&](const std::string& f, const char* v) { o.mmap.directReads = tt::ParseDirectReads(f, v); });
  args.On({"--lru"}, [&] { o.mmap.adaptiveCaching = false; });
  tt::AddKvType(&args, &o.kv_type);
  tt::AddFallback(&args, o.fallback);
  args.Flag({"--probe-mib"}, [&](const std::string& f, const char* v) {
    probe_mib = tt::ParseInt32(f, v, 16, kMaxProbeMib);
    probe_given = true;
  });
  args.On({"--no-probe"}, [&] { probe = false; });
  args.On({"--huge-pages"}, [&] { o.huge_pages = true; });
  args.On({"--json"}, [&] { format = Format::kJson; });
  args.Flag({"-o", "--output"}, [&](const std::string& f, const char* v) { format = ParseFormat(f, v); });
  args.Flag({"--memory-report"}, [&](const std::string&, const char* v) { report_path = v; });
  args.Flag({"--memory-trace"}, [&](const std::string&, const char* v) { trace_path = v; });
  args.On({"--probe"}, [&] { probe_only = true; });
  int exit_code = 0;
  if (!args.Parse(argc, argv, kTool, kUsage, &positional, &exit_code)) return exit_code;
  // The model as -m or alone, as in every tool.
  if (positional.size() > 1 || (!positional.empty() && !model.empty())) {
    throw tt::UsageError("one model: -m MODEL or MODEL, once");
  }
  if (!positional.empty()) model = tt::TakeModel(model, &positional);
  if (!probe_only && model.empty()) throw tt::UsageError("-m MODEL or --probe is required");
  if (probe_only && !model.empty()) throw tt::UsageError("--probe measures the machine alone; drop -m MODEL");
  if (probe_only && !probe) throw tt::UsageError("--probe and --no-probe: give one");
  if (probe_only) probe = true;
  if (probe_only && (!report_path.empty() || !trace_path.empty())) {
    throw tt::UsageError("--memory-report and --memory-trace record a model's run; --probe runs none");
  }
  const size_t rows_n = thread_list.size() * prompt_list.size() * gen_list.size();
  if ((!report_path.empty() || !trace_path.empty()) && (rows_n > 1 || repetitions > 1)) {
    throw tt::UsageError("--memory-report and --memory-trace record one run: give one -t, -p and -n, and -r 1");
  }
  if (probe_only && (rows_n > 1 || repetitions > 1 || o.prompt_given || o.gen_given)) {
    throw tt::UsageError("--probe measures the machine alone: -p, -n and -r go with a model");
  }
  tt::SayMemLimit(kTool);
  const int cores = tinyai::port::CpuCount();

  // The probe always uses every core: it measures the machine, not the run.
  // A shared machine's bandwidth drifts with its neighbours, so the probe
  // brackets the model runs and the better result is the figure. The probe
  // before the runs happens in a child process, so its buffer never counts
  // in this process's peak RSS. Its buffer fits the room the system leaves.
  ProbePlan plan;
  if (probe) {
    plan = FitProbe(probe_mib, probe_given);
    probe = plan.run;
    probe_mib = plan.mib;
    if (!plan.note.empty()) std::fprintf(stderr, "%s: bandwidth probe: %s\n", kTool, plan.note.c_str());
  }
  const size_t probe_bytes = static_cast<size_t>(probe_mib) << 20;
  tinyai_tools::BandwidthResult bw;
  if (!probe_only && probe) bw = tinyai_tools::MeasureReadBandwidthInChild(cores, probe_bytes, 7, o.huge_pages);
  std::vector<Row> rows;
  if (!probe_only) {
    for (int t : thread_list) {
      for (int pn : prompt_list) {
        for (int gn : gen_list) {
          Row r;
          r.threads = t <= 0 ? cores : t;
          r.prompt_n = pn;
          r.gen_n = gn;
          BenchOptions ro = o;
          ro.threads = r.threads;
          ro.prompt_n = pn;
          ro.gen_n = gn;
          for (int rep = 0; rep < repetitions; ++rep) {
            // Around the model only: the probe's buffer is the tool's, not TinyAI's.
            tt::MemoryRecorder recorder(kTool, report_path, trace_path, {model});
            recorder.Note("model", tt::JsonString(model));
            recorder.Note("mem_limit", std::to_string(o.mem_limit));
            ModelFigures f;
            BenchModel(model, ro, &f);
            recorder.Note("prompt_tokens", std::to_string(f.prompt_n));
            recorder.Note("generated_tokens", std::to_string(f.gen_n));
            recorder.Finish();
            r.pp.samples.push_back(f.pp_tps);
            r.decode.samples.push_back(f.decode_tps);
            r.ttft.samples.push_back(f.ttft_ms);
            r.effective.samples.push_back(f.effective_gbps);
            r.read.samples.push_back(f.read_gbps);
            r.open.samples.push_back(f.open_ms);
            r.runner.samples.push_back(f.runner_ms);
            r.last = f;
          }
          rows.push_back(r);
        }
      }
    }
  }
  if (probe) {
    tinyai_tools::BandwidthResult after = tinyai_tools::MeasureReadBandwidth(cores, probe_bytes, 7, o.huge_pages);
    if (after.best_gbps > bw.best_gbps) bw = after;
    // What each row's own thread count can pull (one core cannot saturate memory).
    for (Row& r : rows) {
      r.same = bw;
      if (r.threads == cores) continue;
      bool found = false;
      for (const Row& earlier : rows) {
        if (&earlier == &r) break;
        if (earlier.threads == r.threads) {
          r.same = earlier.same;
          found = true;
          break;
        }
      }
      if (!found) r.same = tinyai_tools::MeasureReadBandwidth(r.threads, probe_bytes, 7, o.huge_pages);
    }
  }
  switch (format) {
    case Format::kJson:
      // One object per row, one per line (JSON Lines); --probe alone: the machine's.
      if (probe_only) {
        std::printf("{\"kernels\":\"%s\",\"cores\":%d,\"memory_read_gbps\":%.2f,\"memory_read_gbps_median\":%.2f"
                    ",\"probe_mib\":%d,\"huge_pages\":%s",
                    bw.kernels, cores, bw.best_gbps, bw.median_gbps, probe_mib, o.huge_pages ? "true" : "false");
        if (o.huge_pages) std::printf(",\"probe_huge_page_bytes\":%" PRIu64, bw.huge_page_bytes);
        std::printf("}\n");
      }
      for (const Row& r : rows) PrintRowJson(model, r, o, repetitions, cores, bw, probe);
      break;
    case Format::kCsv:
      std::printf("model,threads,prompt_tokens,gen_tokens,repetitions,pp_tokens_per_s,pp_sd,decode_tokens_per_s,"
                  "decode_sd,ttft_ms,ttft_sd,effective_gbps,bandwidth_fraction,bandwidth_fraction_same_threads,"
                  "read_gbps,peak_rss_bytes,accounted_peak_bytes,memory_read_gbps\n");
      for (const Row& r : rows) {
        std::printf("%s,%d,%d,%d,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%" PRIu64 ",%" PRIu64 ",%.2f\n",
                    tt::JsonString(model).c_str(), r.threads, r.last.prompt_n, r.last.gen_n, repetitions,
                    r.pp.mean(), r.pp.sd(), r.decode.mean(), r.decode.sd(), r.ttft.mean(), r.ttft.sd(),
                    r.effective.mean(), Fraction(r.effective.mean(), bw.best_gbps),
                    Fraction(r.effective.mean(), r.same.best_gbps), r.read.mean(), r.last.peak_rss,
                    static_cast<uint64_t>(r.last.mem.peakTotalBytes), bw.best_gbps);
      }
      break;
    case Format::kMarkdown:
      if (probe) {
        std::printf("memory read bandwidth: %.2f GB/s (%d cores, %s, %d MiB)\n\n", bw.best_gbps, cores, bw.kernels,
                    probe_mib);
      } else {
        std::printf("memory read bandwidth: not measured (%s)\n\n",
                    plan.note.empty() ? "--no-probe" : plan.note.c_str());
      }
      if (probe_only) break;
      std::printf("| model | size | threads | test | tokens/s | of probe | peak RSS |\n");
      std::printf("| --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
      for (const Row& r : rows) {
        const std::string name = BaseName(model);
        const std::string size = tt::MibText(r.last.info.weightBytes);
        const std::string rss = tt::MibText(r.last.peak_rss);
        std::printf("| %s | %s | %d | pp%d | %s | | %s |\n", name.c_str(), size.c_str(), r.threads, r.last.prompt_n,
                    PlusMinus(r.pp, "%.2f").c_str(), rss.c_str());
        char fraction[32] = "";
        if (probe) std::snprintf(fraction, sizeof fraction, "%.2f", Fraction(r.effective.mean(), bw.best_gbps));
        std::printf("| %s | %s | %d | tg%d | %s | %s | %s |\n", name.c_str(), size.c_str(), r.threads, r.last.gen_n,
                    PlusMinus(r.decode, "%.2f").c_str(), fraction, rss.c_str());
      }
      if (repetitions > 1) std::printf("\n%d runs each: mean ± standard deviation.\n", repetitions);
      break;
    case Format::kText:
      if (probe) {
        std::printf("memory read bandwidth: %.2f GB/s best, %.2f median (%d cores, %s, %d MiB buffer", bw.best_gbps,
                    bw.median_gbps, cores, bw.kernels, probe_mib);
        if (o.huge_pages) std::printf(", %.1f MiB of it in huge pages", tinyai_tools::Mib(bw.huge_page_bytes));
        std::printf(")\n");
      } else {
        std::printf("memory read bandwidth: not measured (%s)\n",
                    plan.note.empty() ? "--no-probe" : plan.note.c_str());
      }
      for (const Row& r : rows) PrintRowText(model, r, o, repetitions, bw, probe);
      break;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tinyai_tools::Main(kTool, kUsage, [&] { return Run(argc, argv); });
}
