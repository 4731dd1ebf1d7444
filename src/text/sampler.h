// Next-token sampling as in llama2.c: greedy arg-max at temperature 0,
// otherwise softmax(logits / temperature) sampled whole or by nucleus (top-p),
// from a xorshift64* random stream so a seed reproduces the text.
#ifndef TINYAI_TEXT_SAMPLER_H_
#define TINYAI_TEXT_SAMPLER_H_

#include <cstddef>
#include <cstdint>

#include "common/array.h"
#include "common/finite.h"
#include "tinyai/status.h"

namespace tinyai {

struct ProbIndex {
  float prob;
  int32_t index;
};

// How a token is drawn (TinyAISamplerConfig in <tinyai/llm.h>): greedy at
// temperature 0; otherwise softmax(logits / temperature), then the tokens
// that pass top-k, min-p and top-p, renormalized. Each filter is off at its
// default.
struct SampleRule {
  float temperature = 0.0f;
  float top_p = 1.0f;    // (0, 1]; >= 1 or <= 0: off
  int32_t top_k = 0;     // 0: off
  float min_p = 0.0f;    // [0, 1]; 0: off
};

// llama.cpp's repetition penalty over the tokens before (each distinct token
// once): a positive logit divided by penalty, another multiplied by it.
// scratch holds count ints (the tokens are sorted there).
void ApplyRepeatPenalty(float* logits, size_t vocab, const int32_t* tokens, size_t count, float penalty,
                        int32_t* scratch);

class Sampler {
 public:
  // Allocates the scratch for a vocabulary of vocabSize tokens.
  TinyAIStatus Init(size_t vocabSize);

  // Picks a token from logits (vocabSize floats; modified in place).
  // temperature >= 0, topP in (0, 1] (>= 1 or <= 0 means off); *rng is the
  // random state (never 0; a 0 state is replaced by a fixed constant).
  // TINYAI_ERR_INVALID_ARGUMENT for a negative or non-finite temperature;
  // TINYAI_ERR_NOT_FINITE for a NaN or +inf logit, or when every logit is
  // -inf (a -inf logit alone rules its token out). A temperature so small
  // that logits overflow samples the largest logit.
  TinyAIStatus Sample(float* logits, float temperature, float topP, uint64_t* rng,
                      int32_t* token);
  // The same with top-k and min-p (rule.top_k 0 and rule.min_p 0: exactly
  // the call above). TINYAI_ERR_INVALID_ARGUMENT for a negative top-k or a
  // min-p outside [0, 1].
  TinyAIStatus Sample(float* logits, const SampleRule& rule, uint64_t* rng, int32_t* token);

  static int32_t Argmax(const float* logits, size_t n);
  static uint32_t RandomU32(uint64_t* state);
  static float RandomF32(uint64_t* state);  // in [0, 1)

 private:
  Array<ProbIndex> scratch_;
};

}  // namespace tinyai

#endif  // TINYAI_TEXT_SAMPLER_H_
