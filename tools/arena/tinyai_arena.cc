// tinyai-arena: the static arena a model needs on the bare-metal port, for
// sizing `static uint8_t arena[N]` in firmware. Linked with the core built
// for ports/baremetal (no threads, no files, no heap), it reads the model
// into memory, asks tinyaiEstimateStaticArena, then checks the answer: an
// arena of exactly N bytes runs a short generation without allocating, one
// of N - 1 fails before running.
//   tinyai-arena MODEL.tmai [-c|--context N] [--kv-type T] [--kv-window N] [--kv-sink K] [--mem-limit SIZE]
//                [--reader] [--json]
// The figure holds for the build that measured it: this host build's
// pointers are 8 bytes; a 32-bit build (e.g. scripts/cross-test.sh armhf,
// run under qemu) gives the figure for a 32-bit device.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tinyai/tinyai.h"
#include "tools/common/args.h"
#include "tools/common/cli.h"

namespace {

const char kTool[] = "tinyai-arena";

const char kUsage[] =
    "usage: tinyai-arena [-m] MODEL [-c|--context N] [--kv-type T] [--kv-window N] [--kv-sink K]\n"
    "                    [--mem-limit SIZE] [--reader] [--json]\n"
    "       tinyai-arena -h | --help | --version\n"
    "  the bytes of static arena (tinyaiSetStaticArena) the model and an LLM over it need on the\n"
    "  bare-metal port, with weights used in place from a memory image, or with --reader read through\n"
    "  a callback into the weight cache (give --mem-limit to cap it). MODEL.tmai is read whole into\n"
    "  memory, as the device holds it: a regular file (its size is the bound), not a FIFO or a device\n"
    "  -m, --model MODEL the model (a .tmai or GGUF); the model alone, without -m, too\n"
    "  -c, --context N   tokens of KV cache, 0..1048576 (default 0 = the model's seq_len)\n"
    "  --kv-type T       KV cache storage: f32 (default), f16, int8 or auto (chosen in --mem-limit)\n"
    "  --kv-window N     a rolling window of N positions, 1..1048576 (with --kv-sink K first positions kept)\n"
    "  --kv-sink K       with --kv-window: the first positions kept, 0..1048576 (default 0)\n"
    "  --mem-limit SIZE  the LLM's memoryLimit, e.g. 1M or 1.5M, or auto: what this process's memory\n"
    "                    cgroup (else MemAvailable) leaves, less 16 MiB for the process (default: none)\n"
    "  --reader          weights read through a callback into the weight cache, not used in place\n"
    "  --json            one JSON object on stdout (\"context\" is the context used, \"requested_context\"\n"
    "                    the one asked for)\n"
    "  -h, --help        this help; --version: the library's version\n"
    "SIZE: bytes, or with K, M or G, with or without B or iB (binary, decimals allowed:\n"
    "1.5M = 1.5MB = 1.5MiB = 1572864 bytes), at least 1.\n"
    "Exit status: 0 when the estimate holds, 1 on a runtime error or when it does not hold (\"tinyai-arena:\n"
    "STATUS: message\" on stderr), 2 usage error.\n";

struct Image {
  void* data = nullptr;
  size_t size = 0;
  ~Image() { std::free(data); }
};

int ReadImage(void* user, uint64_t offset, void* dst, size_t size) {
  const Image* image = static_cast<const Image*>(user);
  if (offset > image->size || size > image->size - offset) return -1;
  std::memcpy(dst, static_cast<const char*>(image->data) + offset, size);
  return 0;
}

TinyAIArenaStats Stats() {
  TinyAIArenaStats s;
  std::memset(&s, 0, sizeof s);
  s.structSize = sizeof s;
  tinyaiGetStaticArenaStats(&s);
  return s;
}

// What a trial did.
struct TrialResult {
  TinyAIStatus status = TINYAI_OK;
  std::string message;      // the error's, when status is not TINYAI_OK
  uint64_t allocated = 0;   // allocations the generation made
  int32_t context = 0;      // the context the LLM used (when it was created)
  bool bos_only = false;    // the prompt was BOS alone: "Once" does not fit the context
};

// Opens the model and the LLM in the current arena and runs up to 8
// positions of greedy generation after the prompt "Once" (a prompt pass of
// several rows), or after BOS alone where "Once" does not fit the context (a
// context of 1 holds BOS and nothing else).
TrialResult Trial(const Image& image, bool reader, const TinyAILLMConfig& cfg) {
  TrialResult r;
  TinyAIMappedModel* model = reader ? tinyaiOpenMappedModelFromReader(ReadImage, const_cast<Image*>(&image),
                                                                      image.size, nullptr)
                                    : tinyaiOpenMappedModelFromMemory(image.data, image.size, nullptr);
  TinyAIStatus s = model ? TINYAI_OK : tinyaiGetLastError();
  TinyAILLM* llm = nullptr;
  if (s == TINYAI_OK) s = tinyaiCreateLLM(model, &cfg, &llm);
  if (s == TINYAI_OK) {
    TinyAIModelInfo info;
    std::memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    if (tinyaiGetLLMModelInfo(llm, &info) == TINYAI_OK) r.context = info.contextLength;
    const uint64_t before = Stats().allocations;
    TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
    gp.steps = 8;
    char text[256];
    s = tinyaiLLMGenerate(llm, "Once", &gp, text, sizeof text, nullptr, nullptr);
    if (s == TINYAI_ERR_CONTEXT_OVERFLOW) {
      r.bos_only = true;
      s = tinyaiResetLLM(llm);
      if (s == TINYAI_OK) s = tinyaiLLMGenerate(llm, "", &gp, text, sizeof text, nullptr, nullptr);
    }
    r.allocated = Stats().allocations - before;
  }
  if (s != TINYAI_OK) r.message = tinyaiGetLastErrorMessage();
  r.status = s;
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
  return r;
}

int Run(int argc, char** argv) {
  namespace tt = tinyai_tools;
  std::string path;
  bool reader = false, json = false;
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  tt::Args args;
  tt::AddModel(&args, &path);
  tt::AddContext(&args, &cfg.contextLength);
  tt::AddMemLimit(&args, &cfg.memoryLimit);
  tt::AddKvType(&args, &cfg.kvType);
  tt::AddKvWindow(&args, &cfg.kvWindow, &cfg.kvSinks);
  args.On({"--reader"}, [&] { reader = true; });
  tt::AddJson(&args, &json);
  std::vector<std::string> positional;
  int exit_code = 0;
  if (!args.Parse(argc, argv, kTool, kUsage, &positional, &exit_code)) return exit_code;
  if (path.empty() && !positional.empty()) path = tt::TakeModel(path, &positional);
  if (!positional.empty()) throw tt::UsageError("one model only ('" + positional[0] + "' is another)");
  if (path.empty()) throw tt::UsageError("a model is required: -m MODEL (or MODEL alone)");
  if (cfg.kvSinks > 0 && cfg.kvWindow == 0) throw tt::UsageError("--kv-sink goes with --kv-window");
  tt::SayMemLimit(kTool);

  // The image: the whole file, read straight into the aligned buffer; its
  // size (a regular file's, known before reading) is the bound.
  tt::InputFile in(path, "'" + path + "'", "a model is read whole into memory: its size is the bound");
  if (in.size() > SIZE_MAX - (size_t{256} << 20) - 128) {
    throw tt::RuntimeError(TINYAI_ERR_UNSUPPORTED, "'" + path + "' is " + std::to_string(in.size()) +
                                                       " bytes, more than this address space holds with the arena");
  }
  Image image;
  image.size = static_cast<size_t>(in.size());
  image.data = std::aligned_alloc(64, (image.size + 63) / 64 * 64 + 64);
  if (!image.data) throw tt::RuntimeError(TINYAI_ERR_OUT_OF_MEMORY, "out of memory for the model image");
  for (size_t done = 0; done < image.size;) {
    const size_t n = in.Read(static_cast<char*>(image.data) + done, image.size - done);
    if (n == 0) {
      throw tt::RuntimeError(TINYAI_ERR_TRUNCATED, "'" + path + "' ended after " + std::to_string(done) +
                                                       " of its " + std::to_string(image.size) +
                                                       " bytes; was it changed while read?");
    }
    done += n;
  }

  // A large arena to measure in: the image's size plus 256 MiB is plenty for
  // any model the image holds in place (KV and activations aside, which the
  // estimate's failure would name).
  const size_t big = image.size + (size_t{256} << 20);
  struct Region {
    void* data;
    ~Region() {
      tinyaiSetStaticArena(nullptr, 0);
      std::free(data);
    }
  } held{std::aligned_alloc(64, big)};
  void* region = held.data;
  if (!region) throw tt::RuntimeError(TINYAI_ERR_OUT_OF_MEMORY, "out of memory for the measuring arena");
  TinyAIStatus s = tinyaiSetStaticArena(region, big);
  size_t estimate = 0;
  if (s == TINYAI_OK) {
    s = tinyaiEstimateStaticArena(reader ? nullptr : image.data, image.size, reader ? ReadImage : nullptr,
                                  reader ? &image : nullptr, nullptr, &cfg, &estimate);
  }
  tt::Check(s);

  // The check: exactly the estimate runs without allocating; a byte less fails.
  tinyaiSetStaticArena(region, estimate);
  const TrialResult exact = Trial(image, reader, cfg);
  const uint64_t peak = Stats().peakBytes;
  tinyaiSetStaticArena(region, estimate - 1);
  const TrialResult short_by_one = Trial(image, reader, cfg);
  const bool ok = exact.status == TINYAI_OK && short_by_one.status == TINYAI_ERR_OUT_OF_MEMORY &&
                  exact.allocated == 0 && peak == estimate;
  // The context the LLM used (seq_len for 0; with a window, window + sinks).
  const int32_t context = exact.context;

  if (json) {
    std::printf("{\"model\":%s,\"weights\":\"%s\",\"pointer_bytes\":%zu,\"context\":%d,\"requested_context\":%d,"
                "\"mem_limit\":%zu,\"arena_bytes\":%zu,\"exact_runs\":%s,\"one_byte_less_fails\":%s,"
                "\"generation_allocations\":%llu,\"trial_prompt\":\"%s\"}\n",
                tt::JsonString(path).c_str(), reader ? "read callback" : "in place", sizeof(void*), context,
                cfg.contextLength, cfg.memoryLimit, estimate, exact.status == TINYAI_OK ? "true" : "false",
                short_by_one.status == TINYAI_ERR_OUT_OF_MEMORY ? "true" : "false",
                static_cast<unsigned long long>(exact.allocated), exact.bos_only ? "" : "Once");
  } else {
    std::printf("static arena for %s (weights %s, %zu-byte pointers, context %d%s): %s\n", path.c_str(),
                reader ? "through a read callback" : "in place", sizeof(void*), context,
                cfg.kvWindow > 0 ? ": the window and its sinks" : cfg.contextLength == 0 ? ", the model's seq_len" : "",
                tt::LimitText(estimate).c_str());
    std::printf("check: exactly %zu bytes %s (generation allocated %llu times); %zu bytes %s; the generation "
                "after %s\n",
                estimate, exact.status == TINYAI_OK ? "runs" : tinyaiStatusString(exact.status),
                static_cast<unsigned long long>(exact.allocated), estimate - 1,
                short_by_one.status == TINYAI_ERR_OUT_OF_MEMORY ? "fails with TINYAI_ERR_OUT_OF_MEMORY"
                                                                : tinyaiStatusString(short_by_one.status),
                exact.bos_only ? "BOS alone ('Once' does not fit the context)" : "'Once'");
  }
  // A run that fails for another reason than memory is that reason, not the
  // estimate's fault.
  if (exact.status != TINYAI_OK && exact.status != TINYAI_ERR_OUT_OF_MEMORY) {
    throw tt::RuntimeError(exact.status, "the check's generation failed: " + exact.message);
  }
  if (!ok) throw tt::RuntimeError(TINYAI_ERR_INTERNAL, "the estimate did not hold (see the check above)");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tinyai_tools::Main(kTool, kUsage, [&] { return Run(argc, argv); });
}
