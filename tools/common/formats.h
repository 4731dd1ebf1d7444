// What a model file is, told by its bytes (tools may use exceptions): the
// formats TinyAI reads or converts, recognised without asking the user, so
// that tinyai-convert needs no --from and a runtime tool given a file it
// cannot run names the command that converts it.
//   .tmai          "TMAI" at offset 0
//   GGUF           "GGUF" at offset 0
//   safetensors    a little-endian u64 header length N with 2 <= N <= size - 8,
//                  then '{'; a JSON file starting with '{' (the shards' index);
//                  a folder holding model.safetensors or its index
//   llama2.c       a checkpoint: seven int32 (dim, hidden, layers, heads,
//                  kv_heads, vocab (negative: a separate classifier),
//                  seq_len), each in a plausible range, heads dividing dim;
//                  a tokenizer: int32 max_token_length, then (float score,
//                  int32 length <= max, bytes) per piece
// Nothing is read but the first 64 bytes.
#ifndef TINYAI_TOOLS_COMMON_FORMATS_H_
#define TINYAI_TOOLS_COMMON_FORMATS_H_

#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace tinyai_tools {

enum class FileFormat {
  kUnknown,            // none of the below (or unreadable: opening it says why)
  kTmai,
  kGguf,
  kSafetensors,        // a .safetensors file, its index, or a checkpoint's folder
  kLlama2cCheckpoint,
  kLlama2cTokenizer,
};

inline const char* FileFormatName(FileFormat f) {
  switch (f) {
    case FileFormat::kTmai: return "a .tmai model";
    case FileFormat::kGguf: return "a GGUF file";
    case FileFormat::kSafetensors: return "a safetensors checkpoint";
    case FileFormat::kLlama2cCheckpoint: return "a llama2.c checkpoint";
    case FileFormat::kLlama2cTokenizer: return "a llama2.c tokenizer";
    default: return "no format TinyAI knows";
  }
}

// The --from name of a format tinyai-convert reads ("" for none).
inline const char* ConvertFromName(FileFormat f) {
  switch (f) {
    case FileFormat::kTmai: return "tmai";
    case FileFormat::kGguf: return "gguf";
    case FileFormat::kSafetensors: return "safetensors";
    case FileFormat::kLlama2cCheckpoint: return "llama2c";
    default: return "";
  }
}

namespace formats_detail {

inline int32_t I32At(const unsigned char* p) {
  uint32_t v = static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
               static_cast<uint32_t>(p[3]) << 24;
  int32_t x;
  std::memcpy(&x, &v, sizeof x);
  return x;
}

inline bool IsLlama2cHeader(const unsigned char* p, size_t n) {
  if (n < 28) return false;
  const int32_t dim = I32At(p), hidden = I32At(p + 4), layers = I32At(p + 8), heads = I32At(p + 12),
                kv_heads = I32At(p + 16), vocab = I32At(p + 20), seq_len = I32At(p + 24);
  const int64_t v = vocab < 0 ? -static_cast<int64_t>(vocab) : vocab;
  return dim > 0 && dim <= (1 << 16) && hidden > 0 && hidden <= (1 << 18) && layers > 0 && layers <= 1024 &&
         heads > 0 && heads <= dim && dim % heads == 0 && kv_heads > 0 && kv_heads <= heads && heads % kv_heads == 0 &&
         v > 0 && v <= (1 << 24) && seq_len > 0 && seq_len <= (1 << 24);
}

inline bool IsLlama2cTokenizer(const unsigned char* p, size_t n) {
  if (n < 12) return false;
  const int32_t max_len = I32At(p);
  float score;
  std::memcpy(&score, p + 4, sizeof score);
  const int32_t len = I32At(p + 8);
  return max_len > 0 && max_len <= 1024 && score == score && len > 0 && len <= max_len;
}

}  // namespace formats_detail

// The format of path, by its first bytes (a folder: by the files in it).
inline FileFormat DetectFormat(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return FileFormat::kUnknown;
  if (S_ISDIR(st.st_mode)) {
    struct stat inner;
    if (::stat((path + "/model.safetensors").c_str(), &inner) == 0 ||
        ::stat((path + "/model.safetensors.index.json").c_str(), &inner) == 0) {
      return FileFormat::kSafetensors;
    }
    return FileFormat::kUnknown;
  }
  if (!S_ISREG(st.st_mode)) return FileFormat::kUnknown;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return FileFormat::kUnknown;
  unsigned char head[64];
  const size_t n = std::fread(head, 1, sizeof head, f);
  std::fclose(f);
  if (n >= 4 && std::memcmp(head, "TMAI", 4) == 0) return FileFormat::kTmai;
  if (n >= 4 && std::memcmp(head, "GGUF", 4) == 0) return FileFormat::kGguf;
  if (n >= 9) {
    uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = header << 8 | head[i];
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    if (header >= 2 && header <= size - 8 && head[8] == '{') return FileFormat::kSafetensors;
  }
  size_t first = 0;
  while (first < n && (head[first] == ' ' || head[first] == '\n' || head[first] == '\r' || head[first] == '\t')) {
    ++first;
  }
  if (first < n && head[first] == '{') return FileFormat::kSafetensors;  // a shards' index (JSON)
  if (formats_detail::IsLlama2cHeader(head, n)) return FileFormat::kLlama2cCheckpoint;
  if (formats_detail::IsLlama2cTokenizer(head, n)) return FileFormat::kLlama2cTokenizer;
  return FileFormat::kUnknown;
}

// What to do with a file a runtime tool (which reads .tmai and GGUF) cannot
// open: "" for those two (their own error stands), else a sentence naming
// the command that converts it.
inline std::string ConvertAdvice(const std::string& path) {
  switch (DetectFormat(path)) {
    case FileFormat::kSafetensors:
      return "'" + path + "' is a safetensors checkpoint: convert it with tinyai-convert " + path + " OUT.tmai";
    case FileFormat::kLlama2cCheckpoint:
      return "'" + path + "' is a llama2.c checkpoint: convert it with tinyai-convert --tokenizer TOK.bin " + path +
             " OUT.tmai";
    case FileFormat::kLlama2cTokenizer:
      return "'" + path + "' is a llama2.c tokenizer, not a model: give it to tinyai-convert --tokenizer with its "
             "checkpoint";
    case FileFormat::kUnknown:
      return "'" + path + "' is none of the formats TinyAI reads (.tmai, GGUF) or converts (safetensors, llama2.c; "
             "tinyai-convert --help)";
    default: return "";
  }
}

}  // namespace tinyai_tools

#endif  // TINYAI_TOOLS_COMMON_FORMATS_H_
