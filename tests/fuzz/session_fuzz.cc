// libFuzzer target: session files (tinyaiLoadLLMSession, model/session.h).
//
// The input is SELECTOR FILE. SELECTOR's low bits pick one of the runners
// made once at start (two synthetic models written by the project's
// writer, head sizes 8 and 32, each with KV caches f32, f16 and int8, with
// a rolling window and sinks, and growable), which a file must match to get
// past the model and layout checks. FILE is loaded as the runner's session
// after its last 4 bytes are made the right CRC-32C of the rest (so that
// the fuzzer explores what the file says, not only its checksum), unless
// SELECTOR's top bit keeps them as they are. The seeds are sessions the
// runners saved (tinyaiSaveLLMSession) at several positions.
// TINYAI_FUZZ_TRACE=1 prints each input's runner and what its load and
// evaluation returned.
//
//  - A load returns TINYAI_OK or a specific error with a message.
//  - A refused load leaves the runner as it was: its position, its tokens,
//    and the next token's logits bit for bit.
//  - A load that succeeds holds a position inside the cache's range and
//    tokens inside the vocabulary; saved again it gives the same bytes; the
//    next token evaluates (or says TINYAI_ERR_NOT_FINITE for rows of NaN or
//    infinity, or TINYAI_ERR_CONTEXT_OVERFLOW at the context's end), and
//    what it evaluates samples inside the vocabulary.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "fuzz_util.h"
#include "import/model_builder.h"
#include "tinyai/tinyai.h"

namespace {

using tinyai_fuzz::CheckFailure;

// The prompt every runner holds before a load, and the token after it.
constexpr int32_t kPrompt[3] = {1, 40, 77};
constexpr int32_t kNext = 123;

struct Runner {
  std::string name;
  TinyAILLM* llm = nullptr;
  int32_t vocab = 0;
  int32_t context = 0;
  bool windowed = false;
  std::vector<int32_t> tokens;  // held after kPrompt
  std::vector<float> logits;    // of kNext after kPrompt
};

std::vector<Runner>& Runners() {
  static std::vector<Runner>* runners = new std::vector<Runner>();
  return *runners;
}

std::vector<int32_t> HeldTokens(TinyAILLM* llm) {
  int32_t n = 0;
  const TinyAIStatus s = tinyaiGetLLMTokens(llm, nullptr, 0, &n);
  FUZZ_CHECK(s == TINYAI_OK || s == TINYAI_ERR_BUFFER_TOO_SMALL, "tinyaiGetLLMTokens sizing: %s", tinyaiStatusString(s));
  std::vector<int32_t> out(static_cast<size_t>(n));
  int32_t m = -1;
  FUZZ_CHECK(tinyaiGetLLMTokens(llm, out.data(), n, &m) == TINYAI_OK && m == n, "tinyaiGetLLMTokens");
  return out;
}

// The runner at kPrompt (what every input starts from).
void AtPrompt(Runner& r) {
  FUZZ_CHECK(tinyaiResetLLM(r.llm) == TINYAI_OK, "%s: reset", r.name.c_str());
  FUZZ_CHECK(tinyaiLLMEval(r.llm, kPrompt, 3, nullptr) == TINYAI_OK, "%s: the prompt", r.name.c_str());
}

std::vector<float> NextLogits(Runner& r, TinyAIStatus* status) {
  std::vector<float> logits(static_cast<size_t>(r.vocab));
  *status = tinyaiLLMEval(r.llm, &kNext, 1, logits.data());
  return logits;
}

void AddRunners(TinyAIMappedModel* model, const char* model_name) {
  struct Kv {
    const char* name;
    TinyAIKVType type;
    int32_t window, sinks, growable;
  };
  const Kv kvs[] = {{"f32", TINYAI_KV_F32, 0, 0, 0},         {"f16", TINYAI_KV_F16, 0, 0, 0},
                    {"int8", TINYAI_KV_INT8, 0, 0, 0},       {"f32-window", TINYAI_KV_F32, 6, 2, 0},
                    {"int8-window", TINYAI_KV_INT8, 5, 1, 0}, {"f16-growable", TINYAI_KV_F16, 0, 0, 1}};
  for (const Kv& kv : kvs) {
    TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
    cfg.contextLength = 16;
    cfg.kvType = kv.type;
    cfg.kvWindow = kv.window;
    cfg.kvSinks = kv.sinks;
    cfg.kvGrowable = kv.growable;
    Runner r;
    r.name = std::string(model_name) + "/" + kv.name;
    FUZZ_CHECK(tinyaiCreateLLM(model, &cfg, &r.llm) == TINYAI_OK, "%s: create", r.name.c_str());
    TinyAIModelInfo info;
    std::memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    FUZZ_CHECK(tinyaiGetLLMModelInfo(r.llm, &info) == TINYAI_OK, "%s: info", r.name.c_str());
    r.vocab = info.vocabSize;
    r.context = info.contextLength;
    r.windowed = kv.window > 0;
    AtPrompt(r);
    r.tokens = HeldTokens(r.llm);
    TinyAIStatus s = TINYAI_OK;
    r.logits = NextLogits(r, &s);
    FUZZ_CHECK(s == TINYAI_OK, "%s: the next token", r.name.c_str());
    Runners().push_back(r);
  }
}

bool Trace() {
  static const bool trace = std::getenv("TINYAI_FUZZ_TRACE") != nullptr;
  return trace;
}

std::string Scratch(const char* name) { return tinyai_fuzz::ScratchDir::Get().File(name); }

// The checksum made right: CRC-32C of everything before the last 4 bytes.
void Seal(std::vector<uint8_t>* file) {
  if (file->size() < 4) return;
  const uint32_t crc = tinyai::Crc32c(0, file->data(), file->size() - 4);
  std::memcpy(file->data() + file->size() - 4, &crc, 4);
}

void WriteSeeds(const char* dir) {
  const std::string path = Scratch("seed.tsn");
  std::vector<int32_t> text;
  for (int32_t i = 0; i < 40; ++i) text.push_back(1 + (i * 37) % 250);
  for (size_t k = 0; k < Runners().size(); ++k) {
    Runner& r = Runners()[k];
    // Empty, a few tokens, the context full (a window: slid well past its ring).
    const int32_t lengths[] = {0, 5, r.windowed ? 40 : r.context};
    for (int32_t n : lengths) {
      FUZZ_CHECK(tinyaiResetLLM(r.llm) == TINYAI_OK, "reset");
      if (n > 0) FUZZ_CHECK(tinyaiLLMEval(r.llm, text.data(), n, nullptr) == TINYAI_OK, "%s: %d tokens", r.name.c_str(), n);
      FUZZ_CHECK(tinyaiSaveLLMSession(r.llm, path.c_str()) == TINYAI_OK, "%s: save", r.name.c_str());
      std::vector<uint8_t> file;
      FUZZ_CHECK(tinyai_fuzz::ReadFile(path, &file), "read %s", path.c_str());
      file.insert(file.begin(), static_cast<uint8_t>(k));
      tinyai_fuzz::WriteSeed(dir, r.name.substr(0, r.name.find('/')) + "-" + r.name.substr(r.name.find('/') + 1) +
                                      "-" + std::to_string(n) + ".bin",
                             file.data(), file.size());
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  struct Spec {
    const char* name;
    const char* spec;
  };
  const Spec specs[] = {{"h8", "dim=16,hidden=32,layers=2,heads=2,kv_heads=1,vocab=300,seq_len=32,seed=5"},
                        {"h32", "dim=64,hidden=64,layers=1,heads=2,kv_heads=1,vocab=260,seq_len=32,seed=6"}};
  for (const Spec& s : specs) {
    tinyai::LlamaShape shape;
    FUZZ_CHECK(tinyai::ParseSyntheticSpec(s.spec, &shape) == TINYAI_OK, "spec %s", s.spec);
    const std::string path = Scratch((std::string(s.name) + ".tmai").c_str());
    FUZZ_CHECK(tinyai::WriteSyntheticModel(shape, path.c_str()) == TINYAI_OK, "model %s", path.c_str());
    TinyAIMmapConfig mc = tinyaiCreateDefaultMmapConfig();
    mc.prefetchThreads = 0;
    TinyAIMappedModel* model = tinyaiOpenMappedModel(path.c_str(), &mc);  // open for the process's life
    FUZZ_CHECK(model != nullptr, "open %s", path.c_str());
    AddRunners(model, s.name);
  }
  tinyai_fuzz::WriteSeedsIfAsked(WriteSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Runner& r = Runners()[(data[0] & 0x7f) % Runners().size()];
  std::vector<uint8_t> file(data + 1, data + size);
  if ((data[0] & 0x80) == 0) Seal(&file);
  const std::string in = Scratch("in.tsn"), again = Scratch("again.tsn");
  FUZZ_CHECK(tinyai_fuzz::WriteFile(in, file.data(), file.size()), "cannot write %s", in.c_str());
  AtPrompt(r);
  tinyaiClearLastError();
  TinyAIStatus s = tinyaiLoadLLMSession(r.llm, in.c_str());
  if (Trace()) {
    std::fprintf(stderr, "%s, %zu bytes%s: load %s %s\n", r.name.c_str(), file.size(),
                 (data[0] & 0x80) ? " (checksum kept)" : "", tinyaiStatusString(s),
                 s != TINYAI_OK ? tinyaiGetLastErrorMessage() : "");
  }
  if (s != TINYAI_OK) {
    CheckFailure(s, "tinyaiLoadLLMSession");
    FUZZ_CHECK(tinyaiGetLLMPosition(r.llm) == 3, "%s: a refused load moved the position to %d", r.name.c_str(),
               tinyaiGetLLMPosition(r.llm));
    FUZZ_CHECK(HeldTokens(r.llm) == r.tokens, "%s: a refused load changed the tokens", r.name.c_str());
    const std::vector<float> logits = NextLogits(r, &s);
    FUZZ_CHECK(s == TINYAI_OK && std::memcmp(logits.data(), r.logits.data(), logits.size() * sizeof(float)) == 0,
               "%s: a refused load changed the next token's logits", r.name.c_str());
    return 0;
  }
  // Loaded: what the runner holds is a session's.
  const int32_t position = tinyaiGetLLMPosition(r.llm);
  FUZZ_CHECK(position >= 0 && (r.windowed || position <= r.context), "%s: position %d after a load", r.name.c_str(),
             position);
  for (int32_t t : HeldTokens(r.llm)) {
    FUZZ_CHECK(t >= 0 && t < r.vocab, "%s: a loaded session holds token %d (vocabulary %d)", r.name.c_str(), t,
               r.vocab);
  }
  FUZZ_CHECK(tinyaiSaveLLMSession(r.llm, again.c_str()) == TINYAI_OK, "%s: a loaded session does not save",
             r.name.c_str());
  std::vector<uint8_t> saved;
  FUZZ_CHECK(tinyai_fuzz::ReadFile(again, &saved), "read %s", again.c_str());
  FUZZ_CHECK(saved == file, "%s: a loaded session saves to other bytes (%zu, loaded %zu)", r.name.c_str(),
             saved.size(), file.size());
  std::vector<float> logits = NextLogits(r, &s);
  if (Trace()) std::fprintf(stderr, "  at %d, the next token: %s\n", position, tinyaiStatusString(s));
  if (s != TINYAI_OK) {
    CheckFailure(s, "tinyaiLLMEval after a load");
    FUZZ_CHECK(s == TINYAI_ERR_NOT_FINITE || s == TINYAI_ERR_CONTEXT_OVERFLOW, "%s: the next token fails: %s",
               r.name.c_str(), tinyaiStatusString(s));
    FUZZ_CHECK(s != TINYAI_ERR_CONTEXT_OVERFLOW || position == (r.windowed ? INT32_MAX : r.context),
               "%s: context overflow at position %d", r.name.c_str(), position);
    FUZZ_CHECK(tinyaiGetLLMPosition(r.llm) == position, "%s: a failed evaluation moved the position", r.name.c_str());
    return 0;
  }
  FUZZ_CHECK(tinyaiGetLLMPosition(r.llm) == position + 1, "%s: the position after one token", r.name.c_str());
  TinyAISamplerConfig sampler = tinyaiCreateDefaultSamplerConfig();
  sampler.temperature = 0.8f;
  uint64_t rng = size;
  int32_t token = -1;
  FUZZ_CHECK(tinyaiLLMSample(r.llm, logits.data(), &sampler, &rng, &token) == TINYAI_OK, "%s: sample",
             r.name.c_str());
  FUZZ_CHECK(token >= 0 && token < r.vocab, "%s: sampled token %d", r.name.c_str(), token);
  return 0;
}
