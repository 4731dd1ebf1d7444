// The C API's scheduler handle (also inside every TinyAILLM).
#ifndef TINYAI_CAPI_HANDLES_H_
#define TINYAI_CAPI_HANDLES_H_

#include "scheduler/scheduler.h"

namespace tinyai {
class LlamaRuntime;
}  // namespace tinyai

struct TinyAIForwardScheduler {
  tinyai::ForwardScheduler impl;
  tinyai::LlamaRuntime* llama = nullptr;  // impl's runtime when the model is a language model
  TinyAIForwardScheduler* next_live = nullptr;  // schedulers the C API created and has not destroyed
};

#endif  // TINYAI_CAPI_HANDLES_H_
