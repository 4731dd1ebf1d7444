// How close one model's next-token distributions are to a reference's
// (tinyai-eval, and the tests that pin each stored form's quality): both
// models read the same token stream, sampled from the reference at
// temperature 1 (teacher forcing), and at every position the KL divergence
// KL(reference || model) of the two softmax distributions and whether their
// top-1 tokens agree are recorded. Also the texts the tools make up as the
// model starts a text (tinyai-bench's prompt).
#ifndef TINYAI_TOOLS_EVAL_COMPARE_H_
#define TINYAI_TOOLS_EVAL_COMPARE_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "tinyai/llm.h"
#include "tools/common/cli.h"

namespace tinyai_tools {

// Whether llm's model starts a text with BOS (tokenizer.add_bos, which
// generation and calibration follow), read through the C API:
// tinyaiLLMTokenize, asked for the special tokens, puts BOS first when the
// model adds it and EOS last when the model adds that.
inline bool StartsWithBos(const TinyAILLM* llm) {
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  Check(tinyaiGetLLMModelInfo(llm, &info));
  int32_t special[2] = {-1, -1};
  int32_t n = 0;
  Check(tinyaiLLMTokenize(llm, "", 1, special, 2, &n));  // the empty text: its special tokens alone
  if (n == 0 || special[0] != info.bosId) return false;
  if (n == 2 || info.bosId != info.eosId) return true;
  // One token that is both BOS and EOS: before a text or after it?
  int32_t with[8], without[8], n_with = 0, n_without = 0;
  Check(tinyaiLLMTokenize(llm, "a", 1, with, 8, &n_with));
  Check(tinyaiLLMTokenize(llm, "a", 0, without, 8, &n_without));
  return n_without > 0 && n_with > n_without && with[0] == info.bosId && with[1] == without[0];
}

// The token of info's vocabulary other than BOS that the random value draw
// picks (uniformly, but for draw's modulo bias): how a made-up text starts
// when the model adds no BOS (there is nothing to sample its first token
// from).
inline int32_t FirstTokenWithoutBos(const TinyAIModelInfo& info, uint64_t draw) {
  if (info.vocabSize < 2) return 0;
  const int32_t t = static_cast<int32_t>(draw % static_cast<uint64_t>(info.vocabSize - 1));
  return t < info.bosId ? t : t + 1;
}

// n tokens of a made-up text as llm's model starts one (tinyai-bench's
// prompt): BOS first when the model adds it, then tokens drawn uniformly
// from the vocabulary by a linear congruential generator from seed (*seed
// gets its state after them); without BOS the first token is the first
// drawn.
inline std::vector<int32_t> RandomText(const TinyAILLM* llm, int32_t n, uint64_t* seed) {
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  Check(tinyaiGetLLMModelInfo(llm, &info));
  std::vector<int32_t> tokens;
  if (n <= 0) return tokens;
  tokens.reserve(static_cast<size_t>(n));
  if (StartsWithBos(llm)) tokens.push_back(info.bosId);
  while (static_cast<int32_t>(tokens.size()) < n) {
    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    tokens.push_back(static_cast<int32_t>((*seed >> 33) % static_cast<uint64_t>(info.vocabSize)));
  }
  return tokens;
}

struct CompareOptions {
  int64_t tokens = 2048;    // positions compared in all
  uint64_t seed = 1;        // the sampler of the token stream
  int32_t sequence = 256;   // positions per sequence, at most the context: from BOS when the models add
                            // it, else from a token drawn uniformly (FirstTokenWithoutBos)
};

struct CompareResult {
  int64_t positions = 0;
  double mean_kld = 0.0, p99_kld = 0.0, max_kld = 0.0;
  double top1 = 0.0;  // fraction of positions whose argmax agrees
};

// Compares model against ref; progress(done, total) is called after each
// position when set. Throws RuntimeError (tools/common/cli.h): the C API's
// first failing status, or TINYAI_ERR_INVALID_ARGUMENT naming both sizes when
// the vocabularies differ, or both rules when one model starts a text with
// BOS and the other does not (tokenizer.add_bos).
CompareResult CompareModels(TinyAILLM* ref, TinyAILLM* model, const CompareOptions& options,
                            const std::function<void(int64_t, int64_t)>& progress = nullptr);

}  // namespace tinyai_tools

#endif  // TINYAI_TOOLS_EVAL_COMPARE_H_
