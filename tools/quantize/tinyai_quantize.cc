// tinyai-quantize: a .tmai model written again with its matrices at chosen
// precisions (<tinyai/utils/quantize_mixed.h>: tinyaiApplyMixedPrecision,
// then tinyaiSaveMappedModel), with a report of what each tensor became.
//
//   tinyai-quantize [--all P] [--embedding P] [--attention P] [--ffn P] [--output P]
//                   [--layer N=P ...] [--tensor NAME=P ...] [--group G] [--eval N] IN.tmai OUT.tmai
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <cstring>
#include <cstdio>
#include <string>
#include <vector>

#include "tinyai/utils/quantize_mixed.h"
#include "tools/common/args.h"
#include "tools/common/cli.h"
#include "tools/common/rewrite.h"

namespace {

const char kUsage[] =
    "usage: tinyai-quantize [--all P] [--embedding P] [--attention P] [--ffn P] [--output P]\n"
    "                       [--layer N=P ...] [--tensor NAME=P ...] [--group G] [--calibrate N] [--calibration-text FILE]\n"
    "                       [--no-error-feedback] [--eval N] [-t THREADS] [-q|--quiet] [--json] [-m] IN OUT.tmai [P]\n"
    "       tinyai-quantize -h | --help | --version\n"
    "  Writes IN (a .tmai or GGUF; -m IN too) again as OUT with its weight matrices at precision P, as\n"
    "  llama-quantize takes it after OUT (Q4_0, q8_0, ...: every matrix, as --all P), one of fp32 fp16 int8 int4\n"
    "  (int4: the non-uniform 4-bit grid, GGUF IQ4_NL) int4-sym (GGUF Q4_0) q4_k q5_k q6_k q5_0 q5_1\n"
    "  (GGUF's block formats) keep (as IN stores it); GGUF's f32 f16 q8_0 iq4_nl q4_0 are accepted too.\n"
    "  A K-quant needs rows of whole blocks of 256: other rows fall back as llama.cpp's do (q4_k to q5_0,\n"
    "  q5_k to q5_1, q6_k to int8), which the table shows.\n"
    "  Norms and biases stay as stored. Streams: holds a few MB besides the model's index.\n"
    "  -m, --model IN  the model to quantize (or IN alone, first)\n"
    "  --all P         every matrix (then the options below refine it)\n"
    "  --embedding P   the token embedding (default int8)\n"
    "  --attention P   q, k, v and output projections (default int4)\n"
    "  --ffn P         gate, up and down projections; a dense network's matrices (default int4)\n"
    "  --output P      the classifier (default int8; a tied classifier is the embedding: the finer wins)\n"
    "  --layer N=P     every matrix of transformer block N (repeatable)\n"
    "  --tensor NAME=P one tensor by name (repeatable; wins over --layer)\n"
    "  --group G       values per scale for int8/int4 (32, the only size with kernels)\n"
    "  --calibrate N   round each int8/int4 matrix for the inputs it meets over N positions the model\n"
    "                  runs first: error feedback (GPTQ) and scale searches weighted by the inputs\n"
    "                  (0..1000000; default 0 = none; 2048 pays; language models only). Holds 4 x cols^2\n"
    "                  bytes per distinct matrix input (110M: 275 MiB)\n"
    "  --calibration-text FILE  run those on FILE's text (default: a stream the model samples itself;\n"
    "                  N defaults to 2048); FILE (or - for standard input) holds up to 64 bytes per position\n"
    "                  (N x 64: 128 KiB for 2048), what N positions can read\n"
    "  --no-error-feedback  calibrate the scale searches' weights only (4 x cols bytes per input)\n"
    "  --eval N        after writing, compare OUT with IN over N positions (mean/p99 KL, top-1;\n"
    "                  tinyai-eval); 0 skips (default 512; language models only)\n"
    "  -t, --threads N threads encoding (and comparing), 0..256 (default 0 = one per core)\n"
    "  -q, --quiet     no per-tensor table and no progress bar\n"
    "  --json          the report as one JSON object on stdout: input, output, input_bytes, output_bytes,\n"
    "                  peak_rss_bytes, tensors [{name, from, to, bytes_in, bytes_out, rel_rms, max_abs_err,\n"
    "                  fallback_for}], quality {positions, mean_kld, p99_kld, max_kld, top1} (null: --eval 0)\n"
    "  -h, --help      this help; --version: the library's version\n";

// "N=P" or "NAME=P".
std::pair<std::string, TinyAIPrecision> ParseAssignment(const std::string& flag, const std::string& v) {
  const size_t eq = v.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) {
    throw tinyai_tools::UsageError(flag + " takes WHAT=PRECISION, got '" + v + "'");
  }
  TinyAIPrecision p;
  const std::string name = v.substr(eq + 1);
  if (tinyaiParsePrecision(name.c_str(), &p) != TINYAI_OK) {
    throw tinyai_tools::UsageError(flag + " " + v + ": " + tinyaiGetLastErrorMessage());
  }
  return {v.substr(0, eq), p};
}

TinyAIPrecision ParsePrecision(const std::string& flag, const char* v) {
  TinyAIPrecision p;
  if (tinyaiParsePrecision(v, &p) != TINYAI_OK) throw tinyai_tools::UsageError(flag + ": " + tinyaiGetLastErrorMessage());
  return p;
}

bool IsKQuant(TinyAIPrecision p) { return p == TINYAI_PREC_Q4_K || p == TINYAI_PREC_Q5_K || p == TINYAI_PREC_Q6_K; }

// Says which matrices took llama.cpp's fallback for a K-quant (rows that
// are not whole blocks of 256 values), as llama-quantize does: a matrix
// whose rows are not, stored in a fallback's dtype, when a K-quant was asked
// for anywhere (on stderr when say). Returns them: tensor name -> the
// K-quant asked for.
std::map<std::string, std::string> ReportFallbacks(const TinyAIMappedModel* model, const TinyAIMixedPrecisionConfig& cfg,
                                                   const std::vector<TinyAIPrecisionOverride>& overrides, bool say) {
  bool asked = IsKQuant(cfg.embeddingPrecision) || IsKQuant(cfg.attentionPrecision) || IsKQuant(cfg.ffnPrecision) ||
               IsKQuant(cfg.outputPrecision);
  for (const TinyAIPrecisionOverride& o : overrides) asked |= IsKQuant(o.precision);
  std::map<std::string, std::string> fell;
  if (!asked) return fell;
  for (int t = 0; t < tinyaiGetMappedTensorCount(model); ++t) {
    TinyAITensorInfo info;
    info.structSize = sizeof info;
    if (tinyaiGetMappedTensorInfo(model, t, &info) != TINYAI_OK || info.nDims != 2 || info.shape[1] % 256 == 0) continue;
    TinyAIPrecision p = TINYAI_PREC_AS_STORED;
    if (tinyaiGetTensorPrecision(model, t, &p) != TINYAI_OK) continue;
    const char* of = p == TINYAI_PREC_Q5_0 ? "q4_k" : p == TINYAI_PREC_Q5_1 ? "q5_k" : p == TINYAI_PREC_INT8 ? "q6_k" : nullptr;
    if (of == nullptr) continue;
    fell[info.name] = of;
    if (!say) continue;
    std::fprintf(stderr, "tinyai-quantize: %s: rows of %llu values are not whole blocks of 256 (a K-quant's): %s, "
                 "llama.cpp's fallback for %s\n", info.name, static_cast<unsigned long long>(info.shape[1]),
                 tinyaiPrecisionName(p), of);
  }
  return fell;
}

int Run(int argc, char** argv) {
  TinyAIMixedPrecisionConfig cfg;
  tinyai_tools::Check(tinyaiInitMixedPrecisionConfig(&cfg));
  std::vector<std::pair<std::string, TinyAIPrecision>> layers, tensors;
  std::vector<std::string> positional;
  tinyai_tools::RewriteFlags flags;
  std::string calibration_text;
  tinyai_tools::SaveReport report("tinyai-quantize");
  namespace tt = tinyai_tools;
  std::string in_flag;
  bool all_given = false;
  tt::Args args;
  tt::AddModel(&args, &in_flag);
  args.Flag({"--all"}, [&](const std::string& f, const char* v) {
    const TinyAIPrecision p = ParsePrecision(f, v);
    cfg.embeddingPrecision = cfg.attentionPrecision = cfg.ffnPrecision = cfg.outputPrecision = p;
    all_given = true;
  });
  args.Flag({"--embedding"}, [&](const std::string& f, const char* v) { cfg.embeddingPrecision = ParsePrecision(f, v); });
  args.Flag({"--attention"}, [&](const std::string& f, const char* v) { cfg.attentionPrecision = ParsePrecision(f, v); });
  args.Flag({"--ffn"}, [&](const std::string& f, const char* v) { cfg.ffnPrecision = ParsePrecision(f, v); });
  args.Flag({"--output"}, [&](const std::string& f, const char* v) { cfg.outputPrecision = ParsePrecision(f, v); });
  args.Flag({"--layer"}, [&](const std::string& f, const char* v) {
    auto lp = ParseAssignment(f, v);
    tt::ParseInt32(f, lp.first.c_str(), 0, 65535, "a transformer block's index");
    layers.push_back(lp);
  });
  args.Flag({"--tensor"}, [&](const std::string& f, const char* v) { tensors.push_back(ParseAssignment(f, v)); });
  args.Flag({"--group"}, [&](const std::string& f, const char* v) { cfg.groupSize = tt::ParseInt32(f, v, 0, 1 << 20); });
  args.On({"--no-error-feedback"}, [&] { cfg.calibrationErrorFeedback = 0; });
  tt::AddRewriteFlags(&args, &flags, &cfg.calibrationTokens, &report);
  int exit_code = 0;
  if (!args.Parse(argc, argv, "tinyai-quantize", kUsage, &positional, &exit_code)) return exit_code;
  positional.insert(positional.begin(), tt::TakeModel(in_flag, &positional));
  // llama-quantize's order: IN OUT TYPE, the type for every matrix.
  if (positional.size() == 3) {
    if (all_given) throw tt::UsageError("the precision twice: --all and '" + positional[2] + "' after OUT");
    const TinyAIPrecision p = ParsePrecision("PRECISION", positional[2].c_str());
    cfg.embeddingPrecision = cfg.attentionPrecision = cfg.ffnPrecision = cfg.outputPrecision = p;
    positional.pop_back();
  }
  if (positional.size() != 2) throw tinyai_tools::UsageError("give IN and OUT.tmai ([-m] IN OUT.tmai [PRECISION])");
  const std::string& in = positional[0];
  const std::string& out = positional[1];
  std::vector<TinyAIPrecisionOverride> overrides;
  for (const auto& l : layers) overrides.push_back({std::stoi(l.first), nullptr, l.second});
  for (const auto& t : tensors) overrides.push_back({-1, t.first.c_str(), t.second});
  tinyai_tools::CheckOutputPath(out, "OUT.tmai");
  if (!flags.calibration_file.empty()) {
    // Calibration takes the text's first N tokens (--calibrate N): more
    // than N tokens' worth of bytes would never be read.
    if (cfg.calibrationTokens == 0) cfg.calibrationTokens = 2048;
    calibration_text = tinyai_tools::ReadCalibrationText(flags.calibration_file, cfg.calibrationTokens);
    cfg.calibrationText = calibration_text.c_str();
  }
  cfg.overrides = overrides.data();
  cfg.overrideCount = overrides.size();

  // A small cache: the matrices that change are read straight from the file;
  // the rest stream through it a slice at a time.
  TinyAIMmapConfig mc = tinyaiCreateDefaultMmapConfig();
  mc.maxCacheSize = 16u << 20;
  mc.prefetchEnabled = false;
  mc.prefetchThreads = 0;
  tinyai_tools::ModelHandle model = tinyai_tools::OpenModel(in, &mc);
  tinyai_tools::Check(tinyaiApplyMixedPrecision(model.get(), &cfg));
  const std::map<std::string, std::string> fell = ReportFallbacks(model.get(), cfg, overrides, !flags.json);
  TinyAISaveOptions so = tinyaiCreateDefaultSaveOptions();
  so.progress = tinyai_tools::SaveReport::OnTensor;
  so.progressUser = &report;
  so.threads = flags.threads;
  tinyai_tools::Check(tinyaiSaveMappedModel(model.get(), out.c_str(), &so));
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const uint64_t peak_rss = static_cast<uint64_t>(ru.ru_maxrss) * 1024u;

  uint64_t before = 0, after = 0, largest = 0;
  for (const TinyAISaveProgress& p : report.rows) {
    before += p.bytesBefore;
    after += p.bytesAfter;
    largest = std::max<uint64_t>(largest, std::max(p.bytesBefore, p.bytesAfter));
  }
  if (report.table && !flags.json) {
    std::printf("%-28s %-9s %-9s %12s %12s %10s %10s\n", "tensor", "from", "to", "bytes in", "bytes out",
                "rel. RMS", "max |err|");
    for (size_t i = 0; i < report.rows.size(); ++i) {
      const TinyAISaveProgress& p = report.rows[i];
      std::printf("%-28s %-9s %-9s %12llu %12llu %10.3g %10.3g\n", report.names[i].c_str(),
                  tinyaiDTypeName(p.storedDType), tinyaiDTypeName(p.savedDType),
                  static_cast<unsigned long long>(p.bytesBefore), static_cast<unsigned long long>(p.bytesAfter),
                  p.relativeRmsError, p.maxAbsError);
    }
  }
  const uint64_t in_size = tinyaiGetMappedModelFileSize(model.get());
  uint64_t out_size = 0;
  tinyai_tools::Check(tinyaiGetSavedModelSize(model.get(), &out_size));
  if (!flags.json) {
    std::printf("%s -> %s: %s -> %s (%.2fx smaller; tensors %s -> %s); peak RSS %s (largest tensor %s)\n", in.c_str(),
                out.c_str(), tinyai_tools::MibText(in_size).c_str(), tinyai_tools::MibText(out_size).c_str(),
                static_cast<double>(in_size) / static_cast<double>(out_size), tinyai_tools::MibText(before).c_str(),
                tinyai_tools::MibText(after).c_str(), tinyai_tools::MibText(peak_rss).c_str(),
                tinyai_tools::MibText(largest).c_str());
  }
  model.reset();

  const tinyai_tools::Quality q = tinyai_tools::CompareWithInput(in, out, flags.eval_tokens, flags.threads,
                                                                 report.bar.on(), "tinyai-quantize", flags.json);
  if (flags.json) {
    std::string rows;
    for (size_t i = 0; i < report.rows.size(); ++i) {
      const auto f = fell.find(report.names[i]);
      rows += (i ? "," : "") + tinyai_tools::TensorJson(report.names[i], report.rows[i],
                                                        ",\"fallback_for\":" + (f == fell.end() ? std::string("null")
                                                                               : tinyai_tools::JsonString(f->second)));
    }
    std::fputs(tinyai_tools::RewriteJson(in, out, in_size, out_size, before, after, peak_rss,
                                         ",\"largest_tensor_bytes\":" + std::to_string(largest), rows, q)
                   .c_str(),
               stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tinyai_tools::Main("tinyai-quantize", kUsage, [&] { return Run(argc, argv); });
}
