// CompareModels (tools/eval/compare.h, what tinyai-eval prints) on two
// hand-made models whose next-token distributions are known: the KL it
// records is KL(reference || model), its p99 is the nearest-rank one (the
// ceil(0.99 n)-th smallest of the n positions' KLs), top-1 counts the
// positions whose argmaxes agree.
//
// The models: every block's matrices are zero, so a token's hidden state is
// its embedding row, 100 e_c for the token's channel c (BOS 0, Y 1, X 2),
// and its logits are column c of the classifier times sqrt(dim) (RMS norm of
// 100 e_c, norms 1). The reference puts logit 30 on the next token of the
// chain BOS -> Y -> X -> X ..., 0 on the rest, so the stream sampled from it
// is that chain (the other tokens' mass is under 1e-10); the model puts
// lower logits there, and at BOS prefers another token, Z.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/status.h"
#include "format/test_models.h"
#include "format/tmai_writer.h"
#include "import/model_builder.h"
#include "tinyai/llm.h"
#include "tinyai/tinyai.h"
#include "tools/common/cli.h"
#include "tools/eval/compare.h"

namespace tt = tinyai::testing;

namespace {

constexpr int32_t kDim = 32, kVocab = 300, kBos = 1, kY = 260, kX = 270, kZ = 280;
constexpr int32_t kChannels = 3;  // BOS, Y, X

// Logits by channel: one entry per channel, each a list of (token, logit);
// every other token's logit is 0.
struct Spike {
  int32_t token;
  double logit;
};
using Logits = std::vector<std::vector<Spike>>;

std::vector<double> Full(const std::vector<Spike>& spikes) {
  std::vector<double> l(kVocab, 0.0);
  for (const Spike& s : spikes) l[static_cast<size_t>(s.token)] = s.logit;
  return l;
}

// KL(p || q) of the softmaxes of logits a and b, in double.
double KL(const std::vector<double>& a, const std::vector<double>& b) {
  double za = 0.0, zb = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    za += std::exp(a[i]);
    zb += std::exp(b[i]);
  }
  double kl = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double lp = a[i] - std::log(za), lq = b[i] - std::log(zb);
    kl += std::exp(lp) * (lp - lq);
  }
  return kl;
}

// Writes the model whose channel c has the logits logits[c].
TinyAIStatus WriteModel(const std::string& path, const Logits& logits) {
  tinyai::LlamaHyperParams p;
  p.dim = kDim;
  p.hidden_dim = 64;
  p.layers = 1;
  p.heads = 4;
  p.kv_heads = 4;
  p.vocab_size = kVocab;
  p.seq_len = 128;
  p.shared_classifier = false;
  tinyai::TmaiWriter w;
  tinyai::AddLlamaMetadata(&w, p, "llama", "compare test", "tests", nullptr);
  std::vector<std::string> pieces = {"<unk>", "\n<s>\n", "\n</s>\n"};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    pieces.push_back(buf);
  }
  for (int i = 0; static_cast<int32_t>(pieces.size()) < kVocab; ++i) pieces.push_back(" w" + std::to_string(i));
  tinyai::AddTokenizerMetadata(&w, pieces, std::vector<float>(pieces.size(), 0.0f));
  std::vector<std::string> names;  // in the order their data is written
  tinyai::DeclareLlamaTensors(&w, p, [&names](const std::string& name, std::vector<uint64_t>*) { names.push_back(name); });
  TINYAI_RETURN_IF_ERROR(w.Open(path.c_str()));
  for (size_t t = 0; t < names.size(); ++t) {
    const std::string& name = names[t];
    std::vector<float> v(static_cast<size_t>(w.TensorBytes(static_cast<int32_t>(t)) / 4), 0.0f);
    if (name == "token_embd") {
      const int32_t channel_of[kChannels] = {kBos, kY, kX};
      for (int32_t c = 0; c < kChannels; ++c) v[static_cast<size_t>(channel_of[c]) * kDim + c] = 100.0f;
    } else if (name.find("norm") != std::string::npos) {
      for (float& x : v) x = 1.0f;
    } else if (name == "output") {
      for (int32_t c = 0; c < kChannels; ++c) {
        for (const Spike& s : logits[static_cast<size_t>(c)]) {
          v[static_cast<size_t>(s.token) * kDim + c] = static_cast<float>(s.logit / std::sqrt(double{kDim}));
        }
      }
    }
    TINYAI_RETURN_IF_ERROR(w.Write(v.data(), v.size() * 4));
  }
  return w.Finish();
}

TEST(CompareModels, KnownDistributions) {
  const Logits ref = {{{kY, 30.0}}, {{kX, 30.0}}, {{kX, 30.0}}};
  const Logits model = {{{kY, 2.0}, {kZ, 3.0}}, {{kX, 4.0}}, {{kX, 6.0}}};
  tt::TempDir dir;
  ASSERT_EQ(WriteModel(dir.File("ref.tmai"), ref), TINYAI_OK) << tt::LastMessage();
  ASSERT_EQ(WriteModel(dir.File("model.tmai"), model), TINYAI_OK) << tt::LastMessage();
  tinyai_tools::ModelHandle rm = tinyai_tools::OpenModel(dir.File("ref.tmai"), nullptr);
  tinyai_tools::ModelHandle mm = tinyai_tools::OpenModel(dir.File("model.tmai"), nullptr);
  tinyai_tools::LLMHandle rl = tinyai_tools::CreateLLM(rm.get(), tinyaiCreateDefaultLLMConfig());
  tinyai_tools::LLMHandle ml = tinyai_tools::CreateLLM(mm.get(), tinyaiCreateDefaultLLMConfig());

  // One sequence of 100 positions: BOS, Y, then X 98 times.
  tinyai_tools::CompareOptions o;
  o.tokens = 100;
  o.sequence = 100;
  const tinyai_tools::CompareResult r = tinyai_tools::CompareModels(rl.get(), ml.get(), o);
  ASSERT_EQ(r.positions, 100);

  double forward[kChannels], backward[kChannels];
  for (int32_t c = 0; c < kChannels; ++c) {
    const std::vector<double> a = Full(ref[static_cast<size_t>(c)]), b = Full(model[static_cast<size_t>(c)]);
    forward[c] = KL(a, b);   // KL(ref || model)
    backward[c] = KL(b, a);  // KL(model || ref)
  }
  // By hand: KL(ref || model) is about -log q(next): at X log(e^6 + 299) - 6 = 0.555,
  // at Y log(e^4 + 299) - 4 = 1.868, at BOS log(e^2 + e^3 + 298) - 2 = 3.785; the
  // other way the model's mass off the chain meets log p = -30: 9.7 at X.
  EXPECT_NEAR(forward[2], 0.5549, 1e-3);
  EXPECT_NEAR(forward[1], 1.8680, 1e-3);
  EXPECT_NEAR(forward[0], 3.7853, 1e-3);
  EXPECT_GT(backward[2], 9.0);
  const double mean_forward = (forward[0] + forward[1] + 98 * forward[2]) / 100;
  const double mean_backward = (backward[0] + backward[1] + 98 * backward[2]) / 100;
  EXPECT_NEAR(r.mean_kld, mean_forward, 1e-4) << "KL(ref || model); KL(model || ref) is " << mean_backward;
  EXPECT_GT(std::fabs(r.mean_kld - mean_backward), 5.0);
  // Sorted, the KLs are X's 98 times, Y's, BOS's: the nearest-rank p99 of
  // 100 is the 99th smallest (index 98), Y's; neither X's below it nor the max.
  EXPECT_NEAR(r.p99_kld, forward[1], 1e-4);
  EXPECT_NEAR(r.max_kld, forward[0], 1e-4);
  // The argmaxes agree everywhere but at BOS (Z against Y).
  EXPECT_DOUBLE_EQ(r.top1, 0.99);
}

// The tools' JSON strings are valid JSON whatever the bytes: quotes,
// backslashes and control bytes escaped, well-formed UTF-8 kept, and a byte
// that is not (a piece cut inside a character, an overlong, a surrogate)
// U+FFFD; numbers that are not finite are null.
TEST(JsonString, EscapesAndReplacesWhatIsNotUtf8) {
  namespace tt = tinyai_tools;
  EXPECT_EQ(tt::JsonString("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\u000a\\u0001\"");
  EXPECT_EQ(tt::JsonString("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"");
  EXPECT_EQ(tt::JsonString("x\xE2\x82"), "\"x\\ufffd\\ufffd\"");         // cut inside a character
  EXPECT_EQ(tt::JsonString("\xC0\xAF"), "\"\\ufffd\\ufffd\"");            // overlong
  EXPECT_EQ(tt::JsonString("\xED\xA0\x80"), "\"\\ufffd\\ufffd\\ufffd\""); // a surrogate
  EXPECT_EQ(tt::JsonString("\xF4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  // past U+10FFFF
  EXPECT_EQ(tt::JsonNumber(0.25), "0.25");
  EXPECT_EQ(tt::JsonNumber(std::nan("")), "null");
  EXPECT_EQ(tt::JsonNumber(HUGE_VAL), "null");
}

}  // namespace
