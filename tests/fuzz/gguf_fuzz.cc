// libFuzzer target: the bytes of a GGUF file, parsed by tinyai::gguf::Parse
// and converted by tinyai::ConvertGguf (tinyai-convert --from gguf). Any
// input must give TINYAI_OK or a specific status with a message, never a
// crash, a hang or a sanitizer report. A file that parses has every key and
// tensor inside it, in order and without overlap; a file that converts must
// open, load every layer and build a runner that evaluates a prompt and
// samples inside the vocabulary (or says TINYAI_ERR_NOT_FINITE).
// The same bytes are also read in place (tinyaiOpenMappedModel on the file
// and on an image in memory, format/gguf_index.h): refused with a status, or
// opened, every layer loaded and a prompt evaluated; a file the parser
// refuses never opens, and one that converts opens.
//
// Seeds (TINYAI_FUZZ_WRITE_SEEDS): small synthetic models written as GGUF by
// the tests' writer (tests/import/gguf_writer.h) in F32, F16, Q8_0 and Q4_0,
// with a separate classifier, version 2, another alignment, a byte-level BPE
// vocabulary (Llama 3's and Qwen2's pre-tokenizers) and a Qwen2 model.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "import/gguf.h"
#include "import/gguf_writer.h"
#include "import/llama_source.h"
#include "import/model_builder.h"
#include "tinyai/tinyai.h"

namespace {

using tinyai_fuzz::CheckFailure;

// A GGUF read in place (model: opened from a file or memory): every layer
// loads, and a runner, when one can be made, evaluates a prompt.
void RunInPlace(TinyAIMappedModel* model) {
  for (int l = 0; l < tinyaiGetMappedLayerCount(model); ++l) {
    const void* w = tinyaiGetLayerWeights(model, l);
    if (w == nullptr) {
      CheckFailure(tinyaiGetLastError(), "tinyaiGetLayerWeights (in place)");
      continue;
    }
    tinyaiReleaseLayerWeights(model, l);
  }
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  cfg.contextLength = 8;
  TinyAILLM* llm = nullptr;
  tinyaiClearLastError();
  TinyAIStatus s = tinyaiCreateLLM(model, &cfg, &llm);
  if (s != TINYAI_OK) {
    CheckFailure(s, "tinyaiCreateLLM (in place)");
    return;
  }
  int32_t tokens[8];
  int32_t count = 0;
  s = tinyaiLLMTokenize(llm, "ab", 1, tokens, 8, &count);
  if (s == TINYAI_OK && count > 0) {
    TinyAIModelInfo info;
    std::memset(&info, 0, sizeof info);
    info.structSize = sizeof info;
    FUZZ_CHECK(tinyaiGetLLMModelInfo(llm, &info) == TINYAI_OK, "tinyaiGetLLMModelInfo (in place)");
    std::vector<float> logits(static_cast<size_t>(info.vocabSize));
    s = tinyaiLLMEval(llm, tokens, count, logits.data());
    FUZZ_CHECK(s == TINYAI_OK || s == TINYAI_ERR_NOT_FINITE, "evaluating in place fails: %s", tinyaiStatusString(s));
  } else if (s != TINYAI_OK) {
    CheckFailure(s, "tinyaiLLMTokenize (in place)");
  }
  tinyaiDestroyLLM(llm);
}

void WriteSeeds(const char* dir) {
  struct Seed {
    const char* spec;
    uint32_t type;
    uint32_t version;
    uint64_t alignment;
    const char* vocab;  // nullptr: SentencePiece; else a byte-level BPE pre-tokenizer
    bool qwen2;         // architecture qwen2: q/k/v biases, q and k in the NEOX layout
  };
  const Seed seeds[] = {
      {"dim=16,hidden=32,layers=1,heads=2,kv_heads=1,vocab=260,seq_len=8,seed=1", tinyai::testing::kGgmlF32, 3, 32,
       nullptr, false},
      {"dim=16,hidden=24,layers=2,heads=4,kv_heads=2,vocab=262,seq_len=8,seed=2,shared=0", tinyai::testing::kGgmlF16, 2,
       32, nullptr, false},
      {"dim=32,hidden=32,layers=1,heads=2,kv_heads=2,vocab=260,seq_len=4,seed=3", tinyai::testing::kGgmlQ8_0, 3, 64,
       nullptr, false},
      {"dim=32,hidden=64,layers=1,heads=4,kv_heads=1,vocab=261,seq_len=4,seed=4", tinyai::testing::kGgmlQ4_0, 3, 32,
       nullptr, false},
      // Llama 3's and Qwen2's vocabulary; a Qwen2 model.
      {"dim=16,hidden=32,layers=1,heads=2,kv_heads=1,vocab=280,seq_len=8,seed=5", tinyai::testing::kGgmlF32, 3, 32,
       "llama-bpe", false},
      {"dim=16,hidden=32,layers=1,heads=2,kv_heads=1,vocab=280,seq_len=8,seed=6", tinyai::testing::kGgmlF16, 3, 32,
       "qwen2", true},
  };
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; ++i) {
    tinyai::LlamaShape shape;
    FUZZ_CHECK(tinyai::ParseSyntheticSpec(seeds[i].spec, &shape) == TINYAI_OK, "spec %s", seeds[i].spec);
    const std::string model = tinyai_fuzz::ScratchDir::Get().File("seed.tmai");
    FUZZ_CHECK(tinyai::WriteSyntheticModel(shape, model.c_str()) == TINYAI_OK, "synthetic %s", seeds[i].spec);
    tinyai::testing::LlamaSource source;
    std::string error;
    FUZZ_CHECK(tinyai::testing::LoadTmai(model, &source, &error), "%s", error.c_str());
    tinyai::testing::GgufModelOptions options;
    options.matrix_type = seeds[i].type;
    options.qwen2 = seeds[i].qwen2;
    if (seeds[i].qwen2) {
      // Biases of 0.1 on q, k and v.
      source.params.qkv_bias = true;
      auto base = source.tensor;
      source.tensor = [base](const std::string& name) {
        if (name.size() > 5 && name.compare(name.size() - 5, 5, "_bias") == 0) {
          return std::vector<float>(name.find("attn_q") != std::string::npos ? 16 : 8, 0.1f);
        }
        return base(name);
      };
    }
    tinyai::testing::GgufWriter w;
    FUZZ_CHECK(tinyai::testing::GgufFromSource(source, options, &w, &error), "%s", error.c_str());
    if (seeds[i].vocab) tinyai::testing::ByteLevelVocab(shape.vocab_size).Write(&w, seeds[i].vocab);
    const std::vector<uint8_t> bytes = w.Finish(seeds[i].version, seeds[i].alignment);
    tinyai_fuzz::WriteSeed(dir, "model-" + std::to_string(i) + ".gguf", bytes.data(), bytes.size());
    std::remove(model.c_str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tinyai_fuzz::WriteSeedsIfAsked(WriteSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The parser on the bytes themselves (ASan sees a read past them).
  tinyaiClearLastError();
  tinyai::gguf::File parsed;
  const TinyAIStatus ps = tinyai::gguf::Parse(data, size, "input", &parsed);
  if (ps != TINYAI_OK) {
    CheckFailure(ps, "gguf::Parse");
  } else {
    uint64_t end = parsed.data_offset;
    for (const tinyai::gguf::TensorInfo& t : parsed.tensors) {
      FUZZ_CHECK(t.offset >= parsed.data_offset && t.offset <= size && t.bytes <= size - t.offset,
                 "tensor '%s' outside the file", t.name.c_str());
      end = t.offset + t.bytes > end ? t.offset + t.bytes : end;
    }
    FUZZ_CHECK(end <= size, "data past the end");
    std::string s;
    std::vector<std::string> strings;
    std::vector<float> floats;
    std::vector<int64_t> ints;
    for (const tinyai::gguf::KeyValue& kv : parsed.kvs) {  // every typed read says OK or a status
      uint64_t u = 0;
      float f = 0;
      parsed.GetUint(kv.key, UINT64_MAX, &u);
      parsed.GetFloat(kv.key, &f);
      parsed.GetString(kv.key, &s);
      parsed.GetStrings(kv.key, 1u << 16, &strings);
      parsed.GetFloats(kv.key, 1u << 16, &floats);
      parsed.GetInts(kv.key, 1u << 16, &ints);
      int64_t i64 = 0;
      parsed.GetInt(kv.key, &i64);
    }
  }

  const tinyai_fuzz::ScratchDir& dir = tinyai_fuzz::ScratchDir::Get();
  const std::string in = dir.File("in.gguf"), out = dir.File("out.tmai");
  FUZZ_CHECK(tinyai_fuzz::WriteFile(in, data, size), "cannot write %s", in.c_str());
  tinyai::LlamaHyperParams shape;
  tinyaiClearLastError();
  const TinyAIStatus s = tinyai::ConvertGguf(in.c_str(), out.c_str(), &shape);
  if (s != TINYAI_OK) {
    CheckFailure(s, "ConvertGguf");
    FUZZ_CHECK(std::strstr(tinyaiGetLastErrorMessage(), in.c_str()) != nullptr ||
                   std::strstr(tinyaiGetLastErrorMessage(), out.c_str()) != nullptr,
               "the message names none of the files");
  } else {
    FUZZ_CHECK(ps == TINYAI_OK, "a file the parser refuses converts");
    tinyai_fuzz::RunConverted(out, shape);
  }
  std::remove(out.c_str());

  // Read in place, from the file and from memory.
  TinyAIMmapConfig config = tinyaiCreateDefaultMmapConfig();
  config.prefetchThreads = 0;
  config.rowSliceSize = 256;  // many slices: the reads between tensors' gaps
  tinyaiClearLastError();
  TinyAIMappedModel* model = tinyaiOpenMappedModel(in.c_str(), &config);
  if (model == nullptr) {
    CheckFailure(tinyaiGetLastError(), "tinyaiOpenMappedModel (in place)");
    FUZZ_CHECK(s != TINYAI_OK || std::strstr(tinyaiGetLastErrorMessage(), "convert the file once") != nullptr,
               "a file that converts does not open in place: %s", tinyaiGetLastErrorMessage());
  } else {
    FUZZ_CHECK(ps == TINYAI_OK, "a file the parser refuses opens in place");
    RunInPlace(model);
    tinyaiCloseMappedModel(model);
  }
  std::vector<uint8_t> aligned(size + 64);
  uint8_t* image = aligned.data() + (64 - reinterpret_cast<uintptr_t>(aligned.data()) % 64) % 64;
  if (size > 0) std::memcpy(image, data, size);
  tinyaiClearLastError();
  model = tinyaiOpenMappedModelFromMemory(image, size, &config);
  if (model == nullptr) {
    CheckFailure(tinyaiGetLastError(), "tinyaiOpenMappedModelFromMemory (in place)");
  } else {
    RunInPlace(model);
    tinyaiCloseMappedModel(model);
  }
  return 0;
}
