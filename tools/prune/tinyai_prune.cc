// tinyai-prune: a .tmai model written again with its weight matrices pruned
// block-sparse (<tinyai/utils/prune.h>: tinyaiPruneModel, then
// tinyaiSaveMappedModel), with a report of what each tensor became and what
// it costs in quality.
//
//   tinyai-prune [--sparsity S] [--block B] [--method M] [--layer N=S ...] [--calibrate N]
//                [--calibration-text FILE] [--eval N] IN.tmai OUT.tmai
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tinyai/utils/prune.h"
#include "tinyai/utils/quantize_mixed.h"
#include "tools/common/args.h"
#include "tools/common/cli.h"
#include "tools/common/rewrite.h"

namespace {

const char kUsage[] =
    "usage: tinyai-prune [--sparsity S] [--block B] [--method M] [--layer N=S ...] [--output-too]\n"
    "                    [--calibrate N] [--calibration-text FILE] [--eval N] [-t THREADS] [-q|--quiet] [--json]\n"
    "                    [-m] IN OUT.tmai\n"
    "       tinyai-prune -h | --help | --version\n"
    "  Writes IN again as OUT with its weight matrices pruned: in every band of B rows, the B x B blocks\n"
    "  that score lowest are removed and never stored, cached or read (docs/pruning.md). The kept values\n"
    "  keep IN's dtype (prune the fp32 or fp16 model; tinyai-quantize OUT then quantizes what is kept).\n"
    "  Streams: holds a few MB besides the model's index (and calibration's statistics).\n"
    "  -m, --model IN  the model to prune (or IN alone, first; .tmai or GGUF)\n"
    "  --sparsity S    the share of each matrix's blocks removed, 0 <= S < 1 (default 0.5)\n"
    "  --block B       blocks of B x B weights: 1 (unstructured), 2, 4, 8, 16, 32 (default 4)\n"
    "  --method M      magnitude: |w|; activation: |w| x the RMS of its inputs (Wanda; measures);\n"
    "                  sparsegpt: activation's choice, kept weights corrected (measures; default activation)\n"
    "  --layer N=S     transformer block N (a dense network: weight matrix N) at sparsity S (repeatable;\n"
    "                  0 keeps it dense)\n"
    "  --output-too    prune the classifier too (default: kept dense)\n"
    "  --calibrate N   positions the model runs to measure its inputs (activation, sparsegpt; default 2048)\n"
    "  --calibration-text FILE  run those on FILE's text (default: a stream the model samples itself);\n"
    "                  FILE (or - for standard input) holds up to 64 bytes per position\n"
    "  --eval N        after writing, compare OUT with IN over N positions (mean/p99 KL, top-1;\n"
    "                  tinyai-eval); 0 skips (default 512; language models only)\n"
    "  -t, --threads N threads pruning (and comparing), 0..256 (default 0 = one per core)\n"
    "  -q, --quiet     no per-tensor table and no progress bar\n"
    "  --json          the report as one JSON object on stdout: input, output, input_bytes, output_bytes,\n"
    "                  peak_rss_bytes, pruned_bytes, tensors [{name, from, to, bytes_in, bytes_out, rel_rms,\n"
    "                  max_abs_err, block, sparsity}], quality {positions, mean_kld, p99_kld, max_kld, top1}\n"
    "                  (null: --eval 0)\n"
    "  -h, --help      this help; --version: the library's version\n";

// A sparsity: a share of blocks removed, in [0, 1).
double ParseSparsity(const std::string& flag, const char* v) {
  const double x = tinyai_tools::ParseFloat(flag, v, 0.0, 1.0);
  if (x >= 1.0) throw tinyai_tools::UsageError(flag + ": " + v + " removes every block; a sparsity is in [0, 1)");
  return x;
}


int Run(int argc, char** argv) {
  TinyAIPruneConfig cfg;
  tinyai_tools::Check(tinyaiInitPruneConfig(&cfg));
  cfg.method = TINYAI_PRUNE_ACTIVATION;
  std::vector<std::string> positional;
  tinyai_tools::RewriteFlags flags;
  std::string calibration_text;
  tinyai_tools::SaveReport report("tinyai-prune");
  namespace tt = tinyai_tools;
  std::string in_flag;
  tt::Args args;
  tt::AddModel(&args, &in_flag);
  args.Flag({"--sparsity"}, [&](const std::string& f, const char* v) { cfg.sparsity = ParseSparsity(f, v); });
  args.Flag({"--block"}, [&](const std::string& f, const char* v) { cfg.blockSize = tt::ParseInt32(f, v, 0, 1 << 20); });
  args.Flag({"--method"}, [&](const std::string& f, const char* v) {
    if (tinyaiParsePruneMethod(v, &cfg.method) != TINYAI_OK) throw tt::UsageError(f + ": " + tinyaiGetLastErrorMessage());
  });
  args.Flag({"--layer"}, [&](const std::string& f, const char* value) {
    const std::string v = value;
    const size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) {
      throw tt::UsageError(f + " takes N=SPARSITY, got '" + v + "'");
    }
    const int32_t n = tt::ParseInt32(f, v.substr(0, eq).c_str(), 0, TINYAI_PRUNE_MAX_LAYERS - 1,
                                     "a transformer block's index");
    cfg.layerSparsity[n] = ParseSparsity(f, v.substr(eq + 1).c_str());
  });
  args.On({"--output-too"}, [&] { cfg.pruneOutput = 1; });
  tt::AddRewriteFlags(&args, &flags, &cfg.calibrationTokens, &report);
  int exit_code = 0;
  if (!args.Parse(argc, argv, "tinyai-prune", kUsage, &positional, &exit_code)) return exit_code;
  positional.insert(positional.begin(), tt::TakeModel(in_flag, &positional));
  if (positional.size() != 2) throw tinyai_tools::UsageError("give IN and OUT.tmai ([-m] IN OUT.tmai)");
  const std::string& in = positional[0];
  const std::string& out = positional[1];
  tinyai_tools::CheckOutputPath(out, "OUT.tmai");
  if (!flags.calibration_file.empty()) {
    // Calibration takes the text's first N tokens (--calibrate N): more
    // than N tokens' worth of bytes would never be read.
    calibration_text = tinyai_tools::ReadCalibrationText(flags.calibration_file, cfg.calibrationTokens);
    cfg.calibrationText = calibration_text.c_str();
  }

  // A small cache: the matrices pruned are read straight from the file; the
  // rest stream through it a slice at a time.
  TinyAIMmapConfig mc = tinyaiCreateDefaultMmapConfig();
  mc.maxCacheSize = 16u << 20;
  mc.prefetchEnabled = false;
  mc.prefetchThreads = 0;
  tinyai_tools::ModelHandle model = tinyai_tools::OpenModel(in, &mc);
  tinyai_tools::Check(tinyaiPruneModel(model.get(), &cfg));
  const size_t saved = tinyaiCalculatePruningSavings(model.get());
  TinyAISaveOptions so = tinyaiCreateDefaultSaveOptions();
  so.progress = tinyai_tools::SaveReport::OnTensor;
  so.progressUser = &report;
  so.threads = flags.threads;
  tinyai_tools::Check(tinyaiSaveMappedModel(model.get(), out.c_str(), &so));
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const uint64_t peak_rss = static_cast<uint64_t>(ru.ru_maxrss) * 1024u;

  uint64_t before = 0, after = 0;
  for (const TinyAISaveProgress& p : report.rows) {
    before += p.bytesBefore;
    after += p.bytesAfter;
  }
  std::string rows;  // --json's
  if (report.table || flags.json) {
    if (!flags.json) {
      std::printf("%-28s %-9s %6s %9s %12s %12s %10s\n", "tensor", "dtype", "block", "sparsity", "bytes in",
                  "bytes out", "rel. RMS");
    }
    for (size_t i = 0; i < report.rows.size(); ++i) {
      const TinyAISaveProgress& p = report.rows[i];
      TinyAITensorSparsity sp;
      std::memset(&sp, 0, sizeof sp);
      sp.structSize = sizeof sp;
      tinyai_tools::Check(tinyaiGetTensorSparsity(model.get(), p.tensorIndex, &sp));
      if (flags.json) {
        rows += (i ? "," : "") +
                tinyai_tools::TensorJson(report.names[i], p,
                                         ",\"block\":" + std::to_string(sp.blockSize) + ",\"sparsity\":" +
                                             tinyai_tools::JsonNumber(sp.blockSize > 0 ? sp.sparsity : 0.0));
        continue;
      }
      char block[32] = "-", sparsity[32] = "-";
      if (sp.blockSize > 0) {
        std::snprintf(block, sizeof block, "%dx%d", sp.blockSize, sp.blockSize);
        std::snprintf(sparsity, sizeof sparsity, "%.1f%%", 100.0 * sp.sparsity);
      }
      std::printf("%-28s %-9s %6s %9s %12llu %12llu %10.3g\n", report.names[i].c_str(),
                  tinyaiDTypeName(p.savedDType), block, sparsity, static_cast<unsigned long long>(p.bytesBefore),
                  static_cast<unsigned long long>(p.bytesAfter), p.relativeRmsError);
    }
  }
  const uint64_t in_size = tinyaiGetMappedModelFileSize(model.get());
  uint64_t out_size = 0;
  tinyai_tools::Check(tinyaiGetSavedModelSize(model.get(), &out_size));
  if (!flags.json) {
    std::printf("%s -> %s: %s -> %s (%.2fx smaller; tensors %s -> %s; pruning saves %s); peak RSS %s\n", in.c_str(),
                out.c_str(), tinyai_tools::MibText(in_size).c_str(), tinyai_tools::MibText(out_size).c_str(),
                static_cast<double>(in_size) / static_cast<double>(out_size), tinyai_tools::MibText(before).c_str(),
                tinyai_tools::MibText(after).c_str(), tinyai_tools::MibText(saved).c_str(),
                tinyai_tools::MibText(peak_rss).c_str());
  }
  model.reset();

  const tinyai_tools::Quality q = tinyai_tools::CompareWithInput(in, out, flags.eval_tokens, flags.threads,
                                                                 report.bar.on(), "tinyai-prune", flags.json);
  if (flags.json) {
    std::fputs(tinyai_tools::RewriteJson(in, out, in_size, out_size, before, after, peak_rss,
                                         ",\"pruned_bytes\":" + std::to_string(saved), rows, q)
                   .c_str(),
               stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tinyai_tools::Main("tinyai-prune", kUsage, [&] { return Run(argc, argv); });
}
