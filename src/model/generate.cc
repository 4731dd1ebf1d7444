#include "model/generate.h"

#include <cstring>

#include "common/ledger.h"
#include "common/status.h"
#include "common/struct_size.h"
#include "port/port.h"
#include "text/sampler.h"

namespace tinyai {
namespace {

double SecondsSince(uint64_t t) { return static_cast<double>(port::MonotonicNanos() - t) * 1e-9; }

// The model's logits after `position` must be finite: NaN or infinity there
// comes from the weights (an infinite one) or an overflow, and would be
// sampled as token 0.
TinyAIStatus CheckModelLogits(const LlamaModel& m, const float* logits, int32_t position) {
  size_t at = 0;
  if (CheckFinite(logits, static_cast<size_t>(m.params().vocab_size), &at) == TINYAI_OK) return TINYAI_OK;
  return SetError(TINYAI_ERR_NOT_FINITE,
                  "'%s': the logits after position %d are not finite (token %zu is %g): the model's weights hold "
                  "NaN or infinity, or overflow on this input", m.mapped_model()->reader().source(), position, at,
                  static_cast<double>(logits[at]));
}

}  // namespace

TinyAISamplerConfig DefaultSamplerConfig() {
  TinyAISamplerConfig c;
  std::memset(&c, 0, sizeof c);
  c.structSize = sizeof c;
  c.temperature = 0.0f;
  c.topP = 0.9f;
  c.seed = 42;
  c.topK = 0;
  c.minP = 0.0f;
  c.repeatPenalty = 1.0f;
  c.repeatLastN = 64;
  return c;
}

SampleRule RuleOf(const TinyAISamplerConfig& c) {
  SampleRule r;
  r.temperature = c.temperature;
  r.top_p = c.topP;
  r.top_k = c.topK;
  r.min_p = c.minP;
  return r;
}

TinyAIGenerateParams DefaultGenerateParams() {
  TinyAIGenerateParams p;
  std::memset(&p, 0, sizeof p);
  p.structSize = sizeof p;
  p.steps = 0;
  p.sampler = DefaultSamplerConfig();
  p.maxNewTokens = 256;
  return p;
}

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

TinyAIStatus EvalTokens(ForwardScheduler* sched, LlamaModel* m, const int32_t* tokens, int32_t count) {
  if (count < 0 || (count > 0 && !tokens)) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "eval: %d tokens at %p", count, static_cast<const void*>(tokens));
  }
  const int32_t most = m->max_positions();
  if (count > most - m->position()) {
    return SetError(TINYAI_ERR_CONTEXT_OVERFLOW, "%d tokens do not fit: %d of the context's %d positions are used",
                    count, m->position(), most);
  }
  const int32_t vocab = m->params().vocab_size;
  for (int32_t i = 0; i < count; ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      return SetError(TINYAI_ERR_INVALID_ARGUMENT, "token %d at index %d is outside the vocabulary (0..%d)", tokens[i],
                      i, vocab - 1);
    }
  }
  // All or nothing: a failure in a later pass (a layer that fails its
  // checksum on first load) leaves the position where it was.
  const int32_t start = m->position();
  for (int32_t done = 0; done < count;) {
    const int32_t pos = m->position();
    int32_t n = m->PassRows(sched->MaxRows(m->PlanPosition(pos)));
    if (n <= 0) {
      m->set_position(start);
      return SetError(TINYAI_ERR_CONTEXT_OVERFLOW, "position %d is beyond every planned max shape's context", pos);
    }
    if (n > count - done) n = count - done;
    PassContext pass;
    pass.shape.rows = n;
    pass.shape.context = m->PassSpan(pos, n);
    pass.position = pos;
    pass.output = done + n == count;  // only the last token's logits are returned
    TinyAIStatus s = sched->RunPass(pass, tokens + done);
    if (s != TINYAI_OK) {
      m->set_position(start);
      return s;
    }
    done += n;
  }
  if (count > 0) {
    const TinyAIStatus s = CheckModelLogits(*m, static_cast<const float*>(sched->OutputData(0)), m->position() - 1);
    if (s != TINYAI_OK) {
      m->set_position(start);
      return s;
    }
  }
  return TINYAI_OK;
}

void TextSession::Cancel() {
  if (sched_->in_pass()) sched_->AbortPass();
  phase_ = kIdle;
}

uint32_t TextSession::PromptBytesPerPosition(const LlamaModel& llama) {
  const uint32_t longest = llama.tokenizer().max_piece_length();
  return longest < kPromptBytesPerPosition ? longest : kPromptBytesPerPosition;
}

uint64_t TextSession::PromptBytes(const LlamaModel& llama) {
  return static_cast<uint64_t>(llama.prompt_capacity()) * PromptBytesPerPosition(llama);
}

uint64_t TextSession::ReserveBytes(const LlamaModel& llama) {
  const uint64_t context = static_cast<uint64_t>(llama.prompt_capacity());
  return context * sizeof(int32_t) + llama.tokenizer().max_piece_length() +
         TextScratch::BytesFor(llama.tokenizer(), static_cast<size_t>(PromptBytes(llama)));
}

TinyAIStatus TextSession::Reserve() {
  const LlamaModel& llama = *llama_;
  const size_t context = static_cast<size_t>(llama.prompt_capacity());
  if (tokens_.size() < context) {
    MemScope scope(kMemText);
    TINYAI_RETURN_IF_ERROR(tokens_.Allocate(context, "prompt tokens"));
  }
  const size_t longest = llama.tokenizer().max_piece_length();
  if (piece_.size() < longest) {
    MemScope scope(kMemText);
    TINYAI_RETURN_IF_ERROR(piece_.Allocate(longest, "decoded piece"));
  }
  return scratch_.Reserve(llama.tokenizer(), static_cast<size_t>(PromptBytes(llama)));
}

TinyAIStatus TextSession::Tokenize(const char* text, bool bos, bool eos, int32_t* out, size_t capacity,
                                   size_t* count) {
  const TextTokenizer& tok = llama_->tokenizer();
  if (!text || std::strlen(text) > PromptBytes(*llama_)) return tok.Encode(text, bos, eos, out, capacity, count);
  TINYAI_RETURN_IF_ERROR(Reserve());
  return tok.Encode(text, bos, eos, out, capacity, count, &scratch_);
}

bool TextSession::EmitToken(int32_t prev, int32_t token) {
  const size_t n = llama_->tokenizer().Decode(prev, token, piece_.data(), piece_.size());
  return Emit(StringView{piece_.data(), n < piece_.size() ? n : piece_.size()});
}

TinyAIStatus TextSession::Start(const char* prompt, const TinyAIGenerateParams& params, const TextSink& sink,
                                bool stop_when_full) {
  Cancel();
  stop_when_full_ = stop_when_full;
  t0_ = port::MonotonicNanos();
  std::memset(&stats_, 0, sizeof stats_);
  sink_ = sink;
  params_ = params;
  const TextTokenizer& tok = llama_->tokenizer();
  // The prompt fits the context (with a window, contextLength still); the
  // text runs to the context's end, or with a window on and on.
  const int32_t context = llama_->prompt_capacity(), positions = llama_->max_positions();
  // A continuation starts where the cache ends (and evaluates the token
  // printed last but never fed); otherwise the model starts afresh.
  const bool keep = params.keepContext != 0 && llama_->position() > 0;
  const int32_t start = keep ? llama_->position() : 0;
  // (Only where the text ended: a tinyaiLLMEval since moved the cache on.)
  const int32_t unfed = keep && unfed_at_ == start ? unfed_ : -1;
  unfed_ = -1;

  // The prompt's bound, before anything is encoded or allocated.
  const size_t bytes = std::strlen(prompt);
  const uint64_t most = PromptBytes(*llama_);
  if (bytes > most) {
    const uint32_t each = PromptBytesPerPosition(*llama_);
    const bool longest = each < kPromptBytesPerPosition;
    return SetError(TINYAI_ERR_CONTEXT_OVERFLOW,
                    "the prompt is %zu bytes, more than the %d tokens of the context %s: a prompt holds at most %llu "
                    "bytes, the context's %d positions at up to %u bytes each (%s); give a shorter prompt, or a longer "
                    "contextLength (at most the model's seq_len)",
                    bytes, context, longest ? "can hold" : "may take", static_cast<unsigned long long>(most), context,
                    each, longest ? "the vocabulary's longest piece" : "64 on any model");
  }
  TINYAI_RETURN_IF_ERROR(Reserve());
  TINYAI_RETURN_IF_ERROR(ReserveSampling());
  size_t count = 0;
  // BOS first and EOS last as the model says (tokenizer.add_bos, add_eos:
  // Tokenizer::add_bos), as llama.cpp's tokenizer adds its special tokens.
  const bool bos = tok.add_bos() && !keep, eos = tok.add_eos() && !keep;
  const size_t lead = unfed >= 0 ? 1 : 0;  // the unfed token goes first
  if (lead) tokens_[0] = unfed;
  const TinyAIStatus encoded =
      tok.Encode(prompt, bos, eos, tokens_.data() + lead, tokens_.size() - lead, &count, &scratch_);
  count += lead;
  if (encoded == TINYAI_ERR_BUFFER_TOO_SMALL || count > static_cast<size_t>(context)) {
    return SetError(TINYAI_ERR_CONTEXT_OVERFLOW, "the prompt is %zu tokens (%s) but the context holds %d", count,
                    bos ? "BOS included" : keep ? "a continuation" : "this model adds no BOS", context);
  }
  TINYAI_RETURN_IF_ERROR(encoded);
  if (keep && count > static_cast<size_t>(positions - start)) {
    return SetError(TINYAI_ERR_CONTEXT_OVERFLOW,
                    "the next turn is %zu tokens but only %d of the context's %d positions are left (%d are used): "
                    "start afresh (keepContext 0, or tinyaiResetLLM), or create the LLM with a longer contextLength "
                    "or a kvWindow", count, positions - start, positions, start);
  }
  if (count == 0 && keep) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "the next turn is empty: there is nothing to add to the context");
  }
  if (count == 0) {
    return SetError(TINYAI_ERR_INVALID_ARGUMENT, "the prompt is empty and this model starts no text with BOS "
                    "(tokenizer.add_bos is 0): there is nothing to continue; give a prompt");
  }
  prompt_tokens_ = static_cast<int32_t>(count);
  steps_ = params.steps == 0 || params.steps > positions ? positions : params.steps;
  steps_reason_ = steps_ == positions ? TINYAI_STOP_CONTEXT : TINYAI_STOP_STEPS;
  stats_.structSize = sizeof stats_;
  stats_.promptTokens = prompt_tokens_;
  if (!keep) llama_->Reset();
  if (keep) {
    // A continuation prints none of its prompt: the text is what the model adds.
    phase_ = start + prompt_tokens_ > steps_ ? kDone : kPrompt;
    if (phase_ == kDone) stats_.stopReason = steps_reason_;
    BeginSampling(params, start);
    return TINYAI_OK;
  }

  // The prompt's own pieces are printed as llama2.c does, position by
  // position: the piece forced at position p (p < steps) is token p+1.
  // Without BOS, token 0 is the text's first piece: printed first, its
  // dummy-prefix space dropped as after BOS. An EOS the model appends is
  // not text: not printed.
  if (!bos && !(eos && prompt_tokens_ == 1)) EmitToken(tok.bos_id(), tokens_[0]);
  const int32_t shown = prompt_tokens_ - 1 < steps_ ? prompt_tokens_ - 1 : steps_;
  for (int32_t i = 1; i <= shown && stats_.stopReason == TINYAI_STOP_NONE; ++i) {
    if (eos && i == prompt_tokens_ - 1) break;
    EmitToken(tokens_[static_cast<size_t>(i - 1)], tokens_[static_cast<size_t>(i)]);
  }
  if (stats_.stopReason == TINYAI_STOP_NONE && steps_ < prompt_tokens_) stats_.stopReason = steps_reason_;
  phase_ = stats_.stopReason == TINYAI_STOP_NONE ? kPrompt : kDone;
  BeginSampling(params, 0);
  return TINYAI_OK;
}

void TextSession::BeginSampling(const TinyAIGenerateParams& params, int32_t start) {
  rng_ = params.sampler.seed;
  rule_ = RuleOf(params.sampler);
  // The repetition window starts with the prompt's last tokens.
  recent_count_ = recent_next_ = 0;
  held_size_ = 0;
  if (params.sampler.repeatPenalty != 1.0f) {
    const size_t window = recent_.size();
    const size_t from = static_cast<size_t>(prompt_tokens_) > window ? prompt_tokens_ - window : 0;
    for (size_t i = from; i < static_cast<size_t>(prompt_tokens_); ++i) recent_[recent_count_++] = tokens_[i];
    recent_next_ = recent_count_ % window;
  }
  token_ = tokens_[static_cast<size_t>(prompt_tokens_ - 1)];
  pos_ = start + prompt_tokens_;
  fed_ = 0;
}

TinyAIStatus TextSession::NextPass() {
  PassContext pass;
  if (phase_ == kPrompt) {
    if (fed_ == 0) tp_ = port::MonotonicNanos();
    if (fed_ < prompt_tokens_) {
      const int32_t at = llama_->position();
      int32_t n = llama_->PassRows(sched_->MaxRows(llama_->PlanPosition(at)));
      if (n <= 0) {
        return SetError(TINYAI_ERR_CONTEXT_OVERFLOW, "position %d is beyond every planned max shape's context", at);
      }
      if (n > prompt_tokens_ - fed_) n = prompt_tokens_ - fed_;
      pass.shape.rows = n;
      pass.shape.context = llama_->PassSpan(at, n);
      pass.position = at;
      pass.output = fed_ + n == prompt_tokens_;  // the first token is sampled from the last pass's logits
      TINYAI_RETURN_IF_ERROR(sched_->BeginPass(pass, tokens_.data() + fed_));
      fed_ += n;
      return TINYAI_OK;
    }
    stats_.promptSeconds = SecondsSince(tp_);
    phase_ = kDecode;
    td_ = port::MonotonicNanos();
  }
  if (phase_ != kDecode) return TINYAI_OK;
  // The last pass's logits are ready: pick the next token.
  int32_t next = 0;
  float* logits = static_cast<float*>(sched_->OutputData(0));
  TINYAI_RETURN_IF_ERROR(CheckModelLogits(*llama_, logits, llama_->position() - 1));
  if (params_.sampler.repeatPenalty != 1.0f) {
    ApplyRepeatPenalty(logits, static_cast<size_t>(llama_->params().vocab_size), recent_.data(), recent_count_,
                       params_.sampler.repeatPenalty, recent_sorted_.data());
  }
  TINYAI_RETURN_IF_ERROR(llama_->sampler().Sample(logits, rule_, &rng_, &next));
  if (params_.sampler.repeatPenalty != 1.0f) {
    recent_[recent_next_] = next;
    recent_next_ = (recent_next_ + 1) % recent_.size();
    if (recent_count_ < recent_.size()) ++recent_count_;
  }
  if (stats_.generatedTokens == 0) {
    stats_.firstTokenSeconds = SecondsSince(t0_);
    LedgerMark(TINYAI_MEMORY_STAGE_FIRST_TOKEN, llama_->position());
  }
  if (next == llama_->tokenizer().bos_id()) {
    stats_.stopReason = TINYAI_STOP_BOS;
  } else if (llama_->tokenizer().EndsGeneration(next)) {
    stats_.stopReason = TINYAI_STOP_EOS;
  } else {
    const size_t n = llama_->tokenizer().Decode(token_, next, piece_.data(), piece_.size());
    if (EmitGenerated(StringView{piece_.data(), n < piece_.size() ? n : piece_.size()})) ++stats_.generatedTokens;
    unfed_ = next;  // fed below, unless the generation ends here
    unfed_at_ = llama_->position();
    if (stats_.stopReason == TINYAI_STOP_NONE) {
      if (params_.maxNewTokens > 0 && stats_.generatedTokens >= params_.maxNewTokens) {
        stats_.stopReason = TINYAI_STOP_MAX_NEW;
      } else if (pos_ >= steps_) {
        stats_.stopReason = steps_reason_;
      }
    }
  }
  if (stats_.stopReason != TINYAI_STOP_NONE) {
    // The text held back for the stop strings is the text's end.
    if (stats_.stopReason != TINYAI_STOP_CALLBACK && stats_.stopReason != TINYAI_STOP_OUTPUT_FULL &&
        stats_.stopReason != TINYAI_STOP_STRING) {
      FlushHeld();
    }
    stats_.decodeSeconds = SecondsSince(td_);
    phase_ = kDone;
    return TINYAI_OK;
  }
  token_ = next;
  unfed_ = -1;
  pass.shape.rows = 1;
  pass.shape.context = llama_->PassSpan(pos_, 1);
  pass.position = pos_;
  TINYAI_RETURN_IF_ERROR(sched_->BeginPass(pass, &token_));
  ++pos_;
  ++stats_.decodeTokens;
  return TINYAI_OK;
}

TinyAIStatus TextSession::Step(int32_t* layer, bool* finished) {
  *finished = false;
  if (phase_ == kIdle) return SetError(TINYAI_ERR_MISUSE, "no generation was started");
  if (!sched_->in_pass()) {
    TinyAIStatus s = NextPass();
    if (s != TINYAI_OK) {
      phase_ = kDone;
      return s;
    }
    if (phase_ == kDone) {
      *finished = true;
      return TINYAI_OK;
    }
  }
  TinyAIStatus s = sched_->StepNode(layer);
  if (s != TINYAI_OK) phase_ = kDone;
  return s;
}

TinyAIStatus TextSession::ReserveSampling() {
  MemScope scope(kMemText);
  const size_t window = params_.sampler.repeatPenalty != 1.0f ? static_cast<size_t>(params_.sampler.repeatLastN) : 0;
  if (window > 0 && recent_.size() != window) {
    TINYAI_RETURN_IF_ERROR(recent_.Allocate(window, "repetition window"));
    TINYAI_RETURN_IF_ERROR(recent_sorted_.Allocate(window, "repetition window (sorted)"));
  }
  size_t longest = 0;
  for (int32_t i = 0; i < params_.stopCount; ++i) {
    const size_t n = std::strlen(params_.stop[i]);
    longest = n > longest ? n : longest;
  }
  // What may be held (a stop string but its last byte) and a piece after it.
  const size_t held = longest > 0 ? longest - 1 + llama_->tokenizer().max_piece_length() : 0;
  if (held > held_.size()) TINYAI_RETURN_IF_ERROR(held_.Allocate(held, "text held for the stop strings"));
  return TINYAI_OK;
}

bool TextSession::EmitGenerated(StringView piece) {
  if (params_.stopCount == 0) return Emit(piece);
  std::memcpy(held_.data() + held_size_, piece.data, piece.size);
  held_size_ += piece.size;
  const char* text = held_.data();
  // The first complete stop string: the text before it is the last.
  size_t first = held_size_;
  for (int32_t i = 0; i < params_.stopCount; ++i) {
    const size_t n = std::strlen(params_.stop[i]);
    for (size_t at = 0; at + n <= held_size_ && at < first; ++at) {
      if (std::memcmp(text + at, params_.stop[i], n) == 0) {
        first = at;
        break;
      }
    }
  }
  if (first < held_size_) {
    if (first > 0) Emit(StringView{text, first});
    held_size_ = 0;
    if (stats_.stopReason == TINYAI_STOP_NONE) stats_.stopReason = TINYAI_STOP_STRING;
    return true;
  }
  // Hold back from the first byte where a stop string may begin.
  size_t keep = held_size_;
  for (size_t at = 0; at < held_size_ && keep == held_size_; ++at) {
    for (int32_t i = 0; i < params_.stopCount; ++i) {
      const size_t n = std::strlen(params_.stop[i]);
      if (held_size_ - at < n && std::memcmp(text + at, params_.stop[i], held_size_ - at) == 0) {
        keep = at;
        break;
      }
    }
  }
  bool accepted = true;
  if (keep > 0) accepted = Emit(StringView{text, keep});
  std::memmove(held_.data(), text + keep, held_size_ - keep);
  held_size_ -= keep;
  return accepted;
}

void TextSession::FlushHeld() {
  if (held_size_ == 0) return;
  const size_t n = held_size_;
  held_size_ = 0;
  Emit(StringView{held_.data(), n});
}

bool TextSession::Emit(StringView piece) {
  if (stop_when_full_ && sink_.WouldOverflow(piece.size)) {
    stats_.stopReason = TINYAI_STOP_OUTPUT_FULL;
    rejected_ = piece.size;
    return false;
  }
  if (!sink_.Put(piece.data, piece.size)) stats_.stopReason = TINYAI_STOP_CALLBACK;
  return true;
}

TinyAIStatus TextSession::Finish(TinyAIGenerateStats* stats) {
  stats_.totalSeconds = SecondsSince(t0_);
  if (stats) WriteVersioned(stats_, stats);
  phase_ = kIdle;
  if (stats_.stopReason == TINYAI_STOP_OUTPUT_FULL && sink_.length() == 0) {
    return SetError(TINYAI_ERR_BUFFER_TOO_SMALL,
                    "the output buffer of %zu bytes cannot hold the text's first piece: it needs %zu (the piece and "
                    "the terminating NUL); give a larger one (tinyaiSetSchedulerOutputCapacity)", sink_.capacity(),
                    rejected_ + 1);
  }
  if (sink_.truncated()) {
    return SetError(TINYAI_ERR_BUFFER_TOO_SMALL,
                    "generated %zu bytes of text: the output buffer needs %zu (NUL included) and holds %zu",
                    sink_.length(), sink_.length() + 1, sink_.capacity());
  }
  return stats_.stopReason == TINYAI_STOP_CALLBACK ? TINYAI_STOPPED : TINYAI_OK;
}

}  // namespace tinyai
