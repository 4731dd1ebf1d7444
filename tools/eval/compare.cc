#include "tools/eval/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tinyai/tinyai.h"
#include "tools/common/cli.h"

namespace tinyai_tools {
namespace {

// log-softmax in double: log p_i = l_i - max - log sum exp(l - max).
void LogSoftmax(const std::vector<float>& logits, std::vector<double>* out) {
  double max = logits[0];
  for (float v : logits) max = v > max ? v : max;
  double sum = 0.0;
  for (float v : logits) sum += std::exp(v - max);
  const double log_sum = std::log(sum) + max;
  out->resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) (*out)[i] = logits[i] - log_sum;
}

size_t ArgMax(const std::vector<float>& v) { return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin()); }

}  // namespace

CompareResult CompareModels(TinyAILLM* ref, TinyAILLM* model, const CompareOptions& options,
                            const std::function<void(int64_t, int64_t)>& progress) {
  TinyAIModelInfo ri, mi;
  std::memset(&ri, 0, sizeof ri);
  std::memset(&mi, 0, sizeof mi);
  ri.structSize = mi.structSize = sizeof ri;
  Check(tinyaiGetLLMModelInfo(ref, &ri));
  Check(tinyaiGetLLMModelInfo(model, &mi));
  if (ri.vocabSize != mi.vocabSize) {
    throw RuntimeError(TINYAI_ERR_INVALID_ARGUMENT, "the reference has a vocabulary of " +
                                                        std::to_string(ri.vocabSize) + " tokens, the model " +
                                                        std::to_string(mi.vocabSize));
  }
  // Both read the same texts: they must start them alike.
  const bool bos = StartsWithBos(ref);
  if (StartsWithBos(model) != bos) {
    throw RuntimeError(TINYAI_ERR_INVALID_ARGUMENT,
                       std::string("the reference ") + (bos ? "starts" : "does not start") +
                           " a text with BOS (tokenizer.add_bos " + (bos ? "1" : "0") + ") and the model " +
                           (bos ? "does not" : "does") + "; compare models that start a text alike");
  }
  int32_t sequence = options.sequence;
  if (sequence > ri.contextLength) sequence = ri.contextLength;
  if (sequence > mi.contextLength) sequence = mi.contextLength;
  if (sequence < 1) sequence = 1;
  const size_t vocab = static_cast<size_t>(ri.vocabSize);
  std::vector<float> lr(vocab), lm(vocab);
  std::vector<double> pr, pm, klds;
  klds.reserve(static_cast<size_t>(options.tokens));
  std::mt19937_64 rng(options.seed);
  int64_t agree = 0;
  while (static_cast<int64_t>(klds.size()) < options.tokens) {
    Check(tinyaiResetLLM(ref));
    Check(tinyaiResetLLM(model));
    // Each sequence starts as the models start a text: with BOS, or with a
    // first token drawn uniformly.
    int32_t token = bos ? ri.bosId : FirstTokenWithoutBos(ri, rng());
    for (int32_t t = 0; t < sequence && static_cast<int64_t>(klds.size()) < options.tokens; ++t) {
      Check(tinyaiLLMEval(ref, &token, 1, lr.data()));
      Check(tinyaiLLMEval(model, &token, 1, lm.data()));
      LogSoftmax(lr, &pr);
      LogSoftmax(lm, &pm);
      double kld = 0.0;
      for (size_t i = 0; i < vocab; ++i) kld += std::exp(pr[i]) * (pr[i] - pm[i]);
      klds.push_back(kld > 0.0 ? kld : 0.0);  // >= 0 up to rounding
      agree += ArgMax(lr) == ArgMax(lm);
      // The next token, sampled from the reference.
      const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
      double c = 0.0;
      size_t next = vocab - 1;
      for (size_t i = 0; i < vocab; ++i) {
        if ((c += std::exp(pr[i])) > u) {
          next = i;
          break;
        }
      }
      token = static_cast<int32_t>(next);
      if (progress) progress(static_cast<int64_t>(klds.size()), options.tokens);
    }
  }
  CompareResult r;
  r.positions = static_cast<int64_t>(klds.size());
  if (r.positions > 0) {
    double sum = 0.0;
    for (double k : klds) sum += k;
    r.mean_kld = sum / static_cast<double>(r.positions);
    std::vector<double> sorted = klds;
    std::sort(sorted.begin(), sorted.end());
    const size_t at = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(sorted.size()))) - 1;
    r.p99_kld = sorted[at];
    r.max_kld = sorted.back();
    r.top1 = static_cast<double>(agree) / static_cast<double>(r.positions);
  }
  return r;
}

}  // namespace tinyai_tools
