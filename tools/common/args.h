// The one command-line parser of every tool (tools may use exceptions): a
// tool registers its flags - each with its names and what it does with its
// value - and Parse() walks argv once. The flags several tools take are
// registered by the functions at the end, so that each has one name, one
// rule and one default everywhere (-m, -t, -c, --mem-limit, --kv-type,
// --json, --quiet), spelled as llama.cpp spells them where the meaning is the
// same. What every parse does alike:
//   - "-h"/"--help" prints the tool's usage on stdout, "--version" the
//     library's version (exit 0);
//   - a flag that needs a value and has none, or an unknown option, is a usage
//     error ("unknown option --topk (did you mean --top-k?)");
//   - "--" ends the options: what follows is positional, even with a '-';
//     a lone "-" is positional (standard input, where a tool takes it);
//   - "--list-flags" prints every flag name the tool takes, one a line (the
//     test that every name is in the tool's help reads it).
#ifndef TINYAI_TOOLS_COMMON_ARGS_H_
#define TINYAI_TOOLS_COMMON_ARGS_H_

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tools/common/cli.h"

namespace tinyai_tools {

class Args {
 public:
  using Value = std::function<void(const std::string& flag, const char* value)>;
  using Switch = std::function<void()>;

  // A flag that takes a value (the next argument), under each of names.
  void Flag(std::initializer_list<const char*> names, Value apply) { Add(names, true, std::move(apply), nullptr); }
  // A flag that takes none.
  void On(std::initializer_list<const char*> names, Switch apply) { Add(names, false, nullptr, std::move(apply)); }

  // Parses argv[1..argc): the flags' actions run in order, positional
  // arguments are returned. Returns false when the tool should exit with
  // *exit_code now (--help, --version, --list-flags).
  bool Parse(int argc, char** argv, const char* tool, const char* usage, std::vector<std::string>* positional,
             int* exit_code) {
    bool options_done = false;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (options_done || a.empty() || a[0] != '-' || a == "-") {
        positional->push_back(a);
        continue;
      }
      if (a == "--") {
        options_done = true;
        continue;
      }
      if (a == "-h" || a == "--help") {
        std::fputs(usage, stdout);
        *exit_code = 0;
        return false;
      }
      if (a == "--version") {
        *exit_code = PrintVersion(tool);
        return false;
      }
      if (a == "--list-flags") {
        for (const Entry& e : entries_) std::printf("%s\n", e.name.c_str());
        *exit_code = 0;
        return false;
      }
      const Entry* e = Find(a);
      if (!e) throw UsageError("unknown option " + a + Suggestion(a));
      if (e->takes_value) {
        if (i + 1 >= argc) throw UsageError(a + " needs a value");
        e->value(a, argv[++i]);
      } else {
        e->on();
      }
    }
    return true;
  }

  bool Has(const std::string& name) const { return Find(name) != nullptr; }

 private:
  struct Entry {
    std::string name;
    bool takes_value;
    Value value;
    Switch on;
  };

  void Add(std::initializer_list<const char*> names, bool takes_value, Value value, Switch on) {
    for (const char* n : names) {
      if (Find(n)) throw std::logic_error(std::string("flag ") + n + " registered twice");
      entries_.push_back(Entry{n, takes_value, value, on});
    }
  }

  const Entry* Find(const std::string& name) const {
    for (const Entry& e : entries_) {
      if (e.name == name) return &e;
    }
    return nullptr;
  }

  // " (did you mean X?)" for the registered name nearest to a (at most two
  // edits away, or the same with '_' for '-'), else "".
  std::string Suggestion(const std::string& a) const {
    std::string best;
    size_t best_d = 3;
    std::string dashed = a;
    for (char& c : dashed) c = c == '_' ? '-' : c;
    std::vector<std::string> names = {"--help", "--version"};
    for (const Entry& e : entries_) names.push_back(e.name);
    for (const std::string& name : names) {
      const size_t d = dashed == name ? 0 : Distance(a, name);
      if (d < best_d) {
        best_d = d;
        best = name;
      }
    }
    return best.empty() ? std::string(" (--help lists the options)") : " (did you mean " + best + "?)";
  }

  static size_t Distance(const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min(std::min(row[j] + 1, row[j - 1] + 1), diag + (a[i - 1] == b[j - 1] ? 0 : 1));
        diag = up;
      }
    }
    return row[b.size()];
  }

  std::vector<Entry> entries_;
};

// ---- The flags several tools take: one name, one rule each -----------------------

// -m, --model PATH. A tool also takes the model as its first positional
// argument (TakeModel).
inline void AddModel(Args* args, std::string* path) {
  args->Flag({"-m", "--model"}, [path](const std::string& flag, const char* v) {
    if (!path->empty()) throw UsageError("give the model once (" + flag + " '" + v + "' after '" + *path + "')");
    *path = v;
  });
}

// The model: -m's, else the first positional argument (taken from
// positional). what names the rest for the message ("and OUT.tmai").
inline std::string TakeModel(const std::string& flagged, std::vector<std::string>* positional) {
  if (!flagged.empty()) return flagged;
  if (positional->empty()) throw UsageError("a model is required: -m MODEL (or MODEL alone)");
  const std::string model = positional->front();
  positional->erase(positional->begin());
  return model;
}

// -t, --threads N: 0..256, 0 = one per core (the default everywhere).
inline void AddThreads(Args* args, int32_t* threads) {
  args->Flag({"-t", "--threads"}, [threads](const std::string& f, const char* v) { *threads = ParseThreads(f, v); });
}

// -c, --context N: 0..limits::kMaxSeqLen, 0 = the model's seq_len.
inline void AddContext(Args* args, int32_t* context) {
  args->Flag({"-c", "--context"}, [context](const std::string& f, const char* v) { *context = ParseContext(f, v); });
}

// --mem-limit SIZE | auto.
template <class Bytes>
void AddMemLimit(Args* args, Bytes* limit) {
  args->Flag({"--mem-limit"},
             [limit](const std::string& f, const char* v) { *limit = static_cast<Bytes>(ParseMemLimit(f, v)); });
}

// --kv-type f32|f16|int8[|auto].
inline void AddKvType(Args* args, TinyAIKVType* type, bool with_auto = true) {
  args->Flag({"--kv-type"},
             [type, with_auto](const std::string& f, const char* v) { *type = ParseKvType(f, v, with_auto); });
}

// --kv-window N and --kv-sink K.
inline void AddKvWindow(Args* args, int32_t* window, int32_t* sinks) {
  args->Flag({"--kv-window"}, [window](const std::string& f, const char* v) { *window = ParseKvWindow(f, v); });
  args->Flag({"--kv-sink"}, [sinks](const std::string& f, const char* v) { *sinks = ParseKvSinks(f, v); });
}

// --fallback STEPS.
inline void AddFallback(Args* args, TinyAIFallback* chain) {
  args->Flag({"--fallback"}, [chain](const std::string& f, const char* v) { ParseFallback(f, v, chain); });
}

// --json: the figures as JSON on stdout. --quiet: no figures on stderr.
inline void AddJson(Args* args, bool* json) {
  args->On({"--json"}, [json] { *json = true; });
}
inline void AddQuiet(Args* args, bool* quiet) {
  args->On({"-q", "--quiet"}, [quiet] { *quiet = true; });
}

}  // namespace tinyai_tools

#endif  // TINYAI_TOOLS_COMMON_ARGS_H_
