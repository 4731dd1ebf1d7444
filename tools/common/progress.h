// The one progress bar of the tools (tools may use exceptions): a line on
// stderr redrawn in place when stderr is a terminal, nothing otherwise (a log
// or a pipe gets no control characters), ended by a newline at 100%.
//   tinyai-eval: [==========          ]  25% 512/2048 positions
#ifndef TINYAI_TOOLS_COMMON_PROGRESS_H_
#define TINYAI_TOOLS_COMMON_PROGRESS_H_

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace tinyai_tools {

class ProgressBar {
 public:
  // what: the tool's name and, after it, what is counted ("tinyai-eval",
  // "comparing"); quiet: never drawn.
  ProgressBar(const char* tool, std::string what = std::string(), bool quiet = false)
      : tool_(tool), what_(std::move(what)), on_(!quiet && isatty(STDERR_FILENO) != 0) {}

  // done of total; detail follows the percentage ("512/2048 positions").
  // Redraws only when the percentage moves, and ends the line at the end.
  void Update(int64_t done, int64_t total, const std::string& detail = std::string()) {
    if (!on_ || total <= 0) return;
    const int pct = static_cast<int>(100 * done / total);
    const bool last = done >= total;
    if (pct == last_pct_ && !last) return;
    last_pct_ = pct;
    std::fprintf(stderr, "\r%s: %s%s[%-40.*s] %3d%%%s%s", tool_, what_.c_str(), what_.empty() ? "" : " ",
                 pct * 40 / 100, "========================================", pct, detail.empty() ? "" : " ",
                 detail.c_str());
    if (last) std::fputc('\n', stderr);
  }
  bool on() const { return on_; }
  void Silence() { on_ = false; }

 private:
  const char* tool_;
  std::string what_;
  bool on_;
  int last_pct_ = -1;
};

}  // namespace tinyai_tools

#endif  // TINYAI_TOOLS_COMMON_PROGRESS_H_
