// Running a converted model in the importers' tests: an LLM over a .tmai,
// its logits after each token of a text, its greedy text, and bit-for-bit
// comparison of logits.
#ifndef TINYAI_TESTS_IMPORT_RUN_MODEL_H_
#define TINYAI_TESTS_IMPORT_RUN_MODEL_H_

#include <string>
#include <vector>

#include "import/llama_source.h"
#include "tinyai/llm.h"
#include "tinyai/utils/mmap_loader.h"

namespace tinyai {
namespace testing {

// A model and an LLM over it (default configs), closed and destroyed at the end.
struct OpenedModel {
  TinyAIMappedModel* model = nullptr;
  TinyAILLM* llm = nullptr;
  OpenedModel() = default;
  OpenedModel(const OpenedModel&) = delete;
  OpenedModel& operator=(const OpenedModel&) = delete;
  ~OpenedModel();
  bool Open(const std::string& path);
  int32_t vocab() const;
};

// The logits after each token of text (BOS first), one token per call,
// concatenated; empty (with a test failure) when the model does not run.
std::vector<float> LogitsOf(const std::string& path, const char* text);

// A GGUF file read in place (tinyaiOpenMappedModel on the .gguf) against
// its conversion: the same token ids for text and the same logits after
// each token, bit for bit unless tolerance > 0 (Qwen2: the rotary pairs run
// in another order, so the attention sums do).
void ExpectSameInPlace(const std::string& gguf, const std::string& converted, const char* text,
                       double tolerance = 0.0);
// After a conversion succeeded: the GGUF read in place runs as its
// conversion does (ExpectSameInPlace), unless it holds tensors a conversion
// widens (BF16, F16 norms), which in place are refused naming the command.
void ExpectInPlaceAgrees(const std::string& gguf, const std::string& converted, double tolerance = 0.0);
// The first failure of opening path and creating a runner on it, or
// TINYAI_OK.
TinyAIStatus OpenStatus(const std::string& path);

// The greedy text after a prompt.
std::string Greedy(const std::string& path, const char* prompt, int32_t steps);

// The ids tinyaiLLMTokenize gives text (add_special: its addBos).
std::vector<int32_t> TokensOf(const std::string& path, const char* text, bool add_special);

// The logits after each of tokens (fed one at a time from position 0),
// computed in double precision from the source's tensors as the LLaMA
// architecture defines them: llama2.c's forward, with RoPE over each head's
// interleaved pairs (2i, 2i + 1) at the angle position * theta^(-2i/head)
// / rope_linear_factor (llama.cpp's linear scaling, rope_freq_scale = 1 /
// factor), and Qwen2's biases on q, k and v when params.qkv_bias.
// Independent of the runtime: the oracle for what a model's metadata means.
std::vector<double> ReferenceLogits(const LlamaSource& source, const std::vector<int32_t>& tokens);

// The largest |a[i] - b[i]| (infinity when the sizes differ or are 0).
double MaxDifference(const std::vector<float>& a, const std::vector<double>& b);

// True when a and b are the same non-empty arrays, bit for bit.
bool SameBits(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace testing
}  // namespace tinyai

#endif  // TINYAI_TESTS_IMPORT_RUN_MODEL_H_
