// GGUF, ggml's model format (versions 2 and 3; ggml's docs/gguf.md), as the
// core reads it: the value and tensor types and a parser of the header (the
// keys and the tensor directory) that keeps views into the bytes. The
// runtime opens a GGUF file in place from it (format/gguf_index.h); the
// offline importer (import/gguf.h) shares the types.
//
//   magic "GGUF", uint32 version, uint64 tensor_count, uint64 kv_count
//   kv_count times: string key, uint32 value type, value
//   tensor_count times: string name, uint32 n_dims, uint64 dims[n_dims]
//     (dims[0] the row length), uint32 ggml type, uint64 offset (from the
//     start of the data section, a multiple of the alignment)
//   padding to general.alignment (default 32), then the data section
// A string is a uint64 length and that many bytes (no terminator); an array
// a uint32 element type, a uint64 count and the elements. Little-endian.
#ifndef TINYAI_FORMAT_GGUF_FORMAT_H_
#define TINYAI_FORMAT_GGUF_FORMAT_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/span.h"
#include "tinyai/status.h"

namespace tinyai {
namespace gguf {

// Metadata value types.
enum ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// ggml tensor types TinyAI reads (the others are known by name only).
enum GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kIQ4_NL = 20,
  kBF16 = 30,
};

// A ggml type's name ("Q4_K"), or nullptr for a number ggml does not define.
const char* TypeName(uint32_t type);
// Elements per block and bytes per block of a ggml type; false for a type
// whose sizes this parser does not know (its tensors are then refused).
bool TypeSize(uint32_t type, uint64_t* block, uint64_t* bytes);
// A value type's name ("uint32"), "unknown" past the last.
const char* ValueTypeName(uint32_t type);
// Bytes of a scalar value type (strings and arrays: 0).
uint64_t ScalarBytes(uint32_t type);
bool IsInteger(uint32_t type);
// An integer value of type `type` at p as int64 (a uint64 above INT64_MAX,
// or a type that is no integer: false).
bool ReadInteger(const uint8_t* p, uint32_t type, int64_t* out);

// One key of a header, its value in place.
struct KeyView {
  StringView key;
  uint32_t type = 0;       // ValueType
  uint32_t elem_type = 0;  // for kArray: the elements' type (never kArray)
  uint64_t count = 0;      // for kArray: the number of elements
  const uint8_t* value = nullptr;  // a scalar; a string's uint64 length; an array's first element
};

struct TensorView {
  StringView name;
  uint32_t n_dims = 0;
  uint64_t dims[4] = {1, 1, 1, 1};  // dims[0]: elements a row
  uint32_t type = 0;                // GgmlType
  uint64_t offset = 0;              // in the file (the data section's start + the stored offset)
  uint64_t bytes = 0;
  uint64_t rows() const { return dims[1] * dims[2] * dims[3]; }
};

// A GGUF header parsed from its first bytes. Nothing in it is trusted: every
// length, count and offset is checked, with overflow-checked arithmetic,
// against the bytes given and the file's size.
struct HeaderView {
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;  // the data section's start
  Array<KeyView> keys;
  Array<TensorView> tensors;
  // When Parse needed more of the file than it was given: how many bytes
  // from the start to give it next time (TINYAI_ERR_TRUNCATED meanwhile).
  uint64_t wanted = 0;

  const KeyView* Find(const char* key) const;
  const TensorView* FindTensor(const char* name) const;
};

// Parses the header at head (head_size bytes: the file's first bytes, or
// all of it) of a file of file_size bytes; source names it in messages.
// Errors: TINYAI_ERR_BAD_MAGIC (not GGUF), TINYAI_ERR_UNSUPPORTED_VERSION
// (a version other than 2 or 3, a big-endian file included),
// TINYAI_ERR_TRUNCATED (a count, string, array or tensor past the end of
// the file; or, with out->wanted set, past head_size only),
// TINYAI_ERR_OVERFLOW (sizes that overflow 64 bits),
// TINYAI_ERR_OUT_OF_BOUNDS (a tensor outside the data section),
// TINYAI_ERR_BAD_FORMAT (an unknown value type, a nested array, a duplicate
// key or tensor name, an empty name, a bad alignment, a tensor of 0 or more
// than 4 dimensions, a dimension of 0, a row not a whole number of blocks,
// an unaligned or overlapping tensor), TINYAI_ERR_UNSUPPORTED (a ggml type
// whose sizes are unknown), each naming the field.
TinyAIStatus ParseHeader(const uint8_t* head, uint64_t head_size, uint64_t file_size, const char* source,
                         HeaderView* out);

}  // namespace gguf
}  // namespace tinyai

#endif  // TINYAI_FORMAT_GGUF_FORMAT_H_
