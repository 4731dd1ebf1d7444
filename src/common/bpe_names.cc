#include "common/bpe_names.h"

#include <cstring>

#include "common/printable.h"
#include "common/status.h"

namespace tinyai {

namespace {

struct NameEntry {
  const char* name;
  BpePre pre;
};
const NameEntry kPreNames[] = {
    {"llama3", BpePre::kLlama3},   {"llama-v3", BpePre::kLlama3},        {"llama-bpe", BpePre::kLlama3},
    {"falcon3", BpePre::kLlama3},  {"qwen2", BpePre::kQwen2},            {"deepseek-r1-qwen", BpePre::kQwen2},
    {"stablelm2", BpePre::kQwen2}, {"smollm", BpePre::kSmollm},          {"starcoder", BpePre::kSmollm},
    {"refact", BpePre::kSmollm},   {"gpt-2", BpePre::kGpt2},             {"gpt2", BpePre::kGpt2},
    {"phi-2", BpePre::kGpt2},
};

}  // namespace

TinyAIStatus BpePreFromName(const char* name, BpePre* out) {
  if (name == nullptr) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "BPE tokenizer: no pre-tokenizer type (tokenizer.ggml.pre); "
                    "TinyAI needs one of llama-bpe, llama3, qwen2, smollm, gpt-2 and does not guess");
  }
  for (const NameEntry& e : kPreNames) {
    if (std::strcmp(e.name, name) == 0) {
      *out = e.pre;
      return TINYAI_OK;
    }
  }
  return SetError(TINYAI_ERR_UNSUPPORTED, "BPE tokenizer: unknown pre-tokenizer type '%s' (tokenizer.ggml.pre); "
                  "TinyAI implements llama-bpe/llama3/llama-v3/falcon3, qwen2/deepseek-r1-qwen/stablelm2, "
                  "smollm/starcoder/refact and gpt-2/phi-2", Printable(name, std::strlen(name)).c_str());
}

const char* BpePreName(BpePre pre) {
  switch (pre) {
    case BpePre::kLlama3: return "llama3";
    case BpePre::kQwen2: return "qwen2";
    case BpePre::kSmollm: return "smollm";
    case BpePre::kGpt2: return "gpt-2";
  }
  return "?";
}

}  // namespace tinyai
