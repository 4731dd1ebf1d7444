// Small helpers shared by the command-line tools (tools may use exceptions).
#ifndef TINYAI_TOOLS_COMMON_CLI_H_
#define TINYAI_TOOLS_COMMON_CLI_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "tinyai/tinyai.h"
#include "tinyai/utils/forward_scheduler.h"

namespace tinyai_tools {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline long long ParseInt(const std::string& flag, const char* v) {
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (!*v || *end) throw UsageError(flag + " expects an integer, got '" + v + "'");
  return x;
}

inline double ParseFloat(const std::string& flag, const char* v) {
  char* end = nullptr;
  double x = std::strtod(v, &end);
  if (!*v || *end) throw UsageError(flag + " expects a number, got '" + v + "'");
  return x;
}

// A byte count: digits with an optional K, M or G (binary: 64M = 64 MiB).
inline uint64_t ParseSize(const std::string& flag, const char* v) {
  char* end = nullptr;
  unsigned long long x = std::strtoull(v, &end, 10);
  if (!*v || end == v || *v == '-') throw UsageError(flag + " expects a size such as 64M, got '" + v + "'");
  uint64_t scale = 1;
  std::string unit = end;
  if (unit == "K" || unit == "k" || unit == "KiB") scale = 1ull << 10;
  else if (unit == "M" || unit == "m" || unit == "MiB") scale = 1ull << 20;
  else if (unit == "G" || unit == "g" || unit == "GiB") scale = 1ull << 30;
  else if (!unit.empty() && unit != "B") throw UsageError(flag + ": unknown unit in '" + v + "' (use K, M or G)");
  if (x > UINT64_MAX / scale) throw UsageError(flag + ": '" + v + "' is too large");
  return static_cast<uint64_t>(x) * scale;
}

// Prints "tool: STATUS: message" for the last TinyAI error and returns 1.
inline int ReportError(const char* tool, TinyAIStatus status) {
  std::fprintf(stderr, "%s: %s: %s\n", tool, tinyaiStatusString(status), tinyaiGetLastErrorMessage());
  return 1;
}

inline double Mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// "12.3 MiB".
inline std::string MibText(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", Mib(bytes));
  return text;
}

// "normal", "memory_opt", "streaming" or "adaptive".
inline TinyAIExecutionMode ParseMode(const std::string& flag, const std::string& v) {
  if (v == "normal") return TINYAI_EXEC_NORMAL;
  if (v == "memory_opt") return TINYAI_EXEC_MEMORY_OPT;
  if (v == "streaming") return TINYAI_EXEC_STREAMING;
  if (v == "adaptive") return TINYAI_EXEC_ADAPTIVE;
  throw UsageError(flag + " takes normal, memory_opt, streaming or adaptive, got '" + v + "'");
}

// "ROWS:CONTEXT" (CONTEXT 0 = the context length), or "ROWS".
inline TinyAIMaxShape ParseShape(const std::string& flag, const std::string& v) {
  TinyAIMaxShape s;
  const size_t colon = v.find(':');
  s.rows = static_cast<int32_t>(ParseInt(flag, v.substr(0, colon).c_str()));
  s.context = colon == std::string::npos ? 0 : static_cast<int32_t>(ParseInt(flag, v.substr(colon + 1).c_str()));
  return s;
}

// Writes a scheduler's activation DAG (YAML) to path.
inline TinyAIStatus WriteDag(const TinyAIForwardScheduler* sched, const std::string& path) {
  size_t needed = 0;
  tinyaiDumpActivationDag(sched, nullptr, 0, &needed);
  std::string text(needed, '\0');
  TinyAIStatus s = tinyaiDumpActivationDag(sched, &text[0], text.size(), &needed);
  if (s != TINYAI_OK) return s;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(text.data(), 1, needed - 1, f) != needed - 1) {
    if (f) std::fclose(f);
    throw UsageError("cannot write " + path);
  }
  std::fclose(f);
  return TINYAI_OK;
}

}  // namespace tinyai_tools

#endif  // TINYAI_TOOLS_COMMON_CLI_H_
