// A small GGUF writer for the tests, written from the published
// specification (ggml's docs/gguf.md: version 3, little-endian, metadata
// then tensor infos then the data section at general.alignment), not from
// TinyAI's reader; and a LLaMA model (import/llama_source.h) written as GGUF
// the way llama.cpp's converters lay one out (GGUF names, dims[0] the row
// length, SentencePiece pieces with U+2581 for a space, token types).
#ifndef TINYAI_TESTS_IMPORT_GGUF_WRITER_H_
#define TINYAI_TESTS_IMPORT_GGUF_WRITER_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "import/llama_source.h"

namespace tinyai {
namespace testing {

// ggml types the writer encodes.
constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ8_0 = 8, kGgmlIQ4_NL = 20, kGgmlBF16 = 30;

class GgufWriter {
 public:
  void AddUint32(const std::string& key, uint32_t v);
  void AddInt32(const std::string& key, int32_t v);
  void AddFloat32(const std::string& key, float v);
  void AddString(const std::string& key, const std::string& v);
  void AddStrings(const std::string& key, const std::vector<std::string>& v);
  void AddFloats(const std::string& key, const std::vector<float>& v);
  void AddInt32s(const std::string& key, const std::vector<int32_t>& v);
  // Drops every key starting with prefix (to write another vocabulary).
  void RemoveKeys(const std::string& prefix);
  // Any key and value, already encoded (type, then the value's bytes).
  void AddRaw(const std::string& key, uint32_t type, const std::vector<uint8_t>& value);
  // dims[0] is the row length; data is the stored bytes of ggml type `type`.
  void AddTensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type,
                 const std::vector<uint8_t>& data);
  // The same, its `bytes` bytes made when the file is written.
  void AddTensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type, uint64_t bytes,
                 std::function<std::vector<uint8_t>()> data);
  // Replaces the tensor called name (false when there is none).
  bool ReplaceTensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type,
                     const std::vector<uint8_t>& data);
  // Stores tensor i's offset as `offset` instead of the next aligned one
  // (a malformed file: overlapping, unaligned or outside the data).
  void OverrideOffset(size_t i, uint64_t offset) { overrides_.emplace_back(i, offset); }
  // Reverses the order the tensors' data is written in (a file whose
  // layers' tensors are not where a converter puts them: output first,
  // blocks backwards).
  void ReverseTensors() { std::reverse(tensors_.begin(), tensors_.end()); }
  // The file: version 3 unless given, data aligned to `alignment` (also
  // written as general.alignment when it is not 32).
  std::vector<uint8_t> Finish(uint32_t version = 3, uint64_t alignment = 32) const;
  // The same, streamed to a file a tensor at a time.
  bool WriteFile(const std::string& path, uint32_t version = 3, uint64_t alignment = 32) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    uint64_t bytes;
    std::function<std::vector<uint8_t>()> data;
  };
  std::vector<uint8_t> Header(uint32_t version, uint64_t alignment, std::vector<uint64_t>* offsets) const;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> kvs_;  // key, type + value bytes
  std::vector<Tensor> tensors_;
  std::vector<std::pair<size_t, uint64_t>> overrides_;
};

// ggml block encodings, as llama.cpp's reference quantizers compute them
// (ggml-quants.c quantize_row_q8_0_ref / q4_0_ref; max-abs scales): rows
// of `cols` values, a multiple of 32.
std::vector<uint8_t> EncodeQ8_0(const float* x, size_t rows, size_t cols);
std::vector<uint8_t> EncodeQ4_0(const float* x, size_t rows, size_t cols);
// f32 to IEEE half, rounded to nearest even (numpy's astype(float16)).
std::vector<uint8_t> EncodeF16(const float* x, size_t n);
std::vector<uint8_t> EncodeF32(const float* x, size_t n);
// f32 to bfloat16, rounded to nearest even (torch's to(bfloat16)).
std::vector<uint8_t> EncodeBF16(const float* x, size_t n);
// A block's values as the specification defines them (for checks).
float DecodeQ8_0(const uint8_t* block, int j);
float DecodeQ4_0(const uint8_t* block, int j);

// A byte-level BPE vocabulary (GGUF's tokenizer.ggml.model "gpt2") of
// `size` tokens, as llama.cpp's converter writes one: the 256 byte tokens
// in GPT-2's byte-to-unicode form (id = byte), the merges' tokens, "cat"
// (which no merge makes), five special tokens and unused padding.
struct ByteLevelVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges = {"h e", "t he", "Ġ c", "a t", "Ġc at", "Ġ t", "Ġt he", "i n", "Ġ in"};
  int32_t bos = 0, eos = 0, eot = 0, im_end = 0, tool = 0, im_start = 0;

  explicit ByteLevelVocab(int32_t size);
  int32_t Add(const std::string& t, int32_t type);
  int32_t Id(const std::string& t) const;
  // Replaces w's tokenizer.* keys with this vocabulary and pre-tokenizer
  // pre (none when empty).
  void Write(GgufWriter* w, const std::string& pre) const;
};

struct GgufModelOptions {
  // Each matrix's type: kGgmlF32, kGgmlF16, kGgmlBF16, kGgmlQ8_0 or kGgmlQ4_0 (a matrix
  // whose rows are not a multiple of 32 stays F32 under a block type, as
  // llama.cpp falls back); kStored copies what the source stores (f16, q8_g32
  // as Q8_0, q4_g32 as Q4_0, q4nl_g32 as IQ4_NL; f32 as F32). Norms are F32.
  uint32_t matrix_type = kGgmlF32;
  static constexpr uint32_t kStored = 0xffffffffu;
  uint32_t norm_type = kGgmlF32;  // the norms': kGgmlF32, kGgmlF16 or kGgmlBF16
  bool token_types = true;  // tokenizer.ggml.token_type
  uint32_t version = 3;
  uint64_t alignment = 32;
  // As llama.cpp's converter writes a Qwen2 model: architecture "qwen2"
  // (its keys "qwen2.*"), q and k in Hugging Face's rotary layout (each
  // head's first halves, then its second halves: NEOX), and the source's
  // attn_{q,k,v}_bias as attn_{q,k,v}.bias (params.qkv_bias). F32 and F16
  // matrices only.
  bool qwen2 = false;
};

// The source as a GGUF writer (WriteFile or Finish it). False, with *error,
// when a tensor is missing or cannot be stored as asked.
bool GgufFromSource(const LlamaSource& source, const GgufModelOptions& options, GgufWriter* out, std::string* error);

}  // namespace testing
}  // namespace tinyai

#endif  // TINYAI_TESTS_IMPORT_GGUF_WRITER_H_
