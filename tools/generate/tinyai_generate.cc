// tinyai-generate: text generation. The text goes to stdout exactly as the
// golden files show it; figures go to stderr.
//   tinyai-generate -m MODEL.tmai (-p PROMPT | -p - | -f FILE) [-n MAX_NEW] [--steps N] [--temp T] [--top-p P]
//                   [--top-k K] [--min-p P] [--repeat-penalty R] [--repeat-last-n N] [--stop TEXT]...
//                   [--seed S] [-t THREADS] [-c|--context N] [--mem-limit SIZE] [--cache SIZE]
//                   [--kv-type T] [--kv-window N] [--kv-sink K] [--kv-growable] [--fallback STEPS]
//                   [--prefetch-threads N] [--no-prefetch] [--direct-reads M] [--lru] [--stats] [--quiet]
//                   [--mode M] [--debug-exec] [--dump-dag FILE] [--memory-report FILE]
//                   [--memory-trace FILE] [--chat [--system TEXT]] [-i] [--json]
#include <unistd.h>

#include <cfloat>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tinyai/tinyai.h"
#include "tools/common/args.h"
#include "tools/common/cli.h"
#include "tools/common/dag.h"
#include "tools/common/memory_report.h"

namespace {

const char kTool[] = "tinyai-generate";

const char kUsage[] =
    "usage: tinyai-generate [-m] MODEL (-p PROMPT | -p - | -f FILE | -i) [-n MAX_NEW] [--steps N] [--temp T]\n"
    "                       [--top-p P] [--top-k K] [--min-p P] [--repeat-penalty R] [--repeat-last-n N]\n"
    "                       [--stop TEXT]... [-s|--seed S] [-t THREADS] [-c|--context N] [--mem-limit SIZE]\n"
    "                       [--cache SIZE] [--kv-type T] [--kv-window N] [--kv-sink K] [--kv-growable]\n"
    "                       [--fallback STEPS] [--prefetch-threads N] [--no-prefetch] [--direct-reads M] [--lru]\n"
    "                       [--stats] [--quiet] [--mode M] [--debug-exec] [--dump-dag FILE] [--memory-report FILE]\n"
    "                       [--memory-trace FILE] [--chat [--system TEXT]] [-i|--interactive] [--json]\n"
    "       tinyai-generate -h | --help | --version\n"
    "  -m, --model MODEL  the model (a llama .tmai or GGUF); the model alone, without -m, too\n"
    "  -p, --prompt PROMPT  the prompt; -p - reads it from standard input\n"
    "  -i, --interactive  after the prompt (if any), each line of standard input continues the text in\n"
    "                   the same KV cache (not printed; the model's answer is), until the input ends; a\n"
    "                   context that fills ends the run with the positions used (--kv-window runs on)\n"
    "  --chat           the prompt is a user's message: it is put in the model's chat template (chatml,\n"
    "                   llama3, zephyr or llama2, recognized in the file's tokenizer.chat_template) and\n"
    "                   only the answer is printed, up to the end of the model's turn; with -i each line\n"
    "                   is the user's next message in the same conversation\n"
    "  --system TEXT    with --chat: the system message (default: the template's own, if it has one)\n"
    "  -f, --file FILE  read the prompt from FILE (one trailing newline, \\n or \\r\\n, is dropped, also for -p -);\n"
    "                   a prompt read from FILE or standard input may hold up to 64 bytes per token of the\n"
    "                   context (--context, or the model's seq_len), and no more than --mem-limit\n"
    "  -n, --max-new, --n-predict N  tokens generated after the prompt at most (0..2147483647; default 256; 0 = until the\n"
    "                   context is full)\n"
    "  --steps N        llama2.c's limit: positions in all, BOS and prompt included (0..2147483647; default 0 =\n"
    "                   the context)\n"
    "  --temp T         sampling temperature, finite and >= 0 (default 0 = greedy)\n"
    "  --top-p P        nucleus mass, in (0, 1] (default 0.9)\n"
    "  --top-k K        sample among the K most likely tokens, 0..2147483647 (default 0 = off)\n"
    "  --min-p P        sample among tokens at least P times the most likely's probability, in [0, 1]\n"
    "                   (default 0 = off); with --temp > 0, after the temperature, as --top-k and --top-p\n"
    "  --repeat-penalty R  a token among the last --repeat-last-n (the prompt's too) has its logit divided\n"
    "                   by R when positive, multiplied when not, finite and > 0 (default 1 = off; 1.1 is usual)\n"
    "  --repeat-last-n N  tokens the penalty looks back over, 1..4096 (default 64)\n"
    "  --stop TEXT      end the text where it first holds TEXT (not printed; the prompt is not searched);\n"
    "                   up to 16 of them, each 1..256 bytes; stopped: stop_string\n"
    "  -s, --seed S     sampler seed, 0..18446744073709551615 (default 42)\n"
    "  -t, --threads N  compute threads, 0..256 (default 0 = one per core)\n"
    "  -c, --context N  tokens the KV cache holds, 0..1048576 (default 0 = the model's seq_len); with\n"
    "                   --kv-window, the longest prompt\n"
    "  --kv-type T      how the KV cache stores keys and values: f32 (default), f16, int8 (an f16 scale\n"
    "                   per 32 values of a head) or auto (the most precise with which the best mode fits\n"
    "                   --mem-limit)\n"
    "  --kv-window N    a rolling window: the cache holds the --kv-sink first positions and the N most\n"
    "                   recent, 1..1048576, and the text runs on past the context in constant memory\n"
    "  --kv-growable    the KV cache takes memory 64 positions at a time as the text reaches them (under\n"
    "                   --mem-limit the weight cache has the rest until then); not with --kv-window\n"
    "  --kv-sink K      with --kv-window: the first positions kept (attention sinks), 0..1048576 (default 0;\n"
    "                   4 is the usual choice)\n"
    "  --mem-limit SIZE bound everything TinyAI holds (weights, KV, activations, tables), e.g. 64M or 1.5G\n"
    "                   or auto: what this process's memory cgroup (else MemAvailable) leaves, less\n"
    "                   16 MiB for the process (default: no limit)\n"
    "  --cache SIZE     cap only the weight cache, e.g. 16M (default: no cap unless --mem-limit)\n"
    "  --prefetch-threads N  background loaders, 0..64 or auto (default auto: 1 while the\n"
    "                    weights fit, 4 while they stream; 0 = load ahead inline)\n"
    "  --no-prefetch    no loading ahead\n"
    "  --direct-reads M read weights past the OS's page cache (O_DIRECT, where the file system allows):\n"
    "                   auto (default: while the cache streams, a cap below the weights), on or off\n"
    "  --lru            plain LRU eviction instead of the adaptive policy\n"
    "  --stats          weight cache and memory figures on stderr, with the least --mem-limit for these\n"
    "                   options (rounded up: given back, it runs)\n"
    "  -q, --quiet      no figures on stderr\n"
    "  --json           the text and its figures as one JSON object on stdout (a line per turn with -i):\n"
    "                   text, prompt_tokens, generated_tokens, prompt_tokens_per_second,\n"
    "                   decode_tokens_per_second, first_token_ms, total_seconds, stop_reason,\n"
    "                   peak_rss_bytes, memory {...}, scheduler {...}, cache {...}\n"
    "  --mode M         how the forward scheduler runs under --mem-limit: normal (all weights resident),\n"
    "                   memory_opt (weights streamed), streaming (and fewer tokens per pass) or adaptive (default)\n"
    "  --fallback STEPS when the run does not fit --mem-limit, step down in this order, each step on top\n"
    "                   of the last, until one fits: prefetch (the prefetch workers share one staging\n"
    "                   buffer), kv-f16, kv-int8 (a smaller KV cache), memory-opt, streaming (from --mode\n"
    "                   normal), kv-window (the longest rolling window that fits), comma-separated, or all\n"
    "                   (that order); each level tried is logged on stderr\n"
    "  --debug-exec     no in-place reuse of activations (the text must not change)\n"
    "  --dump-dag FILE  write the activation DAG and the arena plans as YAML\n"
    "  --memory-report FILE  write where memory went as JSON: TinyAI's account by category (recorded at\n"
    "                   each allocation) beside the OS's RSS (anonymous and file) at open, index, plan,\n"
    "                   warm-up, first token, every 16 tokens and close; peak_bytes and peak_rss_bytes\n"
    "  --memory-trace FILE  the same at every token as CSV, for tinyai-memplot FILE -o FILE.svg\n"
    "  -h, --help       this help; --version: the library's version\n"
    "SIZE: bytes, or with K, M or G, with or without B or iB (binary, decimals allowed:\n"
    "1.5M = 1.5MB = 1.5MiB = 1572864 bytes), at least 1.\n"
    "Exit status: 0 success, 1 runtime error (\"tinyai-generate: STATUS: message\" on stderr), 2 usage error.\n";

struct Output {
  bool printed = false;  // some text went to stdout
  size_t skip = 0;       // bytes of the echoed prompt not to print (--chat)
  bool json = false;     // --json: the text is kept for the turn's object
  std::string text;
};

int PrintPiece(const char* piece, size_t len, void* user) {
  Output* out = static_cast<Output*>(user);
  const size_t skipped = len < out->skip ? len : out->skip;
  out->skip -= skipped;
  piece += skipped;
  len -= skipped;
  if (out->json) {
    out->text.append(piece, len);
    return 0;
  }
  if (len > 0) out->printed = true;
  std::fwrite(piece, 1, len, stdout);
  std::fflush(stdout);
  return 0;
}

// The prompt from standard input ("-") or a file, read with its bound: the
// context's tokens at up to tt::kTextBytesPerToken bytes each (a longer text
// cannot fit the context), and no more than --mem-limit. One trailing newline
// is dropped; a NUL byte is refused (the prompt is text).
std::string ReadPrompt(const std::string& path, int32_t context, size_t mem_limit) {
  namespace tt = tinyai_tools;
  const std::string what = path == "-" ? "the prompt from standard input" : "the prompt file '" + path + "'";
  tt::InputBound bound;
  bound.bytes = static_cast<uint64_t>(context) * tt::kTextBytesPerToken;
  bound.status = TINYAI_ERR_CONTEXT_OVERFLOW;
  bound.rule = "the context's " + std::to_string(context) + " tokens at up to " +
               std::to_string(tt::kTextBytesPerToken) + " bytes each";
  bound.fix = "give a shorter prompt, or a longer --context (at most the model's seq_len)";
  if (mem_limit > 0 && mem_limit < bound.bytes) {
    bound.bytes = mem_limit;
    bound.status = TINYAI_ERR_RESOURCE_EXHAUSTED;
    bound.rule = "--mem-limit, which bounds everything held, the prompt too";
    bound.fix = "give a shorter prompt or a larger --mem-limit";
  }
  std::string text = tt::ReadInput(path, what, bound);
  const size_t nul = text.find('\0');
  if (nul != std::string::npos) {
    throw tt::RuntimeError(TINYAI_ERR_INVALID_ARGUMENT,
                           what + " holds a NUL byte at offset " + std::to_string(nul) + "; a prompt is text");
  }
  if (!text.empty() && text.back() == '\n') {
    text.pop_back();
    if (!text.empty() && text.back() == '\r') text.pop_back();
  }
  return text;
}

// The next line of standard input, without its end ("\n" or "\r\n"), at
// most bound bytes (a longer one is refused: it cannot fit the context);
// false at the end of input.
bool ReadLine(std::string* line, size_t bound) {
  namespace tt = tinyai_tools;
  line->clear();
  int c;
  while ((c = std::fgetc(stdin)) != EOF && c != '\n') {
    if (line->size() == bound) {
      throw tt::RuntimeError(TINYAI_ERR_CONTEXT_OVERFLOW, "a line of standard input is longer than the " +
                             std::to_string(bound) + " bytes a turn may hold (the context's tokens at up to " +
                             std::to_string(tt::kTextBytesPerToken) + " bytes each)");
    }
    if (c == '\0') throw tt::RuntimeError(TINYAI_ERR_INVALID_ARGUMENT, "a line of standard input holds a NUL byte");
    line->push_back(static_cast<char>(c));
  }
  if (!line->empty() && line->back() == '\r') line->pop_back();
  return c != EOF || !line->empty();
}

// The bytes the generation prints for prompt before its first sampled token:
// each token's text after the previous one, BOS (when the model adds it)
// not printed, as the library's session echoes a prompt.
size_t EchoBytes(TinyAILLM* llm, const std::string& prompt) {
  namespace tt = tinyai_tools;
  int32_t count = 0;
  TinyAIStatus s = tinyaiLLMTokenize(llm, prompt.c_str(), 1, nullptr, 0, &count);
  if (s != TINYAI_ERR_BUFFER_TOO_SMALL) tt::Check(s);
  std::vector<int32_t> ids(static_cast<size_t>(count));
  tt::Check(tinyaiLLMTokenize(llm, prompt.c_str(), 1, ids.data(), count, &count));
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  tt::Check(tinyaiGetLLMModelInfo(llm, &info));
  size_t bytes = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i == 0 && ids[0] == info.bosId) continue;
    size_t len = 0;
    s = tinyaiLLMDecodeToken(llm, i == 0 ? info.bosId : ids[i - 1], ids[i], nullptr, 0, &len);
    if (s != TINYAI_OK && s != TINYAI_ERR_BUFFER_TOO_SMALL) tt::Check(s);
    bytes += len;
  }
  return bytes;
}

// The figures of a generation: on stderr (Say) or as the turn's JSON
// object on stdout (--json).
struct Figures {
  TinyAILLM* llm;
  TinyAIMappedModel* model;
  const TinyAIForwardScheduler* sched;
  const TinyAILLMConfig* config;
  const TinyAIModelInfo* info;
  bool show_stats;

  static double Rate(int32_t tokens, double seconds) { return seconds > 0 ? tokens / seconds : 0.0; }

  std::string KvText() const {
    if (config->kvWindow > 0) {
      return "window " + std::to_string(config->kvWindow) + " + " + std::to_string(config->kvSinks) + " sinks";
    }
    return std::to_string(info->contextLength) + " positions" + (config->kvGrowable ? ", growable: held now" : "");
  }

  std::string Json(const std::string& text, const TinyAIGenerateStats& stats) const {
    namespace tt = tinyai_tools;
    auto u = [](uint64_t v) { return std::to_string(v); };
    TinyAIMemoryReport mem;
    mem.structSize = sizeof mem;
    tinyaiGetLLMMemoryReport(llm, &mem);
    TinyAISchedulerReport rep;
    rep.structSize = sizeof rep;
    tinyaiGetSchedulerReport(sched, &rep);
    TinyAICacheStats cs;
    cs.structSize = sizeof cs;
    tinyaiGetMappedModelCacheStats(model, &cs);
    std::string j = "{\"text\":" + tt::JsonString(text) + ",\"prompt_tokens\":" + std::to_string(stats.promptTokens) +
                    ",\"generated_tokens\":" + std::to_string(stats.generatedTokens) +
                    ",\"prompt_tokens_per_second\":" + tt::JsonNumber(Rate(stats.promptTokens, stats.promptSeconds)) +
                    ",\"decode_tokens_per_second\":" + tt::JsonNumber(Rate(stats.decodeTokens, stats.decodeSeconds)) +
                    ",\"first_token_ms\":" + tt::JsonNumber(stats.firstTokenSeconds * 1e3) +
                    ",\"total_seconds\":" + tt::JsonNumber(stats.totalSeconds) +
                    ",\"stop_reason\":" + tt::JsonString(tinyaiStopReasonName(stats.stopReason)) +
                    ",\"peak_rss_bytes\":" + u(tinyaiGetProcessPeakRss());
    j += ",\"memory\":{\"limit_bytes\":" + u(mem.memoryLimit) + ",\"peak_total_bytes\":" + u(mem.peakTotalBytes) +
         ",\"weights_peak_bytes\":" + u(mem.weightPeakBytes) + ",\"weight_cache_cap_bytes\":" + u(mem.weightCacheCap) +
         ",\"kv_cache_bytes\":" + u(mem.kvCacheBytes) + ",\"kv_type\":" + tt::JsonString(tinyaiKVTypeName(info->kvType)) +
         ",\"kv\":" + tt::JsonString(KvText()) + ",\"activation_bytes\":" + u(mem.activationBytes) +
         ",\"other_bytes\":" + u(mem.otherBytes) + ",\"least_mem_limit_bytes\":" + u(mem.minimumMemoryLimit) + "}";
    j += ",\"scheduler\":{\"reason\":" + tt::JsonString(rep.reason) + ",\"arena_bytes\":" + u(rep.arenaBytes) +
         ",\"lower_bound_bytes\":" + u(rep.lowerBoundBytes) + ",\"naive_bytes\":" + u(rep.naiveBytes) +
         ",\"tokens_per_pass\":" + std::to_string(rep.rowsPerPass) + "}";
    j += ",\"cache\":{\"hits\":" + u(cs.hits) + ",\"misses\":" + u(cs.misses) + ",\"bytes_read\":" + u(cs.bytesRead) +
         ",\"evictions\":" + u(cs.evictions) + ",\"prefetch_loads\":" + u(cs.prefetchLoads) +
         ",\"prefetch_hits\":" + u(cs.prefetchHits) + ",\"prefetch_dropped\":" + u(cs.prefetchDropped) +
         ",\"stalls\":" + u(cs.stalls) + ",\"bytes_read_direct\":" + u(cs.bytesReadDirect) +
         ",\"prefetch_workers\":" + u(cs.prefetchWorkers) + "}}\n";
    return j;
  }

  void Say(const TinyAIGenerateStats& stats) const {
    namespace tt = tinyai_tools;
    std::fprintf(stderr,
                 "tinyai-generate: %d prompt tokens at %.1f tokens/s, %d generated at %.1f tokens/s, "
                 "time to first token %.1f ms, total %.2f s; stopped: %s\n",
                 stats.promptTokens, Rate(stats.promptTokens, stats.promptSeconds), stats.generatedTokens,
                 Rate(stats.decodeTokens, stats.decodeSeconds), stats.firstTokenSeconds * 1e3, stats.totalSeconds,
                 tinyaiStopReasonName(stats.stopReason));
    TinyAIMemoryReport mem;
    mem.structSize = sizeof mem;
    tinyaiGetLLMMemoryReport(llm, &mem);
    std::fprintf(stderr,
                 "tinyai-generate: peak RSS %.1f MiB (OS); TinyAI held at most %.1f MiB: weights %.1f MiB (cap %s), "
                 "KV cache %.3f MiB (%s, %s), activations %.2f MiB, tables %.2f MiB\n",
                 tt::Mib(tinyaiGetProcessPeakRss()), tt::Mib(mem.peakTotalBytes), tt::Mib(mem.weightPeakBytes),
                 mem.weightCacheCap ? tt::MibText(mem.weightCacheCap).c_str() : "none", tt::Mib(mem.kvCacheBytes),
                 (std::string(tinyaiKVTypeName(info->kvType)) + (config->kvType == TINYAI_KV_AUTO ? " (auto)" : ""))
                     .c_str(),
                 KvText().c_str(), tt::Mib(mem.activationBytes), tt::Mib(mem.otherBytes));
    TinyAISchedulerReport rep;
    rep.structSize = sizeof rep;
    tinyaiGetSchedulerReport(sched, &rep);
    std::fprintf(stderr, "tinyai-generate: %s; arena %.3f MiB (lower bound %.3f, naive %.3f), %d tokens per pass\n",
                 rep.reason, tt::Mib(rep.arenaBytes), tt::Mib(rep.lowerBoundBytes), tt::Mib(rep.naiveBytes),
                 rep.rowsPerPass);
    if (!show_stats) return;
    TinyAICacheStats cs;
    cs.structSize = sizeof cs;
    tinyaiGetMappedModelCacheStats(model, &cs);
    const double positions = stats.promptTokens + stats.decodeTokens > 0 ? stats.promptTokens + stats.decodeTokens : 1;
    std::fprintf(stderr,
                 "tinyai-generate: cache: %llu hits, %llu misses, %.1f MiB read (%.2f MiB per position), "
                 "%llu evictions, prefetch %llu loads / %llu hits / %llu dropped, %llu stalls, "
                 "%.0f%% of reads direct, %llu prefetch workers\n",
                 static_cast<unsigned long long>(cs.hits), static_cast<unsigned long long>(cs.misses),
                 tt::Mib(cs.bytesRead), tt::Mib(cs.bytesRead) / positions,
                 static_cast<unsigned long long>(cs.evictions), static_cast<unsigned long long>(cs.prefetchLoads),
                 static_cast<unsigned long long>(cs.prefetchHits), static_cast<unsigned long long>(cs.prefetchDropped),
                 static_cast<unsigned long long>(cs.stalls),
                 cs.bytesRead > 0 ? 100.0 * static_cast<double>(cs.bytesReadDirect) / static_cast<double>(cs.bytesRead) : 0.0,
                 static_cast<unsigned long long>(cs.prefetchWorkers));
    std::fprintf(stderr,
                 "tinyai-generate: memory limit %s; least --mem-limit %s for this model, context, KV cache and %d "
                 "thread(s)\n",
                 mem.memoryLimit ? (std::to_string(mem.memoryLimit) + " bytes").c_str() : "none",
                 tt::LimitText(mem.minimumMemoryLimit).c_str(), config->threads == 0 ? tt::CpuCount() : config->threads);
  }
};

int Run(int argc, char** argv) {
  namespace tt = tinyai_tools;
  std::string model_path, prompt, prompt_file, dump_path, report_path, trace_path, system;
  bool have_prompt = false, quiet = false, show_stats = false, chat = false, have_system = false, interactive = false,
       json = false;
  TinyAIMmapConfig mmap_config = tinyaiCreateDefaultMmapConfig();
  mmap_config.maxCacheSize = 0;
  TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
  TinyAILLMConfig config = tinyaiCreateDefaultLLMConfig();
  config.threads = 0;
  std::vector<const char*> stops;
  tt::Args args;
  tt::AddModel(&args, &model_path);
  args.Flag({"-p", "--prompt"}, [&](const std::string&, const char* v) {
    prompt = v;
    have_prompt = true;
  });
  args.Flag({"-f", "--file"}, [&](const std::string&, const char* v) { prompt_file = v; });
  args.On({"--chat"}, [&] { chat = true; });
  args.On({"-i", "--interactive"}, [&] { interactive = true; });
  args.Flag({"--system"}, [&](const std::string&, const char* v) {
    system = v;
    have_system = true;
  });
  args.Flag({"-n", "--max-new", "--n-predict"}, [&](const std::string& f, const char* v) {
    params.maxNewTokens = tt::ParseInt32(f, v, 0, INT32_MAX, "0 = until the context is full");
  });
  args.Flag({"--steps"}, [&](const std::string& f, const char* v) {
    params.steps = tt::ParseInt32(f, v, 0, INT32_MAX, "0 = the context");
  });
  args.Flag({"--temp"}, [&](const std::string& f, const char* v) {
    params.sampler.temperature = static_cast<float>(tt::ParseFloat(f, v, 0.0, FLT_MAX));
  });
  args.Flag({"--top-p"}, [&](const std::string& f, const char* v) {
    params.sampler.topP = static_cast<float>(tt::ParseFloat(f, v, 0.0, 1.0, true));
  });
  args.Flag({"--top-k"}, [&](const std::string& f, const char* v) {
    params.sampler.topK = tt::ParseInt32(f, v, 0, INT32_MAX, "0 = off");
  });
  args.Flag({"--min-p"}, [&](const std::string& f, const char* v) {
    params.sampler.minP = static_cast<float>(tt::ParseFloat(f, v, 0.0, 1.0));
  });
  args.Flag({"--repeat-penalty"}, [&](const std::string& f, const char* v) {
    params.sampler.repeatPenalty = static_cast<float>(tt::ParseFloat(f, v, 0.0, FLT_MAX, true));
  });
  args.Flag({"--repeat-last-n"}, [&](const std::string& f, const char* v) {
    params.sampler.repeatLastN = tt::ParseInt32(f, v, 1, TINYAI_MAX_REPEAT_LAST_N);
  });
  args.Flag({"--stop"}, [&](const std::string& f, const char* v) {
    if (*v == '\0') {
      throw tt::UsageError(f + ": an empty stop string would stop before any text; give 1.." +
                           std::to_string(TINYAI_MAX_STOP_BYTES) + " bytes");
    }
    if (std::strlen(v) > TINYAI_MAX_STOP_BYTES) {
      throw tt::UsageError(f + ": '" + std::string(v, 40) + "...' is " + std::to_string(std::strlen(v)) +
                           " bytes; a stop string is at most " + std::to_string(TINYAI_MAX_STOP_BYTES));
    }
    if (stops.size() == TINYAI_MAX_STOP_STRINGS) {
      throw tt::UsageError(f + ": at most " + std::to_string(TINYAI_MAX_STOP_STRINGS) + " stop strings");
    }
    stops.push_back(v);
  });
  args.Flag({"-s", "--seed"}, [&](const std::string& f, const char* v) { params.sampler.seed = tt::ParseUint64(f, v); });
  tt::AddThreads(&args, &config.threads);
  tt::AddContext(&args, &config.contextLength);
  tt::AddMemLimit(&args, &config.memoryLimit);
  tt::AddKvType(&args, &config.kvType);
  tt::AddKvWindow(&args, &config.kvWindow, &config.kvSinks);
  args.On({"--kv-growable"}, [&] { config.kvGrowable = 1; });
  args.Flag({"--cache"}, [&](const std::string& f, const char* v) { mmap_config.maxCacheSize = tt::ParseByteLimit(f, v); });
  args.Flag({"--prefetch-threads"}, [&](const std::string& f, const char* v) {
    mmap_config.prefetchThreads = tt::ParsePrefetchThreads(f, v);
  });
  args.On({"--no-prefetch"}, [&] { mmap_config.prefetchEnabled = false; });
  args.Flag({"--direct-reads"}, [&](const std::string& f, const char* v) { mmap_config.directReads = tt::ParseDirectReads(f, v); });
  args.On({"--lru"}, [&] { mmap_config.adaptiveCaching = false; });
  args.On({"--stats"}, [&] { show_stats = true; });
  tt::AddQuiet(&args, &quiet);
  tt::AddJson(&args, &json);
  args.Flag({"--mode"}, [&](const std::string& f, const char* v) { config.mode = tt::ParseMode(f, v); });
  tt::AddFallback(&args, config.fallback);
  args.On({"--debug-exec"}, [&] { config.debugExecution = true; });
  args.Flag({"--dump-dag"}, [&](const std::string&, const char* v) { dump_path = v; });
  args.Flag({"--memory-report"}, [&](const std::string&, const char* v) { report_path = v; });
  args.Flag({"--memory-trace"}, [&](const std::string&, const char* v) { trace_path = v; });
  std::vector<std::string> positional;
  int exit_code = 0;
  if (!args.Parse(argc, argv, kTool, kUsage, &positional, &exit_code)) return exit_code;
  if (model_path.empty() && !positional.empty()) model_path = tt::TakeModel(model_path, &positional);
  if (!positional.empty()) {
    throw tt::UsageError("unexpected argument '" + positional[0] + "' (the prompt is -p PROMPT)");
  }
  if (model_path.empty()) throw tt::UsageError("-m MODEL is required");
  if (have_prompt && !prompt_file.empty()) throw tt::UsageError("give the prompt once: -p PROMPT, -p - or -f FILE");
  if (!have_prompt && prompt_file.empty() && !interactive) {
    throw tt::UsageError("a prompt is required: -p PROMPT, -p - or -f FILE (or -i: the turns from standard input)");
  }
  if (interactive && prompt == "-") throw tt::UsageError("-i reads its turns from standard input: -p - would too");
  if (have_system && !chat) throw tt::UsageError("--system goes with --chat");
  if (config.kvSinks > 0 && config.kvWindow == 0) throw tt::UsageError("--kv-sink goes with --kv-window");
  if (config.kvGrowable && config.kvWindow > 0) throw tt::UsageError("--kv-growable does not go with --kv-window");
  if (!dump_path.empty()) tt::CheckOutputPath(dump_path, "--dump-dag");
  if (!quiet) tt::SayMemLimit(kTool);

  tt::MemoryRecorder recorder(kTool, report_path, trace_path, {model_path, prompt_file});
  recorder.Note("model", tt::JsonString(model_path));
  recorder.Note("mem_limit", std::to_string(config.memoryLimit));
  tt::ModelHandle model = tt::OpenModel(model_path, &mmap_config);
  tt::LLMHandle llm = tt::CreateLLM(model.get(), config, quiet ? nullptr : kTool);
  if (!quiet) tt::SayFallback(kTool, llm.get());
  if (!quiet) tt::SayLLMWarning(kTool, llm.get());
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  tt::Check(tinyaiGetLLMModelInfo(llm.get(), &info));
  // The longest prompt: --context or the model's seq_len (with a window too,
  // as the library counts it).
  const int32_t prompt_context = config.contextLength > 0 ? config.contextLength : info.seqLen;
  if (!prompt_file.empty()) prompt = ReadPrompt(prompt_file, prompt_context, config.memoryLimit);
  else if (prompt == "-") prompt = ReadPrompt("-", prompt_context, config.memoryLimit);
  const TinyAIForwardScheduler* sched = tinyaiGetLLMScheduler(llm.get());
  if (!dump_path.empty()) tt::WriteDag(sched, dump_path);
  Output out;
  out.json = json;
  // A user's message as the model's chat template writes it: the first turn
  // (with the system message) or the next in the same conversation. The
  // first turn's echo (what the session prints before the answer) is not
  // printed; a later turn's never is (keepContext).
  const char* sys = have_system ? system.c_str() : nullptr;
  auto chat_turn = [&](const std::string& user, bool next) {
    size_t n = 0;
    TinyAIStatus cs = next ? tinyaiLLMChatNextTurn(llm.get(), user.c_str(), nullptr, 0, &n)
                           : tinyaiLLMChatPrompt(llm.get(), sys, user.c_str(), nullptr, 0, &n);
    if (cs != TINYAI_ERR_BUFFER_TOO_SMALL) tt::Check(cs);
    std::string turn(n + 1, '\0');
    tt::Check(next ? tinyaiLLMChatNextTurn(llm.get(), user.c_str(), &turn[0], turn.size(), &n)
                   : tinyaiLLMChatPrompt(llm.get(), sys, user.c_str(), &turn[0], turn.size(), &n));
    turn.resize(n);
    if (!next) out.skip = EchoBytes(llm.get(), turn);
    return turn;
  };
  params.onText = PrintPiece;
  params.user = &out;
  params.stop = stops.empty() ? nullptr : stops.data();
  params.stopCount = static_cast<int32_t>(stops.size());
  TinyAIGenerateStats stats;
  stats.structSize = sizeof stats;
  const Figures figures{llm.get(), model.get(), sched, &config, &info, show_stats};
  // One turn: the text, then the line's end (--json: the turn's object); a
  // failure before any text leaves stdout empty.
  auto generate = [&](const std::string& text, bool keep) {
    params.keepContext = keep ? 1 : 0;
    out.printed = false;
    out.text.clear();
    const TinyAIStatus s = tinyaiLLMGenerate(llm.get(), text.c_str(), &params, nullptr, 0, nullptr, &stats);
    out.skip = 0;
    if (json && s == TINYAI_OK) std::fputs(figures.Json(out.text, stats).c_str(), stdout);
    if (!json && (s == TINYAI_OK || out.printed)) std::fputc('\n', stdout);
    std::fflush(stdout);
    tt::Check(s);
  };
  const bool first_given = have_prompt || !prompt_file.empty();
  if (first_given) generate(chat ? chat_turn(prompt, false) : prompt, false);
  if (interactive) {
    // Each line read continues the text in the same KV cache (keepContext):
    // the model's context holds every turn, until it is full.
    const bool tty = isatty(STDIN_FILENO) != 0 && isatty(STDERR_FILENO) != 0;
    bool started = first_given;
    std::string line;
    const size_t bound = static_cast<size_t>(prompt_context) * tt::kTextBytesPerToken;
    while (true) {
      if (tty) std::fputs("> ", stderr);
      if (!ReadLine(&line, bound)) break;
      if (line.empty()) continue;
      if (chat) {
        generate(chat_turn(line, started), started);
      } else {
        if (!started) out.skip = EchoBytes(llm.get(), line);  // the first turn starts afresh; its echo is not printed
        generate(line, started);
      }
      started = true;
    }
  }
  recorder.Note("prompt_tokens", std::to_string(stats.promptTokens));
  recorder.Note("generated_tokens", std::to_string(stats.generatedTokens));
  if (!quiet && !json) figures.Say(stats);
  llm.reset();
  model.reset();
  recorder.Finish();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tinyai_tools::Main(kTool, kUsage, [&] { return Run(argc, argv); });
}
