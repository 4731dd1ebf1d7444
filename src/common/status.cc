#include "common/status.h"

#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "common/config.h"
#include "common/format.h"

namespace tinyai {
namespace {

constexpr size_t kMessageCapacity = 512;

struct LastError {
  TinyAIStatus code = TINYAI_OK;
  char message[kMessageCapacity] = {0};
  ErrorDetail detail;
};

LastError& ThreadLastError() {
  static TINYAI_THREAD_LOCAL LastError last;
  return last;
}

}  // namespace

static_assert(sizeof(SavedError::message) == kMessageCapacity, "a saved error holds a whole message");

void SaveLastError(SavedError* out) {
  const LastError& last = ThreadLastError();
  out->code = last.code;
  std::memcpy(out->message, last.message, kMessageCapacity);
  out->detail = last.detail;
}

void RestoreLastError(const SavedError& saved) {
  LastError& last = ThreadLastError();
  last.code = saved.code;
  std::memcpy(last.message, saved.message, kMessageCapacity);
  last.detail = saved.detail;
}

TinyAIStatus SetErrorDetail(const ErrorDetail& d) {
  LastError& last = ThreadLastError();
  last.detail = d;
  last.detail.tensor[sizeof last.detail.tensor - 1] = '\0';
  return last.code;
}

const ErrorDetail& LastErrorDetail() { return ThreadLastError().detail; }

TinyAIStatus AppendToLastError(const char* format, ...) {
  LastError& last = ThreadLastError();
  const size_t used = std::strlen(last.message);
  if (used + 1 < kMessageCapacity) {
    va_list args;
    va_start(args, format);
    tinyai::VFormat(last.message + used, kMessageCapacity - used, format, args);
    va_end(args);
  }
  return last.code;
}

TinyAIStatus SetError(TinyAIStatus code, const char* format, ...) {
  LastError& last = ThreadLastError();
  last.code = code;
  last.detail = ErrorDetail();
  va_list args;
  va_start(args, format);
  tinyai::VFormat(last.message, kMessageCapacity, format, args);
  va_end(args);
  return code;
}

TinyAIStatus AddErrorContext(TinyAIStatus code, const char* format, ...) {
  LastError& last = ThreadLastError();
  char previous[kMessageCapacity];
  std::memcpy(previous, last.message, kMessageCapacity);
  va_list args;
  va_start(args, format);
  int n = tinyai::VFormat(last.message, kMessageCapacity, format, args);
  va_end(args);
  if (n < 0) n = 0;
  size_t used = static_cast<size_t>(n) < kMessageCapacity ? static_cast<size_t>(n) : kMessageCapacity - 1;
  tinyai::Format(last.message + used, kMessageCapacity - used, "%s", previous);
  last.code = code;
  return code;
}

}  // namespace tinyai

extern "C" {

const char* tinyaiStatusString(TinyAIStatus status) {
  switch (status) {
    case TINYAI_OK: return "TINYAI_OK";
    case TINYAI_ERR_INVALID_ARGUMENT: return "TINYAI_ERR_INVALID_ARGUMENT";
    case TINYAI_ERR_OUT_OF_MEMORY: return "TINYAI_ERR_OUT_OF_MEMORY";
    case TINYAI_ERR_RESOURCE_EXHAUSTED: return "TINYAI_ERR_RESOURCE_EXHAUSTED";
    case TINYAI_ERR_FILE_NOT_FOUND: return "TINYAI_ERR_FILE_NOT_FOUND";
    case TINYAI_ERR_IO: return "TINYAI_ERR_IO";
    case TINYAI_ERR_BAD_MAGIC: return "TINYAI_ERR_BAD_MAGIC";
    case TINYAI_ERR_UNSUPPORTED_VERSION: return "TINYAI_ERR_UNSUPPORTED_VERSION";
    case TINYAI_ERR_TRUNCATED: return "TINYAI_ERR_TRUNCATED";
    case TINYAI_ERR_OUT_OF_BOUNDS: return "TINYAI_ERR_OUT_OF_BOUNDS";
    case TINYAI_ERR_OVERFLOW: return "TINYAI_ERR_OVERFLOW";
    case TINYAI_ERR_CHECKSUM: return "TINYAI_ERR_CHECKSUM";
    case TINYAI_ERR_BAD_FORMAT: return "TINYAI_ERR_BAD_FORMAT";
    case TINYAI_ERR_BAD_TOKENIZER: return "TINYAI_ERR_BAD_TOKENIZER";
    case TINYAI_ERR_CONTEXT_OVERFLOW: return "TINYAI_ERR_CONTEXT_OVERFLOW";
    case TINYAI_ERR_UNSUPPORTED: return "TINYAI_ERR_UNSUPPORTED";
    case TINYAI_ERR_MISUSE: return "TINYAI_ERR_MISUSE";
    case TINYAI_ERR_NOT_FOUND: return "TINYAI_ERR_NOT_FOUND";
    case TINYAI_ERR_INTERNAL: return "TINYAI_ERR_INTERNAL";
    case TINYAI_ERR_GRAPH_CYCLE: return "TINYAI_ERR_GRAPH_CYCLE";
    case TINYAI_ERR_MISSING_DEPENDENCY: return "TINYAI_ERR_MISSING_DEPENDENCY";
    case TINYAI_ERR_NOT_FINITE: return "TINYAI_ERR_NOT_FINITE";
    case TINYAI_ERR_BUFFER_TOO_SMALL: return "TINYAI_ERR_BUFFER_TOO_SMALL";
    case TINYAI_ERR_MISMATCH: return "TINYAI_ERR_MISMATCH";
    case TINYAI_STOPPED: return "TINYAI_STOPPED";
  }
  return "TINYAI_ERR_UNKNOWN";
}

TinyAIStatus tinyaiGetLastError(void) { return tinyai::ThreadLastError().code; }

const char* tinyaiGetLastErrorMessage(void) { return tinyai::ThreadLastError().message; }

TinyAIStatus tinyaiGetLastErrorInfo(TinyAIErrorInfo* out) {
  // Not recorded: the failure being asked about stays the last one.
  if (out == nullptr || out->structSize < offsetof(TinyAIErrorInfo, resource) + sizeof out->resource ||
      out->structSize > sizeof(TinyAIErrorInfo)) {
    return TINYAI_ERR_INVALID_ARGUMENT;
  }
  const tinyai::LastError& last = tinyai::ThreadLastError();
  const tinyai::ErrorDetail& d = last.detail;
  TinyAIErrorInfo full;
  std::memset(&full, 0, sizeof full);
  full.status = last.code;
  full.resource = d.resource;
  full.stage = d.stage;
  full.bytesNeeded = d.needed;
  full.bytesLimit = d.limit;
  full.layer = d.layer;
  static_assert(sizeof full.tensor == sizeof d.tensor, "the tensor's name fits whole");
  std::memcpy(full.tensor, d.tensor, sizeof full.tensor);
  full.remedy = d.remedy;
  full.remedyValue = d.remedy_value;
  full.remedy2 = d.remedy2;
  full.remedy2Value = d.remedy2_value;
  static_assert(sizeof full.message == tinyai::kMessageCapacity, "the message fits whole");
  std::memcpy(full.message, last.message, sizeof full.message);
  const uint32_t size = out->structSize;
  full.structSize = size;
  std::memcpy(static_cast<void*>(out), &full, size < sizeof full ? size : sizeof full);
  return TINYAI_OK;
}

void tinyaiClearLastError(void) {
  tinyai::ThreadLastError().code = TINYAI_OK;
  tinyai::ThreadLastError().message[0] = '\0';
  tinyai::ThreadLastError().detail = tinyai::ErrorDetail();
}

}  // extern "C"
