// tinyai-convert: build .tmai models.
//   tinyai-convert [--compress zstd[:LEVEL]] --from llama2c [--name NAME] --tokenizer TOK.bin IN.bin OUT.tmai
//   tinyai-convert [--compress zstd[:LEVEL]] --synthetic SPEC OUT.tmai
//   tinyai-convert [--compress zstd[:LEVEL]] --dense DEF.txt OUT.tmai
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/status.h"
#include "format/model_builder.h"
#include "format/tmai_writer.h"
#include "tools/common/cli.h"

namespace {

const char kUsage[] =
    "usage: tinyai-convert [--compress C] --from llama2c [--name NAME] --tokenizer TOK.bin IN.bin OUT.tmai\n"
    "       tinyai-convert [--compress C] --synthetic SPEC OUT.tmai\n"
    "       tinyai-convert [--compress C] --dense DEF.txt OUT.tmai\n"
    "SPEC: dim=768,hidden=2048,layers=12,heads=12,kv_heads=12,vocab=32000,seq_len=1024,seed=1[,shared=0]\n"
    "DEF:  a dense network (an MLP, residual blocks allowed) with random weights, one directive per line:\n"
    "      'input N', then 'layer NAME out=N [act=none|relu|tanh] [inputs=A,B,...] [bias=0|1]' lines;\n"
    "      optional 'name NAME' and 'seed N'; '#' starts a comment (docs/format.md, \"Dense networks\")\n"
    "NAME: the model's name (general.name); default 'llama2.c checkpoint'\n"
    "C:    none (default), or zstd[:LEVEL] (LEVEL 1..19, default 3): each tensor that gets smaller is stored\n"
    "      as zstd frames of about 1 MiB of rows, the others as they are\n";

// "none", "zstd" or "zstd:LEVEL".
tinyai::WriteOptions ParseCompress(const std::string& v) {
  tinyai::WriteOptions o;
  if (v == "none") return o;
  if (v.compare(0, 4, "zstd") != 0 || (v.size() > 4 && v[4] != ':')) {
    throw tinyai_tools::UsageError("--compress takes none or zstd[:LEVEL], got '" + v + "'");
  }
  o.codec = TINYAI_CODEC_ZSTD;
  if (v.size() > 4) {
    long long level = tinyai_tools::ParseInt("--compress zstd:LEVEL", v.c_str() + 5);
    if (level < 1 || level > 19) throw tinyai_tools::UsageError("zstd level must be 1..19, got " + v.substr(5));
    o.level = static_cast<int>(level);
  }
  return o;
}

void PrintStats(const tinyai::WriteOptions& o, const tinyai::TmaiWriteStats& st) {
  const double pct = st.decoded_bytes ? 100.0 * static_cast<double>(st.stored_bytes) /
                                            static_cast<double>(st.decoded_bytes)
                                      : 100.0;
  std::fprintf(stderr,
               "tinyai-convert: %llu tensors, %llu compressed (%s); tensor data %llu bytes stored for %llu decoded "
               "(%.1f%%); file %llu bytes\n",
               static_cast<unsigned long long>(st.tensors), static_cast<unsigned long long>(st.compressed_tensors),
               o.codec == TINYAI_CODEC_ZSTD ? ("zstd level " + std::to_string(o.level)).c_str() : "none",
               static_cast<unsigned long long>(st.stored_bytes), static_cast<unsigned long long>(st.decoded_bytes),
               pct, static_cast<unsigned long long>(st.file_size));
}

void PrintShape(const tinyai::LlamaShape& s, const char* out) {
  std::fprintf(stderr,
               "tinyai-convert: wrote %s: dim %d, hidden %d, layers %d, heads %d, kv_heads %d, vocab %d, seq_len %d, "
               "%s classifier\n",
               out, s.dim, s.hidden_dim, s.layers, s.heads, s.kv_heads, s.vocab_size, s.seq_len,
               s.shared_classifier ? "shared" : "separate");
}

// Reads the definition file and writes its network.
int ConvertDense(const std::string& defPath, const std::string& out, const tinyai::WriteOptions& options) {
  std::ifstream in(defPath, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "tinyai-convert: cannot read the definition '%s'\n", defPath.c_str());
    return 1;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  tinyai::DenseNetDef def;
  TinyAIStatus s = tinyai::ParseDenseDefinition(text, &def);
  if (s != TINYAI_OK) s = tinyai::AddErrorContext(s, "'%s': ", defPath.c_str());
  tinyai::TmaiWriteStats stats;
  if (s == TINYAI_OK) s = tinyai::WriteDenseModel(def, out.c_str(), options, &stats);
  if (s != TINYAI_OK) return tinyai_tools::ReportError("tinyai-convert", s);
  std::fprintf(stderr, "tinyai-convert: wrote %s: dense network%s%s, input %d, %zu layers, seed %llu\n", out.c_str(),
               def.name.empty() ? "" : " ", def.name.c_str(), def.input_dim, def.layers.size(),
               static_cast<unsigned long long>(def.seed));
  PrintStats(options, stats);
  return 0;
}

int Run(int argc, char** argv) {
  std::string from, tokenizer, synthetic, dense, name;
  tinyai::WriteOptions options;
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
    else if (a == "--dense") dense = value();
    else if (a == "--compress") options = ParseCompress(value());
    else if (a == "--name") name = value();
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (!a.empty() && a[0] == '-') throw tinyai_tools::UsageError("unknown option " + a);
    else positional.push_back(a);
  }
  if (!dense.empty()) {
    if (positional.size() != 1 || !from.empty() || !synthetic.empty()) {
      throw tinyai_tools::UsageError("--dense takes DEF.txt and OUT.tmai");
    }
    return ConvertDense(dense, positional[0], options);
  }
  if (!synthetic.empty()) {
    if (positional.size() != 1 || !from.empty()) throw tinyai_tools::UsageError("--synthetic takes SPEC and OUT.tmai");
    tinyai::LlamaShape shape;
    tinyai::TmaiWriteStats stats;
    TinyAIStatus s = tinyai::ParseSyntheticSpec(synthetic, &shape);
    if (s == TINYAI_OK) s = tinyai::WriteSyntheticModel(shape, positional[0].c_str(), options, &stats);
    if (s != TINYAI_OK) return tinyai_tools::ReportError("tinyai-convert", s);
    PrintShape(shape, positional[0].c_str());
    PrintStats(options, stats);
    return 0;
  }
  if (!name.empty() && from != "llama2c") throw tinyai_tools::UsageError("--name goes with --from llama2c");
  options.name = name;
  if (from != "llama2c") throw tinyai_tools::UsageError(from.empty() ? "say --from llama2c, --synthetic or --dense" : "unknown --from " + from);
  if (tokenizer.empty() || positional.size() != 2) throw tinyai_tools::UsageError("--from llama2c needs --tokenizer TOK.bin IN.bin OUT.tmai");
  tinyai::LlamaShape shape;
  tinyai::TmaiWriteStats stats;
  TinyAIStatus s = tinyai::ConvertLlama2c(positional[0].c_str(), tokenizer.c_str(), positional[1].c_str(), &shape,
                                          options, &stats);
  if (s != TINYAI_OK) return tinyai_tools::ReportError("tinyai-convert", s);
  PrintShape(shape, positional[1].c_str());
  PrintStats(options, stats);
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
