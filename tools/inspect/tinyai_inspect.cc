// tinyai-inspect: what a .tmai file holds.
//   tinyai-inspect MODEL.tmai [--json] [--context N] [-t THREADS]
#include <cinttypes>
#include <cstdio>
#include <string>

#include "tinyai/tinyai.h"
#include "tools/common/cli.h"

namespace {

const char kUsage[] =
    "usage: tinyai-inspect MODEL.tmai [--json] [--context N] [-t THREADS]\n"
    "  also reports the least --mem-limit a llama model runs under, for that context (default: the model's\n"
    "  seq_len) and thread count (default 1)\n";

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
  bool json = false;
  TinyAILLMConfig llm_config = tinyaiCreateDefaultLLMConfig();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw tinyai_tools::UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--json") json = true;
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
  if (json) {
    std::printf("{\"file\":");
    PrintJsonString(path.c_str(), path.size());
    std::printf(",\"file_bytes\":%" PRIu64 ",\"format_version\":%u,\"architecture\":", tinyaiGetMappedModelFileSize(model),
                tinyaiFormatVersion());
    PrintJsonString(arch, arch_len);
    std::printf(",\"weights_bytes\":%" PRIu64, weights);
    if (have_mem) {
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
