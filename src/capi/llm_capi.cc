// extern "C" shims of <tinyai/llm.h>.
#include <cmath>
#include <cstring>
#include <new>

#include "common/status.h"
#include "port/port.h"
#include "model/generate.h"
#include "model/llama.h"
#include "text/sampler.h"
#include "tinyai/llm.h"

using tinyai::SetError;

struct TinyAILLM {
  tinyai::LlamaModel model;
  tinyai::Sampler sampler;
  tinyai::LlamaMemoryPlan plan;
  uint64_t limit = 0;
};

namespace {

TinyAIStatus NullLLM(const char* call) { return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: llm is NULL", call); }

// Copies a caller's struct that starts with structSize. Only this
// version's size exists so far; when fields are appended, the sizes of
// earlier versions join it here and the missing fields keep their defaults.
template <class T>
TinyAIStatus CopyVersioned(const T* in, T* out, const char* what) {
  if (!in) return TINYAI_OK;
  if (in->structSize != sizeof(T)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s.structSize is %u; create it with its tinyaiCreateDefault function",
                    what, in->structSize);
  }
  std::memcpy(out, in, in->structSize);
  return TINYAI_OK;
}

TinyAIStatus CheckSampler(const TinyAISamplerConfig& s) {
  if (!(s.temperature >= 0.0f) || !std::isfinite(s.temperature)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "sampler temperature %g must be finite and >= 0",
                    static_cast<double>(s.temperature));
  }
  if (!(s.topP > 0.0f && s.topP <= 1.0f)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "sampler topP %g must be in (0, 1]", static_cast<double>(s.topP));
  }
  return TINYAI_OK;
}

void FillLargestBlock(const TinyAIMappedModel& model, const tinyai::LlamaMemoryPlan& plan, TinyAIMemoryReport* out) {
  out->largestBlockBytes = plan.largest_block;
  out->largestBlockTensor =
      plan.largest_tensor >= 0 ? model.reader().tensors()[static_cast<size_t>(plan.largest_tensor)].name : "";
}

}  // namespace

extern "C" {

TinyAILLMConfig tinyaiCreateDefaultLLMConfig(void) {
  TinyAILLMConfig c;
  std::memset(&c, 0, sizeof c);
  c.structSize = sizeof c;
  c.contextLength = 0;
  c.threads = 1;
  return c;
}

TinyAISamplerConfig tinyaiCreateDefaultSamplerConfig(void) {
  TinyAISamplerConfig c;
  std::memset(&c, 0, sizeof c);
  c.structSize = sizeof c;
  c.temperature = 0.0f;
  c.topP = 0.9f;
  c.seed = 42;
  return c;
}

TinyAIGenerateParams tinyaiCreateDefaultGenerateParams(void) {
  TinyAIGenerateParams p;
  std::memset(&p, 0, sizeof p);
  p.structSize = sizeof p;
  p.steps = 256;
  p.sampler = tinyaiCreateDefaultSamplerConfig();
  return p;
}

TinyAIStatus tinyaiCreateLLM(TinyAIMappedModel* model, const TinyAILLMConfig* config, TinyAILLM** out) {
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiCreateLLM: out is NULL");
  *out = nullptr;
  if (!model) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiCreateLLM: model is NULL");
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  TINYAI_RETURN_IF_ERROR(CopyVersioned(config, &cfg, "config"));
  // The limit is checked before anything is allocated.
  tinyai::LlamaMemoryPlan plan;
  const int threads = cfg.threads == 0 ? tinyai::port::CpuCount() : cfg.threads;
  if (cfg.threads >= 0 && cfg.contextLength >= 0) {
    TINYAI_RETURN_IF_ERROR(tinyai::LlamaModel::PlanMemory(*model, cfg.contextLength, threads, &plan));
    TINYAI_RETURN_IF_ERROR(plan.CheckLimit(*model, cfg.memoryLimit, cfg.contextLength));
  }
  TinyAILLM* llm = new (std::nothrow) TinyAILLM();
  if (!llm) return SetError(TINYAI_ERR_OUT_OF_MEMORY, "tinyaiCreateLLM: cannot allocate the runner");
  llm->plan = plan;
  llm->limit = cfg.memoryLimit;
  TinyAIStatus s = llm->model.Init(model, cfg, nullptr);
  if (s == TINYAI_OK) s = llm->sampler.Init(static_cast<size_t>(llm->model.params().vocab_size));
  if (s == TINYAI_OK && cfg.memoryLimit > 0) {
    uint64_t cap = cfg.memoryLimit - plan.fixed;
    const uint64_t configured = model->config().maxCacheSize;
    if (configured > 0 && configured < cap) cap = configured;
    s = model->cache().SetCapacity(cap);
    llm->model.UpdateStreaming();
  }
  if (s != TINYAI_OK) {
    delete llm;
    return s;
  }
  *out = llm;
  return TINYAI_OK;
}

void tinyaiDestroyLLM(TinyAILLM* llm) { delete llm; }

TinyAIStatus tinyaiGetModelInfo(const TinyAILLM* llm, TinyAIModelInfo* out) {
  if (!llm) return NullLLM("tinyaiGetModelInfo");
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetModelInfo: out is NULL");
  const tinyai::LlamaHyperParams& hp = llm->model.params();
  std::memset(out, 0, sizeof *out);
  out->dim = hp.dim;
  out->hiddenDim = hp.hidden_dim;
  out->layers = hp.layers;
  out->heads = hp.heads;
  out->kvHeads = hp.kv_heads;
  out->vocabSize = hp.vocab_size;
  out->seqLen = hp.seq_len;
  out->contextLength = llm->model.context_length();
  out->sharedClassifier = hp.shared_classifier ? 1 : 0;
  out->bosId = llm->model.tokenizer().bos_id();
  out->eosId = llm->model.tokenizer().eos_id();
  out->ropeTheta = hp.rope_theta;
  out->normEps = hp.norm_eps;
  out->weightBytes = llm->model.weight_bytes();
  out->kvCacheBytes = llm->model.kv_bytes();
  out->activationBytes = llm->model.activation_bytes();
  return TINYAI_OK;
}

TinyAIStatus tinyaiGetLLMMemoryReport(const TinyAILLM* llm, TinyAIMemoryReport* out) {
  if (!llm) return NullLLM("tinyaiGetLLMMemoryReport");
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetLLMMemoryReport: out is NULL");
  if (out->structSize != sizeof *out) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGetLLMMemoryReport: out->structSize is %u, expected %zu",
                    out->structSize, sizeof *out);
  }
  const tinyai::CacheStats cs = llm->model.mapped_model()->cache().stats();
  const tinyai::LlamaMemory& m = llm->model.memory();
  std::memset(out, 0, sizeof *out);
  out->structSize = sizeof *out;
  out->limit = llm->limit;
  out->minimumLimit = llm->plan.minimum_limit;
  out->weightCacheCap = cs.capacity;
  out->weightBytes = cs.held_bytes;
  out->weightPeakBytes = cs.peak_held_bytes;
  out->kvBytes = m.kv;
  out->activationBytes = m.activations;
  out->otherBytes = m.tokenizer + m.sampler + m.runner + llm->model.mapped_model()->overhead_bytes();
  out->totalBytes = out->weightBytes + out->kvBytes + out->activationBytes + out->otherBytes;
  out->peakTotalBytes = out->weightPeakBytes + out->kvBytes + out->activationBytes + out->otherBytes;
  FillLargestBlock(*llm->model.mapped_model(), llm->plan, out);
  return TINYAI_OK;
}

TinyAIStatus tinyaiEstimateLLMMemory(const TinyAIMappedModel* model, const TinyAILLMConfig* config,
                                     TinyAIMemoryReport* out) {
  if (!model) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiEstimateLLMMemory: model is NULL");
  if (!out) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiEstimateLLMMemory: out is NULL");
  if (out->structSize != sizeof *out) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiEstimateLLMMemory: out->structSize is %u, expected %zu",
                    out->structSize, sizeof *out);
  }
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  TINYAI_RETURN_IF_ERROR(CopyVersioned(config, &cfg, "config"));
  if (cfg.threads < 0 || cfg.contextLength < 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiEstimateLLMMemory: threads %d or contextLength %d is negative",
                    cfg.threads, cfg.contextLength);
  }
  tinyai::LlamaMemoryPlan plan;
  TINYAI_RETURN_IF_ERROR(tinyai::LlamaModel::PlanMemory(
      *model, cfg.contextLength, cfg.threads == 0 ? tinyai::port::CpuCount() : cfg.threads, &plan));
  std::memset(out, 0, sizeof *out);
  out->structSize = sizeof *out;
  out->limit = cfg.memoryLimit;
  out->minimumLimit = plan.minimum_limit;
  out->kvBytes = plan.runner.kv;
  out->activationBytes = plan.runner.activations;
  out->otherBytes = plan.runner.tokenizer + plan.runner.sampler + plan.runner.runner + plan.loader;
  out->totalBytes = out->kvBytes + out->activationBytes + out->otherBytes;
  out->peakTotalBytes = out->totalBytes;
  FillLargestBlock(*model, plan, out);
  return TINYAI_OK;
}

TinyAIStatus tinyaiTokenize(const TinyAILLM* llm, const char* text, int addBos, int32_t* tokens, int32_t capacity,
                            int32_t* count) {
  if (!llm) return NullLLM("tinyaiTokenize");
  if (!text || !count) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiTokenize: %s is NULL", text ? "count" : "text");
  if (capacity < 0 || (capacity > 0 && !tokens)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiTokenize: capacity %d with tokens %p", capacity,
                    static_cast<void*>(tokens));
  }
  size_t needed = 0;
  TinyAIStatus s = llm->model.tokenizer().Encode(text, addBos != 0, false, tokens, static_cast<size_t>(capacity), &needed);
  if (needed > INT32_MAX) return SetError(TINYAI_ERR_OVERFLOW, "tinyaiTokenize: %zu tokens overflow int32", needed);
  *count = static_cast<int32_t>(needed);
  return s;
}

TinyAIStatus tinyaiDecodeToken(const TinyAILLM* llm, int32_t prevToken, int32_t token, char* out, size_t capacity,
                               size_t* len) {
  if (!llm) return NullLLM("tinyaiDecodeToken");
  if (!len || (capacity > 0 && !out)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiDecodeToken: %s is NULL", len ? "out" : "len");
  }
  const tinyai::Tokenizer& tok = llm->model.tokenizer();
  if (token < 0 || token >= tok.vocab_size()) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiDecodeToken: token %d is outside the vocabulary (0..%d)", token,
                    tok.vocab_size() - 1);
  }
  char byte[1];
  tinyai::StringView piece = tok.Decode(prevToken, token, byte);
  *len = piece.size;
  if (piece.size > capacity) {
    return SetError(TINYAI_ERR_RESOURCE_EXHAUSTED, "tinyaiDecodeToken: piece needs %zu bytes, capacity %zu", piece.size,
                    capacity);
  }
  if (piece.size) std::memcpy(out, piece.data, piece.size);
  return TINYAI_OK;
}

TinyAIStatus tinyaiEval(TinyAILLM* llm, const int32_t* tokens, int32_t count, float* logits) {
  if (!llm) return NullLLM("tinyaiEval");
  if (!tokens && count > 0) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiEval: tokens is NULL");
  TINYAI_RETURN_IF_ERROR(llm->model.Eval(tokens, count));
  if (logits && count > 0) {
    std::memcpy(logits, llm->model.logits(), static_cast<size_t>(llm->model.params().vocab_size) * sizeof(float));
  }
  return TINYAI_OK;
}

int32_t tinyaiGetPosition(const TinyAILLM* llm) {
  if (!llm) {
    NullLLM("tinyaiGetPosition");
    return -1;
  }
  return llm->model.position();
}

TinyAIStatus tinyaiResetLLM(TinyAILLM* llm) {
  if (!llm) return NullLLM("tinyaiResetLLM");
  llm->model.Reset();
  return TINYAI_OK;
}

TinyAIStatus tinyaiSample(const TinyAILLM* llm, float* logits, const TinyAISamplerConfig* sampler, uint64_t* rngState,
                          int32_t* token) {
  if (!llm) return NullLLM("tinyaiSample");
  if (!logits || !sampler || !rngState || !token) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiSample: %s is NULL",
                    !logits ? "logits" : !sampler ? "sampler" : !rngState ? "rngState" : "token");
  }
  TinyAISamplerConfig cfg = tinyaiCreateDefaultSamplerConfig();
  TINYAI_RETURN_IF_ERROR(CopyVersioned(sampler, &cfg, "sampler"));
  TINYAI_RETURN_IF_ERROR(CheckSampler(cfg));
  // The sampler's scratch is the runner's; sampling does not change the model.
  return const_cast<TinyAILLM*>(llm)->sampler.Sample(logits, cfg.temperature, cfg.topP, rngState, token);
}

TinyAIStatus tinyaiGenerate(TinyAILLM* llm, const char* prompt, const TinyAIGenerateParams* params, char* out,
                            size_t outCapacity, size_t* outLen, TinyAIGenerateStats* stats) {
  if (!llm) return NullLLM("tinyaiGenerate");
  if (!prompt) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGenerate: prompt is NULL");
  if (!out && outCapacity > 0) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGenerate: out is NULL");
  TinyAIGenerateParams p = tinyaiCreateDefaultGenerateParams();
  TINYAI_RETURN_IF_ERROR(CopyVersioned(params, &p, "params"));
  if (p.steps < 0) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "tinyaiGenerate: steps %d is negative", p.steps);
  TINYAI_RETURN_IF_ERROR(CheckSampler(p.sampler));
  tinyai::TextSink sink(p.onText, p.user, out, outCapacity);
  TinyAIStatus s = tinyai::Generate(&llm->model, &llm->sampler, prompt, p, &sink, stats);
  if (outLen) *outLen = sink.length();
  return s;
}

}  // extern "C"
