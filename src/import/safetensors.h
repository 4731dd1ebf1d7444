// Parser of safetensors files (Hugging Face's format: huggingface/safetensors,
// docs and the reference Rust reader), for tinyai-convert --from
// safetensors (import/hf_import.h). Offline code: it uses the standard
// library and nlohmann::json (import/json.h).
//
//   u64 N (little-endian), N bytes of JSON: an object whose members are
//     "__metadata__": {string: string, ...}            (optional)
//     NAME: {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}
//   then the data: tensor NAME at [8 + N + begin, 8 + N + end), row-major.
//
// Nothing in the file is trusted. As the reference reader does, TinyAI
// refuses a header over 100 MB, a header that is not a JSON object of such
// entries, offsets outside the data, tensors that overlap or leave gaps
// (sorted by offset they must tile the data exactly, with no trailing
// bytes), and a size other than the shape's element count times the
// dtype's size; every product is overflow-checked.
#ifndef TINYAI_IMPORT_SAFETENSORS_H_
#define TINYAI_IMPORT_SAFETENSORS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tinyai/status.h"

namespace tinyai {
namespace safetensors {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the reference reader's limit

struct Tensor {
  std::string name;
  std::string dtype;             // "F32", "F16", "BF16", "I8", ... as the file names it
  std::vector<uint64_t> shape;   // row-major; the last dimension is the row length
  uint64_t offset = 0;           // in the file
  uint64_t bytes = 0;
  uint64_t elements() const;
};

struct File {
  std::string source;
  uint64_t size = 0;
  uint64_t data_offset = 0;  // 8 + the header's length
  std::vector<Tensor> tensors;  // by name
  std::vector<std::pair<std::string, std::string>> metadata;

  const Tensor* Find(const std::string& name) const;
};

// Bytes of one element of a safetensors dtype name, 0 for a name the format
// does not define.
uint64_t DTypeBytes(const std::string& dtype);

// Parses the header of a file of `size` bytes whose first `available` bytes
// are at data (the whole file mapped, or just its first 8 + N bytes).
// Errors: TINYAI_ERR_BAD_MAGIC (a ninth byte that is not the '{' a header
// starts with: not a safetensors file), TINYAI_ERR_TRUNCATED (shorter than 8
// bytes or than its header),
// TINYAI_ERR_UNSUPPORTED (a header over kMaxHeaderBytes), TINYAI_ERR_BAD_FORMAT
// (not JSON, not an object, an entry without dtype, shape or data_offsets or
// with values of the wrong kind, an unknown dtype, a repeated name, a size
// that disagrees with the shape, tensors that overlap, leave a gap or
// trailing bytes), TINYAI_ERR_OUT_OF_BOUNDS (offsets past the data),
// TINYAI_ERR_OVERFLOW (a shape or size over 64 bits); each naming the file
// and the tensor or field.
TinyAIStatus Parse(const uint8_t* data, uint64_t available, uint64_t size, const std::string& source, File* out);

}  // namespace safetensors
}  // namespace tinyai

#endif  // TINYAI_IMPORT_SAFETENSORS_H_
