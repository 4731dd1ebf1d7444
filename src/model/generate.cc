#include "model/generate.h"

#include <cstring>

#include "common/status.h"
#include "port/port.h"

namespace tinyai {

bool TextSink::Put(const char* piece, size_t len) {
  if (out_ && capacity_ > 0 && length_ < capacity_ - 1) {
    size_t room = capacity_ - 1 - length_;
    size_t n = len < room ? len : room;
    std::memcpy(out_ + length_, piece, n);
    out_[length_ + n] = '\0';
  }
  length_ += len;
  return cb_ ? cb_(piece, len, user_) == 0 : true;
}

TinyAIStatus Generate(LlamaModel* model, Sampler* sampler, const char* prompt, const TinyAIGenerateParams& params,
                      TextSink* sink, TinyAIGenerateStats* stats) {
  const uint64_t t0 = port::MonotonicNanos();
  TinyAIGenerateStats st;
  std::memset(&st, 0, sizeof st);
  auto seconds_since = [](uint64_t t) { return static_cast<double>(port::MonotonicNanos() - t) * 1e-9; };
  const Tokenizer& tok = model->tokenizer();
  const int32_t context = model->context_length();

  // Every byte gives at most one token, plus BOS and the dummy prefix: one
  // encoding into a buffer that bound sizes never fails for lack of room
  // (and so leaves no error behind on success).
  const size_t bound = std::strlen(prompt) + 2;
  Array<int32_t> tokens;
  TINYAI_RETURN_IF_ERROR(tokens.Allocate(bound, "prompt tokens"));
  size_t count = 0;
  TINYAI_RETURN_IF_ERROR(tok.Encode(prompt, true, false, tokens.data(), bound, &count));
  if (count > static_cast<size_t>(context)) {
    return SetError(TINYAI_ERR_CONTEXT_OVERFLOW,
                    "the prompt is %zu tokens (BOS included) but the context holds %d", count, context);
  }
  const int32_t prompt_tokens = static_cast<int32_t>(count);
  int32_t steps = params.steps == 0 || params.steps > context ? context : params.steps;
  st.promptTokens = prompt_tokens;

  model->Reset();
  char byte[1];
  bool stopped = false;
  // The prompt's own pieces are printed as llama2.c does, position by
  // position: the piece forced at position p (p < steps) is token p+1.
  const int32_t shown = prompt_tokens - 1 < steps ? prompt_tokens - 1 : steps;
  for (int32_t i = 1; i <= shown && !stopped; ++i) {
    StringView piece = tok.Decode(tokens[i - 1], tokens[i], byte);
    stopped = !sink->Put(piece.data, piece.size);
  }
  if (!stopped && steps >= prompt_tokens) {
    const uint64_t tp = port::MonotonicNanos();
    TINYAI_RETURN_IF_ERROR(model->Eval(tokens.data(), prompt_tokens));
    st.promptSeconds = seconds_since(tp);
    uint64_t rng = params.sampler.seed;
    int32_t token = tokens[prompt_tokens - 1];
    int32_t pos = prompt_tokens;
    const uint64_t td = port::MonotonicNanos();
    for (;;) {
      int32_t next = 0;
      TINYAI_RETURN_IF_ERROR(sampler->Sample(model->mutable_logits(), params.sampler.temperature,
                                             params.sampler.topP, &rng, &next));
      if (st.generatedTokens == 0) st.firstTokenSeconds = seconds_since(t0);
      if (next == tok.bos_id()) break;
      ++st.generatedTokens;
      StringView piece = tok.Decode(token, next, byte);
      if (!sink->Put(piece.data, piece.size) || pos >= steps) break;
      TINYAI_RETURN_IF_ERROR(model->Eval(&next, 1));
      ++pos;
      ++st.decodeTokens;
      token = next;
    }
    st.decodeSeconds = seconds_since(td);
  }
  st.totalSeconds = seconds_since(t0);
  if (stats) *stats = st;
  if (sink->truncated()) {
    return SetError(TINYAI_ERR_RESOURCE_EXHAUSTED, "generated %zu bytes of text; the output buffer holds %zu",
                    sink->length(), sink->capacity());
  }
  return TINYAI_OK;
}

}  // namespace tinyai
