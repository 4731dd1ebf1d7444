// libFuzzer target: the C API's argument surface. The input is read as a
// sequence of calls (at most kMaxCalls) on a few handle slots - models
// opened from files, a memory image and a read callback that fails after a
// number of reads; LLMs; forward schedulers - with extreme integers, sizes,
// floats, NULLs, struct sizes and every value of every enum. Three small
// models are written once at start with the project's writers: a synthetic
// LLaMA (2 blocks, vocab 300, seq_len 32), the same compressed with zstd,
// and a dense network with a residual input. Every call must return (no
// hang: generation is bounded by the 32-position context, execution loops by
// a count from the input) and fail, when it fails, with a specific status
// that is also the thread's last error and comes with a message; what
// succeeds must be consistent (sampled and tokenized ids in the vocabulary,
// decoded lengths within the capacity, the optimal batch within its bounds).
//
// The caller's side of the contract is kept, as the headers state it: every
// buffer holds at least the capacity passed with it (so ASan sees any write
// past the capacity), a handle is not used after it is destroyed or closed
// (an orphaned runner's only call is its destroy), a run of
// tinyaiExecuteNextLayer keeps the buffers it started with, bools are 0 or
// 1, and the scheduler an LLM owns is only used through const calls. A
// schedule asks for more than 64 rows or 64 KiB per row only under a memory
// limit of at most 256 MiB (see Bounded): without one, the scheduler
// allocates the arena it is asked for, however large.
//
// Misuse the headers define is fuzzed too and must get TINYAI_ERR_MISUSE:
// destroying an LLM or a scheduler twice (back to back, so no new handle
// can take the address), destroying an LLM's own scheduler, closing a model
// twice or closing what is not a model, closing a model under live runners
// (which then refuse every call but destroy), and calling a runner back
// from its own text callback (only its reads are allowed; a callback may
// also run another runner). Enum arguments and fields take any int, and
// tinyaiCalculateOptimalBatchSize any maxBatch up to INT_MAX. (The four
// cases this target first left out as known bugs - maxBatch INT_MAX, enum
// values outside their enumerators, double destroys, re-entrant callbacks -
// were fixed on main by f1d55d8 and dcc3e1a while it was written; nothing is
// left out now.)
//
// Input format: every decision reads the fewest bytes that cover its range
// (Input::Below), front to back; missing bytes read as 0, and 0 is always
// the ordinary choice (a valid value, a non-NULL pointer). With
// TINYAI_FUZZ_WRITE_SEEDS=DIR the target writes its seed corpus (scripted
// call sequences, recorded as the bytes that replay them) and exits.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "import/model_builder.h"
#include "fuzz_util.h"
#include "tinyai/tinyai.h"

namespace {

using tinyai_fuzz::CheckFailure;
using tinyai_fuzz::CheckRecordedFailure;

constexpr int kMaxCalls = 48;
constexpr int kModels = 3, kLLMs = 2, kScheds = 2;
constexpr int32_t kSeqLen = 32, kVocab = 300;
// The most rows the fuzzer runs a dense network with, and the largest
// outputCapacity it configures.
constexpr int32_t kMaxRows = 64;
constexpr size_t kMaxOutputCapacity = 4096;

// ---- the input -----------------------------------------------------------

class Input {
 public:
  // Fuzzing: values from the bytes.
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  // Recording a seed: each call takes its values from a script, then 0s;
  // recorded() is the bytes that replay them.
  Input() : recording_(true) {}
  void Script(const std::vector<uint64_t>& values) {
    script_ = values;
    next_ = 0;
  }
  const std::vector<uint8_t>& recorded() const { return recorded_; }
  bool empty() const { return !recording_ && pos_ >= size_; }

  // A value in [0, n) (n == 0: any 64-bit value) from the fewest bytes that
  // cover the range, little-endian.
  uint64_t Below(uint64_t n) {
    int bytes = 8;
    if (n != 0) {
      bytes = 0;
      for (uint64_t top = n - 1; top > 0; top >>= 8) ++bytes;
    }
    if (recording_) {
      uint64_t v = next_ < script_.size() ? script_[next_++] : 0;
      if (n != 0) v %= n;
      for (int i = 0; i < bytes; ++i) recorded_.push_back(static_cast<uint8_t>(v >> (8 * i)));
      return v;
    }
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(pos_ < size_ ? data_[pos_++] : 0) << (8 * i);
    return n != 0 ? v % n : v;
  }
  bool Bool() { return Below(2) != 0; }
  int Range(int lo, int hi) { return lo + static_cast<int>(Below(static_cast<uint64_t>(hi - lo) + 1)); }
  // 1 in n times: a NULL pointer, an odd case.
  bool Rarely(int n) { return Below(static_cast<uint64_t>(n)) == 1; }
  // One of the values (the first is the ordinary one), or any 32-bit value.
  int32_t Int(std::initializer_list<int32_t> values) {
    const uint64_t k = Below(values.size() + 1);
    return k < values.size() ? *(values.begin() + k) : static_cast<int32_t>(static_cast<uint32_t>(Below(1ull << 32)));
  }
  size_t Size(std::initializer_list<size_t> values) {
    const uint64_t k = Below(values.size() + 1);
    return k < values.size() ? *(values.begin() + k) : static_cast<size_t>(Below(1ull << 32));
  }
  float Float() {
    static const float kFloats[] = {0.5f, 0.0f, -0.0f, 1e-45f, 1e-30f, 0.9f, 1.0f, 1.5f, 1e30f, -1.0f,
                                    std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                    std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max()};
    const uint64_t k = Below(sizeof kFloats / sizeof kFloats[0] + 1);
    if (k < sizeof kFloats / sizeof kFloats[0]) return kFloats[k];
    const uint32_t bits = static_cast<uint32_t>(Below(1ull << 32));
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  // A NUL-terminated text: a few fixed ones, or bytes from the input.
  std::string Text() {
    switch (Below(4)) {
      case 0: return "Once upon a time";
      case 1: return "";
      case 2: return "\xff\xfe \xc3\x28 \xf0\x9f\x98\x80 hi";
      default: {
        std::string s(static_cast<size_t>(Below(201)), ' ');
        for (char& c : s) c = static_cast<char>(Below(256));
        return s.substr(0, s.find('\0'));
      }
    }
  }
  // An enum of n enumerators 0..n-1: one of them (0 first), or -1, n,
  // INT_MAX or INT_MIN (any int is a value of the public enums).
  int Enum(int n) {
    const int k = static_cast<int>(Below(static_cast<uint64_t>(n) + 4));
    if (k < n) return k;
    const int odd[] = {-1, n, INT_MAX, INT_MIN};
    return odd[k - n];
  }
  // An execution mode, ADAPTIVE first.
  TinyAIExecutionMode Mode() {
    const int m = Enum(4);
    return static_cast<TinyAIExecutionMode>(m >= 0 && m < 4 ? 3 - m : m);
  }
  uint32_t StructSize(uint32_t size) {
    switch (Below(6)) {
      case 1: return 0;
      case 2: return size - 4;
      case 3: return size + 8;
      case 4: return UINT32_MAX;
      case 5: return static_cast<uint32_t>(Below(1ull << 32));
      default: return size;
    }
  }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0, pos_ = 0;
  bool recording_ = false;
  std::vector<uint64_t> script_;
  size_t next_ = 0;
  std::vector<uint8_t> recorded_;
};

// ---- models and slots --------------------------------------------------------

enum Source { kSynthetic, kCompressed, kDense, kMemory, kReader, kSourceCount };

// The models written at start, and the synthetic one's bytes for the memory
// image and the read callback.
struct Files {
  std::string path[3];       // kSynthetic, kCompressed, kDense
  uint8_t* image = nullptr;  // 64-byte aligned
  size_t image_size = 0;
  int32_t dense_input = 8, dense_output = 4;
};
Files g_files;

struct ReaderState {
  int32_t fail_after = -1;  // reads that succeed before every next one fails; -1: none fails
  int32_t calls = 0;
};

int ReadImage(void* user, uint64_t offset, void* dst, size_t size) {
  ReaderState* st = static_cast<ReaderState*>(user);
  if (st->fail_after >= 0 && st->calls++ >= st->fail_after) return 5;
  if (offset > g_files.image_size || size > g_files.image_size - offset) return 22;
  std::memcpy(dst, g_files.image + offset, size);
  return 0;
}

struct ModelSlot {
  TinyAIMappedModel* model = nullptr;
  Source source = kSynthetic;
  ReaderState reader;  // the read callback's state lives as long as the model
};
struct CallbackState;

struct LLMSlot {
  TinyAILLM* llm = nullptr;
  int model = -1;         // -1 once orphaned
  bool orphaned = false;  // its model was closed under it: every call but destroy is MISUSE
};
// A scheduler allocates the arena its schedule plans for when no memory
// limit stops it: 2^31 rows, or rows of 4 GB, are the caller's request for
// a 128 GB arena, not a bug, and more than the fuzzer's 2 GB. So schedules
// of more than kMaxRows rows (batchSize, maxShapes) or layers of more than
// kMaxUnboundedRowBytes per row are made only under a limit of at most
// 256 MiB, which the scheduler must then enforce (sizes past 2^48 bytes per
// row, which it refuses, are always fuzzed).
constexpr size_t kMaxUnboundedRowBytes = 65536;
bool Bounded(size_t limit) { return limit != 0 && limit <= (size_t{256} << 20); }

// What a text callback does (OnText), set before the call that runs it.
struct CallbackState {
  int pieces = 0;
  int stop_after = -1;  // ask to stop after this many pieces; -1 never
  int action = 0;       // a Reenter action, 0 none
  TinyAILLM* llm = nullptr;                 // the runner whose callback it is (one of the two)
  TinyAIForwardScheduler* sched = nullptr;
  TinyAIMappedModel* model = nullptr;       // its model
  TinyAILLM* other = nullptr;               // another LLM it may run
};

struct SchedSlot {
  TinyAIForwardScheduler* sched = nullptr;
  int model = -1;  // -1: no model (planning only), or orphaned
  bool orphaned = false;  // its model was closed under it: every call but destroy is MISUSE
  bool dense = false;     // a dense network's: execution reads and writes floats
  bool bounded = false;  // a memory limit of at most 256 MiB (Bounded)
  CallbackState callback;  // its generate params' user data (tinyaiSetSchedulerGenerateParams)
  size_t output_capacity = 1024;
  int32_t batch = 1;
  // A run keeps the buffers of the call that started it until it ends, so
  // they live as long as the slot: outputCapacity bytes of text, or
  // kMaxRows rows of the dense network's input and output.
  std::vector<char> text = std::vector<char>(kMaxOutputCapacity);
  std::vector<float> input, output;
};

ModelSlot g_models[kModels];
LLMSlot g_llms[kLLMs];
SchedSlot g_scheds[kScheds];

// Destroying twice is MISUSE and frees nothing; back to back, so that no new
// handle can have taken the address in between.
void DestroyLLM(int i, bool twice = false) {
  TinyAILLM* llm = g_llms[i].llm;
  for (SchedSlot& s : g_scheds) {
    if (s.callback.other == llm) s.callback.other = nullptr;  // a callback must not run a destroyed LLM
  }
  tinyaiDestroyLLM(llm);
  if (twice && llm) {
    tinyaiClearLastError();
    tinyaiDestroyLLM(llm);
    FUZZ_CHECK(tinyaiGetLastError() == TINYAI_ERR_MISUSE, "destroying an LLM twice records %s",
               tinyaiStatusString(tinyaiGetLastError()));
  }
  g_llms[i] = LLMSlot();
}

void DestroyScheduler(int i, bool twice = false) {
  TinyAIForwardScheduler* sched = g_scheds[i].sched;
  tinyaiDestroyForwardScheduler(sched);
  if (twice && sched) {
    tinyaiClearLastError();
    tinyaiDestroyForwardScheduler(sched);
    FUZZ_CHECK(tinyaiGetLastError() == TINYAI_ERR_MISUSE, "destroying a scheduler twice records %s",
               tinyaiStatusString(tinyaiGetLastError()));
  }
  g_scheds[i] = SchedSlot();
}

// Closes a model after destroying what depends on it, or (orphan) leaving
// its runners to refuse every call but destroy.
void CloseModel(int m, bool twice, bool orphan = false) {
  for (int i = 0; i < kLLMs; ++i) {
    if (!g_llms[i].llm || g_llms[i].model != m) continue;
    if (!orphan) {
      DestroyLLM(i);
      continue;
    }
    g_llms[i].orphaned = true;
    g_llms[i].model = -1;
  }
  for (int i = 0; i < kScheds; ++i) {
    if (!g_scheds[i].sched || g_scheds[i].model != m) continue;
    if (!orphan) {
      DestroyScheduler(i);
      continue;
    }
    g_scheds[i].orphaned = true;
    g_scheds[i].model = -1;
  }
  TinyAIMappedModel* model = g_models[m].model;
  tinyaiCloseMappedModel(model);
  if (twice && model) {
    tinyaiClearLastError();
    tinyaiCloseMappedModel(model);
    FUZZ_CHECK(tinyaiGetLastError() == TINYAI_ERR_MISUSE, "closing a model twice records %s",
               tinyaiStatusString(tinyaiGetLastError()));
  }
  g_models[m] = ModelSlot();
}

void ResetAll() {
  for (int m = 0; m < kModels; ++m) CloseModel(m, false);
  for (int i = 0; i < kLLMs; ++i) DestroyLLM(i);          // orphaned ones
  for (int i = 0; i < kScheds; ++i) DestroyScheduler(i);  // orphaned ones, and those without a model
}

TinyAIMappedModel* PickModel(Input& in, int* slot) {
  *slot = static_cast<int>(in.Below(kModels));
  return g_models[*slot].model;  // may be NULL
}

int32_t LayerCount(TinyAIMappedModel* m) { return m ? tinyaiGetMappedLayerCount(m) : 0; }

int32_t PickLayer(Input& in, TinyAIMappedModel* m) {
  const int32_t n = LayerCount(m);
  return in.Int({0, 1, 2, n - 1, -1, n, n + 1, INT_MAX, INT_MIN});
}

// TINYAI_FUZZ_TRACE=1 prints every checked call and its status (to read
// what an input does, e.g. a crash's).
const bool g_trace = std::getenv("TINYAI_FUZZ_TRACE") != nullptr;

// While set, a call on an orphaned runner (or a mutating one from a
// runner's own callback): every checked status must be TINYAI_ERR_MISUSE.
bool g_expect_misuse = false;
struct ExpectMisuse {
  explicit ExpectMisuse(bool on) : previous(g_expect_misuse) { g_expect_misuse = on; }
  ~ExpectMisuse() { g_expect_misuse = previous; }
  bool previous;
};

// A model call amid a runner's calls: the runner's state (orphaned, busy)
// is no reason for MISUSE here. Any model, any layer; 0 is a recorded failure.
void LayerOutputSizeOfAnyModel(Input& in) {
  ExpectMisuse not_on_the_runner(false);
  int m = -1;
  TinyAIMappedModel* model = PickModel(in, &m);
  if (tinyaiGetLayerOutputSize(model, PickLayer(in, model)) == 0) CheckRecordedFailure("tinyaiGetLayerOutputSize");
}

// A call's status: TINYAI_OK, or a failure CheckFailure accepts; with
// may_stop, also TINYAI_STOPPED (a callback asked to stop).
void Expect(TinyAIStatus s, const char* call, bool may_stop = false) {
  if (g_trace) {
    std::fprintf(stderr, "  %s: %s%s%s\n", call, tinyaiStatusString(s), s < 0 ? ": " : "",
                 s < 0 ? tinyaiGetLastErrorMessage() : "");
  }
  if (g_expect_misuse) {
    FUZZ_CHECK(s == TINYAI_ERR_MISUSE, "%s on an orphaned or busy runner: %s", call, tinyaiStatusString(s));
  }
  if (s == TINYAI_STOPPED) {
    FUZZ_CHECK(may_stop, "%s returned TINYAI_STOPPED", call);
    return;
  }
  if (s != TINYAI_OK) CheckFailure(s, call);
}

// tinyaiGetSchedulerStatus reports the last execution's status (recorded
// then), not a failure of its own: only NULL is an error of the call.
void ExpectStatusOf(const TinyAIForwardScheduler* s, bool orphaned) {
  const TinyAIStatus st = tinyaiGetSchedulerStatus(s);
  if (!s || orphaned) {
    if (orphaned) FUZZ_CHECK(st == TINYAI_ERR_MISUSE, "the status of an orphaned scheduler: %s", tinyaiStatusString(st));
    CheckFailure(st, "tinyaiGetSchedulerStatus");
    return;
  }
  FUZZ_CHECK((st <= TINYAI_OK || st == TINYAI_STOPPED) &&
                 std::strcmp(tinyaiStatusString(st), "TINYAI_ERR_UNKNOWN") != 0 && st != TINYAI_ERR_INTERNAL,
             "tinyaiGetSchedulerStatus: %d", static_cast<int>(st));
}

// ---- configurations ------------------------------------------------------------

TinyAIMmapConfig MmapConfig(Input& in) {
  TinyAIMmapConfig c = tinyaiCreateDefaultMmapConfig();
  c.structSize = in.StructSize(sizeof c);
  c.maxCacheSize = in.Size({256u << 20, 0, 1, 4096, 65536, 1u << 20, SIZE_MAX});
  c.minLayerCacheSize = in.Size({4096, 0, SIZE_MAX});
  c.prefetchThreads = in.Int({1, 0, 2, 64, -1, 65, INT_MAX, INT_MIN});
  c.prefetchEnabled = !in.Bool();
  c.adaptiveCaching = !in.Bool();
  c.verifyChecksums = !in.Bool();
  c.rowSliceSize = in.Size({1u << 20, 4096, 64, 65, 0, 63, SIZE_MAX});
  return c;
}

TinyAILLMConfig LLMConfig(Input& in) {
  TinyAILLMConfig c = tinyaiCreateDefaultLLMConfig();
  c.structSize = in.StructSize(sizeof c);
  c.contextLength = in.Int({0, 16, 1, 2, 7, kSeqLen, kSeqLen + 1, -1, INT_MAX, INT_MIN});
  // At most 3 threads: up to 256 are valid, but slow to start for every input.
  c.threads = in.Int({1, 0, 2, 3, -1, 257, INT_MAX, INT_MIN});
  if (c.threads > 3 && c.threads <= 256) c.threads = 3;
  c.memoryLimit = in.Size({0, 1, 4096, 65536, 200000, 400000, 1u << 20, 4u << 20, SIZE_MAX});
  c.mode = in.Mode();
  c.debugExecution = in.Bool();
  return c;
}

TinyAISamplerConfig SamplerConfig(Input& in) {
  TinyAISamplerConfig c = tinyaiCreateDefaultSamplerConfig();
  c.structSize = in.Rarely(4) ? in.StructSize(sizeof c) : sizeof c;
  c.temperature = in.Float();
  c.topP = in.Float();
  c.seed = in.Bool() ? 0 : in.Below(0);
  return c;
}

enum Reentry { kNoReentry, kRead, kMutate, kDestroyRunner, kCloseModel, kOtherRunner, kReentryCount };

// A runner's own text callback calling back into it: its reads work, every
// other call on it (and closing its model, destroying it) is MISUSE and
// changes nothing; running another LLM works.
void Reenter(const CallbackState& st) {
  if (st.llm) {
    TinyAILLM* llm = st.llm;
    TinyAIModelInfo info;
    std::memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    FUZZ_CHECK(tinyaiGetLLMModelInfo(llm, &info) == TINYAI_OK, "a callback reads its LLM's info: %s",
               tinyaiGetLastErrorMessage());
    switch (st.action) {
      case kRead: {
        int32_t ids[8];
        int32_t count = 0;
        char piece[16];
        size_t len = 0;
        TinyAIMemoryReport report;
        report.structSize = sizeof report;
        FUZZ_CHECK(tinyaiGetLLMPosition(llm) >= 0 && tinyaiLLMTokenize(llm, "hi", 1, ids, 8, &count) == TINYAI_OK &&
                       tinyaiLLMDecodeToken(llm, 1, 100, piece, sizeof piece, &len) == TINYAI_OK &&
                       tinyaiGetLLMMemoryReport(llm, &report) == TINYAI_OK && tinyaiGetLLMScheduler(llm) != nullptr,
                   "a callback cannot read its LLM: %s", tinyaiGetLastErrorMessage());
        return;
      }
      case kMutate: {
        ExpectMisuse misuse(true);
        const int32_t token = 100;
        std::vector<float> logits(static_cast<size_t>(info.vocabSize), 0.0f);
        TinyAISamplerConfig sampler = tinyaiCreateDefaultSamplerConfig();
        uint64_t rng = 1;
        int32_t sampled = -1;
        TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
        Expect(tinyaiLLMEval(llm, &token, 1, nullptr), "tinyaiLLMEval from the callback");
        Expect(tinyaiResetLLM(llm), "tinyaiResetLLM from the callback");
        Expect(tinyaiLLMSample(llm, logits.data(), &sampler, &rng, &sampled), "tinyaiLLMSample from the callback");
        Expect(tinyaiLLMGenerate(llm, "x", nullptr, nullptr, 0, nullptr, nullptr), "tinyaiLLMGenerate from the callback");
        Expect(tinyaiSetSchedulerGenerateParams(const_cast<TinyAIForwardScheduler*>(tinyaiGetLLMScheduler(llm)),
                                                &params),
               "tinyaiSetSchedulerGenerateParams from the callback");
        return;
      }
      case kDestroyRunner:
        tinyaiClearLastError();
        tinyaiDestroyLLM(llm);
        FUZZ_CHECK(tinyaiGetLastError() == TINYAI_ERR_MISUSE && tinyaiGetLLMPosition(llm) >= 0,
                   "destroying an LLM from its callback: %s", tinyaiStatusString(tinyaiGetLastError()));
        return;
      default:
        break;
    }
  } else if (st.sched) {
    TinyAIForwardScheduler* s = st.sched;
    switch (st.action) {
      case kRead: {
        TinyAISchedulerReport report;
        report.structSize = sizeof report;
        size_t needed = 0;
        tinyaiGetSchedulerMemoryUsage(s);
        ExpectStatusOf(s, false);
        FUZZ_CHECK(tinyaiGetSchedulerReport(s, &report) == TINYAI_OK, "a callback reads its scheduler's report: %s",
                   tinyaiGetLastErrorMessage());
        const TinyAIStatus dag = tinyaiDumpActivationDag(s, nullptr, 0, &needed);
        FUZZ_CHECK(dag == TINYAI_ERR_BUFFER_TOO_SMALL && needed > 1, "a callback sizes its scheduler's DAG: %s",
                   tinyaiStatusString(dag));
        return;
      }
      case kMutate: {
        ExpectMisuse misuse(true);
        TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
        tinyaiClearLastError();
        FUZZ_CHECK(!tinyaiExecuteNextLayer(s, "x", nullptr, nullptr), "a callback ran its scheduler's next layer");
        Expect(tinyaiGetLastError(), "tinyaiExecuteNextLayer from the callback");
        Expect(tinyaiPrepareForwardPass(s), "tinyaiPrepareForwardPass from the callback");
        Expect(tinyaiPlanForwardPass(s), "tinyaiPlanForwardPass from the callback");
        Expect(tinyaiAddModelLayersToSchedule(s), "tinyaiAddModelLayersToSchedule from the callback");
        Expect(tinyaiSetScheduleBatchSize(s, 1), "tinyaiSetScheduleBatchSize from the callback");
        Expect(tinyaiSetSchedulerOutputCapacity(s, 16), "tinyaiSetSchedulerOutputCapacity from the callback");
        Expect(tinyaiSetSchedulerGenerateParams(s, &params), "tinyaiSetSchedulerGenerateParams from the callback");
        tinyaiClearLastError();
        FUZZ_CHECK(tinyaiCalculateOptimalBatchSize(s, 4, 4, 4) == -1, "a callback planned its scheduler's batch");
        Expect(tinyaiGetLastError(), "tinyaiCalculateOptimalBatchSize from the callback");
        return;
      }
      case kDestroyRunner:
        tinyaiClearLastError();
        tinyaiDestroyForwardScheduler(s);
        FUZZ_CHECK(tinyaiGetLastError() == TINYAI_ERR_MISUSE, "destroying a scheduler from its callback: %s",
                   tinyaiStatusString(tinyaiGetLastError()));
        ExpectStatusOf(s, false);  // still alive
        return;
      default:
        break;
    }
  }
  if (st.action == kCloseModel && st.model) {
    tinyaiClearLastError();
    tinyaiCloseMappedModel(st.model);
    FUZZ_CHECK(tinyaiGetLastError() == TINYAI_ERR_MISUSE && tinyaiGetMappedLayerCount(st.model) > 0,
               "closing a model from its runner's callback: %s", tinyaiStatusString(tinyaiGetLastError()));
  }
  if (st.action == kOtherRunner && st.other) {
    TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
    params.steps = 4;
    char text[64];
    size_t len = 0;
    Expect(tinyaiLLMGenerate(st.other, "x", &params, text, sizeof text, &len, nullptr), "tinyaiLLMGenerate on another LLM");
  }
}

// Counts pieces, calls back into its runner (on the first two pieces) as
// st->action says, and asks to stop after stop_after pieces.
int OnText(const char* piece, size_t len, void* user) {
  CallbackState* st = static_cast<CallbackState*>(user);
  FUZZ_CHECK(piece != nullptr || len == 0, "a NULL piece of %zu bytes", len);
  ++st->pieces;
  if (g_trace) {
    std::fprintf(stderr, "  text callback, piece %d of %zu bytes (action %d, stop after %d)\n", st->pieces, len,
                 st->action, st->stop_after);
  }
  if (st->action != kNoReentry && st->pieces <= 2) Reenter(*st);
  return st->stop_after >= 0 && st->pieces > st->stop_after;
}

// The callback state's runner fields are the caller's to fill.
TinyAIGenerateParams GenerateParams(Input& in, CallbackState* cb) {
  TinyAIGenerateParams p = tinyaiCreateDefaultGenerateParams();
  // Also the size of the struct before maxNewTokens (llama2.c's steps alone).
  p.structSize = in.Rarely(4) ? (in.Bool() ? static_cast<uint32_t>(offsetof(TinyAIGenerateParams, maxNewTokens))
                                           : in.StructSize(sizeof p))
                              : sizeof p;
  p.steps = in.Int({16, 0, 1, 2, 5, kSeqLen, -1, INT_MAX, INT_MIN});
  p.maxNewTokens = in.Int({256, 0, 1, 3, -1, INT_MAX, INT_MIN});
  p.sampler = SamplerConfig(in);
  if (in.Bool()) {
    cb->stop_after = in.Range(-1, 8);
    cb->action = static_cast<int>(in.Below(kReentryCount));
    p.onText = OnText;
    p.user = cb;
  }
  return p;
}

TinyAISchedulerConfig SchedulerConfig(Input& in) {
  TinyAISchedulerConfig c = tinyaiCreateDefaultSchedulerConfig();
  c.structSize = in.StructSize(sizeof c);
  c.threads = in.Int({1, 0, 2, 3, -1, 257, INT_MAX, INT_MIN});
  if (c.threads > 3 && c.threads <= 256) c.threads = 3;
  c.batchSize = in.Int({1, 2, 3, 8, 64, 0, -1, 1 << 20, INT_MAX, INT_MIN});
  c.contextLength = in.Int({0, 1, 8, kSeqLen, kSeqLen + 1, -1, INT_MAX, INT_MIN});
  c.maxShapeCount = in.Int({0, 1, 2, TINYAI_MAX_SHAPES, -1, TINYAI_MAX_SHAPES + 1, INT_MAX, INT_MIN});
  for (int k = 0; k < TINYAI_MAX_SHAPES; ++k) {
    if (k >= c.maxShapeCount && k >= 2) break;  // unread shapes keep their defaults
    c.maxShapes[k].rows = in.Int({1, 2, 16, 64, 0, -1, 1 << 20, INT_MAX, INT_MIN});
    c.maxShapes[k].context = in.Int({0, 1, 8, kSeqLen, kSeqLen + 1, -1, INT_MAX, INT_MIN});
  }
  c.debugExecution = in.Bool();
  c.outputCapacity = in.Size({1024, 0, 1, 2, 16, 64});
  if (c.outputCapacity > kMaxOutputCapacity) c.outputCapacity = kMaxOutputCapacity;  // the slot's text buffer
  return c;
}

// ---- calls ----------------------------------------------------------------------

void OpenModel(Input& in) {
  const int m = static_cast<int>(in.Below(kModels));
  CloseModel(m, false);
  ModelSlot& slot = g_models[m];
  slot.source = static_cast<Source>(in.Below(kSourceCount));
  TinyAIMmapConfig config = MmapConfig(in);
  const TinyAIMmapConfig* cfg = in.Bool() ? nullptr : &config;
  TinyAIMappedModel* model = nullptr;
  switch (in.Below(8)) {
    case 1: model = tinyaiOpenMappedModel(nullptr, cfg); break;
    case 2: model = tinyaiOpenMappedModel("", cfg); break;
    case 3: model = tinyaiOpenMappedModel("/nonexistent/tinyai-fuzz.tmai", cfg); break;
    case 4: model = tinyaiOpenMappedModelFromMemory(nullptr, 64, cfg); break;
    case 5: model = tinyaiOpenMappedModelFromMemory(g_files.image + 1, g_files.image_size - 1, cfg); break;
    case 6: model = tinyaiOpenMappedModelFromReader(nullptr, nullptr, g_files.image_size, cfg); break;
    default:
      switch (slot.source) {
        case kSynthetic:
        case kCompressed:
        case kDense:
          model = tinyaiOpenMappedModel(g_files.path[slot.source].c_str(), cfg);
          break;
        case kMemory: {
          const size_t size = in.Bool() ? static_cast<size_t>(in.Below(g_files.image_size + 1)) : g_files.image_size;
          model = tinyaiOpenMappedModelFromMemory(g_files.image, size, cfg);
          break;
        }
        default: {
          slot.reader.fail_after = in.Bool() ? in.Range(0, 64) : -1;
          slot.reader.calls = 0;
          const uint64_t size = in.Bool() ? in.Below(0) : g_files.image_size;
          model = tinyaiOpenMappedModelFromReader(ReadImage, &slot.reader, size, cfg);
          break;
        }
      }
  }
  if (g_trace) {
    std::fprintf(stderr, "  open slot %d source %d (config %s: structSize %u, maxCacheSize %zu, minLayerCacheSize %zu, "
                 "prefetchThreads %d, prefetch %d, adaptive %d, verify %d, rowSliceSize %zu): %s\n",
                 m, slot.source, cfg ? "given" : "NULL", config.structSize, config.maxCacheSize,
                 config.minLayerCacheSize, config.prefetchThreads, config.prefetchEnabled, config.adaptiveCaching,
                 config.verifyChecksums, config.rowSliceSize, model ? "ok" : tinyaiGetLastErrorMessage());
  }
  if (!model) {
    CheckRecordedFailure("tinyaiOpenMappedModel*");
    return;
  }
  slot.model = model;
}

void LLMCall(Input& in) {
  const int op = static_cast<int>(in.Below(13));
  const int i = static_cast<int>(in.Below(kLLMs));
  if (op == 0) {  // create
    DestroyLLM(i);
    int m = -1;
    TinyAIMappedModel* model = PickModel(in, &m);
    TinyAILLMConfig config = LLMConfig(in);
    const TinyAILLMConfig* cfg = in.Bool() ? nullptr : &config;
    TinyAILLM* llm = nullptr;
    const TinyAIStatus s = tinyaiCreateLLM(model, cfg, in.Rarely(16) ? nullptr : &llm);
    if (g_trace) {
      std::fprintf(stderr, "  tinyaiCreateLLM slot %d on model slot %d (config %s: structSize %u, context %d, "
                   "threads %d, memoryLimit %zu, mode %d, debug %d): %s %s\n",
                   i, m, cfg ? "given" : "NULL", config.structSize, config.contextLength, config.threads,
                   config.memoryLimit, static_cast<int>(config.mode), config.debugExecution, tinyaiStatusString(s),
                   s ? tinyaiGetLastErrorMessage() : "");
    }
    if (s != TINYAI_OK) {
      CheckFailure(s, "tinyaiCreateLLM");
      FUZZ_CHECK(llm == nullptr, "a failed create returned a runner");
      return;
    }
    FUZZ_CHECK(llm != nullptr, "tinyaiCreateLLM succeeded without a runner");
    g_llms[i].llm = llm;
    g_llms[i].model = m;
    return;
  }
  if (op == 1) {
    DestroyLLM(i, in.Bool());
    return;
  }
  TinyAILLM* llm = in.Rarely(32) ? nullptr : g_llms[i].llm;
  const bool orphaned = llm && g_llms[i].orphaned;
  // An orphaned LLM refuses every call with MISUSE (getters: -1 or NULL).
  ExpectMisuse misuse(orphaned);
  int32_t vocab = 0;
  if (llm && !orphaned) {
    TinyAIModelInfo info;
    std::memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    FUZZ_CHECK(tinyaiGetLLMModelInfo(llm, &info) == TINYAI_OK, "model info");
    vocab = info.vocabSize;
  }
  TinyAILLM* other = g_llms[1 - i].llm && !g_llms[1 - i].orphaned ? g_llms[1 - i].llm : nullptr;
  switch (op) {
    case 2: {  // tokenize
      const std::string text = in.Text();
      const int32_t capacity = in.Int({64, 0, 1, 5, -1, INT_MIN});
      const bool with_buffer = !in.Rarely(8);
      if (with_buffer && capacity > 256) return;  // the buffer holds 256 ids
      std::vector<int32_t> tokens(with_buffer && capacity > 0 ? static_cast<size_t>(capacity) : 0);
      int32_t count = -1;
      const int nulls = static_cast<int>(in.Below(16));
      const TinyAIStatus s = tinyaiLLMTokenize(llm, nulls == 1 ? nullptr : text.c_str(), in.Int({1, 0, -1, INT_MIN}),
                                            with_buffer ? tokens.data() : nullptr, capacity,
                                            nulls == 2 ? nullptr : &count);
      Expect(s, "tinyaiLLMTokenize");
      if (s == TINYAI_OK) {
        FUZZ_CHECK(count >= 0 && static_cast<size_t>(count) <= tokens.size(), "%d ids in %zu", count, tokens.size());
        for (int32_t k = 0; k < count; ++k) {
          FUZZ_CHECK(tokens[static_cast<size_t>(k)] >= 0 && tokens[static_cast<size_t>(k)] < vocab, "id %d",
                     tokens[static_cast<size_t>(k)]);
        }
      }
      return;
    }
    case 3: {  // decode
      const int32_t prev = in.Int({1, 0, 2, 3, 35, 259, kVocab - 1, kVocab, -1, INT_MAX, INT_MIN});
      const int32_t token = in.Int({100, 0, 1, 2, 3, 35, 259, kVocab - 1, kVocab, -1, INT_MAX, INT_MIN});
      const size_t capacity = static_cast<size_t>(64 - in.Below(65));
      std::vector<char> out(capacity);
      size_t len = SIZE_MAX;
      const bool with_buffer = !in.Rarely(8);
      const TinyAIStatus s = tinyaiLLMDecodeToken(llm, prev, token, with_buffer ? out.data() : nullptr,
                                               with_buffer ? capacity : static_cast<size_t>(in.Below(2)),
                                               in.Rarely(16) ? nullptr : &len);
      Expect(s, "tinyaiLLMDecodeToken");
      if (s == TINYAI_OK) FUZZ_CHECK(len <= capacity, "decoded %zu bytes into %zu", len, capacity);
      return;
    }
    case 4: {  // eval
      std::vector<int32_t> tokens(8);
      for (int32_t& t : tokens) t = in.Int({1, 100, 0, 2, kVocab - 1, kVocab, -1, INT_MAX, INT_MIN});
      int32_t count = in.Int({2, 1, 8, 0, -1, INT_MIN});
      if (count > 8) count = 8;  // the buffer holds 8
      std::vector<float> logits(static_cast<size_t>(vocab > 0 ? vocab : 1));
      TinyAIStatus s;
      switch (in.Below(4)) {
        case 1: s = tinyaiLLMEval(llm, nullptr, in.Bool() ? INT_MAX : count, nullptr); break;
        case 2: s = tinyaiLLMEval(llm, tokens.data(), count, nullptr); break;
        default: s = tinyaiLLMEval(llm, tokens.data(), count, logits.data()); break;
      }
      Expect(s, "tinyaiLLMEval");
      return;
    }
    case 5: {  // sample
      std::vector<float> logits(static_cast<size_t>(vocab > 0 ? vocab : 1));
      const uint64_t fill = in.Below(3);
      for (size_t k = 0; k < logits.size(); ++k) {
        logits[k] = fill == 0 ? static_cast<float>(k % 17) * 0.25f : fill == 1 ? 0.0f : in.Float();
      }
      TinyAISamplerConfig sampler = SamplerConfig(in);
      uint64_t rng = in.Bool() ? 0 : in.Below(0);
      int32_t token = -1;
      const int nulls = static_cast<int>(in.Below(16));
      const TinyAIStatus s = tinyaiLLMSample(llm, nulls == 1 ? nullptr : logits.data(), nulls == 2 ? nullptr : &sampler,
                                          nulls == 3 ? nullptr : &rng, nulls == 4 ? nullptr : &token);
      Expect(s, "tinyaiLLMSample");
      if (s == TINYAI_OK) FUZZ_CHECK(token >= 0 && token < vocab, "sampled %d of %d", token, vocab);
      return;
    }
    case 6: {  // generate
      CallbackState cb;
      cb.llm = llm;
      cb.model = g_llms[i].model >= 0 ? g_models[g_llms[i].model].model : nullptr;
      cb.other = other;
      TinyAIGenerateParams params = GenerateParams(in, &cb);
      const std::string prompt = in.Text();
      const size_t capacity = in.Size({1024, 0, 1, 8, 64});
      if (capacity > 4096) return;
      std::vector<char> out(capacity);
      const bool with_out = !in.Rarely(8);
      size_t len = SIZE_MAX;
      TinyAIGenerateStats stats;
      std::memset(&stats, 0, sizeof stats);
      stats.structSize = in.Rarely(8) ? in.StructSize(sizeof stats) : sizeof stats;
      const int nulls = static_cast<int>(in.Below(16));
      const TinyAIStatus s =
          tinyaiLLMGenerate(llm, nulls == 1 ? nullptr : prompt.c_str(), nulls == 2 ? nullptr : &params,
                         with_out ? out.data() : nullptr, with_out ? capacity : (nulls == 3 ? 1 : 0),
                         nulls == 4 ? nullptr : &len, nulls == 5 ? nullptr : &stats);
      Expect(s, "tinyaiLLMGenerate", true);
      if (s == TINYAI_OK && nulls != 5 && stats.structSize == sizeof stats) {
        FUZZ_CHECK(stats.stopReason != TINYAI_STOP_NONE && stats.stopReason != TINYAI_STOP_CALLBACK &&
                       stats.stopReason != TINYAI_STOP_OUTPUT_FULL,
                   "a generation that returned TINYAI_OK stopped for %s", tinyaiStopReasonName(stats.stopReason));
      }
      if (s == TINYAI_STOPPED && nulls != 5 && stats.structSize == sizeof stats) {
        FUZZ_CHECK(stats.stopReason == TINYAI_STOP_CALLBACK, "TINYAI_STOPPED with stop reason %s",
                   tinyaiStopReasonName(stats.stopReason));
      }
      if ((s == TINYAI_OK || s == TINYAI_STOPPED || s == TINYAI_ERR_BUFFER_TOO_SMALL) && with_out && capacity > 0 &&
          nulls != 4) {
        // The text may hold NUL bytes (the piece <0x00>): check where it ends.
        FUZZ_CHECK(out[std::min(len, capacity - 1)] == '\0', "%zu bytes reported, capacity %zu, no NUL after them",
                   len, capacity);
      }
      return;
    }
    case 7:
      if (llm && !orphaned) FUZZ_CHECK(tinyaiGetLLMPosition(llm) >= 0, "position");
      else FUZZ_CHECK(tinyaiGetLLMPosition(llm) == -1, "position of a NULL or orphaned LLM");
      Expect(tinyaiResetLLM(llm), "tinyaiResetLLM");
      return;
    case 8: {
      TinyAIModelInfo info;
      std::memset(&info, 0, sizeof info);
      info.structSize = sizeof info;
      Expect(tinyaiGetLLMModelInfo(llm, in.Rarely(8) ? nullptr : &info), "tinyaiGetLLMModelInfo");
      TinyAIMemoryReport report;
      report.structSize = in.StructSize(sizeof report);
      Expect(tinyaiGetLLMMemoryReport(llm, in.Rarely(8) ? nullptr : &report), "tinyaiGetLLMMemoryReport");
      return;
    }
    case 9: {
      ExpectMisuse not_on_the_llm(false);  // a model's estimate
      int m = -1;
      TinyAIMappedModel* model = PickModel(in, &m);
      TinyAILLMConfig config = LLMConfig(in);
      TinyAIMemoryReport report;
      report.structSize = in.StructSize(sizeof report);
      Expect(tinyaiEstimateLLMMemory(model, in.Bool() ? nullptr : &config, in.Rarely(8) ? nullptr : &report),
             "tinyaiEstimateLLMMemory");
      return;
    }
    case 10: {  // the LLM's scheduler, through const calls
      const TinyAIForwardScheduler* s = tinyaiGetLLMScheduler(llm);
      if (!s) {
        CheckRecordedFailure("tinyaiGetLLMScheduler");
        if (orphaned) FUZZ_CHECK(tinyaiGetLastError() == TINYAI_ERR_MISUSE, "the scheduler of an orphaned LLM");
        return;
      }
      // Not the caller's to destroy: MISUSE, and it goes on working.
      if (in.Bool()) {
        tinyaiClearLastError();
        tinyaiDestroyForwardScheduler(const_cast<TinyAIForwardScheduler*>(s));
        FUZZ_CHECK(tinyaiGetLastError() == TINYAI_ERR_MISUSE, "destroying an LLM's scheduler: %s",
                   tinyaiStatusString(tinyaiGetLastError()));
      }
      TinyAISchedulerReport report;
      report.structSize = in.StructSize(sizeof report);
      Expect(tinyaiGetSchedulerReport(s, &report), "tinyaiGetSchedulerReport");
      tinyaiGetSchedulerMemoryUsage(s);
      tinyaiGetSchedulerPeakMemoryUsage(s);
      ExpectStatusOf(s, false);
      size_t needed = 0;
      const TinyAIStatus dag = tinyaiDumpActivationDag(s, nullptr, 0, &needed);
      FUZZ_CHECK(dag == TINYAI_ERR_BUFFER_TOO_SMALL && needed > 1, "an LLM's DAG: %s", tinyaiStatusString(dag));
      return;
    }
    case 11:
      LayerOutputSizeOfAnyModel(in);
      return;
    default:
      FUZZ_CHECK(tinyaiStopReasonName(static_cast<TinyAIStopReason>(in.Enum(7))) != nullptr, "stop reason name");
      return;
  }
}

void SchedulerCall(Input& in) {
  const int op = static_cast<int>(in.Below(15));
  const int i = static_cast<int>(in.Below(kScheds));
  SchedSlot& slot = g_scheds[i];
  TinyAIMappedModel* model = slot.model >= 0 ? g_models[slot.model].model : nullptr;
  if (op == 0) {  // create
    DestroyScheduler(i);
    int m = -1;
    TinyAIMappedModel* mdl = PickModel(in, &m);
    const TinyAIExecutionMode mode = in.Mode();
    const size_t limit = in.Size({0, 1, 4096, 65536, 200000, 400000, 1u << 20, 16u << 20, SIZE_MAX});
    const uint64_t how = in.Below(3);
    TinyAISchedulerConfig config = tinyaiCreateDefaultSchedulerConfig();
    if (how == 0) config = SchedulerConfig(in);
    const bool bounded = Bounded(limit);
    if (!bounded) {
      // The arena the schedule plans is allocated when no limit stops it.
      if (config.batchSize > kMaxRows) config.batchSize = kMaxRows;
      for (TinyAIMaxShape& shape : config.maxShapes) shape.rows = shape.rows > kMaxRows ? kMaxRows : shape.rows;
    }
    TinyAIForwardScheduler* created = how == 0   ? tinyaiCreateForwardSchedulerWithConfig(mdl, mode, limit, &config)
                                      : how == 1 ? tinyaiCreateForwardScheduler(mdl, mode, limit)
                                                 : tinyaiCreateForwardSchedulerWithConfig(mdl, mode, limit, nullptr);
    if (g_trace) {
      std::fprintf(stderr, "  tinyaiCreateForwardScheduler slot %d on model slot %d: %s\n", i, mdl ? m : -1,
                   created ? "ok" : tinyaiGetLastErrorMessage());
    }
    if (!created) {
      CheckRecordedFailure("tinyaiCreateForwardScheduler");
      return;
    }
    slot.sched = created;
    slot.model = mdl ? m : -1;
    slot.dense = mdl && g_models[m].source == kDense;
    slot.bounded = bounded;
    slot.output_capacity = config.outputCapacity;
    slot.batch = config.batchSize;
    if (mdl && g_models[m].source == kDense) {
      slot.input.assign(static_cast<size_t>(kMaxRows) * static_cast<size_t>(g_files.dense_input), 0.5f);
      slot.output.assign(static_cast<size_t>(kMaxRows) * static_cast<size_t>(g_files.dense_output), 0.0f);
    }
    return;
  }
  if (op == 1) {
    DestroyScheduler(i, in.Bool());
    return;
  }
  TinyAIForwardScheduler* s = in.Rarely(32) ? nullptr : slot.sched;
  const bool orphaned = s && slot.orphaned;
  // An orphaned scheduler refuses every call with MISUSE.
  ExpectMisuse misuse(orphaned);
  switch (op) {
    case 2: {  // add a layer
      const int32_t layer = PickLayer(in, model);
      const int32_t n = LayerCount(model);
      const int32_t depends = in.Int({-1, 0, 1, 2, n - 1, n, INT_MAX, INT_MIN});
      const TinyAIDependencyType type = static_cast<TinyAIDependencyType>(in.Enum(4));
      size_t size = in.Size({64, 0, 1, 4, 256, (size_t{1} << 48) + 1, SIZE_MAX / 2, SIZE_MAX});
      if (model && !in.Bool()) size = tinyaiGetLayerOutputSize(model, layer);
      if (!slot.bounded && size > kMaxUnboundedRowBytes && size <= (size_t{1} << 48)) size = kMaxUnboundedRowBytes;
      Expect(tinyaiAddLayerToSchedule(s, layer, depends, type, size), "tinyaiAddLayerToSchedule");
      return;
    }
    case 3:
      Expect(tinyaiAddModelLayersToSchedule(s), "tinyaiAddModelLayersToSchedule");
      return;
    case 4: {
      int32_t batch = in.Int({2, 1, 3, 8, 64, 0, -1, 1 << 20, INT_MAX, INT_MIN});
      if (!slot.bounded && batch > kMaxRows) batch = kMaxRows;
      const TinyAIStatus st = tinyaiSetScheduleBatchSize(s, batch);
      Expect(st, "tinyaiSetScheduleBatchSize");
      if (st == TINYAI_OK) slot.batch = batch;
      return;
    }
    case 5:
      Expect(tinyaiPlanForwardPass(s), "tinyaiPlanForwardPass");
      return;
    case 6:
      Expect(tinyaiPrepareForwardPass(s), "tinyaiPrepareForwardPass");
      return;
    case 7: {  // execute, a bounded number of layers
      const int calls = 64 - static_cast<int>(in.Below(64));
      const std::string prompt = in.Text();
      // Buffers as large as the scheduler reads and writes: a prompt and
      // outputCapacity bytes for a language model, batch rows for a dense
      // network.
      const bool dense = slot.dense;
      if (dense && slot.batch > kMaxRows) return;
      const bool null_input = in.Rarely(16);
      const bool null_output = in.Rarely(16);
      const void* input = null_input ? nullptr : dense ? static_cast<const void*>(slot.input.data()) : prompt.c_str();
      void* output = null_output ? nullptr : dense ? static_cast<void*>(slot.output.data()) : slot.text.data();
      for (int c = 0; c < calls; ++c) {
        int layer = INT_MIN;
        const bool ran = tinyaiExecuteNextLayer(s, input, output, in.Bool() ? nullptr : &layer);
        if (g_trace) {
          std::fprintf(stderr, "  tinyaiExecuteNextLayer: %s, layer %d%s%s\n", ran ? "ran" : "false", layer,
                       ran || !s ? "" : ", status ", ran || !s ? "" : tinyaiStatusString(tinyaiGetSchedulerStatus(s)));
        }
        if (!ran) {
          if (!s || orphaned) {
            CheckRecordedFailure("tinyaiExecuteNextLayer");
            Expect(tinyaiGetLastError(), "tinyaiExecuteNextLayer");
          } else {
            ExpectStatusOf(s, false);
            const TinyAIStatus st = tinyaiGetSchedulerStatus(s);
            if (st != TINYAI_OK) Expect(st, "tinyaiExecuteNextLayer", true);
          }
          break;
        }
        FUZZ_CHECK(!orphaned, "an orphaned scheduler ran a layer");
        if (layer != INT_MIN) FUZZ_CHECK(layer >= 0 && layer < LayerCount(model), "executed layer %d", layer);
      }
      return;
    }
    case 8: {
      tinyaiGetSchedulerMemoryUsage(s);
      tinyaiGetSchedulerPeakMemoryUsage(s);
      ExpectStatusOf(s, orphaned);
      TinyAISchedulerReport report;
      report.structSize = in.StructSize(sizeof report);
      Expect(tinyaiGetSchedulerReport(s, in.Rarely(8) ? nullptr : &report), "tinyaiGetSchedulerReport");
      return;
    }
    case 9: {  // the DAG
      size_t needed = 0;
      const size_t capacity = in.Size({4096, 0, 1, 64});
      if (capacity > 65536) return;
      std::vector<char> buf(capacity);
      const bool with_buf = !in.Rarely(8);
      const TinyAIStatus st = tinyaiDumpActivationDag(s, with_buf ? buf.data() : nullptr, with_buf ? capacity : 0,
                                                      in.Rarely(16) ? nullptr : &needed);
      Expect(st, "tinyaiDumpActivationDag");
      if (st == TINYAI_OK && with_buf) FUZZ_CHECK(needed <= capacity && std::strlen(buf.data()) + 1 == needed, "DAG size");
      return;
    }
    case 10: {  // the optimal batch
      const size_t in_size = in.Size({32, 0, 1, 1024, SIZE_MAX / 2, SIZE_MAX});
      const size_t out_size = in.Size({16, 0, 1, 1024, SIZE_MAX / 2, SIZE_MAX});
      const int32_t max_batch = in.Int({16, 1, 2, 1000, 1 << 20, 0, -1, INT_MAX, INT_MIN});
      const int best = tinyaiCalculateOptimalBatchSize(s, in_size, out_size, max_batch);
      if (g_trace) std::fprintf(stderr, "  tinyaiCalculateOptimalBatchSize(%zu, %zu, %d): %d\n", in_size, out_size, max_batch, best);
      if (best < 0) {
        FUZZ_CHECK(best == -1, "optimal batch %d", best);
        CheckRecordedFailure("tinyaiCalculateOptimalBatchSize");
        Expect(tinyaiGetLastError(), "tinyaiCalculateOptimalBatchSize");
      } else {
        FUZZ_CHECK(!orphaned, "an orphaned scheduler planned a batch");
        FUZZ_CHECK(best >= 1 && best <= max_batch, "optimal batch %d of at most %d", best, max_batch);
      }
      return;
    }
    case 11: {
      // The scheduler keeps the callback's user pointer: the slot's state.
      slot.callback = CallbackState();
      slot.callback.sched = slot.sched;
      slot.callback.model = model;
      slot.callback.other = g_llms[0].llm && !g_llms[0].orphaned ? g_llms[0].llm : nullptr;
      TinyAIGenerateParams params = GenerateParams(in, &slot.callback);
      Expect(tinyaiSetSchedulerGenerateParams(s, in.Rarely(8) ? nullptr : &params), "tinyaiSetSchedulerGenerateParams");
      return;
    }
    case 12: {
      // Within the slot's text buffer (the caller's side of the contract).
      const size_t capacity = in.Size({64, 1, 2, 16, 1024, kMaxOutputCapacity, 0});
      if (capacity > kMaxOutputCapacity) return;
      const TinyAIStatus st = tinyaiSetSchedulerOutputCapacity(s, capacity);
      Expect(st, "tinyaiSetSchedulerOutputCapacity");
      if (st == TINYAI_OK) slot.output_capacity = capacity;
      return;
    }
    case 13:
      LayerOutputSizeOfAnyModel(in);
      return;
    default:
      // Not a scheduler the caller may destroy: MISUSE, and nothing happens.
      if (g_llms[0].llm && !g_llms[0].orphaned) {
        const TinyAIForwardScheduler* owned = tinyaiGetLLMScheduler(g_llms[0].llm);
        tinyaiClearLastError();
        tinyaiDestroyForwardScheduler(const_cast<TinyAIForwardScheduler*>(owned));
        FUZZ_CHECK(tinyaiGetLastError() == TINYAI_ERR_MISUSE, "destroying an LLM's scheduler: %s",
                   tinyaiStatusString(tinyaiGetLastError()));
      }
      return;
  }
}

void LoaderCall(Input& in) {
  const int op = static_cast<int>(in.Below(12));
  int m = -1;
  TinyAIMappedModel* model = PickModel(in, &m);
  const int32_t layer = PickLayer(in, model);
  switch (op) {
    case 0:
      if (tinyaiGetMappedLayerCount(model) < 0) CheckRecordedFailure("tinyaiGetMappedLayerCount");
      if (tinyaiGetMappedTensorCount(model) < 0) CheckRecordedFailure("tinyaiGetMappedTensorCount");
      tinyaiGetMappedModelFileSize(model);
      tinyaiGetMappedModelMemoryUsage(model);
      return;
    case 1: {
      const TinyAILayerDescriptor* d = tinyaiGetLayerDescriptor(model, layer);
      if (!d) CheckRecordedFailure("tinyaiGetLayerDescriptor");
      else FUZZ_CHECK(d->index == layer && d->name != nullptr, "descriptor of layer %d", layer);
      return;
    }
    case 2:  // a pinned layer may stay pinned until the model closes
      if (!tinyaiGetLayerWeights(model, layer)) CheckRecordedFailure("tinyaiGetLayerWeights");
      return;
    case 3:
      Expect(tinyaiReleaseLayerWeights(model, layer), "tinyaiReleaseLayerWeights");
      return;
    case 4:
      Expect(tinyaiPrefetchLayerWeights(model, layer), "tinyaiPrefetchLayerWeights");
      return;
    case 5:
      Expect(tinyaiSetLayerPriority(model, layer, in.Float()), "tinyaiSetLayerPriority");
      return;
    case 6: {
      TinyAITensorInfo info;
      std::memset(&info, 0, sizeof info);
      info.structSize = sizeof info;
      const int32_t t = in.Int({0, 1, 20, 21, -1, INT_MAX, INT_MIN});
      Expect(tinyaiGetMappedTensorInfo(model, t, in.Rarely(8) ? nullptr : &info), "tinyaiGetMappedTensorInfo");
      return;
    }
    case 7: {
      const std::string name = in.Bool() ? in.Text() : std::string("blk.1.attn_q");
      int index = -1;
      const int nulls = static_cast<int>(in.Below(8));
      Expect(tinyaiFindMappedTensor(model, nulls == 1 ? nullptr : name.c_str(), nulls == 2 ? nullptr : &index),
             "tinyaiFindMappedTensor");
      return;
    }
    case 8: {
      static const char* kKeys[] = {"llama.dim", "general.architecture", "llama.norm_eps", "tokenizer.tokens",
                                    "dense.0.inputs", "", "no.such.key"};
      const char* key = kKeys[in.Below(7)];
      const int nulls = static_cast<int>(in.Below(8));
      int64_t iv = 0;
      float fv = 0;
      const char* str = nullptr;
      size_t len = 0;
      Expect(tinyaiGetMetadataInt(model, nulls == 1 ? nullptr : key, nulls == 2 ? nullptr : &iv), "tinyaiGetMetadataInt");
      Expect(tinyaiGetMetadataFloat(model, nulls == 1 ? nullptr : key, nulls == 2 ? nullptr : &fv),
             "tinyaiGetMetadataFloat");
      Expect(tinyaiGetMetadataString(model, nulls == 1 ? nullptr : key, nulls == 2 ? nullptr : &str,
                                     nulls == 3 ? nullptr : &len),
             "tinyaiGetMetadataString");
      return;
    }
    case 9: {
      TinyAICacheStats stats;
      stats.structSize = in.StructSize(sizeof stats);
      Expect(tinyaiGetMappedModelCacheStats(model, in.Rarely(8) ? nullptr : &stats), "tinyaiGetMappedModelCacheStats");
      Expect(tinyaiResetMappedModelCacheStats(model), "tinyaiResetMappedModelCacheStats");
      return;
    }
    case 10: {
      // Closing twice is documented to record MISUSE; so is closing what is
      // not a model.
      const uint64_t how = in.Below(4);
      if (how == 2) {
        int not_a_model = 0;
        tinyaiClearLastError();
        tinyaiCloseMappedModel(reinterpret_cast<TinyAIMappedModel*>(&not_a_model));
        FUZZ_CHECK(tinyaiGetLastError() == TINYAI_ERR_MISUSE, "closing what is not a model");
      } else {
        // how 3: under its live runners, which are orphaned.
        CloseModel(m, how == 1, how == 3);
      }
      return;
    }
    default: {
      // The status and enum names for any int, and the platform calls of a
      // port with a heap and a clock.
      FUZZ_CHECK(tinyaiStatusString(static_cast<TinyAIStatus>(in.Int({0, -1, -21, 1, -22, 2}))) != nullptr, "name");
      FUZZ_CHECK(tinyaiExecutionModeName(in.Mode()) != nullptr, "name");
      FUZZ_CHECK(tinyaiDTypeName(static_cast<TinyAIDType>(in.Enum(4))) != nullptr, "name");
      FUZZ_CHECK(tinyaiCodecName(static_cast<TinyAICodec>(in.Enum(3))) != nullptr, "name");
      FUZZ_CHECK(tinyaiTensorRoleName(static_cast<TinyAITensorRole>(in.Enum(15))) != nullptr, "name");
      FUZZ_CHECK(tinyaiLayerKindName(static_cast<TinyAILayerKind>(in.Enum(4))) != nullptr, "name");
      tinyaiDTypeSize(static_cast<TinyAIDType>(in.Enum(4)));
      alignas(16) static uint8_t arena[256];
      Expect(tinyaiSetStaticArena(in.Bool() ? nullptr : arena, static_cast<size_t>(in.Below(sizeof arena + 1))),
             "tinyaiSetStaticArena");
      TinyAIArenaStats stats;
      stats.structSize = in.StructSize(sizeof stats);
      Expect(tinyaiGetStaticArenaStats(in.Bool() ? nullptr : &stats), "tinyaiGetStaticArenaStats");
      size_t bytes = 0;
      static ReaderState reader;
      Expect(tinyaiEstimateStaticArena(in.Bool() ? nullptr : g_files.image, g_files.image_size,
                                       in.Bool() ? ReadImage : nullptr, &reader, nullptr, nullptr,
                                       in.Bool() ? nullptr : &bytes),
             "tinyaiEstimateStaticArena");
      Expect(tinyaiSetClock(nullptr), "tinyaiSetClock");
      tinyaiClearLastError();
      FUZZ_CHECK(tinyaiGetLastError() == TINYAI_OK && tinyaiGetLastErrorMessage() != nullptr, "cleared error");
      return;
    }
  }
}

void RunCalls(Input& in, const std::vector<std::vector<uint64_t>>* script) {
  for (size_t call = 0; call < kMaxCalls && (script ? call < script->size() : !in.empty()); ++call) {
    if (script) in.Script((*script)[call]);
    switch (in.Below(6)) {
      case 0: OpenModel(in); break;
      case 1:
      case 2: LLMCall(in); break;
      case 3:
      case 4: SchedulerCall(in); break;
      default: LoaderCall(in); break;
    }
  }
  ResetAll();
  tinyaiClearLastError();
}

// ---- seeds -------------------------------------------------------------------------

// Generate params with a text callback doing `action` (GenerateParams'
// values: struct size, steps, maxNewTokens, the sampler's struct size,
// temperature, top-p, seed, then the callback: yes, stop never, action).
std::vector<uint64_t> CallbackParams(int action) { return {0, 0, 0, 0, 0, 0, 0, 0, 1, 0, static_cast<uint64_t>(action)}; }

// tinyaiLLMGenerate on LLM slot 0 with such a callback.
std::vector<uint64_t> Generate(int action) {
  std::vector<uint64_t> v = {1, 6, 0, 0};
  const std::vector<uint64_t> p = CallbackParams(action);
  v.insert(v.end(), p.begin(), p.end());
  return v;
}

// tinyaiSetSchedulerGenerateParams on scheduler slot 0 with such a callback.
std::vector<uint64_t> SchedulerCallback(int action) {
  std::vector<uint64_t> v = {3, 11, 0, 0};
  const std::vector<uint64_t> p = CallbackParams(action);
  v.insert(v.end(), p.begin(), p.end());
  return v;
}

// Call scripts: each call's first values (the call, then its operation and
// slot, then its arguments in the order the code above reads them); the
// rest are 0, the ordinary choices.
void WriteSeeds(const char* dir) {
  // Calls: {0, slot, source}: open; {1, op, slot, NULL?, ...}: LLM; {3, op,
  // slot, NULL?, ...}: scheduler; {5, op, model slot, layer choice}: loader.
  const std::vector<std::vector<std::vector<uint64_t>>> seeds = {
      // A runner: open, create, tokenize, decode, eval, sample, generate, reports.
      {{0, 0, kSynthetic}, {1, 0, 0, 0}, {1, 2, 0}, {1, 3, 0}, {1, 4, 0}, {1, 5, 0}, {1, 6, 0}, {1, 7, 0},
       {1, 8, 0}, {1, 9, 0, 0}, {1, 10, 0}, {1, 11, 0, 0}, {1, 1, 0}},
      // The compressed model under memory limits (4 MiB, and 1 MiB, which is
      // too little), two runners.
      {{0, 1, kCompressed}, {1, 0, 0, 1, 0, 0, 0, 7}, {1, 6, 0}, {1, 4, 0}, {1, 0, 1, 1, 0, 0, 0, 6}, {1, 6, 1}}, 
      // A scheduler over the synthetic model: layers, prepare, execute, reports.
      {{0, 0, kSynthetic}, {3, 0, 0, 0}, {3, 3, 0}, {3, 5, 0}, {3, 6, 0}, {3, 7, 0}, {3, 7, 0}, {3, 8, 0},
       {3, 9, 0}, {3, 10, 0}},
      // The dense network: batch, execute, optimal batch without and with a
      // limit (64 KiB).
      {{0, 2, kDense}, {3, 0, 0, 2}, {3, 3, 0}, {3, 4, 0}, {3, 6, 0}, {3, 7, 0}, {3, 7, 0}, {3, 10, 0},
       {3, 0, 1, 2, 0, 3}, {3, 3, 1}, {3, 10, 1}},
      // A schedule without a model, built layer by layer: 0 reads the input,
      // 1 reads 0, 2 reads 1 and 0.
      {{3, 0, 0, 1}, {3, 2, 0, 0, 0, 0, 0, 0}, {3, 2, 0, 0, 1, 1, 1, 0}, {3, 2, 0, 0, 2, 2, 1, 0},
       {3, 2, 0, 0, 2, 1, 2, 0},
       {3, 5, 0}, {3, 10, 0}, {3, 9, 0}},
      // A model closed under an LLM and a scheduler: both refuse every call
      // (MISUSE) until destroyed.
      {{0, 0, kSynthetic}, {1, 0, 0, 0}, {3, 0, 0, 0}, {3, 3, 0}, {3, 6, 0}, {5, 10, 0, 0, 3}, {1, 2, 0}, {1, 6, 0},
       {1, 7, 0}, {1, 10, 0}, {3, 7, 0}, {3, 8, 0}, {3, 10, 0}, {3, 2, 0}, {1, 1, 0}, {3, 1, 0}},
      // Text callbacks that call back into their LLM (reads, then calls it
      // must refuse, destroying it, closing its model) or run another LLM,
      // and a scheduler's callback doing the same.
      {{0, 0, kSynthetic}, {1, 0, 0, 0}, {1, 0, 1, 0}, Generate(kRead), Generate(kMutate), Generate(kDestroyRunner),
       Generate(kCloseModel), Generate(kOtherRunner), {1, 6, 0}, {3, 0, 0, 0}, {3, 3, 0}, {3, 6, 0},
       SchedulerCallback(kRead), {3, 7, 0}, SchedulerCallback(kMutate), {3, 7, 0}, SchedulerCallback(kDestroyRunner),
       {3, 7, 0}, SchedulerCallback(kCloseModel), {3, 7, 0}, SchedulerCallback(kOtherRunner), {3, 7, 0}},
      // The loader's calls on a memory image and a failing read callback.
      {{0, 0, kMemory}, {5, 0, 0}, {5, 1, 0}, {5, 2, 0}, {5, 3, 0}, {5, 4, 0}, {5, 5, 0}, {5, 6, 0}, {5, 7, 0},
       {5, 8, 0}, {5, 9, 0}, {0, 1, kReader, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3}, {5, 2, 1}, {5, 10, 0, 0, 1},
       {5, 11, 0}},
  };
  for (size_t k = 0; k < seeds.size(); ++k) {
    Input in;
    RunCalls(in, &seeds[k]);
    const std::string path = std::string(dir) + "/capi-" + std::to_string(k);
    FUZZ_CHECK(tinyai_fuzz::WriteFile(path, in.recorded().data(), in.recorded().size()), "cannot write %s",
               path.c_str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const tinyai_fuzz::ScratchDir& dir = tinyai_fuzz::ScratchDir::Get();
  g_files.path[kSynthetic] = dir.File("model.tmai");
  g_files.path[kCompressed] = dir.File("compressed.tmai");
  g_files.path[kDense] = dir.File("dense.tmai");
  tinyai::LlamaShape shape;
  FUZZ_CHECK(tinyai::ParseSyntheticSpec("dim=16,hidden=32,layers=2,heads=2,kv_heads=1,vocab=300,seq_len=32,seed=3",
                                        &shape) == TINYAI_OK,
             "spec");
  FUZZ_CHECK(tinyai::WriteSyntheticModel(shape, g_files.path[kSynthetic].c_str()) == TINYAI_OK, "synthetic model");
  tinyai::WriteOptions zstd;
  zstd.codec = TINYAI_CODEC_ZSTD;
  FUZZ_CHECK(tinyai::WriteSyntheticModel(shape, g_files.path[kCompressed].c_str(), zstd) == TINYAI_OK,
             "compressed model");
  tinyai::DenseNetDef def;
  FUZZ_CHECK(tinyai::ParseDenseDefinition("input 8\nlayer a out=8 act=relu\nlayer b out=8 act=tanh\n"
                                          "layer c out=4 inputs=b,a bias=0\n",
                                          &def) == TINYAI_OK,
             "dense definition");
  FUZZ_CHECK(tinyai::WriteDenseModel(def, g_files.path[kDense].c_str()) == TINYAI_OK, "dense model");
  std::vector<uint8_t> bytes;
  FUZZ_CHECK(tinyai_fuzz::ReadFile(g_files.path[kSynthetic], &bytes), "read the synthetic model");
  void* image = nullptr;
  FUZZ_CHECK(posix_memalign(&image, 64, bytes.size()) == 0, "image");
  std::memcpy(image, bytes.data(), bytes.size());
  g_files.image = static_cast<uint8_t*>(image);
  g_files.image_size = bytes.size();
  tinyai_fuzz::WriteSeedsIfAsked(WriteSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  RunCalls(in, nullptr);
  return 0;
}
