#include "text/chat_template.h"

#include <cstring>
#include <initializer_list>

#include "common/status.h"

namespace tinyai {

namespace {

bool Contains(StringView text, const char* marker) {
  const size_t n = std::strlen(marker);
  if (text.size < n) return false;
  for (size_t i = 0; i + n <= text.size; ++i) {
    if (std::memcmp(text.data + i, marker, n) == 0) return true;
  }
  return false;
}

// The position of marker in text at or after from, or text.size.
size_t Find(StringView text, const char* marker, size_t from) {
  const size_t n = std::strlen(marker);
  for (size_t i = from; i + n <= text.size; ++i) {
    if (std::memcmp(text.data + i, marker, n) == 0) return i;
  }
  return text.size;
}

// Appends to a caller's buffer, counting what does not fit.
class Writer {
 public:
  Writer(char* out, size_t capacity) : out_(out), capacity_(capacity) {}
  void Add(const char* s, size_t n) {
    for (size_t i = 0; i < n; ++i, ++len_) {
      if (len_ + 1 < capacity_) out_[len_] = s[i];
    }
  }
  void Add(const char* s) { Add(s, std::strlen(s)); }
  // A Jinja string literal's text: \n, \t, \' , \" and \\ unescaped.
  void AddJinja(StringView s) {
    for (size_t i = 0; i < s.size; ++i) {
      char c = s.data[i];
      if (c == '\\' && i + 1 < s.size) {
        const char e = s.data[++i];
        c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
      }
      Add(&c, 1);
    }
  }
  // s without leading and trailing whitespace (llama.cpp trims Llama 3's turns).
  void AddTrimmed(const char* s) {
    size_t b = 0, e = std::strlen(s);
    auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    while (b < e && space(s[b])) ++b;
    while (e > b && space(s[e - 1])) --e;
    Add(s + b, e - b);
  }
  size_t Finish() {
    if (capacity_ > 0) out_[len_ < capacity_ ? len_ : capacity_ - 1] = '\0';
    return len_;
  }

 private:
  char* out_;
  size_t capacity_;
  size_t len_ = 0;
};

}  // namespace

void ChatTemplate::Init(StringView text) {
  default_system_ = StringView();
  if (text.size == 0) {
    kind_ = kNone;
  } else if (Contains(text, "<|im_start|>")) {
    kind_ = kChatMl;
    // The template's own system turn: a literal '<|im_start|>system\n...'
    // (the newline as Jinja's escape or as itself) that is not followed by
    // the caller's content (' + message['content']).
    for (const char* marker : {"<|im_start|>system\\n", "<|im_start|>system\n"}) {
      for (size_t at = Find(text, marker, 0); at < text.size; at = Find(text, marker, at + 1)) {
        const size_t start = at + std::strlen(marker);
        if (start < text.size && text.data[start] == '\'') continue;
        const size_t end = Find(text, "<|im_end|>", start);
        if (end < text.size && end < Find(text, "'", start)) default_system_ = StringView{text.data + start, end - start};
        break;
      }
      if (default_system_.size > 0) break;
    }
  } else if (Contains(text, "<|start_header_id|>") && Contains(text, "<|end_header_id|>")) {
    kind_ = kLlama3;
  } else if (Contains(text, "<|user|>")) {
    kind_ = kZephyr;
  } else if (Contains(text, "[INST]")) {
    kind_ = kLlama2;
  } else {
    kind_ = kUnknown;
  }
}

const char* ChatTemplate::name() const {
  switch (kind_) {
    case kNone: return "none";
    case kUnknown: return "unknown";
    case kChatMl: return "chatml";
    case kLlama3: return "llama3";
    case kZephyr: return "zephyr";
    case kLlama2: return "llama2";
  }
  return "?";
}

TinyAIStatus ChatTemplate::Format(const char* system, const char* user, char* out, size_t capacity,
                                  size_t* len) const {
  return Write(system, user, false, out, capacity, len);
}

TinyAIStatus ChatTemplate::FormatNext(const char* user, char* out, size_t capacity, size_t* len) const {
  return Write(nullptr, user, true, out, capacity, len);
}

TinyAIStatus ChatTemplate::Write(const char* system, const char* user, bool next, char* out, size_t capacity,
                                 size_t* len) const {
  if (user == nullptr || len == nullptr || (capacity > 0 && out == nullptr)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "chat prompt: %s is NULL",
                    user == nullptr ? "the user message" : len == nullptr ? "len" : "out");
  }
  if (kind_ == kNone) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "the model has no chat template (tokenizer.chat_template): it is a base "
                    "model, or its file was converted without one; give it plain text instead");
  }
  if (kind_ == kUnknown) {
    return SetError(TINYAI_ERR_UNSUPPORTED, "the model's chat template (tokenizer.chat_template) is none TinyAI "
                    "knows: it formats chatml (<|im_start|>), llama3 (<|start_header_id|>), zephyr (<|user|>) and "
                    "llama2 ([INST]) turns; format the prompt yourself and give it as plain text");
  }
  const bool has_system = system != nullptr && system[0] != '\0';
  Writer w(out, capacity);
  switch (kind_) {
    case kChatMl:
      if (next) {
        w.Add("<|im_end|>\n");
      } else if (has_system || default_system_.size > 0) {
        w.Add("<|im_start|>system\n");
        if (has_system) {
          w.Add(system);
        } else {
          w.AddJinja(default_system_);
        }
        w.Add("<|im_end|>\n");
      }
      w.Add("<|im_start|>user\n");
      w.Add(user);
      w.Add("<|im_end|>\n<|im_start|>assistant\n");
      break;
    case kLlama3:
      if (next) w.Add("<|eot_id|>");
      if (has_system) {
        w.Add("<|start_header_id|>system<|end_header_id|>\n\n");
        w.AddTrimmed(system);
        w.Add("<|eot_id|>");
      }
      w.Add("<|start_header_id|>user<|end_header_id|>\n\n");
      w.AddTrimmed(user);
      w.Add("<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
      break;
    case kZephyr:
      if (next) w.Add("</s>\n");
      if (has_system) {
        w.Add("<|system|>\n");
        w.Add(system);
        w.Add("</s>\n");
      }
      w.Add("<|user|>\n");
      w.Add(user);
      w.Add("</s>\n<|assistant|>\n");
      break;
    case kLlama2:
      if (next) w.Add("</s>");
      w.Add("[INST] ");
      if (has_system) {
        w.Add("<<SYS>>\n");
        w.Add(system);
        w.Add("\n<</SYS>>\n\n");
      }
      w.Add(user);
      w.Add(" [/INST]");
      break;
    default: break;
  }
  *len = w.Finish();
  if (*len + 1 > capacity) {
    return SetError(TINYAI_ERR_BUFFER_TOO_SMALL, "chat prompt: the %s %sturn needs %zu bytes (NUL included), capacity %zu",
                    name(), next ? "next " : "", *len + 1, capacity);
  }
  return TINYAI_OK;
}

}  // namespace tinyai
