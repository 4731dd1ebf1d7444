// tinyai-convert: build .tmai models.
//   tinyai-convert [--tokenizer TOK.bin] [--name NAME] [--dtype D] [--compress C] IN OUT.tmai  (IN's format by its bytes)
//   tinyai-convert [--dtype D] [--compress zstd[:LEVEL]] --from llama2c [--name NAME] --tokenizer TOK.bin IN.bin OUT.tmai
//   tinyai-convert [--dtype D] [--compress zstd[:LEVEL]] --synthetic SPEC OUT.tmai
//   tinyai-convert [--dtype D] [--compress zstd[:LEVEL]] --dense DEF.txt OUT.tmai
//   tinyai-convert [--dtype D] [--compress zstd[:LEVEL]] --from tmai [--name NAME] IN.tmai OUT.tmai
//   tinyai-convert [--compress zstd[:LEVEL]] --from gguf [--name NAME] IN.gguf OUT.tmai
//   tinyai-convert [--compress zstd[:LEVEL]] --from safetensors [--name NAME] DIR_OR_FILE OUT.tmai
// Each form takes -q/--quiet (no summary on stderr) and --json (the summary as one object on stdout).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/status.h"
#include "import/model_builder.h"
#include "format/tmai_writer.h"
#include "tools/common/args.h"
#include "tools/common/cli.h"
#include "tools/common/formats.h"

namespace {

const char kTool[] = "tinyai-convert";

const char kUsage[] =
    "usage: tinyai-convert [--tokenizer TOK.bin] [--name NAME] [--dtype D] [--compress C] IN OUT.tmai\n"
    "       tinyai-convert [--dtype D] [--compress C] --from llama2c [--name NAME] --tokenizer TOK.bin IN.bin OUT.tmai\n"
    "       tinyai-convert [--dtype D] [--compress C] --synthetic SPEC OUT.tmai\n"
    "       tinyai-convert [--dtype D] [--compress C] --dense DEF.txt OUT.tmai\n"
    "       tinyai-convert [--dtype D] [--compress C] --from tmai [--name NAME] IN.tmai OUT.tmai\n"
    "       tinyai-convert [--compress C] --from gguf [--name NAME] IN.gguf OUT.tmai\n"
    "       tinyai-convert [--compress C] --from safetensors [--name NAME] DIR_OR_FILE OUT.tmai\n"
    "       tinyai-convert -h | --help | --version\n"
    "  IN                 without --from, its format is told by its first bytes: GGUF (\"GGUF\"), safetensors (a\n"
    "                     folder with model.safetensors or its index, a .safetensors file, the index), .tmai\n"
    "                     (\"TMAI\"), else a llama2.c checkpoint (a plausible header; needs --tokenizer)\n"
    "  --from llama2c     convert a llama2.c checkpoint IN.bin (with --tokenizer TOK.bin, its tokenizer)\n"
    "  --from tmai        write an existing model IN.tmai again: its matrices in --dtype (default: as they\n"
    "                     are), stored per --compress (default none); everything else as it is\n"
    "  --from gguf        convert a LLaMA or Qwen2 GGUF file (version 2 or 3) with its vocabulary (SentencePiece\n"
    "                     or byte-level BPE) and chat template; each tensor keeps its type: F32, F16, Q8_0\n"
    "                     (q8_g32), Q4_0 (q4_g32), IQ4_NL (q4nl_g32), Q4_K, Q5_K,\n"
    "                     Q6_K (q4_k, q5_k, q6_k), Q5_0 (q5_g32), Q5_1 (q5m_g32), BF16 (to f32); other types\n"
    "                     (Q2_K, Q3_K, IQ*) are refused by name (no --dtype: tinyai-quantize after)\n"
    "  --from safetensors convert a Hugging Face LLaMA or Qwen2 checkpoint: its folder (model.safetensors, or\n"
    "                     shards and model.safetensors.index.json), a .safetensors file or the index; config.json\n"
    "                     and the SentencePiece tokenizer.model, or the byte-level BPE tokenizer.json (Llama 3,\n"
    "                     Qwen2, SmolLM) and tokenizer_config.json, from the same folder. F32 and F16 tensors\n"
    "                     keep their type, BF16 becomes f32; q_proj and k_proj rows are permuted back to the\n"
    "                     interleaved rotary layout\n"
    "  --tokenizer TOK.bin  the llama2.c tokenizer file\n"
    "  --name NAME        the model's name (general.name) with --from llama2c (default 'llama2.c checkpoint'),\n"
    "                     --from tmai, --from gguf or --from safetensors (default: the input's)\n"
    "  --synthetic SPEC   a random-weight LLaMA model of that shape\n"
    "  --dense DEF.txt    a random-weight dense network from a definition file\n"
    "  --dtype D          the dtype of every matrix (embeddings, projections, classifier, dense weights;\n"
    "                     --outtype D, llama.cpp's converter's name, is the same):\n"
    "                     f32 (default), f16 (rounded to nearest even), or grouped: q8_g32 (q8_0, int8),\n"
    "                     q4_g32 (q4_0, int4-sym) or q4nl_g32 (iq4_nl, int4) (4-bit, uniform or non-uniform\n"
    "                     grid) in groups of 32 with searched scales, q5_g32 (q5_0), q5m_g32 (q5_1), or the\n"
    "                     K-quants q4_k, q5_k, q6_k (rows of whole blocks of 256 only) (docs/format.md);\n"
    "                     norm weights and biases stay f32. A grouped matrix of the input is copied or\n"
    "                     dequantized, never quantized again to another grouped dtype\n"
    "  --compress C       none (default), or zstd[:LEVEL] (LEVEL 1..19, default 3): each tensor that gets\n"
    "                     smaller is stored as zstd frames of about 1 MiB of rows, the others as they are\n"
    "  -q, --quiet        no summary on stderr\n"
    "  --json             the summary as one JSON object on stdout: output, input, input_format, shape\n"
    "                     {dim, hidden, layers, heads, kv_heads, vocab, seq_len, shared_classifier} (or dense\n"
    "                     {name, input, layers, seed}), tensors, matrices, compressed_tensors, codec,\n"
    "                     stored_bytes, decoded_bytes, file_bytes\n"
    "  -h, --help         this help; --version: the library's version\n"
    "SPEC: dim=768,hidden=2048,layers=12,heads=12,kv_heads=12,vocab=32000,seq_len=1024,seed=1[,shared=0]\n"
    "      (kv_heads defaults to heads, seed to 1, shared to 1; the runtime's limits: dim and hidden 1..1048576,\n"
    "      layers 1..4096, heads and kv_heads 1..4096, vocab 260..16777216, seq_len 1..1048576)\n"
    "DEF:  a dense network (an MLP, residual blocks allowed) with random weights, one directive per line:\n"
    "      'input N', then 'layer NAME out=N [act=none|relu|tanh] [inputs=A,B,...] [bias=0|1]' lines;\n"
    "      optional 'name NAME' and 'seed N'; '#' starts a comment (docs/format.md, \"Dense networks\")\n"
    "      DEF.txt (or - for standard input) holds at most 16 MiB (65536 layers of 256-byte lines)\n"
    "OUT.tmai must not be any of the inputs (the same file, through any path or link), nor a directory: that\n"
    "is refused before anything is written. An input that must be a file and is a directory, a FIFO or a\n"
    "device is refused by name.\n"
    "Exit status: 0 success, 1 runtime error (\"tinyai-convert: STATUS: message\" on stderr), 2 usage error.\n";

// "none", "zstd" or "zstd:LEVEL".
tinyai::WriteOptions ParseCompress(const std::string& v) {
  tinyai::WriteOptions o;
  if (v == "none") return o;
  if (v.compare(0, 4, "zstd") != 0 || (v.size() > 4 && v[4] != ':')) {
    throw tinyai_tools::UsageError("--compress takes none or zstd[:LEVEL], got '" + v + "'");
  }
  o.codec = TINYAI_CODEC_ZSTD;
  if (v.size() > 4) o.level = tinyai_tools::ParseInt32("--compress zstd:LEVEL", v.c_str() + 5, 1, 19);
  return o;
}

// What a conversion says: lines on stderr (none with --quiet), or with
// --json one object on stdout at the end (Finish).
struct Report {
  bool quiet = false, json = false;
  std::string fields;  // ,"key":value...

  void Line(const std::string& text) const {
    if (!quiet && !json) std::fprintf(stderr, "tinyai-convert: %s\n", text.c_str());
  }
  void Add(const char* key, const std::string& json_value) {
    fields += "," + tinyai_tools::JsonString(key) + ":" + json_value;
  }
  int Finish(const std::string& out) const {
    if (json) std::printf("{\"output\":%s%s}\n", tinyai_tools::JsonString(out).c_str(), fields.c_str());
    return 0;
  }
};

// matrices: what the matrices were written as (default: o.matrix_dtype).
void PrintStats(Report* r, const tinyai::WriteOptions& o, const tinyai::TmaiWriteStats& st,
                const char* matrices = nullptr) {
  const double pct = st.decoded_bytes ? 100.0 * static_cast<double>(st.stored_bytes) /
                                            static_cast<double>(st.decoded_bytes)
                                      : 100.0;
  const std::string codec = o.codec == TINYAI_CODEC_ZSTD ? "zstd level " + std::to_string(o.level) : "none";
  if (matrices == nullptr) matrices = tinyaiDTypeName(o.matrix_dtype);
  char line[512];
  std::snprintf(line, sizeof line,
                "%llu tensors, matrices %s, %llu compressed (%s); tensor data %llu bytes stored for %llu decoded "
                "(%.1f%%); file %llu bytes",
                static_cast<unsigned long long>(st.tensors), matrices,
                static_cast<unsigned long long>(st.compressed_tensors), codec.c_str(),
                static_cast<unsigned long long>(st.stored_bytes), static_cast<unsigned long long>(st.decoded_bytes),
                pct, static_cast<unsigned long long>(st.file_size));
  r->Line(line);
  r->Add("tensors", std::to_string(st.tensors));
  r->Add("matrices", tinyai_tools::JsonString(matrices));
  r->Add("compressed_tensors", std::to_string(st.compressed_tensors));
  r->Add("codec", tinyai_tools::JsonString(codec));
  r->Add("stored_bytes", std::to_string(st.stored_bytes));
  r->Add("decoded_bytes", std::to_string(st.decoded_bytes));
  r->Add("file_bytes", std::to_string(st.file_size));
}

void PrintShape(Report* r, const tinyai::LlamaShape& s, const std::string& out) {
  char line[512];
  std::snprintf(line, sizeof line,
                "wrote %s: dim %d, hidden %d, layers %d, heads %d, kv_heads %d, vocab %d, seq_len %d, %s classifier",
                out.c_str(), s.dim, s.hidden_dim, s.layers, s.heads, s.kv_heads, s.vocab_size, s.seq_len,
                s.shared_classifier ? "shared" : "separate");
  r->Line(line);
  auto i = [](int v) { return std::to_string(v); };
  r->Add("shape", "{\"dim\":" + i(s.dim) + ",\"hidden\":" + i(s.hidden_dim) + ",\"layers\":" + i(s.layers) +
                      ",\"heads\":" + i(s.heads) + ",\"kv_heads\":" + i(s.kv_heads) + ",\"vocab\":" +
                      i(s.vocab_size) + ",\"seq_len\":" + i(s.seq_len) + ",\"shared_classifier\":" +
                      (s.shared_classifier ? "true" : "false") + "}");
}

// An input: its role in messages, its path, and what to give instead when
// it is not a regular file (nullptr: a stream will do, e.g. the definition;
// "" with dir_ok: a folder will do too).
struct Input {
  const char* role;
  std::string path;
  const char* need;
  bool dir_ok = false;
};

// Refuses, before anything is written, an output that is one of the inputs
// (a usage error): the same file by device and inode, so hard links,
// symbolic links and different spellings of one path are all caught; an
// output that is a directory; and an input that is not the kind of file it
// must be (a directory, a FIFO, a device: named as such).
void CheckPaths(const std::string& out, const std::vector<Input>& inputs) {
  for (const Input& in : inputs) {
    if (tinyai::SameFile(out.c_str(), in.path.c_str())) {
      throw tinyai_tools::UsageError("OUT.tmai '" + out + "' is the " + in.role + " '" + in.path +
                                     "' (the same file); refusing to overwrite an input");
    }
  }
  for (const Input& in : inputs) {
    if (in.need && !(in.dir_ok && tinyai_tools::KindOfPath(in.path) == "a directory")) {
      tinyai_tools::CheckIsFile(in.path, std::string("the ") + in.role, in.need);
    }
  }
  tinyai_tools::CheckOutputPath(out, "OUT.tmai");
}

// The most bytes a definition may hold: 65,536 layers (the format's most) of
// 256-byte lines.
constexpr uint64_t kMaxDefinitionBytes = uint64_t{16} << 20;

// Reads the definition file and writes its network.
int ConvertDense(const std::string& defPath, const std::string& out, const tinyai::WriteOptions& options,
                 Report* report) {
  tinyai_tools::InputBound bound;
  bound.bytes = kMaxDefinitionBytes;
  bound.status = TINYAI_ERR_INVALID_ARGUMENT;
  bound.rule = "16 MiB: 65536 layers, the most a model holds, of 256-byte lines";
  bound.fix = "give a definition of one directive per line (docs/format.md, \"Dense networks\")";
  const std::string text = tinyai_tools::ReadInput(defPath, "the definition '" + defPath + "'", bound);
  tinyai::DenseNetDef def;
  TinyAIStatus s = tinyai::ParseDenseDefinition(text, &def);
  if (s != TINYAI_OK) s = tinyai::AddErrorContext(s, "'%s': ", defPath.c_str());
  tinyai::TmaiWriteStats stats;
  if (s == TINYAI_OK) s = tinyai::WriteDenseModel(def, out.c_str(), options, &stats);
  if (s != TINYAI_OK) return tinyai_tools::ReportError("tinyai-convert", s);
  report->Line("wrote " + out + ": dense network" + (def.name.empty() ? "" : " ") + def.name + ", input " +
               std::to_string(def.input_dim) + ", " + std::to_string(def.layers.size()) + " layers, seed " +
               std::to_string(def.seed));
  report->Add("dense", "{\"name\":" + tinyai_tools::JsonString(def.name) + ",\"input\":" +
                           std::to_string(def.input_dim) + ",\"layers\":" + std::to_string(def.layers.size()) +
                           ",\"seed\":" + std::to_string(def.seed) + "}");
  PrintStats(report, options, stats);
  return report->Finish(out);
}

int Run(int argc, char** argv) {
  std::string from, tokenizer, synthetic, dense, name;
  bool dtype_given = false;
  tinyai::WriteOptions options;
  std::vector<std::string> positional;
  namespace tt = tinyai_tools;
  tt::Args args;
  args.Flag({"--from"}, [&](const std::string&, const char* v) { from = v; });
  args.Flag({"--tokenizer"}, [&](const std::string&, const char* v) { tokenizer = v; });
  args.Flag({"--synthetic"}, [&](const std::string&, const char* v) { synthetic = v; });
  args.Flag({"--dense"}, [&](const std::string&, const char* v) { dense = v; });
  args.Flag({"--compress"}, [&](const std::string&, const char* v) {
    const TinyAIDType dtype = options.matrix_dtype;
    options = ParseCompress(v);
    options.matrix_dtype = dtype;
  });
  args.Flag({"--dtype", "--outtype"}, [&](const std::string&, const char* v) {
    options.matrix_dtype = tt::ParseDtype(v);
    dtype_given = true;
  });
  args.Flag({"--name"}, [&](const std::string&, const char* v) { name = v; });
  Report report;
  tt::AddQuiet(&args, &report.quiet);
  tt::AddJson(&args, &report.json);
  int exit_code = 0;
  if (!args.Parse(argc, argv, kTool, kUsage, &positional, &exit_code)) return exit_code;
  if ((!dense.empty() || !synthetic.empty()) && (!tokenizer.empty() || !name.empty())) {
    throw tinyai_tools::UsageError(tokenizer.empty() ? "--name goes with --from (llama2c, tmai, gguf or safetensors)"
                                                     : "--tokenizer goes with --from llama2c");
  }
  if (!dense.empty()) {
    if (positional.size() != 1 || !from.empty() || !synthetic.empty()) {
      throw tinyai_tools::UsageError("--dense takes DEF.txt and OUT.tmai");
    }
    CheckPaths(positional[0], {{"definition", dense, nullptr}});
    return ConvertDense(dense, positional[0], options, &report);
  }
  if (!synthetic.empty()) {
    if (positional.size() != 1 || !from.empty()) throw tinyai_tools::UsageError("--synthetic takes SPEC and OUT.tmai");
    tinyai::LlamaShape shape;
    tinyai::TmaiWriteStats stats;
    tinyai_tools::CheckOutputPath(positional[0], "OUT.tmai");
    TinyAIStatus s = tinyai::ParseSyntheticSpec(synthetic, &shape);
    if (s == TINYAI_OK) s = tinyai::WriteSyntheticModel(shape, positional[0].c_str(), options, &stats);
    if (s != TINYAI_OK) return tinyai_tools::ReportError("tinyai-convert", s);
    PrintShape(&report, shape, positional[0]);
    PrintStats(&report, options, stats);
    return report.Finish(positional[0]);
  }
  if (from.empty() && !positional.empty()) {
    // The input's format, told by its bytes.
    const tinyai_tools::FileFormat format = tinyai_tools::DetectFormat(positional[0]);
    from = tinyai_tools::ConvertFromName(format);
    if (format == tinyai_tools::FileFormat::kLlama2cTokenizer) {
      throw tinyai_tools::UsageError("'" + positional[0] + "' is a llama2.c tokenizer: give the checkpoint as IN and "
                                     "the tokenizer as --tokenizer " + positional[0]);
    }
    if (from.empty()) {
      tinyai_tools::CheckIsFile(positional[0], "the input", "a GGUF, safetensors, llama2.c or .tmai file");
      if (tinyai_tools::KindOfPath(positional[0]).empty() && access(positional[0].c_str(), F_OK) != 0) {
        throw tinyai_tools::RuntimeError(TINYAI_ERR_FILE_NOT_FOUND, "the input '" + positional[0] + "' does not exist");
      }
      throw tinyai_tools::RuntimeError(
          TINYAI_ERR_BAD_MAGIC, "'" + positional[0] + "' is not a GGUF, safetensors, llama2.c or .tmai file by its "
                                "first bytes; if it is one, say which with --from gguf|safetensors|llama2c|tmai");
    }
    if (from == std::string("llama2c") && tokenizer.empty()) {
      throw tinyai_tools::UsageError("'" + positional[0] + "' is a llama2.c checkpoint: give its tokenizer with "
                                     "--tokenizer TOK.bin (llama2.c's tokenizer.bin, or the one it was trained with)");
    }
    report.Line("'" + positional[0] + "' is " + tinyai_tools::FileFormatName(format));
    report.Add("input_format", tinyai_tools::JsonString(from));
  }
  if (!name.empty() && from != "llama2c" && from != "tmai" && from != "gguf" && from != "safetensors") {
    throw tinyai_tools::UsageError("--name goes with --from llama2c, --from tmai, --from gguf or --from safetensors");
  }
  options.name = name;
  if (from == "gguf" || from == "safetensors") {
    if (!tokenizer.empty()) {
      throw tinyai_tools::UsageError("--tokenizer goes with --from llama2c (" +
                                     std::string(from == "gguf" ? "a GGUF file holds its vocabulary"
                                                                : "the checkpoint's folder holds tokenizer.model") + ")");
    }
    if (dtype_given) {
      throw tinyai_tools::UsageError("--dtype does not go with --from " + from +
                                     ": each tensor keeps its type (tinyai-quantize converts them after)");
    }
    if (positional.size() != 2) {
      throw tinyai_tools::UsageError(from == "gguf" ? "--from gguf takes IN.gguf and OUT.tmai"
                                                    : "--from safetensors takes DIR_OR_FILE and OUT.tmai");
    }
    CheckPaths(positional[1], {from == "gguf" ? Input{"input", positional[0], "a .gguf file"}
                                              : Input{"input", positional[0],
                                                      "a checkpoint's folder, a .safetensors file or its index", true}});
    tinyai::LlamaShape shape;
    tinyai::TmaiWriteStats stats;
    TinyAIStatus s = from == "gguf"
                         ? tinyai::ConvertGguf(positional[0].c_str(), positional[1].c_str(), &shape, options, &stats)
                         : tinyai::ConvertSafetensors(positional[0].c_str(), positional[1].c_str(), &shape, options,
                                                      &stats);
    if (s != TINYAI_OK) return tinyai_tools::ReportError("tinyai-convert", s);
    report.Add("input", tinyai_tools::JsonString(positional[0]));
    PrintShape(&report, shape, positional[1]);
    PrintStats(&report, options, stats, "as in the input");
    return report.Finish(positional[1]);
  }
  if (from == "tmai") {
    if (!tokenizer.empty()) throw tinyai_tools::UsageError("--tokenizer goes with --from llama2c");
    if (positional.size() != 2) throw tinyai_tools::UsageError("--from tmai takes IN.tmai and OUT.tmai");
    CheckPaths(positional[1], {{"input", positional[0], "a .tmai file"}});
    tinyai::TmaiWriteStats stats;
    TinyAIStatus s = tinyai::ReencodeModel(positional[0].c_str(), positional[1].c_str(), options, !dtype_given, &stats);
    if (s != TINYAI_OK) return tinyai_tools::ReportError("tinyai-convert", s);
    report.Line("wrote " + positional[1] + " from " + positional[0]);
    report.Add("input", tinyai_tools::JsonString(positional[0]));
    PrintStats(&report, options, stats, dtype_given ? nullptr : "as in the input");
    return report.Finish(positional[1]);
  }
  if (from != "llama2c") {
    throw tinyai_tools::UsageError(from.empty() ? "give IN and OUT.tmai (or --synthetic SPEC OUT.tmai, or --dense DEF.txt "
                                                  "OUT.tmai)"
                                                : "unknown --from " + from);
  }
  if (tokenizer.empty() || positional.size() != 2) throw tinyai_tools::UsageError("--from llama2c needs --tokenizer TOK.bin IN.bin OUT.tmai");
  CheckPaths(positional[1], {{"checkpoint", positional[0], "a llama2.c checkpoint file (.bin)"},
                             {"tokenizer", tokenizer, "a llama2.c tokenizer file (.bin)"}});
  tinyai::LlamaShape shape;
  tinyai::TmaiWriteStats stats;
  TinyAIStatus s = tinyai::ConvertLlama2c(positional[0].c_str(), tokenizer.c_str(), positional[1].c_str(), &shape,
                                          options, &stats);
  if (s != TINYAI_OK) return tinyai_tools::ReportError("tinyai-convert", s);
  report.Add("input", tinyai_tools::JsonString(positional[0]));
  PrintShape(&report, shape, positional[1]);
  PrintStats(&report, options, stats);
  return report.Finish(positional[1]);
}

}  // namespace

int main(int argc, char** argv) {
  return tinyai_tools::Main(kTool, kUsage, [&] { return Run(argc, argv); });
}
