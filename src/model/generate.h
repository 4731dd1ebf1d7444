// Text generation with llama2.c's semantics (see tinyaiGenerate in
// <tinyai/llm.h> and ../shared/golden/README.md).
#ifndef TINYAI_MODEL_GENERATE_H_
#define TINYAI_MODEL_GENERATE_H_

#include <cstddef>

#include "model/llama.h"
#include "text/sampler.h"
#include "tinyai/llm.h"

namespace tinyai {

// Where generated text goes: the caller's callback and a bounded buffer.
class TextSink {
 public:
  TextSink(TinyAITextCallback cb, void* user, char* out, size_t capacity)
      : cb_(cb), user_(user), out_(out), capacity_(capacity) {
    if (out_ && capacity_ > 0) out_[0] = '\0';
  }
  // Returns false when the callback asked to stop.
  bool Put(const char* piece, size_t len);
  size_t length() const { return length_; }
  size_t capacity() const { return capacity_; }
  bool truncated() const { return out_ && length_ + 1 > capacity_; }

 private:
  TinyAITextCallback cb_;
  void* user_;
  char* out_;
  size_t capacity_;
  size_t length_ = 0;
};

TinyAIStatus Generate(LlamaModel* model, Sampler* sampler, const char* prompt, const TinyAIGenerateParams& params,
                      TextSink* sink, TinyAIGenerateStats* stats);

}  // namespace tinyai

#endif  // TINYAI_MODEL_GENERATE_H_
