// tinyai-inspect: what a .tmai file holds, and with --plan what running it
// takes: the forward scheduler's activation arena against its lower bound and
// the naive total, the weights, KV cache and tables, the least memory limit,
// and the mode ADAPTIVE would choose under --mem-limit.
//   tinyai-inspect MODEL.tmai [--json] [--context N] [-t THREADS]
//                  [--plan] [--mem-limit SIZE] [--mode M] [--batch N] [--shape ROWS:CONTEXT]...
//                  [--debug-exec] [--dump-dag FILE]
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include <cstring>

#include "tinyai/tinyai.h"
#include "tinyai/utils/forward_scheduler.h"
#include "tools/common/cli.h"

namespace {

const char kUsage[] =
    "usage: tinyai-inspect MODEL.tmai [--json] [--context N] [-t THREADS]\n"
    "                      [--plan] [--mem-limit SIZE] [--mode M] [--batch N] [--shape ROWS:CONTEXT]...\n"
    "                      [--debug-exec] [--dump-dag FILE]\n"
    "  also reports the least --mem-limit a llama model runs under, for that context (default: the model's\n"
    "  seq_len) and thread count (default 1)\n"
    "  --plan        the forward scheduler's plan: arena, lower bound, naive total, weights, KV cache, tables,\n"
    "                least memory limit and the mode chosen under --mem-limit (default: no limit)\n"
    "  --mode M      normal, memory_opt, streaming or adaptive (default)\n"
    "  --batch N     rows per run of a dense network (default 1)\n"
    "  --shape R:C   a max shape to plan for (rows per pass : positions; C 0 = the context); repeatable\n"
    "  --debug-exec  plan without in-place reuse\n"
    "  --dump-dag F  write the activation DAG and the plans as YAML to F (implies --plan)\n";

void PrintJsonString(const char* s, size_t n) {
  std::putchar('"');
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') std::printf("\\%c", c);
    else if (c < 0x20) std::printf("\\u%04x", c);
    else std::putchar(c);
  }
  std::putchar('"');
}

int Run(int argc, char** argv) {
  std::string path;
  bool json = false, plan = false;
  uint64_t limit = 0;
  TinyAIExecutionMode mode = TINYAI_EXEC_ADAPTIVE;
  std::vector<TinyAIMaxShape> shapes;
  std::string dump_path;
  TinyAISchedulerConfig sched_config = tinyaiCreateDefaultSchedulerConfig();
  TinyAILLMConfig llm_config = tinyaiCreateDefaultLLMConfig();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw tinyai_tools::UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--json") json = true;
    else if (a == "--plan") plan = true;
    else if (a == "--mem-limit") limit = tinyai_tools::ParseSize(a, value());
    else if (a == "--mode") mode = tinyai_tools::ParseMode(a, value());
    else if (a == "--batch") sched_config.batchSize = static_cast<int32_t>(tinyai_tools::ParseInt(a, value()));
    else if (a == "--shape") shapes.push_back(tinyai_tools::ParseShape(a, value()));
    else if (a == "--debug-exec") sched_config.debugExecution = true;
    else if (a == "--dump-dag") { dump_path = value(); plan = true; }
    else if (a == "--context") llm_config.contextLength = static_cast<int32_t>(tinyai_tools::ParseInt(a, value()));
    else if (a == "-t") llm_config.threads = static_cast<int32_t>(tinyai_tools::ParseInt(a, value()));
    else if (a == "-h" || a == "--help") { std::fputs(kUsage, stdout); return 0; }
    else if (!a.empty() && a[0] == '-') throw tinyai_tools::UsageError("unknown option " + a);
    else if (path.empty()) path = a;
    else throw tinyai_tools::UsageError("one model at a time");
  }
  if (path.empty()) throw tinyai_tools::UsageError("MODEL.tmai is required");
  TinyAIMmapConfig cfg = tinyaiCreateDefaultMmapConfig();
  TinyAIMappedModel* model = tinyaiOpenMappedModel(path.c_str(), &cfg);
  if (!model) return tinyai_tools::ReportError("tinyai-inspect", tinyaiGetLastError());

  static const char* kIntKeys[] = {"llama.dim", "llama.hidden_dim", "llama.layers", "llama.heads", "llama.kv_heads",
                                   "llama.vocab_size", "llama.seq_len", "llama.shared_classifier"};
  const char* arch = "";
  size_t arch_len = 0;
  tinyaiGetMetadataString(model, "general.architecture", &arch, &arch_len);
  uint64_t weights = 0;
  for (int t = 0; t < tinyaiGetMappedTensorCount(model); ++t) {
    TinyAITensorInfo info;
    tinyaiGetMappedTensorInfo(model, t, &info);
    weights += info.decodedSize;
  }
  const int layers = tinyaiGetMappedLayerCount(model);
  // The least memory limit, for models the LLM runner serves.
  TinyAIMemoryReport mem;
  mem.structSize = sizeof mem;
  const bool have_mem = tinyaiEstimateLLMMemory(model, &llm_config, &mem) == TINYAI_OK;
  // The forward scheduler's plan (--plan).
  TinyAISchedulerReport rep;
  rep.structSize = sizeof rep;
  std::string no_fit;  // why nothing fits --mem-limit (the figures are then planned without it)
  std::string reason, note;
  if (plan) {
    if (shapes.size() > TINYAI_MAX_SHAPES) throw tinyai_tools::UsageError("at most 8 --shape");
    sched_config.threads = llm_config.threads;
    sched_config.contextLength = llm_config.contextLength;
    sched_config.maxShapeCount = static_cast<int32_t>(shapes.size());
    for (size_t i = 0; i < shapes.size(); ++i) sched_config.maxShapes[i] = shapes[i];
    TinyAIStatus s = TINYAI_OK;
    for (int attempt = 0; attempt < 2; ++attempt) {
      TinyAIForwardScheduler* sched = tinyaiCreateForwardSchedulerWithConfig(
          model, mode, attempt == 0 ? static_cast<size_t>(limit) : 0, &sched_config);
      s = sched ? tinyaiAddModelLayersToSchedule(sched) : tinyaiGetLastError();
      if (s == TINYAI_OK) s = tinyaiPlanForwardPass(sched);
      if (s == TINYAI_OK) s = tinyaiGetSchedulerReport(sched, &rep);
      if (s == TINYAI_OK && !dump_path.empty()) s = tinyai_tools::WriteDag(sched, dump_path);
      if (s == TINYAI_OK) {
        // The report's strings are the scheduler's.
        reason = rep.reason;
        note = rep.planNote;
        rep.reason = reason.c_str();
        rep.planNote = note.c_str();
      }
      tinyaiDestroyForwardScheduler(sched);
      if (s != TINYAI_ERR_RESOURCE_EXHAUSTED || attempt == 1) break;
      no_fit = tinyaiGetLastErrorMessage();
    }
    if (s != TINYAI_OK) {
      const int rc = tinyai_tools::ReportError("tinyai-inspect", s);
      tinyaiCloseMappedModel(model);
      return rc;
    }
    if (!no_fit.empty()) rep.memLimit = limit;
  }
  if (json) {
    std::printf("{\"file\":");
    PrintJsonString(path.c_str(), path.size());
    std::printf(",\"file_bytes\":%" PRIu64 ",\"format_version\":%u,\"architecture\":", tinyaiGetMappedModelFileSize(model),
                tinyaiFormatVersion());
    PrintJsonString(arch, arch_len);
    if (plan) {
      std::printf(",\"weights_bytes\":%" PRIu64 ",\"weights_resident_bytes\":%" PRIu64 ",\"arena_bytes\":%" PRIu64 ",\"lower_bound_bytes\":%" PRIu64
                  ",\"naive_bytes\":%" PRIu64 ",\"kv_bytes\":%" PRIu64 ",\"table_bytes\":%" PRIu64
                  ",\"min_mem_limit_bytes\":%" PRIu64 ",\"mem_limit_bytes\":%" PRIu64 ",\"weight_cache_cap_bytes\":%" PRIu64
                  ",\"largest_row_block_bytes\":%" PRIu64 ",\"fits\":%s,\"mode\":\"%s\",\"requested_mode\":\"%s\",\"reason\":",
                  rep.weightsBytes, rep.weightsResidentBytes, rep.arenaBytes, rep.lowerBoundBytes, rep.naiveBytes, rep.kvBytes, rep.tableBytes,
                  rep.minMemLimit, rep.memLimit, rep.weightCacheCap, rep.largestBlockBytes,
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
                  ",\"largest_row_block_bytes\":%" PRIu64 ",\"largest_row_block_tensor\":\"%s\"",
                  mem.minimumLimit, mem.kvBytes, mem.activationBytes, mem.largestBlockBytes, mem.largestBlockTensor);
    }
    for (const char* key : kIntKeys) {
      int64_t v;
      if (tinyaiGetMetadataInt(model, key, &v) == TINYAI_OK) std::printf(",\"%s\":%" PRId64, key, v);
    }
    std::printf(",\"layers\":[");
    for (int l = 0; l < layers; ++l) {
      const TinyAILayerDescriptor* d = tinyaiGetLayerDescriptor(model, l);
      std::printf("%s{\"index\":%d,\"name\":\"%s\",\"kind\":\"%s\",\"offset\":%" PRIu64 ",\"bytes\":%" PRIu64
                  ",\"tensors\":[",
                  l ? "," : "", l, d->name, tinyaiLayerKindName(d->kind), d->fileOffset, d->decodedSize);
      for (int t = d->firstTensor; t < d->firstTensor + d->tensorCount; ++t) {
        TinyAITensorInfo info;
        tinyaiGetMappedTensorInfo(model, t, &info);
        std::printf("%s{\"name\":\"%s\",\"role\":\"%s\",\"dtype\":\"%s\",\"codec\":\"%s\",\"shape\":[", t > d->firstTensor ? "," : "",
                    info.name, tinyaiTensorRoleName(info.role), tinyaiDTypeName(info.dtype), tinyaiCodecName(info.codec));
        for (int k = 0; k < info.nDims; ++k) std::printf("%s%" PRIu64, k ? "," : "", info.shape[k]);
        std::printf("],\"bytes\":%" PRIu64 ",\"crc32c\":\"%08x\"}", info.decodedSize, info.checksum);
      }
      std::printf("]}");
    }
    std::printf("]}\n");
  } else {
    std::printf("%s: .tmai v%u, %" PRIu64 " bytes, architecture %.*s, %.1f MiB of weights\n", path.c_str(),
                tinyaiFormatVersion(), tinyaiGetMappedModelFileSize(model), static_cast<int>(arch_len), arch,
                tinyai_tools::Mib(weights));
    for (const char* key : kIntKeys) {
      int64_t v;
      if (tinyaiGetMetadataInt(model, key, &v) == TINYAI_OK) std::printf("  %-24s %" PRId64 "\n", key, v);
    }
    if (plan) {
      std::printf("  plan: mode %s (asked %s%s%s)\n    %s\n", no_fit.empty() ? tinyaiExecutionModeName(rep.mode) : "NONE",
                  tinyaiExecutionModeName(rep.requestedMode), rep.memLimit ? ", limit " : ", no limit",
                  rep.memLimit ? (std::to_string(rep.memLimit) + " bytes").c_str() : "",
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
      std::printf("    weights %.2f MiB (%.2f MiB resident in NORMAL; largest row block %.3f MiB), KV cache %.2f MiB, tables %.3f MiB; cache cap %s\n",
                  tinyai_tools::Mib(rep.weightsBytes), tinyai_tools::Mib(rep.weightsResidentBytes),
                  tinyai_tools::Mib(rep.largestBlockBytes),
                  tinyai_tools::Mib(rep.kvBytes), tinyai_tools::Mib(rep.tableBytes),
                  rep.weightCacheCap ? (std::to_string(rep.weightCacheCap) + " bytes").c_str() : "none");
      std::printf("    least --mem-limit %.2f MiB (%" PRIu64 " bytes)\n", tinyai_tools::Mib(rep.minMemLimit), rep.minMemLimit);
    }
    if (have_mem) {
      std::printf("  least --mem-limit %.2f MiB (%" PRIu64 " bytes): row blocks up to %.2f MiB (tensor '%s'), KV cache "
                  "%.2f MiB, activations %.2f MiB, tables %.2f MiB\n",
                  tinyai_tools::Mib(mem.minimumLimit), mem.minimumLimit, tinyai_tools::Mib(mem.largestBlockBytes),
                  mem.largestBlockTensor, tinyai_tools::Mib(mem.kvBytes), tinyai_tools::Mib(mem.activationBytes),
                  tinyai_tools::Mib(mem.otherBytes));
    }
    std::printf("%d layers:\n", layers);
    for (int l = 0; l < layers; ++l) {
      const TinyAILayerDescriptor* d = tinyaiGetLayerDescriptor(model, l);
      std::printf("  [%3d] %-12s %-12s offset %10" PRIu64 "  %9.3f MiB  %d tensors\n", l, d->name,
                  tinyaiLayerKindName(d->kind), d->fileOffset, tinyai_tools::Mib(d->decodedSize), d->tensorCount);
      for (int t = d->firstTensor; t < d->firstTensor + d->tensorCount; ++t) {
        TinyAITensorInfo info;
        tinyaiGetMappedTensorInfo(model, t, &info);
        char shape[96];
        int n = 0;
        for (int k = 0; k < info.nDims; ++k) n += std::snprintf(shape + n, sizeof shape - n, "%s%" PRIu64, k ? " x " : "", info.shape[k]);
        std::printf("        %-22s %-16s %-6s %-5s [%s]  %" PRIu64 " bytes  crc32c %08x\n", info.name,
                    tinyaiTensorRoleName(info.role), tinyaiDTypeName(info.dtype), tinyaiCodecName(info.codec), shape,
                    info.decodedSize, info.checksum);
      }
    }
  }
  tinyaiCloseMappedModel(model);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const tinyai_tools::UsageError& e) {
    std::fprintf(stderr, "tinyai-inspect: %s\n%s", e.what(), kUsage);
    return 2;
  }
}
