// --dump-dag: a scheduler's activation DAG written to a file (tinyai-generate,
// tinyai-inspect).
#ifndef TINYAI_TOOLS_COMMON_DAG_H_
#define TINYAI_TOOLS_COMMON_DAG_H_

#include <string>

#include "port/port.h"
#include "tools/common/cli.h"

namespace tinyai_tools {

// Writes the DAG (YAML) to path as TinyAI writes every file (docs/files.md):
// through the port's output helper, so a failure leaves path as it was and
// a path that must not be replaced (an input, a FIFO, a read-only file) is
// refused. The error names the path and the cause, with the port's status.
inline void WriteDag(const TinyAIForwardScheduler* sched, const std::string& path) {
  size_t needed = 0;
  tinyaiDumpActivationDag(sched, nullptr, 0, &needed);
  std::string text(needed, '\0');
  Check(tinyaiDumpActivationDag(sched, &text[0], text.size(), &needed));
  const size_t n = needed > 0 ? needed - 1 : 0;  // without the terminating NUL
  tinyai::port::OutputFile out;
  TinyAIStatus s = tinyai::port::BeginOutput(path.c_str(), &out);
  if (s == TINYAI_OK) s = tinyai::port::WriteAt(out.file, 0, text.data(), n, path.c_str());
  if (s == TINYAI_OK) {
    s = tinyai::port::CommitOutput(&out);
  } else {
    tinyai::port::AbortOutput(&out);
  }
  if (s != TINYAI_OK) throw RuntimeError(s, std::string("cannot write the activation DAG: ") + tinyaiGetLastErrorMessage());
}

}  // namespace tinyai_tools

#endif  // TINYAI_TOOLS_COMMON_DAG_H_
