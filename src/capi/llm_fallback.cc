#include "capi/llm_fallback.h"

#include <cstdarg>
#include <cstdio>

#include "common/format.h"
#include "common/status.h"
#include "format/llama_params.h"
#include "loader/mapped_model.h"
#include "model/llama.h"
#include "scheduler/scheduler.h"

namespace tinyai {

void FallbackRun::Add(const char* format, ...) {
  if (used + 1 >= sizeof log) return;
  va_list args;
  va_start(args, format);
  const int n = tinyai::VFormat(log + used, sizeof log - used, format, args);
  va_end(args);
  if (n > 0) used = used + static_cast<size_t>(n) < sizeof log ? used + static_cast<size_t>(n) : sizeof log - 1;
}

namespace {

constexpr int32_t kLastStep = TINYAI_FALLBACK_PREFETCH;
constexpr int32_t kDefaultSinks = 4;

const char* ModeName(TinyAIExecutionMode m) {
  switch (m) {
    case TINYAI_EXEC_NORMAL: return "NORMAL";
    case TINYAI_EXEC_MEMORY_OPT: return "MEMORY_OPT";
    case TINYAI_EXEC_STREAMING: return "STREAMING";
    case TINYAI_EXEC_ADAPTIVE: return "ADAPTIVE";
  }
  return "?";
}

// A refusal the chain may answer: the memory limit or the weight cache's
// cap was too small for the plan, or a size beyond this target's address
// space (a smaller KV cache may fit it).
bool ForMemory(TinyAIStatus s) {
  if (s == TINYAI_ERR_OVERFLOW) return true;
  if (s != TINYAI_ERR_RESOURCE_EXHAUSTED) return false;
  const TinyAIResource r = LastErrorDetail().resource;
  return r == TINYAI_RESOURCE_MEMORY_LIMIT || r == TINYAI_RESOURCE_WEIGHT_CACHE;
}

// What the last refusal (status s) needed, for the log.
void LogRefusal(FallbackRun* run, TinyAIStatus s) {
  if (s == TINYAI_ERR_OVERFLOW) {
    run->Add("does not fit this target's address space\n");
    return;
  }
  const ErrorDetail& d = LastErrorDetail();
  run->Add("needs %llu bytes, over the %s of %llu\n", static_cast<unsigned long long>(d.needed),
           d.resource == TINYAI_RESOURCE_WEIGHT_CACHE ? "weight cache's cap" : "memory limit",
           static_cast<unsigned long long>(d.limit));
}

// Plans c in a trial scheduler, the model's tables as with `staging` sets.
TinyAIStatus Trial(TinyAIMappedModel* model, const TinyAILLMConfig& c, LLMPlanner plan, size_t staging,
                   ForwardScheduler* s) {
  LlamaRuntime* llama = nullptr;
  s->set_staging_sets(staging);
  return plan(s, model, c, &llama);
}

// The longest window (with its sinks) that plans; 0 when none does, with
// *shortest_needs what a window of one position needs (0 when the context
// leaves no room for a window). A window's cache holds the sinks, the
// window and a pass's rows less one (its ring), so only windows shorter
// than the context less those save anything.
TinyAIStatus LongestWindow(TinyAIMappedModel* model, TinyAILLMConfig c, LLMPlanner plan, size_t staging,
                           int32_t* window, uint64_t* shortest_needs) {
  *window = 0;
  *shortest_needs = 0;
  LlamaHyperParams hp;
  TINYAI_RETURN_IF_ERROR(hp.Load(model->reader()));
  const int32_t context = c.contextLength > 0 ? c.contextLength : hp.seq_len;
  const int32_t longest = context - c.kvSinks - static_cast<int32_t>(LlamaModel::kMaxChunk);
  if (longest < 1) return TINYAI_OK;
  auto fits = [&](int32_t w, bool* ok) {
    c.kvWindow = w;
    ForwardScheduler s;
    const TinyAIStatus st = Trial(model, c, plan, staging, &s);
    *ok = st == TINYAI_OK;
    if (!*ok && w == 1) *shortest_needs = st == TINYAI_ERR_OVERFLOW ? UINT64_MAX : LastErrorDetail().needed;
    return st == TINYAI_OK || ForMemory(st) ? TINYAI_OK : st;
  };
  bool ok = false;
  TINYAI_RETURN_IF_ERROR(fits(1, &ok));
  if (!ok) return TINYAI_OK;
  int32_t lo = 1, hi = longest;  // lo fits
  while (lo < hi) {
    const int32_t mid = static_cast<int32_t>(lo + (static_cast<int64_t>(hi) - lo + 1) / 2);
    TINYAI_RETURN_IF_ERROR(fits(mid, &ok));
    if (ok) lo = mid;
    else hi = mid - 1;
  }
  *window = lo;
  return TINYAI_OK;
}

// Applies step to c: false (and why, in the log) when it changes nothing.
TinyAIStatus Apply(TinyAIFallback step, TinyAIMappedModel* model, LLMPlanner plan, TinyAILLMConfig* c,
                   FallbackRun* run, bool* changed) {
  *changed = false;
  switch (step) {
    case TINYAI_FALLBACK_KV_F16:
    case TINYAI_FALLBACK_KV_INT8: {
      const TinyAIKVType to = step == TINYAI_FALLBACK_KV_F16 ? TINYAI_KV_F16 : TINYAI_KV_INT8;
      if (c->kvType == TINYAI_KV_AUTO) {
        run->Add("skipped: kvType auto chooses the type already\n");
      } else if (static_cast<int32_t>(c->kvType) >= static_cast<int32_t>(to)) {
        run->Add("skipped: the KV cache is %s already\n", tinyaiKVTypeName(c->kvType));
      } else {
        run->Add("KV cache %s -> %s: ", tinyaiKVTypeName(c->kvType), tinyaiKVTypeName(to));
        c->kvType = to;
        *changed = true;
      }
      return TINYAI_OK;
    }
    case TINYAI_FALLBACK_MEMORY_OPT:
    case TINYAI_FALLBACK_STREAMING: {
      const TinyAIExecutionMode to =
          step == TINYAI_FALLBACK_MEMORY_OPT ? TINYAI_EXEC_MEMORY_OPT : TINYAI_EXEC_STREAMING;
      if (c->mode == TINYAI_EXEC_ADAPTIVE) {
        run->Add("skipped: ADAPTIVE chooses the mode already\n");
      } else if (static_cast<int32_t>(c->mode) >= static_cast<int32_t>(to)) {
        run->Add("skipped: the mode is %s already\n", ModeName(c->mode));
      } else {
        run->Add("mode %s -> %s: ", ModeName(c->mode), ModeName(to));
        c->mode = to;
        *changed = true;
      }
      return TINYAI_OK;
    }
    case TINYAI_FALLBACK_KV_WINDOW: {
      TinyAILLMConfig w = *c;
      w.kvGrowable = 0;
      if (w.kvWindow == 0 && w.kvSinks == 0) w.kvSinks = kDefaultSinks;
      int32_t window = 0;
      uint64_t shortest = 0;
      SavedError refused;
      SaveLastError(&refused);
      TINYAI_RETURN_IF_ERROR(LongestWindow(model, w, plan, run->staging_sets, &window, &shortest));
      RestoreLastError(refused);
      if (c->kvWindow > 0 && (window == 0 || window >= c->kvWindow)) {
        run->Add("skipped: a window of %d positions is set already\n", c->kvWindow);
      } else if (window == 0 && shortest == 0) {
        run->Add("skipped: the context leaves no room for a window (%d sinks and %d positions a pass)\n", w.kvSinks,
                 static_cast<int>(LlamaModel::kMaxChunk));
      } else if (window == 0) {
        run->Add("skipped: no window fits (one position and %d sinks needs %llu bytes)\n", w.kvSinks,
                 static_cast<unsigned long long>(shortest));
      } else {
        w.kvWindow = window;
        run->Add("KV window of %d positions and %d sinks%s: ", w.kvWindow, w.kvSinks,
                 c->kvGrowable ? " (no longer growable)" : "");
        *c = w;
        *changed = true;
      }
      return TINYAI_OK;
    }
    case TINYAI_FALLBACK_PREFETCH: {
      const size_t sets = model->cache().staging_sets();
      if (sets <= 1 || run->staging_sets == 1) {
        run->Add(sets == 0 ? "skipped: the model holds no staging buffers (nothing decoded, converted or packed as "
                             "it loads)\n"
                           : "skipped: the prefetch workers share one staging set already\n");
      } else {
        run->Add("prefetch workers share 1 staging set of %zu (%llu bytes freed): ", sets,
                 static_cast<unsigned long long>(model->overhead_bytes() - model->overhead_bytes(1)));
        run->staging_sets = 1;
        *changed = true;
      }
      return TINYAI_OK;
    }
    case TINYAI_FALLBACK_END: break;
  }
  return TINYAI_OK;
}

}  // namespace

TinyAIStatus CheckFallback(const TinyAILLMConfig& cfg, const char* call) {
  for (int32_t i = 0; i < TINYAI_MAX_FALLBACK_STEPS; ++i) {
    const int32_t v = static_cast<int32_t>(cfg.fallback[i]);
    if (v == TINYAI_FALLBACK_END) continue;
    if (v < 0 || v > kLastStep) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                      "%s: fallback[%d] is %d, not a step (TINYAI_FALLBACK_KV_F16 %d .. KV_WINDOW %d; "
                      "TINYAI_FALLBACK_END ends the chain)",
                      call, static_cast<int>(i), static_cast<int>(v), TINYAI_FALLBACK_KV_F16, kLastStep);
    }
    for (int32_t j = 0; j < i; ++j) {
      if (cfg.fallback[j] == cfg.fallback[i]) {
        return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: fallback[%d] repeats fallback[%d] (%s); give each step once",
                        call, static_cast<int>(i), static_cast<int>(j), tinyaiFallbackName(cfg.fallback[i]));
      }
    }
    if (i > 0 && cfg.fallback[i - 1] == TINYAI_FALLBACK_END) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                      "%s: fallback[%d] (%s) comes after TINYAI_FALLBACK_END, which ends the chain", call,
                      static_cast<int>(i), tinyaiFallbackName(cfg.fallback[i]));
    }
  }
  return TINYAI_OK;
}

TinyAIStatus PlanWithFallback(TinyAIMappedModel* model, TinyAILLMConfig* cfg, LLMPlanner plan, FallbackRun* run) {
  *run = FallbackRun();
  SavedError before;
  SaveLastError(&before);
  TinyAIStatus s;
  {
    ForwardScheduler trial;
    s = Trial(model, *cfg, plan, 0, &trial);
  }
  if (s == TINYAI_OK || !ForMemory(s) || cfg->fallback[0] == TINYAI_FALLBACK_END) return s;
  run->Add("as configured: ");
  LogRefusal(run, s);
  TinyAILLMConfig c = *cfg;
  char names[128] = "";
  size_t n = 0;
  for (int32_t i = 0; i < TINYAI_MAX_FALLBACK_STEPS && cfg->fallback[i] != TINYAI_FALLBACK_END; ++i) {
    const TinyAIFallback step = cfg->fallback[i];
    run->Add("%d. %s: ", static_cast<int>(i + 1), tinyaiFallbackName(step));
    const int w = tinyai::Format(names + n, sizeof names - n, "%s%s", n ? ", " : "", tinyaiFallbackName(step));
    if (w > 0) n = n + static_cast<size_t>(w) < sizeof names ? n + static_cast<size_t>(w) : sizeof names - 1;
    bool changed = false;
    SavedError refused;
    SaveLastError(&refused);
    const TinyAIStatus applied = Apply(step, model, plan, &c, run, &changed);
    if (applied != TINYAI_OK) {
      *cfg = c;
      return applied;
    }
    if (!changed) {
      RestoreLastError(refused);
      continue;
    }
    ++run->level;
    ForwardScheduler trial;
    s = Trial(model, c, plan, run->staging_sets, &trial);
    if (s == TINYAI_OK) {
      run->Add("fits (%s, %d row%s per pass)\n", ModeName(trial.mode()), static_cast<int>(trial.rows_per_pass()),
               trial.rows_per_pass() == 1 ? "" : "s");
      *cfg = c;
      RestoreLastError(before);
      return TINYAI_OK;
    }
    if (!ForMemory(s)) {
      *cfg = c;
      return s;
    }
    LogRefusal(run, s);
  }
  // Nothing fits: the last level's refusal, naming the chain; its figures
  // and remedies are that level's (they hold with the chain kept).
  *cfg = c;
  AppendToLastError("; the fallback chain (%s) was tried to its end (figures of its last level, %d step%s applied)",
                    names, static_cast<int>(run->level), run->level == 1 ? "" : "s");
  return s;
}

}  // namespace tinyai
