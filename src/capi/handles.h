// The C API's handles: the scheduler handle (also inside every TinyAILLM),
// and the checks every call that takes a handle makes first.
//
// A handle a call is given may be NULL (TINYAI_ERR_INVALID_ARGUMENT), or a
// pointer that is not a live handle of its kind: closed or destroyed
// already, or never created (TINYAI_ERR_MISUSE, naming the call). Each kind
// keeps a list of its live handles under a mutex, and a call looks its
// handle up (by address; nothing behind it is read) before it reads through
// it. The lookup does not hold the handle: a call racing with another
// thread's close or destroy of the same handle is the caller's race, as in
// SQLite (the headers say so).
#ifndef TINYAI_CAPI_HANDLES_H_
#define TINYAI_CAPI_HANDLES_H_

#include "common/status.h"
#include "loader/mapped_model.h"
#include "scheduler/scheduler.h"
#include "tinyai/status.h"

namespace tinyai {
class LlamaRuntime;
}  // namespace tinyai

struct TinyAIForwardScheduler {
  tinyai::ForwardScheduler impl;
  tinyai::LlamaRuntime* llama = nullptr;  // impl's runtime when the model is a language model
  TinyAIForwardScheduler* next_live = nullptr;  // schedulers the C API created and has not destroyed
  bool in_llm = false;  // an LLM's own (tinyaiGetLLMScheduler): tinyaiDestroyLLM destroys it
};

namespace tinyai {
namespace capi {

// TINYAI_ERR_MISUSE: "CALL: HANDLE is not KIND (WHY)".
inline TinyAIStatus NotLive(const char* call, const void* handle, const char* kind, const char* why) {
  return SetError(TINYAI_ERR_MISUSE, "%s: %p is not %s (%s)", call, handle, kind, why);
}

// model is an open model: TINYAI_OK; else the status (recorded).
inline TinyAIStatus CheckModel(const TinyAIMappedModel* model, const char* call) {
  if (!model) return SetError(TINYAI_ERR_INVALID_ARGUMENT, "%s: model is NULL", call);
  if (!TinyAIMappedModel::IsOpen(model)) {
    return NotLive(call, model, "an open model", "closed already, or never opened");
  }
  return TINYAI_OK;
}

// The live schedulers: those tinyaiCreateForwardScheduler made and every
// LLM's own (in_llm), until destroyed.
void AddScheduler(TinyAIForwardScheduler* scheduler);
void RemoveScheduler(const TinyAIForwardScheduler* scheduler);
bool IsLiveScheduler(const TinyAIForwardScheduler* scheduler);

// scheduler is live: TINYAI_OK; else the status (recorded). It may still
// be unusable (its model closed): ForwardScheduler::CheckUsable says.
TinyAIStatus CheckSchedulerHandle(const TinyAIForwardScheduler* scheduler, const char* call);

}  // namespace capi
}  // namespace tinyai

#endif  // TINYAI_CAPI_HANDLES_H_
