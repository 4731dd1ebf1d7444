// tinyai-generate: text generation. The text goes to stdout exactly as the
// golden files show it; figures go to stderr.
//   tinyai-generate -m MODEL.tmai -p PROMPT -n STEPS [--temp T] [--top-p P] [--seed S]
//                   [-t THREADS] [--context N] [--quiet]
#include <cstdio>
#include <string>

#include "tinyai/tinyai.h"
#include "tools/common/cli.h"

namespace {

const char kUsage[] =
    "usage: tinyai-generate -m MODEL.tmai -p PROMPT [-n STEPS] [--temp T] [--top-p P] [--seed S]\n"
    "                       [-t THREADS] [--context N] [--quiet]\n"
    "  -n STEPS    positions in all, BOS and prompt included (default 256; 0 = the context)\n"
    "  --temp T    0 = greedy (default); --top-p P nucleus mass (default 0.9); --seed S (default 42)\n"
    "  -t THREADS  compute threads (default: one per core)\n"
    "  --quiet     no figures on stderr\n";

int PrintPiece(const char* piece, size_t len, void*) {
  std::fwrite(piece, 1, len, stdout);
  std::fflush(stdout);
  return 0;
}

int Run(int argc, char** argv) {
  std::string model_path, prompt;
  bool have_prompt = false, quiet = false;
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
    else if (a == "-n") params.steps = static_cast<int32_t>(tinyai_tools::ParseInt(a, value()));
    else if (a == "--temp") params.sampler.temperature = static_cast<float>(tinyai_tools::ParseFloat(a, value()));
    else if (a == "--top-p") params.sampler.topP = static_cast<float>(tinyai_tools::ParseFloat(a, value()));
    else if (a == "--seed") params.sampler.seed = static_cast<uint64_t>(tinyai_tools::ParseInt(a, value()));
    else if (a == "-t") config.threads = static_cast<int32_t>(tinyai_tools::ParseInt(a, value()));
    else if (a == "--context") config.contextLength = static_cast<int32_t>(tinyai_tools::ParseInt(a, value()));
    else if (a == "--quiet") quiet = true;
    else if (a == "-h" || a == "--help") { std::fputs(kUsage, stdout); return 0; }
    else throw tinyai_tools::UsageError("unknown argument " + a);
  }
  if (model_path.empty() || !have_prompt) throw tinyai_tools::UsageError("-m MODEL and -p PROMPT are required");

  TinyAIMmapConfig mmap_config = tinyaiCreateDefaultMmapConfig();
  TinyAIMappedModel* model = tinyaiOpenMappedModel(model_path.c_str(), &mmap_config);
  if (!model) return tinyai_tools::ReportError("tinyai-generate", tinyaiGetLastError());
  TinyAILLM* llm = nullptr;
  TinyAIStatus s = tinyaiCreateLLM(model, &config, &llm);
  if (s != TINYAI_OK) {
    tinyaiCloseMappedModel(model);
    return tinyai_tools::ReportError("tinyai-generate", s);
  }
  params.onText = PrintPiece;
  TinyAIGenerateStats stats;
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
                 "time to first token %.1f ms, total %.2f s\n",
                 stats.promptTokens, pp, stats.generatedTokens, tg, stats.firstTokenSeconds * 1e3, stats.totalSeconds);
    std::fprintf(stderr,
                 "tinyai-generate: peak RSS %.1f MiB (OS); weights resident %.1f MiB, KV cache %.1f MiB, "
                 "activations %.2f MiB (TinyAI)\n",
                 tinyai_tools::Mib(tinyaiGetProcessPeakRss()),
                 tinyai_tools::Mib(tinyaiGetMappedModelMemoryUsage(model)), tinyai_tools::Mib(info.kvCacheBytes),
                 tinyai_tools::Mib(info.activationBytes));
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
