// tinyai-inspect: what a .tmai file holds (and where it came from: the
// format and file it was converted from), and with --plan what running it
// takes: the forward scheduler's activation arena against its lower bound and
// the naive total, the weights, KV cache and tables, the least memory limit,
// and the mode ADAPTIVE would choose under --mem-limit. The least limit is
// for tinyai-generate's defaults (one thread per core, the model's seq_len, an
// f32 KV cache) or the -t, --context and --kv-* given, and says which.
//   tinyai-inspect MODEL.tmai [--json] [-c|--context N] [-t THREADS] [--kv-type T] [--kv-window N] [--kv-sink K]
//                  [--plan] [--mem-limit SIZE] [--mode M] [--batch N] [--shape ROWS:CONTEXT]...
//                  [--debug-exec] [--dump-dag FILE]
// Exit status 1 when nothing fits --mem-limit (the report still goes to
// stdout, and the reason to stderr).
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include <cstring>

#include "tinyai/tinyai.h"
#include "tinyai/utils/forward_scheduler.h"
#include "tinyai/utils/prune.h"
#include "tools/bench/bandwidth_probe.h"
#include "tools/common/args.h"
#include "tools/common/cli.h"
#include "tools/common/dag.h"

namespace {

const char kTool[] = "tinyai-inspect";

const char kUsage[] =
    "usage: tinyai-inspect [-m] MODEL [--json] [-c|--context N] [-t THREADS] [--kv-type T] [--kv-window N]\n"
    "                      [--kv-sink K] [--plan] [--mem-limit SIZE] [--mode M] [--batch N] [--shape ROWS:CONTEXT]...\n"
    "                      [--debug-exec] [--dump-dag FILE]\n"
    "       tinyai-inspect [-m] MODEL --estimate [--mem-limit SIZE] [--cache SIZE] [-c|--context N] [--kv-type T]\n"
    "                      [-t THREADS] [--mode M] [--fallback STEPS] [--bandwidth GBPS] [--json]\n"
    "       tinyai-inspect -h | --help | --version\n"
    "  the model's name and source (the format and file it was converted from), hyper-parameters, layers and\n"
    "  tensors, and the least --mem-limit a llama model runs under with tinyai-generate's options: the\n"
    "  threads, context and KV cache below (tinyai-generate's defaults unless given), printed beside it,\n"
    "  rounded up (the figure given back to --mem-limit runs)\n"
    "  -m, --model MODEL  the model (.tmai or GGUF); the model alone, without -m, too\n"
    "  --json        one JSON object on stdout\n"
    "  -c, --context N\n"
    "                tokens of KV cache, 0..1048576 (default 0 = the model's seq_len)\n"
    "  -t, --threads N  compute threads, 0..256 (default 0 = one per core, as tinyai-generate)\n"
    "  --kv-type T   KV cache storage: f32 (default), f16, int8 or auto (chosen in --mem-limit)\n"
    "  --kv-window N a rolling window of N positions, 1..1048576 (with --kv-sink K first positions kept)\n"
    "  --kv-sink K   with --kv-window: the first positions kept, 0..1048576 (default 0)\n"
    "  --plan        the forward scheduler's plan: arena, lower bound, naive total, weights, KV cache, tables,\n"
    "                least memory limit and the mode chosen under --mem-limit (default: no limit)\n"
    "  --mem-limit SIZE  check the model fits this limit, e.g. 4M or 1.5G (implies --plan; exit status 1 when\n"
    "                nothing fits), or auto: what this process's memory cgroup (else MemAvailable) leaves,\n"
    "                less 16 MiB for the process\n"
    "  --mode M      normal, memory_opt, streaming or adaptive (default) (implies --plan)\n"
    "  --batch N     rows per run of a dense network, 1..2147483647 (default 1) (implies --plan)\n"
    "  --shape R:C   a max shape to plan for (rows per pass 1..2147483647 : positions 0..1048576, 0 = the\n"
    "                context); up to 8 (implies --plan)\n"
    "  --debug-exec  plan without in-place reuse (implies --plan)\n"
    "  --dump-dag F  write the activation DAG and the plans as YAML to F (implies --plan)\n"
    "  --estimate    before anything is allocated, what tinyai-generate with these options would choose and\n"
    "                hold (tinyaiPreflightLLM): the mode and KV type, the most TinyAI and the process hold, the\n"
    "                bytes a token reads (from memory and from storage) and the decode speed they allow at this\n"
    "                machine's memory bandwidth (measured, about a second, unless --bandwidth); exit status 1,\n"
    "                with what would fit, when nothing does (instead of the model's contents)\n"
    "  --cache SIZE  with --estimate: cap only the weight cache, as tinyai-generate --cache (default: none)\n"
    "  --bandwidth GBPS  with --estimate: the memory bandwidth to assume, in 1e9 bytes/s, 0.1..100000\n"
    "  --fallback STEPS  with --estimate: the fallback chain, as tinyai-generate --fallback; the level it\n"
    "                reaches is reported\n"
    "  -h, --help    this help; --version: the library's version\n"
    "SIZE: bytes, or with K, M or G, with or without B or iB (binary, decimals allowed:\n"
    "1.5M = 1.5MB = 1.5MiB = 1572864 bytes), at least 1.\n"
    "Exit status: 0 success, 1 runtime error or nothing fits --mem-limit (\"tinyai-inspect: STATUS: message\" on\n"
    "stderr), 2 usage error.\n";

void PrintJsonString(const char* s, size_t n) { std::fputs(tinyai_tools::JsonString(s, n).c_str(), stdout); }

const char* ModeName(TinyAIExecutionMode m) {
  switch (m) {
    case TINYAI_EXEC_NORMAL: return "NORMAL";
    case TINYAI_EXEC_MEMORY_OPT: return "MEMORY_OPT";
    case TINYAI_EXEC_STREAMING: return "STREAMING";
    default: return "ADAPTIVE";
  }
}

// --estimate: tinyaiPreflightLLM, and the decode speed the bytes a token
// reads allow at the memory bandwidth (measured in a child process unless
// given).
int Estimate(TinyAIMappedModel* model, const TinyAILLMConfig& config, double gbps, bool json) {
  namespace tt = tinyai_tools;
  TinyAIPreflight p;
  std::memset(&p, 0, sizeof p);
  p.structSize = sizeof p;
  tt::Check(tinyaiPreflightLLM(model, &config, &p));
  const int threads = config.threads > 0 ? config.threads : tt::CpuCount();
  const char* source = "given";
  if (gbps == 0) {
    gbps = tt::MeasureReadBandwidthInChild(threads, size_t{256} << 20, 3).best_gbps;
    source = "measured";
  }
  const double tps = gbps > 0 && p.decodeBytesPerToken > 0 ? gbps * 1e9 / static_cast<double>(p.decodeBytesPerToken) : 0;
  const std::string kv = tinyaiKVTypeName(p.kvType);
  if (json) {
    std::printf("{\"mode\":\"%s\",\"kv_type\":\"%s\",\"rows_per_pass\":%d,\"mem_limit_bytes\":%llu,"
                "\"minimum_mem_limit_bytes\":%llu,\"peak_bytes\":%llu,\"peak_rss_bytes\":%llu,\"weight_bytes\":%llu,"
                "\"weight_total_bytes\":%llu,\"largest_slice_bytes\":%llu,\"kv_cache_bytes\":%llu,"
                "\"activation_bytes\":%llu,\"other_bytes\":%llu,\"decode_bytes_per_token\":%llu,"
                "\"storage_bytes_per_token\":%llu,\"memory_gbps\":%.2f,\"bandwidth_source\":\"%s\","
                "\"decode_tokens_per_s_max\":%.1f,\"fallback_level\":%d,\"kv_window\":%d,\"kv_sinks\":%d}\n",
                ModeName(p.mode), kv.c_str(), p.rowsPerPass, static_cast<unsigned long long>(p.memoryLimit),
                static_cast<unsigned long long>(p.minimumMemoryLimit), static_cast<unsigned long long>(p.peakBytes),
                static_cast<unsigned long long>(p.processPeakBytes), static_cast<unsigned long long>(p.weightBytes),
                static_cast<unsigned long long>(p.weightTotalBytes), static_cast<unsigned long long>(p.largestSliceBytes),
                static_cast<unsigned long long>(p.kvCacheBytes), static_cast<unsigned long long>(p.activationBytes),
                static_cast<unsigned long long>(p.otherBytes), static_cast<unsigned long long>(p.decodeBytesPerToken),
                static_cast<unsigned long long>(p.storageBytesPerToken), gbps, source, tps, p.fallbackLevel,
                p.kvWindow, p.kvSinks);
    return 0;
  }
  std::printf("estimate, before anything is allocated (%d thread%s, KV cache %s, %s):\n", threads,
              threads == 1 ? "" : "s", kv.c_str(),
              p.memoryLimit == 0 ? "no memory limit" : ("--mem-limit " + std::to_string(p.memoryLimit)).c_str());
  std::printf("  mode %s, %d rows per pass\n", ModeName(p.mode), p.rowsPerPass);
  if (p.fallbackLevel > 0) {
    std::printf("  after %d step%s of --fallback: KV cache %s", p.fallbackLevel, p.fallbackLevel == 1 ? "" : "s",
                kv.c_str());
    if (p.kvWindow > 0) std::printf(", a rolling window of %d positions and %d sinks", p.kvWindow, p.kvSinks);
    std::printf("\n");
  }
  std::printf("  TinyAI holds at most %s: weights %s%s, KV cache %s, activations %s, tables %s\n",
              tt::MibText(p.peakBytes).c_str(), tt::MibText(p.weightBytes).c_str(),
              p.weightBytes < p.weightTotalBytes ? (" of " + tt::MibText(p.weightTotalBytes) + " (the cache's cap; it "
                                                    "holds whole row slices of up to " +
                                                    tt::MibText(p.largestSliceBytes) + ")").c_str()
                                                 : "",
              tt::MibText(p.kvCacheBytes).c_str(), tt::MibText(p.activationBytes).c_str(),
              tt::MibText(p.otherBytes).c_str());
  std::printf("  the process at most %s (with %s for code, libraries and stacks; less while the KV cache is not "
              "filled)\n",
              tt::MibText(p.processPeakBytes).c_str(), tt::MibText(p.processPeakBytes - p.peakBytes).c_str());
  std::printf("  a decoded token reads %s at the last position", tt::MibText(p.decodeBytesPerToken).c_str());
  if (p.storageBytesPerToken > 0) {
    std::printf(", %s of its weights from storage (they do not fit the cache)", tt::MibText(p.storageBytesPerToken).c_str());
  }
  std::printf("\n  decode at most %.1f tokens/s at %.1f GB/s of memory bandwidth (%s)%s\n", tps, gbps, source,
              p.storageBytesPerToken > 0 ? ", less as fast as storage delivers the rest" : "");
  std::printf("  least --mem-limit %s (%llu bytes)\n", tt::MibText(p.minimumMemoryLimit).c_str(),
              static_cast<unsigned long long>(p.minimumMemoryLimit));
  return 0;
}

int Run(int argc, char** argv) {
  namespace tt = tinyai_tools;
  std::string path;
  bool json = false, plan = false;
  uint64_t limit = 0;
  TinyAIExecutionMode mode = TINYAI_EXEC_ADAPTIVE;
  std::vector<TinyAIMaxShape> shapes;
  std::string dump_path;
  TinyAISchedulerConfig sched_config = tinyaiCreateDefaultSchedulerConfig();
  TinyAILLMConfig llm_config = tinyaiCreateDefaultLLMConfig();
  llm_config.threads = 0;  // tinyai-generate's default: one per core
  bool estimate = false;
  uint64_t cache = 0;
  double bandwidth = 0;
  // Every flag of the plan implies --plan: none is ignored.
  tt::Args args;
  tt::AddModel(&args, &path);
  tt::AddJson(&args, &json);
  args.On({"--plan"}, [&] { plan = true; });
  args.Flag({"--mem-limit"}, [&](const std::string& f, const char* v) {
    limit = tt::ParseMemLimit(f, v);
    plan = true;
  });
  args.Flag({"--mode"}, [&](const std::string& f, const char* v) {
    mode = tt::ParseMode(f, v);
    plan = true;
  });
  args.Flag({"--batch"}, [&](const std::string& f, const char* v) {
    sched_config.batchSize = tt::ParseInt32(f, v, 1, INT32_MAX);
    plan = true;
  });
  args.Flag({"--shape"}, [&](const std::string& f, const char* v) {
    shapes.push_back(tt::ParseShape(f, v));
    if (shapes.size() > TINYAI_MAX_SHAPES) {
      throw tt::UsageError(f + ": at most " + std::to_string(TINYAI_MAX_SHAPES) + " shapes");
    }
    plan = true;
  });
  args.On({"--debug-exec"}, [&] {
    sched_config.debugExecution = true;
    plan = true;
  });
  args.Flag({"--dump-dag"}, [&](const std::string&, const char* v) {
    dump_path = v;
    plan = true;
  });
  args.On({"--estimate"}, [&] { estimate = true; });
  tt::AddFallback(&args, llm_config.fallback);
  args.Flag({"--cache"}, [&](const std::string& f, const char* v) { cache = tt::ParseByteLimit(f, v); });
  args.Flag({"--bandwidth"}, [&](const std::string& f, const char* v) { bandwidth = tt::ParseFloat(f, v, 0.1, 100000.0); });
  tt::AddContext(&args, &llm_config.contextLength);
  tt::AddThreads(&args, &llm_config.threads);
  tt::AddKvType(&args, &llm_config.kvType);
  tt::AddKvWindow(&args, &llm_config.kvWindow, &llm_config.kvSinks);
  std::vector<std::string> positional;
  int exit_code = 0;
  if (!args.Parse(argc, argv, kTool, kUsage, &positional, &exit_code)) return exit_code;
  if (path.empty() && !positional.empty()) path = tt::TakeModel(path, &positional);
  if (!positional.empty()) throw tt::UsageError("one model at a time ('" + positional[0] + "' is another)");
  if (path.empty()) throw tt::UsageError("a model is required: -m MODEL (or MODEL alone)");
  if (llm_config.kvSinks > 0 && llm_config.kvWindow == 0) throw tt::UsageError("--kv-sink goes with --kv-window");
  if (!dump_path.empty()) tt::CheckOutputPath(dump_path, "--dump-dag");
  if (!estimate && (cache != 0 || bandwidth != 0)) throw tt::UsageError("--cache and --bandwidth go with --estimate");
  if (!estimate && llm_config.fallback[0] != TINYAI_FALLBACK_END) {
    throw tt::UsageError("--fallback goes with --estimate");
  }
  if (estimate && (!shapes.empty() || sched_config.batchSize != 1 || !dump_path.empty() || sched_config.debugExecution)) {
    throw tt::UsageError("--estimate is a language model's: --batch, --shape, --debug-exec and --dump-dag are --plan's");
  }
  tt::SayMemLimit(kTool);
  TinyAIMmapConfig cfg = tinyaiCreateDefaultMmapConfig();
  if (estimate) cfg.maxCacheSize = static_cast<size_t>(cache);  // tinyai-generate's: no cap unless --cache
  tt::ModelHandle model_handle = tt::OpenModel(path, &cfg);
  TinyAIMappedModel* model = model_handle.get();
  int64_t trained = 0;
  if (tinyaiGetMetadataInt(model, "llama.seq_len", &trained) == TINYAI_OK) {
    tt::SayContextPastTraining(kTool, llm_config.contextLength, trained);
  }
  if (estimate) {
    llm_config.memoryLimit = static_cast<size_t>(limit);
    llm_config.mode = mode;
    return Estimate(model, llm_config, bandwidth, json);
  }

  static const char* kIntKeys[] = {"llama.dim", "llama.hidden_dim", "llama.layers", "llama.heads", "llama.kv_heads",
                                   "llama.vocab_size", "llama.seq_len", "llama.shared_classifier", "llama.qkv_bias"};
  const char* arch = "";
  size_t arch_len = 0;
  tinyaiGetMetadataString(model, "general.architecture", &arch, &arch_len);
  uint64_t weights = 0;
  for (int t = 0; t < tinyaiGetMappedTensorCount(model); ++t) {
    TinyAITensorInfo info;
    std::memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    tinyaiGetMappedTensorInfo(model, t, &info);
    weights += info.decodedSize;
  }
  const int layers = tinyaiGetMappedLayerCount(model);
  // Where the model came from (the converters' general.* keys; "" when absent).
  auto meta = [&](const char* key) {
    const char* v = nullptr;
    size_t n = 0;
    return tinyaiGetMetadataString(model, key, &v, &n) == TINYAI_OK ? std::string(v, n) : std::string();
  };
  const std::string name = meta("general.name"), source_format = meta("general.source_format"),
                    source_file = meta("general.source_file");
  // The least memory limit, for models the LLM runner serves.
  TinyAIMemoryReport mem;
  mem.structSize = sizeof mem;
  // A llama model whose estimate fails (e.g. --context beyond its seq_len,
  // or hyper-parameters the runtime refuses) is an error, not a figure left
  // out: the listing is printed, then the error (exit status 1).
  const bool is_llama = std::string(arch, arch_len) == "llama";
  llm_config.memoryLimit = static_cast<size_t>(limit);  // what --kv-type auto chooses in
  const TinyAIStatus mem_status = is_llama ? tinyaiEstimateLLMMemory(model, &llm_config, &mem) : TINYAI_ERR_UNSUPPORTED;
  const std::string mem_error = is_llama && mem_status != TINYAI_OK ? tinyaiGetLastErrorMessage() : "";
  const bool have_mem = mem_status == TINYAI_OK;
  // What the least limit is for, printed beside it: the threads, context and
  // KV cache, each as tinyai-generate takes them.
  const int threads = llm_config.threads == 0 ? tt::CpuCount() : llm_config.threads;
  int64_t seq_len = 0;
  tinyaiGetMetadataInt(model, "llama.seq_len", &seq_len);
  const int64_t context = llm_config.contextLength != 0 ? llm_config.contextLength : seq_len;
  std::string assumed = "with " + std::to_string(threads) + (threads == 1 ? " thread" : " threads") +
                        (llm_config.threads == 0 ? " (-t 0: one per core)" : "");
  if (is_llama) {
    assumed += ", context " + std::to_string(context) + (llm_config.contextLength == 0 ? " (the model's seq_len)" : "") +
               ", KV cache " + tinyaiKVTypeName(llm_config.kvType);
    if (llm_config.kvWindow > 0) {
      assumed += ", window " + std::to_string(llm_config.kvWindow) + " + " + std::to_string(llm_config.kvSinks) + " sinks";
    }
  }
  // The forward scheduler's plan (--plan).
  TinyAISchedulerReport rep;
  rep.structSize = sizeof rep;
  std::string no_fit;  // why nothing fits --mem-limit (the figures are then planned without it)
  std::string reason, note;
  if (plan) {
    sched_config.threads = llm_config.threads;
    sched_config.contextLength = llm_config.contextLength;
    sched_config.kvType = llm_config.kvType;
    sched_config.kvWindow = llm_config.kvWindow;
    sched_config.kvSinks = llm_config.kvSinks;
    sched_config.maxShapeCount = static_cast<int32_t>(shapes.size());
    for (size_t i = 0; i < shapes.size(); ++i) sched_config.maxShapes[i] = shapes[i];
    TinyAIStatus s = TINYAI_OK;
    for (int attempt = 0; attempt < 2; ++attempt) {
      tt::SchedulerHandle sched(tinyaiCreateForwardSchedulerWithConfig(
          model, mode, attempt == 0 ? static_cast<size_t>(limit) : 0, &sched_config));
      s = sched ? tinyaiAddModelLayersToSchedule(sched.get()) : tinyaiGetLastError();
      if (s == TINYAI_OK) s = tinyaiPlanForwardPass(sched.get());
      if (s == TINYAI_OK) s = tinyaiGetSchedulerReport(sched.get(), &rep);
      if (s == TINYAI_OK && !dump_path.empty()) tt::WriteDag(sched.get(), dump_path);
      if (s == TINYAI_OK) {
        // The report's strings are the scheduler's.
        reason = rep.reason;
        note = rep.planNote;
        rep.reason = reason.c_str();
        rep.planNote = note.c_str();
      }
      if (s != TINYAI_ERR_RESOURCE_EXHAUSTED || attempt == 1) break;
      no_fit = tinyaiGetLastErrorMessage();
    }
    tt::Check(s);
    if (!no_fit.empty()) rep.memoryLimit = limit;
  }
  if (json) {
    std::printf("{\"file\":");
    PrintJsonString(path.c_str(), path.size());
    std::printf(",\"file_bytes\":%" PRIu64 ",\"format_version\":%u,\"architecture\":", tinyaiGetMappedModelFileSize(model),
                tinyaiFormatVersion());
    PrintJsonString(arch, arch_len);
    std::printf(",\"name\":%s,\"source_format\":%s,\"source_file\":%s", tt::JsonString(name).c_str(),
                tt::JsonString(source_format).c_str(), tt::JsonString(source_file).c_str());
    // What min_mem_limit_bytes is for.
    std::printf(",\"threads\":%d", threads);
    if (is_llama) {
      std::printf(",\"context\":%" PRId64 ",\"kv_type\":\"%s\",\"kv_window\":%d,\"kv_sinks\":%d", context,
                  tinyaiKVTypeName(llm_config.kvType), llm_config.kvWindow, llm_config.kvSinks);
    }
    if (plan) {
      std::printf(",\"weights_bytes\":%" PRIu64 ",\"weights_resident_bytes\":%" PRIu64 ",\"arena_bytes\":%" PRIu64 ",\"lower_bound_bytes\":%" PRIu64
                  ",\"naive_bytes\":%" PRIu64 ",\"kv_bytes\":%" PRIu64 ",\"table_bytes\":%" PRIu64
                  ",\"min_mem_limit_bytes\":%" PRIu64 ",\"mem_limit_bytes\":%" PRIu64 ",\"weight_cache_cap_bytes\":%" PRIu64
                  ",\"largest_row_slice_bytes\":%" PRIu64 ",\"fits\":%s,\"mode\":\"%s\",\"requested_mode\":\"%s\",\"reason\":",
                  rep.weightBytes, rep.weightResidentBytes, rep.arenaBytes, rep.lowerBoundBytes, rep.naiveBytes, rep.kvCacheBytes, rep.tableBytes,
                  rep.minimumMemoryLimit, rep.memoryLimit, rep.weightCacheCap, rep.largestSliceBytes,
                  no_fit.empty() ? "true" : "false", no_fit.empty() ? tinyaiExecutionModeName(rep.mode) : "NONE",
                  tinyaiExecutionModeName(rep.requestedMode));
      const std::string reason = no_fit.empty() ? rep.reason : no_fit;
      PrintJsonString(reason.c_str(), reason.size());
      std::printf(",\"rows_per_pass\":%d,\"ops\":%d,\"buffers\":%d,\"in_place_ops\":%d,\"shapes\":%d"
                  ",\"at_lower_bound\":%s,\"plan_note\":",
                  rep.rowsPerPass, rep.opCount, rep.bufferCount, rep.inPlaceCount, rep.shapeCount,
                  rep.atLowerBound ? "true" : "false");
      PrintJsonString(rep.planNote, std::strlen(rep.planNote));
    } else {
      std::printf(",\"weights_bytes\":%" PRIu64, weights);
    }
    if (have_mem && !plan) {
      std::printf(",\"min_mem_limit_bytes\":%" PRIu64 ",\"kv_bytes\":%" PRIu64 ",\"activation_bytes\":%" PRIu64
                  ",\"largest_row_slice_bytes\":%" PRIu64 ",\"largest_row_slice_tensor\":%s",
                  mem.minimumMemoryLimit, mem.kvCacheBytes, mem.activationBytes, mem.largestSliceBytes,
                  tt::JsonString(mem.largestSliceTensor).c_str());
    }
    for (const char* key : kIntKeys) {
      int64_t v;
      if (tinyaiGetMetadataInt(model, key, &v) == TINYAI_OK) std::printf(",\"%s\":%" PRId64, key, v);
    }
    std::printf(",\"layers\":[");
    for (int l = 0; l < layers; ++l) {
      const TinyAILayerDescriptor* d = tinyaiGetLayerDescriptor(model, l);
      std::printf("%s{\"index\":%d,\"name\":%s,\"kind\":\"%s\",\"offset\":%" PRIu64 ",\"bytes\":%" PRIu64
                  ",\"tensors\":[",
                  l ? "," : "", l, tt::JsonString(d->name).c_str(), tinyaiLayerKindName(d->kind), d->fileOffset,
                  d->decodedSize);
      for (int t = d->firstTensor; t < d->firstTensor + d->tensorCount; ++t) {
        TinyAITensorInfo info;
        std::memset(&info, 0, sizeof info);
        info.structSize = sizeof info;
        tinyaiGetMappedTensorInfo(model, t, &info);
        std::printf("%s{\"name\":%s,\"role\":\"%s\",\"dtype\":\"%s\",\"codec\":\"%s\",\"shape\":[", t > d->firstTensor ? "," : "",
                    tt::JsonString(info.name).c_str(), tinyaiTensorRoleName(info.role), tinyaiDTypeName(info.dtype),
                    tinyaiCodecName(info.codec));
        for (int k = 0; k < info.nDims; ++k) std::printf("%s%" PRIu64, k ? "," : "", info.shape[k]);
        std::printf("],\"bytes\":%" PRIu64 ",\"crc32c\":\"%08x\"", info.decodedSize, info.checksum);
        TinyAITensorSparsity sp;
        std::memset(&sp, 0, sizeof sp);
        sp.structSize = sizeof sp;
        if (tinyaiGetTensorSparsity(model, t, &sp) == TINYAI_OK && sp.blockSize > 0) {
          std::printf(",\"block\":%d,\"kept_blocks\":%" PRIu64 ",\"blocks_per_band\":%" PRIu64 ",\"dense_bytes\":%" PRIu64,
                      sp.blockSize, sp.keptBlocks, sp.blocksPerBand, sp.denseBytes);
        }
        std::printf("}");
      }
      std::printf("]}");
    }
    std::printf("]}\n");
  } else {
    std::printf("%s: .tmai v%u, %" PRIu64 " bytes, architecture %.*s, %.1f MiB of weights\n", path.c_str(),
                tinyaiFormatVersion(), tinyaiGetMappedModelFileSize(model), static_cast<int>(arch_len), arch,
                tinyai_tools::Mib(weights));
    if (!name.empty()) std::printf("  %-24s %s\n", "name", name.c_str());
    if (!source_format.empty()) {
      std::printf("  %-24s %s%s%s\n", "source", source_format.c_str(), source_file.empty() ? "" : " file ",
                  source_file.c_str());
    }
    for (const char* key : kIntKeys) {
      int64_t v;
      if (tinyaiGetMetadataInt(model, key, &v) == TINYAI_OK) std::printf("  %-24s %" PRId64 "\n", key, v);
    }
    // The vocabulary's kind (docs/tokenizers.md) and whether a chat template came with it.
    const std::string kind = meta("tokenizer.model"), pre = meta("tokenizer.pre"), chat = meta("tokenizer.chat_template");
    if (!kind.empty()) {
      int64_t nfc = 0;
      const bool normalizes = tinyaiGetMetadataInt(model, "tokenizer.nfc", &nfc) == TINYAI_OK && nfc == 1;
      std::printf("  %-24s %s%s%s%s%s\n", "tokenizer", kind.c_str(), pre.empty() ? "" : " (pre-tokenizer ", pre.c_str(),
                  pre.empty() ? "" : normalizes ? ", NFC)" : ")",
                  chat.empty() ? ", no chat template" : (", chat template of " + std::to_string(chat.size()) + " bytes").c_str());
    }
    if (plan) {
      std::printf("  plan: mode %s (asked %s%s%s)\n    %s\n", no_fit.empty() ? tinyaiExecutionModeName(rep.mode) : "NONE",
                  tinyaiExecutionModeName(rep.requestedMode), rep.memoryLimit ? ", limit " : ", no limit",
                  rep.memoryLimit ? (std::to_string(rep.memoryLimit) + " bytes").c_str() : "",
                  no_fit.empty() ? rep.reason : ("nothing fits: " + no_fit + " (figures below without the limit)").c_str());
      std::printf("    activation arena %" PRIu64 " bytes; lower bound %" PRIu64 " (%.3fx); naive %" PRIu64
                  " (%.2fx the arena)\n",
                  rep.arenaBytes, rep.lowerBoundBytes,
                  rep.lowerBoundBytes ? static_cast<double>(rep.arenaBytes) / static_cast<double>(rep.lowerBoundBytes) : 1.0,
                  rep.naiveBytes,
                  rep.arenaBytes ? static_cast<double>(rep.naiveBytes) / static_cast<double>(rep.arenaBytes) : 1.0);
      std::printf("    %d layers, %d operators (%d in place), %d buffers, %d max shape(s), %d rows per pass\n",
                  rep.layerCount, rep.opCount, rep.inPlaceCount, rep.bufferCount, rep.shapeCount, rep.rowsPerPass);
      if (!rep.atLowerBound) std::printf("    above the lower bound: %s\n", rep.planNote);
      std::printf("    weights %.2f MiB (%.2f MiB resident in NORMAL; largest row slice %.3f MiB), KV cache %.2f MiB, tables %.3f MiB; cache cap %s\n",
                  tinyai_tools::Mib(rep.weightBytes), tinyai_tools::Mib(rep.weightResidentBytes),
                  tinyai_tools::Mib(rep.largestSliceBytes),
                  tinyai_tools::Mib(rep.kvCacheBytes), tinyai_tools::Mib(rep.tableBytes),
                  rep.weightCacheCap ? (std::to_string(rep.weightCacheCap) + " bytes").c_str() : "none");
      std::printf("    least --mem-limit %s %s\n", tt::LimitText(rep.minimumMemoryLimit).c_str(), assumed.c_str());
    }
    if (have_mem) {
      std::printf("  least --mem-limit %s %s: row slices up to %.2f MiB (tensor '%s'), KV cache "
                  "%.2f MiB, activations %.2f MiB, tables %.2f MiB\n",
                  tt::LimitText(mem.minimumMemoryLimit).c_str(), assumed.c_str(), tinyai_tools::Mib(mem.largestSliceBytes),
                  mem.largestSliceTensor, tinyai_tools::Mib(mem.kvCacheBytes), tinyai_tools::Mib(mem.activationBytes),
                  tinyai_tools::Mib(mem.otherBytes));
    }
    std::printf("%d layers:\n", layers);
    for (int l = 0; l < layers; ++l) {
      const TinyAILayerDescriptor* d = tinyaiGetLayerDescriptor(model, l);
      std::printf("  [%3d] %-12s %-12s offset %10" PRIu64 "  %9.3f MiB  %d tensors\n", l, d->name,
                  tinyaiLayerKindName(d->kind), d->fileOffset, tinyai_tools::Mib(d->decodedSize), d->tensorCount);
      for (int t = d->firstTensor; t < d->firstTensor + d->tensorCount; ++t) {
        TinyAITensorInfo info;
        std::memset(&info, 0, sizeof info);
        info.structSize = sizeof info;
        tinyaiGetMappedTensorInfo(model, t, &info);
        char shape[96];
        int n = 0;
        for (int k = 0; k < info.nDims; ++k) n += std::snprintf(shape + n, sizeof shape - n, "%s%" PRIu64, k ? " x " : "", info.shape[k]);
        // A pruned matrix: its blocks and what it would take dense.
        char sparse[128] = "";
        TinyAITensorSparsity sp;
        std::memset(&sp, 0, sizeof sp);
        sp.structSize = sizeof sp;
        if (tinyaiGetTensorSparsity(model, t, &sp) == TINYAI_OK && sp.blockSize > 0) {
          std::snprintf(sparse, sizeof sparse, "  %dx%d blocks, %" PRIu64 " of %" PRIu64 " kept (%" PRIu64 " bytes dense)",
                        sp.blockSize, sp.blockSize, sp.keptBlocks, sp.blocksPerBand, sp.denseBytes);
        }
        std::printf("        %-22s %-16s %-6s %-5s [%s]  %" PRIu64 " bytes  crc32c %08x%s\n", info.name,
                    tinyaiTensorRoleName(info.role), tinyaiDTypeName(info.dtype), tinyaiCodecName(info.codec), shape,
                    info.decodedSize, info.checksum, sparse);
      }
    }
  }
  if (is_llama && mem_status != TINYAI_OK) throw tt::RuntimeError(mem_status, mem_error);
  if (!no_fit.empty()) {
    // The report above is the answer; the status says the model does not fit.
    throw tt::RuntimeError(TINYAI_ERR_RESOURCE_EXHAUSTED,
                           "nothing fits --mem-limit " + std::to_string(limit) + " bytes: " + no_fit);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tinyai_tools::Main(kTool, kUsage, [&] { return Run(argc, argv); });
}
