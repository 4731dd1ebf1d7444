// Text generation with llama2.c's semantics (see tinyaiLLMGenerate in
// <tinyai/llm.h> and ../shared/golden/README.md), run through the forward
// scheduler one layer at a time: tinyaiLLMGenerate() runs a session to the end,
// tinyaiExecuteNextLayer() one layer per call.
#ifndef TINYAI_MODEL_GENERATE_H_
#define TINYAI_MODEL_GENERATE_H_

#include <cstddef>

#include "common/array.h"
#include "model/llama.h"
#include "text/sampler.h"
#include "text/tokenizer.h"
#include "scheduler/scheduler.h"
#include "tinyai/llm.h"

namespace tinyai {

// The defaults of tinyaiCreateDefaultSamplerConfig and
// tinyaiCreateDefaultGenerateParams.
TinyAISamplerConfig DefaultSamplerConfig();
TinyAIGenerateParams DefaultGenerateParams();
// The sampler's rule of a checked config.
SampleRule RuleOf(const TinyAISamplerConfig& c);

// Where generated text goes: the caller's callback and a bounded buffer.
class TextSink {
 public:
  TextSink() = default;
  TextSink(TinyAITextCallback cb, void* user, char* out, size_t capacity)
      : cb_(cb), user_(user), out_(out), capacity_(capacity) {
    if (out_ && capacity_ > 0) out_[0] = '\0';
  }
  // Returns false when the callback asked to stop.
  bool Put(const char* piece, size_t len);
  size_t length() const { return length_; }
  size_t capacity() const { return capacity_; }
  bool truncated() const { return out_ && length_ + 1 > capacity_; }
  // True when len more bytes would not fit (NUL included).
  bool WouldOverflow(size_t len) const { return out_ && length_ + len + 1 > capacity_; }

 private:
  TinyAITextCallback cb_ = nullptr;
  void* user_ = nullptr;
  char* out_ = nullptr;
  size_t capacity_ = 0;
  size_t length_ = 0;
};

// Evaluates count tokens at the model's position, in passes of sched (which
// runs llama) as large as its plans allow. All or nothing: on failure the
// position is unchanged.
TinyAIStatus EvalTokens(ForwardScheduler* sched, LlamaModel* llama, const int32_t* tokens, int32_t count);

// One generation: BOS (when the model adds it: TextTokenizer::add_bos), the
// prompt, then sampled tokens.
class TextSession {
 public:
  // A session of llama, run in passes of sched.
  TextSession(ForwardScheduler* sched, LlamaModel* llama) : sched_(sched), llama_(llama) {}

  // The prompt's bound (tinyaiLLMGenerate in <tinyai/llm.h>): at most
  // PromptBytes() bytes, the context's positions (contextLength) at up to
  // kPromptBytesPerPosition bytes each, or at up to the vocabulary's longest
  // piece when that is shorter (no longer prompt could fit then). A longer
  // one is refused with TINYAI_ERR_CONTEXT_OVERFLOW before anything is
  // encoded; one within it is encoded in memory Reserve() took when the
  // session was prepared. The tools read a prompt up to the context's
  // positions at tinyai_tools::kTextBytesPerToken (the same 64) bytes each,
  // and leave the rest of the bound to this.
  static constexpr uint32_t kPromptBytesPerPosition = 64;
  static uint32_t PromptBytesPerPosition(const LlamaModel& llama);
  static uint64_t PromptBytes(const LlamaModel& llama);
  // What Reserve() holds for llama: room for the context's tokens and the
  // tokenizer's scratch for a prompt of PromptBytes(llama) bytes (counted in
  // the model's tables: LlamaModel::Memory).
  static uint64_t ReserveBytes(const LlamaModel& llama);
  // Reserves that memory, so that a generation allocates nothing.
  TinyAIStatus Reserve();
  // Encodes text (tinyaiLLMTokenize) in the reserved scratch when it is
  // within the prompt's bound, so that allocates nothing either; a longer
  // text in a temporary one. Start() is done with the scratch before it
  // prints anything, so a text callback may tokenize (the session's tokens
  // are untouched).
  TinyAIStatus Tokenize(const char* text, bool bos, bool eos, int32_t* out, size_t capacity, size_t* count);

  // Encodes the prompt, resets the model and prints the prompt's pieces;
  // nothing is evaluated yet. With stop_when_full, generation ends before a
  // piece that would not fit whole in the sink's buffer (the scheduler's
  // loop, whose output buffer has no length argument); otherwise text that
  // does not fit is counted and reported by Finish().
  TinyAIStatus Start(const char* prompt, const TinyAIGenerateParams& params, const TextSink& sink,
                     bool stop_when_full = false);
  // Runs the next layer of the next pass (*layer gets its index), or, when
  // the text is complete, runs nothing and sets *finished.
  TinyAIStatus Step(int32_t* layer, bool* finished);
  // After the last Step: stats (stats->structSize bytes of them), and
  // TINYAI_ERR_RESOURCE_EXHAUSTED when the text did not fit the output
  // buffer, TINYAI_STOPPED when the callback stopped it.
  TinyAIStatus Finish(TinyAIGenerateStats* stats);
  bool active() const { return phase_ != kIdle; }
  void Cancel();
  const TextSink& sink() const { return sink_; }

 private:
  enum Phase { kIdle, kPrompt, kDecode, kDone };
  // Begins the next pass, or moves to kDone.
  TinyAIStatus NextPass();
  // Puts a piece in the sink and records a stop (the callback's, or a full
  // buffer's in stop_when_full mode, where the piece is dropped: false).
  bool Emit(StringView piece);
  // Emits the text of token after prev.
  bool EmitToken(int32_t prev, int32_t token);
  // A generated piece, through the stop strings: text that may begin one
  // is held back; where one is complete, the text before it is emitted and
  // the generation stops (TINYAI_STOP_STRING).
  bool EmitGenerated(StringView piece);
  // The sampler's state for a prompt of prompt_tokens_ starting at start.
  void BeginSampling(const TinyAIGenerateParams& params, int32_t start);
  // Emits what is held back (the generation ended otherwise).
  void FlushHeld();
  // The memory the sampling options of params_ need: the repetition
  // window and the held-back text.
  TinyAIStatus ReserveSampling();

  ForwardScheduler* sched_;
  LlamaModel* llama_;
  TextSink sink_;
  TinyAIGenerateParams params_{};
  Phase phase_ = kIdle;
  bool stop_when_full_ = false;
  size_t rejected_ = 0;  // bytes of the piece that did not fit (stop_when_full)
  Array<int32_t> tokens_;  // BOS and the prompt: the context length
  TextScratch scratch_;
  Array<char> piece_;  // one decoded piece: the vocabulary's longest
  int32_t prompt_tokens_ = 0;
  int32_t fed_ = 0;     // prompt tokens whose pass has begun
  int32_t steps_ = 0;
  TinyAIStopReason steps_reason_ = TINYAI_STOP_STEPS;  // what reaching steps_ means
  int32_t pos_ = 0;     // positions used
  int32_t token_ = 0;   // the last token, fed to the next pass
  // The text's last token when it was printed but never evaluated (the
  // generation ended after sampling it): a continuation evaluates it first.
  int32_t unfed_ = -1;
  int32_t unfed_at_ = -1;  // the cache's position then
  uint64_t rng_ = 0;
  SampleRule rule_;
  Array<int32_t> recent_;        // ring of the last repeatLastN tokens (a penalty only)
  Array<int32_t> recent_sorted_; // ApplyRepeatPenalty's scratch
  size_t recent_count_ = 0, recent_next_ = 0;
  Array<char> held_;             // generated text that may begin a stop string
  size_t held_size_ = 0;
  TinyAIGenerateStats stats_{};
  uint64_t t0_ = 0, tp_ = 0, td_ = 0;
};

}  // namespace tinyai

#endif  // TINYAI_MODEL_GENERATE_H_
