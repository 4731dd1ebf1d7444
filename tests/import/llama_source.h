// A LLaMA model for the tests' writers of other formats (GGUF, safetensors,
// llama2.c): its hyper-parameters and tokenizer, and its tensors by their
// .tmai names, each read when asked for (so a writer streams a model of any
// size a tensor at a time). Read from a llama2.c checkpoint and tokenizer as
// llama2.c lays them out, or from a .tmai of any dtype. Test code: failures
// are said in *error.
#ifndef TINYAI_TESTS_IMPORT_LLAMA_SOURCE_H_
#define TINYAI_TESTS_IMPORT_LLAMA_SOURCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "format/llama_params.h"

namespace tinyai {
namespace testing {

struct LlamaSource {
  LlamaHyperParams params;
  std::string name;
  // llama2.c's spelling: a space where SentencePiece writes U+2581; byte
  // pieces "<0x00>".."<0xFF>" at ids 3..258.
  std::vector<std::string> pieces;
  std::vector<float> scores;
  int32_t bos = 1, eos = 2;
  // Per-frequency rope factors (llama.rope_freq_factors; empty: none).
  std::vector<float> rope_freq_factors;

  // A tensor by its .tmai name ("token_embd", "blk.0.attn_q", ...,
  // "output_norm", "output") as f32 values, row-major [rows][cols] as llama2.c
  // and the .tmai store them (a row: one output's weights over the inputs);
  // empty when there is none.
  std::function<std::vector<float>(const std::string& name)> tensor;
  // The tensor as stored, when the source stores it in another dtype than
  // f32 (a .tmai's f16 or grouped tensors): false for f32 or none.
  std::function<bool(const std::string& name, int32_t* dtype, std::vector<uint8_t>* bytes)> stored;
  std::shared_ptr<void> keep;  // what the functions read
};

// A llama2.c checkpoint (version-0 header; a negative vocabulary size: a
// separate classifier) and its tokenizer file.
bool LoadLlama2c(const std::string& checkpoint, const std::string& tokenizer, LlamaSource* out, std::string* error);

// A .tmai LLaMA model (its tensors dequantized by the reference kernels).
bool LoadTmai(const std::string& path, LlamaSource* out, std::string* error);

// The .tmai names of a LLaMA model's tensors in llama2.c's order (each kind
// for every layer, then the next kind), and their [rows, cols] (norms: [1, dim]).
struct TensorName {
  std::string name;
  uint64_t rows, cols;
  bool matrix;
};
std::vector<TensorName> LlamaTensors(const LlamaHyperParams& p);

// The source as a llama2.c checkpoint (with the legacy RoPE tables) and
// tokenizer file.
bool WriteLlama2c(const LlamaSource& source, const std::string& checkpoint, const std::string& tokenizer,
                  std::string* error);

// The token types GGUF and SentencePiece give a piece (1 normal, 2 unknown,
// 3 control, 6 byte).
int32_t TokenType(const LlamaSource& source, size_t id);

// The pieces in SentencePiece's spelling: U+2581 for a space, and BOS and
// EOS as "<s>" and "</s>" where llama2.c's export spelled them "\n<s>\n".
std::vector<std::string> SentencePiecePieces(const LlamaSource& source);

}  // namespace testing
}  // namespace tinyai

#endif  // TINYAI_TESTS_IMPORT_LLAMA_SOURCE_H_
