// Parser of GGUF files (ggml's model format, versions 2 and 3; the
// specification is ggml's docs/gguf.md), for tinyai-convert --from gguf
// (import/gguf_import.h). Offline code: it uses the standard library.
//
//   magic "GGUF", uint32 version, uint64 tensor_count, uint64 kv_count
//   kv_count times: string key, uint32 value type, value
//   tensor_count times: string name, uint32 n_dims, uint64 dims[n_dims]
//     (dims[0] the row length), uint32 ggml type, uint64 offset (from the
//     start of the data section, a multiple of the alignment)
//   padding to general.alignment (default 32), then the data section
// A string is a uint64 length and that many bytes (no terminator); an array
// a uint32 element type, a uint64 count and the elements. Little-endian.
//
// Nothing in the file is trusted: every length, count and offset is checked
// against the file's size with overflow-checked arithmetic before it is
// used, and the parser never reads outside [data, data + size).
#ifndef TINYAI_IMPORT_GGUF_H_
#define TINYAI_IMPORT_GGUF_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "format/gguf_format.h"  // the types, TypeName, TypeSize
#include "tinyai/status.h"

namespace tinyai {
namespace gguf {

struct Value {
  uint32_t type = 0;       // ValueType
  uint32_t elem_type = 0;  // for kArray: the elements' type (never kArray)
  uint64_t count = 0;      // for kArray: the number of elements
  uint64_t offset = 0;     // where the value (for kArray: the first element) starts in the file
};

struct KeyValue {
  std::string key;
  Value value;
};

struct TensorInfo {
  std::string name;
  uint32_t n_dims = 0;
  uint64_t dims[4] = {1, 1, 1, 1};  // dims[0]: elements a row
  uint32_t type = 0;                // GgmlType
  uint64_t offset = 0;              // in the file (data section start + the stored offset)
  uint64_t bytes = 0;

  uint64_t rows() const { return dims[1] * dims[2] * dims[3]; }
};

struct File {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  std::string source;  // the path, for messages
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;
  std::vector<KeyValue> kvs;
  std::vector<TensorInfo> tensors;

  // nullptr when absent.
  const KeyValue* Find(const std::string& key) const;
  const TensorInfo* FindTensor(const std::string& name) const;

  // Typed reads of a key. *found (when given) says whether the key exists;
  // without `found` a missing key is TINYAI_ERR_NOT_FOUND. A value of another
  // type is TINYAI_ERR_BAD_FORMAT naming the key and both types. Integers
  // accept every integer type whose value fits; GetInt any integer as int64.
  TinyAIStatus GetUint(const std::string& key, uint64_t max, uint64_t* out, bool* found = nullptr) const;
  TinyAIStatus GetInt(const std::string& key, int64_t* out, bool* found = nullptr) const;
  TinyAIStatus GetFloat(const std::string& key, float* out, bool* found = nullptr) const;
  TinyAIStatus GetString(const std::string& key, std::string* out, bool* found = nullptr) const;
  // An array of strings, of floats (float32) or of integers (any integer
  // type, as int64), of at most max_count elements (more:
  // TINYAI_ERR_UNSUPPORTED before anything is allocated for them).
  TinyAIStatus GetStrings(const std::string& key, uint64_t max_count, std::vector<std::string>* out,
                          bool* found = nullptr) const;
  TinyAIStatus GetFloats(const std::string& key, uint64_t max_count, std::vector<float>* out, bool* found = nullptr) const;
  TinyAIStatus GetInts(const std::string& key, uint64_t max_count, std::vector<int64_t>* out, bool* found = nullptr) const;
};

// Parses size bytes at data (a mapped file; source names it in messages).
// Errors: TINYAI_ERR_BAD_MAGIC (not GGUF), TINYAI_ERR_UNSUPPORTED_VERSION
// (a version other than 2 or 3, a big-endian file included),
// TINYAI_ERR_TRUNCATED (a count, string, array or tensor past the end),
// TINYAI_ERR_OVERFLOW (sizes that overflow 64 bits),
// TINYAI_ERR_OUT_OF_BOUNDS (a tensor outside the data section),
// TINYAI_ERR_BAD_FORMAT (an unknown value type, a nested array, a duplicate
// key or tensor name, an empty name, a bad alignment, a tensor of 0 or more
// than 4 dimensions, a dimension of 0, a row not a whole number of blocks,
// an unaligned or overlapping tensor), TINYAI_ERR_UNSUPPORTED (a ggml type
// whose sizes are unknown), each naming the field.
TinyAIStatus Parse(const uint8_t* data, uint64_t size, const std::string& source, File* out);

}  // namespace gguf
}  // namespace tinyai

#endif  // TINYAI_IMPORT_GGUF_H_
