// What the tools that write a model again share (tinyai-quantize,
// tinyai-prune): their common flags, the calibration text read within its
// bound, the progress bar and per-tensor rows of tinyaiSaveMappedModel's
// progress, the comparison of the written model with its input
// (tinyai-eval's), and the --json report.
#ifndef TINYAI_TOOLS_COMMON_REWRITE_H_
#define TINYAI_TOOLS_COMMON_REWRITE_H_

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tinyai/utils/quantize_mixed.h"
#include "tools/common/args.h"
#include "tools/common/cli.h"
#include "tools/common/progress.h"
#include "tools/eval/compare.h"

namespace tinyai_tools {

// The calibration text in file (or - for standard input): calibration reads
// its first `tokens` positions, so more than tokens x kTextBytesPerToken
// bytes is refused by its size, and so are an empty text and one holding a
// NUL byte (each naming the file).
inline std::string ReadCalibrationText(const std::string& file, int32_t tokens) {
  const std::string what = "the calibration text '" + file + "'";
  InputBound bound;
  bound.bytes = static_cast<uint64_t>(tokens) * kTextBytesPerToken;
  bound.status = TINYAI_ERR_INVALID_ARGUMENT;
  bound.rule = "--calibrate " + std::to_string(tokens) + " positions at up to " + std::to_string(kTextBytesPerToken) +
               " bytes a token: calibration reads no further";
  bound.fix = "give its first " + std::to_string(bound.bytes) + " bytes (head -c " + std::to_string(bound.bytes) +
              "), or a larger --calibrate N";
  std::string text = ReadInput(file, what, bound);
  if (text.empty()) throw RuntimeError(TINYAI_ERR_INVALID_ARGUMENT, what + " is empty; give a text to calibrate on");
  if (text.find('\0') != std::string::npos) {
    throw RuntimeError(TINYAI_ERR_INVALID_ARGUMENT, what + " holds a NUL byte at offset " +
                                                        std::to_string(text.find('\0')) + "; a calibration text is text");
  }
  return text;
}

// What tinyaiSaveMappedModel reported, a tensor at a time, with a progress
// bar on stderr when it is a terminal.
struct SaveReport {
  explicit SaveReport(const char* tool_name) : tool(tool_name), bar(tool_name) {}
  const char* tool;
  bool table = true;
  ProgressBar bar;
  std::vector<TinyAISaveProgress> rows;
  std::vector<std::string> names;

  // TinyAISaveOptions' progress callback, user = the report.
  static int OnTensor(void* user, const TinyAISaveProgress* p) {
    SaveReport* r = static_cast<SaveReport*>(user);
    r->rows.push_back(*p);
    r->names.emplace_back(p->tensorName);
    // By tensors at the end (a file of no bytes still ends its line), by bytes before.
    char detail[96];
    std::snprintf(detail, sizeof detail, "tensor %d/%d %-24.24s", p->tensorIndex + 1, p->tensorCount, p->tensorName);
    if (p->tensorIndex + 1 == p->tensorCount) r->bar.Update(1, 1, detail);
    else r->bar.Update(static_cast<int64_t>(p->bytesDone), static_cast<int64_t>(p->bytesTotal), detail);
    return 0;
  }
};

// The flags both tools take alike: --calibrate N (into the config's
// calibrationTokens), --calibration-text FILE, --eval N, -t, -q (no table,
// no bar) and --json (the report as one object on stdout).
struct RewriteFlags {
  std::string calibration_file;
  int64_t eval_tokens = 512;
  int32_t threads = 0;
  bool json = false;
};
inline void AddRewriteFlags(Args* args, RewriteFlags* flags, int32_t* calibration_tokens, SaveReport* report) {
  args->Flag({"--calibrate"}, [calibration_tokens](const std::string& f, const char* v) {
    *calibration_tokens = ParseInt32(f, v, 0, 1000000);
  });
  args->Flag({"--calibration-text"}, [flags](const std::string&, const char* v) { flags->calibration_file = v; });
  args->Flag({"--eval"}, [flags](const std::string& f, const char* v) {
    flags->eval_tokens = ParseInt(f, v, 0, 100000000);
  });
  AddThreads(args, &flags->threads);
  args->On({"-q", "--quiet"}, [report] {
    report->table = false;
    report->bar.Silence();
  });
  AddJson(args, &flags->json);
}

// The written model against its input: compared (positions > 0) or not, and
// whether the input is a language model (else there is nothing to compare).
struct Quality {
  bool compared = false;
  bool language_model = true;
  CompareResult r;
  uint64_t seed = 0;
};

// Compares out with in over `tokens` positions (tinyai-eval's mean and p99
// KL and top-1) and prints the line unless json; a model that is not a
// language model gets a line saying so. 0 tokens: nothing.
inline Quality CompareWithInput(const std::string& in, const std::string& out, int64_t tokens, int32_t threads,
                                bool bar, const char* tool, bool json = false) {
  Quality q;
  if (tokens <= 0) return q;
  ModelHandle ref_model = OpenModel(in, nullptr);
  int64_t dim = 0;
  if (tinyaiGetMetadataInt(ref_model.get(), "llama.dim", &dim) != TINYAI_OK) {
    if (!json) std::printf("quality: not a language model; no comparison\n");
    q.language_model = false;
    return q;
  }
  ModelHandle new_model = OpenModel(out, nullptr);
  TinyAILLMConfig lc = tinyaiCreateDefaultLLMConfig();
  lc.threads = threads;
  LLMHandle ref = CreateLLM(ref_model.get(), lc);
  LLMHandle llm = CreateLLM(new_model.get(), lc);
  CompareOptions co;
  co.tokens = tokens;
  ProgressBar progress(tool, "comparing", !bar);
  const CompareResult r = CompareModels(ref.get(), llm.get(), co,
                                        [&](int64_t done, int64_t total) { progress.Update(done, total); });
  q.compared = true;
  q.r = r;
  q.seed = co.seed;
  if (json) return q;
  std::printf("quality against %s over %lld positions (seed %llu; tinyai-eval --ref IN OUT --tokens N for more): "
              "mean KL %.6g  p99 KL %.6g  top-1 agreement %.4f\n",
              in.c_str(), static_cast<long long>(r.positions), static_cast<unsigned long long>(co.seed), r.mean_kld,
              r.p99_kld, r.top1);
  return q;
}

// The --json report: one object with the files, their sizes, the peak RSS,
// extra (",\"key\":value..." of the tool's own), each tensor's row (rows:
// the objects, comma-separated) and the quality (null when not compared).
inline std::string RewriteJson(const std::string& in, const std::string& out, uint64_t in_size, uint64_t out_size,
                               uint64_t tensors_in, uint64_t tensors_out, uint64_t peak_rss, const std::string& extra,
                               const std::string& rows, const Quality& q) {
  auto u = [](uint64_t v) { return std::to_string(v); };
  std::string j = "{\"input\":" + JsonString(in) + ",\"output\":" + JsonString(out) + ",\"input_bytes\":" +
                  u(in_size) + ",\"output_bytes\":" + u(out_size) + ",\"tensor_bytes_in\":" + u(tensors_in) +
                  ",\"tensor_bytes_out\":" + u(tensors_out) + ",\"peak_rss_bytes\":" + u(peak_rss) + extra +
                  ",\"tensors\":[" + rows + "],\"quality\":";
  if (!q.compared) {
    j += q.language_model ? "null" : "\"not a language model\"";
  } else {
    j += "{\"positions\":" + std::to_string(q.r.positions) + ",\"seed\":" + u(q.seed) + ",\"mean_kld\":" +
         JsonNumber(q.r.mean_kld) + ",\"p99_kld\":" + JsonNumber(q.r.p99_kld) + ",\"max_kld\":" +
         JsonNumber(q.r.max_kld) + ",\"top1\":" + JsonNumber(q.r.top1) + "}";
  }
  return j + "}\n";
}

// A tensor's row of the --json report: name, from, to, bytes_in, bytes_out,
// rel_rms, max_abs_err, then extra (",\"key\":value..." of the tool's own).
inline std::string TensorJson(const std::string& name, const TinyAISaveProgress& p, const std::string& extra) {
  return "{\"name\":" + JsonString(name) + ",\"from\":" + JsonString(tinyaiDTypeName(p.storedDType)) + ",\"to\":" +
         JsonString(tinyaiDTypeName(p.savedDType)) + ",\"bytes_in\":" + std::to_string(p.bytesBefore) +
         ",\"bytes_out\":" + std::to_string(p.bytesAfter) + ",\"rel_rms\":" + JsonNumber(p.relativeRmsError) +
         ",\"max_abs_err\":" + JsonNumber(p.maxAbsError) + extra + "}";
}

}  // namespace tinyai_tools

#endif  // TINYAI_TOOLS_COMMON_REWRITE_H_
