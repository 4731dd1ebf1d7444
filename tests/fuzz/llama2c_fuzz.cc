// libFuzzer target: the bytes of a llama2.c checkpoint, converted by
// tinyai::ConvertLlama2c (tinyai-convert --from llama2c) with a valid
// tokenizer of the vocabulary size its header names. Any input must give
// TINYAI_OK or a specific status with a message, never a crash, a hang or a
// sanitizer report. A checkpoint that converts must describe the shape in
// its header, and its model must open, load every layer and build a runner
// that evaluates a prompt; whatever the weights, the logits are finite and
// sample tokens inside the vocabulary, or the evaluation says
// TINYAI_ERR_NOT_FINITE.
//
// Inputs whose first weight has an odd low byte are converted with zstd
// compression, so both codecs are written and read back.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "import/model_builder.h"
#include "fuzz_util.h"
#include "tinyai/tinyai.h"

namespace {

using tinyai_fuzz::CheckFailure;

// The tokenizer file for a vocabulary size, written once per size.
const std::string& TokenizerFor(int32_t vocab) {
  static std::map<int32_t, std::string>* written = new std::map<int32_t, std::string>();
  auto it = written->find(vocab);
  if (it != written->end()) return it->second;
  std::vector<std::string> pieces;
  std::vector<float> scores;
  tinyai_fuzz::MakeVocabulary(vocab, &pieces, &scores);
  const std::vector<uint8_t> file = tinyai_fuzz::TokenizerFile(pieces, scores);
  const std::string path = tinyai_fuzz::ScratchDir::Get().File(("tok" + std::to_string(vocab) + ".bin").c_str());
  FUZZ_CHECK(tinyai_fuzz::WriteFile(path, file.data(), file.size()), "cannot write %s", path.c_str());
  return written->emplace(vocab, path).first->second;
}

// A synthetic model (tinyai::WriteSyntheticModel) exported as a llama2.c
// checkpoint: the version-0 header, then the tensors in llama2.c's order
// (read back through the loader), with the legacy RoPE tables.
std::vector<uint8_t> ExportCheckpoint(const char* spec) {
  tinyai::LlamaShape s;
  FUZZ_CHECK(tinyai::ParseSyntheticSpec(spec, &s) == TINYAI_OK, "spec %s", spec);
  const std::string path = tinyai_fuzz::ScratchDir::Get().File("model.tmai");
  FUZZ_CHECK(tinyai::WriteSyntheticModel(s, path.c_str()) == TINYAI_OK, "synthetic model %s", spec);
  TinyAIMappedModel* model = tinyaiOpenMappedModel(path.c_str(), nullptr);
  FUZZ_CHECK(model != nullptr, "cannot open %s", path.c_str());
  std::vector<uint8_t> out;
  auto put = [&out](const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  };
  auto tensor = [&](const std::string& name) {
    int t = -1;
    TinyAITensorInfo info;
    std::memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    FUZZ_CHECK(tinyaiFindMappedTensor(model, name.c_str(), &t) == TINYAI_OK &&
                   tinyaiGetMappedTensorInfo(model, t, &info) == TINYAI_OK,
               "tensor %s", name.c_str());
    const uint8_t* base = static_cast<const uint8_t*>(tinyaiGetLayerWeights(model, info.layer));
    FUZZ_CHECK(base != nullptr, "layer %d", info.layer);
    put(base + info.offsetInLayer, static_cast<size_t>(info.decodedSize));
    tinyaiReleaseLayerWeights(model, info.layer);
  };
  const int32_t header[7] = {s.dim, s.hidden_dim, s.layers, s.heads, s.kv_heads,
                             s.shared_classifier ? s.vocab_size : -s.vocab_size, s.seq_len};
  put(header, sizeof header);
  tensor("token_embd");
  for (const char* kind : {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_out", "ffn_norm", "ffn_gate", "ffn_down",
                           "ffn_up"}) {
    for (int32_t l = 0; l < s.layers; ++l) tensor("blk." + std::to_string(l) + "." + kind);
  }
  tensor("output_norm");
  const int32_t half = s.dim / s.heads / 2;
  for (int part = 0; part < 2; ++part) {  // freq_cis_real, then freq_cis_imag
    for (int32_t pos = 0; pos < s.seq_len; ++pos) {
      for (int32_t i = 0; i < half; ++i) {
        const double angle = pos * std::pow(10000.0, -2.0 * i / (2.0 * half));
        const float v = static_cast<float>(part == 0 ? std::cos(angle) : std::sin(angle));
        put(&v, sizeof v);
      }
    }
  }
  if (!s.shared_classifier) tensor("output");
  tinyaiCloseMappedModel(model);
  std::remove(path.c_str());
  return out;
}

// Checkpoints of a few shapes: shared and separate classifiers,
// grouped-query attention, the smallest shape.
void WriteSeeds(const char* dir) {
  const char* specs[] = {
      "dim=8,hidden=16,layers=1,heads=2,kv_heads=1,vocab=260,seq_len=4,seed=1",
      "dim=8,hidden=12,layers=2,heads=2,kv_heads=2,vocab=270,seq_len=8,seed=2,shared=0",
      "dim=2,hidden=2,layers=1,heads=1,kv_heads=1,vocab=260,seq_len=2,seed=3",
      "dim=16,hidden=8,layers=1,heads=4,kv_heads=2,vocab=300,seq_len=3,seed=4",
  };
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; ++i) {
    const std::vector<uint8_t> bytes = ExportCheckpoint(specs[i]);
    tinyai_fuzz::WriteSeed(dir, "checkpoint-" + std::to_string(i), bytes.data(), bytes.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tinyai_fuzz::WriteSeedsIfAsked(WriteSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const tinyai_fuzz::ScratchDir& dir = tinyai_fuzz::ScratchDir::Get();
  const std::string ckpt = dir.File("in.bin"), out = dir.File("out.tmai");
  FUZZ_CHECK(tinyai_fuzz::WriteFile(ckpt, data, size), "cannot write %s", ckpt.c_str());
  // The tokenizer has the header's vocabulary size (its absolute value, as
  // llama2.c stores a separate classifier as a negative size) up to 4096;
  // other headers get 512 tokens, and the conversion then fails on the
  // checkpoint's shape or size or on the tokenizer's token count.
  int32_t vocab = 512;
  if (size >= 24) {
    int32_t v = 0;
    std::memcpy(&v, data + 20, sizeof v);
    if (v != INT32_MIN && (v < 0 ? -v : v) >= 1 && (v < 0 ? -v : v) <= 4096) vocab = v < 0 ? -v : v;
  }
  tinyai::WriteOptions options;
  if (size > 28 && (data[28] & 1)) options.codec = TINYAI_CODEC_ZSTD;
  tinyai::LlamaShape shape;
  tinyaiClearLastError();
  const TinyAIStatus s = tinyai::ConvertLlama2c(ckpt.c_str(), TokenizerFor(vocab).c_str(), out.c_str(), &shape, options);
  if (s != TINYAI_OK) {
    CheckFailure(s, "ConvertLlama2c");
    FUZZ_CHECK(std::strstr(tinyaiGetLastErrorMessage(), ckpt.c_str()) != nullptr ||
                   std::strstr(tinyaiGetLastErrorMessage(), TokenizerFor(vocab).c_str()) != nullptr ||
                   std::strstr(tinyaiGetLastErrorMessage(), out.c_str()) != nullptr,
               "the message names none of the files");
  } else {
    int32_t h[7];
    std::memcpy(h, data, sizeof h);
    FUZZ_CHECK(shape.dim == h[0] && shape.hidden_dim == h[1] && shape.layers == h[2] && shape.heads == h[3] &&
                   shape.kv_heads == h[4] && shape.vocab_size == (h[5] < 0 ? -h[5] : h[5]) &&
                   shape.shared_classifier == (h[5] > 0) && shape.seq_len == h[6],
               "the converted shape differs from the header");
    tinyai_fuzz::RunConverted(out, shape);
  }
  std::remove(out.c_str());
  return 0;
}
