// tinyai-bench: prompt-processing and decode speed, time to first token and
// peak RSS of a model, beside the effective weight bandwidth and the
// machine's measured memory read bandwidth.
//   tinyai-bench -m MODEL.tmai [-t THREADS] [--prompt N] [--gen N] [--json]
//   tinyai-bench --probe [-t THREADS] [--json]
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "port/port.h"
#include "tinyai/tinyai.h"
#include "tools/bench/bandwidth_probe.h"
#include "tools/common/cli.h"

namespace {

const char kUsage[] =
    "usage: tinyai-bench -m MODEL.tmai [-t THREADS] [--prompt N] [--gen N] [--json]\n"
    "       tinyai-bench --probe [-t THREADS] [--json]\n"
    "  --prompt N  prompt tokens for prompt processing and time to first token (default 128)\n"
    "  --gen N     tokens decoded one at a time (default 128)\n"
    "  --probe-mib M  buffer of the bandwidth probe (default 1024)\n";

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct ModelFigures {
  TinyAIModelInfo info{};
  double pp_tps = 0, decode_tps = 0, ttft_ms = 0;
  uint64_t bytes_per_token = 0;  // at the mean decode position
  double effective_gbps = 0;
  uint64_t peak_rss = 0, weights_resident = 0;
};

// Bytes read from memory to decode one token at position pos: every weight
// once, except the embedding table (one row) unless it is also the classifier,
// plus the keys and values attended to.
uint64_t BytesPerToken(const TinyAIModelInfo& m, double pos) {
  uint64_t row = static_cast<uint64_t>(m.dim) * 4;
  uint64_t table = static_cast<uint64_t>(m.vocabSize) * row;
  uint64_t kv_dim = static_cast<uint64_t>(m.dim) * static_cast<uint64_t>(m.kvHeads) / static_cast<uint64_t>(m.heads);
  uint64_t weights = m.weightBytes - table + row + (m.sharedClassifier ? table : 0);
  return weights + static_cast<uint64_t>(2.0 * m.layers * pos * static_cast<double>(kv_dim) * 4.0);
}

int BenchModel(const std::string& path, int threads, int prompt_n, int gen_n, ModelFigures* f) {
  TinyAIMmapConfig mc = tinyaiCreateDefaultMmapConfig();
  TinyAIMappedModel* model = tinyaiOpenMappedModel(path.c_str(), &mc);
  if (!model) return tinyai_tools::ReportError("tinyai-bench", tinyaiGetLastError());
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  cfg.threads = threads;
  TinyAILLM* llm = nullptr;
  TinyAIStatus s = tinyaiCreateLLM(model, &cfg, &llm);
  if (s != TINYAI_OK) {
    tinyaiCloseMappedModel(model);
    return tinyai_tools::ReportError("tinyai-bench", s);
  }
  tinyaiGetModelInfo(llm, &f->info);
  const int ctx = f->info.contextLength;
  if (prompt_n + gen_n > ctx) {
    prompt_n = ctx / 2;
    gen_n = ctx - prompt_n;
  }
  std::vector<float> logits(static_cast<size_t>(f->info.vocabSize));
  std::vector<int32_t> tokens(static_cast<size_t>(prompt_n));
  uint64_t rng = 12345;
  tokens[0] = f->info.bosId;
  for (int i = 1; i < prompt_n; ++i) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    tokens[static_cast<size_t>(i)] = static_cast<int32_t>((rng >> 33) % static_cast<uint64_t>(f->info.vocabSize));
  }
  TinyAISamplerConfig greedy = tinyaiCreateDefaultSamplerConfig();
  greedy.temperature = 0.0f;
  // Warm-up: every weight is touched once, so the figures are steady-state.
  s = tinyaiEval(llm, tokens.data(), prompt_n < 8 ? prompt_n : 8, logits.data());
  if (s == TINYAI_OK) s = tinyaiResetLLM(llm);
  int32_t next = 0;
  double t0 = Now();
  if (s == TINYAI_OK) s = tinyaiEval(llm, tokens.data(), prompt_n, logits.data());
  double t1 = Now();
  if (s == TINYAI_OK) s = tinyaiSample(llm, logits.data(), &greedy, &rng, &next);
  double t2 = Now();
  for (int i = 0; i < gen_n && s == TINYAI_OK; ++i) {
    s = tinyaiEval(llm, &next, 1, logits.data());
    if (s == TINYAI_OK) s = tinyaiSample(llm, logits.data(), &greedy, &rng, &next);
  }
  double t3 = Now();
  if (s != TINYAI_OK) {
    tinyaiDestroyLLM(llm);
    tinyaiCloseMappedModel(model);
    return tinyai_tools::ReportError("tinyai-bench", s);
  }
  f->pp_tps = prompt_n / (t1 - t0);
  f->ttft_ms = (t2 - t0) * 1e3;
  f->decode_tps = gen_n / (t3 - t2);
  f->bytes_per_token = BytesPerToken(f->info, prompt_n + gen_n / 2.0);
  f->effective_gbps = static_cast<double>(f->bytes_per_token) * f->decode_tps / 1e9;
  f->weights_resident = tinyaiGetMappedModelMemoryUsage(model);
  f->peak_rss = tinyaiGetProcessPeakRss();
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
  return 0;
}

int Run(int argc, char** argv) {
  std::string model;
  bool json = false, probe_only = false;
  int threads = 0, prompt_n = 128, gen_n = 128, probe_mib = 1024;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw tinyai_tools::UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "-m") model = value();
    else if (a == "-t") threads = static_cast<int>(tinyai_tools::ParseInt(a, value()));
    else if (a == "--prompt") prompt_n = static_cast<int>(tinyai_tools::ParseInt(a, value()));
    else if (a == "--gen") gen_n = static_cast<int>(tinyai_tools::ParseInt(a, value()));
    else if (a == "--probe-mib") probe_mib = static_cast<int>(tinyai_tools::ParseInt(a, value()));
    else if (a == "--json") json = true;
    else if (a == "--probe") probe_only = true;
    else if (a == "-h" || a == "--help") { std::fputs(kUsage, stdout); return 0; }
    else throw tinyai_tools::UsageError("unknown argument " + a);
  }
  if (!probe_only && model.empty()) throw tinyai_tools::UsageError("-m MODEL or --probe is required");
  if (prompt_n < 1 || gen_n < 1 || probe_mib < 16) throw tinyai_tools::UsageError("--prompt, --gen must be >= 1, --probe-mib >= 16");
  const int cores = tinyai::port::CpuCount();
  if (threads <= 0) threads = cores;

  // The probe always uses every core: it measures the machine, not the run.
  // A shared machine's bandwidth drifts with its neighbours, so the probe
  // brackets the model run and the better result is the figure. The probe
  // before the run happens in a child process, so its 1 GiB buffer never
  // counts in this process's peak RSS.
  const size_t probe_bytes = static_cast<size_t>(probe_mib) << 20;
  tinyai_tools::BandwidthResult bw;
  if (!probe_only) bw = tinyai_tools::MeasureReadBandwidthInChild(cores, probe_bytes, 7);
  ModelFigures f;
  if (!probe_only) {
    int rc = BenchModel(model, threads, prompt_n, gen_n, &f);
    if (rc != 0) return rc;
  }
  tinyai_tools::BandwidthResult after = tinyai_tools::MeasureReadBandwidth(cores, probe_bytes, 7);
  if (after.best_gbps > bw.best_gbps) bw = after;
  // What the run's own thread count can pull (one core cannot saturate memory).
  tinyai_tools::BandwidthResult same = bw;
  if (!probe_only && threads != cores) same = tinyai_tools::MeasureReadBandwidth(threads, probe_bytes, 7);
  if (json) {
    std::printf("{\"kernels\":\"%s\",\"cores\":%d,\"memory_read_gbps\":%.2f,\"memory_read_gbps_median\":%.2f", bw.kernels,
                cores, bw.best_gbps, bw.median_gbps);
    if (!probe_only) {
      std::printf(",\"model\":\"%s\",\"threads\":%d,\"prompt_tokens\":%d,\"gen_tokens\":%d,\"weights_bytes\":%" PRIu64
                  ",\"pp_tokens_per_s\":%.2f,\"decode_tokens_per_s\":%.2f,\"ttft_ms\":%.2f,\"bytes_per_token\":%" PRIu64
                  ",\"effective_gbps\":%.2f,\"bandwidth_fraction\":%.3f,\"memory_read_gbps_same_threads\":%.2f"
                  ",\"bandwidth_fraction_same_threads\":%.3f,\"peak_rss_bytes\":%" PRIu64
                  ",\"weights_resident_bytes\":%" PRIu64 "}\n",
                  model.c_str(), threads, prompt_n, gen_n, f.info.weightBytes, f.pp_tps, f.decode_tps, f.ttft_ms,
                  f.bytes_per_token, f.effective_gbps, f.effective_gbps / bw.best_gbps, same.best_gbps,
                  f.effective_gbps / same.best_gbps, f.peak_rss, f.weights_resident);
    } else {
      std::printf("}\n");
    }
  } else {
    std::printf("memory read bandwidth: %.2f GB/s best, %.2f median (%d cores, %s, %d MiB buffer)\n", bw.best_gbps,
                bw.median_gbps, cores, bw.kernels, probe_mib);
    if (!probe_only) {
      std::printf("model %s: %.1f MiB of weights, %d threads\n", model.c_str(), tinyai_tools::Mib(f.info.weightBytes), threads);
      std::printf("  prompt processing  %8.2f tokens/s (%d tokens)\n", f.pp_tps, prompt_n);
      std::printf("  time to first token %7.2f ms\n", f.ttft_ms);
      std::printf("  decode             %8.2f tokens/s (%d tokens)\n", f.decode_tps, gen_n);
      std::printf("  effective bandwidth %7.2f GB/s = %.1f MiB/token x tokens/s (%.0f%% of measured; %.0f%% of %.2f GB/s "
                  "that %d thread(s) can read)\n",
                  f.effective_gbps, tinyai_tools::Mib(f.bytes_per_token), 100.0 * f.effective_gbps / bw.best_gbps,
                  100.0 * f.effective_gbps / same.best_gbps, same.best_gbps, threads);
      std::printf("  peak RSS           %8.1f MiB (weights resident %.1f MiB)\n", tinyai_tools::Mib(f.peak_rss),
                  tinyai_tools::Mib(f.weights_resident));
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const tinyai_tools::UsageError& e) {
    std::fprintf(stderr, "tinyai-bench: %s\n%s", e.what(), kUsage);
    return 2;
  }
}
