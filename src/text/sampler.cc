#include "text/sampler.h"

#include <algorithm>
#include <cmath>

#include "common/status.h"

// Bit-for-bit llama2.c's sampler (sample_argmax, softmax, sample_mult,
// sample_topp, random_u32/random_f32), with two departures where llama2.c
// has undefined behaviour:
//  - a random state of 0 (a fixed point of xorshift) is replaced by
//    kZeroStateReplacement before use;
//  - when no probability reaches the top-p cutoff (llama2.c then reads
//    probindex[-1]), or for a single-token vocabulary, the arg-max of the
//    probabilities is returned. No probability reaches the cutoff
//    (1 - topP) / (n - 1) only when topP < 1/n (the largest probability is at
//    least 1/n), and then the largest probability alone exceeds topP, so the
//    nucleus is exactly that token: the fallback is the exact top-p answer.
//    It happens easily for small vocabularies (n = 2, topP 0.1, 0.6/0.4).
// Ties in the top-p sort (llama2.c's qsort leaves their order unspecified)
// are broken by ascending token index.

namespace tinyai {
namespace {

constexpr uint64_t kZeroStateReplacement = 0x9E3779B97F4A7C15ull;

struct ProbIndexGreater {
  bool operator()(const ProbIndex& a, const ProbIndex& b) const {
    if (a.prob != b.prob) return a.prob > b.prob;
    return a.index < b.index;
  }
};

void Softmax(float* x, size_t n) {
  float maxValue = x[0];
  for (size_t i = 1; i < n; ++i) {
    if (x[i] > maxValue) maxValue = x[i];
  }
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - maxValue);
    sum += x[i];
  }
  for (size_t i = 0; i < n; ++i) x[i] /= sum;
}

int32_t SampleMult(const float* probabilities, size_t n, float coin) {
  float cdf = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    cdf += probabilities[i];
    if (coin < cdf) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(n - 1);
}

int32_t SampleTopP(const float* probabilities, size_t n, float topP, ProbIndex* probIndex,
                   float coin) {
  if (n < 2) return 0;
  // Tokens below the cutoff cannot be in the nucleus; dropping them first
  // keeps the sort short.
  const float cutoff = (1.0f - topP) / static_cast<float>(n - 1);
  size_t n0 = 0;
  for (size_t i = 0; i < n; ++i) {
    if (probabilities[i] >= cutoff) {
      probIndex[n0].index = static_cast<int32_t>(i);
      probIndex[n0].prob = probabilities[i];
      ++n0;
    }
  }
  if (n0 == 0) return Sampler::Argmax(probabilities, n);
  std::sort(probIndex, probIndex + n0, ProbIndexGreater());

  // The smallest prefix whose probabilities add up to more than topP.
  float cumulative = 0.0f;
  size_t last = n0 - 1;
  for (size_t i = 0; i < n0; ++i) {
    cumulative += probIndex[i].prob;
    if (cumulative > topP) {
      last = i;
      break;
    }
  }
  const float r = coin * cumulative;
  float cdf = 0.0f;
  for (size_t i = 0; i <= last; ++i) {
    cdf += probIndex[i].prob;
    if (r < cdf) return probIndex[i].index;
  }
  return probIndex[last].index;
}

// Top-k and min-p on probabilities p (n of them, summing to 1): a token
// stays when it is among the k largest (ties by ascending index, as the
// top-p sort breaks them) and at least min_p times the largest; the others
// become 0 and the kept ones are renormalized. The arg-max always stays.
void KeepTopKMinP(float* p, size_t n, size_t k, float min_p, ProbIndex* scratch) {
  float floor = 0.0f;
  ProbIndex kth{0.0f, -1};
  if (k < n) {
    for (size_t i = 0; i < n; ++i) scratch[i] = ProbIndex{p[i], static_cast<int32_t>(i)};
    std::nth_element(scratch, scratch + (k - 1), scratch + n, ProbIndexGreater());
    kth = scratch[k - 1];
  }
  if (min_p > 0.0f) {
    float top = 0.0f;
    for (size_t i = 0; i < n; ++i) top = p[i] > top ? p[i] : top;
    floor = min_p * top;
  }
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const bool in_k = kth.index < 0 || p[i] > kth.prob || (p[i] == kth.prob && static_cast<int32_t>(i) <= kth.index);
    if (!in_k || p[i] < floor) p[i] = 0.0f;
    sum += p[i];
  }
  for (size_t i = 0; i < n; ++i) p[i] /= sum;
}

// Draws from probabilities some of which are 0: never a token that is 0
// (rounding can leave the cumulative sum short of coin).
int32_t SampleKept(const float* p, size_t n, float coin) {
  float cdf = 0.0f;
  size_t last = 0;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] <= 0.0f) continue;
    last = i;
    cdf += p[i];
    if (coin < cdf) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(last);
}

// NaN or +inf, or no logit above -inf: there is no distribution to sample
// (a -inf logit alone is a token ruled out, as a mask does).
TinyAIStatus CheckLogits(const float* logits, size_t n) {
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    const float v = logits[i];
    if (std::isnan(v) || (std::isinf(v) && v > 0)) {
      return SetError(TINYAI_ERR_NOT_FINITE, "sampler: logit %zu of %zu is %s: no token can be sampled", i, n,
                      std::isnan(v) ? "NaN" : "+inf");
    }
    any = any || !std::isinf(v);
  }
  if (!any) return SetError(TINYAI_ERR_NOT_FINITE, "sampler: all %zu logits are -inf: no token can be sampled", n);
  return TINYAI_OK;
}

}  // namespace

TinyAIStatus Sampler::Init(size_t vocabSize) {
  scratch_ = Array<ProbIndex>();
  if (vocabSize == 0 || vocabSize > static_cast<size_t>(INT32_MAX)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "sampler: vocabulary size %zu must be in [1, 2147483647]", vocabSize);
  }
  return scratch_.Allocate(vocabSize, "sampler scratch");
}

TinyAIStatus Sampler::Sample(float* logits, float temperature, float topP, uint64_t* rng,
                             int32_t* token) {
  SampleRule rule;
  rule.temperature = temperature;
  rule.top_p = topP;
  return Sample(logits, rule, rng, token);
}

TinyAIStatus Sampler::Sample(float* logits, const SampleRule& rule, uint64_t* rng, int32_t* token) {
  const float temperature = rule.temperature, topP = rule.top_p;
  if (logits == nullptr || rng == nullptr || token == nullptr) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "sampler: NULL %s",
                    logits == nullptr ? "logits" : rng == nullptr ? "random state" : "token");
  }
  if (scratch_.size() == 0) {
    return SetError(TINYAI_ERR_MISUSE, "sampler: Sample before a successful Init");
  }
  if (!std::isfinite(temperature) || temperature < 0.0f) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT,
                    "sampler: temperature %g must be finite and >= 0",
                    static_cast<double>(temperature));
  }
  if (std::isnan(topP)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "sampler: top-p is NaN");
  }
  if (rule.top_k < 0 || !(rule.min_p >= 0.0f && rule.min_p <= 1.0f)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "sampler: top-k %d must be >= 0 and min-p %g in [0, 1]",
                    static_cast<int>(rule.top_k), static_cast<double>(rule.min_p));
  }
  const size_t n = scratch_.size();
  TINYAI_RETURN_IF_ERROR(CheckLogits(logits, n));
  if (temperature == 0.0f) {
    *token = Argmax(logits, n);
    return TINYAI_OK;
  }
  const int32_t greedy = Argmax(logits, n);
  bool overflow = false;
  for (size_t i = 0; i < n; ++i) {
    logits[i] /= temperature;
    overflow = overflow || (std::isinf(logits[i]) && logits[i] > 0);
  }
  // A temperature so small that a logit overflows: the distribution is all
  // on the largest logit (softmax would divide infinity by infinity).
  if (overflow) {
    *token = greedy;
    return TINYAI_OK;
  }
  Softmax(logits, n);
  const bool top_k = rule.top_k > 0 && static_cast<size_t>(rule.top_k) < n;
  if (top_k || rule.min_p > 0.0f) {
    KeepTopKMinP(logits, n, top_k ? static_cast<size_t>(rule.top_k) : n, rule.min_p, scratch_.data());
    const float coin = RandomF32(rng);
    *token = topP <= 0.0f || topP >= 1.0f ? SampleKept(logits, n, coin)
                                          : SampleTopP(logits, n, topP, scratch_.data(), coin);
    return TINYAI_OK;
  }
  const float coin = RandomF32(rng);
  if (topP <= 0.0f || topP >= 1.0f) {
    *token = SampleMult(logits, n, coin);
  } else {
    *token = SampleTopP(logits, n, topP, scratch_.data(), coin);
  }
  return TINYAI_OK;
}

void ApplyRepeatPenalty(float* logits, size_t vocab, const int32_t* tokens, size_t count, float penalty,
                        int32_t* scratch) {
  if (penalty == 1.0f || count == 0) return;
  std::copy(tokens, tokens + count, scratch);
  std::sort(scratch, scratch + count);
  for (size_t i = 0; i < count; ++i) {
    const int32_t t = scratch[i];
    if ((i > 0 && scratch[i - 1] == t) || t < 0 || static_cast<size_t>(t) >= vocab) continue;
    logits[t] = logits[t] > 0.0f ? logits[t] / penalty : logits[t] * penalty;
  }
}

int32_t Sampler::Argmax(const float* logits, size_t n) {
  if (logits == nullptr || n == 0) return 0;
  size_t best = 0;
  float bestValue = logits[0];
  for (size_t i = 1; i < n; ++i) {
    if (logits[i] > bestValue) {
      best = i;
      bestValue = logits[i];
    }
  }
  return static_cast<int32_t>(best);
}

uint32_t Sampler::RandomU32(uint64_t* state) {
  if (*state == 0) *state = kZeroStateReplacement;
  *state ^= *state >> 12;
  *state ^= *state << 25;
  *state ^= *state >> 27;
  return static_cast<uint32_t>((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

float Sampler::RandomF32(uint64_t* state) {
  return static_cast<float>(RandomU32(state) >> 8) / 16777216.0f;
}

}  // namespace tinyai
