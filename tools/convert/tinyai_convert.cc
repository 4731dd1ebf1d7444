// tinyai-convert: build .tmai models.
//   tinyai-convert --from llama2c --tokenizer TOK.bin IN.bin OUT.tmai
//   tinyai-convert --synthetic SPEC OUT.tmai
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "format/model_builder.h"
#include "tools/common/cli.h"

namespace {

const char kUsage[] =
    "usage: tinyai-convert --from llama2c --tokenizer TOK.bin IN.bin OUT.tmai\n"
    "       tinyai-convert --synthetic SPEC OUT.tmai\n"
    "SPEC: dim=768,hidden=2048,layers=12,heads=12,kv_heads=12,vocab=32000,seq_len=1024,seed=1[,shared=0]\n";

void PrintShape(const tinyai::LlamaShape& s, const char* out) {
  std::fprintf(stderr,
               "tinyai-convert: wrote %s: dim %d, hidden %d, layers %d, heads %d, kv_heads %d, vocab %d, seq_len %d, "
               "%s classifier\n",
               out, s.dim, s.hidden_dim, s.layers, s.heads, s.kv_heads, s.vocab_size, s.seq_len,
               s.shared_classifier ? "shared" : "separate");
}

int Run(int argc, char** argv) {
  std::string from, tokenizer, synthetic;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) throw tinyai_tools::UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--from") from = value();
    else if (a == "--tokenizer") tokenizer = value();
    else if (a == "--synthetic") synthetic = value();
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (!a.empty() && a[0] == '-') throw tinyai_tools::UsageError("unknown option " + a);
    else positional.push_back(a);
  }
  if (!synthetic.empty()) {
    if (positional.size() != 1 || !from.empty()) throw tinyai_tools::UsageError("--synthetic takes SPEC and OUT.tmai");
    tinyai::LlamaShape shape;
    TinyAIStatus s = tinyai::ParseSyntheticSpec(synthetic, &shape);
    if (s == TINYAI_OK) s = tinyai::WriteSyntheticModel(shape, positional[0].c_str());
    if (s != TINYAI_OK) return tinyai_tools::ReportError("tinyai-convert", s);
    PrintShape(shape, positional[0].c_str());
    return 0;
  }
  if (from != "llama2c") throw tinyai_tools::UsageError(from.empty() ? "say --from llama2c or --synthetic" : "unknown --from " + from);
  if (tokenizer.empty() || positional.size() != 2) throw tinyai_tools::UsageError("--from llama2c needs --tokenizer TOK.bin IN.bin OUT.tmai");
  tinyai::LlamaShape shape;
  TinyAIStatus s = tinyai::ConvertLlama2c(positional[0].c_str(), tokenizer.c_str(), positional[1].c_str(), &shape);
  if (s != TINYAI_OK) return tinyai_tools::ReportError("tinyai-convert", s);
  PrintShape(shape, positional[1].c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const tinyai_tools::UsageError& e) {
    std::fprintf(stderr, "tinyai-convert: %s\n%s", e.what(), kUsage);
    return 2;
  }
}
