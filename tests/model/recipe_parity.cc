// recipe_parity MODEL.tmai REFERENCE.bin
//
// Checks that TinyAI runs a model made by models/recipe/train.py as torch
// did: the logits at every position of a token sequence agree within a
// float32 tolerance, and TinyAI's tokenizer encodes held-out texts to the ids
// SentencePiece gave (REFERENCE.bin's layout is in train.py,
// export_reference). Exit status 0 when both hold, 1 otherwise.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tinyai/llm.h"
#include "tinyai/tinyai.h"

namespace {

struct Reader {
  std::string data;
  size_t at = 0;
  bool ok = true;
  int32_t Int() {
    int32_t v = 0;
    if (at + 4 > data.size()) {
      ok = false;
      return 0;
    }
    for (int i = 3; i >= 0; --i) v = static_cast<int32_t>((static_cast<uint32_t>(v) << 8) | static_cast<uint8_t>(data[at + i]));
    at += 4;
    return v;
  }
  float Float() {
    const uint32_t bits = static_cast<uint32_t>(Int());
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  std::string Bytes(int32_t n) {
    if (n < 0 || at + static_cast<size_t>(n) > data.size()) {
      ok = false;
      return std::string();
    }
    std::string s = data.substr(at, static_cast<size_t>(n));
    at += static_cast<size_t>(n);
    return s;
  }
};

int Fail(const char* what) {
  std::fprintf(stderr, "recipe_parity: %s: %s: %s\n", what, tinyaiStatusString(tinyaiGetLastError()),
               tinyaiGetLastErrorMessage());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: recipe_parity MODEL.tmai REFERENCE.bin\n");
    return 2;
  }
  std::ifstream in(argv[2], std::ios::binary);
  Reader r;
  r.data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return std::fprintf(stderr, "recipe_parity: cannot read %s\n", argv[2]), 1;
  if (r.Bytes(4) != "TREF") return std::fprintf(stderr, "recipe_parity: %s is not a reference file\n", argv[2]), 1;
  const int32_t positions = r.Int(), vocab = r.Int();
  if (!r.ok || positions <= 0 || positions > 4096 || vocab <= 0 || vocab > (1 << 20)) {
    return std::fprintf(stderr, "recipe_parity: %s: bad header\n", argv[2]), 1;
  }
  std::vector<int32_t> tokens(static_cast<size_t>(positions));
  for (int32_t& t : tokens) t = r.Int();
  std::vector<float> want(static_cast<size_t>(positions) * static_cast<size_t>(vocab));
  for (float& f : want) f = r.Float();
  const int32_t texts = r.Int();
  if (!r.ok || texts < 0) return std::fprintf(stderr, "recipe_parity: %s is truncated\n", argv[2]), 1;

  TinyAIMmapConfig mc = tinyaiCreateDefaultMmapConfig();
  TinyAIMappedModel* model = tinyaiOpenMappedModel(argv[1], &mc);
  if (!model) return Fail(argv[1]);
  TinyAILLMConfig lc = tinyaiCreateDefaultLLMConfig();
  TinyAILLM* llm = nullptr;
  if (tinyaiCreateLLM(model, &lc, &llm) != TINYAI_OK) return Fail("create");
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  if (tinyaiGetLLMModelInfo(llm, &info) != TINYAI_OK) return Fail("model info");
  if (info.vocabSize != vocab) {
    return std::fprintf(stderr, "recipe_parity: the model's vocabulary is %d, the reference's %d\n", info.vocabSize,
                        vocab), 1;
  }

  // Logits, one position at a time (the decode path), within a relative
  // tolerance: float32 sums in another order differ in the last bits.
  int failures = 0;
  double worst = 0.0;
  std::vector<float> got(static_cast<size_t>(vocab));
  for (int32_t p = 0; p < positions; ++p) {
    if (tinyaiLLMEval(llm, &tokens[static_cast<size_t>(p)], 1, got.data()) != TINYAI_OK) return Fail("eval");
    for (int32_t v = 0; v < vocab; ++v) {
      const double w = want[static_cast<size_t>(p) * static_cast<size_t>(vocab) + static_cast<size_t>(v)];
      const double err = std::fabs(static_cast<double>(got[static_cast<size_t>(v)]) - w) / (1.0 + std::fabs(w));
      worst = std::max(worst, err);
    }
  }
  std::printf("logits: %d positions x %d, largest |tinyai - torch| / (1 + |torch|) = %.3g\n", positions, vocab, worst);
  if (!(worst <= 1e-4)) {
    std::printf("FAIL: logits differ beyond 1e-4\n");
    ++failures;
  }

  // Tokenizer: SentencePiece's ids for each held-out text.
  int same = 0;
  for (int32_t i = 0; i < texts; ++i) {
    const std::string text = r.Bytes(r.Int());
    const int32_t n = r.Int();
    if (n < 0 || static_cast<size_t>(n) > (r.data.size() - r.at) / 4) r.ok = false;
    std::vector<int32_t> ids(r.ok ? static_cast<size_t>(n) : 0);
    for (int32_t& id : ids) id = r.Int();
    if (!r.ok) return std::fprintf(stderr, "recipe_parity: %s is truncated\n", argv[2]), 1;
    int32_t count = 0;
    std::vector<int32_t> mine(text.size() + 3);
    if (tinyaiLLMTokenize(llm, text.c_str(), 1, mine.data(), static_cast<int32_t>(mine.size()), &count) != TINYAI_OK) {
      return Fail("tokenize");
    }
    mine.resize(static_cast<size_t>(count));
    if (mine == ids) {
      ++same;
    } else if (i - same < 3) {
      std::printf("tokenizer differs on text %d (%zu ids vs SentencePiece's %zu): %.60s\n", i, mine.size(),
                  ids.size(), text.c_str());
    }
  }
  std::printf("tokenizer: %d of %d held-out texts encode to SentencePiece's ids\n", same, texts);
  if (same != texts) ++failures;
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
  return failures ? 1 : 0;
}
