// The C API's structSize convention, in one place (docs/c-api.md, "Rules every
// public function follows"): every struct a caller passes in or gets filled
// starts with uint32_t structSize, the size of the struct the caller was
// compiled with. Fields are only ever appended, and an appended field never
// fits in the previous version's trailing padding (each version is larger),
// so a caller's older struct is this one cut at its structSize:
//
//   - an input struct (a config) is read up to its structSize; the fields it
//     lacks keep their defaults;
//   - an output struct is written up to its structSize and no further; its
//     structSize stays what the caller set;
//   - a structSize that does not reach the end of the struct's first field
//     after structSize, or exceeds the struct this library knows (a caller
//     built against a newer TinyAI), is TINYAI_ERR_INVALID_ARGUMENT.
//
//   TinyAILLMConfig cfg = DefaultLLMConfig();
//   TINYAI_RETURN_IF_ERROR(ReadVersioned(config, &cfg, TINYAI_STRUCT_MIN(TinyAILLMConfig, contextLength),
//                                        "tinyaiCreateLLM: config"));
//
//   TINYAI_RETURN_IF_ERROR(CheckOutputSize(out, TINYAI_STRUCT_MIN(TinyAIModelInfo, dim), "..."));
//   TinyAIModelInfo info = ...;   // filled whole
//   WriteVersioned(info, out);
#ifndef TINYAI_COMMON_STRUCT_SIZE_H_
#define TINYAI_COMMON_STRUCT_SIZE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/status.h"
#include "tinyai/status.h"

// The least structSize of T: the end of `first`, its first field after structSize.
#define TINYAI_STRUCT_MIN(T, first) (offsetof(T, first) + sizeof(static_cast<T*>(nullptr)->first))

namespace tinyai {

// TINYAI_ERR_INVALID_ARGUMENT naming what (e.g. "tinyaiCreateLLM: config")
// unless min_size <= size <= full_size.
inline TinyAIStatus CheckStructSize(uint32_t size, size_t min_size, size_t full_size, const char* what) {
  if (size >= min_size && size <= full_size) return TINYAI_OK;
  return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                  "%s: structSize is %u; this library takes %zu (its own) down to %zu (the first field), so set it "
                  "to sizeof the struct (its tinyaiCreateDefault function does)", what, size, full_size, min_size);
}

// Reads the caller's *in over *out (which holds the defaults): its first
// in->structSize bytes; out->structSize becomes sizeof(T). A null in leaves
// the defaults.
template <class T>
TinyAIStatus ReadVersioned(const T* in, T* out, size_t min_size, const char* what) {
  if (!in) return TINYAI_OK;
  TINYAI_RETURN_IF_ERROR(CheckStructSize(in->structSize, min_size, sizeof(T), what));
  std::memcpy(static_cast<void*>(out), in, in->structSize);
  out->structSize = sizeof(T);
  return TINYAI_OK;
}

// Checks an output struct's structSize before it is filled.
template <class T>
TinyAIStatus CheckOutputSize(const T* out, size_t min_size, const char* what) {
  return CheckStructSize(out->structSize, min_size, sizeof(T), what);
}

// Copies the first out->structSize bytes of full (filled whole) to *out,
// which CheckOutputSize accepted; out->structSize keeps the caller's value.
template <class T>
void WriteVersioned(const T& full, T* out) {
  const uint32_t size = out->structSize;
  std::memcpy(static_cast<void*>(out), &full, size < sizeof(T) ? size : sizeof(T));
  out->structSize = size;
}

}  // namespace tinyai

#endif  // TINYAI_COMMON_STRUCT_SIZE_H_
