// --dump-dag: a scheduler's activation DAG written to a file (tinyai-generate,
// tinyai-inspect).
#ifndef TINYAI_TOOLS_COMMON_DAG_H_
#define TINYAI_TOOLS_COMMON_DAG_H_

#include <string>

#include "tools/common/cli.h"
#include "tools/common/output.h"

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
  text.resize(needed > 0 ? needed - 1 : 0);  // without the terminating NUL
  WriteOutputFile(path, text, "the activation DAG");
}

}  // namespace tinyai_tools

#endif  // TINYAI_TOOLS_COMMON_DAG_H_
