// tinyai-arena: the static arena a model needs on the bare-metal port, for
// sizing `static uint8_t arena[N]` in firmware. Linked with the core built
// for ports/baremetal (no threads, no files, no heap), it reads the model
// into memory, asks tinyaiEstimateStaticArena, then checks the answer: an
// arena of exactly N bytes runs a short generation without allocating, one
// of N - 1 fails before running.
//   tinyai-arena MODEL.tmai [--context N] [--kv-type T] [--kv-window N] [--kv-sink K] [--mem-limit SIZE]
//                [--reader] [--json]
// The figure holds for the build that measured it: this host build's
// pointers are 8 bytes; a 32-bit build (e.g. scripts/cross-test.sh armhf,
// run under qemu) gives the figure for a 32-bit device.
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tinyai/tinyai.h"
#include "tools/common/cli.h"

namespace {

const char kTool[] = "tinyai-arena";

const char kUsage[] =
    "usage: tinyai-arena MODEL.tmai [--context N] [--kv-type T] [--kv-window N] [--kv-sink K]\n"
    "                    [--mem-limit SIZE] [--reader] [--json]\n"
    "       tinyai-arena -h | --help | --version\n"
    "  the bytes of static arena (tinyaiSetStaticArena) the model and an LLM over it need on the\n"
    "  bare-metal port, with weights used in place from a memory image, or with --reader read through\n"
    "  a callback into the weight cache (give --mem-limit to cap it)\n"
    "  --context N       tokens of KV cache, 0..1048576 (default 0 = the model's seq_len)\n"
    "  --kv-type T       KV cache storage: f32 (default), f16, int8 or auto (chosen in --mem-limit)\n"
    "  --kv-window N     a rolling window of N positions, 1..1048576 (with --kv-sink K first positions kept)\n"
    "  --kv-sink K       with --kv-window: the first positions kept, 0..1048576 (default 0)\n"
    "  --mem-limit SIZE  the LLM's memoryLimit, e.g. 1M or 1.5M (default: none)\n"
    "  --reader          weights read through a callback into the weight cache, not used in place\n"
    "  --json            one JSON object on stdout (\"context\" is the context used, \"requested_context\"\n"
    "                    the one asked for)\n"
    "  -h, --help        this help; --version: the library's version\n"
    "SIZE: bytes, or with K, M or G (binary, decimals allowed: 1.5M = 1572864 bytes), at least 1.\n"
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

// Opens the model and the LLM in the current arena and runs 8 positions of
// greedy generation. Returns the status; *allocated gets the allocations the
// generation made, *context (when the LLM was created) the context it used.
TinyAIStatus Trial(const Image& image, bool reader, const TinyAILLMConfig& cfg, uint64_t* allocated,
                   int32_t* context) {
  TinyAIMappedModel* model = reader ? tinyaiOpenMappedModelFromReader(ReadImage, const_cast<Image*>(&image),
                                                                      image.size, nullptr)
                                    : tinyaiOpenMappedModelFromMemory(image.data, image.size, nullptr);
  if (!model) return tinyaiGetLastError();
  TinyAILLM* llm = nullptr;
  TinyAIStatus s = tinyaiCreateLLM(model, &cfg, &llm);
  if (s == TINYAI_OK) {
    TinyAIModelInfo info;
    std::memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    if (tinyaiGetLLMModelInfo(llm, &info) == TINYAI_OK) *context = info.contextLength;
    const uint64_t before = Stats().allocations;
    TinyAIGenerateParams gp = tinyaiCreateDefaultGenerateParams();
    gp.steps = 8;
    char text[256];
    s = tinyaiLLMGenerate(llm, "Once", &gp, text, sizeof text, nullptr, nullptr);
    *allocated = Stats().allocations - before;
  }
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
  return s;
}

int Run(int argc, char** argv) {
  namespace tt = tinyai_tools;
  std::string path;
  bool reader = false, json = false;
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw tinyai_tools::UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--context") cfg.contextLength = tt::ParseContext(a, value());
    else if (a == "--mem-limit") cfg.memoryLimit = tt::ParseByteLimit(a, value());
    else if (a == "--kv-type") cfg.kvType = tt::ParseKvType(a, value());
    else if (a == "--kv-window") cfg.kvWindow = tt::ParseKvWindow(a, value());
    else if (a == "--kv-sink") cfg.kvSinks = tt::ParseKvSinks(a, value());
    else if (a == "--reader") reader = true;
    else if (a == "--json") json = true;
    else if (a == "-h" || a == "--help") { std::fputs(kUsage, stdout); return 0; }
    else if (a == "--version") return tt::PrintVersion(kTool);
    else if (!a.empty() && a[0] == '-') throw tt::UsageError("unknown argument " + a);
    else if (path.empty()) path = a;
    else throw tt::UsageError("one model only");
  }
  if (path.empty()) throw tt::UsageError("a model is required");
  if (cfg.kvSinks > 0 && cfg.kvWindow == 0) throw tt::UsageError("--kv-sink goes with --kv-window");

  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    throw tt::RuntimeError(tt::StatusOfErrno(err), "cannot read '" + path + "': " + std::strerror(err));
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw tt::RuntimeError(TINYAI_ERR_IO, "cannot read '" + path + "': " + std::strerror(errno));
  Image image;
  image.size = bytes.size();
  image.data = std::aligned_alloc(64, (bytes.size() + 63) / 64 * 64 + 64);
  if (!image.data) throw tt::RuntimeError(TINYAI_ERR_OUT_OF_MEMORY, "out of memory for the model image");
  std::memcpy(image.data, bytes.data(), bytes.size());
  bytes = std::vector<char>();

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
  uint64_t allocated = 0, unused = 0;
  int32_t context = 0, unused_context = 0;  // the context the LLM used (seq_len for 0; with a window, window + sinks)
  tinyaiSetStaticArena(region, estimate);
  const TinyAIStatus exact = Trial(image, reader, cfg, &allocated, &context);
  const uint64_t peak = Stats().peakBytes;
  tinyaiSetStaticArena(region, estimate - 1);
  const TinyAIStatus short_by_one = Trial(image, reader, cfg, &unused, &unused_context);
  const bool ok = exact == TINYAI_OK && short_by_one == TINYAI_ERR_OUT_OF_MEMORY && allocated == 0 && peak == estimate;

  if (json) {
    std::printf("{\"model\":%s,\"weights\":\"%s\",\"pointer_bytes\":%zu,\"context\":%d,\"requested_context\":%d,"
                "\"mem_limit\":%zu,\"arena_bytes\":%zu,\"exact_runs\":%s,\"one_byte_less_fails\":%s,"
                "\"generation_allocations\":%llu}\n",
                tt::JsonString(path).c_str(), reader ? "read callback" : "in place", sizeof(void*), context,
                cfg.contextLength, cfg.memoryLimit, estimate, exact == TINYAI_OK ? "true" : "false",
                short_by_one == TINYAI_ERR_OUT_OF_MEMORY ? "true" : "false",
                static_cast<unsigned long long>(allocated));
  } else {
    std::printf("static arena for %s (weights %s, %zu-byte pointers, context %d%s): %zu bytes (%s)\n", path.c_str(),
                reader ? "through a read callback" : "in place", sizeof(void*), context,
                cfg.kvWindow > 0 ? ": the window and its sinks" : cfg.contextLength == 0 ? ", the model's seq_len" : "",
                estimate, tt::MibText(estimate).c_str());
    std::printf("check: exactly %zu bytes %s (generation allocated %llu times); %zu bytes %s\n", estimate,
                exact == TINYAI_OK ? "runs" : tinyaiStatusString(exact), static_cast<unsigned long long>(allocated),
                estimate - 1, short_by_one == TINYAI_ERR_OUT_OF_MEMORY ? "fails with TINYAI_ERR_OUT_OF_MEMORY"
                                                                       : tinyaiStatusString(short_by_one));
  }
  if (!ok) throw tt::RuntimeError(TINYAI_ERR_INTERNAL, "the estimate did not hold (see the check above)");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tinyai_tools::Main(kTool, kUsage, [&] { return Run(argc, argv); });
}
