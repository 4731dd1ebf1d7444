// tinyai-eval: how close a model's next-token distributions are to a
// reference's (e.g. a quantized model against its f32 original).
//
//   tinyai-eval --ref REF [-m] MODEL [--tokens N] [-s|--seed S] [-c|--context L] [-t THREADS]
//               [--kv-type T] [--kv-window N] [--kv-sink K] [--mem-limit SIZE] [--json]
//               [--memory-report FILE] [--memory-trace FILE]
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tools/common/args.h"
#include "tools/common/cli.h"
#include "tools/common/progress.h"
#include "tools/common/memory_report.h"
#include "tools/eval/compare.h"

namespace {

const char kUsage[] =
    "usage: tinyai-eval --ref REF [-m] MODEL [--tokens N] [-s|--seed S] [-c|--context L] [-t THREADS]\n"
    "                   [--kv-type T] [--kv-window N] [--kv-sink K] [--mem-limit SIZE] [--fallback STEPS] [--json]\n"
    "                   [--memory-report FILE] [--memory-trace FILE] [-q|--quiet]\n"
    "       tinyai-eval -h | --help | --version\n"
    "  Both models read one token stream sampled from REF (temperature 1, sequences of L tokens, each from BOS\n"
    "  when the models start a text with it - tokenizer.add_bos - else from a token drawn uniformly); at each\n"
    "  position: KL(REF || MODEL) of the next-token distributions and whether the top-1 tokens agree.\n"
    "  --ref REF       the reference model (e.g. the f32 original; .tmai or GGUF)\n"
    "  -m, --model MODEL  the model compared with it; the model alone, without -m, too\n"
    "  --tokens N      positions compared, 1..100000000 (default 2048)\n"
    "  -s, --seed S    seed of the sampled stream, 0..18446744073709551615 (default 1)\n"
    "  -c, --context L positions per sequence, 1..1048576 (default 256; at most the models' context);\n"
    "                  --sequence L is the same\n"
    "  -t, --threads N compute threads per model, 0..256 (default 0 = one per core)\n"
    "  --kv-type T     MODEL's KV cache storage: f32 (default), f16 or int8 (REF's stays f32; MODEL may be\n"
    "                  REF's file, to measure the KV storage alone)\n"
    "  --kv-window N   MODEL's KV cache as a rolling window of N positions, 1..1048576\n"
    "  --kv-sink K     with --kv-window: the first positions kept, 0..1048576 (default 0)\n"
    "  --mem-limit SIZE  bound everything TinyAI holds for MODEL, e.g. 64M, or auto (REF runs without)\n"
    "  --fallback STEPS  when MODEL does not fit --mem-limit, the steps to take, as tinyai-generate --fallback\n"
    "                  (so the quality the level reached costs is measured)\n"
    "  --json          print one JSON object: positions, mean_kld, p99_kld, max_kld, top1, ref, model\n"
    "  --memory-report FILE  write where memory went as JSON: TinyAI's account by category (both models)\n"
    "                  beside the OS's RSS at open, index, plan, warm-up, every 16 positions and close;\n"
    "                  peak_bytes and peak_rss_bytes\n"
    "  --memory-trace FILE  the same at every position as CSV, for tinyai-memplot FILE -o FILE.svg\n"
    "  -q, --quiet     no progress bar\n"
    "  -h, --help      this help; --version: the library's version\n";

int Run(int argc, char** argv) {
  std::string ref_path, report_path, trace_path;
  std::vector<std::string> positional;
  tinyai_tools::CompareOptions options;
  int32_t threads = 0;
  bool json = false;
  TinyAILLMConfig kv = tinyaiCreateDefaultLLMConfig();
  namespace tt = tinyai_tools;
  std::string model_path;
  bool quiet = false;
  tt::Args args;
  args.Flag({"--ref"}, [&](const std::string&, const char* v) { ref_path = v; });
  tt::AddModel(&args, &model_path);
  args.Flag({"--tokens"}, [&](const std::string& f, const char* v) { options.tokens = tt::ParseInt(f, v, 1, 100000000); });
  args.Flag({"-s", "--seed"}, [&](const std::string& f, const char* v) { options.seed = tt::ParseUint64(f, v); });
  // -c is the context as in every tool: here, the positions of a sequence.
  args.Flag({"-c", "--context", "--sequence"}, [&](const std::string& f, const char* v) {
    options.sequence = tt::ParseInt32(f, v, 1, tinyai::limits::kMaxSeqLen);
  });
  tt::AddThreads(&args, &threads);
  tt::AddKvType(&args, &kv.kvType, false);
  tt::AddKvWindow(&args, &kv.kvWindow, &kv.kvSinks);
  tt::AddMemLimit(&args, &kv.memoryLimit);
  tt::AddFallback(&args, kv.fallback);
  args.Flag({"--memory-report"}, [&](const std::string&, const char* v) { report_path = v; });
  args.Flag({"--memory-trace"}, [&](const std::string&, const char* v) { trace_path = v; });
  tt::AddJson(&args, &json);
  tt::AddQuiet(&args, &quiet);
  int exit_code = 0;
  if (!args.Parse(argc, argv, "tinyai-eval", kUsage, &positional, &exit_code)) return exit_code;
  if (model_path.empty() && !positional.empty()) model_path = tt::TakeModel(model_path, &positional);
  if (!positional.empty()) throw tt::UsageError("one MODEL to compare with the reference ('" + positional[0] + "' is another)");
  if (ref_path.empty()) throw tinyai_tools::UsageError("--ref REF.tmai is required");
  if (model_path.empty()) throw tinyai_tools::UsageError("give the MODEL to compare with the reference (-m MODEL or MODEL)");
  if (kv.kvSinks > 0 && kv.kvWindow == 0) throw tinyai_tools::UsageError("--kv-sink goes with --kv-window");
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  cfg.threads = threads;
  tinyai_tools::SayMemLimit("tinyai-eval");
  tinyai_tools::MemoryRecorder recorder("tinyai-eval", report_path, trace_path, {ref_path, model_path});
  recorder.Note("ref", tinyai_tools::JsonString(ref_path));
  recorder.Note("model", tinyai_tools::JsonString(model_path));
  recorder.Note("mem_limit", std::to_string(kv.memoryLimit));
  tinyai_tools::ModelHandle ref_model = tinyai_tools::OpenModel(ref_path, nullptr);
  tinyai_tools::ModelHandle model = tinyai_tools::OpenModel(model_path, nullptr);
  tinyai_tools::LLMHandle ref = tinyai_tools::CreateLLM(ref_model.get(), cfg);
  TinyAILLMConfig model_cfg = cfg;
  model_cfg.kvType = kv.kvType;
  model_cfg.kvWindow = kv.kvWindow;
  model_cfg.kvSinks = kv.kvSinks;
  model_cfg.memoryLimit = kv.memoryLimit;
  for (int i = 0; i < TINYAI_MAX_FALLBACK_STEPS; ++i) model_cfg.fallback[i] = kv.fallback[i];
  tinyai_tools::LLMHandle llm = tinyai_tools::CreateLLM(model.get(), model_cfg, "tinyai-eval");
  tinyai_tools::SayFallback("tinyai-eval", llm.get());
  tinyai_tools::ProgressBar bar("tinyai-eval", "", quiet);
  const tinyai_tools::CompareResult r =
      tinyai_tools::CompareModels(ref.get(), llm.get(), options, [&](int64_t done, int64_t total) {
        bar.Update(done, total, std::to_string(done) + "/" + std::to_string(total) + " positions");
      });
  if (json) {
    std::printf("{\"positions\": %lld, \"mean_kld\": %.6g, \"p99_kld\": %.6g, \"max_kld\": %.6g, \"top1\": %.6f, "
                "\"ref\": %s, \"model\": %s}\n",
                static_cast<long long>(r.positions), r.mean_kld, r.p99_kld, r.max_kld, r.top1,
                tinyai_tools::JsonString(ref_path).c_str(), tinyai_tools::JsonString(model_path).c_str());
  } else {
    std::printf("%s (KV %s%s) against %s, %lld positions (seed %llu):\n  mean KL %.6g  p99 KL %.6g  max KL %.6g  "
                "top-1 agreement %.4f\n",
                model_path.c_str(), tinyaiKVTypeName(kv.kvType),
                kv.kvWindow > 0 ? (", window " + std::to_string(kv.kvWindow) + " + " + std::to_string(kv.kvSinks) +
                                   " sinks").c_str()
                                : "",
                ref_path.c_str(), static_cast<long long>(r.positions),
                static_cast<unsigned long long>(options.seed), r.mean_kld, r.p99_kld, r.max_kld, r.top1);
  }
  recorder.Note("positions", std::to_string(r.positions));
  llm.reset();
  ref.reset();
  model.reset();
  ref_model.reset();
  recorder.Finish();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tinyai_tools::Main("tinyai-eval", kUsage, [&] { return Run(argc, argv); });
}
