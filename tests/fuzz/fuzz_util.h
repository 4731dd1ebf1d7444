// Helpers shared by the libFuzzer targets (tests/fuzz/*_fuzz.cc): a private
// scratch folder for the converters, which take paths; the checks every
// failing call must pass (a specific status, the same one recorded as the
// thread's last error, and a message); llama2.c tokenizer files; and a plain
// transcription of llama2.c's encode() to check the tokenizer against.
//
// A broken invariant is reported with FUZZ_CHECK, which prints what broke and
// aborts, so libFuzzer records the input as a crash.
#ifndef TINYAI_TESTS_FUZZ_FUZZ_UTIL_H_
#define TINYAI_TESTS_FUZZ_FUZZ_UTIL_H_

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "format/llama_params.h"
#include "loader/mapped_model.h"
#include "tinyai/tinyai.h"

#define FUZZ_CHECK(cond, ...)                                                        \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: check failed: %s\n  ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                             \
      std::fprintf(stderr, "\n  last error: %s: %s\n",                               \
                   tinyaiStatusString(tinyaiGetLastError()), tinyaiGetLastErrorMessage()); \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

namespace tinyai_fuzz {

// A folder of this process's own, removed at exit: $TINYAI_FUZZ_TMPDIR, else
// /dev/shm (the converters write a file per input), else $TMPDIR or /tmp.
class ScratchDir {
 public:
  static const ScratchDir& Get() {
    static ScratchDir* dir = new ScratchDir();  // never destroyed: atexit cleans up
    return *dir;
  }
  std::string File(const char* name) const { return path_ + "/" + name; }

 private:
  ScratchDir() {
    const char* base = std::getenv("TINYAI_FUZZ_TMPDIR");
    struct stat st;
    if (!base && ::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && ::access("/dev/shm", W_OK) == 0) {
      base = "/dev/shm";
    }
    if (!base) base = std::getenv("TMPDIR");
    if (!base) base = "/tmp";
    std::string templ = std::string(base) + "/tinyai-fuzz-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (!::mkdtemp(buf.data())) {
      std::fprintf(stderr, "fuzz: cannot create a folder in %s\n", base);
      std::abort();
    }
    path_ = buf.data();
    Path() = path_;
    std::atexit(RemoveAll);
  }
  static std::string& Path() {
    static std::string* p = new std::string();
    return *p;
  }
  // The folder holds files the targets wrote and folders of such files
  // (one level: a checkpoint's folder).
  static void RemoveAll() { RemoveFolder(Path(), 1); }
  static void RemoveFolder(const std::string& dir, int depth) {
    if (DIR* d = ::opendir(dir.c_str())) {
      while (const struct dirent* e = ::readdir(d)) {
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
          const std::string path = dir + "/" + e->d_name;
          struct stat st;
          if (depth > 0 && ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
            RemoveFolder(path, depth - 1);
          } else {
            std::remove(path.c_str());
          }
        }
      }
      ::closedir(d);
    }
    ::rmdir(dir.c_str());
  }
  std::string path_;
};

// $TINYAI_FUZZ_WRITE_SEEDS: where a target writes its seed corpus (in
// LLVMFuzzerInitialize, then exits), or nullptr when fuzzing.
inline const char* SeedDir() {
  const char* dir = std::getenv("TINYAI_FUZZ_WRITE_SEEDS");
  return dir && dir[0] ? dir : nullptr;
}

// In LLVMFuzzerInitialize: when asked for the seed corpus, writes it with
// `write` and exits; else returns, to fuzz.
inline void WriteSeedsIfAsked(void (*write)(const char* dir)) {
  if (const char* dir = SeedDir()) {
    write(dir);
    std::exit(0);
  }
}

inline bool WriteFile(const std::string& path, const void* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = (size == 0 || std::fwrite(data, 1, size, f) == size);
  return std::fclose(f) == 0 && ok;
}

// Writes one seed file dir/name (aborts on failure).
inline void WriteSeed(const char* dir, const std::string& name, const void* data, size_t size) {
  const std::string path = std::string(dir) + "/" + name;
  if (!WriteFile(path, data, size)) {
    std::fprintf(stderr, "fuzz: cannot write the seed %s\n", path.c_str());
    std::abort();
  }
}
inline void WriteSeed(const char* dir, const std::string& name, const std::string& text) {
  WriteSeed(dir, name, text.data(), text.size());
}

inline bool ReadFile(const std::string& path, std::vector<uint8_t>* out) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  out->clear();
  uint8_t buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out->insert(out->end(), buf, buf + n);
  std::fclose(f);
  return true;
}

// What every failing call must leave: status s is an error code TinyAI
// defines (never TINYAI_ERR_INTERNAL, "a bug in TinyAI"), it is the thread's
// last error, and the last error message says something.
inline void CheckFailure(TinyAIStatus s, const char* call) {
  FUZZ_CHECK(s < TINYAI_OK && std::strcmp(tinyaiStatusString(s), "TINYAI_ERR_UNKNOWN") != 0,
             "%s returned %d, not a TinyAIStatus error", call, static_cast<int>(s));
  FUZZ_CHECK(s != TINYAI_ERR_INTERNAL, "%s: TINYAI_ERR_INTERNAL", call);
  FUZZ_CHECK(tinyaiGetLastError() == s, "%s returned %s but recorded %s", call, tinyaiStatusString(s),
             tinyaiStatusString(tinyaiGetLastError()));
  FUZZ_CHECK(tinyaiGetLastErrorMessage()[0] != '\0', "%s returned %s without a message", call,
             tinyaiStatusString(s));
}

// As CheckFailure for calls that return NULL or -1 and record the status.
inline void CheckRecordedFailure(const char* call) {
  const TinyAIStatus s = tinyaiGetLastError();
  FUZZ_CHECK(s != TINYAI_OK, "%s failed without recording a status", call);
  CheckFailure(s, call);
}

// ---- llama2.c tokenizer files --------------------------------------------------

// tokenizer.bin: int32 max_token_length, then per token float32 score,
// int32 length and the piece's bytes.
inline std::vector<uint8_t> TokenizerFile(const std::vector<std::string>& pieces, const std::vector<float>& scores) {
  std::vector<uint8_t> out;
  auto put = [&out](const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  };
  int32_t max_len = 1;
  for (const std::string& p : pieces) max_len = static_cast<int32_t>(p.size()) > max_len ? static_cast<int32_t>(p.size()) : max_len;
  put(&max_len, 4);
  for (size_t i = 0; i < pieces.size(); ++i) {
    const float score = i < scores.size() ? scores[i] : 0.0f;
    const int32_t len = static_cast<int32_t>(pieces[i].size());
    put(&score, 4);
    put(&len, 4);
    put(pieces[i].data(), pieces[i].size());
  }
  return out;
}

// A valid tokenizer of `vocab` pieces in llama2.c's layout: <unk>, BOS, EOS,
// the byte-fallback pieces <0x00>..<0xFF>, then distinct pieces ("a", "b",
// ... "aa", ...) with falling scores; a smaller vocabulary is cut short.
inline void MakeVocabulary(int32_t vocab, std::vector<std::string>* pieces, std::vector<float>* scores) {
  pieces->clear();
  scores->clear();
  for (int32_t i = 0; i < vocab; ++i) {
    std::string p;
    if (i == 0) {
      p = "<unk>";
    } else if (i == 1) {
      p = "\n<s>\n";
    } else if (i == 2) {
      p = "\n</s>\n";
    } else if (i < 259) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "<0x%02X>", i - 3);
      p = buf;
    } else if (i == 259) {
      p = " ";
    } else {
      for (int32_t k = i - 260;; k = k / 26 - 1) {
        p.insert(p.begin(), static_cast<char>('a' + k % 26));
        if (k < 26) break;
      }
      if (i % 3 == 0) p.insert(p.begin(), ' ');
    }
    pieces->push_back(p);
    scores->push_back(i < 259 ? 0.0f : -static_cast<float>(i));
  }
}

// "<0xXX>" (hex digits of either case): a piece Tokenizer::Decode prints as
// the byte XX; *value receives it.
inline bool IsBytePiece(const std::string& p, int* value) {
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  if (p.size() != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>') return false;
  if (hex(p[3]) < 0 || hex(p[4]) < 0) return false;
  *value = hex(p[3]) * 16 + hex(p[4]);
  return true;
}

// Whether Tokenizer::Decode of an encoded text can give the text back: the
// vocabulary has " " (the dummy prefix, which Decode drops after BOS) and
// llama2.c's byte-fallback pieces <0xXX> at id XX + 3, and no other piece
// that Decode prints as a byte (as such, or after dropping the space that
// follows BOS). A given text also needs no merge into a byte-fallback id
// (ReferenceTokenizer::Encode's merged_bytes) and no BOS among its ids.
inline bool VocabularyRoundTrips(const std::vector<std::string>& pieces) {
  if (pieces.size() < 259) return false;
  bool space = false;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::string& p = pieces[i];
    int value = -1;
    const bool byte_piece = IsBytePiece(p, &value);
    if (i >= 3 && i < 259) {
      if (!byte_piece || value + 3 != static_cast<int>(i)) return false;
    } else if (byte_piece || (p.size() == 7 && p[0] == ' ' && IsBytePiece(p.substr(1), &value))) {
      return false;
    }
    space = space || p == " ";
  }
  return space;
}

// The tokenizer a .tmai model carries (tokenizer.tokens and
// tokenizer.scores), or false.
inline bool ModelVocabulary(const std::string& path, std::vector<std::string>* pieces, std::vector<float>* scores) {
  TinyAIMappedModel* model = tinyaiOpenMappedModel(path.c_str(), nullptr);
  if (!model) return false;
  const tinyai::TmaiReader& reader = model->reader();
  const tinyai::MetaEntry* tokens = reader.FindMeta("tokenizer.tokens");
  const tinyai::MetaEntry* values = reader.FindMeta("tokenizer.scores");
  const bool ok = tokens && values && tokens->count == values->count;
  if (ok) {
    std::vector<tinyai::StringView> views(tokens->count);
    tinyai::TmaiReader::GetStringArray(*tokens, views.data());
    pieces->clear();
    for (const tinyai::StringView& v : views) pieces->emplace_back(v.data, v.size);
    scores->resize(values->count);
    tinyai::TmaiReader::CopyFloatArray(*values, scores->data());
  }
  tinyaiCloseMappedModel(model);
  return ok;
}

// ---- llama2.c's encode() ------------------------------------------------------

// The vocabulary as llama2.c's encode() sees it, with TinyAI's documented
// choices where llama2.c has none: equal pieces resolve to the lowest id, a
// missing " " falls back to its byte token, and BOS is added after the
// merges.
class ReferenceTokenizer {
 public:
  ReferenceTokenizer(const std::vector<std::string>& pieces, const std::vector<float>& scores)
      : pieces_(pieces), scores_(scores) {
    for (size_t i = 0; i < pieces.size(); ++i) ids_.emplace(pieces[i], static_cast<int32_t>(i));
  }

  int32_t Lookup(const std::string& s) const {
    auto it = ids_.find(s);
    return it == ids_.end() ? -1 : it->second;
  }

  // The ids of text (no BOS), or false when a byte has no byte-fallback
  // token. The merge loop rescans every pair after every merge, as
  // llama2.c does. *merged_bytes (may be null) tells whether a merge made
  // one of the byte-fallback ids (3..258), which then decodes to a byte,
  // not to the text it was merged from.
  bool Encode(const std::string& text, std::vector<int32_t>* out, bool* merged_bytes = nullptr) const {
    out->clear();
    if (merged_bytes) *merged_bytes = false;
    const int32_t vocab = static_cast<int32_t>(pieces_.size());
    auto byte_token = [&](unsigned char b) -> bool {
      if (b + 3 >= vocab) return false;
      out->push_back(b + 3);
      return true;
    };
    if (text.empty()) return true;
    const int32_t space = Lookup(" ");
    if (space >= 0) {
      out->push_back(space);
    } else if (!byte_token(' ')) {
      return false;
    }
    std::string chunk;
    for (size_t i = 0; i < text.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(text[i]);
      if ((c & 0xC0) != 0x80) chunk.clear();
      chunk.push_back(static_cast<char>(c));
      const bool continues = i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80;
      if (continues && chunk.size() < 4) continue;
      const int32_t id = Lookup(chunk);
      if (id >= 0) {
        out->push_back(id);
      } else {
        for (char b : chunk) {
          if (!byte_token(static_cast<unsigned char>(b))) return false;
        }
      }
      chunk.clear();
    }
    while (true) {
      float best = -1e10f;
      int32_t best_id = -1;
      size_t best_at = 0;
      for (size_t i = 0; i + 1 < out->size(); ++i) {
        const int32_t id = Lookup(pieces_[static_cast<size_t>((*out)[i])] + pieces_[static_cast<size_t>((*out)[i + 1])]);
        if (id >= 0 && scores_[static_cast<size_t>(id)] > best) {
          best = scores_[static_cast<size_t>(id)];
          best_id = id;
          best_at = i;
        }
      }
      if (best_id < 0) break;
      if (merged_bytes && best_id >= 3 && best_id < 259) *merged_bytes = true;
      (*out)[best_at] = best_id;
      out->erase(out->begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
    }
    return true;
  }

 private:
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::map<std::string, int32_t> ids_;  // emplace keeps the lowest id
};

// The converted model opens, every layer loads, and a runner evaluates a
// prompt and samples inside the vocabulary.
inline void RunConverted(const std::string& path, const tinyai::LlamaHyperParams& shape) {
  TinyAIMmapConfig config = tinyaiCreateDefaultMmapConfig();
  config.prefetchThreads = 0;
  TinyAIMappedModel* model = tinyaiOpenMappedModel(path.c_str(), &config);
  FUZZ_CHECK(model != nullptr, "the converted model does not open");
  for (int l = 0; l < tinyaiGetMappedLayerCount(model); ++l) {
    FUZZ_CHECK(tinyaiGetLayerWeights(model, l) != nullptr, "layer %d of the converted model does not load", l);
    tinyaiReleaseLayerWeights(model, l);
  }
  TinyAILLMConfig cfg = tinyaiCreateDefaultLLMConfig();
  cfg.contextLength = shape.seq_len < 8 ? shape.seq_len : 8;
  TinyAILLM* llm = nullptr;
  TinyAIStatus s = tinyaiCreateLLM(model, &cfg, &llm);
  // The converter keeps the runtime's limits (format/limits.h): whatever it
  // writes, a runner takes.
  FUZZ_CHECK(s == TINYAI_OK, "a converted model's runner fails: %s", tinyaiStatusString(s));
  TinyAIModelInfo info;
  std::memset(&info, 0, sizeof info);
  info.structSize = sizeof info;
  FUZZ_CHECK(tinyaiGetLLMModelInfo(llm, &info) == TINYAI_OK, "tinyaiGetLLMModelInfo");
  FUZZ_CHECK(info.dim == shape.dim && info.hiddenDim == shape.hidden_dim && info.layers == shape.layers &&
                 info.heads == shape.heads && info.kvHeads == shape.kv_heads && info.vocabSize == shape.vocab_size &&
                 info.seqLen == shape.seq_len && info.sharedClassifier == (shape.shared_classifier ? 1 : 0),
             "the runner sees another shape than the converter wrote");
  int32_t tokens[8];
  int32_t count = 0;
  s = tinyaiLLMTokenize(llm, "ab", 1, tokens, 8, &count);
  if (s == TINYAI_OK) {
    if (count > cfg.contextLength) count = cfg.contextLength;
    std::vector<float> logits(static_cast<size_t>(shape.vocab_size));
    s = tinyaiLLMEval(llm, tokens, count, logits.data());
    // Weights that are NaN or infinite (or overflow) give logits that are:
    // TINYAI_ERR_NOT_FINITE, and nothing to sample.
    FUZZ_CHECK(s == TINYAI_OK || s == TINYAI_ERR_NOT_FINITE, "evaluating %d tokens fails: %s", count,
               tinyaiStatusString(s));
    if (s != TINYAI_OK) CheckFailure(s, "tinyaiLLMEval");
    for (float temperature : {0.0f, 0.8f}) {
      if (s != TINYAI_OK) break;
      TinyAISamplerConfig sampler = tinyaiCreateDefaultSamplerConfig();
      sampler.temperature = temperature;
      uint64_t rng = 7;
      int32_t token = -1;
      std::vector<float> copy = logits;
      FUZZ_CHECK(tinyaiLLMSample(llm, copy.data(), &sampler, &rng, &token) == TINYAI_OK, "tinyaiLLMSample");
      FUZZ_CHECK(token >= 0 && token < shape.vocab_size, "sampled token %d outside the vocabulary of %d", token,
                 shape.vocab_size);
    }
  } else {
    // Only a vocabulary without the byte-fallback piece of 'b' (id 101), or
    // a byte-level one without 'b' (a byte-level BPE has no fallback).
    CheckFailure(s, "tinyaiLLMTokenize");
    FUZZ_CHECK(s == TINYAI_ERR_BAD_TOKENIZER &&
                   (shape.vocab_size <= 101 || std::strstr(tinyaiGetLastErrorMessage(), "is not in the vocabulary")),
               "tokenizing fails: %s", tinyaiStatusString(s));
  }
  TinyAIGenerateParams params = tinyaiCreateDefaultGenerateParams();
  params.steps = 6;
  params.sampler.temperature = 0.9f;
  char text[256];
  size_t len = 0;
  s = tinyaiLLMGenerate(llm, "a", &params, text, sizeof text, &len, nullptr);
  if (s != TINYAI_OK) CheckFailure(s, "tinyaiLLMGenerate");
  tinyaiDestroyLLM(llm);
  tinyaiCloseMappedModel(model);
}

}  // namespace tinyai_fuzz

#endif  // TINYAI_TESTS_FUZZ_FUZZ_UTIL_H_
