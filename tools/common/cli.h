// What the command-line tools share (tools may use exceptions): the one
// parser of every number, size and shape a tool takes, each with its range
// (a bad value is a usage error naming the flag, the value and the range);
// the errors and exit codes (0 success, 1 runtime error "tool: STATUS:
// message", 2 usage error with the usage); RAII guards for the C API's
// handles; --version; JSON strings; the activation DAG dump; the one reader
// of every input a tool holds in memory, each with a stated bound (a prompt,
// a calibration text, a definition, a model image), and the check that names
// a path that is not the kind of file a tool needs (a directory, a FIFO, a
// device); and memory figures printed as limits, rounded up so that each
// runs when given back.
#ifndef TINYAI_TOOLS_COMMON_CLI_H_
#define TINYAI_TOOLS_COMMON_CLI_H_

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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
#include <thread>

#include "format/limits.h"
#include "tools/common/formats.h"
#include "tinyai/tinyai.h"
#include "tinyai/utils/forward_scheduler.h"

namespace tinyai_tools {

// ---- Errors and exit codes ---------------------------------------------------

// A bad command line: exit 2, the message and the usage on stderr.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A failure at run time: exit 1, "tool: STATUS_NAME: message" on stderr,
// and "tool: to fit: ..." when the library named a remedy.
struct RuntimeError : std::runtime_error {
  RuntimeError(TinyAIStatus s, const std::string& message, const std::string& remedy = std::string())
      : std::runtime_error(message), status(s), fix(remedy) {}
  TinyAIStatus status;
  std::string fix;
};

// A remedy of tinyaiGetLastErrorInfo as the tools' flags ("" for none).
inline std::string RemedyFlags(TinyAIRemedy remedy, uint64_t value) {
  char text[96];
  switch (remedy) {
    case TINYAI_REMEDY_RAISE_LIMIT:
      std::snprintf(text, sizeof text, "--mem-limit %llu", static_cast<unsigned long long>(value));
      return text;
    case TINYAI_REMEDY_KV_TYPE: return std::string("--kv-type ") + tinyaiKVTypeName(static_cast<TinyAIKVType>(value));
    case TINYAI_REMEDY_MODE:
      return value == TINYAI_EXEC_MEMORY_OPT ? "--mode memory_opt"
             : value == TINYAI_EXEC_STREAMING ? "--mode streaming"
                                              : "--mode adaptive";
    case TINYAI_REMEDY_RAISE_CACHE:
      std::snprintf(text, sizeof text, "--cache %llu", static_cast<unsigned long long>(value));
      return text;
    case TINYAI_REMEDY_FREE_MEMORY:
      std::snprintf(text, sizeof text, "%llu more bytes for the process", static_cast<unsigned long long>(value));
      return text;
    default: return "";
  }
}

// Throws the last TinyAI error (status s) as a RuntimeError, with its
// remedies as flags.
[[noreturn]] inline void ThrowLastError(TinyAIStatus s) {
  TinyAIErrorInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  std::string fix;
  if (tinyaiGetLastErrorInfo(&info) == TINYAI_OK && info.status == s) {
    fix = RemedyFlags(info.remedy, info.remedyValue);
    const std::string second = RemedyFlags(info.remedy2, info.remedy2Value);
    if (!second.empty()) fix += (fix.empty() ? "" : ", or ") + second;
  }
  throw RuntimeError(s, tinyaiGetLastErrorMessage(), fix);
}
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
    if (!e.fix.empty()) std::fprintf(stderr, "%s: to fit: %s\n", tool, e.fix.c_str());
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
// or G, with or without B or iB (binary whichever is written: 1.5M = 1.5MB =
// 1.5MiB = 1572864 bytes; lower case too), rounded to a whole byte, in
// [min, max]. Refuses a negative, empty, overflowing or malformed value.
inline uint64_t ParseSize(const std::string& flag, const char* v, uint64_t min = 1, uint64_t max = SIZE_MAX) {
  const std::string text = v;
  const std::string range = std::to_string(min) + ".." + std::to_string(max) + " bytes";
  auto malformed = [&]() -> UsageError {
    return UsageError(flag + ": '" + text + "' is not a size (digits, an optional decimal part and a unit K, M or G, " +
                      "binary, with or without B or iB: e.g. 64M, 64MB or 1.5GiB; allowed " + range + ")");
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
  std::string unit = text.substr(i);
  // K, KB, KiB (any case) alike: a limit is binary whichever way it is written.
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  uint64_t scale = 1;
  const char prefix = unit.empty() ? '\0' : unit[0];
  const std::string suffix = unit.empty() ? std::string() : unit.substr(1);
  const bool unit_ok = suffix.empty() || suffix == "b" || suffix == "ib";
  if (prefix == 'k' && unit_ok) scale = 1ull << 10;
  else if (prefix == 'm' && unit_ok) scale = 1ull << 20;
  else if (prefix == 'g' && unit_ok) scale = 1ull << 30;
  else if (!unit.empty() && unit != "b") throw malformed();
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
// --prefetch-threads N: 0..64, 0 = load ahead inline; auto (the default):
// TINYAI_PREFETCH_THREADS_AUTO.
inline int32_t ParsePrefetchThreads(const std::string& flag, const char* v) {
  if (std::string(v) == "auto") return TINYAI_PREFETCH_THREADS_AUTO;
  return ParseInt32(flag, v, 0, kMaxPrefetchThreads, "0 = load ahead inline, or auto");
}
// --direct-reads auto|on|off: TinyAIMmapConfig.directReads 0, 1, -1.
inline int ParseDirectReads(const std::string& flag, const std::string& v) {
  if (v == "auto") return 0;
  if (v == "on") return 1;
  if (v == "off") return -1;
  throw UsageError(flag + " takes auto (while the weight cache streams), on or off, got '" + v + "'");
}
// --mem-limit SIZE and --cache SIZE: 1 byte .. what a size_t holds (leave
// the flag out for no limit or cap).
inline size_t ParseByteLimit(const std::string& flag, const char* v) {
  return static_cast<size_t>(ParseSize(flag, v, 1, SIZE_MAX));
}

// A dtype by its name ("f32" ... "q5m_g32"), GGUF's (q8_0, q4_0, iq4_nl,
// q5_0, q5_1) or tinyai-quantize's (fp32, fp16, int8, int4, int4-sym), in
// any case: one vocabulary in every tool.
inline TinyAIDType ParseDtype(const std::string& given) {
  std::string v = given;
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const struct {
    const char* alias;
    TinyAIDType dtype;
  } kAliases[] = {{"fp32", TINYAI_DTYPE_F32},     {"fp16", TINYAI_DTYPE_F16},      {"q8_0", TINYAI_DTYPE_Q8_G32},
                  {"int8", TINYAI_DTYPE_Q8_G32},  {"q4_0", TINYAI_DTYPE_Q4_G32},   {"int4-sym", TINYAI_DTYPE_Q4_G32},
                  {"iq4_nl", TINYAI_DTYPE_Q4NL_G32}, {"int4", TINYAI_DTYPE_Q4NL_G32}, {"q5_0", TINYAI_DTYPE_Q5_G32},
                  {"q5_1", TINYAI_DTYPE_Q5M_G32}};
  for (const auto& a : kAliases) {
    if (v == a.alias) return a.dtype;
  }
  for (int d = TINYAI_DTYPE_F32; d <= TINYAI_DTYPE_Q5M_G32; ++d) {
    if (v == tinyaiDTypeName(static_cast<TinyAIDType>(d))) return static_cast<TinyAIDType>(d);
  }
  throw UsageError("--dtype takes f32, f16, q8_g32 (q8_0, int8), q4_g32 (q4_0, int4-sym), q4nl_g32 "
                   "(iq4_nl, int4), q4_k, q5_k, q6_k, q5_g32 (q5_0) or q5m_g32 (q5_1), got '" +
                   given + "'");
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
// --fallback STEPS: the fallback chain (TinyAILLMConfig.fallback), its
// steps comma-separated in order, or all: prefetch,kv-f16,kv-int8,
// memory-opt,streaming,kv-window.
inline void ParseFallback(const std::string& flag, const std::string& v, TinyAIFallback* chain) {
  static const TinyAIFallback kAll[] = {TINYAI_FALLBACK_PREFETCH, TINYAI_FALLBACK_KV_F16, TINYAI_FALLBACK_KV_INT8,
                                        TINYAI_FALLBACK_MEMORY_OPT, TINYAI_FALLBACK_STREAMING,
                                        TINYAI_FALLBACK_KV_WINDOW};
  for (int i = 0; i < TINYAI_MAX_FALLBACK_STEPS; ++i) chain[i] = TINYAI_FALLBACK_END;
  if (v == "all") {
    for (size_t i = 0; i < sizeof kAll / sizeof kAll[0]; ++i) chain[i] = kAll[i];
    return;
  }
  int n = 0;
  size_t at = 0;
  while (true) {
    const size_t comma = v.find(',', at);
    const std::string name = v.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    TinyAIFallback step = TINYAI_FALLBACK_END;
    for (TinyAIFallback s : kAll) {
      if (name == tinyaiFallbackName(s)) step = s;
    }
    if (step == TINYAI_FALLBACK_END) {
      throw UsageError(flag + " takes steps from prefetch, kv-f16, kv-int8, memory-opt, streaming, kv-window, "
                       "comma-separated in the order to try them (or all), got '" + name + "'");
    }
    for (int i = 0; i < n; ++i) {
      if (chain[i] == step) throw UsageError(flag + " names " + name + " twice; give each step once");
    }
    chain[n++] = step;
    if (comma == std::string::npos) return;
    at = comma + 1;
  }
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

// ---- Files: inputs and outputs -----------------------------------------------------
//
// Every input a tool holds in memory is read by ReadInput (or, for a model
// image, InputFile) with a stated bound: nothing is read whole without one
// (a prompt read from /dev/zero under --mem-limit 2M was read until the OS
// killed the process). A path that is not the kind of file the tool needs (a
// directory, a FIFO, a device) is named as what it is.

// The most bytes of text one token is taken to cover: SentencePiece's pieces
// (every vocabulary TinyAI reads) are at most 16 characters, 4 bytes each in
// UTF-8. A text of N tokens is at most N times this; the bounds of a prompt
// and a calibration text are their tokens times this.
constexpr uint64_t kTextBytesPerToken = 64;

// What st_mode is when it is not a regular file ("a directory", "a FIFO
// (named pipe)", ...); "" for a regular file.
inline const char* KindOfMode(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

// What path is when it exists and is not a regular file; "" for a regular
// file and for a path stat() cannot see (opening it then says why).
inline std::string KindOfPath(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";
  return KindOfMode(st.st_mode);
}

// Refuses (TINYAI_ERR_IO) a path that exists and is not a regular file
// where the tool needs one: what names the role ("the model"), need says
// what to give ("a .tmai file"). A missing path passes: opening it reports
// TINYAI_ERR_FILE_NOT_FOUND.
inline void CheckIsFile(const std::string& path, const std::string& what, const std::string& need) {
  const std::string kind = KindOfPath(path);
  if (kind.empty()) return;
  throw RuntimeError(TINYAI_ERR_IO, what + " '" + path + "' is " + kind + ", not a regular file" +
                                        (kind == "a directory" ? "" : " (it is read at offsets, not as a stream)") +
                                        "; give " + need);
}

// Refuses (TINYAI_ERR_IO), before any work, an output path that is a
// directory: the output names the file to write.
inline void CheckOutputPath(const std::string& path, const std::string& what) {
  if (KindOfPath(path) == "a directory") {
    throw RuntimeError(TINYAI_ERR_IO, what + " '" + path + "' is a directory; name the file to write (in it, or elsewhere)");
  }
}

// An input opened for reading: a file, or with path "-" standard input.
// what names it in every message ("the prompt file 'p.txt'"). A directory is
// refused by name (TINYAI_ERR_IO). With a reason to need a regular file
// (need_file, e.g. "its size bounds what is read"), so is anything else: a
// FIFO, a device, a socket (checked before opening, which for a FIFO would
// wait for a writer). A path that cannot be opened or read is
// TINYAI_ERR_FILE_NOT_FOUND or TINYAI_ERR_IO with the cause.
class InputFile {
 public:
  InputFile(const std::string& path, std::string what, std::string need_file = "")
      : what_(std::move(what)), need_file_(std::move(need_file)) {
    struct stat st;
    if (path != "-") {
      if (!need_file_.empty() && ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) Refuse(st.st_mode);
      fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
      if (fd_ < 0) {
        const int err = errno;
        throw RuntimeError(StatusOfErrno(err), "cannot read " + what_ + ": " + std::strerror(err));
      }
      own_ = true;
    }
    if (::fstat(fd_, &st) != 0) {
      const int err = errno;
      Close();
      throw RuntimeError(TINYAI_ERR_IO, "cannot read " + what_ + ": " + std::strerror(err));
    }
    if (S_ISDIR(st.st_mode) || (!need_file_.empty() && !S_ISREG(st.st_mode))) {
      Close();
      Refuse(st.st_mode);
    }
    regular_ = S_ISREG(st.st_mode);
    size_ = regular_ ? static_cast<uint64_t>(st.st_size) : 0;
  }
  ~InputFile() { Close(); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& what() const { return what_; }
  bool regular() const { return regular_; }
  uint64_t size() const { return size_; }  // a regular file's size when it was opened; 0 for a stream

  // Up to n bytes into dst; 0 at the end.
  size_t Read(char* dst, size_t n) {
    for (;;) {
      const ssize_t got = ::read(fd_, dst, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno == EINTR) continue;
      const int err = errno;
      throw RuntimeError(TINYAI_ERR_IO, "cannot read " + what_ + ": " + std::strerror(err));
    }
  }

 private:
  [[noreturn]] void Refuse(mode_t mode) const {
    if (S_ISDIR(mode) || need_file_.empty()) {
      throw RuntimeError(TINYAI_ERR_IO, what_ + " is " + KindOfMode(mode) + ", not a file; give the path of a file");
    }
    throw RuntimeError(TINYAI_ERR_IO, what_ + " is " + KindOfMode(mode) + ", not a regular file (" + need_file_ +
                                          "); give the path of a regular file");
  }
  void Close() {
    if (own_ && fd_ >= 0) ::close(fd_);
    own_ = false;
  }

  std::string what_;
  std::string need_file_;  // why a regular file is needed; "" = a stream will do
  int fd_ = 0;             // standard input unless a path was opened
  bool own_ = false;
  bool regular_ = false;
  uint64_t size_ = 0;
};

// The most of an input a tool reads, and why: a larger input is refused with
// status, naming the input, the bound, where it comes from and what to do.
struct InputBound {
  uint64_t bytes = 0;
  TinyAIStatus status = TINYAI_ERR_INVALID_ARGUMENT;
  std::string rule;  // where the figure comes from, e.g. "the context's 512 tokens at up to 64 bytes each"
  std::string fix;   // what to do, e.g. "give a shorter prompt or a larger --context"
};

// The error for an input beyond its bound; size 0 when only "longer" is known.
inline RuntimeError InputTooLong(const std::string& what, uint64_t size, const InputBound& bound) {
  const std::string is = size > 0 ? "is " + std::to_string(size) + " bytes, more than" : "is longer than";
  return RuntimeError(bound.status, what + " " + is + " the " + std::to_string(bound.bytes) +
                                        " bytes it may hold (" + bound.rule + "); " + bound.fix);
}

// The whole of an input (a file, or "-": standard input; a pipe, a FIFO or a
// device is read as a stream), at most bound.bytes: a regular file larger
// than that is refused before it is read, a stream as soon as it yields one
// byte more. The tool never holds more than the bound and one 64 KiB read.
inline std::string ReadInput(const std::string& path, const std::string& what, const InputBound& bound) {
  InputFile in(path, what);
  if (in.regular() && in.size() > bound.bytes) throw InputTooLong(what, in.size(), bound);
  std::string text;
  if (in.regular()) text.reserve(static_cast<size_t>(in.size()));
  char buf[1 << 16];
  for (;;) {
    const size_t n = in.Read(buf, sizeof buf);
    if (n == 0) break;
    if (n > bound.bytes - text.size()) throw InputTooLong(what, 0, bound);
    if (text.size() + n > text.capacity()) {
      // Grow by doubling, never past the bound.
      const uint64_t want = std::max<uint64_t>(2 * static_cast<uint64_t>(text.capacity()), text.size() + n);
      text.reserve(static_cast<size_t>(std::min<uint64_t>(want, bound.bytes)));
    }
    text.append(buf, n);
  }
  return text;
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

// Opens a model or throws its error (a directory, a FIFO or a device is
// named as such).
inline ModelHandle OpenModel(const std::string& path, const TinyAIMmapConfig* config) {
  CheckIsFile(path, "the model", "a .tmai or .gguf file");
  ModelHandle m(tinyaiOpenMappedModel(path.c_str(), config));
  if (!m) {
    const TinyAIStatus s = tinyaiGetLastError();
    // A file of another format: say what it is and which command converts it.
    // (The library itself names GGUF and safetensors files.)
    const FileFormat format = s == TINYAI_ERR_BAD_MAGIC ? DetectFormat(path) : FileFormat::kTmai;
    const bool named = format == FileFormat::kTmai || format == FileFormat::kGguf || format == FileFormat::kSafetensors;
    const std::string advice = named ? std::string() : ConvertAdvice(path);
    if (!advice.empty()) throw RuntimeError(s, std::string(tinyaiGetLastErrorMessage()) + "; " + advice);
    ThrowLastError(s);
  }
  return m;
}

// Creates an LLM over model or throws its error.
// Says on stderr what the fallback chain did (each level tried, and the
// one that runs); nothing when the configuration fitted as given. llm NULL:
// the chain this thread ran last, which created nothing.
inline void SayFallback(const char* tool, const TinyAILLM* llm) {
  TinyAIFallbackReport r;
  std::memset(&r, 0, sizeof r);
  r.structSize = sizeof r;
  if (tinyaiGetLLMFallback(llm, &r) != TINYAI_OK || r.log[0] == '\0') return;
  const char* line = r.log;
  while (*line) {
    const char* end = std::strchr(line, '\n');
    const int len = end ? static_cast<int>(end - line) : static_cast<int>(std::strlen(line));
    std::fprintf(stderr, "%s: fallback: %.*s\n", tool, len, line);
    line += len + (end ? 1 : 0);
  }
  if (llm) std::fprintf(stderr, "%s: fallback: level %d runs\n", tool, r.level);
}

// tinyaiCreateLLM; when it fails after a fallback chain (config.fallback),
// the levels it tried are said on stderr first (tool given).
inline LLMHandle CreateLLM(TinyAIMappedModel* model, const TinyAILLMConfig& config, const char* tool = nullptr) {
  TinyAILLM* llm = nullptr;
  const TinyAIStatus s = tinyaiCreateLLM(model, &config, &llm);
  if (s != TINYAI_OK && tool && config.fallback[0] != TINYAI_FALLBACK_END) {
    SayFallback(tool, nullptr);  // leaves the last error as it is
  }
  Check(s);
  return LLMHandle(llm);
}

// Says on stderr what tinyaiGetLLMWarning has to say of llm (a run much
// slower than it could be), with its remedy as a flag; nothing when it has
// nothing.
// Says on stderr that a context past the model's seq_len runs on positions
// it was never trained for (the library runs it; what it costs is the
// model's). model_seq_len 0: not known, nothing said.
inline void SayContextPastTraining(const char* tool, int64_t context, int64_t model_seq_len) {
  if (model_seq_len <= 0 || context <= model_seq_len) return;
  std::fprintf(stderr,
               "%s: warning: -c %lld is past the model's seq_len %lld, the longest context it was trained for: "
               "positions past %lld were never trained and RoPE extrapolates to them, so the text may degrade "
               "there (docs/tools.md, \"-c past seq_len\", gives what it cost two models); -c %lld stays within\n",
               tool, static_cast<long long>(context), static_cast<long long>(model_seq_len),
               static_cast<long long>(model_seq_len), static_cast<long long>(model_seq_len));
}

inline void SayLLMWarning(const char* tool, const TinyAILLM* llm) {
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  if (tinyaiGetLLMModelInfo(llm, &info) == TINYAI_OK) SayContextPastTraining(tool, info.contextLength, info.seqLen);
  TinyAIErrorInfo w;
  std::memset(&w, 0, sizeof w);
  w.structSize = sizeof w;
  if (tinyaiGetLLMWarning(llm, &w) != TINYAI_OK || w.resource == TINYAI_RESOURCE_NONE) return;
  std::fprintf(stderr, "%s: warning: %s\n", tool, w.message);
  const std::string fix = RemedyFlags(w.remedy, w.remedyValue);
  if (!fix.empty()) std::fprintf(stderr, "%s: to run faster: %s\n", tool, fix.c_str());
}

// ---- Output ----------------------------------------------------------------------

inline double Mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// "12.3 MiB".
inline std::string MibText(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", Mib(bytes));
  return text;
}

// What --mem-limit auto found, for SayMemLimit().
inline std::string& MemLimitNote() {
  static std::string note;
  return note;
}

// --mem-limit SIZE, or auto: the room the system leaves this process (its
// memory cgroup's limit less what the cgroup holds, or MemAvailable:
// tinyaiDetectMemoryLimit) less the README's process overhead; what it
// found waits in MemLimitNote() for SayMemLimit(). A system that shows no
// bound, or leaves no room, fails with the library's message.
inline size_t ParseMemLimit(const std::string& flag, const char* v) {
  if (std::string(v) != "auto") return ParseByteLimit(flag, v);
  TinyAIMemoryEnvironment env;
  env.structSize = sizeof env;
  const TinyAIStatus s = tinyaiDetectMemoryLimit(&env);
  if (s != TINYAI_OK) ThrowLastError(s);
  std::string from;
  if (env.source == TINYAI_MEMORY_SOURCE_SYSTEM) {
    from = MibText(env.roomBytes) + " available (MemAvailable)";
  } else {
    from = MibText(env.roomBytes) + " of room in the memory cgroup " + env.cgroupPath + " (limit " +
           MibText(env.cgroupLimitBytes) + ", holding " + MibText(env.cgroupUsageBytes) + ", of which " +
           MibText(env.cgroupReclaimableBytes) + " page cache it can give back)";
  }
  MemLimitNote() = flag + " auto: " + MibText(env.limitBytes) + ": " + from + " less " + MibText(env.overheadBytes) +
                   " for the process";
  return env.limitBytes;
}

// Says on stderr what --mem-limit auto found (nothing without it): a tool
// calls it once its arguments are read, unless told to be quiet.
inline void SayMemLimit(const char* tool) {
  if (!MemLimitNote().empty()) std::fprintf(stderr, "%s: %s\n", tool, MemLimitNote().c_str());
}

// A memory figure printed as a limit (a least --mem-limit), to be given
// back: MiB rounded up to two decimals, never down, so that the figure given
// back (--mem-limit 0.76M) is at least the bytes, and the exact bytes beside
// it: "0.76 MiB (795088 bytes)".
inline std::string LimitText(uint64_t bytes) {
  const uint64_t mib = uint64_t{1} << 20;
  const uint64_t hundredths = (bytes / mib) * 100 + ((bytes % mib) * 100 + mib - 1) / mib;
  char text[80];
  std::snprintf(text, sizeof text, "%llu.%02llu MiB (%llu bytes)", static_cast<unsigned long long>(hundredths / 100),
                static_cast<unsigned long long>(hundredths % 100), static_cast<unsigned long long>(bytes));
  return text;
}

// The compute threads "-t 0 = one per core" gives, counted as the library
// counts them (ports/posix: the CPUs this process may run on).
inline int CpuCount() {
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

// The length of the well-formed UTF-8 sequence at s[i] (of n bytes), or 0
// (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF).
inline size_t Utf8Length(const unsigned char* s, size_t i, size_t n) {
  const unsigned char c = s[i];
  size_t len = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
  if (len == 0 || i + len > n) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((s[i + k] & 0xC0) != 0x80) return 0;
  }
  if (len >= 3) {
    const unsigned char d = s[i + 1];
    if ((c == 0xE0 && d < 0xA0) || (c == 0xED && d > 0x9F) || (c == 0xF0 && d < 0x90) || (c == 0xF4 && d > 0x8F)) {
      return 0;
    }
  }
  return len;
}

// s as a JSON string, quotes included; a byte that is not well-formed UTF-8
// (a token's piece cut inside a character, a path in another encoding)
// becomes U+FFFD, so that the output is always valid JSON.
inline std::string JsonString(const char* s, size_t n) {
  const unsigned char* u = reinterpret_cast<const unsigned char*>(s);
  std::string out = "\"";
  for (size_t i = 0; i < n;) {
    const unsigned char c = u[i];
    const size_t len = Utf8Length(u, i, n);
    if (len == 0) {
      out += "\\ufffd";
      ++i;
    } else if (len > 1) {
      out.append(s + i, len);
      i += len;
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
      ++i;
    } else {
      out += static_cast<char>(c);
      ++i;
    }
  }
  return out + "\"";
}
// x as a JSON number (%.6g), or null when it is not finite (JSON has no
// NaN or infinity).
inline std::string JsonNumber(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}
inline std::string JsonString(const std::string& s) { return JsonString(s.data(), s.size()); }
inline std::string JsonString(const char* s) { return JsonString(s, std::strlen(s)); }

}  // namespace tinyai_tools

#endif  // TINYAI_TOOLS_COMMON_CLI_H_
