// Internal error handling: functions return TinyAIStatus; the failure site
// records a message naming the cause with SetError(), which also becomes the
// thread's last error for the C API. The first cause is kept by returning it
// unchanged up the stack (TINYAI_RETURN_IF_ERROR).
#ifndef TINYAI_COMMON_STATUS_H_
#define TINYAI_COMMON_STATUS_H_

#include <cstdint>

#include "tinyai/status.h"

namespace tinyai {

// Records code and the printf-style message as this thread's last error and
// returns code, so failure sites read `return SetError(CODE, "...", ...);`.
TinyAIStatus SetError(TinyAIStatus code, const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

// Records code with the current message prefixed by context, e.g.
// "layer 3: " + "tensor 'blk.3.w1': checksum mismatch". Returns code.
TinyAIStatus AddErrorContext(TinyAIStatus code, const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

// What a program can act on beside the message (tinyaiGetLastErrorInfo):
// a failure site that knows it calls SetErrorDetail right after SetError.
// SetError clears it, so a detail never outlives its message;
// AddErrorContext keeps it.
struct ErrorDetail {
  TinyAIResource resource = TINYAI_RESOURCE_NONE;
  TinyAIStage stage = TINYAI_STAGE_NONE;
  uint64_t needed = 0;  // bytes the configuration needs of the resource
  uint64_t limit = 0;   // bytes it has
  int32_t layer = -1;
  char tensor[96] = {0};
  TinyAIRemedy remedy = TINYAI_REMEDY_NONE;
  uint64_t remedy_value = 0;
  TinyAIRemedy remedy2 = TINYAI_REMEDY_NONE;
  uint64_t remedy2_value = 0;
};
// Attaches d to the thread's last error; returns the last error's code.
TinyAIStatus SetErrorDetail(const ErrorDetail& d);
const ErrorDetail& LastErrorDetail();

// Appends the printf-style text to the last error's message (as much as
// fits), keeping its code and detail. Returns the code.
TinyAIStatus AppendToLastError(const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

// The thread's last error, kept while work whose failures are expected
// and handled runs (a scheduler's trial plans), and put back after it.
struct SavedError {
  TinyAIStatus code = TINYAI_OK;
  char message[512] = {0};
  ErrorDetail detail;
};
void SaveLastError(SavedError* out);
void RestoreLastError(const SavedError& saved);

}  // namespace tinyai

#define TINYAI_RETURN_IF_ERROR(expr)               \
  do {                                             \
    const TinyAIStatus tinyai_status_ = (expr);    \
    if (tinyai_status_ != TINYAI_OK) return tinyai_status_; \
  } while (0)

#endif  // TINYAI_COMMON_STATUS_H_
