// The computation behind tinyaiDetectMemoryLimit (<tinyai/memory.h>) with
// the system's files read under root ("" for the system's own; tests give a
// directory laid out like /proc and /sys): fills *env whole and returns the
// call's status (recorded with its message on error).
#ifndef TINYAI_CAPI_MEMORY_ENV_H_
#define TINYAI_CAPI_MEMORY_ENV_H_

#include "tinyai/memory.h"

namespace tinyai {

TinyAIStatus DetectMemoryLimit(const char* root, TinyAIMemoryEnvironment* env);

}  // namespace tinyai

#endif  // TINYAI_CAPI_MEMORY_ENV_H_
