// How close one model's next-token distributions are to a reference's
// (tinyai-eval, and the tests that pin each stored form's quality): both
// models read the same token stream, sampled from the reference at
// temperature 1 (teacher forcing), and at every position the KL divergence
// KL(reference || model) of the two softmax distributions and whether their
// top-1 tokens agree are recorded.
#ifndef TINYAI_TOOLS_EVAL_COMPARE_H_
#define TINYAI_TOOLS_EVAL_COMPARE_H_

#include <cstdint>
#include <functional>

#include "tinyai/llm.h"

namespace tinyai_tools {

struct CompareOptions {
  int64_t tokens = 2048;    // positions compared in all
  uint64_t seed = 1;        // the sampler of the token stream
  int32_t sequence = 256;   // positions per sequence (BOS first), at most the context
};

struct CompareResult {
  int64_t positions = 0;
  double mean_kld = 0.0, p99_kld = 0.0, max_kld = 0.0;
  double top1 = 0.0;  // fraction of positions whose argmax agrees
};

// Compares model against ref; progress(done, total) is called after each
// position when set. Throws RuntimeError (tools/common/cli.h): the C API's
// first failing status, or TINYAI_ERR_INVALID_ARGUMENT naming both sizes when
// the vocabularies differ.
CompareResult CompareModels(TinyAILLM* ref, TinyAILLM* model, const CompareOptions& options,
                            const std::function<void(int64_t, int64_t)>& progress = nullptr);

}  // namespace tinyai_tools

#endif  // TINYAI_TOOLS_EVAL_COMPARE_H_
