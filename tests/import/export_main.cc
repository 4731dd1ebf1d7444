// tinyai_test_export: a .tmai LLaMA model written in another format by the
// tests' writers (tests/import/), a tensor at a time: for the command-line
// tests of tinyai-convert's importers and for the importers' benchmarks on
// models too large for memory (docs/benchmarks.md). Test code, not a tool
// users get.
//
//   tinyai_test_export gguf IN.tmai OUT.gguf [--type f32|f16|q8_0|q4_0|stored] [--version 2|3]
//                      [--chat-template TEXT]
//   tinyai_test_export safetensors IN.tmai OUT_DIR [--dtype F32|F16|BF16] [--shards N]
//   tinyai_test_export llama2c IN.tmai OUT.bin OUT_TOKENIZER.bin
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "import/gguf_writer.h"
#include "import/hf_writer.h"
#include "import/llama_source.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: tinyai_test_export gguf IN.tmai OUT.gguf [--type f32|f16|q8_0|q4_0|stored] [--version 2|3]\n"
               "                          [--chat-template TEXT]\n"
               "       tinyai_test_export safetensors IN.tmai OUT_DIR [--dtype F32|F16|BF16] [--shards N]\n"
               "       tinyai_test_export llama2c IN.tmai OUT.bin OUT_TOKENIZER.bin\n");
  return 2;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "tinyai_test_export: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return Usage();
  const std::string format = argv[1];
  std::vector<std::string> positional;
  tinyai::testing::GgufModelOptions gguf;
  tinyai::testing::HfOptions hf;
  std::string chat_template;  // tokenizer.chat_template, when given
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--type" && i + 1 < argc) {
      const std::string t = argv[++i];
      if (t == "f32") gguf.matrix_type = tinyai::testing::kGgmlF32;
      else if (t == "f16") gguf.matrix_type = tinyai::testing::kGgmlF16;
      else if (t == "q8_0") gguf.matrix_type = tinyai::testing::kGgmlQ8_0;
      else if (t == "q4_0") gguf.matrix_type = tinyai::testing::kGgmlQ4_0;
      else if (t == "stored") gguf.matrix_type = tinyai::testing::GgufModelOptions::kStored;
      else return Usage();
    } else if (a == "--chat-template" && i + 1 < argc) {
      chat_template = argv[++i];
    } else if (a == "--dtype" && i + 1 < argc) {
      hf.dtype = argv[++i];
    } else if (a == "--shards" && i + 1 < argc) {
      hf.shards = std::atoi(argv[++i]);
    } else if (a == "--version" && i + 1 < argc) {
      gguf.version = static_cast<uint32_t>(std::atoi(argv[++i]));
    } else if (!a.empty() && a[0] == '-') {
      return Usage();
    } else {
      positional.push_back(a);
    }
  }
  tinyai::testing::LlamaSource source;
  std::string error;
  if (positional.empty() || !tinyai::testing::LoadTmai(positional[0], &source, &error)) return Fail(error);
  if (format == "gguf" && positional.size() == 2) {
    tinyai::testing::GgufWriter w;
    if (!tinyai::testing::GgufFromSource(source, gguf, &w, &error)) return Fail(error);
    if (!chat_template.empty()) w.AddString("tokenizer.chat_template", chat_template);
    if (!w.WriteFile(positional[1], gguf.version, gguf.alignment)) return Fail("cannot write " + positional[1]);
    return 0;
  }
  if (format == "safetensors" && positional.size() == 2) {
    if (!tinyai::testing::WriteHfCheckpoint(source, hf, positional[1], &error)) return Fail(error);
    return 0;
  }
  if (format == "llama2c" && positional.size() == 3) {
    if (!tinyai::testing::WriteLlama2c(source, positional[1], positional[2], &error)) return Fail(error);
    return 0;
  }
  return Usage();
}
