// tinyai-generate: text generation. The text goes to stdout exactly as the
// golden files show it; figures go to stderr.
//   tinyai-generate -m MODEL.tmai -p PROMPT [-n MAX_NEW] [--steps N] [--temp T] [--top-p P] [--seed S]
//                   [-t THREADS] [--context N] [--mem-limit SIZE] [--cache SIZE]
//                   [--prefetch-threads N] [--no-prefetch] [--lru] [--stats] [--quiet]
//                   [--mode M] [--debug-exec] [--dump-dag FILE]
#include <cstdio>
#include <string>

#include "tinyai/tinyai.h"
#include "tools/common/cli.h"

namespace {

const char kUsage[] =
    "usage: tinyai-generate -m MODEL.tmai -p PROMPT [-n MAX_NEW] [--steps N] [--temp T] [--top-p P] [--seed S]\n"
    "                       [-t THREADS] [--context N] [--mem-limit SIZE] [--cache SIZE]\n"
    "                       [--prefetch-threads N] [--no-prefetch] [--lru] [--stats] [--quiet]\n"
    "                       [--mode M] [--debug-exec] [--dump-dag FILE]\n"
    "  -n, --max-new N  tokens generated after the prompt at most (default 256; 0 = until the context is full)\n"
    "  --steps N   llama2.c's limit: positions in all, BOS and prompt included (default 0 = the context)\n"
    "  --temp T    0 = greedy (default); --top-p P nucleus mass (default 0.9); --seed S (default 42)\n"
    "  -t THREADS  compute threads (default: one per core)\n"
    "  --mem-limit SIZE  bound everything TinyAI holds (weights, KV, activations, tables), e.g. 64M\n"
    "  --cache SIZE      cap only the weight cache (default: no cap unless --mem-limit)\n"
    "  --prefetch-threads N  background loaders (default 1; 0 = load ahead inline)\n"
    "  --no-prefetch     no loading ahead; --lru: plain LRU eviction instead of the adaptive policy\n"
    "  --stats     weight cache and memory figures on stderr\n"
    "  --quiet     no figures on stderr\n"
    "  --mode M    how the forward scheduler runs under --mem-limit: normal (all weights resident),\n"
    "              memory_opt (weights streamed), streaming (and fewer tokens per pass) or adaptive (default)\n"
    "  --debug-exec  no in-place reuse of activations (the text must not change)\n"
    "  --dump-dag FILE  write the activation DAG and the arena plans as YAML\n";

int PrintPiece(const char* piece, size_t len, void*) {
  std::fwrite(piece, 1, len, stdout);
  std::fflush(stdout);
  return 0;
}

int Run(int argc, char** argv) {
  std::string model_path, prompt, dump_path;
  bool have_prompt = false, quiet = false, show_stats = false, mem_limit_given = false, cache_given = false;
  TinyAIMmapConfig mmap_config = tinyaiCreateDefaultMmapConfig();
  mmap_config.maxCacheSize = 0;
  TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
  TinyAILLMConfig config = tinyaiCreateDefaultLLMConfig();
  config.threads = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw tinyai_tools::UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "-m") model_path = value();
    else if (a == "-p") { prompt = value(); have_prompt = true; }
    else if (a == "-n" || a == "--max-new") params.maxNewTokens = static_cast<int32_t>(tinyai_tools::ParseInt(a, value()));
    else if (a == "--steps") params.steps = static_cast<int32_t>(tinyai_tools::ParseInt(a, value()));
    else if (a == "--temp") params.sampler.temperature = static_cast<float>(tinyai_tools::ParseFloat(a, value()));
    else if (a == "--top-p") params.sampler.topP = static_cast<float>(tinyai_tools::ParseFloat(a, value()));
    else if (a == "--seed") params.sampler.seed = static_cast<uint64_t>(tinyai_tools::ParseInt(a, value()));
    else if (a == "-t") config.threads = static_cast<int32_t>(tinyai_tools::ParseInt(a, value()));
    else if (a == "--context") config.contextLength = static_cast<int32_t>(tinyai_tools::ParseInt(a, value()));
    else if (a == "--mem-limit" && (mem_limit_given = true)) config.memoryLimit = static_cast<size_t>(tinyai_tools::ParseSize(a, value()));
    else if (a == "--cache" && (cache_given = true)) mmap_config.maxCacheSize = static_cast<size_t>(tinyai_tools::ParseSize(a, value()));
    else if (a == "--prefetch-threads") mmap_config.prefetchThreads = static_cast<int>(tinyai_tools::ParseInt(a, value()));
    else if (a == "--no-prefetch") mmap_config.prefetchEnabled = false;
    else if (a == "--lru") mmap_config.adaptiveCaching = false;
    else if (a == "--stats") show_stats = true;
    else if (a == "--quiet") quiet = true;
    else if (a == "--mode") config.mode = tinyai_tools::ParseMode(a, value());
    else if (a == "--debug-exec") config.debugExecution = true;
    else if (a == "--dump-dag") dump_path = value();
    else if (a == "-h" || a == "--help") { std::fputs(kUsage, stdout); return 0; }
    else throw tinyai_tools::UsageError("unknown argument " + a);
  }
  if (model_path.empty() || !have_prompt) throw tinyai_tools::UsageError("-m MODEL and -p PROMPT are required");
  if (mem_limit_given && config.memoryLimit == 0) throw tinyai_tools::UsageError("--mem-limit must be above 0");
  if (cache_given && mmap_config.maxCacheSize == 0) throw tinyai_tools::UsageError("--cache must be above 0");

  TinyAIMappedModel* model = tinyaiOpenMappedModel(model_path.c_str(), &mmap_config);
  if (!model) return tinyai_tools::ReportError("tinyai-generate", tinyaiGetLastError());
  TinyAILLM* llm = nullptr;
  TinyAIStatus s = tinyaiCreateLLM(model, &config, &llm);
  if (s != TINYAI_OK) {
    tinyaiCloseMappedModel(model);
    return tinyai_tools::ReportError("tinyai-generate", s);
  }
  const TinyAIForwardScheduler* sched = tinyaiGetLLMScheduler(llm);
  if (!dump_path.empty() && (s = tinyai_tools::WriteDag(sched, dump_path)) != TINYAI_OK) {
    tinyaiDestroyLLM(llm);
    tinyaiCloseMappedModel(model);
    return tinyai_tools::ReportError("tinyai-generate", s);
  }
  params.onText = PrintPiece;
  TinyAIGenerateStats stats;
  stats.structSize = sizeof stats;
  s = tinyaiGenerate(llm, prompt.c_str(), &params, nullptr, 0, nullptr, &stats);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  int rc = 0;
  if (s != TINYAI_OK) {
    rc = tinyai_tools::ReportError("tinyai-generate", s);
  } else if (!quiet) {
    TinyAIModelInfo info;
    tinyaiGetModelInfo(llm, &info);
    double pp = stats.promptSeconds > 0 ? stats.promptTokens / stats.promptSeconds : 0.0;
    double tg = stats.decodeSeconds > 0 ? stats.decodeTokens / stats.decodeSeconds : 0.0;
    std::fprintf(stderr,
                 "tinyai-generate: %d prompt tokens at %.1f tokens/s, %d generated at %.1f tokens/s, "
                 "time to first token %.1f ms, total %.2f s; stopped: %s\n",
                 stats.promptTokens, pp, stats.generatedTokens, tg, stats.firstTokenSeconds * 1e3, stats.totalSeconds,
                 tinyaiStopReasonName(stats.stopReason));
    TinyAIMemoryReport mem;
    mem.structSize = sizeof mem;
    tinyaiGetLLMMemoryReport(llm, &mem);
    std::fprintf(stderr,
                 "tinyai-generate: peak RSS %.1f MiB (OS); TinyAI held at most %.1f MiB: weights %.1f MiB (cap %s), "
                 "KV cache %.1f MiB, activations %.2f MiB, tables %.2f MiB\n",
                 tinyai_tools::Mib(tinyaiGetProcessPeakRss()), tinyai_tools::Mib(mem.peakTotalBytes),
                 tinyai_tools::Mib(mem.weightPeakBytes),
                 mem.weightCacheCap ? tinyai_tools::MibText(mem.weightCacheCap).c_str() : "none",
                 tinyai_tools::Mib(mem.kvBytes), tinyai_tools::Mib(mem.activationBytes),
                 tinyai_tools::Mib(mem.otherBytes));
    TinyAISchedulerReport rep;
    rep.structSize = sizeof rep;
    tinyaiGetSchedulerReport(sched, &rep);
    std::fprintf(stderr, "tinyai-generate: %s; arena %.3f MiB (lower bound %.3f, naive %.3f), %d tokens per pass\n",
                 rep.reason, tinyai_tools::Mib(rep.arenaBytes), tinyai_tools::Mib(rep.lowerBoundBytes),
                 tinyai_tools::Mib(rep.naiveBytes), rep.rowsPerPass);
    if (show_stats) {
      TinyAICacheStats cs;
      cs.structSize = sizeof cs;
      tinyaiGetMappedModelCacheStats(model, &cs);
      const double positions = stats.promptTokens + stats.decodeTokens > 0 ? stats.promptTokens + stats.decodeTokens : 1;
      std::fprintf(stderr,
                   "tinyai-generate: cache: %llu hits, %llu misses, %.1f MiB read (%.2f MiB per position), "
                   "%llu evictions, prefetch %llu loads / %llu hits / %llu dropped, %llu stalls\n",
                   static_cast<unsigned long long>(cs.hits), static_cast<unsigned long long>(cs.misses),
                   tinyai_tools::Mib(cs.bytesRead), tinyai_tools::Mib(cs.bytesRead) / positions,
                   static_cast<unsigned long long>(cs.evictions), static_cast<unsigned long long>(cs.prefetchLoads),
                   static_cast<unsigned long long>(cs.prefetchHits), static_cast<unsigned long long>(cs.prefetchDropped),
                   static_cast<unsigned long long>(cs.stalls));
      std::fprintf(stderr, "tinyai-generate: memory limit %s, minimum for this model and context %.1f MiB\n",
                   mem.limit ? tinyai_tools::MibText(mem.limit).c_str() : "none",
                   tinyai_tools::Mib(mem.minimumLimit));
    }
  }
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const tinyai_tools::UsageError& e) {
    std::fprintf(stderr, "tinyai-generate: %s\n%s", e.what(), kUsage);
    return 2;
  }
}
