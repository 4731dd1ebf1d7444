// Tests of Sampler against llama2.c's sampling rules.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "text/sampler.h"
#include "tinyai/status.h"

namespace tinyai {
namespace {

// llama2.c's sample(), transliterated (qsort replaced by a sort with the
// same tie rule as the library: descending probability, then ascending
// index).
struct Reference {
  static uint32_t U32(uint64_t* s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return static_cast<uint32_t>((*s * 0x2545F4914F6CDD1Dull) >> 32);
  }
  static float F32(uint64_t* s) { return static_cast<float>(U32(s) >> 8) / 16777216.0f; }

  static int Sample(std::vector<float> logits, float temperature, float topp, uint64_t* rng) {
    const int n = static_cast<int>(logits.size());
    if (temperature == 0.0f) {
      int best = 0;
      for (int i = 1; i < n; ++i) {
        if (logits[i] > logits[best]) best = i;
      }
      return best;
    }
    for (float& x : logits) x /= temperature;
    float maxValue = logits[0];
    for (int i = 1; i < n; ++i) maxValue = logits[i] > maxValue ? logits[i] : maxValue;
    float sum = 0.0f;
    for (float& x : logits) {
      x = expf(x - maxValue);
      sum += x;
    }
    for (float& x : logits) x /= sum;
    const float coin = F32(rng);
    if (topp <= 0 || topp >= 1) {
      float cdf = 0.0f;
      for (int i = 0; i < n; ++i) {
        cdf += logits[i];
        if (coin < cdf) return i;
      }
      return n - 1;
    }
    const float cutoff = (1.0f - topp) / (n - 1);
    std::vector<std::pair<float, int>> kept;
    for (int i = 0; i < n; ++i) {
      if (logits[i] >= cutoff) kept.push_back({logits[i], i});
    }
    if (kept.empty()) {
      // llama2.c reads probindex[-1] here. This only happens when topp < 1/n,
      // and then the nucleus is exactly the most probable token.
      int best = 0;
      for (int i = 1; i < n; ++i) {
        if (logits[i] > logits[best]) best = i;
      }
      return best;
    }
    std::stable_sort(kept.begin(), kept.end(),
                     [](const std::pair<float, int>& a, const std::pair<float, int>& b) {
                       return a.first > b.first;
                     });
    float cumulative = 0.0f;
    int last = static_cast<int>(kept.size()) - 1;
    for (int i = 0; i < static_cast<int>(kept.size()); ++i) {
      cumulative += kept[i].first;
      if (cumulative > topp) {
        last = i;
        break;
      }
    }
    const float r = coin * cumulative;
    float cdf = 0.0f;
    for (int i = 0; i <= last; ++i) {
      cdf += kept[i].first;
      if (r < cdf) return kept[i].second;
    }
    return kept[last].second;
  }
};

std::vector<float> RandomLogits(std::mt19937* gen, size_t n, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> logits(n);
  for (float& x : logits) x = normal(*gen);
  return logits;
}

TEST(SamplerRng, MatchesHandComputedXorshift) {
  // xorshift64* values computed independently (Python big integers).
  uint64_t state = 42;
  EXPECT_EQ(Sampler::RandomU32(&state), 1456360119u);
  EXPECT_EQ(Sampler::RandomU32(&state), 3359763283u);
  EXPECT_EQ(Sampler::RandomU32(&state), 3393612768u);
  EXPECT_EQ(Sampler::RandomU32(&state), 4054632243u);
  EXPECT_EQ(state, 0x405a97a0a712f12bull);

  state = 1234567890123ull;
  EXPECT_EQ(Sampler::RandomU32(&state), 4023144865u);
  EXPECT_EQ(Sampler::RandomU32(&state), 3047608580u);
  EXPECT_EQ(Sampler::RandomU32(&state), 1251579461u);
  EXPECT_EQ(Sampler::RandomU32(&state), 1373490368u);
  EXPECT_EQ(state, 0xa873e91f3d15c84bull);

  state = 42;
  EXPECT_EQ(Sampler::RandomF32(&state), 0.3390852212905884f);
  EXPECT_EQ(Sampler::RandomF32(&state), 0.7822558283805847f);
}

TEST(SamplerRng, ZeroStateIsReplaced) {
  uint64_t state = 0;
  EXPECT_EQ(Sampler::RandomU32(&state), 226735074u);
  EXPECT_EQ(Sampler::RandomU32(&state), 1422150777u);
  EXPECT_EQ(Sampler::RandomU32(&state), 2823156546u);
  EXPECT_EQ(Sampler::RandomU32(&state), 2104363911u);
  EXPECT_EQ(state, 0xb334115d4185b10dull);
  uint64_t replaced = 0x9E3779B97F4A7C15ull;
  uint64_t zero = 0;
  EXPECT_EQ(Sampler::RandomU32(&zero), Sampler::RandomU32(&replaced));
  EXPECT_EQ(zero, replaced);
}

TEST(SamplerRng, F32IsInUnitInterval) {
  uint64_t state = 99;
  for (int i = 0; i < 100000; ++i) {
    uint64_t copy = state;
    const float f = Sampler::RandomF32(&state);
    ASSERT_GE(f, 0.0f);
    ASSERT_LT(f, 1.0f);
    EXPECT_EQ(f, static_cast<float>(Sampler::RandomU32(&copy) >> 8) / 16777216.0f);
  }
}

TEST(SamplerArgmax, FirstMaximumWins) {
  const float a[] = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  EXPECT_EQ(Sampler::Argmax(a, 5), 1);
  const float b[] = {7.0f};
  EXPECT_EQ(Sampler::Argmax(b, 1), 0);
  const float c[] = {-5.0f, -4.0f, -4.0f};
  EXPECT_EQ(Sampler::Argmax(c, 3), 1);
  const float d[] = {0.0f, 0.0f, 0.0f};
  EXPECT_EQ(Sampler::Argmax(d, 3), 0);
}

TEST(Sampler, TemperatureZeroIsArgmaxAndKeepsTheRng) {
  Sampler s;
  ASSERT_EQ(s.Init(5), TINYAI_OK);
  float logits[] = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
  uint64_t rng = 1234;
  int32_t token = -1;
  ASSERT_EQ(s.Sample(logits, 0.0f, 0.9f, &rng, &token), TINYAI_OK);
  EXPECT_EQ(token, 1);
  EXPECT_EQ(rng, 1234u);
  EXPECT_EQ(logits[1], 3.0f);  // untouched
}

TEST(Sampler, SameSeedSameTokens) {
  std::mt19937 gen(1);
  const size_t n = 512;
  Sampler s;
  ASSERT_EQ(s.Init(n), TINYAI_OK);
  std::vector<std::vector<float>> steps;
  for (int i = 0; i < 50; ++i) steps.push_back(RandomLogits(&gen, n, 3.0f));
  for (float topp : {1.0f, 0.9f}) {
    std::vector<int32_t> first, second, other;
    for (uint64_t seed : {777ull, 777ull, 778ull}) {
      uint64_t rng = seed;
      std::vector<int32_t>& out = first.empty() ? first : second.empty() ? second : other;
      for (const std::vector<float>& step : steps) {
        std::vector<float> logits = step;
        int32_t token = -1;
        ASSERT_EQ(s.Sample(logits.data(), 0.8f, topp, &rng, &token), TINYAI_OK);
        out.push_back(token);
      }
    }
    EXPECT_EQ(first, second);
    EXPECT_NE(first, other);
  }
}

TEST(Sampler, MatchesLlama2cTransliteration) {
  std::mt19937 gen(2);
  for (size_t n : {1u, 2u, 3u, 17u, 512u}) {
    Sampler s;
    ASSERT_EQ(s.Init(n), TINYAI_OK);
    for (float temperature : {0.0f, 0.3f, 1.0f, 1.7f}) {
      for (float topp : {0.0f, 0.1f, 0.5f, 0.9f, 0.99f, 1.0f}) {
        uint64_t rng = 42 + n;
        uint64_t refRng = rng;
        for (int step = 0; step < 40; ++step) {
          std::vector<float> logits = RandomLogits(&gen, n, 2.0f);
          if (step % 5 == 0 && n > 2) logits[1] = logits[2];  // ties
          int32_t token = -1;
          std::vector<float> copy = logits;
          ASSERT_EQ(s.Sample(copy.data(), temperature, topp, &rng, &token), TINYAI_OK);
          if (n == 1 && topp > 0.0f && topp < 1.0f && temperature > 0.0f) {
            // llama2.c reads out of bounds here; the library returns 0.
            Reference::F32(&refRng);
            EXPECT_EQ(token, 0);
          } else {
            EXPECT_EQ(token, Reference::Sample(logits, temperature, topp, &refRng))
                << "n " << n << " temperature " << temperature << " topp " << topp;
          }
          EXPECT_EQ(rng, refRng);
        }
      }
    }
  }
}

TEST(Sampler, MultinomialFrequenciesMatchProbabilities) {
  const std::vector<float> probs = {0.4f, 0.25f, 0.15f, 0.1f, 0.06f, 0.03f, 0.01f};
  const size_t n = probs.size();
  Sampler s;
  ASSERT_EQ(s.Init(n), TINYAI_OK);
  const int draws = 200000;
  std::vector<int> counts(n, 0);
  uint64_t rng = 2024;
  for (int i = 0; i < draws; ++i) {
    std::vector<float> logits(n);
    for (size_t k = 0; k < n; ++k) logits[k] = std::log(probs[k]);
    int32_t token = -1;
    ASSERT_EQ(s.Sample(logits.data(), 1.0f, 1.0f, &rng, &token), TINYAI_OK);
    ASSERT_GE(token, 0);
    ASSERT_LT(token, static_cast<int32_t>(n));
    ++counts[static_cast<size_t>(token)];
  }
  double chi2 = 0.0;
  for (size_t k = 0; k < n; ++k) {
    const double expected = draws * static_cast<double>(probs[k]);
    chi2 += (counts[k] - expected) * (counts[k] - expected) / expected;
  }
  // 6 degrees of freedom: P(chi2 > 30) is about 4e-5.
  EXPECT_LT(chi2, 30.0) << "counts far from the probabilities";
}

TEST(Sampler, TopPNeverLeavesTheNucleus) {
  // Probabilities 0.5, 0.3, 0.1, 0.05, 0.05 (shuffled): with top-p 0.85 the
  // nucleus is the smallest prefix exceeding 0.85: {0.5, 0.3, 0.1}.
  const std::vector<float> probs = {0.05f, 0.3f, 0.05f, 0.5f, 0.1f};
  Sampler s;
  ASSERT_EQ(s.Init(probs.size()), TINYAI_OK);
  std::vector<int> counts(probs.size(), 0);
  uint64_t rng = 5;
  const int draws = 50000;
  for (int i = 0; i < draws; ++i) {
    std::vector<float> logits(probs.size());
    for (size_t k = 0; k < probs.size(); ++k) logits[k] = std::log(probs[k]);
    int32_t token = -1;
    ASSERT_EQ(s.Sample(logits.data(), 1.0f, 0.85f, &rng, &token), TINYAI_OK);
    ASSERT_TRUE(token == 1 || token == 3 || token == 4) << "token " << token;
    ++counts[static_cast<size_t>(token)];
  }
  // Renormalized inside the nucleus: 0.5/0.9, 0.3/0.9, 0.1/0.9.
  EXPECT_NEAR(counts[3] / static_cast<double>(draws), 0.5 / 0.9, 0.015);
  EXPECT_NEAR(counts[1] / static_cast<double>(draws), 0.3 / 0.9, 0.015);
  EXPECT_NEAR(counts[4] / static_cast<double>(draws), 0.1 / 0.9, 0.015);
}

TEST(Sampler, TopPOnRandomLogitsStaysInTheNucleus) {
  std::mt19937 gen(3);
  const size_t n = 300;
  Sampler s;
  ASSERT_EQ(s.Init(n), TINYAI_OK);
  uint64_t rng = 11;
  for (int step = 0; step < 300; ++step) {
    const std::vector<float> logits = RandomLogits(&gen, n, 3.0f);
    const float topp = 0.5f + 0.4f * static_cast<float>(step % 5) / 4.0f;
    // The nucleus from double-precision probabilities, with a margin.
    std::vector<double> p(n);
    double maxLogit = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += p[i] = std::exp(logits[i] - maxLogit);
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
    std::vector<bool> inNucleus(n, false);
    double cumulative = 0.0;
    for (size_t i = 0; i < n; ++i) {
      inNucleus[order[i]] = true;
      cumulative += p[order[i]] / sum;
      if (cumulative > topp + 1e-4) break;
    }
    std::vector<float> copy = logits;
    int32_t token = -1;
    ASSERT_EQ(s.Sample(copy.data(), 1.0f, topp, &rng, &token), TINYAI_OK);
    ASSERT_GE(token, 0);
    ASSERT_LT(token, static_cast<int32_t>(n));
    EXPECT_TRUE(inNucleus[static_cast<size_t>(token)]) << "step " << step << " token " << token;
  }
}

TEST(Sampler, TinyTopPOnAFlatDistributionFallsBackToArgmax) {
  // Every probability is 1/512, below the cutoff (1 - 0.001) / 511.
  Sampler s;
  ASSERT_EQ(s.Init(512), TINYAI_OK);
  std::vector<float> logits(512, 0.25f);
  uint64_t rng = 3;
  int32_t token = -1;
  ASSERT_EQ(s.Sample(logits.data(), 1.0f, 0.001f, &rng, &token), TINYAI_OK);
  EXPECT_EQ(token, 0);
}

TEST(Sampler, ZeroRngStateIsReplaced) {
  Sampler s;
  ASSERT_EQ(s.Init(4), TINYAI_OK);
  float logits[] = {0.0f, 0.0f, 0.0f, 0.0f};
  uint64_t rng = 0;
  int32_t token = -1;
  ASSERT_EQ(s.Sample(logits, 1.0f, 1.0f, &rng, &token), TINYAI_OK);
  uint64_t expected = 0x9E3779B97F4A7C15ull;
  const float coin = Sampler::RandomF32(&expected);
  EXPECT_EQ(rng, expected);
  EXPECT_EQ(token, static_cast<int32_t>(coin * 4.0f));  // ~0.0528 -> 0
}

TEST(Sampler, Validation) {
  Sampler s;
  float logits[] = {1.0f, 2.0f};
  uint64_t rng = 1;
  int32_t token = -1;
  EXPECT_EQ(s.Sample(logits, 1.0f, 0.9f, &rng, &token), TINYAI_ERR_MISUSE);
  EXPECT_EQ(s.Init(0), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s.Sample(logits, 1.0f, 0.9f, &rng, &token), TINYAI_ERR_MISUSE);
  ASSERT_EQ(s.Init(2), TINYAI_OK);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(s.Sample(logits, nan, 0.9f, &rng, &token), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s.Sample(logits, -0.5f, 0.9f, &rng, &token), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s.Sample(logits, inf, 0.9f, &rng, &token), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s.Sample(logits, 1.0f, nan, &rng, &token), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s.Sample(nullptr, 1.0f, 0.9f, &rng, &token), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s.Sample(logits, 1.0f, 0.9f, nullptr, &token), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s.Sample(logits, 1.0f, 0.9f, &rng, nullptr), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rng, 1u);
  EXPECT_EQ(logits[0], 1.0f);
  // Out-of-range top-p values mean "off".
  EXPECT_EQ(s.Sample(logits, 1.0f, inf, &rng, &token), TINYAI_OK);
  EXPECT_EQ(s.Sample(logits, 1.0f, -inf, &rng, &token), TINYAI_OK);
  EXPECT_EQ(s.Sample(logits, 1.0f, 2.0f, &rng, &token), TINYAI_OK);
}

// NaN and +inf logits, or nothing but -inf, have no distribution: a status,
// not token 0 (which is what the arg-max and the softmax gave them).
TEST(Sampler, NonFiniteLogitsAreRefused) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Sampler s;
  ASSERT_EQ(s.Init(4), TINYAI_OK);
  for (float temperature : {0.0f, 0.7f}) {
    for (float topP : {1.0f, 0.9f}) {
      SCOPED_TRACE("temperature " + std::to_string(temperature) + " top-p " + std::to_string(topP));
      uint64_t rng = 3;
      int32_t token = -1;
      float all_nan[] = {nan, nan, nan, nan};
      EXPECT_EQ(s.Sample(all_nan, temperature, topP, &rng, &token), TINYAI_ERR_NOT_FINITE);
      EXPECT_NE(std::string(tinyaiGetLastErrorMessage()).find("logit 0 of 4 is NaN"), std::string::npos)
          << tinyaiGetLastErrorMessage();
      float one_nan[] = {0.5f, 1.0f, nan, 0.0f};
      EXPECT_EQ(s.Sample(one_nan, temperature, topP, &rng, &token), TINYAI_ERR_NOT_FINITE);
      float plus_inf[] = {0.5f, inf, 1.0f, 0.0f};
      EXPECT_EQ(s.Sample(plus_inf, temperature, topP, &rng, &token), TINYAI_ERR_NOT_FINITE);
      float all_minus[] = {-inf, -inf, -inf, -inf};
      EXPECT_EQ(s.Sample(all_minus, temperature, topP, &rng, &token), TINYAI_ERR_NOT_FINITE);
      EXPECT_EQ(token, -1) << "nothing sampled";
      // -inf alone rules a token out: never sampled.
      for (int i = 0; i < 50; ++i) {
        float masked[] = {-inf, 0.0f, -inf, 0.1f};
        ASSERT_EQ(s.Sample(masked, temperature, topP, &rng, &token), TINYAI_OK);
        EXPECT_TRUE(token == 1 || token == 3) << token;
      }
    }
  }
  // A temperature so small that the scaled logits overflow: the distribution
  // is all on the largest (softmax would give NaN).
  float logits[] = {1.0f, 3.0f, 2.0f, -1.0f};
  uint64_t rng = 5;
  int32_t token = -1;
  ASSERT_EQ(s.Sample(logits, 1e-38f, 1.0f, &rng, &token), TINYAI_OK);
  EXPECT_EQ(token, 1);
  size_t at = 99;
  const float values[] = {1.0f, -inf, 2.0f};
  EXPECT_EQ(CheckFinite(values, 3, &at), TINYAI_ERR_NOT_FINITE);
  EXPECT_EQ(at, 1u);
  EXPECT_EQ(CheckFinite(values, 1, &at), TINYAI_OK);
}

}  // namespace
}  // namespace tinyai
