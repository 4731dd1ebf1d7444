// A model's chat template: the text a turn of conversation becomes before it
// is tokenized, as the model was trained on it. GGUF's
// tokenizer.chat_template is a Jinja program; TinyAI runs no Jinja, it
// recognizes the few templates the small models use by the markers they
// write (as llama.cpp's llm_chat_detect_template does) and formats a turn
// itself:
//   chatml  "<|im_start|>" (Qwen2/2.5/3, SmolLM2): a system turn (the
//           template's own default when the caller gives none), the user
//           turn, then "<|im_start|>assistant\n";
//   llama3  "<|start_header_id|>" (Llama 3, 3.1, 3.2): header-framed turns
//           ended by <|eot_id|>; BOS is the tokenizer's to add;
//   zephyr  "<|user|>" (TinyLlama chat, Zephyr): "<|user|>\n...</s>\n";
//   llama2  "[INST]" (Llama 2 chat, Mistral instruct): "[INST] <<SYS>>...".
// Anything else is refused by name. Nothing is allocated: the template text
// is the model file's, the output the caller's buffer.
#ifndef TINYAI_TEXT_CHAT_TEMPLATE_H_
#define TINYAI_TEXT_CHAT_TEMPLATE_H_

#include <cstddef>

#include "common/span.h"
#include "tinyai/status.h"

namespace tinyai {

class ChatTemplate {
 public:
  enum Kind { kNone, kUnknown, kChatMl, kLlama3, kZephyr, kLlama2 };

  // Recognizes text (the template's source; empty: the model has none).
  void Init(StringView text);

  // The prompt of one turn: system (NULL or empty: the template's default,
  // or none) and user. Writes at most capacity bytes, NUL included, to out
  // and the text's length to *len; TINYAI_ERR_BUFFER_TOO_SMALL when it does
  // not fit (*len: what it needs, without the NUL), TINYAI_ERR_UNSUPPORTED
  // when the model has no template or one TinyAI does not know.
  TinyAIStatus Format(const char* system, const char* user, char* out, size_t capacity, size_t* len) const;

  // The text that follows the assistant's answer when the user speaks again
  // in the same context (a KV cache that holds the turns before): it closes
  // the answer's turn, however the answer ended (the end-of-turn token the
  // model sampled is never fed), then is Format's user turn without a
  // system turn. As llama.cpp's llama_chat_apply_template writes a
  // conversation: chatml "<|im_end|>\n<|im_start|>user\n...", llama3
  // "<|eot_id|><|start_header_id|>user...", zephyr "</s>\n<|user|>\n...",
  // llama2 "</s>[INST] ... [/INST]". Same protocol and refusals as Format.
  TinyAIStatus FormatNext(const char* user, char* out, size_t capacity, size_t* len) const;

  Kind kind() const { return kind_; }
  // "chatml", "llama3", "zephyr", "llama2"; "none", "unknown".
  const char* name() const;
  // The system turn a chatml template writes when the caller gives none
  // (Qwen2.5's "You are Qwen, created by Alibaba Cloud. ..."), as it is in
  // the template (Jinja escapes included); empty when it writes none.
  StringView default_system() const { return default_system_; }

 private:
  // Format (next false) and FormatNext (next true).
  TinyAIStatus Write(const char* system, const char* user, bool next, char* out, size_t capacity, size_t* len) const;

  Kind kind_ = kNone;
  StringView default_system_;
};

}  // namespace tinyai

#endif  // TINYAI_TEXT_CHAT_TEMPLATE_H_
