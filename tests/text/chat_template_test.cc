// Chat templates (text/chat_template.h): each known family recognized from
// the template texts the models ship (excerpts of their
// tokenizer_config.json chat_template, as llama.cpp's converter copies it
// into GGUF), one turn formatted as llama.cpp's llama_chat_apply_template
// formats it, the template's default system message, and every refusal.
#include "text/chat_template.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "tinyai/tinyai.h"

namespace {

tinyai::StringView View(const char* s) { return tinyai::StringView{s, std::strlen(s)}; }

std::string Turn(const char* tmpl, const char* system, const char* user, const char** kind = nullptr) {
  tinyai::ChatTemplate t;
  t.Init(View(tmpl));
  if (kind) *kind = t.name();
  char out[1024];
  size_t len = 0;
  const TinyAIStatus s = t.Format(system, user, out, sizeof out, &len);
  if (s != TINYAI_OK) return std::string("error: ") + tinyaiGetLastErrorMessage();
  EXPECT_EQ(std::strlen(out), len);
  return std::string(out, len);
}

// Qwen2.5-Instruct's template (its non-tool branch), Jinja escapes as in the file.
const char kQwen25[] =
    "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] "
    "}}{%- else %}{{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}{%- endif %}{%- else "
    "%}{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + "
    "'<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a "
    "helpful assistant.<|im_end|>\\n' }}{%- endif %}{%- endif %}{%- if add_generation_prompt %}{{- "
    "'<|im_start|>assistant\\n' }}{%- endif %}";
// Qwen3's: no default system turn.
const char kQwen3[] =
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
const char kLlama3[] =
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt "
    "%}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
const char kZephyr[] =
    "{% for message in messages %}{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + eos_token "
    "}}{% endif %}{% endfor %}";
const char kLlama2[] = "{% if messages[0]['role'] == 'system' %}{{ bos_token + '[INST] <<SYS>>\\n' }}{% endif %}";

TEST(ChatTemplate, ChatMlWithTheTemplatesDefaultSystem) {
  const char* kind = nullptr;
  EXPECT_EQ(Turn(kQwen25, nullptr, "Hi!", &kind),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_STREQ(kind, "chatml");
  EXPECT_EQ(Turn(kQwen25, "Be brief.", "Hi!"),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(Turn(kQwen3, "", "Hi!"), "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  // A template with real newlines (no Jinja escapes), SmolLM2's default.
  EXPECT_EQ(Turn("{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM<|im_end|>\n' }}", nullptr, "x"),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM<|im_end|>\n<|im_start|>user\nx<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, Llama3ZephyrAndLlama2) {
  const char* kind = nullptr;
  EXPECT_EQ(Turn(kLlama3, " Be brief. ", "  Hi!\n", &kind),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>"
            "\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_STREQ(kind, "llama3");
  EXPECT_EQ(Turn(kLlama3, nullptr, "Hi!"),
            "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(Turn(kZephyr, "S", "Hi!", &kind), "<|system|>\nS</s>\n<|user|>\nHi!</s>\n<|assistant|>\n");
  EXPECT_STREQ(kind, "zephyr");
  EXPECT_EQ(Turn(kLlama2, "S", "Hi!", &kind), "[INST] <<SYS>>\nS\n<</SYS>>\n\nHi! [/INST]");
  EXPECT_STREQ(kind, "llama2");
  EXPECT_EQ(Turn(kLlama2, nullptr, "Hi!"), "[INST] Hi! [/INST]");
}

std::string Next(const char* tmpl, const char* user) {
  tinyai::ChatTemplate t;
  t.Init(View(tmpl));
  char out[1024];
  size_t len = 0;
  const TinyAIStatus s = t.FormatNext(user, out, sizeof out, &len);
  if (s != TINYAI_OK) return std::string("error: ") + tinyaiGetLastErrorMessage();
  EXPECT_EQ(std::strlen(out), len);
  return std::string(out, len);
}

// A later turn closes the answer before it (whose end-of-turn token was
// sampled, never fed) and never repeats a system turn: the first turn's
// text, the answer and the next turn's make the conversation as
// llama_chat_apply_template writes it.
TEST(ChatTemplate, TheNextTurnClosesTheAnswerAndOpensTheUsersTurn) {
  EXPECT_EQ(Next(kQwen25, "And?"), "<|im_end|>\n<|im_start|>user\nAnd?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(Turn(kQwen25, "S", "Hi!") + "Hello." + Next(kQwen25, "And?"),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
            "<|im_start|>user\nAnd?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(Next(kLlama3, " And? "),
            "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnd?<|eot_id|><|start_header_id|>assistant"
            "<|end_header_id|>\n\n");
  EXPECT_EQ(Next(kZephyr, "And?"), "</s>\n<|user|>\nAnd?</s>\n<|assistant|>\n");
  EXPECT_EQ(Next(kLlama2, "And?"), "</s>[INST] And? [/INST]");
  EXPECT_NE(Next("", "And?").find("no chat template"), std::string::npos);
  EXPECT_NE(Next("{{ messages }}", "And?").find("none TinyAI knows"), std::string::npos);
  tinyai::ChatTemplate t;
  t.Init(View(kZephyr));
  size_t len = 0;
  EXPECT_EQ(t.FormatNext("And?", nullptr, 0, &len), TINYAI_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(len, std::strlen("</s>\n<|user|>\nAnd?</s>\n<|assistant|>\n"));
  EXPECT_NE(std::string(tinyaiGetLastErrorMessage()).find("zephyr next turn needs"), std::string::npos);
  EXPECT_EQ(t.FormatNext(nullptr, nullptr, 0, &len), TINYAI_ERR_INVALID_ARGUMENT);
}

TEST(ChatTemplate, RefusalsAndTheCapacityProtocol) {
  const char* kind = nullptr;
  EXPECT_NE(Turn("{{ messages }}", nullptr, "Hi!", &kind).find("none TinyAI knows"), std::string::npos);
  EXPECT_STREQ(kind, "unknown");
  EXPECT_NE(Turn("", nullptr, "Hi!", &kind).find("no chat template"), std::string::npos);
  EXPECT_STREQ(kind, "none");
  tinyai::ChatTemplate t;
  t.Init(View(kQwen3));
  char out[8];
  size_t len = 0;
  EXPECT_EQ(t.Format(nullptr, "Hi!", out, sizeof out, &len), TINYAI_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(len, std::strlen("<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"));
  EXPECT_EQ(out[7], '\0');
  EXPECT_EQ(t.Format(nullptr, "Hi!", nullptr, 0, &len), TINYAI_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(t.Format(nullptr, nullptr, out, sizeof out, &len), TINYAI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t.Format(nullptr, "Hi!", nullptr, 8, &len), TINYAI_ERR_INVALID_ARGUMENT);
}

}  // namespace
