// Files the tools write (--dump-dag, --memory-report, --memory-trace,
// tinyai-memplot's picture), written as TinyAI writes every file
// (docs/files.md): through the port's output helper, so a failure leaves the
// path as it was and a path that must not be replaced (an input open now, a
// FIFO, a read-only file) is refused with the cause.
#ifndef TINYAI_TOOLS_COMMON_OUTPUT_H_
#define TINYAI_TOOLS_COMMON_OUTPUT_H_

#include <sys/stat.h>

#include <string>
#include <vector>

#include "port/port.h"
#include "tools/common/cli.h"

namespace tinyai_tools {

// Writes text to path; what names it in the error ("the activation DAG").
inline void WriteOutputFile(const std::string& path, const std::string& text, const std::string& what) {
  tinyai::port::OutputFile out;
  TinyAIStatus s = tinyai::port::BeginOutput(path.c_str(), &out);
  if (s == TINYAI_OK) s = tinyai::port::WriteAt(out.file, 0, text.data(), text.size(), path.c_str());
  if (s == TINYAI_OK) {
    s = tinyai::port::CommitOutput(&out);
  } else {
    tinyai::port::AbortOutput(&out);
  }
  if (s != TINYAI_OK) throw RuntimeError(s, "cannot write " + what + ": " + tinyaiGetLastErrorMessage());
}

// Whether a and b name one existing file (by device and inode: links and
// other spellings too).
inline bool SameExistingFile(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

// Refuses (a usage error), before any work, an output that is one of the
// inputs: writing it would lose the input.
inline void CheckNotAnInput(const std::string& out, const std::string& flag, const std::vector<std::string>& inputs) {
  for (const std::string& in : inputs) {
    if (!in.empty() && SameExistingFile(out, in)) {
      throw UsageError(flag + " '" + out + "' is the input '" + in + "' (the same file); name another file");
    }
  }
}

}  // namespace tinyai_tools

#endif  // TINYAI_TOOLS_COMMON_OUTPUT_H_
