// --memory-report FILE and --memory-trace FILE: the recording allocator's
// snapshots (tinyaiSetMemoryObserver) at each stage of a run, beside the
// process's memory from the OS, written as JSON (the report) and CSV (the
// trace, one row per token; tinyai-memplot draws it).
//
//   tt::MemoryRecorder rec(kTool, report_path, trace_path, {model_path});  // before the model opens
//   ... open, create, generate; destroy the LLM and close the model ...
//   rec.Finish();   // writes; a run that throws writes what it saw as it unwinds
#ifndef TINYAI_TOOLS_COMMON_MEMORY_REPORT_H_
#define TINYAI_TOOLS_COMMON_MEMORY_REPORT_H_

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "tinyai/memory.h"
#include "tools/common/cli.h"
#include "tools/common/output.h"

namespace tinyai_tools {

// Positions between snapshots: a report's, and a trace's (every token).
constexpr int32_t kReportEveryTokens = 16;

class MemoryRecorder {
 public:
  // inputs: the files the run reads (never written over).
  MemoryRecorder(const char* tool, std::string report_path, std::string trace_path,
                 const std::vector<std::string>& inputs)
      : tool_(tool), report_path_(std::move(report_path)), trace_path_(std::move(trace_path)) {
    if (!active()) return;
    if (!report_path_.empty() && !trace_path_.empty() &&
        (report_path_ == trace_path_ || SameExistingFile(report_path_, trace_path_))) {
      throw UsageError("--memory-report and --memory-trace name one file '" + report_path_ + "'; give two");
    }
    // Before any work: a path that cannot be written is said now, not after
    // the run (nothing is written yet; the files appear when the run ends).
    if (!report_path_.empty()) CheckWritable(report_path_, "--memory-report", inputs);
    if (!trace_path_.empty()) CheckWritable(trace_path_, "--memory-trace", inputs);
    start_ = std::chrono::steady_clock::now();
    baseline_.structSize = sizeof baseline_;
    Check(tinyaiGetMemorySnapshot(&baseline_));
    Check(tinyaiSetMemoryObserver(&MemoryRecorder::Observe, this,
                                  trace_path_.empty() ? kReportEveryTokens : 1));
  }
  ~MemoryRecorder() {
    if (!active() || finished_) return;
    tinyaiSetMemoryObserver(nullptr, nullptr, 0);
    try {
      Write(false);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s\n", tool_, e.what());
    }
  }
  MemoryRecorder(const MemoryRecorder&) = delete;
  MemoryRecorder& operator=(const MemoryRecorder&) = delete;

  bool active() const { return !report_path_.empty() || !trace_path_.empty(); }

  // Adds "key": value to the report's run object (a JSON value as text).
  void Note(const std::string& key, const std::string& json_value) {
    notes_ += (notes_.empty() ? "" : ",") + JsonString(key) + ":" + json_value;
  }

  // After the LLM is destroyed and the model closed: writes the files.
  void Finish() {
    if (!active() || finished_) return;
    finished_ = true;
    tinyaiSetMemoryObserver(nullptr, nullptr, 0);
    Write(true);
  }

 private:
  struct Row {
    TinyAIMemorySnapshot s;
    double ms;
  };

  // Called from the core (built without exceptions): nothing may escape.
  static void Observe(const TinyAIMemorySnapshot* s, void* user) noexcept {
    auto* self = static_cast<MemoryRecorder*>(user);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - self->start_).count();
    try {
      self->rows_.push_back(Row{*s, ms});
    } catch (...) {
      ++self->lost_;  // out of memory for the trace: said in the report
    }
  }

  static std::string U(uint64_t v) { return std::to_string(v); }
  static std::string I(int64_t v) { return std::to_string(v); }

  // What the OS's anonymous pages hold beyond TinyAI's account (negative:
  // TinyAI reserved pages it has not touched).
  static int64_t Unaccounted(const TinyAIMemorySnapshot& s, const TinyAIMemorySnapshot& base) {
    const uint64_t touched = s.totalBytes - (s.kvReservedBytes - s.kvTouchedBytes);
    return static_cast<int64_t>(s.rssAnonBytes) - static_cast<int64_t>(base.rssAnonBytes) -
           static_cast<int64_t>(touched);
  }

  std::string SnapshotJson(const Row& r) const {
    const TinyAIMemorySnapshot& s = r.s;
    std::string j = "{\"stage\":" + JsonString(s.stageName) + ",\"tokens\":" + I(s.tokens) + ",\"ms\":" +
                    std::to_string(static_cast<int64_t>(r.ms)) + ",\"bytes\":{";
    for (int c = 0; c < TINYAI_MEMORY_CATEGORY_COUNT; ++c) {
      j += (c ? "," : "") + JsonString(tinyaiMemoryCategoryName(static_cast<TinyAIMemoryCategory>(c))) + ":" +
           U(s.bytes[c]);
    }
    j += "},\"total_bytes\":" + U(s.totalBytes) + ",\"stage_peak_bytes\":" + U(s.stagePeakBytes) +
         ",\"header_bytes\":" + U(s.headerBytes) + ",\"allocations\":" + U(s.allocations) +
         ",\"kv_reserved_bytes\":" + U(s.kvReservedBytes) + ",\"kv_touched_bytes\":" + U(s.kvTouchedBytes);
    if (s.rssKnown) {
      j += ",\"rss_bytes\":" + U(s.rssBytes) + ",\"rss_anon_bytes\":" + U(s.rssAnonBytes) +
           ",\"rss_file_bytes\":" + U(s.rssFileBytes) + ",\"peak_rss_bytes\":" + U(s.peakRssBytes) +
           ",\"anon_beyond_account_bytes\":" + I(Unaccounted(s, baseline_));
    }
    return j + "}";
  }

  void Write(bool completed) const {
    if (!report_path_.empty()) WriteReport(completed);
    if (!trace_path_.empty()) WriteTrace();
  }

  void WriteReport(bool completed) const {
    uint64_t peak = baseline_.totalBytes, peak_rss = baseline_.peakRssBytes;
    uint64_t cat_peak[TINYAI_MEMORY_CATEGORY_COUNT] = {};
    const Row* at_peak_rss = nullptr;
    uint64_t most_rss = 0;
    uint64_t kv_reserved = 0, kv_touched = 0;
    for (const Row& r : rows_) {
      if (r.s.peakTotalBytes > peak) peak = r.s.peakTotalBytes;
      if (r.s.peakRssBytes > peak_rss) peak_rss = r.s.peakRssBytes;
      for (int c = 0; c < TINYAI_MEMORY_CATEGORY_COUNT; ++c) {
        if (r.s.peakBytes[c] > cat_peak[c]) cat_peak[c] = r.s.peakBytes[c];
      }
      if (r.s.rssKnown && r.s.rssBytes >= most_rss) {
        most_rss = r.s.rssBytes;
        at_peak_rss = &r;
      }
      if (r.s.kvReservedBytes > kv_reserved) {
        kv_reserved = r.s.kvReservedBytes;
        kv_touched = r.s.kvTouchedBytes;
      } else if (r.s.kvReservedBytes == kv_reserved && r.s.kvTouchedBytes > kv_touched) {
        kv_touched = r.s.kvTouchedBytes;
      }
    }
    std::string j = "{\"tool\":" + JsonString(tool_) + ",\"completed\":" + (completed ? "true" : "false") +
                    ",\"snapshots_lost\":" + U(lost_) +
                    ",\"peak_bytes\":" + U(peak) + ",\"peak_rss_bytes\":" + U(peak_rss) + ",\"peak_by_category\":{";
    for (int c = 0; c < TINYAI_MEMORY_CATEGORY_COUNT; ++c) {
      j += (c ? "," : "") + JsonString(tinyaiMemoryCategoryName(static_cast<TinyAIMemoryCategory>(c))) + ":" +
           U(cat_peak[c]);
    }
    j += "},\"run\":{" + notes_ + "}";
    j += ",\"before_open\":" + SnapshotJson(Row{baseline_, 0.0});
    // Where the two sides differ, and why.
    j += ",\"differences\":{\"kv_reserved_bytes\":" + U(kv_reserved) + ",\"kv_untouched_bytes\":" +
         U(kv_reserved - kv_touched) +
         ",\"kv_untouched_why\":\"the KV cache is reserved for the whole context; the OS gives a page when a "
         "position's row is first written, so RSS counts only the positions reached\"";
    if (at_peak_rss) {
      const TinyAIMemorySnapshot& s = at_peak_rss->s;
      j += ",\"at_peak_rss\":{\"stage\":" + JsonString(s.stageName) + ",\"tokens\":" + I(s.tokens) +
           ",\"rss_bytes\":" + U(s.rssBytes) + ",\"accounted_bytes\":" + U(s.totalBytes) +
           ",\"process_before_open_anon_bytes\":" + U(baseline_.rssAnonBytes) +
           ",\"file_bytes\":" + U(s.rssFileBytes) +
           ",\"anon_beyond_account_bytes\":" + I(Unaccounted(s, baseline_)) +
           ",\"why\":\"RSS = anonymous + file pages. Anonymous: what the process held before the model opened "
           "(code's data, the C library), TinyAI's account less the KV pages not yet touched, and beyond it the "
           "C library's own (its heap's bookkeeping and free lists, thread stacks, the tool's own buffers). File: "
           "the program's code and libraries, and the model's pages when its weights are used in place (page "
           "cache, which the kernel takes back under a limit)\"}";
    }
    j += "},\"snapshots\":[";
    for (size_t i = 0; i < rows_.size(); ++i) j += (i ? ",\n" : "\n") + SnapshotJson(rows_[i]);
    j += "]}\n";
    WriteOutputFile(report_path_, j, "the --memory-report '" + report_path_ + "'");
  }

  void WriteTrace() const {
    std::string t = "ms,stage,tokens,total_bytes";
    for (int c = 0; c < TINYAI_MEMORY_CATEGORY_COUNT; ++c) {
      t += std::string(",") + tinyaiMemoryCategoryName(static_cast<TinyAIMemoryCategory>(c));
    }
    t += ",kv_touched_bytes,rss_bytes,rss_anon_bytes,rss_file_bytes,peak_rss_bytes\n";
    auto row = [&](const Row& r) {
      const TinyAIMemorySnapshot& s = r.s;
      char ms[32];
      std::snprintf(ms, sizeof ms, "%.3f", r.ms);
      t += std::string(ms) + "," + s.stageName + "," + I(s.tokens) + "," + U(s.totalBytes);
      for (int c = 0; c < TINYAI_MEMORY_CATEGORY_COUNT; ++c) t += "," + U(s.bytes[c]);
      t += "," + U(s.kvTouchedBytes) + "," + U(s.rssBytes) + "," + U(s.rssAnonBytes) + "," + U(s.rssFileBytes) +
           "," + U(s.peakRssBytes) + "\n";
    };
    row(Row{baseline_, 0.0});
    for (const Row& r : rows_) row(r);
    WriteOutputFile(trace_path_, t, "the --memory-trace '" + trace_path_ + "'");
  }

  static void CheckWritable(const std::string& path, const char* flag, const std::vector<std::string>& inputs) {
    CheckNotAnInput(path, flag, inputs);
    tinyai::port::OutputFile out;
    if (tinyai::port::BeginOutput(path.c_str(), &out) != TINYAI_OK) {
      throw RuntimeError(tinyaiGetLastError(), std::string(flag) + ": " + tinyaiGetLastErrorMessage());
    }
    tinyai::port::AbortOutput(&out);
  }

  const char* tool_;
  std::string report_path_, trace_path_;
  std::string notes_;
  std::chrono::steady_clock::time_point start_;
  TinyAIMemorySnapshot baseline_{};
  std::vector<Row> rows_;
  bool finished_ = false;
  uint64_t lost_ = 0;  // snapshots that could not be kept
};

}  // namespace tinyai_tools

#endif  // TINYAI_TOOLS_COMMON_MEMORY_REPORT_H_
