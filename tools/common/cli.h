// What the command-line tools share (tools may use exceptions): the one
// parser of every number, size and shape a tool takes, each with its range
// (a bad value is a usage error naming the flag, the value and the range);
// the errors and exit codes (0 success, 1 runtime error "tool: STATUS:
// message", 2 usage error with the usage); RAII guards for the C API's
// handles; --version; JSON strings; the activation DAG dump.
#ifndef TINYAI_TOOLS_COMMON_CLI_H_
#define TINYAI_TOOLS_COMMON_CLI_H_

#include <cctype>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "format/limits.h"
#include "tinyai/tinyai.h"
#include "tinyai/utils/forward_scheduler.h"

namespace tinyai_tools {

// ---- Errors and exit codes ---------------------------------------------------

// A bad command line: exit 2, the message and the usage on stderr.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A failure at run time: exit 1, "tool: STATUS_NAME: message" on stderr.
struct RuntimeError : std::runtime_error {
  RuntimeError(TinyAIStatus s, const std::string& message) : std::runtime_error(message), status(s) {}
  TinyAIStatus status;
};

// Throws the last TinyAI error (status s) as a RuntimeError.
[[noreturn]] inline void ThrowLastError(TinyAIStatus s) { throw RuntimeError(s, tinyaiGetLastErrorMessage()); }
inline void Check(TinyAIStatus s) {
  if (s != TINYAI_OK) ThrowLastError(s);
}

// Prints "tool: STATUS: message" for the last TinyAI error and returns 1.
inline int ReportError(const char* tool, TinyAIStatus status) {
  std::fprintf(stderr, "%s: %s: %s\n", tool, tinyaiStatusString(status), tinyaiGetLastErrorMessage());
  return 1;
}

// The status of a failed open/read/write: no such file, or any other I/O error.
inline TinyAIStatus StatusOfErrno(int err) { return err == ENOENT ? TINYAI_ERR_FILE_NOT_FOUND : TINYAI_ERR_IO; }

// Runs a tool's body and turns its exceptions into exit codes. A successful
// run whose standard output cannot be written (a full disk, a closed pipe)
// fails too, so no result is lost silently.
template <class Body>
int Main(const char* tool, const char* usage, Body body) {
  int rc = 0;
  try {
    rc = body();
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      throw RuntimeError(TINYAI_ERR_IO, std::string("cannot write to standard output: ") + std::strerror(errno));
    }
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\n%s", tool, e.what(), usage);
    return 2;
  } catch (const RuntimeError& e) {
    std::fprintf(stderr, "%s: %s: %s\n", tool, tinyaiStatusString(e.status), e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: %s: out of memory\n", tool, tinyaiStatusString(TINYAI_ERR_OUT_OF_MEMORY));
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s: %s\n", tool, tinyaiStatusString(TINYAI_ERR_INTERNAL), e.what());
    return 1;
  }
  return rc;
}

// --version: the library's version and the format it reads.
inline int PrintVersion(const char* tool) {
  std::printf("%s (TinyAI) %s; reads .tmai format version %u\n", tool, tinyaiVersionString(), tinyaiFormatVersion());
  return 0;
}

// ---- Numbers -------------------------------------------------------------------
//
// Every number on a command line goes through these, with the range the
// library accepts; nothing wraps, is cut or is ignored. Integers are an
// optional '-' and digits (no spaces, no '+', no hex).

inline std::string RangeText(long long min, long long max, const char* meaning) {
  std::string t = std::to_string(min) + ".." + std::to_string(max);
  if (meaning && *meaning) t += std::string("; ") + meaning;
  return t;
}

// An integer in [min, max]; meaning (may be empty) explains special values
// in the message, e.g. "0 = one per core".
inline long long ParseInt(const std::string& flag, const char* v, long long min, long long max,
                          const char* meaning = "") {
  const std::string text = v;
  size_t i = text.size() > 0 && text[0] == '-' ? 1 : 0;
  const bool negative = i == 1;
  if (i == text.size()) {
    throw UsageError(flag + ": '" + text + "' is not an integer (allowed " + RangeText(min, max, meaning) + ")");
  }
  unsigned long long mag = 0;
  bool too_big = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c < '0' || c > '9') {
      throw UsageError(flag + ": '" + text + "' is not an integer (allowed " + RangeText(min, max, meaning) + ")");
    }
    const unsigned d = static_cast<unsigned>(c - '0');
    if (mag > (UINT64_MAX - d) / 10) too_big = true;
    else mag = mag * 10 + d;
  }
  // Anything beyond the long long range is out of every range we take.
  const unsigned long long limit = negative ? 1ull << 63 : (1ull << 63) - 1;
  if (too_big || mag > limit) throw UsageError(flag + ": " + text + " is out of range " + RangeText(min, max, meaning));
  const long long x = !negative ? static_cast<long long>(mag)
                      : mag == 1ull << 63 ? INT64_MIN
                                          : -static_cast<long long>(mag);
  if (x < min || x > max) throw UsageError(flag + ": " + text + " is out of range " + RangeText(min, max, meaning));
  return x;
}

inline int32_t ParseInt32(const std::string& flag, const char* v, int32_t min, int32_t max, const char* meaning = "") {
  return static_cast<int32_t>(ParseInt(flag, v, min, max, meaning));
}

// A 64-bit unsigned value (a seed): digits only, 0..2^64-1.
inline uint64_t ParseUint64(const std::string& flag, const char* v) {
  const std::string text = v;
  if (text.empty()) throw UsageError(flag + ": '' is not a number (allowed 0..18446744073709551615)");
  uint64_t x = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      throw UsageError(flag + ": '" + text + "' is not a number (allowed 0..18446744073709551615)");
    }
    const unsigned d = static_cast<unsigned>(c - '0');
    if (x > (UINT64_MAX - d) / 10) throw UsageError(flag + ": " + text + " is out of range 0..18446744073709551615");
    x = x * 10 + d;
  }
  return x;
}

// A finite decimal number in [min, max] (or (min, max] when min_open).
inline double ParseFloat(const std::string& flag, const char* v, double min, double max, bool min_open = false) {
  const std::string text = v;
  char range[96];
  std::snprintf(range, sizeof range, "%s%g, %g]", min_open ? "(" : "[", min, max);
  const bool starts_well = !text.empty() && (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-' ||
                                             text[0] == '.');
  char* end = nullptr;
  errno = 0;
  const double x = starts_well ? std::strtod(text.c_str(), &end) : 0.0;
  // strtod also takes "inf", "nan" and hex; only plain decimals pass.
  const bool plain = text.find_first_not_of("0123456789.-eE+") == std::string::npos;
  if (!starts_well || !plain || !end || *end != '\0') {
    throw UsageError(flag + ": '" + text + "' is not a number (allowed " + range + ")");
  }
  if (errno == ERANGE || !std::isfinite(x) || x > max || x < min || (min_open && x == min)) {
    throw UsageError(flag + ": " + text + " is out of range " + range);
  }
  return x;
}

// A byte count: digits, an optional decimal part, and an optional unit K, M
// or G (binary: 1.5M = 1572864 bytes; also k m g, KiB MiB GiB, B), rounded to
// a whole byte, in [min, max]. Refuses a negative, empty, overflowing or
// malformed value.
inline uint64_t ParseSize(const std::string& flag, const char* v, uint64_t min = 1, uint64_t max = SIZE_MAX) {
  const std::string text = v;
  const std::string range = std::to_string(min) + ".." + std::to_string(max) + " bytes";
  auto malformed = [&]() -> UsageError {
    return UsageError(flag + ": '" + text + "' is not a size (digits, an optional decimal part and a unit K, M or G, " +
                      "e.g. 64M or 1.5G; allowed " + range + ")");
  };
  if (!text.empty() && text[0] == '-') throw UsageError(flag + ": " + text + " is negative (allowed " + range + ")");
  size_t i = 0;
  uint64_t whole = 0;
  bool too_big = false;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const unsigned d = static_cast<unsigned>(text[i] - '0');
    if (whole > (UINT64_MAX - d) / 10) too_big = true;
    else whole = whole * 10 + d;
  }
  if (i == 0) throw malformed();
  double fraction = 0.0;
  if (i < text.size() && text[i] == '.') {
    const size_t first = ++i;
    double place = 0.1;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, place /= 10) fraction += (text[i] - '0') * place;
    if (i == first) throw malformed();
  }
  const std::string unit = text.substr(i);
  uint64_t scale = 1;
  if (unit == "K" || unit == "k" || unit == "KiB") scale = 1ull << 10;
  else if (unit == "M" || unit == "m" || unit == "MiB") scale = 1ull << 20;
  else if (unit == "G" || unit == "g" || unit == "GiB") scale = 1ull << 30;
  else if (!unit.empty() && unit != "B") throw malformed();
  const uint64_t extra = static_cast<uint64_t>(std::llround(fraction * static_cast<double>(scale)));
  if (too_big || whole > UINT64_MAX / scale || whole * scale > UINT64_MAX - extra) {
    throw UsageError(flag + ": " + text + " is out of range " + range);
  }
  const uint64_t bytes = whole * scale + extra;
  if (bytes < min || bytes > max) {
    const std::string shown = std::to_string(bytes) == text ? text : text + " (" + std::to_string(bytes) + " bytes)";
    throw UsageError(flag + ": " + shown + " is out of range " + range);
  }
  return bytes;
}

// ---- The flags several tools share: one rule each --------------------------------

constexpr int32_t kMaxThreads = 256;          // compute threads the scheduler takes (0 = one per core)
constexpr int32_t kMaxPrefetchThreads = 64;   // background loaders the weight cache takes

// -t THREADS: 0..256, 0 = one per core.
inline int32_t ParseThreads(const std::string& flag, const char* v) {
  return ParseInt32(flag, v, 0, kMaxThreads, "0 = one per core");
}
// --context N: 0..limits::kMaxSeqLen, 0 = the model's seq_len.
inline int32_t ParseContext(const std::string& flag, const char* v) {
  return ParseInt32(flag, v, 0, tinyai::limits::kMaxSeqLen, "0 = the model's seq_len");
}
// --prefetch-threads N: 0..64, 0 = load ahead inline.
inline int32_t ParsePrefetchThreads(const std::string& flag, const char* v) {
  return ParseInt32(flag, v, 0, kMaxPrefetchThreads, "0 = load ahead inline");
}
// --mem-limit SIZE and --cache SIZE: 1 byte .. what a size_t holds (leave
// the flag out for no limit or cap).
inline size_t ParseByteLimit(const std::string& flag, const char* v) {
  return static_cast<size_t>(ParseSize(flag, v, 1, SIZE_MAX));
}

// --kv-type T: f32, f16 or int8, and where a memory limit chooses, auto.
inline TinyAIKVType ParseKvType(const std::string& flag, const std::string& v, bool with_auto = true) {
  if (v == "f32") return TINYAI_KV_F32;
  if (v == "f16") return TINYAI_KV_F16;
  if (v == "int8") return TINYAI_KV_INT8;
  if (with_auto && v == "auto") return TINYAI_KV_AUTO;
  throw UsageError(flag + (with_auto ? " takes f32, f16, int8 or auto, got '" : " takes f32, f16 or int8, got '") +
                   v + "'");
}
// --kv-window N: 1..limits::kMaxSeqLen positions; --kv-sink K: 0..the same.
inline int32_t ParseKvWindow(const std::string& flag, const char* v) {
  return ParseInt32(flag, v, 1, tinyai::limits::kMaxSeqLen);
}
inline int32_t ParseKvSinks(const std::string& flag, const char* v) {
  return ParseInt32(flag, v, 0, tinyai::limits::kMaxSeqLen);
}

// "normal", "memory_opt", "streaming" or "adaptive".
inline TinyAIExecutionMode ParseMode(const std::string& flag, const std::string& v) {
  if (v == "normal") return TINYAI_EXEC_NORMAL;
  if (v == "memory_opt") return TINYAI_EXEC_MEMORY_OPT;
  if (v == "streaming") return TINYAI_EXEC_STREAMING;
  if (v == "adaptive") return TINYAI_EXEC_ADAPTIVE;
  throw UsageError(flag + " takes normal, memory_opt, streaming or adaptive, got '" + v + "'");
}

// "ROWS:CONTEXT" (CONTEXT 0 = the context length), or "ROWS": rows
// 1..2^31-1, context 0..limits::kMaxSeqLen.
inline TinyAIMaxShape ParseShape(const std::string& flag, const std::string& v) {
  TinyAIMaxShape s;
  const size_t colon = v.find(':');
  s.rows = ParseInt32(flag + " ROWS", v.substr(0, colon).c_str(), 1, INT32_MAX);
  s.context = colon == std::string::npos
                  ? 0
                  : ParseInt32(flag + " CONTEXT", v.substr(colon + 1).c_str(), 0, tinyai::limits::kMaxSeqLen,
                               "0 = the context");
  return s;
}

// ---- Handles ---------------------------------------------------------------------
//
// Every handle a tool opens is held by one of these, so no exit path leaks.

struct ModelCloser {
  void operator()(TinyAIMappedModel* m) const { tinyaiCloseMappedModel(m); }
};
using ModelHandle = std::unique_ptr<TinyAIMappedModel, ModelCloser>;
struct LLMDestroyer {
  void operator()(TinyAILLM* l) const { tinyaiDestroyLLM(l); }
};
using LLMHandle = std::unique_ptr<TinyAILLM, LLMDestroyer>;
struct SchedulerDestroyer {
  void operator()(TinyAIForwardScheduler* s) const { tinyaiDestroyForwardScheduler(s); }
};
using SchedulerHandle = std::unique_ptr<TinyAIForwardScheduler, SchedulerDestroyer>;

// Opens a model or throws its error.
inline ModelHandle OpenModel(const std::string& path, const TinyAIMmapConfig* config) {
  ModelHandle m(tinyaiOpenMappedModel(path.c_str(), config));
  if (!m) ThrowLastError(tinyaiGetLastError());
  return m;
}

// Creates an LLM over model or throws its error.
inline LLMHandle CreateLLM(TinyAIMappedModel* model, const TinyAILLMConfig& config) {
  TinyAILLM* llm = nullptr;
  Check(tinyaiCreateLLM(model, &config, &llm));
  return LLMHandle(llm);
}

// ---- Output ----------------------------------------------------------------------

inline double Mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// "12.3 MiB".
inline std::string MibText(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", Mib(bytes));
  return text;
}

// s as a JSON string, quotes included.
inline std::string JsonString(const char* s, size_t n) {
  std::string out = "\"";
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}
inline std::string JsonString(const std::string& s) { return JsonString(s.data(), s.size()); }
inline std::string JsonString(const char* s) { return JsonString(s, std::strlen(s)); }

// Writes a scheduler's activation DAG (YAML) to path; a file that cannot be
// written is TINYAI_ERR_IO naming the path and the cause.
inline void WriteDag(const TinyAIForwardScheduler* sched, const std::string& path) {
  size_t needed = 0;
  tinyaiDumpActivationDag(sched, nullptr, 0, &needed);
  std::string text(needed, '\0');
  Check(tinyaiDumpActivationDag(sched, &text[0], text.size(), &needed));
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    const int err = errno;
    throw RuntimeError(TINYAI_ERR_IO, "cannot write the activation DAG to '" + path + "': " + std::strerror(err));
  }
  const size_t n = needed > 0 ? needed - 1 : 0;  // without the terminating NUL
  const bool written = std::fwrite(text.data(), 1, n, f) == n;
  int err = errno;
  const bool closed = std::fclose(f) == 0;
  if (written && !closed) err = errno;
  if (!written || !closed) {
    throw RuntimeError(TINYAI_ERR_IO, "cannot write the activation DAG to '" + path + "': " + std::strerror(err));
  }
}

}  // namespace tinyai_tools

#endif  // TINYAI_TOOLS_COMMON_CLI_H_
