// tinyai-memplot: draws a --memory-trace (CSV) as a self-contained SVG -
// TinyAI's account by category stacked over time, the process's RSS (all and
// anonymous) as lines over it, and each stage marked.
//   tinyai-memplot TRACE.csv [-o OUT.svg] [--title TEXT]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tools/common/args.h"
#include "tools/common/cli.h"
#include "tools/common/output.h"

namespace {

const char kTool[] = "tinyai-memplot";

const char kUsage[] =
    "usage: tinyai-memplot TRACE.csv [-o OUT.svg] [--title TEXT]\n"
    "       tinyai-memplot -h | --help | --version\n"
    "  TRACE.csv     a trace from tinyai-generate, tinyai-bench or tinyai-eval --memory-trace FILE\n"
    "  -o, --output OUT.svg  where to write the picture (default: TRACE.csv with .svg for .csv)\n"
    "  --title TEXT  the picture's title (default: the trace's file name)\n"
    "The picture: TinyAI's own account stacked by category (runtime, model, weights, KV cache,\n"
    "activations, scratch, text) over the run's time, the process's RSS from the OS (all, and\n"
    "anonymous) as lines, and each stage (open, index, plan, warm-up, first token, close) marked.\n"
    "Exit status: 0 success, 1 runtime error, 2 usage error.\n";

const char* const kCategories[] = {"runtime", "model", "weights", "kv", "activations", "scratch", "text"};
const char* const kColours[] = {"#9e9e9e", "#8d6e63", "#1e88e5", "#43a047", "#fb8c00", "#8e24aa", "#00acc1"};
constexpr int kCategoryCount = 7;

struct Sample {
  double ms = 0;
  std::string stage;
  long long tokens = -1;
  double bytes[kCategoryCount] = {};
  double rss = 0, anon = 0, file = 0;
};

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.push_back("");
  return out;
}

std::vector<Sample> ReadTrace(const std::string& path) {
  namespace tt = tinyai_tools;
  // A trace is a row of about 150 bytes a token: 1 GiB is millions of tokens.
  tt::InputBound bound;
  bound.bytes = uint64_t{1} << 30;
  bound.status = TINYAI_ERR_INVALID_ARGUMENT;
  bound.rule = "the picture's bound: millions of tokens";
  bound.fix = "trace a shorter run";
  const std::string text = tt::ReadInput(path, "the trace '" + path + "'", bound);
  std::istringstream lines(text);
  std::string line;
  if (!std::getline(lines, line)) {
    throw tt::RuntimeError(TINYAI_ERR_BAD_FORMAT, "'" + path + "' is empty; write one with --memory-trace FILE");
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const std::vector<std::string> head = SplitCsv(line);
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < head.size(); ++i) col[head[i]] = i;
  std::vector<std::string> need = {"ms", "stage", "tokens", "rss_bytes", "rss_anon_bytes", "rss_file_bytes"};
  for (const char* c : kCategories) need.push_back(c);
  for (const std::string& n : need) {
    if (!col.count(n)) {
      throw tt::RuntimeError(TINYAI_ERR_BAD_FORMAT, "'" + path + "' has no column '" + n +
                                                        "': not a --memory-trace file (its first line names "
                                                        "ms,stage,tokens,... and a column per category)");
    }
  }
  std::vector<Sample> out;
  for (int row = 2; std::getline(lines, line); ++row) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::vector<std::string> cells = SplitCsv(line);
    if (cells.size() != head.size()) {
      throw tt::RuntimeError(TINYAI_ERR_BAD_FORMAT, "'" + path + "' line " + std::to_string(row) + " has " +
                                                        std::to_string(cells.size()) + " cells; the header has " +
                                                        std::to_string(head.size()));
    }
    auto number = [&](const std::string& name) {
      const std::string& c = cells[col[name]];
      char* end = nullptr;
      const double v = std::strtod(c.c_str(), &end);
      if (c.empty() || *end != '\0' || !std::isfinite(v)) {
        throw tt::RuntimeError(TINYAI_ERR_BAD_FORMAT, "'" + path + "' line " + std::to_string(row) + ": " + name +
                                                          " is '" + c + "', not a number");
      }
      return v;
    };
    Sample s;
    s.ms = number("ms");
    s.stage = cells[col["stage"]];
    s.tokens = static_cast<long long>(number("tokens"));
    for (int c = 0; c < kCategoryCount; ++c) s.bytes[c] = number(kCategories[c]);
    s.rss = number("rss_bytes");
    s.anon = number("rss_anon_bytes");
    s.file = number("rss_file_bytes");
    out.push_back(s);
  }
  if (out.empty()) {
    throw tt::RuntimeError(TINYAI_ERR_BAD_FORMAT, "'" + path + "' has a header but no snapshots");
  }
  return out;
}

// A round step for about `ticks` ticks over [0, max].
double NiceStep(double max, int ticks) {
  const double raw = max / ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
}

std::string Escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

std::string Num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// 1.5 MiB, or 29 KiB below a MiB.
std::string SizeText(double bytes) {
  char b[32];
  if (bytes >= 1024.0 * 1024.0) {
    std::snprintf(b, sizeof b, "%.1f MiB", bytes / (1024.0 * 1024.0));
  } else {
    std::snprintf(b, sizeof b, "%.0f KiB", bytes / 1024.0);
  }
  return b;
}

std::string Svg(const std::vector<Sample>& samples, const std::string& title) {
  constexpr double kW = 960, kH = 560, kLeft = 70, kRight = 220, kTop = 84, kBottom = 50;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  const double mib = 1024.0 * 1024.0;
  double tmax = samples.back().ms, ymax = 0;
  for (const Sample& s : samples) {
    double total = 0;
    for (double b : s.bytes) total += b;
    ymax = std::max({ymax, total / mib, s.rss / mib});
  }
  if (tmax <= 0) tmax = 1;
  if (ymax <= 0) ymax = 1;
  const double ystep = NiceStep(ymax, 6), tstep = NiceStep(tmax, 8);
  ymax = std::ceil(ymax / ystep) * ystep;
  tmax = std::ceil(tmax / tstep) * tstep;
  auto X = [&](double ms) { return kLeft + ms / tmax * pw; };
  auto Y = [&](double bytes) { return kTop + ph - bytes / mib / ymax * ph; };

  std::string o = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Num(kW) + "\" height=\"" + Num(kH) +
                  "\" viewBox=\"0 0 " + Num(kW) + " " + Num(kH) +
                  "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
                  "fill=\"white\"/>\n";
  o += "<text x=\"" + Num(kLeft) + "\" y=\"24\" font-size=\"16\" font-weight=\"bold\">" + Escape(title) + "</text>\n";
  // Grid and axes.
  for (double y = 0; y <= ymax + 1e-9; y += ystep) {
    o += "<line x1=\"" + Num(kLeft) + "\" x2=\"" + Num(kLeft + pw) + "\" y1=\"" + Num(Y(y * mib)) + "\" y2=\"" +
         Num(Y(y * mib)) + "\" stroke=\"#e0e0e0\"/>\n";
    o += "<text x=\"" + Num(kLeft - 6) + "\" y=\"" + Num(Y(y * mib) + 4) + "\" text-anchor=\"end\">" +
         (ystep < 1 ? Num(y) : std::to_string(static_cast<long long>(y))) + "</text>\n";
  }
  for (double t = 0; t <= tmax + 1e-9; t += tstep) {
    o += "<text x=\"" + Num(X(t)) + "\" y=\"" + Num(kTop + ph + 18) + "\" text-anchor=\"middle\">" +
         (tstep < 1 ? Num(t) : std::to_string(static_cast<long long>(t))) + "</text>\n";
  }
  o += "<text x=\"" + Num(kLeft + pw / 2) + "\" y=\"" + Num(kH - 10) + "\" text-anchor=\"middle\">time (ms)</text>\n";
  o += "<text transform=\"translate(18," + Num(kTop + ph / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">memory (MiB)</text>\n";
  // Stacked categories: each a polygon between its lower and upper edges, a
  // step per snapshot (memory holds until the next one).
  std::vector<double> lower(samples.size(), 0.0);
  for (int c = 0; c < kCategoryCount; ++c) {
    std::vector<double> upper(samples.size());
    bool any = false;
    for (size_t i = 0; i < samples.size(); ++i) {
      upper[i] = lower[i] + samples[i].bytes[c];
      any = any || samples[i].bytes[c] > 0;
    }
    if (any) {
      std::string pts;
      for (size_t i = 0; i < samples.size(); ++i) {
        const double x0 = X(samples[i].ms), x1 = i + 1 < samples.size() ? X(samples[i + 1].ms) : X(samples[i].ms);
        pts += Num(x0) + "," + Num(Y(upper[i])) + " " + Num(x1) + "," + Num(Y(upper[i])) + " ";
      }
      for (size_t i = samples.size(); i-- > 0;) {
        const double x0 = X(samples[i].ms), x1 = i + 1 < samples.size() ? X(samples[i + 1].ms) : X(samples[i].ms);
        pts += Num(x1) + "," + Num(Y(lower[i])) + " " + Num(x0) + "," + Num(Y(lower[i])) + " ";
      }
      o += "<polygon fill=\"" + std::string(kColours[c]) + "\" fill-opacity=\"0.75\" stroke=\"none\" points=\"" +
           pts + "\"><title>" + kCategories[c] + "</title></polygon>\n";
    }
    lower = upper;
  }
  // RSS lines.
  auto line = [&](double Sample::*field, const char* colour, const char* dash) {
    std::string pts;
    for (const Sample& s : samples) pts += Num(X(s.ms)) + "," + Num(Y(s.*field)) + " ";
    o += "<polyline fill=\"none\" stroke=\"" + std::string(colour) + "\" stroke-width=\"2\"" +
         (dash[0] ? std::string(" stroke-dasharray=\"") + dash + "\"" : std::string()) + " points=\"" + pts +
         "\"/>\n";
  };
  line(&Sample::rss, "#212121", "");
  line(&Sample::anon, "#d32f2f", "6,4");
  // Stages (the token snapshots are the steps between them).
  // Each label in the lowest of four lanes whose last label ends 60 px
  // before it (else the lane whose last one is furthest back).
  constexpr int kLanes = 4;
  double lane_x[kLanes] = {-1e9, -1e9, -1e9, -1e9};
  for (const Sample& s : samples) {
    if (s.stage == "tokens" || s.stage == "now") continue;
    const double x = X(s.ms);
    int lane = 0;
    for (int l = 0; l < kLanes; ++l) {
      if (x - lane_x[l] >= 60) {
        lane = l;
        break;
      }
      if (lane_x[l] < lane_x[lane]) lane = l;
    }
    lane_x[lane] = x;
    o += "<line x1=\"" + Num(x) + "\" x2=\"" + Num(x) + "\" y1=\"" + Num(kTop) + "\" y2=\"" + Num(kTop + ph) +
         "\" stroke=\"#616161\" stroke-dasharray=\"2,3\"/>\n";
    std::string label = s.stage + (s.tokens >= 0 ? " @" + std::to_string(s.tokens) : "");
    o += "<text x=\"" + Num(x + 2) + "\" y=\"" + Num(kTop - 6 - 12 * lane) + "\" font-size=\"10\">" +
         Escape(label) + "</text>\n";
  }
  o += "<rect x=\"" + Num(kLeft) + "\" y=\"" + Num(kTop) + "\" width=\"" + Num(pw) + "\" height=\"" + Num(ph) +
       "\" fill=\"none\" stroke=\"#424242\"/>\n";
  // Legend, with each category's peak.
  double ly = kTop + 4;
  const double lx = kLeft + pw + 16;
  auto legend = [&](const std::string& colour, const std::string& text, bool dashed, bool box) {
    if (box) {
      o += "<rect x=\"" + Num(lx) + "\" y=\"" + Num(ly) + "\" width=\"14\" height=\"10\" fill=\"" + colour +
           "\" fill-opacity=\"0.75\"/>\n";
    } else {
      o += "<line x1=\"" + Num(lx) + "\" x2=\"" + Num(lx + 14) + "\" y1=\"" + Num(ly + 5) + "\" y2=\"" + Num(ly + 5) +
           "\" stroke=\"" + colour + "\" stroke-width=\"2\"" + (dashed ? " stroke-dasharray=\"4,2\"" : "") + "/>\n";
    }
    o += "<text x=\"" + Num(lx + 20) + "\" y=\"" + Num(ly + 10) + "\">" + Escape(text) + "</text>\n";
    ly += 18;
  };
  double peak_rss = 0, peak_total = 0;
  for (const Sample& s : samples) {
    peak_rss = std::max(peak_rss, s.rss);
    double total = 0;
    for (double b : s.bytes) total += b;
    peak_total = std::max(peak_total, total);
  }
  legend("#212121", "RSS (OS), most " + SizeText(peak_rss), false, false);
  legend("#d32f2f", "RSS anonymous", true, false);
  ly += 6;
  o += "<text x=\"" + Num(lx) + "\" y=\"" + Num(ly + 8) + "\" font-weight=\"bold\">TinyAI's account, most " +
       SizeText(peak_total) + "</text>\n";
  ly += 16;
  for (int c = kCategoryCount; c-- > 0;) {
    double peak = 0;
    for (const Sample& s : samples) peak = std::max(peak, s.bytes[c]);
    legend(kColours[c], std::string(kCategories[c]) + " " + SizeText(peak), false, true);
  }
  o += "</svg>\n";
  return o;
}

int Run(int argc, char** argv) {
  namespace tt = tinyai_tools;
  std::string in, out, title;
  tt::Args args;
  args.Flag({"-o", "--output"}, [&](const std::string&, const char* v) { out = v; });
  args.Flag({"--title"}, [&](const std::string&, const char* v) { title = v; });
  std::vector<std::string> positional;
  int exit_code = 0;
  if (!args.Parse(argc, argv, kTool, kUsage, &positional, &exit_code)) return exit_code;
  if (positional.size() > 1) throw tt::UsageError("one trace at a time; '" + positional[1] + "' is a second");
  if (!positional.empty()) in = positional[0];
  if (in.empty()) throw tt::UsageError("a trace is required: tinyai-memplot TRACE.csv");
  if (out.empty()) {
    out = in.size() > 4 && in.compare(in.size() - 4, 4, ".csv") == 0 ? in.substr(0, in.size() - 4) + ".svg"
                                                                      : in + ".svg";
  }
  if (title.empty()) {
    const size_t slash = in.find_last_of('/');
    title = "memory over time: " + (slash == std::string::npos ? in : in.substr(slash + 1));
  }
  tt::CheckNotAnInput(out, "-o", {in});
  tt::WriteOutputFile(out, Svg(ReadTrace(in), title), "the picture '" + out + "'");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tinyai_tools::Main(kTool, kUsage, [&] { return Run(argc, argv); });
}
