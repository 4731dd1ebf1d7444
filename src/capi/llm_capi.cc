// extern "C" shims of <tinyai/llm.h>.
#include <cmath>
#include <cstdio>
#include <cstddef>
#include <cstring>
#include <new>

#include "common/live_list.h"
#include "common/memory.h"
#include "common/status.h"
#include "common/struct_size.h"
#include "kv/kv_cache.h"
#include "tinyai/memory.h"
#include "model/session.h"
#include "capi/handles.h"
#include "capi/llm_fallback.h"
#include "capi/llm_internal.h"
#include "common/format.h"
#include "model/generate.h"
#include "model/llama.h"
#include "model/runtime.h"
#include "port/port.h"
#include "scheduler/scheduler.h"
#include "text/sampler.h"
#include "tinyai/llm.h"

using tinyai::SetError;
using tinyai::StringView;

struct TinyAILLM {
  TinyAIForwardScheduler sched;
  TinyAILLM* next_live = nullptr;  // LLMs created and not yet destroyed
  TinyAILLMConfig config;          // as created: the fallback chain's level applied
  int32_t fallback_level = 0;      // steps of the chain applied
  tinyai::FallbackRun* fallback = nullptr;  // its log, kept only when config had a chain
  ~TinyAILLM() { tinyai::Delete(fallback); }
  tinyai::ForwardScheduler& impl() { return sched.impl; }
  const tinyai::ForwardScheduler& impl() const { return sched.impl; }
  tinyai::LlamaModel& model() const { return sched.llama->model(); }
};

namespace tinyai {

size_t RunnerHandleBytes() {
  return sizeof(TinyAILLM) > sizeof(TinyAIForwardScheduler) ? sizeof(TinyAILLM) : sizeof(TinyAIForwardScheduler);
}

WeightStream* LLMWeightStream(TinyAILLM* llm) { return llm->model().weights(); }
const TextTokenizer& LLMTokenizer(const TinyAILLM* llm) { return llm->model().tokenizer(); }

}  // namespace tinyai

namespace {

// LLMs created and not yet destroyed.
tinyai::LiveList<TinyAILLM> g_llms;

// The fallback chain this thread ran last (tinyaiCreateLLM or
// tinyaiPreflightLLM with a chain), fitted or not: tinyaiGetLLMFallback(NULL).
struct LastChain {
  bool ran = false;        // a chain ran since the last tinyaiCreateLLM / tinyaiPreflightLLM began
  tinyai::FallbackRun run;
  TinyAILLMConfig config;  // the level it reached
};
TINYAI_THREAD_LOCAL LastChain g_last_chain;

// Runs cfg's chain (PlanWithFallback) and keeps its log as the thread's last.
TinyAIStatus RunChain(TinyAIMappedModel* model, TinyAILLMConfig* cfg, tinyai::FallbackRun* run);

// NULL or a pointer that is not a live LLM: the status to return.
TinyAIStatus CheckHandle(const TinyAILLM* llm, const char* call) {
  if (!llm) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: llm is NULL", call);
  if (!g_llms.Contains(llm)) return tinyai::capi::NotLive(call, llm, "a live LLM", "destroyed already, or never created");
  return TINYAI_OK;
}

// NULL, a pointer that is not a live LLM, or a runner that cannot take the
// call (its model closed; its own text callback calling back, unless
// allow_busy): the status to return.
TinyAIStatus Check(const TinyAILLM* llm, const char* call, bool allow_busy = false) {
  TINYAI_RETURN_IF_ERROR(CheckHandle(llm, call));
  return llm->impl().CheckUsable(call, allow_busy);
}

TinyAIStatus ReadLLMConfig(const TinyAILLMConfig* in, TinyAILLMConfig* out, const char* what) {
  return tinyai::ReadVersioned(in, out, TINYAI_STRUCT_MIN(TinyAILLMConfig, contextLength), what);
}

TinyAIStatus CheckSampler(const TinyAISamplerConfig& s) {
  if (!(s.temperature >= 0.0f) || !std::isfinite(s.temperature)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "sampler temperature %g must be finite and >= 0",
                    static_cast<double>(s.temperature));
  }
  if (!(s.topP > 0.0f && s.topP <= 1.0f)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "sampler topP %g must be in (0, 1]", static_cast<double>(s.topP));
  }
  if (s.topK < 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "sampler topK %d is negative (0 = off)", static_cast<int>(s.topK));
  }
  if (!(s.minP >= 0.0f && s.minP <= 1.0f)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "sampler minP %g must be in [0, 1] (0 = off)",
                    static_cast<double>(s.minP));
  }
  if (!(s.repeatPenalty > 0.0f) || !std::isfinite(s.repeatPenalty)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "sampler repeatPenalty %g must be finite and > 0 (1 = off)",
                    static_cast<double>(s.repeatPenalty));
  }
  if (s.repeatLastN < 1 || s.repeatLastN > TINYAI_MAX_REPEAT_LAST_N) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "sampler repeatLastN %d is outside 1..%d",
                    static_cast<int>(s.repeatLastN), TINYAI_MAX_REPEAT_LAST_N);
  }
  return TINYAI_OK;
}

// The stop strings: at most TINYAI_MAX_STOP_STRINGS, each 1..TINYAI_MAX_STOP_BYTES bytes.
TinyAIStatus CheckStops(const TinyAIGenerateParams& p, const char* call) {
  if (p.stopCount < 0 || p.stopCount > TINYAI_MAX_STOP_STRINGS) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: stopCount %d is outside 0..%d", call,
                    static_cast<int>(p.stopCount), TINYAI_MAX_STOP_STRINGS);
  }
  if (p.stopCount > 0 && !p.stop) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: stop is NULL with stopCount %d", call,
                    static_cast<int>(p.stopCount));
  }
  for (int32_t i = 0; i < p.stopCount; ++i) {
    if (!p.stop[i]) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: stop[%d] is NULL", call, static_cast<int>(i));
    const size_t n = std::strlen(p.stop[i]);
    if (n == 0 || n > TINYAI_MAX_STOP_BYTES) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: stop[%d] is %zu bytes; a stop string is 1..%d", call,
                      static_cast<int>(i), n, TINYAI_MAX_STOP_BYTES);
    }
  }
  return TINYAI_OK;
}

// Generation parameters from the caller. A struct from before maxNewTokens
// keeps llama2.c's behaviour: maxNewTokens 0 (steps alone), not 256.
TinyAIStatus CopyGenerateParams(const TinyAIGenerateParams* in, TinyAIGenerateParams* out, const char* call) {
  char what[96];
  tinyai::Format(what, sizeof what, "%s: params", call);
  TINYAI_RETURN_IF_ERROR(tinyai::ReadVersioned(in, out, TINYAI_STRUCT_MIN(TinyAIGenerateParams, steps), what));
  if (in && in->structSize < TINYAI_STRUCT_MIN(TinyAIGenerateParams, maxNewTokens)) out->maxNewTokens = 0;
  if (out->sampler.structSize != sizeof(TinyAISamplerConfig)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "%s: params.sampler.structSize is %u; create it with tinyaiCreateDefaultSamplerConfig", call,
                    out->sampler.structSize);
  }
  if (out->steps < 0) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: steps %d is negative", call, out->steps);
  if (out->maxNewTokens < 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: maxNewTokens %d is negative", call, out->maxNewTokens);
  }
  TINYAI_RETURN_IF_ERROR(CheckStops(*out, call));
  return CheckSampler(out->sampler);
}

// A language model's schedule: the whole chain, one row per token, up to
// LlamaModel::kMaxChunk (32) tokens per pass.
TinyAIStatus InitLLMScheduler(tinyai::ForwardScheduler* s, TinyAIMappedModel* model, const TinyAILLMConfig& cfg,
                              tinyai::LlamaRuntime** llama) {
  TinyAISchedulerConfig sc = tinyaiCreateDefaultSchedulerConfig();
  sc.threads = cfg.threads;
  sc.contextLength = cfg.contextLength;
  sc.debugExecution = cfg.debugExecution;
  sc.kvType = cfg.kvType;
  sc.kvWindow = cfg.kvWindow;
  sc.kvSinks = cfg.kvSinks;
  sc.kvGrowable = cfg.kvGrowable;
  s->set_runner_bytes(tinyai::RunnerHandleBytes());
  TINYAI_RETURN_IF_ERROR(tinyai::InitScheduler(s, model, cfg.mode, cfg.memoryLimit, sc, llama));
  if (!*llama) {
    StringView arch;
    model->reader().GetString("general.architecture", &arch);
    return SetError(TINYAI_ERR_UNSUPPORTED, "'%s': architecture '%.*s' is not a language model (expected 'llama')",
                    model->reader().source(), static_cast<int>(arch.size), arch.data);
  }
  TINYAI_RETURN_IF_ERROR(s->AddModelLayers());
  return s->Plan();
}

TinyAIStatus RunChain(TinyAIMappedModel* model, TinyAILLMConfig* cfg, tinyai::FallbackRun* run) {
  g_last_chain.ran = false;
  if (cfg->fallback[0] == TINYAI_FALLBACK_END) return TINYAI_OK;  // planned once, by the caller
  const TinyAIStatus s = tinyai::PlanWithFallback(model, cfg, InitLLMScheduler, run);
  g_last_chain.ran = true;
  g_last_chain.run = *run;
  g_last_chain.config = *cfg;
  return s;
}

// After cfg's plan was refused for its memory limit: the most faithful of
// the less faithful KV types that plans within it - planned as
// tinyaiCreateLLM plans it, not estimated - becomes the last error's first
// remedy (its other one second) and its message says so. status: the
// plan's; returned unchanged.
TinyAIStatus AddKvRemedy(TinyAIMappedModel* model, const TinyAILLMConfig& cfg, TinyAIStatus status) {
  if (status != TINYAI_ERR_RESOURCE_EXHAUSTED || tinyai::LastErrorDetail().resource != TINYAI_RESOURCE_MEMORY_LIMIT ||
      cfg.kvType == TINYAI_KV_AUTO) {
    return status;
  }
  tinyai::SavedError refused;
  tinyai::SaveLastError(&refused);
  static const TinyAIKVType kLessFaithful[] = {TINYAI_KV_F16, TINYAI_KV_INT8};
  int32_t fits = -1;
  for (TinyAIKVType t : kLessFaithful) {
    if (static_cast<int32_t>(t) <= static_cast<int32_t>(cfg.kvType)) continue;
    TinyAILLMConfig c = cfg;
    c.kvType = t;
    tinyai::ForwardScheduler s;
    tinyai::LlamaRuntime* llama = nullptr;
    if (InitLLMScheduler(&s, model, c, &llama) == TINYAI_OK) {
      fits = static_cast<int32_t>(t);
      break;
    }
  }
  tinyai::RestoreLastError(refused);
  if (fits < 0) return status;
  tinyai::ErrorDetail d = refused.detail;
  d.remedy2 = d.remedy;
  d.remedy2_value = d.remedy_value;
  d.remedy = TINYAI_REMEDY_KV_TYPE;
  d.remedy_value = static_cast<uint64_t>(fits);
  const char* name = tinyaiKVTypeName(static_cast<TinyAIKVType>(fits));
  tinyai::AppendToLastError("; with an %s KV cache it fits (kvType %s)", name, name);
  tinyai::SetErrorDetail(d);
  return status;
}

// Fills the fields an estimate and a report share.
void FillPlan(const tinyai::ForwardScheduler& s, TinyAIMemoryReport* out) {
  out->memoryLimit = s.limit();
  out->minimumMemoryLimit = s.minimum_limit();
  out->kvCacheBytes = s.program_memory().persistent;
  out->activationBytes = s.arena_bytes();
  out->otherBytes = s.tables_bytes();
  out->largestSliceBytes = s.weights().largest_slice;
  out->largestSliceTensor = s.largest_slice_tensor();
}

}  // namespace

extern "C" {

const char* tinyaiStopReasonName(TinyAIStopReason reason) {
  switch (reason) {
    case TINYAI_STOP_NONE: return "none";
    case TINYAI_STOP_MAX_NEW: return "max_new";
    case TINYAI_STOP_STEPS: return "steps";
    case TINYAI_STOP_CONTEXT: return "context";
    case TINYAI_STOP_BOS: return "bos";
    case TINYAI_STOP_CALLBACK: return "callback";
    case TINYAI_STOP_OUTPUT_FULL: return "output_full";
    case TINYAI_STOP_EOS: return "eos";
    case TINYAI_STOP_STRING: return "stop_string";
  }
  return "?";
}

const char* tinyaiKVTypeName(TinyAIKVType type) { return tinyai::KvCache::TypeName(type); }

TinyAILLMConfig tinyaiCreateDefaultLLMConfig(void) {
  TinyAILLMConfig c;
  std::memset(&c, 0, sizeof c);
  c.structSize = sizeof c;
  c.contextLength = 0;
  c.threads = 1;
  c.mode = TINYAI_EXEC_ADAPTIVE;
  c.debugExecution = false;
  c.kvType = TINYAI_KV_F32;
  c.kvWindow = 0;
  c.kvSinks = 0;
  c.kvGrowable = 0;
  return c;
}

TinyAISamplerConfig tinyaiCreateDefaultSamplerConfig(void) { return tinyai::DefaultSamplerConfig(); }

TinyAIGenerateParams tinyaiCreateDefaultGenerateParams(void) { return tinyai::DefaultGenerateParams(); }

TinyAIStatus tinyaiCreateLLM(TinyAIMappedModel* model, const TinyAILLMConfig* config, TinyAILLM** out) {
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiCreateLLM: out is NULL");
  *out = nullptr;
  TINYAI_RETURN_IF_ERROR(tinyai::capi::CheckModel(model, "tinyaiCreateLLM"));
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  g_last_chain.ran = false;
  TINYAI_RETURN_IF_ERROR(ReadLLMConfig(config, &cfg, "tinyaiCreateLLM: config"));
  TINYAI_RETURN_IF_ERROR(tinyai::CheckFallback(cfg, "tinyaiCreateLLM: config"));
  // The limit is checked (by planning) before anything large is allocated,
  // the fallback chain's levels too.
  tinyai::FallbackRun run;
  const TinyAIExecutionMode asked = cfg.mode;
  TinyAIStatus s = RunChain(model, &cfg, &run);
  if (s != TINYAI_OK) return AddKvRemedy(model, cfg, s);
  // The prefetch step's level: the model's workers share its staging sets.
  if (run.staging_sets > 0) model->cache().KeepStaging(run.staging_sets);
  const int64_t created_at = tinyai::LedgerThreadBytes();
  TinyAILLM* llm = tinyai::New<TinyAILLM>();
  if (!llm) return SetError(TINYAI_ERR_OUT_OF_MEMORY, "tinyaiCreateLLM: cannot allocate the runner");
  llm->impl().set_created_at(created_at);
  llm->config = cfg;
  llm->fallback_level = run.level;
  if (cfg.fallback[0] != TINYAI_FALLBACK_END) {
    llm->fallback = tinyai::New<tinyai::FallbackRun>(run);
    if (!llm->fallback) {
      tinyai::Delete(llm);
      return SetError(TINYAI_ERR_OUT_OF_MEMORY, "tinyaiCreateLLM: cannot allocate the fallback chain's log");
    }
  }
  if (run.level > 0 && cfg.mode != asked) {
    char how[40];
    tinyai::Format(how, sizeof how, " (fallback level %d)", static_cast<int>(run.level));
    llm->impl().set_mode_origin(how);
  }
  s = InitLLMScheduler(&llm->impl(), model, cfg, &llm->sched.llama);
  if (s != TINYAI_OK) {
    tinyai::Delete(llm);
    return AddKvRemedy(model, cfg, s);
  }
  s = llm->impl().Prepare();
  if (s != TINYAI_OK) {
    tinyai::Delete(llm);
    return s;
  }
  llm->sched.in_llm = true;
  tinyai::capi::AddScheduler(&llm->sched);
  g_llms.Add(llm);
  *out = llm;
  return TINYAI_OK;
}

void tinyaiDestroyLLM(TinyAILLM* llm) {
  if (!llm) return;
  if (CheckHandle(llm, "tinyaiDestroyLLM") != TINYAI_OK) return;
  if (llm->impl().link().busy.load()) {
    SetError(TINYAI_ERR_MISUSE, "tinyaiDestroyLLM: called from the LLM's own text callback; it stays alive");
    return;
  }
  g_llms.Remove(llm);
  tinyai::capi::RemoveScheduler(&llm->sched);
  tinyai::Delete(llm);
  tinyai::LedgerMark(TINYAI_MEMORY_STAGE_CLOSE, -1);
}

TinyAIStatus tinyaiGetLLMModelInfo(const TinyAILLM* llm, TinyAIModelInfo* out) {
  TINYAI_RETURN_IF_ERROR(Check(llm, "tinyaiGetLLMModelInfo", true));
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetLLMModelInfo: out is NULL");
  TINYAI_RETURN_IF_ERROR(
      tinyai::CheckOutputSize(out, TINYAI_STRUCT_MIN(TinyAIModelInfo, dim), "tinyaiGetLLMModelInfo: out"));
  const tinyai::LlamaModel& m = llm->model();
  const tinyai::LlamaHyperParams& hp = m.params();
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  info.dim = hp.dim;
  info.hiddenDim = hp.hidden_dim;
  info.layers = hp.layers;
  info.heads = hp.heads;
  info.kvHeads = hp.kv_heads;
  info.vocabSize = hp.vocab_size;
  info.seqLen = hp.seq_len;
  info.contextLength = m.context_length();
  info.sharedClassifier = hp.shared_classifier ? 1 : 0;
  info.bosId = m.tokenizer().bos_id();
  info.eosId = m.tokenizer().eos_id();
  info.ropeTheta = hp.rope_theta;
  info.normEps = hp.norm_eps;
  info.weightBytes = m.weight_bytes();
  info.kvCacheBytes = m.kv_bytes();
  info.activationBytes = llm->impl().arena_bytes();
  info.kvType = static_cast<TinyAIKVType>(m.kv_cache().shape().type);
  tinyai::WriteVersioned(info, out);
  return TINYAI_OK;
}

TinyAIStatus tinyaiGetLLMMemoryReport(const TinyAILLM* llm, TinyAIMemoryReport* out) {
  TINYAI_RETURN_IF_ERROR(Check(llm, "tinyaiGetLLMMemoryReport", true));
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetLLMMemoryReport: out is NULL");
  TINYAI_RETURN_IF_ERROR(
      tinyai::CheckOutputSize(out, TINYAI_STRUCT_MIN(TinyAIMemoryReport, memoryLimit),
                              "tinyaiGetLLMMemoryReport: out"));
  const tinyai::CacheStats cs = llm->model().mapped_model()->cache().stats();
  TinyAIMemoryReport report;
  std::memset(&report, 0, sizeof report);
  report.structSize = sizeof report;
  FillPlan(llm->impl(), &report);
  report.weightCacheCap = cs.capacity;
  report.weightBytes = cs.held_bytes;
  report.weightPeakBytes = llm->impl().weight_peak();
  report.kvCacheBytes = llm->impl().persistent_held();  // a growable cache: what it has taken
  report.totalBytes = report.weightBytes + report.kvCacheBytes + report.activationBytes + report.otherBytes;
  // Weights and KV cache at once (a growable cache grows as the weights' cap shrinks).
  report.peakTotalBytes = llm->impl().joint_peak() + report.activationBytes + report.otherBytes;
  tinyai::WriteVersioned(report, out);
  return TINYAI_OK;
}

TinyAIStatus tinyaiGetLLMWarning(const TinyAILLM* llm, TinyAIErrorInfo* out) {
  TINYAI_RETURN_IF_ERROR(Check(llm, "tinyaiGetLLMWarning", true));
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetLLMWarning: out is NULL");
  TINYAI_RETURN_IF_ERROR(
      tinyai::CheckOutputSize(out, TINYAI_STRUCT_MIN(TinyAIErrorInfo, resource), "tinyaiGetLLMWarning: out"));
  const tinyai::ForwardScheduler& s = llm->impl();
  const tinyai::ErrorDetail& d = s.warning();
  TinyAIErrorInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  info.status = TINYAI_OK;
  info.resource = d.resource;
  info.stage = d.stage;
  info.bytesNeeded = d.needed;
  info.bytesLimit = d.limit;
  info.layer = d.layer;
  std::memcpy(info.tensor, d.tensor, sizeof info.tensor);
  info.remedy = d.remedy;
  info.remedyValue = d.remedy_value;
  info.remedy2 = d.remedy2;
  info.remedy2Value = d.remedy2_value;
  tinyai::Format(info.message, sizeof info.message, "%s", s.warning_text());
  tinyai::WriteVersioned(info, out);
  return TINYAI_OK;
}

TinyAIStatus tinyaiGetLLMFallback(const TinyAILLM* llm, TinyAIFallbackReport* out) {
  if (llm) TINYAI_RETURN_IF_ERROR(Check(llm, "tinyaiGetLLMFallback", true));
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetLLMFallback: out is NULL");
  TINYAI_RETURN_IF_ERROR(
      tinyai::CheckOutputSize(out, TINYAI_STRUCT_MIN(TinyAIFallbackReport, level), "tinyaiGetLLMFallback: out"));
  TinyAIFallbackReport r;
  std::memset(&r, 0, sizeof r);
  r.structSize = sizeof r;
  if (!llm && !g_last_chain.ran) {  // no chain ran: level -1, nothing else
    r.level = -1;
    tinyai::WriteVersioned(r, out);
    return TINYAI_OK;
  }
  const TinyAILLMConfig& cfg = llm ? llm->config : g_last_chain.config;
  r.level = llm ? llm->fallback_level : g_last_chain.run.level;
  r.mode = cfg.mode;
  r.kvType = cfg.kvType;
  r.kvWindow = cfg.kvWindow;
  r.kvSinks = cfg.kvSinks;
  const char* log = llm ? (llm->fallback ? llm->fallback->log : "") : g_last_chain.run.log;
  tinyai::Format(r.log, sizeof r.log, "%s", log);
  tinyai::WriteVersioned(r, out);
  return TINYAI_OK;
}

const char* tinyaiFallbackName(TinyAIFallback step) {
  switch (step) {
    case TINYAI_FALLBACK_END: return "end";
    case TINYAI_FALLBACK_KV_F16: return "kv-f16";
    case TINYAI_FALLBACK_KV_INT8: return "kv-int8";
    case TINYAI_FALLBACK_MEMORY_OPT: return "memory-opt";
    case TINYAI_FALLBACK_STREAMING: return "streaming";
    case TINYAI_FALLBACK_KV_WINDOW: return "kv-window";
    case TINYAI_FALLBACK_PREFETCH: return "prefetch";
  }
  return "?";
}

TinyAIStatus tinyaiEstimateLLMMemory(const TinyAIMappedModel* model, const TinyAILLMConfig* config,
                                     TinyAIMemoryReport* out) {
  TINYAI_RETURN_IF_ERROR(tinyai::capi::CheckModel(model, "tinyaiEstimateLLMMemory"));
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiEstimateLLMMemory: out is NULL");
  TINYAI_RETURN_IF_ERROR(
      tinyai::CheckOutputSize(out, TINYAI_STRUCT_MIN(TinyAIMemoryReport, memoryLimit),
                              "tinyaiEstimateLLMMemory: out"));
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  TINYAI_RETURN_IF_ERROR(ReadLLMConfig(config, &cfg, "tinyaiEstimateLLMMemory: config"));
  // TINYAI_KV_AUTO: the type the limit and mode choose, planned as
  // tinyaiCreateLLM plans it (int8, the least, when none fits); its least
  // limit is the least of any type's.
  uint64_t auto_minimum = 0;
  if (cfg.kvType == TINYAI_KV_AUTO) {
    tinyai::SavedError before;
    tinyai::SaveLastError(&before);
    tinyai::ForwardScheduler chooser;
    tinyai::LlamaRuntime* llama = nullptr;
    const TinyAIStatus s = InitLLMScheduler(&chooser, const_cast<TinyAIMappedModel*>(model), cfg, &llama);
    if (s != TINYAI_OK && s != TINYAI_ERR_RESOURCE_EXHAUSTED) return s;
    cfg.kvType = s == TINYAI_OK ? static_cast<TinyAIKVType>(llama->model().kv_cache().shape().type) : TINYAI_KV_INT8;
    auto_minimum = chooser.minimum_limit();
    tinyai::RestoreLastError(before);
  }
  // Planned as tinyaiCreateLLM plans it, without a limit and without
  // allocating anything but tables.
  cfg.memoryLimit = 0;
  cfg.mode = TINYAI_EXEC_ADAPTIVE;
  tinyai::ForwardScheduler s;
  tinyai::LlamaRuntime* llama = nullptr;
  TINYAI_RETURN_IF_ERROR(InitLLMScheduler(&s, const_cast<TinyAIMappedModel*>(model), cfg, &llama));
  TinyAIMemoryReport report;
  std::memset(&report, 0, sizeof report);
  report.structSize = sizeof report;
  FillPlan(s, &report);
  if (auto_minimum != 0) report.minimumMemoryLimit = auto_minimum;
  report.memoryLimit = config ? config->memoryLimit : 0;
  report.totalBytes = report.kvCacheBytes + report.activationBytes + report.otherBytes;
  report.peakTotalBytes = report.totalBytes;
  tinyai::WriteVersioned(report, out);
  return TINYAI_OK;
}

TinyAIStatus tinyaiPreflightLLM(const TinyAIMappedModel* model, const TinyAILLMConfig* config, TinyAIPreflight* out) {
  TINYAI_RETURN_IF_ERROR(tinyai::capi::CheckModel(model, "tinyaiPreflightLLM"));
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiPreflightLLM: out is NULL");
  TINYAI_RETURN_IF_ERROR(
      tinyai::CheckOutputSize(out, TINYAI_STRUCT_MIN(TinyAIPreflight, mode), "tinyaiPreflightLLM: out"));
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  g_last_chain.ran = false;
  TINYAI_RETURN_IF_ERROR(ReadLLMConfig(config, &cfg, "tinyaiPreflightLLM: config"));
  TINYAI_RETURN_IF_ERROR(tinyai::CheckFallback(cfg, "tinyaiPreflightLLM: config"));
  // tinyaiCreateLLM's plan, its fallback chain's too, without its Prepare()
  // (which allocates).
  tinyai::FallbackRun run;
  TinyAIMappedModel* m_ = const_cast<TinyAIMappedModel*>(model);
  TinyAIStatus planned = RunChain(m_, &cfg, &run);
  if (planned != TINYAI_OK) return AddKvRemedy(m_, cfg, planned);
  tinyai::ForwardScheduler s;
  tinyai::LlamaRuntime* llama = nullptr;
  s.set_staging_sets(run.staging_sets);
  planned = InitLLMScheduler(&s, m_, cfg, &llama);
  if (planned != TINYAI_OK) return AddKvRemedy(m_, cfg, planned);
  TinyAIPreflight p;
  std::memset(&p, 0, sizeof p);
  p.structSize = sizeof p;
  p.mode = s.mode();
  p.kvType = static_cast<TinyAIKVType>(llama->model().kv_cache().shape().type);
  p.rowsPerPass = s.rows_per_pass();
  p.memoryLimit = s.limit();
  p.minimumMemoryLimit = s.minimum_limit();
  p.weightTotalBytes = s.weights().resident;
  const uint64_t cap = s.planned_cache_cap();
  p.weightBytes = s.mode() == TINYAI_EXEC_NORMAL || cap == 0 || cap > p.weightTotalBytes ? p.weightTotalBytes : cap;
  p.largestSliceBytes = s.weights().largest_slice;
  p.kvCacheBytes = s.program_memory().persistent;
  p.activationBytes = s.arena_bytes();
  p.otherBytes = s.tables_bytes();
  p.peakBytes = p.weightBytes + p.kvCacheBytes + p.activationBytes + p.otherBytes;
  p.processPeakBytes = p.peakBytes + TINYAI_PROCESS_OVERHEAD_BYTES;
  // A decoded token reads every weight once, but of the embedding table one
  // row (unless it is the classifier too), and the whole KV cache at the
  // last position.
  // (The weights themselves, not the cache's slots: a model used in place
  // takes no slots.)
  const tinyai::LlamaModel& m = llama->model();
  const uint64_t table = m.embedding_bytes(), vocab = static_cast<uint64_t>(m.params().vocab_size);
  const uint64_t decoded = s.weights().decoded;
  const uint64_t skipped = m.shared_classifier() ? 0 : table - (vocab > 0 ? table / vocab : 0);
  const uint64_t read = decoded > skipped ? decoded - skipped : 0;
  p.decodeBytesPerToken = read + p.kvCacheBytes;
  // What the cache cannot hold comes from storage again each token.
  p.storageBytesPerToken = p.weightBytes >= p.weightTotalBytes || p.weightBytes >= read ? 0 : read - p.weightBytes;
  p.fallbackLevel = run.level;
  p.kvWindow = cfg.kvWindow;
  p.kvSinks = cfg.kvSinks;
  tinyai::WriteVersioned(p, out);
  return TINYAI_OK;
}

TinyAIStatus tinyaiLLMTokenize(const TinyAILLM* llm, const char* text, int addBos, int32_t* tokens, int32_t capacity,
                               int32_t* count) {
  TINYAI_RETURN_IF_ERROR(Check(llm, "tinyaiLLMTokenize", true));
  if (!text || !count) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiLLMTokenize: %s is NULL", text ? "count" : "text");
  }
  if (capacity < 0 || (capacity > 0 && !tokens)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiLLMTokenize: capacity %d with tokens %p", capacity,
                    static_cast<void*>(tokens));
  }
  size_t needed = 0;
  // addBos: the special tokens the model adds to a text (tokenizer.add_bos, add_eos), as llama.cpp's add_special.
  // A text within the prompt's bound is encoded in the scratch the LLM
  // reserved for prompts: nothing is allocated (a static arena sized by
  // tinyaiEstimateStaticArena has no room for more).
  const tinyai::TextTokenizer& tok = llm->model().tokenizer();
  const bool special = addBos != 0;
  TinyAIStatus s = llm->sched.llama->session().Tokenize(text, special && tok.add_bos(), special && tok.add_eos(), tokens,
                                                        static_cast<size_t>(capacity), &needed);
  if (needed > INT32_MAX) return SetError(TINYAI_ERR_OVERFLOW, "tinyaiLLMTokenize: %zu tokens overflow int32", needed);
  *count = static_cast<int32_t>(needed);
  return s;
}

TinyAIStatus tinyaiLLMDecodeToken(const TinyAILLM* llm, int32_t prevToken, int32_t token, char* out, size_t capacity,
                                  size_t* len) {
  TINYAI_RETURN_IF_ERROR(Check(llm, "tinyaiLLMDecodeToken", true));
  if (!len || (capacity > 0 && !out)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiLLMDecodeToken: %s is NULL", len ? "out" : "len");
  }
  const tinyai::TextTokenizer& tok = llm->model().tokenizer();
  if (token < 0 || token >= tok.vocab_size()) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiLLMDecodeToken: token %d is outside the vocabulary (0..%d)", token,
                    tok.vocab_size() - 1);
  }
  const size_t needed = tok.Decode(prevToken, token, out, capacity);
  *len = needed;
  if (needed > capacity) {
    return SetError(TINYAI_ERR_BUFFER_TOO_SMALL, "tinyaiLLMDecodeToken: the piece needs %zu bytes, capacity %zu", needed,
                    capacity);
  }
  return TINYAI_OK;
}

TinyAIStatus tinyaiLLMChatPrompt(const TinyAILLM* llm, const char* system, const char* user, char* out, size_t capacity,
                                 size_t* len) {
  TINYAI_RETURN_IF_ERROR(Check(llm, "tinyaiLLMChatPrompt", true));
  return llm->model().chat_template().Format(system, user, out, capacity, len);
}

TinyAIStatus tinyaiLLMChatNextTurn(const TinyAILLM* llm, const char* user, char* out, size_t capacity, size_t* len) {
  TINYAI_RETURN_IF_ERROR(Check(llm, "tinyaiLLMChatNextTurn", true));
  return llm->model().chat_template().FormatNext(user, out, capacity, len);
}

const char* tinyaiLLMChatTemplateName(const TinyAILLM* llm) {
  if (Check(llm, "tinyaiLLMChatTemplateName", true) != TINYAI_OK) return nullptr;
  return llm->model().chat_template().name();
}

TinyAIStatus tinyaiLLMEval(TinyAILLM* llm, const int32_t* tokens, int32_t count, float* logits) {
  TINYAI_RETURN_IF_ERROR(Check(llm, "tinyaiLLMEval"));
  if (!tokens && count > 0) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiLLMEval: tokens is NULL");
  TINYAI_RETURN_IF_ERROR(tinyai::EvalTokens(&llm->impl(), &llm->model(), tokens, count));
  if (logits && count > 0) {
    std::memcpy(logits, llm->impl().OutputData(0),
                static_cast<size_t>(llm->model().params().vocab_size) * sizeof(float));
  }
  return TINYAI_OK;
}

int32_t tinyaiGetLLMPosition(const TinyAILLM* llm) {
  if (Check(llm, "tinyaiGetLLMPosition", true) != TINYAI_OK) return -1;
  return llm->model().position();
}

TinyAIStatus tinyaiResetLLM(TinyAILLM* llm) {
  TINYAI_RETURN_IF_ERROR(Check(llm, "tinyaiResetLLM"));
  llm->model().Reset();
  return llm->impl().ClaimWeightCache(llm->impl().persistent_held());  // a growable cache's room back
}

TinyAIStatus tinyaiSaveLLMSession(const TinyAILLM* llm, const char* path) {
  TINYAI_RETURN_IF_ERROR(Check(llm, "tinyaiSaveLLMSession"));
  return tinyai::SaveSession(llm->model(), path);
}

TinyAIStatus tinyaiLoadLLMSession(TinyAILLM* llm, const char* path) {
  TINYAI_RETURN_IF_ERROR(Check(llm, "tinyaiLoadLLMSession"));
  tinyai::ForwardScheduler& sched = llm->impl();
  const TinyAIStatus s = tinyai::LoadSession(
      &llm->model(), path,
      [](void* user, uint64_t kv_bytes) { return static_cast<tinyai::ForwardScheduler*>(user)->ClaimWeightCache(kv_bytes); },
      &sched);
  // The weight cache's room as the KV cache now stands (whether or not the load went through).
  const TinyAIStatus claimed = sched.ClaimWeightCache(sched.persistent_held());
  return s != TINYAI_OK ? s : claimed;
}

TinyAIStatus tinyaiGetLLMTokens(const TinyAILLM* llm, int32_t* tokens, int32_t capacity, int32_t* count) {
  if (count) *count = 0;
  TINYAI_RETURN_IF_ERROR(Check(llm, "tinyaiGetLLMTokens"));
  if (!count || capacity < 0 || (capacity > 0 && !tokens)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetLLMTokens: %s", !count ? "count is NULL"
                    : capacity < 0 ? "capacity is negative" : "tokens is NULL");
  }
  const tinyai::LlamaModel& m = llm->model();
  const tinyai::KvCache& kv = m.kv_cache();
  const int32_t pos = m.position();
  // Positions the next token attends to besides itself: all, or the sinks
  // and the window's window - 1 most recent (the slot of the one before
  // them may hold a failed pass's token: the ring has room for a pass).
  const int32_t sinks = kv.windowed() ? (kv.shape().sinks < pos ? kv.shape().sinks : pos) : pos;
  const int32_t keep = kv.shape().window - 1;
  const int32_t from = kv.windowed() && pos - keep > sinks ? pos - keep : sinks;
  const int32_t n = sinks + (pos - from);
  *count = n;
  for (int32_t i = 0; i < n && i < capacity; ++i) tokens[i] = kv.Token(i < sinks ? i : from + (i - sinks));
  if (capacity < n) {
    return SetError(TINYAI_ERR_BUFFER_TOO_SMALL, "tinyaiGetLLMTokens: the cache holds %d tokens; capacity is %d",
                    static_cast<int>(n), static_cast<int>(capacity));
  }
  return TINYAI_OK;
}

TinyAIStatus tinyaiLLMSample(const TinyAILLM* llm, float* logits, const TinyAISamplerConfig* sampler, uint64_t* rngState,
                             int32_t* token) {
  TINYAI_RETURN_IF_ERROR(Check(llm, "tinyaiLLMSample"));
  if (!logits || !sampler || !rngState || !token) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiLLMSample: %s is NULL",
                    !logits ? "logits" : !sampler ? "sampler" : !rngState ? "rngState" : "token");
  }
  TinyAISamplerConfig cfg = tinyaiCreateDefaultSamplerConfig();
  TINYAI_RETURN_IF_ERROR(
      tinyai::ReadVersioned(sampler, &cfg, TINYAI_STRUCT_MIN(TinyAISamplerConfig, temperature),
                            "tinyaiLLMSample: sampler"));
  TINYAI_RETURN_IF_ERROR(CheckSampler(cfg));
  if (cfg.repeatPenalty != 1.0f) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "tinyaiLLMSample: repeatPenalty %g needs the tokens before, which this call does not see: apply "
                    "it to the logits first (or generate with tinyaiLLMGenerate), and give 1 here",
                    static_cast<double>(cfg.repeatPenalty));
  }
  // The sampler's scratch is the runner's; sampling does not change the model.
  return llm->model().sampler().Sample(logits, tinyai::RuleOf(cfg), rngState, token);
}

TinyAIStatus tinyaiLLMGenerate(TinyAILLM* llm, const char* prompt, const TinyAIGenerateParams* params, char* out,
                               size_t outCapacity, size_t* outLen, TinyAIGenerateStats* stats) {
  TINYAI_RETURN_IF_ERROR(Check(llm, "tinyaiLLMGenerate"));
  if (!prompt) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiLLMGenerate: prompt is NULL");
  if (!out && outCapacity > 0) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiLLMGenerate: out is NULL");
  if (stats) {
    TINYAI_RETURN_IF_ERROR(tinyai::CheckOutputSize(stats, TINYAI_STRUCT_MIN(TinyAIGenerateStats, stopReason),
                                                    "tinyaiLLMGenerate: stats"));
  }
  TinyAIGenerateParams p = tinyaiCreateDefaultGenerateParams();
  TINYAI_RETURN_IF_ERROR(CopyGenerateParams(params, &p, "tinyaiLLMGenerate"));
  // The same session tinyaiExecuteNextLayer() steps through, run to the end.
  tinyai::BusyScope busy(llm->impl().link());
  tinyai::TextSession& session = llm->sched.llama->session();
  TinyAIStatus s = session.Start(prompt, p, tinyai::TextSink(p.onText, p.user, out, outCapacity));
  for (bool finished = false; s == TINYAI_OK && !finished;) s = session.Step(nullptr, &finished);
  if (s == TINYAI_OK) {
    s = session.Finish(stats);
  } else {
    session.Cancel();
  }
  if (outLen) *outLen = session.sink().length();
  return s;
}

TinyAIStatus tinyaiSetSchedulerGenerateParams(TinyAIForwardScheduler* scheduler, const TinyAIGenerateParams* params) {
  TINYAI_RETURN_IF_ERROR(tinyai::capi::CheckSchedulerHandle(scheduler, "tinyaiSetSchedulerGenerateParams"));
  TINYAI_RETURN_IF_ERROR(scheduler->impl.CheckUsable("tinyaiSetSchedulerGenerateParams"));
  if (!params) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiSetSchedulerGenerateParams: params is NULL");
  TinyAIGenerateParams p = tinyaiCreateDefaultGenerateParams();
  TINYAI_RETURN_IF_ERROR(CopyGenerateParams(params, &p, "tinyaiSetSchedulerGenerateParams"));
  if (!scheduler->llama) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "tinyaiSetSchedulerGenerateParams: the schedule's model is not a language model");
  }
  *scheduler->llama->generate_params() = p;
  return TINYAI_OK;
}

const TinyAIForwardScheduler* tinyaiGetLLMScheduler(const TinyAILLM* llm) {
  if (Check(llm, "tinyaiGetLLMScheduler", true) != TINYAI_OK) return nullptr;
  return &llm->sched;
}

}  // extern "C"
